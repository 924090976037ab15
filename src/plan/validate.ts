import { InvalidTemplateError } from '../errors.ts';
import { executorKeyOf, signerKeyOf } from './bindings.ts';
import { compareCodeUnits } from './canonical-json.ts';
import { ancestors, buildGraph, connectedComponents, findCycle, topologicalOrder, type PlanGraph } from './graph.ts';
import { boundTokens } from './intent-check.ts';
import { assetFieldOf, intentSchemaProblems, intentSchemaSchema } from './intent-schema.ts';
import { NODE_KEY_PATTERN } from './template-schema.ts';

/**
 * The rules a plan template must satisfy before it can be saved or compiled. A refusal throws
 * InvalidTemplateError whose rule is one of the codes below and whose message names the node(s) in
 * words an operator can act on. details.problems lists every problem found in the same pass, so a
 * template with several mistakes does not need one round trip per mistake.
 */

export const templateRules = [
  'EMPTY_PLAN',
  'DUPLICATE_NODE_KEY',
  'UNKNOWN_NODE_KEY',
  'SELF_EDGE',
  'DUPLICATE_EDGE',
  'CYCLE',
  'UNREACHABLE',
  'REF_MALFORMED',
  'REF_NOT_PREDECESSOR',
  'UNKNOWN_EXECUTOR_BINDING',
  'UNKNOWN_SIGNER_BINDING',
  'MISSING_EXECUTOR_BINDING',
  'INTENT_SCHEMA_INVALID',
  'ASSET_BINDING_MISMATCH',
] as const;
export type TemplateRule = (typeof templateRules)[number];

export interface TemplateProblem {
  rule: TemplateRule;
  message: string;
  node_keys: string[];
}

/** What the registries know; injected so validation stays pure. */
export interface BindingCatalog {
  hasExecutor(key: string): boolean;
  hasSigner(key: string): boolean;
}

/** The least a plan needs for validation: a saved version's rows fit it as well as a definition. */
export interface PlanShape {
  template_key: string;
  nodes: ReadonlyArray<{
    node_key: string;
    executor_binding?: unknown;
    signer_binding?: unknown;
    config?: Readonly<Record<string, unknown>>;
  }>;
  edges: ReadonlyArray<{ from: string; to: string }>;
  /** The intent schema, if the template declares one (unknown: a stored version is checked again). */
  intent_schema?: unknown;
}

export interface ValidatedPlan {
  graph: PlanGraph;
  /** Topological order (Kahn, ties broken by node key). */
  order: string[];
}

const REF_PREFIX = '$ref:';
/** "$ref:<node_key>.<field>": the node key has no dots, so the first dot separates the two. */
const REF_PATTERN = /^\$ref:([^.]*)\.(.*)$/;
const REF_FIELD_PATTERN = /^[A-Za-z0-9_][A-Za-z0-9_-]{0,127}$/;

/** Every rule, including that each binding names a registered executor or signer. */
export function validateTemplate(def: PlanShape, known: BindingCatalog): ValidatedPlan {
  const validated = validateTemplateStructure(def);
  const problems: TemplateProblem[] = [];
  for (const node of def.nodes) {
    const executorKey = executorKeyOf(node.executor_binding)!;
    if (!known.hasExecutor(executorKey)) {
      problems.push({
        rule: 'UNKNOWN_EXECUTOR_BINDING',
        message: `node "${node.node_key}" is bound to executor "${executorKey}", which is not registered`,
        node_keys: [node.node_key],
      });
    }
    const signerKey = signerKeyOf(node.signer_binding);
    if (signerKey !== null && !known.hasSigner(signerKey)) {
      problems.push({
        rule: 'UNKNOWN_SIGNER_BINDING',
        message: `node "${node.node_key}" is bound to signer "${signerKey}", which is not registered`,
        node_keys: [node.node_key],
      });
    }
  }
  refuseIfAny(def, problems);
  return validated;
}

/**
 * Every rule that depends on the template alone (shape of the graph, references, presence of
 * bindings); whether the bound executors and signers exist is validateTemplate's extra step.
 */
export function validateTemplateStructure(def: PlanShape): ValidatedPlan {
  if (def.nodes.length === 0) {
    throw refusal([
      { rule: 'EMPTY_PLAN', message: `template "${def.template_key}" has no nodes; a plan needs at least one node`, node_keys: [] },
    ], def.template_key);
  }

  const problems: TemplateProblem[] = [];
  const counts = new Map<string, number>();
  for (const node of def.nodes) counts.set(node.node_key, (counts.get(node.node_key) ?? 0) + 1);
  for (const [key, count] of counts) {
    if (count > 1) {
      problems.push({
        rule: 'DUPLICATE_NODE_KEY',
        message: `node "${key}" is defined ${count} times; node keys must be unique within a template`,
        node_keys: [key],
      });
    }
  }
  for (const node of def.nodes) {
    if (executorKeyOf(node.executor_binding) === null) {
      problems.push({
        rule: 'MISSING_EXECUTOR_BINDING',
        message: `node "${node.node_key}" has no executor binding; every node must name the executor that runs it`,
        node_keys: [node.node_key],
      });
    }
    if (node.signer_binding != null && signerKeyOf(node.signer_binding) === null) {
      problems.push({
        rule: 'UNKNOWN_SIGNER_BINDING',
        message: `node "${node.node_key}" has a signer binding that names no signer; give signer_key or leave signer_binding out`,
        node_keys: [node.node_key],
      });
    }
    problems.push(...malformedRefs(node.node_key, node.config ?? {}));
  }
  problems.push(...intentSchemaRuleProblems(def));

  const seenEdges = new Set<string>();
  for (const { from, to } of def.edges) {
    const label = `${from} -> ${to}`;
    for (const end of from === to ? [from] : [from, to]) {
      if (!counts.has(end)) {
        problems.push({
          rule: 'UNKNOWN_NODE_KEY',
          message: `edge ${label} refers to node "${end}", which is not defined in this template`,
          node_keys: [end],
        });
      }
    }
    if (from === to) {
      problems.push({ rule: 'SELF_EDGE', message: `edge ${label} connects node "${from}" to itself`, node_keys: [from] });
    }
    const id = JSON.stringify([from, to]);
    if (seenEdges.has(id)) {
      problems.push({ rule: 'DUPLICATE_EDGE', message: `edge ${label} is listed more than once`, node_keys: [from, to] });
    }
    seenEdges.add(id);
  }
  // The graph checks below assume unique nodes and well-formed edges.
  refuseIfAny(def, problems);

  const graph = buildGraph(counts.keys(), def.edges);
  const cycle = findCycle(graph);
  if (cycle) {
    throw refusal([
      {
        rule: 'CYCLE',
        message: `nodes ${[...cycle, cycle[0]].join(' -> ')} form a cycle; a plan must be acyclic so that each node runs after the nodes before it`,
        node_keys: cycle,
      },
    ], def.template_key);
  }
  const order = topologicalOrder(graph)!;

  const components = connectedComponents(graph);
  if (components.length > 1) {
    // The largest component is "the plan"; the others are what got cut off (on a tie, the one
    // holding the first node as written wins).
    const first = def.nodes[0].node_key;
    const main = components.reduce((best, c) =>
      c.length > best.length || (c.length === best.length && c.includes(first) && !best.includes(first)) ? c : best,
    );
    for (const component of components) {
      if (component === main) continue;
      const names = component.map((k) => `"${k}"`).join(', ');
      const subject = component.length === 1 ? `node ${names} is` : `nodes ${names} are`;
      problems.push({
        rule: 'UNREACHABLE',
        message: `${subject} not connected to the rest of the plan (no path leads to or from ${main.map((k) => `"${k}"`).slice(0, 3).join(', ')}${main.length > 3 ? ', ...' : ''}); a plan must be one connected graph`,
        node_keys: component,
      });
    }
  }

  const upstream = ancestors(graph, order);
  for (const node of def.nodes) {
    for (const [field, value] of Object.entries(node.config ?? {})) {
      const ref = typeof value === 'string' ? REF_PATTERN.exec(value) : null;
      if (!ref || !REF_FIELD_PATTERN.test(ref[2]) || !NODE_KEY_PATTERN.test(ref[1])) continue;
      const target = ref[1];
      if (upstream.get(node.node_key)!.has(target)) continue;
      const why = !counts.has(target)
        ? `no node "${target}" exists in this template`
        : target === node.node_key
          ? `a node cannot read its own results`
          : `node "${target}" is not a predecessor of "${node.node_key}" (no path of edges leads from it to "${node.node_key}")`;
      problems.push({
        rule: 'REF_NOT_PREDECESSOR',
        message: `node "${node.node_key}" config field "${field}" references "${value}", but ${why}; a reference may only read from a node that runs before it`,
        node_keys: counts.has(target) && target !== node.node_key ? [node.node_key, target] : [node.node_key],
      });
    }
  }
  refuseIfAny(def, problems);
  return { graph, order };
}

/**
 * The intent schema's own rules (bounds, decimals, one asset field) and its agreement with the
 * nodes: a node that fixes a token symbol the schema does not allow could never run an intent the
 * schema accepts as that intent says (it would move its own token).
 */
function intentSchemaRuleProblems(def: PlanShape): TemplateProblem[] {
  if (def.intent_schema === undefined || def.intent_schema === null) return [];
  const parsed = intentSchemaSchema.safeParse(def.intent_schema);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const at = ['intent_schema', ...issue.path.map(String)].join('.');
    return [{ rule: 'INTENT_SCHEMA_INVALID', message: `${at}: ${issue.message}`, node_keys: [] }];
  }
  const problems: TemplateProblem[] = intentSchemaProblems(parsed.data).map((message) => ({ rule: 'INTENT_SCHEMA_INVALID', message, node_keys: [] }));
  const asset = assetFieldOf(parsed.data);
  if (asset) {
    const allowed = new Set(asset[1].allowed.map((a) => a.toUpperCase()));
    for (const bound of boundTokens(def.nodes)) {
      // An address or the chain's coin is named differently in the intent; only symbols compare here.
      if (/^0x[0-9a-fA-F]{40}$/.test(bound.token) || bound.token.toLowerCase() === 'native' || allowed.has(bound.token.toUpperCase())) continue;
      problems.push({
        rule: 'ASSET_BINDING_MISMATCH',
        message: `node "${bound.node_key}" is bound to ${bound.token} (${bound.field}), which intent_schema field "${asset[0]}" does not allow (${asset[1].allowed.join(', ')})`,
        node_keys: [bound.node_key],
      });
    }
  }
  return problems;
}

/** Top-level "$ref:" values that do not parse, and "$ref:" strings nested where nothing resolves them. */
function malformedRefs(nodeKey: string, config: Readonly<Record<string, unknown>>): TemplateProblem[] {
  const problems: TemplateProblem[] = [];
  for (const [field, value] of Object.entries(config)) {
    if (typeof value === 'string') {
      if (!value.startsWith(REF_PREFIX)) continue;
      const ref = REF_PATTERN.exec(value);
      if (ref && NODE_KEY_PATTERN.test(ref[1]) && REF_FIELD_PATTERN.test(ref[2])) continue;
      problems.push({
        rule: 'REF_MALFORMED',
        message: `node "${nodeKey}" config field "${field}" has a malformed reference "${value}"; write "$ref:<node_key>.<field>" (for example "$ref:withdraw.txid")`,
        node_keys: [nodeKey],
      });
    } else {
      const nested = findNestedRef(value, field);
      if (nested) {
        problems.push({
          rule: 'REF_MALFORMED',
          message: `node "${nodeKey}" config field "${nested.path}" holds "${nested.value}" below the top level of config; references are only resolved in top-level config values`,
          node_keys: [nodeKey],
        });
      }
    }
  }
  return problems;
}

function findNestedRef(value: unknown, path: string): { path: string; value: string } | null {
  const stack: Array<[unknown, string]> = [[value, path]];
  while (stack.length > 0) {
    const [item, at] = stack.pop()!;
    if (typeof item === 'string') {
      if (item.startsWith(REF_PREFIX)) return { path: at, value: item };
    } else if (Array.isArray(item)) {
      item.forEach((child, i) => stack.push([child, `${at}[${i}]`]));
    } else if (item !== null && typeof item === 'object') {
      for (const [k, child] of Object.entries(item)) stack.push([child, `${at}.${k}`]);
    }
  }
  return null;
}

function refuseIfAny(def: PlanShape, problems: TemplateProblem[]): void {
  if (problems.length > 0) throw refusal(problems, def.template_key);
}

function refusal(problems: TemplateProblem[], templateKey?: string): InvalidTemplateError {
  const [first] = problems;
  const more = problems.length > 1 ? ` (and ${problems.length - 1} more problem${problems.length > 2 ? 's' : ''}, listed in details.problems)` : '';
  const nodeKeys = [...new Set(first.node_keys)].sort(compareCodeUnits);
  return new InvalidTemplateError(first.rule, first.message + more, {
    ...(templateKey ? { template_key: templateKey } : {}),
    node_keys: nodeKeys,
    problems,
  });
}
