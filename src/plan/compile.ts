import { InvalidTemplateError, ValidationError } from '../errors.ts';
import { compareCodeUnits, sha256Tagged } from './canonical-json.ts';
import { roots } from './graph.ts';
import { checkAssetBindings, checkIntentNumbers, validateIntent, type IsTokenSymbol, type TokenSymbolOf } from './intent-check.ts';
import { intentSchemaSchema, type IntentSchema } from './intent-schema.ts';
import { isBoundedJson, MAX_JSON_DEPTH } from './json.ts';
import type { ExecutorBinding, JsonObject, SignerBinding, TemplateDefinition } from './template-schema.ts';
import type { CompiledNode, CompiledPlan, PlanNodeFields, TemplateVersionRecord } from './types.ts';
import { validateTemplate, validateTemplateStructure, type BindingCatalog } from './validate.ts';

export { executorKeyOf, signerKeyOf } from './bindings.ts';
export type { CompiledNode, CompiledPlan, PlanNodeFields, TemplateVersionNode, TemplateVersionRecord } from './types.ts';

/** A node as a template definition or a saved version gives it. */
type NodeInput = TemplateDefinition['nodes'][number] | PlanNodeFields;

/** A node's fields with their defaults: no signer binding (null), no config or timeout policy ({}), not retryable. */
export function planNodeFields(n: NodeInput): PlanNodeFields {
  return {
    node_key: n.node_key,
    node_kind: n.node_kind,
    action_type: n.action_type,
    // As given: a definition may leave it out where validation does not need one (hashed as absent).
    executor_binding: n.executor_binding as ExecutorBinding,
    signer_binding: (n.signer_binding ?? null) as SignerBinding | null,
    config: (n.config ?? {}) as JsonObject,
    timeout_policy: (n.timeout_policy ?? {}) as JsonObject,
    retryable: n.retryable ?? false,
  };
}

/**
 * The identity of a template's behaviour: nodes (sorted by key), edges (sorted), risk controls and,
 * when the template declares one, its intent schema (in canonical form: defaults filled in, so
 * `{type: evm_address}` and the same with `required: true` are one schema). A template without a
 * schema hashes exactly as before schemas existed, so its versions keep their hashes.
 * Left out on purpose: description (wording is not behaviour) and timeout_policy (operational
 * timing that operators tune without it counting as a new plan; it stays outside both hashes).
 */
export function graphHash(def: TemplateDefinition): string {
  return graphHashOf(def.nodes, def.edges, def.risk_controls, def.intent_schema);
}

/** The canonical form of an intent schema (what is hashed), or null for none; throws on a bad one. */
export function canonicalIntentSchema(schema: unknown): IntentSchema | null {
  if (schema === undefined || schema === null) return null;
  const parsed = intentSchemaSchema.safeParse(schema);
  if (!parsed.success) {
    throw new InvalidTemplateError('INTENT_SCHEMA_INVALID', `intent_schema: ${parsed.error.issues[0]!.message}`, { node_keys: [] });
  }
  return parsed.data;
}

function graphHashOf(
  nodes: readonly NodeInput[],
  edges: ReadonlyArray<{ from: string; to: string }>,
  riskControls: unknown,
  intentSchema?: unknown,
): string {
  const schema = canonicalIntentSchema(intentSchema);
  return sha256Tagged({
    ...(schema ? { intent_schema: schema } : {}),
    nodes: [...nodes]
      .sort((a, b) => compareCodeUnits(a.node_key, b.node_key))
      .map((n) => {
        const { timeout_policy: _, ...hashed } = planNodeFields(n);
        return hashed;
      }),
    edges: sortEdges(edges),
    risk_controls: riskControls ?? {},
  });
}

export function sortEdges(edges: ReadonlyArray<{ from: string; to: string }>): Array<{ from: string; to: string }> {
  return edges
    .map(({ from, to }) => ({ from, to }))
    .sort((a, b) => compareCodeUnits(a.from, b.from) || compareCodeUnits(a.to, b.to));
}

/** What compilation may know beyond the plan: how to name a token address a node fixes (evm.tokens). */
export interface CompileOptions {
  tokenSymbolOf?: TokenSymbolOf;
  isTokenSymbol?: IsTokenSymbol;
}

/**
 * Compiles a saved template version for one request (intent and input params must be plain JSON
 * objects; anything else is refused as VALIDATION_FAILED). Deterministic: the same version, intent and
 * input params give the same plan and the same compiled_plan_hash in any process.
 *
 * The intent is checked first (intent-check.ts): against the version's intent schema when it has
 * one, against every token a node fixes, and for numbers that were not kept exactly. A refusal is
 * INTENT_INVALID (or INEXACT_NUMBER) naming the field and the rule.
 *
 * The version is re-validated (a stored plan edited behind Ferry's back must not run) and, when a
 * catalog is given, its bindings are checked against what is registered now, since an executor may
 * have been removed after the template was saved.
 */
export function compilePlan(
  version: TemplateVersionRecord,
  intent: Readonly<Record<string, unknown>>,
  inputParams: Readonly<Record<string, unknown>> = {},
  known?: BindingCatalog,
  options: CompileOptions = {},
): CompiledPlan {
  requireJsonObject('intent', intent);
  requireJsonObject('input_params', inputParams);

  const { graph, order } = known ? validateTemplate(version, known) : validateTemplateStructure(version);
  if (graphHashOf(version.nodes, version.edges, version.risk_controls, version.intent_schema) !== version.graph_hash) {
    throw new InvalidTemplateError(
      'GRAPH_HASH_DRIFT',
      `template "${version.template_key}" version ${version.version} no longer matches its recorded graph hash; its stored nodes, edges or intent schema were changed after it was saved`,
      { template_key: version.template_key, template_version: version.version },
    );
  }

  const schema = canonicalIntentSchema(version.intent_schema);
  if (schema) validateIntent(schema, intent);
  checkIntentNumbers(intent, inputParams);
  checkAssetBindings(version.nodes, intent, options.tokenSymbolOf, options.isTokenSymbol);

  const byKey = new Map(version.nodes.map((n) => [n.node_key, n]));
  const nodes: CompiledNode[] = order.map((key) => {
    const n = byKey.get(key)!;
    return {
      plan_node_id: n.plan_node_id,
      ...planNodeFields(n),
      predecessors: [...graph.predecessors.get(key)!],
      successors: [...graph.successors.get(key)!],
    };
  });

  const plan: Omit<CompiledPlan, 'compiled_plan_hash'> = {
    template_key: version.template_key,
    template_version: version.version,
    template_version_id: version.id,
    graph_hash: version.graph_hash,
    risk_controls: version.risk_controls ?? {},
    nodes,
    initial_frontier: roots(graph),
  };
  return { ...plan, compiled_plan_hash: compiledPlanHash(plan, intent, inputParams) };
}

/**
 * The object compiled_plan_hash is taken over (served as `hashed_plan` beside the plan, so an
 * approver's tools can recompute the hash): template identity, graph hash, the request's intent and
 * params, and every node's executable fields as an array `[node_key, node_kind, action_type,
 * executor_binding, signer_binding, config, predecessors]`, in plan order (timeout_policy excluded,
 * as in the graph hash). docs/templates.md, "The plan hash", documents it.
 */
export interface HashedPlan {
  template_key: string;
  template_version: number;
  graph_hash: string;
  intent: Readonly<Record<string, unknown>>;
  input_params: Readonly<Record<string, unknown>>;
  nodes: unknown[][];
}

export function hashedPlan(
  plan: Pick<CompiledPlan, 'template_key' | 'template_version' | 'graph_hash' | 'nodes'>,
  intent: Readonly<Record<string, unknown>>,
  inputParams: Readonly<Record<string, unknown>>,
): HashedPlan {
  return {
    template_key: plan.template_key,
    template_version: plan.template_version,
    graph_hash: plan.graph_hash,
    intent,
    input_params: inputParams,
    nodes: plan.nodes.map((n) => [n.node_key, n.node_kind, n.action_type, n.executor_binding, n.signer_binding, n.config, n.predecessors]),
  };
}

/**
 * The hash a request carries: "sha256:" + hex SHA-256 of the RFC 8785 canonical JSON of
 * hashedPlan(...). Exported so a stored compiled plan can be re-hashed to detect drift.
 */
export function compiledPlanHash(
  plan: Pick<CompiledPlan, 'template_key' | 'template_version' | 'graph_hash' | 'nodes'>,
  intent: Readonly<Record<string, unknown>>,
  inputParams: Readonly<Record<string, unknown>>,
): string {
  return sha256Tagged(hashedPlan(plan, intent, inputParams));
}

function requireJsonObject(name: string, value: unknown): void {
  const isObject = value !== null && typeof value === 'object' && !Array.isArray(value);
  if (!isObject || !isBoundedJson(value)) {
    throw new ValidationError(`${name} must be a JSON object (plain values, nested at most ${MAX_JSON_DEPTH} levels)`, { field: name });
  }
}
