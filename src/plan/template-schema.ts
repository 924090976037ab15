import { z } from 'zod';
import { ValidationError } from '../errors.ts';
import { intentSchemaSchema } from './intent-schema.ts';
import { jsonObjectSchema, jsonValueSchema, type JsonValue } from './json.ts';

export type { JsonObject, JsonValue } from './json.ts';

/**
 * A plan template as it arrives over the API: snake_case, strict (an unknown field is refused, so a
 * typo never silently drops a setting). This schema checks shape and size only; graph rules (cycles,
 * connectivity, $ref targets, registered bindings) are validate.ts's job, where the refusal can name
 * the node and the rule.
 *
 * The limits exist so a huge or hostile definition is refused cleanly instead of costing memory and
 * time in the validator, the hash and the database.
 */

export const TEMPLATE_KEY_PATTERN = /^[a-z0-9][a-z0-9_.-]{0,127}$/;
/** No dots: "$ref:node_key.field" splits at the first dot. */
export const NODE_KEY_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
export const MAX_NODES = 200;
export const MAX_EDGES = 2000;
export const MAX_BINDING_KEY_LENGTH = 200;

export const nodeKinds = ['action', 'observe', 'manual_gate', 'compensation', 'post_action'] as const;
export type NodeKind = (typeof nodeKinds)[number];


/** A binding after validation: a registry key, or an object naming the key plus executor-specific fields. */
export type ExecutorBinding = string | ({ executor_key: string } & { [field: string]: JsonValue });
export type SignerBinding = string | ({ signer_key: string } & { [field: string]: JsonValue });

const templateKey = z
  .string()
  .regex(TEMPLATE_KEY_PATTERN, 'template_key must be lowercase letters, digits, "_", "." or "-" (1-128 characters, starting with a letter or digit)');

const nodeKey = z
  .string()
  .regex(NODE_KEY_PATTERN, 'node_key must be letters, digits, "_" or "-" (1-64 characters, starting with a letter or digit)');

// The executor binding may be absent or blank here so the validator can refuse it as
// MISSING_EXECUTOR_BINDING with the node's name rather than as an anonymous shape error.
const executorBinding = z.union([
  z.string().max(MAX_BINDING_KEY_LENGTH),
  z.object({ executor_key: z.string().max(MAX_BINDING_KEY_LENGTH).optional() }).catchall(jsonValueSchema),
]);

const signerBinding = z.union([
  z.string().min(1).max(MAX_BINDING_KEY_LENGTH),
  z.object({ signer_key: z.string().min(1).max(MAX_BINDING_KEY_LENGTH) }).catchall(jsonValueSchema),
]);

export const nodeDefinitionSchema = z.strictObject({
  node_key: nodeKey,
  node_kind: z.enum(nodeKinds),
  action_type: z.string().regex(/^[\x21-\x7e]{1,128}$/, 'action_type must be 1-128 printable characters without spaces'),
  executor_binding: executorBinding.nullish(),
  signer_binding: signerBinding.nullish(),
  config: jsonObjectSchema.optional(),
  timeout_policy: jsonObjectSchema.optional(),
  retryable: z.boolean().default(false),
});

export const edgeDefinitionSchema = z.strictObject({ from: nodeKey, to: nodeKey });

export const templateDefinitionSchema = z.strictObject({
  template_key: templateKey,
  description: z.string().max(2000).optional(),
  // Empty is allowed by the shape so the validator can refuse it as EMPTY_PLAN.
  nodes: z.array(nodeDefinitionSchema).max(MAX_NODES, `a plan has at most ${MAX_NODES} nodes`),
  edges: z.array(edgeDefinitionSchema).max(MAX_EDGES, `a plan has at most ${MAX_EDGES} edges`).default([]),
  risk_controls: jsonObjectSchema.optional(),
  /** What an intent of this template may hold (src/plan/intent-schema.ts, docs/templates.md). */
  intent_schema: intentSchemaSchema.optional(),
});

export type TemplateDefinition = z.output<typeof templateDefinitionSchema>;
export type TemplateDefinitionInput = z.input<typeof templateDefinitionSchema>;
export type NodeDefinition = TemplateDefinition['nodes'][number];
export type EdgeDefinition = TemplateDefinition['edges'][number];

/** Parses an untrusted definition; a bad shape becomes VALIDATION_FAILED listing each problem's path. */
export function parseTemplateDefinition(input: unknown): TemplateDefinition {
  const result = templateDefinitionSchema.safeParse(input);
  if (result.success) return result.data;
  const issues = result.error.issues.map((issue) => ({ path: issue.path.map(String).join('.'), message: issue.message }));
  const first = issues[0];
  throw new ValidationError(`invalid template definition: ${first.path || '(root)'}: ${first.message}`, { issues });
}
