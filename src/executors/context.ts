import { attemptKey } from '../ids.ts';
import type { NewArtifact } from '../persistence/artifacts.ts';
import type { MovementRow, NodeRow } from '../persistence/movements.ts';
import { ConfigRefUnresolvedError, ExecutorNotRegisteredError, SignerNotRegisteredError } from './errors.ts';
import { ExpectedEffectSchema, PROTOCOL_VERSION, type ExecutionContext, type GeneratedArtifact, type ResolvedBindings } from './protocol.ts';
import { bindingExtras, bindingKey } from './registry.ts';

/** Plain row data an ExecutionContext is built from; the caller loads it, this module does no I/O. */
export interface ExecutionContextInput {
  movement: {
    id: string;
    compiled_plan_hash: string;
    template_key: string;
    template_version: number;
    intent: Record<string, unknown>;
    input_params: Record<string, unknown>;
  };
  node: {
    id: string;
    node_key: string;
    node_kind: string;
    action_type: string;
    config: Record<string, unknown>;
    timeout_policy: Record<string, unknown>;
    executor_binding: unknown;
    signer_binding: unknown;
    predecessor_keys: readonly string[];
    /** Pinned at creation (request_nodes.expected_effect); null or absent: none pinned. */
    expected_effect?: { effect: unknown } | { unavailable: string } | null;
  };
  /**
   * The attempt the context is for, 1-based. Dispatch starts a new one (the row's attempt_no + 1);
   * observe and recover work on the attempt already committed (the row's attempt_no).
   */
  attemptNo: number;
  /** Every node of the movement (the current one included or not). */
  nodes: ReadonlyArray<{ node_key: string; node_state: string; provider_refs: Record<string, unknown> | null }>;
  /** Artifacts of the COMPLETED direct predecessors. */
  priorArtifacts: ReadonlyArray<{ artifact_type: string; artifact_digest: string | null }>;
  riskControls: Record<string, unknown>;
  /** Overrides the derived per-attempt key (e.g. the key stored on the node row). */
  attemptKey?: string;
  /** The node's own artifacts of this attempt, with content. */
  attemptArtifacts?: ReadonlyArray<GeneratedArtifact>;
}

const REF_PREFIX = '$ref:';

/** Ferry's stable per-attempt idempotency key (src/ids.ts), under the name executors have used. */

/**
 * Builds the context an executor receives, as the reference runtime does:
 * - provider_context: flat merge of the provider_refs of COMPLETED direct predecessors, in the
 *   order of predecessor_keys (a later predecessor's field wins);
 * - node_config: the config with each top-level `"$ref:node_key.field"` string replaced by that
 *   field of the named node's provider_refs; only COMPLETED nodes count;
 * - resolved_bindings: `{ executor: {executor_key, ...extras}, signer: {signer_key, ...} | null }`.
 * Pure.
 * @throws ConfigRefUnresolvedError (CONFIG_REF_UNRESOLVED) when a `$ref` names no completed node
 *         or no non-null field; ExecutorNotRegisteredError / SignerNotRegisteredError for a
 *         binding without its key.
 */
export function buildExecutionContext(input: ExecutionContextInput): ExecutionContext {
  const { movement, node, attemptNo } = input;
  if (!Number.isInteger(attemptNo) || attemptNo < 1) throw new RangeError(`attemptNo must be a positive integer, got ${attemptNo}`);

  const completedRefs = new Map<string, Record<string, unknown>>();
  for (const n of input.nodes) {
    if (n.node_state === 'COMPLETED') completedRefs.set(n.node_key, n.provider_refs ?? {});
  }

  const provider_context: Record<string, unknown> = {};
  for (const key of node.predecessor_keys) {
    const refs = completedRefs.get(key);
    if (refs) Object.assign(provider_context, refs);
  }

  return {
    protocol_version: PROTOCOL_VERSION,
    request_id: movement.id,
    request_node_id: node.id,
    compiled_plan_hash: movement.compiled_plan_hash,
    template_key: movement.template_key,
    template_version: movement.template_version,
    node_key: node.node_key,
    node_kind: node.node_kind,
    action_type: node.action_type,
    attempt_no: attemptNo,
    intent: { ...movement.intent },
    input_params: { ...movement.input_params },
    resolved_bindings: resolveBindings(node.executor_binding, node.signer_binding),
    risk_controls: { ...input.riskControls },
    prior_artifacts: input.priorArtifacts.map((a) => ({ artifact_type: a.artifact_type, artifact_digest: a.artifact_digest })),
    node_config: resolveConfigRefs(node.config ?? {}, completedRefs, input.nodes.map((n) => n.node_key)),
    provider_context,
    timeout_policy: { ...(node.timeout_policy ?? {}) },
    idempotency_key: input.attemptKey ?? attemptKey(node.id, attemptNo),
    attempt_artifacts: (input.attemptArtifacts ?? []).map((a) => ({ ...a })),
    ...pinnedEffect(node.expected_effect),
  };
}

/** The context's view of a pinned effect: the effect, or why there is none; nothing when none was pinned. */
function pinnedEffect(pinned: { effect: unknown } | { unavailable: string } | null | undefined): Pick<ExecutionContext, 'expected_effect' | 'expected_effect_unavailable'> {
  if (!pinned) return {};
  if ('effect' in pinned) {
    const parsed = ExpectedEffectSchema.safeParse(pinned.effect);
    // A stored effect that no longer parses is no effect: the signer refuses (default deny).
    return parsed.success ? { expected_effect: parsed.data, expected_effect_unavailable: null } : { expected_effect: null, expected_effect_unavailable: 'the pinned expected effect is not a valid expected effect' };
  }
  return { expected_effect: null, expected_effect_unavailable: String(pinned.unavailable) };
}

/** The executor and signer bindings in their object form, extras kept. */
export function resolveBindings(executorBinding: unknown, signerBinding: unknown): ResolvedBindings {
  const executorKey = bindingKey(executorBinding, 'executor_key');
  if (executorKey === null) throw new ExecutorNotRegisteredError(null, 'executor binding names no executor_key');
  let signer: ResolvedBindings['signer'] = null;
  if (signerBinding !== null && signerBinding !== undefined) {
    const signerKey = bindingKey(signerBinding, 'signer_key');
    if (signerKey === null) throw new SignerNotRegisteredError(null, 'signer binding names no signer_key');
    signer = { ...bindingExtras(signerBinding), signer_key: signerKey };
  }
  return { executor: { ...bindingExtras(executorBinding), executor_key: executorKey }, signer };
}

function resolveConfigRefs(
  config: Record<string, unknown>,
  completedRefs: ReadonlyMap<string, Record<string, unknown>>,
  nodeKeys: readonly string[],
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(config)) {
    out[field] = typeof value === 'string' && value.startsWith(REF_PREFIX) ? resolveRef(value, completedRefs, nodeKeys) : value;
  }
  return out;
}

function resolveRef(ref: string, completedRefs: ReadonlyMap<string, Record<string, unknown>>, nodeKeys: readonly string[]): unknown {
  const target = ref.slice(REF_PREFIX.length);
  // A node key may itself contain dots: the longest known key followed by a dot names the node.
  const known = nodeKeys.filter((k) => target.startsWith(k + '.')).sort((a, b) => b.length - a.length)[0];
  const dot = known !== undefined ? known.length : target.indexOf('.');
  if (dot <= 0 || dot >= target.length - 1) throw new ConfigRefUnresolvedError(ref, 'expected $ref:node_key.field');
  const nodeKey = target.slice(0, dot);
  const field = target.slice(dot + 1);
  const refs = completedRefs.get(nodeKey);
  if (!refs) throw new ConfigRefUnresolvedError(ref, `node ${nodeKey} is not COMPLETED`);
  const value = Object.hasOwn(refs, field) ? refs[field] : undefined;
  // A reference that lands on nothing must not quietly become an empty address or amount.
  if (value === undefined || value === null) throw new ConfigRefUnresolvedError(ref, `node ${nodeKey} reported no ${field}`);
  return value;
}

/** A claimed node with its movement and every node of the movement: what its context is built from. */
export interface ContextInput {
  movement: MovementRow;
  node: NodeRow;
  /** Every node of the movement, as the claim's commit left them. */
  nodes: NodeRow[];
  attemptNo: number;
}

/** The nodes whose artifacts a node's context reads: itself and its completed direct predecessors. */
export function contextArtifactNodeIds({ node, nodes }: Pick<ContextInput, 'node' | 'nodes'>): string[] {
  return [node.id, ...nodes.filter((n) => node.predecessor_keys.includes(n.node_key) && n.node_state === 'COMPLETED').map((n) => n.id)];
}

/**
 * The ExecutionContext of a node from the rows: its movement, its sibling nodes and `artifacts`,
 * which hold at least those of contextArtifactNodeIds (its own attempt's, and its completed direct
 * predecessors'). `attemptNo` is the attempt the call belongs to.
 */
export function contextOfRows({ movement, node, nodes, attemptNo }: ContextInput, artifacts: readonly NewArtifact[]): ExecutionContext {
  const completedPredecessors = new Set(
    nodes.filter((n) => node.predecessor_keys.includes(n.node_key) && n.node_state === 'COMPLETED').map((n) => n.id),
  );
  const own = artifacts.filter((a) => a.request_node_id === node.id && a.attempt_no === attemptNo);
  const prior = artifacts.filter((a) => completedPredecessors.has(a.request_node_id));
  const plan = movement.compiled_plan as { risk_controls?: Record<string, unknown> };
  return buildExecutionContext({
    movement: {
      id: movement.id,
      compiled_plan_hash: movement.compiled_plan_hash,
      template_key: movement.template_key,
      template_version: movement.template_version,
      intent: movement.intent,
      input_params: movement.input_params,
    },
    node: {
      id: node.id,
      node_key: node.node_key,
      node_kind: node.node_kind,
      action_type: node.action_type,
      config: node.config,
      timeout_policy: node.timeout_policy,
      executor_binding: node.executor_binding,
      signer_binding: node.signer_binding,
      predecessor_keys: node.predecessor_keys,
      expected_effect: node.expected_effect ?? null,
    },
    attemptNo,
    nodes: nodes.map((n) => ({ node_key: n.node_key, node_state: n.node_state, provider_refs: n.provider_refs })),
    priorArtifacts: prior.map((a) => ({ artifact_type: a.artifact_type, artifact_digest: a.artifact_digest })),
    attemptArtifacts: own.map((a) => ({
      artifact_type: a.artifact_type,
      content_format: a.content_format,
      content_inline: a.content_inline,
      content_uri: a.content_uri,
      artifact_metadata: a.artifact_metadata,
      artifact_digest: a.artifact_digest,
    })),
    riskControls: plan.risk_controls ?? {},
  } as ExecutionContextInput);
}
