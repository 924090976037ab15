import { canonicalJson, compareCodeUnits } from './canonical-json.ts';
import type { TemplateDefinition } from './template-schema.ts';

/**
 * What a proposed template changes against the live version: nodes added, removed or changed (by
 * field), edges added or removed, and the description. Pure; a template with no live version diffs
 * against an empty one, so everything it holds is added.
 */
export interface TemplateDiff {
  description: { from: string; to: string } | null;
  nodes: {
    added: string[];
    removed: string[];
    changed: Array<{ node_key: string; fields: Array<{ field: string; from: unknown; to: unknown }> }>;
  };
  edges: { added: Array<{ from: string; to: string }>; removed: Array<{ from: string; to: string }> };
  risk_controls: { from: unknown; to: unknown } | null;
  /** What intents the template takes, before and after (null: unchanged; from or to null: no schema). */
  intent_schema: { from: unknown; to: unknown } | null;
}

const NODE_FIELDS = ['node_kind', 'action_type', 'executor_binding', 'signer_binding', 'config', 'timeout_policy', 'retryable'] as const;
const DEFAULTS: Record<string, unknown> = { signer_binding: null, config: {}, timeout_policy: {}, retryable: false };

export function diffTemplates(live: TemplateDefinition | null, proposed: TemplateDefinition): TemplateDiff {
  const before = new Map((live?.nodes ?? []).map((n) => [n.node_key, n as unknown as Record<string, unknown>]));
  const after = new Map(proposed.nodes.map((n) => [n.node_key, n as unknown as Record<string, unknown>]));
  const sorted = (keys: Iterable<string>) => [...keys].sort(compareCodeUnits);
  const changed: TemplateDiff['nodes']['changed'] = [];
  for (const key of sorted(after.keys())) {
    const a = before.get(key);
    const b = after.get(key)!;
    if (!a) continue;
    const fields = NODE_FIELDS.flatMap((field) => {
      const from = a[field] ?? DEFAULTS[field] ?? null;
      const to = b[field] ?? DEFAULTS[field] ?? null;
      return canonicalJson(from) === canonicalJson(to) ? [] : [{ field, from, to }];
    });
    if (fields.length > 0) changed.push({ node_key: key, fields });
  }
  const edgeKey = (e: { from: string; to: string }) => `${e.from}\u0000${e.to}`;
  const edgesBefore = new Map((live?.edges ?? []).map((e) => [edgeKey(e), { from: e.from, to: e.to }]));
  const edgesAfter = new Map(proposed.edges.map((e) => [edgeKey(e), { from: e.from, to: e.to }]));
  const descFrom = live?.description ?? '';
  const descTo = proposed.description ?? descFrom;
  const riskFrom = live?.risk_controls ?? {};
  const riskTo = proposed.risk_controls ?? {};
  const schemaFrom = live?.intent_schema ?? null;
  const schemaTo = proposed.intent_schema ?? null;
  return {
    description: descFrom === descTo ? null : { from: descFrom, to: descTo },
    nodes: {
      added: sorted([...after.keys()].filter((k) => !before.has(k))),
      removed: sorted([...before.keys()].filter((k) => !after.has(k))),
      changed,
    },
    edges: {
      added: sorted([...edgesAfter.keys()].filter((k) => !edgesBefore.has(k))).map((k) => edgesAfter.get(k)!),
      removed: sorted([...edgesBefore.keys()].filter((k) => !edgesAfter.has(k))).map((k) => edgesBefore.get(k)!),
    },
    risk_controls: canonicalJson(riskFrom) === canonicalJson(riskTo) ? null : { from: riskFrom, to: riskTo },
    intent_schema: canonicalJson(schemaFrom) === canonicalJson(schemaTo) ? null : { from: schemaFrom, to: schemaTo },
  };
}
