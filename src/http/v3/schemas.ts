import { z } from '@hono/zod-openapi';
import { decimalInteger, pageCursor, pageLimit } from '../query.ts';
import { UUID_PATTERN } from '../../ids.ts';
import { DESTINATION_NAME_PATTERN, MAX_OVERLAP_SECONDS } from '../../services/callback-destinations.ts';
import { MAX_MOVEMENT_PAGE } from '../../persistence/movements.ts';
import { nodeStates } from '../../machines/node-machine.ts';
import { movementStates } from '../../machines/movement-machine.ts';
import { proposalStates } from '../../machines/template-proposal-machine.ts';
import { policyProposalStates } from '../../machines/policy-proposal-machine.ts';
import { ENTRY_NAME_PATTERN, addressBookEntrySchema, ruleSetSchema } from '../../policy/rules.ts';
import { jsonObjectSchema, jsonValueSchema } from '../../plan/json.ts';
import { EFFECT_KINDS } from '../effect.ts';
import { NODE_KEY_PATTERN, TEMPLATE_KEY_PATTERN, templateDefinitionSchema } from '../../plan/template-schema.ts';

/**
 * The /v3 contract: every request and response schema, used both to validate input (strict: an
 * unknown field is refused, every string and list is bounded) and to generate the OpenAPI document.
 * The route modules import from here only, so the document cannot drift from what is enforced.
 */

// The plan schemas accept any bounded JSON value through a custom check, which has no OpenAPI form of
// its own; describing it here (metadata only, validation unchanged) lets the template and intent
// schemas be published exactly as they are enforced. It is published as the recursive JsonValue and
// JsonObject components (registered by src/http/openapi.ts), so generated clients type nested
// objects as JSON (a bare `object` type is `Record<string, never>` to openapi-typescript). An array
// is any array: a union member `JsonValue[]` is a circular type to TypeScript.
export const JSON_VALUE_REF = '#/components/schemas/JsonValue';
export const JSON_COMPONENTS = {
  JsonValue: {
    description: 'Any JSON value, nested at most 32 levels deep',
    anyOf: [
      { type: 'string' },
      { type: 'number' },
      { type: 'boolean' },
      { type: 'null' },
      { type: 'array', items: {}, description: 'An array of JSON values' },
      { $ref: '#/components/schemas/JsonObject' },
    ],
  },
  JsonObject: { description: 'A JSON object', type: 'object', additionalProperties: { $ref: JSON_VALUE_REF } },
} as const;
/** Marks the custom schema's inline form, which openApiDocument replaces with a JSON_VALUE_REF. */
export const JSON_VALUE_MARK = 'x-ferry-json-value';
if (!z.globalRegistry.has(jsonValueSchema)) {
  z.globalRegistry.add(jsonValueSchema, {
    description: JSON_COMPONENTS.JsonValue.description,
    type: ['string', 'number', 'boolean', 'null', 'object', 'array'],
    [JSON_VALUE_MARK]: true,
  } as never);
}

// ---------------------------------------------------------------------------------------------
// Shared pieces

const UUID_FORMAT = { format: 'uuid' } as const;
export const isoTime = z.string().openapi({ format: 'date-time', example: '2026-01-01T00:00:00.000Z' });
// Beside every actor id (`principal:<id>`, `token:<id>` on older rows, or a worker's name): what a person reads.
const actorName = z.string().openapi({ description: "The actor's display name (the principal's name); the id itself when it names no principal", example: 'alice' });
const nullableTime = isoTime.nullable();
const anyObject = z.record(z.string(), z.unknown());
/** A JSON object of any JSON values, in the document (responses are not validated). */
const jsonObject = z.record(z.string(), jsonValueSchema) as unknown as typeof anyObject;
export const printable = (max: number) => z.string().min(1).max(max).regex(/^[\x20-\x7e]+$/, 'must be printable ASCII');

export const templateKeySchema = z
  .string()
  .regex(TEMPLATE_KEY_PATTERN, 'template_key must be lowercase letters, digits, "_", "." or "-" (1-128 characters)');
export const nodeKeySchema = z.string().regex(NODE_KEY_PATTERN, 'node_key must be letters, digits, "_" or "-" (1-64 characters)');
export const planHashSchema = z
  .string()
  .regex(/^sha256:[0-9a-f]{64}$/, 'must be "sha256:" followed by 64 lowercase hex digits')
  .openapi({ example: `sha256:${'0'.repeat(64)}` });
const positiveInt = decimalInteger(1, 2_147_483_647);

/**
 * The answer of every paged list: one page of items under their plural name and `next_cursor`,
 * to pass back as `cursor` (null on the last page).
 */
function pageSchema<K extends string, S extends z.ZodType>(name: string, key: K, item: S) {
  const shape = {
    [key]: z.array(item),
    next_cursor: z.string().nullable().openapi({ description: 'Pass back as cursor for the next page; null on the last page' }),
  } as { [P in K]: z.ZodArray<S> } & { next_cursor: z.ZodNullable<z.ZodString> };
  return z.object(shape).openapi(name);
}

export const ErrorSchema = z
  .object({
    error: z.object({
      code: z.string().openapi({ example: 'VALIDATION_FAILED' }),
      message: z.string(),
      details: anyObject,
    }),
  })
  .openapi('Error');

// ---------------------------------------------------------------------------------------------
// Path parameters. An id that is not a UUID is bad input, 400 VALIDATION_FAILED naming the parameter
// (as its `format: uuid` says), never a 404: a client can tell a typo from a missing entity.

const uuidString = () => z.string().max(100).regex(UUID_PATTERN, 'must be a UUID');
export const idParam = (name: string, description: string) =>
  uuidString().openapi({ param: { name, in: 'path' }, description, ...UUID_FORMAT });

export const MovementIdParams = z.object({ id: idParam('id', 'Movement id') });
export const CallbackIdParams = z.object({ id: idParam('id', 'Callback id') });
export const TemplateKeyParams = z.object({ key: templateKeySchema.openapi({ param: { name: 'key', in: 'path' } }) });
export const TemplateVersionParams = z.object({
  key: templateKeySchema.openapi({ param: { name: 'key', in: 'path' } }),
  version: positiveInt.openapi({ param: { name: 'version', in: 'path' } }),
});
export const SignerKeyParams = z.object({
  signer_key: z.string().min(1).max(200).openapi({ param: { name: 'signer_key', in: 'path' } }),
});

// ---------------------------------------------------------------------------------------------
// Query strings


export const MovementListQuery = z.object({
  state: z.enum(movementStates).optional(),
  template_key: templateKeySchema.optional(),
  limit: pageLimit(MAX_MOVEMENT_PAGE, 50),
  cursor: pageCursor,
});

export const TransitionListQuery = z.object({
  limit: pageLimit(1000, 500),
  cursor: pageCursor,
});

export const CallbackListQuery = z.object({
  status: z.enum(['pending', 'sent', 'dlq']).optional(),
  movement_id: uuidString().optional().openapi(UUID_FORMAT),
  limit: pageLimit(200, 50),
  cursor: pageCursor,
});

export const AuditListQuery = z.object({
  order: z.enum(['asc', 'desc']).default('asc'),
  entity_type: z.string().min(1).max(100).optional(),
  entity_id: z.string().min(1).max(200).optional(),
  limit: pageLimit(500, 100),
  cursor: pageCursor,
});

export const IdempotencyHeaders = z.object({
  'idempotency-key': printable(200)
    .optional()
    .openapi({ description: 'Idempotency-Key: the same key with the same body returns the original movement' }),
});

// ---------------------------------------------------------------------------------------------
// Request bodies

// .meta() returns a named copy (validation unchanged). Not .openapi(): that method exists only on
// schemas built after @hono/zod-openapi was loaded, and the plan module may have been loaded first.
export const TemplateDefinitionBody = templateDefinitionSchema.meta({ id: 'TemplateDefinition' });

export const CompileBody = z
  .strictObject({
    intent: jsonObjectSchema,
    input_params: jsonObjectSchema.optional(),
    template_version: z.number().int().min(1).max(2_147_483_647).optional(),
  })
  .openapi('CompileRequest');

export const CreateMovementBody = z
  .strictObject({
    template_key: templateKeySchema,
    template_version: z.number().int().min(1).max(2_147_483_647).optional(),
    intent: jsonObjectSchema.meta({
      description:
        'What to move, as the template\'s intent_schema allows (docs/templates.md); amounts are decimal strings ("100.25"). ' +
        'An intent the schema or a node\'s token refuses is 422 INTENT_INVALID; a number JSON cannot carry exactly is 422 INEXACT_NUMBER.',
    }),
    input_params: jsonObjectSchema.optional(),
    callback_url: z.string().min(1).max(2048).optional().openapi({ format: 'uri' }),
    callback_destination: z
      .string()
      .min(1)
      .max(100)
      .optional()
      .openapi({ description: 'A registered callback destination (name or id) to report to instead of callback_url; not both' }),
  })
  .openapi('CreateMovementRequest');

export const ApproveBody = z.strictObject({ compiled_plan_hash: planHashSchema }).openapi('ApproveRequest');
export const ReasonBody = z.strictObject({ reason: z.string().min(1).max(2000).optional() }).openapi('ReasonRequest');
export const EmptyBody = z.strictObject({}).openapi('EmptyRequest');
export const RetryBody = z.strictObject({ node_key: nodeKeySchema }).openapi('RetryRequest');
export const ExpectedIdentityBody = z
  .strictObject({ address: z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'must be a 0x-prefixed 20-byte hex address') })
  .openapi('ExpectedIdentityRequest');

// ---------------------------------------------------------------------------------------------
// Responses

/** The object compiled_plan_hash is the hash of (docs/templates.md, "The plan hash"). */
const hashedPlanSchema = z
  .object({
    template_key: z.string(),
    template_version: z.number().int(),
    graph_hash: z.string(),
    intent: jsonObject,
    input_params: jsonObject,
    nodes: z.array(z.array(jsonValueSchema)).openapi({
      description: 'Per node, in plan order: [node_key, node_kind, action_type, executor_binding, signer_binding, config, predecessors]',
    }),
  })
  .openapi('HashedPlan', {
    description:
      'What compiled_plan_hash covers: compiled_plan_hash = "sha256:" + lowercase hex SHA-256 of the RFC 8785 (JCS) canonical JSON of this object, UTF-8. Recompute it to check what you approve.',
  });

export const ApprovalSchema = z.object({ by: z.string(), by_name: actorName, at: isoTime });

export const MovementPolicySchema = z
  .object({
    rule_set_version: z.number().int().nullable().openapi({ description: 'The rule set the movement was checked against at creation; null: there was none' }),
    rule_id: z.string().nullable().openapi({ description: 'The rule that matched' }),
    action: z.string().openapi({ description: 'allow, require_approvals, or no_policy (no rule set was live)' }),
    asset: z.string().nullable(),
    amount: z.string().nullable(),
    destination_entry: z.string().nullable().openapi({ description: 'The address book entry the destination is; null: not in the book' }),
    sources: z.array(z.string()).nullable().openapi({ description: 'The signer keys and accounts its nodes move funds from, as the rules read them; null on movements from before sources were recorded' }),
    approvers_from: z.array(z.string()).nullable().openapi({ description: 'The principals whose approvals count under the rule; null: any approver' }),
  })
  .openapi('MovementPolicy');

export const MovementSummarySchema = z
  .object({
    id: z.string().openapi(UUID_FORMAT),
    template_key: z.string(),
    template_version: z.number().int(),
    state: z.enum(movementStates),
    intent: jsonObject,
    input_params: jsonObject,
    compiled_plan_hash: z.string(),
    approval_status: z.enum(['pending', 'approved', 'rejected']),
    approval_quorum: z.number().int(),
    approvals: z.array(ApprovalSchema),
    decided_by: z.string().nullable(),
    decided_by_name: actorName.nullable(),
    expires_at: nullableTime,
    current_frontier: z.array(z.string()),
    callback_configured: z.boolean(),
    callback_url: z.string().nullable().openapi({ description: 'Shown to roles that may redrive callbacks (operator, admin); null for others' }),
    idempotency_key: z.string().nullable(),
    created_by: z.string(),
    created_by_name: actorName,
    created_at: isoTime,
    updated_at: isoTime,
    row_version: z.number().int(),
    policy: MovementPolicySchema.nullable().openapi({ description: 'What the treasury policy decided at creation (docs/policy.md); null for movements from before it' }),
  })
  .openapi('MovementSummary');

export const MovementSchema = MovementSummarySchema.extend({
  compiled_plan: anyObject.openapi({ description: 'The plan the approvers review (nodes, bindings, configs, frontier)' }),
  hashed_plan: z.union([hashedPlanSchema, z.null()]).openapi({ description: 'null only for a stored plan too damaged to read' }),
}).openapi('Movement');

export const MovementNodeSchema = z
  .object({
    id: z.string().openapi(UUID_FORMAT),
    node_key: z.string(),
    node_kind: z.string(),
    action_type: z.string(),
    state: z.enum(nodeStates),
    retryable: z.boolean(),
    attempt_no: z.number().int(),
    predecessor_keys: z.array(z.string()),
    successor_keys: z.array(z.string()),
    executor_binding: z.unknown(),
    signer_binding: z.unknown(),
    config: anyObject,
    timeout_policy: anyObject,
    provider_state: z.string().nullable(),
    provider_refs: anyObject,
    provider_ref_id: z.string().nullable(),
    error_code: z.string().nullable(),
    error_detail: z.string().nullable(),
    // The executor said only a person can settle this node (docs/operations.md, "Manual intervention").
    manual_intervention_required: z.boolean(),
    // What the signer may sign for the node, pinned at creation (docs/signing.md, "Pinned at approval").
    expected_effect: anyObject.nullable().openapi({
      description: 'For a signing node, the expected effect pinned when the movement was created: {effect: {chain_id, asset, to, amount_base_units, token_decimals, token_symbol, max_fee_per_gas_cap_wei, ...}} or {unavailable: reason}; null otherwise',
    }),
    transaction: z
      .object({
        hash: z.string(),
        chain: z.string().nullable(),
        explorer_url: z.string().nullable().openapi({ description: 'From FERRY_EXPLORER_URLS; never fetched by Ferry' }),
      })
      .nullable()
      .openapi({ description: "The chain transaction the provider reported (provider_refs.tx_hash), with an explorer link when one is configured for its chain" }),
    started_at: nullableTime,
    next_observe_at: nullableTime,
    last_observed_at: nullableTime,
    dispatch_after: nullableTime,
    updated_at: isoTime,
  })
  .openapi('MovementNode');

export const NodeEffectSchema = z
  .object({
    node_key: z.string(),
    action: z.string().openapi({ description: "The node's action_type" }),
    kind: z.enum(EFFECT_KINDS).openapi({ description: 'What the node does, as the effect reads it' }),
    executor_key: z.string().nullable(),
    lane: z.string().nullable(),
    moves_funds: z.boolean().openapi({ description: 'False for observations and manual gates' }),
    basis: z.enum(['pinned', 'plan', 'unavailable']).openapi({
      description:
        'pinned: from the expected effect pinned at creation (what the signer checks); plan: from the compiled plan and the intent (for a signing node created before effects were pinned, with the configuration of now, as dispatch signs it); unavailable: the node has no approval-bound effect and its signer will refuse it',
    }),
    unavailable: z.string().nullable().openapi({ description: 'Why there is no approval-bound effect (basis unavailable)' }),
    asset: z.string().nullable().openapi({ description: 'Symbol, `native` for the chain\'s coin, or the exchange\'s coin code', example: 'USDC' }),
    asset_address: z.string().nullable().openapi({ description: 'The token contract of an EVM token' }),
    amount: z.string().nullable().openapi({ description: 'Decimal string in the asset\'s units, exactly as approved', example: '100.25' }),
    amount_base_units: z.string().nullable(),
    decimals: z.number().int().nullable(),
    source: z.string().nullable().openapi({ description: '`signer <key>` or `account <key>`' }),
    source_address: z.string().nullable().openapi({ description: "The signer's address as its health check observed it, when known" }),
    destination: z.string().nullable().openapi({ description: 'Recipient, spender or mint recipient; the exchange withdrawal address' }),
    destination_tag: z.string().nullable(),
    chain_id: z.number().int().nullable(),
    chain: z.string().nullable().openapi({ description: 'The chain (name and id), or the network of an exchange withdrawal' }),
    venue: z.string().nullable().openapi({ description: 'exchange:account of a CEX node' }),
    destination_chain_id: z.number().int().nullable(),
    destination_domain: z.number().int().nullable().openapi({ description: 'The CCTP domain a burn mints on' }),
    contract: z.string().nullable().openapi({ description: 'The contract called when it is not the destination (token, messenger)' }),
    method: z.string().nullable(),
    fee_cap: z
      .object({
        max_fee_per_gas_wei: z.string().nullable(),
        max_fee_per_gas_gwei: z.string().nullable(),
        cctp_max_fee: z.string().nullable().openapi({ description: "A CCTP burn's max fee, in the burned token's units" }),
      })
      .nullable(),
  })
  .openapi('NodeEffect');

export const MovementEffectSchema = z
  .object({
    compiled_plan_hash: z.string().openapi({ description: 'The hash an approval of this effect names' }),
    policy: z
      .object({
        rule_set_version: z.number().int().nullable(),
        rule_id: z.string().nullable(),
        action: z.string(),
        destination_entry: z.string().nullable(),
        approvers_from: z.array(z.string()).nullable(),
      })
      .nullable()
      .openapi({ description: 'The treasury policy\'s decision at creation (docs/policy.md); null when none was recorded' }),
    nodes: z.array(NodeEffectSchema),
    warnings: z.array(z.string()).openapi({ description: 'What approving does not settle (checks made only when a node runs)' }),
  })
  .openapi('MovementEffect', {
    description:
      'What approving the movement lets each node do (docs/design.md, glossary: effect), derived from the compiled plan, the intent and the pinned expected effects',
  });

export const MovementDetailSchema = z
  .object({ movement: MovementSchema, nodes: z.array(MovementNodeSchema), effect: MovementEffectSchema })
  .openapi('MovementDetail');

export const MovementPageSchema = pageSchema('MovementPage', 'movements', MovementSummarySchema);

export const TransitionSchema = z
  .object({
    id: z.number().int(),
    entity_type: z.enum(['request', 'node']),
    entity_id: z.string(),
    node_key: z.string().nullable(),
    seq: z.number().int(),
    from_state: z.string().nullable().openapi({ description: 'null for the transition that created the entity (event xstate.init)' }),
    to_state: z.string(),
    event_type: z.string(),
    event_payload: anyObject,
    actor: z.string(),
    actor_name: actorName,
    machine_id: z.string(),
    machine_version: z.string(),
    at: isoTime,
  })
  .openapi('Transition');

export const TransitionPageSchema = pageSchema('TransitionPage', 'transitions', TransitionSchema);

export const TemplateSummarySchema = z
  .object({
    template_key: z.string(),
    description: z.string(),
    latest_version: z.number().int(),
    created_at: isoTime,
    updated_at: isoTime,
  })
  .openapi('TemplateSummary');

export const TemplateVersionSummarySchema = z
  .object({ version: z.number().int(), graph_hash: z.string(), created_by: z.string(), created_by_name: actorName, created_at: isoTime })
  .openapi('TemplateVersionSummary');

export const TemplateVersionSchema = z
  .object({
    template_key: z.string(),
    version: z.number().int(),
    graph_hash: z.string(),
    risk_controls: anyObject,
    intent_schema: anyObject.nullable().openapi({
      description: 'What an intent of this version may hold (null: the template declares no intent schema; see IntentSchema in TemplateDefinition)',
    }),
    created_by: z.string(),
    created_by_name: actorName,
    created_at: isoTime,
    nodes: z.array(
      z.object({
        node_key: z.string(),
        node_kind: z.string(),
        action_type: z.string(),
        executor_binding: z.unknown(),
        signer_binding: z.unknown(),
        config: anyObject,
        timeout_policy: anyObject,
        retryable: z.boolean(),
        position: z.number().int(),
      }),
    ),
    edges: z.array(z.object({ from: z.string(), to: z.string() })),
  })
  .openapi('TemplateVersion');

export const TemplateSaveSchema = z
  .object({
    template: TemplateSummarySchema,
    version: TemplateVersionSchema,
    created: z.boolean().openapi({ description: 'False when the graph matched an existing version, which is returned' }),
    timeout_policy_not_applied: z.array(z.string()),
  })
  .openapi('TemplateSaveResult');

export const TemplateListSchema = z.object({ templates: z.array(TemplateSummarySchema) }).openapi('TemplateList');

export const TemplateDetailSchema = z
  .object({ template: TemplateSummarySchema, versions: z.array(TemplateVersionSummarySchema) })
  .openapi('TemplateDetail');

export const CompilePreviewSchema = z
  .object({ compiled_plan_hash: z.string(), compiled_plan: anyObject, hashed_plan: hashedPlanSchema })
  .openapi('CompilePreview');

const healthState = z.enum(['up', 'down', 'unknown']);
const registryStatus = z.enum(['active', 'orphan']);

export const ExecutorSchema = z
  .object({
    executor_key: z.string(),
    lane: z.string(),
    docs: z.string().nullable().openapi({ description: "The lane's docs page (src/executors/lanes.ts); null for a lane Ferry does not list (a remote host's)" }),
    status: registryStatus,
    health_state: healthState,
    health_detail: anyObject,
    last_health_checked_at: nullableTime,
    created_at: isoTime,
    updated_at: isoTime,
  })
  .openapi('Executor');

export const SignerSchema = z
  .object({
    signer_key: z.string(),
    status: registryStatus,
    health_state: healthState,
    health_detail: anyObject,
    last_health_checked_at: nullableTime,
    observed_signer_address: z.string().nullable(),
    expected_signer_address: z.string().nullable(),
    expected_set_by: z.string().nullable(),
    expected_set_by_name: actorName.nullable(),
    expected_set_at: nullableTime,
    identity_posture: z.enum(['match', 'mismatch', 'unenrolled', 'unobserved']),
    created_at: isoTime,
    updated_at: isoTime,
  })
  .openapi('Signer');

export const ExecutorListSchema = z.object({ executors: z.array(ExecutorSchema) }).openapi('ExecutorList');
export const SignerListSchema = z.object({ signers: z.array(SignerSchema) }).openapi('SignerList');
export const SignerResultSchema = z.object({ signer: SignerSchema }).openapi('SignerResult');

const SweepRunSchema = z.object({
  job_id: z.string().openapi(UUID_FORMAT),
  state: z.string(),
  trigger: z.string().nullable().openapi({ description: 'schedule, chain, start or manual' }),
  started_at: nullableTime,
  finished_at: nullableTime,
  duration_ms: z.number().int().nullable(),
  retry_count: z.number().int(),
  output: anyObject.nullable().openapi({ description: 'What the run did (items, budget_exhausted, per-sweep counts)' }),
});

export const SweepStatusSchema = z
  .object({
    name: z.string(),
    summary: z.string(),
    queue: z.string().openapi({ description: 'The pg-boss queue; each run is one job on it' }),
    enabled: z.boolean(),
    interval_seconds: z.number(),
    batch_size: z.number().int().nullable(),
    max_run_ms: z.number().int(),
    variables: z.record(z.string(), z.string()),
    timing: z.enum(['cron', 'chain']),
    schedule: z.object({ cron: z.string(), timezone: z.string() }).nullable(),
    last_run: SweepRunSchema.extend({ outcome: z.enum(['completed', 'failed']), budget_exhausted: z.boolean().nullable() }).nullable(),
    running: SweepRunSchema.nullable(),
    next_due_at: nullableTime,
  })
  .openapi('SweepStatus');

export const LoopHeartbeatSchema = z
  .object({
    process_id: z.string(),
    worker_name: z.string(),
    hostname: z.string(),
    pid: z.number().int(),
    status: z.string(),
    loop_runs: z.number().int(),
    consecutive_errors: z.number().int(),
    last_error: z.string().nullable(),
    started_at: isoTime,
    last_beat_at: isoTime,
  })
  .openapi('LoopHeartbeat');

// Every worker of every process, from the rows each process writes at start and after runs.
export const WorkerRowSchema = z
  .object({
    process_id: z.string(),
    hostname: z.string(),
    pid: z.number().int(),
    worker_name: z.string(),
    kind: z.enum(['loop', 'queue', 'sweep']),
    group: z.enum(['core', 'sidecar']),
    enabled: z.boolean(),
    interval_seconds: z.number().nullable(),
    status: z.string().openapi({ description: "disabled, starting, scheduled (a sweep: pg-boss hands each run to one process), running, failing, restarting (a sidecar the supervisor starts again after its backoff), crashed, or stopped (its process stopped cleanly)" }),
    network_class: z.string().openapi({ description: 'The deployment the process serves (FERRY_NETWORK_CLASS)' }),
    restarts: z.number().int().openapi({ description: 'How often the supervisor restarted this worker in its process' }),
    runs: z.number().int(),
    consecutive_errors: z.number().int(),
    last_error: z.string().nullable().openapi({ description: 'The last error, secrets redacted' }),
    last_run_at: nullableTime,
    started_at: isoTime,
    last_beat_at: isoTime,
  })
  .openapi('WorkerRow');

const WorkerGroupCountSchema = z
  .object({
    expected: z.number().int().openapi({ description: 'Workers of the group this configuration enables' }),
    running: z.number().int().openapi({ description: 'Of those, the ones running or scheduled now' }),
    not_running: z.array(z.string()).openapi({ description: 'The expected workers that are not (starting, failing, restarting, crashed or stopped)' }),
  })
  .openapi('WorkerGroupCount');

// One process of the cluster: its groups, its live movement actors and the leases it holds.
export const WorkerProcessSchema = z
  .object({
    process_id: z.string(),
    hostname: z.string(),
    pid: z.number().int(),
    network_class: z.string(),
    state: z.enum(['alive', 'stopped', 'gone']).openapi({ description: 'stopped: it stopped cleanly; gone: no heartbeat for FERRY_WORKER_GONE_AFTER_SECONDS (it died or lost the database)' }),
    started_at: isoTime,
    last_beat_at: isoTime,
    last_beat_age_seconds: z.number().int().min(0).openapi({ description: "Whole seconds since its latest heartbeat, on the server's clock (the one that decides gone)" }),
    groups: z.object({ core: WorkerGroupCountSchema, sidecar: WorkerGroupCountSchema }),
    live_actors: z.number().int().nullable().openapi({ description: 'Movement actors its lease holder runs (actor runtime); null without one' }),
    leases: z.object({ live: z.number().int(), expired: z.number().int().openapi({ description: 'Leases past their expiry that another process may take' }) }),
  })
  .openapi('WorkerProcess');

export const WorkersQuery = z.object({
  network_class: z.string().regex(/^(all|[a-z][a-z0-9_-]{0,31})$/).optional().openapi({ description: "One deployment's workers (default: this server's FERRY_NETWORK_CLASS), or all" }),
});

export const WorkersSchema = z
  .object({ sweeps: z.array(SweepStatusSchema), loops: z.array(LoopHeartbeatSchema), workers: z.array(WorkerRowSchema), processes: z.array(WorkerProcessSchema) })
  .openapi('Workers');

export const CallbackSchema = z
  .object({
    id: z.string().openapi(UUID_FORMAT),
    movement_id: z.string().openapi(UUID_FORMAT),
    event_type: z.string(),
    node_key: z.string().nullable(),
    callback_url: z.string().nullable().openapi({ description: 'Shown to roles that may redrive callbacks (operator, admin); null for others' }),
    destination_id: z.string().nullable().openapi({ ...UUID_FORMAT, description: 'The registered callback destination it reports to; null for a raw callback_url' }),
    status: z.enum(['pending', 'sent', 'dlq']).openapi({ description: 'pending: not yet delivered (retrying after a failed attempt when attempts > 0); sent: delivered; dlq: dead, after its last attempt' }),
    attempts: z.number().int(),
    max_attempts: z.number().int(),
    redrive_count: z.number().int(),
    next_attempt_at: isoTime,
    last_attempt_at: nullableTime,
    last_status_code: z.number().int().nullable().openapi({ description: "The last attempt's HTTP status; shown to roles that may redrive callbacks (operator, admin), null for others" }),
    last_error: z.string().nullable().openapi({ description: "The last failed attempt's error class; shown to roles that may redrive callbacks (operator, admin), null for others" }),
    sent_at: nullableTime,
    callback_timestamp: z.number().int(),
    callback_nonce: z.string(),
    payload: anyObject,
    created_at: isoTime,
  })
  .openapi('Callback');

export const CallbackPageSchema = pageSchema('CallbackPage', 'callbacks', CallbackSchema);
export const CallbackResultSchema = z.object({ callback: CallbackSchema }).openapi('CallbackResult');

export const AuditEventSchema = z
  .object({
    id: z.number().int(),
    outbox_id: z.number().int(),
    actor: z.string(),
    actor_name: actorName,
    action: z.string(),
    entity_type: z.string(),
    entity_id: z.string().nullable(),
    details: anyObject,
    occurred_at: z.string(),
    prev_hash: z.string(),
    hash: z.string(),
  })
  .openapi('AuditEvent');

export const AuditPageSchema = pageSchema('AuditPage', 'events', AuditEventSchema);

// ---------------------------------------------------------------------------------------------
// Route helpers

export function jsonBody<S extends z.ZodType>(schema: S, required = true) {
  return { content: { 'application/json': { schema } }, required };
}

export function jsonResponse<S extends z.ZodType>(schema: S, description: string) {
  return { description, content: { 'application/json': { schema } } };
}

const errorResponse = (description: string) => jsonResponse(ErrorSchema, description);

/** The error answers every /v3 route can give, documented once. */
export const commonErrors = {
  400: errorResponse('Malformed JSON, wrong types, unknown fields or bad parameters (MALFORMED_JSON, VALIDATION_FAILED)'),
  401: errorResponse('No valid bearer token (UNAUTHENTICATED)'),
  403: errorResponse('The token\'s role lacks the permission (FORBIDDEN)'),
  413: errorResponse('The body exceeds the size limit (PAYLOAD_TOO_LARGE)'),
  415: errorResponse('The body is not JSON (UNSUPPORTED_MEDIA_TYPE)'),
  500: errorResponse('An unexpected error (INTERNAL); details.request_id names it in the server log'),
  503: errorResponse('The database or runtime is unavailable; retry (SERVICE_UNAVAILABLE, DATABASE_UNAVAILABLE)'),
  default: errorResponse('Any other error (405 METHOD_NOT_ALLOWED, 409, 422, 429, ...), with the same body and a stable code'),
} as const;

export const notFound = { 404: errorResponse('No such entity (NOT_FOUND)') } as const;
export const conflict = (description: string) => ({ 409: errorResponse(description) }) as const;
export const unprocessable = (description: string) => ({ 422: errorResponse(description) }) as const;
export const forbidden = (description: string) => ({ 403: errorResponse(description) }) as const;

export const bearerSecurity = [{ bearerAuth: [] as string[] }];

// ---------------------------------------------------------------------------------------------
// Balances (GET /v3/balances)

export const BalanceListQuery = z.object({
  chain: z
    .string()
    .regex(/^([1-9][0-9]{0,15}|eip155:[1-9][0-9]{0,15}|[a-z0-9][a-z0-9_.:-]{0,63})$/, 'a chain id (31337), eip155:<chain id>, or sim')
    .optional()
    .openapi({ description: 'A chain id, `eip155:<chain id>`, or `sim`', example: '31337' }),
  address: z.string().min(1).max(128).optional().openapi({ description: 'The wallet: an EVM address (any case) or a sim wallet name' }),
  asset: z.string().min(1).max(64).optional().openapi({ description: '`native`, a token address, or a token symbol (any case)' }),
  fresh: z
    .enum(['true', 'false'])
    .optional()
    .openapi({ description: 'true: fetch the matching balances now (FERRY_BALANCE_FRESH_CONCURRENCY at once, FERRY_BALANCE_FRESH_TIMEOUT_MS each) before answering; each balance then says how its fetch went' }),
  limit: pageLimit(500, 100),
  cursor: pageCursor,
});

export const BalanceSchema = z
  .object({
    chain: z.string().openapi({ example: 'eip155:31337' }),
    chain_id: z.number().int().nullable(),
    lane: z.string(),
    wallet: z.string(),
    label: z.string().nullable().openapi({ description: 'The signer key or watch label the wallet is known by' }),
    asset: z.string().openapi({ description: '`native`, a lowercase token address, or a sim asset' }),
    symbol: z.string().nullable(),
    amount: z.string().nullable().openapi({ description: 'In asset units, exact (a decimal string); null until fetched once', example: '100.25' }),
    amount_base_units: z.string().nullable().openapi({ example: '100250000' }),
    decimals: z.number().int().nullable(),
    as_of: nullableTime.openapi({ description: 'When the amount was fetched' }),
    stale: z.boolean().openapi({ description: 'Never fetched, or fetched longer ago than FERRY_BALANCE_STALE_THRESHOLD_SECONDS' }),
    last_attempt_at: nullableTime,
    error: z
      .object({ code: z.string(), at: isoTime, consecutive: z.number().int() })
      .nullable()
      .openapi({ description: 'The last fetch failed: its class of error (never its text)' }),
    fresh: z
      .object({
        status: z.enum(['fetched', 'failed', 'timed_out', 'not_fetched']),
        code: z.string().nullable().openapi({ description: 'The class of error when not fetched (FRESH_TIMEOUT: no answer in time)' }),
      })
      .optional()
      .openapi({ description: 'With fresh=true only: how this balance\'s fetch went. Failed or timed out: the amount is the last good one (see stale)' }),
  })
  .openapi('Balance');

export const BalancePageSchema = pageSchema('BalancePage', 'balances', BalanceSchema);

export const BalanceHistoryQuery = z.object({
  chain: BalanceListQuery.shape.chain.unwrap().openapi({ description: 'A chain id, `eip155:<chain id>`, or `sim`', example: '31337' }),
  address: z.string().min(1).max(128).openapi({ description: 'The wallet: an EVM address (any case) or a sim wallet name' }),
  asset: z.string().min(1).max(128).openapi({ description: '`native`, a token address, or a token symbol (any case)' }),
  bucket: z.enum(['hour', 'day']).default('hour').openapi({ description: 'Hourly or daily buckets (UTC)' }),
  since: z.iso.datetime({ offset: true }).optional().openapi({ description: 'Only buckets starting at or after this time' }),
  limit: pageLimit(2000, 168),
});

export const BalanceHistoryPointSchema = z
  .object({
    bucket_start: isoTime,
    min: z.string().openapi({ description: 'Lowest amount in the bucket, in asset units (exact)' }),
    max: z.string(),
    last: z.string().openapi({ description: 'The amount of the latest snapshot in the bucket' }),
    last_at: isoTime,
    min_base_units: z.string(),
    max_base_units: z.string(),
    last_base_units: z.string(),
    decimals: z.number().int(),
    samples: z.number().int().openapi({ description: 'Snapshots folded into the bucket' }),
  })
  .openapi('BalanceHistoryPoint');

export const BalanceHistorySchema = z
  .object({
    chain: z.string(),
    wallet: z.string(),
    asset: z.string(),
    symbol: z.string().nullable(),
    bucket: z.enum(['hour', 'day']),
    points: z.array(BalanceHistoryPointSchema).openapi({ description: 'Oldest first; the newest `limit` buckets' }),
  })
  .openapi('BalanceHistory');

// Exchange transfers no movement made (GET /v3/cex-transfers)

export const CexTransferListQuery = z.object({
  venue: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/, 'a CEX account key').optional().openapi({ description: 'Only this CEX account (cex.accounts[].key)' }),
  limit: pageLimit(500, 100),
});

export const CexTransferSchema = z
  .object({
    id: z.number().int(),
    venue: z.string().openapi({ description: 'The CEX account key' }),
    direction: z.enum(['deposit', 'withdrawal']),
    asset: z.string(),
    amount: z.string().openapi({ description: 'A decimal string, as the exchange gave it' }),
    network: z.string().nullable(),
    tx_id: z.string().nullable(),
    address: z.string().nullable(),
    provider_id: z.string().openapi({ description: "The exchange's id of the deposit or withdrawal" }),
    provider_status: z.string().nullable(),
    occurred_at: isoTime,
    recorded_at: isoTime,
  })
  .openapi('CexTransfer');

export const CexTransferListSchema = z.object({ transfers: z.array(CexTransferSchema) }).openapi('CexTransferList');

// Registry drift (GET /v3/registry-drift, the verify_drift sidecar)

export const RegistryDriftListQuery = z.object({
  lane: z.string().regex(/^[a-z][a-z0-9_]{0,39}$/, 'a lane name').optional().openapi({ description: 'Only this lane (src/executors/lanes.ts)' }),
  state: z.enum(['open', 'resolved', 'all']).default('open').openapi({ description: 'Open drifts (the default), resolved ones, or both' }),
  limit: pageLimit(500, 100),
});

const registryFact = {
  lane: z.string().openapi({ description: 'The lane whose configuration asserts the fact' }),
  chain_id: z.number().int(),
  subject: z.string().openapi({ description: 'What is checked, as the configuration names it: evm.tokens[USDC], evm.chains[1].cctp.message_transmitter' }),
  property: z.string().openapi({ description: 'Which of its facts: code, decimals(), symbol(), localDomain(), peers(30110)' }),
  address: z.string().openapi({ description: 'The contract address read' }),
  expected: z.string().openapi({ description: 'What the configuration says (code: the address holds contract code)' }),
};

export const RegistryDriftSchema = z
  .object({
    id: z.number().int(),
    ...registryFact,
    observed: z.string().openapi({ description: 'What the chain answered (none: no code; reverted; empty). Text is cut and its control characters escaped' }),
    first_seen: isoTime,
    last_seen: isoTime,
    resolved_at: isoTime.nullable(),
    resolution: z.enum(['matched', 'unconfigured']).nullable().openapi({ description: 'matched: the chain agrees again; unconfigured: nothing asserts it any more' }),
  })
  .openapi('RegistryDrift');

export const RegistryUnverifiedSchema = z
  .object({
    ...registryFact,
    error_code: z.string().openapi({ description: 'Why the chain gave no usable answer: RPC_TIMEOUT, RPC_UNREACHABLE, RPC_ERROR, RPC_HTTP_<status>, RPC_ANSWER_TOO_LARGE, RPC_ANSWER_MALFORMED' }),
    checked_at: isoTime,
  })
  .openapi('RegistryUnverified');

export const RegistryDriftListSchema = z
  .object({
    drifts: z.array(RegistryDriftSchema).openapi({ description: 'Open first, then by last sighting, newest first' }),
    unverified: z.array(RegistryUnverifiedSchema).openapi({ description: 'Facts whose latest check got no usable answer (neither drift nor agreement)' }),
    last_checked_at: isoTime.nullable().openapi({ description: 'The latest check of any fact; null before the first run' }),
  })
  .openapi('RegistryDriftList');

// ---------------------------------------------------------------------------------------------
// Template proposals (/v3/template-proposals; POST /v3/templates answers 202 with one)

export const ProposalIdParams = z.object({ id: idParam('id', 'Template proposal id') });

export const ProposalListQuery = z.object({
  state: z.enum(proposalStates).optional(),
  template_key: templateKeySchema.optional(),
  limit: pageLimit(200, 50),
  cursor: pageCursor,
});

export const ChallengeBody = z
  .strictObject({ reason: z.string().trim().min(1, 'a challenge needs a reason').max(2000) })
  .openapi('ChallengeRequest');

export const ProposalSchema = z
  .object({
    id: z.string().openapi(UUID_FORMAT),
    template_key: z.string(),
    state: z.enum(proposalStates),
    base_version: z.number().int().openapi({ description: 'The live version when proposed (0: none)' }),
    graph_hash: z.string(),
    system: z.boolean().openapi({ description: 'Installed by Ferry itself and finalized at once' }),
    proposed_by: z.string(),
    proposed_by_name: actorName,
    review_expires_at: isoTime,
    approved_by: z.string().nullable(),
    approved_by_name: actorName.nullable(),
    approved_at: nullableTime,
    challenge_ends_at: nullableTime,
    decided_by: z.string().nullable(),
    decided_by_name: actorName.nullable(),
    reason: z.string().nullable(),
    finalized_version: z.number().int().nullable(),
    created_at: isoTime,
    updated_at: isoTime,
  })
  .openapi('TemplateProposal');

export const ProposalListSchema = pageSchema('TemplateProposalList', 'proposals', ProposalSchema);

export const ProposalDetailSchema = z
  .object({
    proposal: ProposalSchema,
    definition: anyObject,
    live_version: z.number().int().nullable().openapi({ description: "The template's live version now (null: none)" }),
    diff: anyObject.openapi({ description: 'The definition against the live version: nodes added, removed, changed by field; edges; description' }),
    history: z.array(
      z.object({
        seq: z.number().int(),
        from: z.string(),
        to: z.string(),
        event: z.string(),
        payload: anyObject,
        actor: z.string(),
        actor_name: actorName,
        at: isoTime,
      }),
    ),
    replay: z.object({ ok: z.boolean(), state: z.string().nullable(), reason: z.string().nullable() }),
  })
  .openapi('TemplateProposalDetail');

export const TemplateProposedSchema = z
  .object({
    proposal: ProposalSchema,
    created: z.boolean().openapi({ description: 'False when the same graph was already proposed, and that proposal is returned' }),
  })
  .openapi('TemplateProposed');
// Principals and tokens (/v3/principals, /v3/tokens; token.admin)

const principalOrTokenName = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$/, 'must be 1-64 characters: letters, digits and . _ @ - (starting with a letter or digit)');
const yesNo = z.enum(['true', 'false']).optional();

export const PrincipalRefParams = z.object({
  principal: z.string().min(1).max(100).openapi({ param: { name: 'principal', in: 'path' }, description: 'Principal id or name' }),
});
export const TokenRefParams = z.object({
  token: z.string().min(1).max(100).openapi({ param: { name: 'token', in: 'path' }, description: 'Token id or name' }),
});
export const PrincipalListQuery = z.object({ include_disabled: yesNo });
export const TokenListQuery = z.object({
  principal: z.string().min(1).max(100).optional().openapi({ description: 'Only the tokens of this principal (id or name)' }),
  include_revoked: yesNo,
});

export const CreatePrincipalBody = z
  .strictObject({ name: principalOrTokenName, kind: z.enum(['person', 'service']).default('person') })
  .openapi('CreatePrincipalRequest');
export const CreateTokenBody = z
  .strictObject({
    principal: z.string().min(1).max(100).openapi({ description: 'The principal (id or name) the token belongs to; it must exist' }),
    role: z.enum(['viewer', 'requester', 'approver', 'operator', 'admin']),
    name: principalOrTokenName.optional().openapi({ description: 'Defaults to `<principal>.<role>`' }),
    expires_at: isoTime.optional().openapi({ description: 'When the token stops working (refused exactly like a revoked one); absent: never' }),
  })
  .openapi('CreateTokenRequest');

export const PrincipalSchema = z
  .object({
    id: z.string().openapi(UUID_FORMAT),
    name: z.string(),
    kind: z.enum(['person', 'service']),
    actor: z.string().openapi({ description: 'How rows record what it does', example: 'principal:00000000-0000-4000-8000-000000000000' }),
    created_at: isoTime,
    disabled_at: nullableTime,
  })
  .openapi('Principal');
export const PrincipalResultSchema = z.object({ principal: PrincipalSchema }).openapi('PrincipalResult');
export const PrincipalListSchema = z.object({ principals: z.array(PrincipalSchema) }).openapi('PrincipalList');

export const TokenSchema = z
  .object({
    id: z.string().openapi(UUID_FORMAT),
    name: z.string(),
    role: z.string(),
    principal_id: z.string().openapi(UUID_FORMAT),
    principal_name: z.string(),
    created_at: isoTime,
    last_used_at: nullableTime,
    expires_at: nullableTime,
    revoked_at: nullableTime,
  })
  .openapi('Token');
export const TokenResultSchema = z.object({ token: TokenSchema }).openapi('TokenResult');
export const CreatedTokenSchema = z
  .object({
    token: TokenSchema,
    secret: z.string().openapi({ description: 'The bearer token. Shown in this answer only: Ferry keeps its hash and cannot show it again' }),
  })
  .openapi('CreatedToken');
export const TokenListSchema = z.object({ tokens: z.array(TokenSchema) }).openapi('TokenList');

// Credential proposals (/v3/credential-proposals; token.admin): principals and tokens two admins make.

export const credentialProposalStateList = ['PROPOSED', 'CONFIRMED', 'REJECTED', 'EXPIRED'] as const;
export const CredentialProposalIdParams = z.object({ id: idParam('id', 'Credential proposal id') });
export const CredentialProposalListQuery = z.object({
  state: z.enum(credentialProposalStateList).optional(),
  limit: pageLimit(200, 50),
});
export const RejectCredentialBody = z
  .strictObject({ reason: z.string().trim().min(1).max(2000).optional() })
  .openapi('RejectCredentialProposalRequest');

export const CredentialProposalSchema = z
  .object({
    id: z.string().openapi(UUID_FORMAT),
    operation: z.enum(['principal.create', 'token.create']),
    subject: z.string().openapi({ description: 'The principal the change is about (its name)' }),
    request: z
      .object({
        name: z.string(),
        kind: z.string().optional(),
        principal: z.string().optional().openapi({ description: 'The principal id a token is for; absent: a new principal of the token name' }),
        role: z.string().optional(),
        expires_at: nullableTime.optional(),
      })
      .openapi({ description: 'What confirmation creates; never a secret' }),
    state: z.enum(credentialProposalStateList),
    proposed_by: z.string(),
    proposed_by_name: z.string(),
    review_expires_at: isoTime,
    decided_by: z.string().nullable(),
    decided_by_name: z.string().nullable(),
    decided_at: nullableTime,
    reason: z.string().nullable(),
    result_id: z.string().nullable().openapi({ description: 'The principal or token the confirmation created' }),
    created_at: isoTime,
    updated_at: isoTime,
  })
  .openapi('CredentialProposal');
export const CredentialProposalResultSchema = z
  .object({ proposal: CredentialProposalSchema })
  .openapi('CredentialProposalResult', { description: 'A change that waits for a second admin to confirm it' });
export const CredentialProposalListSchema = z.object({ proposals: z.array(CredentialProposalSchema) }).openapi('CredentialProposalList');
export const CredentialConfirmedSchema = z
  .object({
    proposal: CredentialProposalSchema,
    principal: PrincipalSchema.optional(),
    token: TokenSchema.optional(),
    secret: z.string().optional().openapi({ description: "A confirmed token's bearer secret: in this answer only, to hand to its principal" }),
  })
  .openapi('CredentialProposalConfirmed');
// Callback destinations (/v3/callback-destinations)

export const DestinationRefParams = z.object({
  id: z.string().min(1).max(100).openapi({ param: { name: 'id', in: 'path' }, description: 'Destination id or name' }),
});

export const CreateDestinationBody = z
  .strictObject({
    name: z
      .string()
      .regex(DESTINATION_NAME_PATTERN, 'name must be 1-63 lowercase letters, digits, "_", "." or "-", starting with a letter or digit')
      .openapi({ example: 'ledger-prod' }),
    url: z.string().min(1).max(2048).openapi({ format: 'uri' }),
    node_events: z.boolean().optional().openapi({
      description:
        'Also send a callback (event node_<state>, with a node object) on every node state change of the movements naming it; default false. Fixed at creation.',
    }),
  })
  .openapi('CreateCallbackDestinationRequest');

export const RotateSecretBody = z
  .strictObject({
    overlap_seconds: z
      .number()
      .int()
      .min(0)
      .max(MAX_OVERLAP_SECONDS)
      .optional()
      .openapi({ description: 'How long the previous secrets keep signing beside the new one; default 86400 (one day)' }),
  })
  .openapi('RotateCallbackSecretRequest');

export const DestinationSchema = z
  .object({
    id: z.string().openapi(UUID_FORMAT),
    name: z.string(),
    url: z.string(),
    status: z.enum(['active', 'disabled']),
    node_events: z.boolean().openapi({ description: 'Whether it also receives node callbacks (node_<state>)' }),
    created_by: z.string(),
    created_at: isoTime,
    disabled_by: z.string().nullable(),
    disabled_at: nullableTime,
    secret_created_at: nullableTime.openapi({ description: 'When the current signing secret was made' }),
    previous_secrets_expire_at: nullableTime.openapi({ description: 'End of a rotation overlap still running; null when only the current secret signs' }),
  })
  .openapi('CallbackDestination');

export const DestinationResultSchema = z.object({ destination: DestinationSchema }).openapi('CallbackDestinationResult');
export const DestinationListSchema = z.object({ destinations: z.array(DestinationSchema) }).openapi('CallbackDestinationList');
export const DestinationSecretSchema = z
  .object({
    destination: DestinationSchema,
    secret: z.string().openapi({ description: 'The signing secret, shown this once; Ferry cannot show it again' }),
  })
  .openapi('CallbackDestinationSecret');

// ---------------------------------------------------------------------------------------------
// Treasury policy (/v3/policy: the address book, the rule set, their proposals; docs/policy.md)

export const PolicyProposalIdParams = z.object({ id: idParam('id', 'Policy proposal id') });
export const BookEntryParams = z.object({
  name: z.string().regex(ENTRY_NAME_PATTERN, 'a book entry name').openapi({ param: { name: 'name', in: 'path' }, description: 'Address book entry name' }),
});
export const PolicyProposalListQuery = z.object({
  state: z.enum(policyProposalStates).optional(),
  kind: z.enum(['address_book', 'rule_set']).optional(),
  limit: pageLimit(200, 50),
});

export const BookEntryBody = addressBookEntrySchema.meta({ id: 'AddressBookEntryRequest' });
export const RuleSetBody = ruleSetSchema.meta({ id: 'RuleSetRequest' });
export const PolicyReasonBody = z
  .strictObject({ reason: z.string().trim().min(1, 'a reason is required').max(2000) })
  .openapi('PolicyReasonRequest');

export const BookEntrySchema = z
  .object({
    name: z.string(),
    network: z.string(),
    address: z.string(),
    tag: z.string().nullable(),
    owner: z.string(),
    kind: z.enum(['internal', 'external']),
    notes: z.string().nullable(),
    version: z.number().int(),
    proposal_id: z.string().openapi(UUID_FORMAT),
    updated_at: isoTime,
  })
  .openapi('AddressBookEntry');
export const BookSchema = z.object({ entries: z.array(BookEntrySchema) }).openapi('AddressBook');

export const LiveRuleSetSchema = z
  .object({
    version: z.number().int().nullable().openapi({ description: 'The live version; null: no rule set yet, movements are not policy-checked' }),
    rules: z.array(anyObject),
    limits: z.array(anyObject),
    proposal_id: z.string().nullable(),
    approved_by: z.string().nullable(),
    created_at: nullableTime,
  })
  .openapi('RuleSet');

export const PolicyProposalSchema = z
  .object({
    id: z.string().openapi(UUID_FORMAT),
    subject_kind: z.enum(['address_book', 'rule_set']),
    subject: z.string().openapi({ description: "The entry's name, or `rules`" }),
    change: anyObject.openapi({ description: 'put {entry}, remove {name}, or replace {base_version, rules, limits}' }),
    state: z.enum(policyProposalStates),
    proposed_by: z.string(),
    proposed_by_name: actorName,
    review_expires_at: isoTime,
    approved_by: z.string().nullable(),
    approved_by_name: actorName.nullable(),
    approved_at: nullableTime,
    challenge_ends_at: nullableTime.openapi({ description: 'The end of the cool-down: live from then on unless challenged' }),
    decided_by: z.string().nullable(),
    decided_by_name: actorName.nullable(),
    reason: z.string().nullable(),
    result_version: z.number().int().nullable().openapi({ description: 'What finalization wrote: the rule set version, or the entry version' }),
    created_at: isoTime,
    updated_at: isoTime,
  })
  .openapi('PolicyProposal');
export const PolicyProposalListSchema = z.object({ proposals: z.array(PolicyProposalSchema) }).openapi('PolicyProposalList');
export const PolicyProposalDetailSchema = z
  .object({
    proposal: PolicyProposalSchema,
    history: z.array(
      z.object({ seq: z.number().int(), from: z.string(), to: z.string(), event: z.string(), payload: anyObject, actor: z.string(), actor_name: actorName, at: isoTime }),
    ),
    replay: z.object({ ok: z.boolean(), state: z.string().nullable(), reason: z.string().nullable() }),
  })
  .openapi('PolicyProposalDetail');

export const PolicyTestBody = z
  .strictObject({
    template_key: templateKeySchema,
    template_version: z.number().int().min(1).max(2_147_483_647).optional(),
    intent: jsonObjectSchema,
    requester: principalOrTokenName.optional().openapi({ description: 'The principal (by name) that would create it; default: the caller' }),
    rule_set: ruleSetSchema.optional().meta({ description: 'A candidate rule set to test instead of the open proposal' }),
  })
  .openapi('PolicyTestRequest');

const PolicyVerdictSchema = z.object({
  rule_set_version: z.number().int().nullable(),
  rule_id: z.string().nullable(),
  action: z.string(),
  outcome: z.enum(['allowed', 'refused']),
  code: z.string().nullable().openapi({ description: 'The error code creating it would answer' }),
  message: z.string().nullable(),
  approvals_required: z.number().int().nullable(),
  approvers_from: z.array(z.string()).nullable(),
  prices: z.array(anyObject).openapi({ description: 'The prices its reference-currency rules read: asset, currency, answer and decimals, round and time; or the code of why none could be used' }),
  limits: z.array(
    z.object({
      limit_id: z.string(),
      currency: z.string().nullable().openapi({ description: 'A limit in a reference currency: used, total and max_amount are values in it; null: in the asset' }),
      destination: z.string().nullable(),
      source: z.string().nullable().openapi({ description: 'The source whose sum it is (per_source)' }),
      requester: z.string().nullable().openapi({ description: 'The requester whose sum it is (per_requester)' }),
      window_seconds: z.number().int(),
      max_amount: z.string(),
      used: z.string(),
      total: z.string().nullable(),
      exceeded: z.boolean(),
      price_code: z.string().optional().openapi({ description: 'Why a limit in a currency could not value its window (PRICE_STALE, ...)' }),
    }),
  ),
});
export const PolicyTestSchema = z
  .object({
    facts: anyObject.openapi({ description: 'The movement as the rules read it: template, lanes, asset, amount, sources, destination, book entry, requester' }),
    live: PolicyVerdictSchema,
    proposed: PolicyVerdictSchema.extend({
      proposal_id: z.string().nullable().openapi({ description: 'The open rule set proposal; null for a rule set given in the request' }),
      proposal_state: z.string().openapi({ description: 'PROPOSED or APPROVED; CANDIDATE for a rule set given in the request' }),
    }).nullable(),
  })
  .openapi('PolicyTest');
