import type { z } from '@hono/zod-openapi';
import { laneNamed } from '../executors/lanes.ts';
import type { ActorNames } from './actor-names.ts';
import type { Movement } from '../services/movements.ts';
import type { NodeState } from '../machines/node-machine.ts';
import type { MovementState } from '../machines/movement-machine.ts';
import type { AuditEvent } from '../persistence/audit.ts';
import type { CallbackRow } from '../persistence/callbacks.ts';
import type { MovementOverview } from '../persistence/inspection.ts';
import type { MovementRow, MovementSummaryRow, NodeRow, TransitionRow } from '../persistence/movements.ts';
import { executorKeyOf } from '../plan/bindings.ts';
import { hashedPlan, type CompiledPlan } from '../plan/compile.ts';
import type { ExecutorRosterRow, SignerRosterRow } from '../persistence/registry.ts';
import type { FerryConfig } from '../config.ts';
import { movementEffect, type EffectFacts, type EffectPolicy, type MovementEffectView } from './effect.ts';
import { nodeTransaction, type ExplorerUrls } from './explorer.ts';
import type { TemplateRow, TemplateSummary, TemplateVersionRecord, TemplateVersionSummary } from '../persistence/templates.ts';
import type {
  AuditEventSchema,
  CallbackSchema,
  ExecutorSchema,
  MovementDetailSchema,
  MovementNodeSchema,
  MovementSchema,
  MovementSummarySchema,
  SignerSchema,
  TemplateSummarySchema,
  TemplateVersionSchema,
  TemplateVersionSummarySchema,
  TransitionSchema,
} from './v3/schemas.ts';

/**
 * Rows as the API shows them: times as ISO 8601 strings, state columns under plain names, internal
 * bookkeeping (fingerprints, leases, payload bytes) left out. Typed by the response schemas, so a
 * view that drifts from the published contract does not compile. Views naming an actor take the
 * answer's ActorNames (../actor-names.ts) and show the display name beside the stable id.
 */

export const iso = (d: Date | string) => (d instanceof Date ? d.toISOString() : new Date(d).toISOString());
export const isoOrNull = (d: Date | string | null | undefined) => (d == null ? null : iso(d));

/**
 * What the caller may see beyond the movement itself. A callback URL says where an upstream system
 * listens (and may carry a path secret), so only those who run deliveries see it; everyone else
 * learns whether one is configured. A delivery's error class and HTTP status say which hosts and
 * ports inside the allowed networks answer (a port scanner for whoever picks the URL), so they too
 * are shown only to those who run deliveries; everyone else sees the coarse status.
 */
export interface Audience {
  callbackUrls: boolean;
  callbackErrors: boolean;
}

export function movementSummaryView(r: MovementSummaryRow, audience: Audience, names: ActorNames): z.infer<typeof MovementSummarySchema> {
  return {
    id: r.id,
    template_key: r.template_key,
    template_version: r.template_version,
    state: r.request_state as MovementState,
    intent: r.intent,
    input_params: r.input_params,
    compiled_plan_hash: r.compiled_plan_hash,
    approval_status: r.approval_status,
    approval_quorum: r.approval_quorum,
    approvals: (r.approvals ?? []).map((a) => ({ ...a, by_name: names(a.by) })),
    decided_by: r.decided_by,
    decided_by_name: r.decided_by === null ? null : names(r.decided_by),
    expires_at: isoOrNull(r.expires_at),
    current_frontier: r.current_frontier ?? [],
    callback_configured: r.callback_url !== null,
    callback_url: audience.callbackUrls ? r.callback_url : null,
    idempotency_key: r.idempotency_key,
    created_by: r.created_by,
    created_by_name: names(r.created_by),
    created_at: iso(r.created_at),
    updated_at: iso(r.updated_at),
    row_version: r.row_version,
    policy: policyView(r),
  };
}

/** What the treasury policy recorded on the movement; null on movements from before it. */
export function policyView(r: MovementSummaryRow): z.infer<typeof MovementSummarySchema>['policy'] {
  if (!r.policy_action) return null;
  return {
    rule_set_version: r.policy_rule_set_version ?? null,
    rule_id: r.policy_rule_id ?? null,
    action: r.policy_action,
    asset: r.policy_asset ?? null,
    amount: r.policy_amount == null ? null : String(r.policy_amount),
    destination_entry: r.policy_destination_entry ?? null,
    sources: r.policy_sources ?? null,
    approvers_from: r.policy_approvers?.principals ?? null,
  };
}

/**
 * What the effect and the node cards are drawn with beyond the rows: display names from the
 * configuration (chains, exchange accounts), the signers' observed addresses, and the explorer links.
 */
export interface EffectDisplay {
  facts: EffectFacts;
  explorerUrls: ExplorerUrls;
}

export const NO_DISPLAY: EffectDisplay = { facts: {}, explorerUrls: {} };

export function effectDisplay(config: Pick<FerryConfig, 'explorerUrls' | 'file'> & { evmMaxFeePerGasCapWei?: string }, signers: readonly SignerRosterRow[] = []): EffectDisplay {
  const chainNames = new Map<number, string>();
  for (const c of config.file?.evm?.chains ?? []) if (c.name) chainNames.set(c.chain_id, c.name);
  const accountExchanges = new Map((config.file?.cex?.accounts ?? []).map((a) => [a.key, a.exchange] as const));
  const signerAddresses = new Map<string, string>();
  for (const s of signers) {
    const address = s.observed_signer_address ?? s.expected_signer_address;
    if (address) signerAddresses.set(s.signer_key, address);
  }
  return {
    facts: { chainNames, accountExchanges, signerAddresses, evm: config.file?.evm, fallbackFeeCapWei: config.evmMaxFeePerGasCapWei },
    explorerUrls: config.explorerUrls ?? {},
  };
}

/** The policy's decision as the effect shows it (what was decided, not the facts it was decided on). */
function effectPolicy(p: ReturnType<typeof policyView>): EffectPolicy | null {
  if (!p) return null;
  return { rule_set_version: p.rule_set_version, rule_id: p.rule_id, action: p.action, destination_entry: p.destination_entry, approvers_from: p.approvers_from };
}

/** The movement's effect (./effect.ts): the same for /v3, /inspect, the CLI and /ui. */
export function effectView(r: MovementRow, nodes: readonly NodeRow[], display: EffectDisplay): MovementEffectView {
  return movementEffect({
    plan: r.compiled_plan,
    intent: r.intent,
    compiledPlanHash: r.compiled_plan_hash,
    nodes,
    policy: effectPolicy(policyView(r)),
    facts: display.facts,
  });
}

export function nodeView(n: NodeRow, display: EffectDisplay = NO_DISPLAY, intent: Record<string, unknown> = {}): z.infer<typeof MovementNodeSchema> {
  return {
    id: n.id,
    node_key: n.node_key,
    node_kind: n.node_kind,
    action_type: n.action_type,
    state: n.node_state as NodeState,
    retryable: n.retryable,
    attempt_no: n.attempt_no,
    predecessor_keys: n.predecessor_keys,
    successor_keys: n.successor_keys,
    executor_binding: n.executor_binding,
    signer_binding: n.signer_binding,
    config: n.config,
    timeout_policy: n.timeout_policy,
    provider_state: n.provider_state,
    provider_refs: n.provider_refs,
    provider_ref_id: n.provider_ref_id,
    error_code: n.error_code,
    error_detail: n.error_detail,
    manual_intervention_required: n.manual_intervention_required ?? false,
    expected_effect: (n.expected_effect as Record<string, unknown> | null | undefined) ?? null,
    transaction: nodeTransaction(n, intent, display.explorerUrls),
    started_at: isoOrNull(n.started_at),
    next_observe_at: isoOrNull(n.next_observe_at),
    last_observed_at: isoOrNull(n.last_observed_at),
    dispatch_after: isoOrNull(n.dispatch_after),
    updated_at: iso(n.updated_at),
  };
}

export function movementView(r: MovementRow, audience: Audience, names: ActorNames): z.infer<typeof MovementSchema> {
  return {
    ...movementSummaryView(r, audience, names),
    compiled_plan: r.compiled_plan,
    hashed_plan: hashedPlanOf(r.compiled_plan as unknown as CompiledPlan, r.intent, r.input_params) as never,
  };
}

/** The object compiled_plan_hash covers (src/plan/compile.ts, hashedPlan); null for a plan too damaged to read. */
function hashedPlanOf(plan: CompiledPlan, intent: Record<string, unknown>, inputParams: Record<string, unknown>): Record<string, unknown> | null {
  try {
    return hashedPlan(plan, intent, inputParams) as unknown as Record<string, unknown>;
  } catch {
    return null;
  }
}

export function movementDetailView(m: Movement, audience: Audience, names: ActorNames, display: EffectDisplay = NO_DISPLAY): z.infer<typeof MovementDetailSchema> {
  return {
    movement: movementView(m.movement, audience, names),
    nodes: m.nodes.map((n) => nodeView(n, display, m.movement.intent)),
    effect: effectView(m.movement, m.nodes, display),
  };
}

export type TransitionView = z.infer<typeof TransitionSchema>;

/** One transition, the same in /v3 pages, /inspect answers and the event stream. */
export function transitionView(t: TransitionRow, names: ActorNames): TransitionView {
  return {
    id: t.id,
    entity_type: t.entity_type,
    entity_id: t.entity_id,
    node_key: t.node_key,
    seq: t.seq,
    // The log stores '' for an entity's creation (event xstate.init): there was no state before.
    from_state: t.from_state === '' ? null : t.from_state,
    to_state: t.to_state,
    event_type: t.event_type,
    event_payload: t.event_payload,
    actor: t.actor,
    actor_name: names(t.actor),
    machine_id: t.machine_id,
    machine_version: t.machine_version,
    at: iso(t.at),
  };
}

// ---------------------------------------------------------------------------------------------
// /inspect: the same views, with what the visualizer and the CLI draw with beside them

/** A movement of /inspect/movements: the /v3 summary and its node counts per state. */
export function movementOverviewView(m: MovementOverview, audience: Audience, names: ActorNames) {
  return {
    ...movementSummaryView(m, audience, names),
    node_states: m.node_states,
    nodes_total: m.nodes_total,
    card: movementCard(m),
  };
}

/**
 * What a list card shows of a movement: the asset, amount and destination its intent names (the
 * intent is checked against the nodes' tokens at creation), and the error of a failed node.
 */
export function movementCard(m: MovementOverview) {
  const intent = m.intent ?? {};
  const str = (v: unknown) => (typeof v === 'string' && v.length > 0 ? v : typeof v === 'number' ? String(v) : null);
  const d = intent.destination;
  const destination = str(d) ?? (d !== null && typeof d === 'object' && !Array.isArray(d) ? str((d as Record<string, unknown>).address) : null);
  return {
    asset: str(intent.asset),
    amount: str(intent.amount),
    destination,
    error: m.failed_error_code ? { node_key: m.failed_node_key, code: m.failed_error_code } : null,
  };
}

/** The movement of /inspect/movements/{id}: the /v3 movement and the machine it runs on. */
export function inspectedMovementView(r: MovementRow, audience: Audience, names: ActorNames) {
  return {
    ...movementView(r, audience, names),
    template_version_id: r.template_version_id,
    machine_id: r.machine_id,
    machine_version: r.machine_version,
  };
}

/** A node of /inspect/movements/{id}: the /v3 node, its machine, executor and bookkeeping. */
export function inspectedNodeView(n: NodeRow, display: EffectDisplay = NO_DISPLAY, intent: Record<string, unknown> = {}) {
  return {
    ...nodeView(n, display, intent),
    executor_key: executorKeyOf(n.executor_binding),
    machine_id: n.machine_id,
    machine_version: n.machine_version,
    row_version: n.row_version,
    idempotency_key: n.idempotency_key,
    observe_count: n.observe_count,
    created_at: iso(n.created_at),
  };
}

export function templateSummaryView(t: TemplateSummary | TemplateRow): z.infer<typeof TemplateSummarySchema> {
  return {
    template_key: t.template_key,
    description: t.description,
    latest_version: t.latest_version,
    created_at: iso(t.created_at),
    updated_at: iso(t.updated_at),
  };
}

export function templateVersionSummaryView(v: TemplateVersionSummary, names: ActorNames): z.infer<typeof TemplateVersionSummarySchema> {
  return { version: v.version, graph_hash: v.graph_hash, created_by: v.created_by, created_by_name: names(v.created_by), created_at: iso(v.created_at) };
}

export function templateVersionView(v: TemplateVersionRecord, names: ActorNames): z.infer<typeof TemplateVersionSchema> {
  return {
    template_key: v.template_key,
    version: v.version,
    graph_hash: v.graph_hash,
    risk_controls: v.risk_controls,
    intent_schema: v.intent_schema ?? null,
    created_by: v.created_by,
    created_by_name: names(v.created_by),
    created_at: iso(v.created_at),
    nodes: v.nodes.map((n) => ({
      node_key: n.node_key,
      node_kind: n.node_kind,
      action_type: n.action_type,
      executor_binding: n.executor_binding,
      signer_binding: n.signer_binding,
      config: n.config,
      timeout_policy: n.timeout_policy,
      retryable: n.retryable,
      position: n.position,
    })),
    edges: v.edges,
  };
}

export function executorView(e: ExecutorRosterRow): z.infer<typeof ExecutorSchema> {
  return {
    executor_key: e.executor_key,
    lane: e.lane,
    docs: laneNamed(e.lane)?.docs ?? null,
    status: e.status,
    health_state: e.health_state,
    health_detail: e.health_detail,
    last_health_checked_at: isoOrNull(e.last_health_checked_at),
    created_at: iso(e.created_at),
    updated_at: iso(e.updated_at),
  };
}

export function signerView(s: SignerRosterRow, names: ActorNames): z.infer<typeof SignerSchema> {
  return {
    signer_key: s.signer_key,
    status: s.status,
    health_state: s.health_state,
    health_detail: s.health_detail,
    last_health_checked_at: isoOrNull(s.last_health_checked_at),
    observed_signer_address: s.observed_signer_address,
    expected_signer_address: s.expected_signer_address,
    expected_set_by: s.expected_set_by,
    expected_set_by_name: s.expected_set_by === null ? null : names(s.expected_set_by),
    expected_set_at: isoOrNull(s.expected_set_at),
    identity_posture: s.identity_posture,
    created_at: iso(s.created_at),
    updated_at: iso(s.updated_at),
  };
}

export function callbackView(c: CallbackRow, audience: Audience): z.infer<typeof CallbackSchema> {
  return {
    id: c.id,
    movement_id: c.request_id,
    event_type: c.event_type,
    node_key: c.node_key,
    callback_url: audience.callbackUrls ? c.callback_url : null,
    destination_id: c.destination_id ?? null,
    status: c.status,
    attempts: c.attempts,
    max_attempts: c.max_attempts,
    redrive_count: c.redrive_count,
    next_attempt_at: iso(c.next_attempt_at),
    last_attempt_at: isoOrNull(c.last_attempt_at),
    last_status_code: audience.callbackErrors ? c.last_status_code : null,
    last_error: audience.callbackErrors ? c.last_error : null,
    sent_at: isoOrNull(c.sent_at),
    callback_timestamp: Number(c.callback_timestamp),
    callback_nonce: c.callback_nonce,
    payload: c.payload,
    created_at: iso(c.created_at),
  };
}

export function auditEventView(e: AuditEvent, names: ActorNames): z.infer<typeof AuditEventSchema> {
  return {
    id: e.id,
    outbox_id: e.outbox_id,
    actor: e.actor,
    actor_name: names(e.actor),
    action: e.action,
    entity_type: e.entity_type,
    entity_id: e.entity_id,
    details: e.details,
    occurred_at: e.occurred_at,
    prev_hash: e.prev_hash,
    hash: e.hash,
  };
}
