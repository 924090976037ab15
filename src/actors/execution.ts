import type { PriceSource } from '../prices/price-source.ts';
import type { FerryConfig } from '../config.ts';
import { buildExecutionContext } from '../executors/context.ts';
import { boundText, RESULT_BOUNDS, type ExecutionContext, type ExecutionResult, type PreparedAction } from '../executors/protocol.ts';
import type { ExecutorRegistry, SignerRegistry } from '../executors/registry.ts';
import type { Logger } from '../log.ts';
import { infraCauseOf } from '../executors/infra.ts';
import type { InfraCause } from '../persistence/infra-errors.ts';
import { isOutcomeState, type ExecutorOutcome, type OutcomeState } from '../machines/outcome.ts';
import { artifactsOfNodes, type NewArtifact } from '../persistence/artifacts.ts';
import type { ArtifactCache } from './artifact-cache.ts';
import type { Pool, Queryable } from '../persistence/db.ts';
import { nodesOfMovement, type NodeRow, type MovementRow } from '../persistence/movements.ts';
import type { GroupWriter } from './group-writer.ts';
import type { TransitionDeps } from '../durable/transition.ts';

/** What the movement actors' dispatch and observation steps and recovery share. */
export interface WorkerDeps {
  pool: Pool;
  config: FerryConfig;
  executors: ExecutorRegistry;
  signers: SignerRegistry;
  transitions: TransitionDeps;
  log: Logger;
  /** The actor runtime's group writer: writes over held rows go through it, merged under load. */
  groupWriter?: GroupWriter;
  /** Where the treasury policy reads prices at dispatch; unset: the configuration's price_feeds (src/prices/). */
  prices?: PriceSource | null;
}

export const nowIso = () => new Date().toISOString();

/**
 * Builds the ExecutionContext of a claimed node from its request, its sibling nodes and the
 * artifacts of its completed direct predecessors. `attemptNo` is the attempt the call belongs to.
 */
export async function contextFor(
  db: Queryable,
  request: MovementRow,
  node: NodeRow,
  attemptNo: number,
): Promise<ExecutionContext> {
  const nodes = await nodesOfMovement(db, request.id);
  return (await contextsFor(db, [{ request, node, nodes, attemptNo }]))[0];
}

export interface ContextInput {
  request: MovementRow;
  node: NodeRow;
  /** Every node of the request, as the claim's commit left them. */
  nodes: NodeRow[];
  attemptNo: number;
}

/**
 * contextFor for a batch of claimed nodes whose siblings are known: one artifacts query for all, or
 * none when a movement actor's cache (artifact-cache.ts) has the artifacts of the rows it holds.
 */
export async function contextsFor(db: Queryable, inputs: ContextInput[], cache?: ArtifactCache, unwritten: readonly NewArtifact[] = []): Promise<ExecutionContext[]> {
  if (cache) {
    const movements = new Map(inputs.map((i) => [i.request.id, { movement: i.request, nodes: i.nodes }]));
    const artifacts = [...(await cache.of(db, [...movements.values()])), ...unwritten];
    return inputs.map((input) => buildContext(input, artifacts));
  }
  const wanted = new Set<string>();
  for (const { node, nodes } of inputs) {
    wanted.add(node.id);
    for (const n of nodes) if (node.predecessor_keys.includes(n.node_key) && n.node_state === 'COMPLETED') wanted.add(n.id);
  }
  const artifacts = [...(await artifactsOfNodes(db, [...wanted])), ...unwritten];
  return inputs.map((input) => buildContext(input, artifacts));
}

function buildContext({ request, node, nodes, attemptNo }: ContextInput, artifacts: readonly NewArtifact[]): ExecutionContext {
  const completedPredecessors = new Set(
    nodes.filter((n) => node.predecessor_keys.includes(n.node_key) && n.node_state === 'COMPLETED').map((n) => n.id),
  );
  const own = artifacts.filter((a) => a.request_node_id === node.id && a.attempt_no === attemptNo);
  const prior = artifacts.filter((a) => completedPredecessors.has(a.request_node_id));
  const plan = request.compiled_plan as { risk_controls?: Record<string, unknown> };
  return buildExecutionContext({
    request: {
      id: request.id,
      compiled_plan_hash: request.compiled_plan_hash,
      template_key: request.template_key,
      template_version: request.template_version,
      intent: request.intent,
      input_params: request.input_params,
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
  } as Parameters<typeof buildExecutionContext>[0]);
}

/**
 * The machine's view of an executor result. A next_state the phase cannot take becomes
 * `fallback` with INVALID_EXECUTOR_RESULT: after a submit that is UNKNOWN, because money may
 * have moved and only the provider can tell.
 */
export function outcomeOf(result: ExecutionResult, allowed: readonly OutcomeState[], fallback: OutcomeState): ExecutorOutcome {
  const next = result.next_state;
  if (isOutcomeState(next) && allowed.includes(next)) {
    return {
      nextState: next,
      providerState: result.provider_state ?? null,
      providerRefs: result.provider_refs ?? {},
      providerRefId: providerRefIdOf(result),
      errorCode: result.error_code ?? null,
      errorDetail: result.error_detail ?? null,
      ...(result.manual_intervention_required ? { manualInterventionRequired: true } : {}),
    };
  }
  return {
    nextState: fallback,
    providerState: result.provider_state ?? null,
    providerRefs: result.provider_refs ?? {},
    providerRefId: providerRefIdOf(result),
    errorCode: 'INVALID_EXECUTOR_RESULT',
    errorDetail: `executor returned next_state ${JSON.stringify(next)}, not one of ${allowed.join(', ')}`,
  };
}

export function errorOutcome(state: OutcomeState, code: string, detail: string): ExecutorOutcome {
  return { nextState: state, errorCode: boundText(code, RESULT_BOUNDS.codeChars), errorDetail: boundText(detail, RESULT_BOUNDS.detailChars) };
}

function providerRefIdOf(result: ExecutionResult): string | null {
  const refs = result.provider_refs ?? {};
  const first = Object.values(refs).find((v) => typeof v === 'string');
  return (first as string | undefined) ?? null;
}

/** Proof and generated artifacts of a result, as rows for the artifacts table. */
export function resultArtifacts(node: NodeRow, attemptNo: number, result: ExecutionResult): NewArtifact[] {
  const out: NewArtifact[] = [];
  if (result.proof && Object.keys(result.proof).length > 0) {
    out.push({
      request_id: node.request_id,
      request_node_id: node.id,
      attempt_no: attemptNo,
      artifact_type: 'proof',
      artifact_digest: null,
      content_format: 'json',
      content_inline: JSON.stringify(result.proof),
      content_uri: null,
      artifact_metadata: {},
    });
  }
  for (const g of result.generated_artifacts ?? []) {
    out.push({
      request_id: node.request_id,
      request_node_id: node.id,
      attempt_no: attemptNo,
      artifact_type: g.artifact_type,
      artifact_digest: g.artifact_digest ?? null,
      content_format: g.content_format,
      content_inline: g.content_inline ?? null,
      content_uri: g.content_uri ?? null,
      artifact_metadata: g.artifact_metadata ?? {},
    });
  }
  return out;
}

/** An error's message as a node's error_detail: bounded as an executor's own error_detail is (RESULT_BOUNDS). */
export function errorText(err: unknown): string {
  return boundText(err instanceof Error ? err.message : String(err), RESULT_BOUNDS.detailChars);
}

export interface ProviderAnswer {
  outcome: ExecutorOutcome;
  artifacts: NewArtifact[];
  retryAfter: number | null;
  /** Set when the call failed because Ferry's own database did: the caller defers, never records an outcome. */
  infra?: InfraCause;
  /** A new version of the submitted action that observe() proposes (fee bump), to sign and send. */
  replacement?: PreparedAction | null;
}

/**
 * Asks a node's executor about its current attempt (observe or recover for a claimed node; inspect,
 * read only, for reconciliation), with the context
 * built for it (or the error building it threw). A result whose next_state the call cannot produce
 * becomes UNKNOWN; Ferry's own database trouble sets `infra`; any other throw becomes whatever
 * `onError` decides.
 */
export async function askProvider(
  deps: WorkerDeps,
  node: NodeRow,
  ctx: ExecutionContext | { error: unknown },
  call: 'observe' | 'recover' | 'inspect',
  allowed: readonly OutcomeState[],
  onError: (err: unknown) => ExecutorOutcome,
): Promise<ProviderAnswer> {
  try {
    if ('error' in ctx) throw ctx.error;
    const executor = deps.executors.get(node.executor_binding as never);
    const result = await executor[call](ctx);
    return {
      outcome: outcomeOf(result, allowed, 'UNKNOWN'),
      artifacts: resultArtifacts(node, node.attempt_no, result),
      retryAfter: result.retry_after_seconds ?? null,
      replacement: call === 'observe' ? result.prepared_action : null,
    };
  } catch (err) {
    const infra = infraCauseOf(err);
    return { outcome: onError(err), artifacts: [], retryAfter: null, ...(infra ? { infra } : {}) };
  }
}

/** Contexts for claimed nodes, one artifacts query for all; a failed read is each node's error. */
export async function claimedContexts(
  db: Queryable,
  claims: { request: MovementRow; node: NodeRow; nodes: NodeRow[]; unwritten?: { artifacts?: NewArtifact[] } }[],
  attemptOf: (node: NodeRow) => number,
  cache?: ArtifactCache,
): Promise<(ExecutionContext | { error: unknown })[]> {
  // Artifacts a claim's commit will store with it (a predecessor's result written with the claim).
  const unwritten = claims.flatMap((c) => c.unwritten?.artifacts ?? []);
  try {
    return await contextsFor(db, claims.map((c) => ({ request: c.request, node: c.node, nodes: c.nodes, attemptNo: attemptOf(c.node) })), cache, unwritten);
  } catch {
    // One bad node must not sink the batch: build them one by one to find whose context fails.
    return Promise.all(
      claims.map((c) =>
        contextsFor(db, [{ request: c.request, node: c.node, nodes: c.nodes, attemptNo: attemptOf(c.node) }], undefined, c.unwritten?.artifacts ?? []).then(
          (x) => x[0],
          (error: unknown) => ({ error }),
        ),
      ),
    );
  }
}

/**
 * The logger for lines about one node: every such line says which movement, node and attempt it is
 * about and which worker wrote it, so one movement's story can be filtered out of any log.
 */
export function nodeLog(
  deps: Pick<WorkerDeps, 'log'>,
  worker: 'dispatcher' | 'observer' | 'recovery',
  node: Pick<NodeRow, 'id' | 'request_id' | 'node_key' | 'attempt_no'>,
  attempt = node.attempt_no,
): Logger {
  return deps.log.child({ movement_id: node.request_id, node_id: node.id, node_key: node.node_key, worker, attempt });
}
