import type { AnyStateMachine } from 'xstate';
import { step } from '../machines/step.ts';
import { InvalidTransitionError, LeaseLostError, SnapshotIncompatibleError, TransitionConflictError } from '../errors.ts';
import {
  NODE_MACHINE_ID,
  NODE_MACHINE_VERSION,
  nodeMachine,
  type NodeContext,
  type NodeEvent,
} from '../machines/node-machine.ts';
import { isManualNode, summarizeNodes } from '../machines/node-summary.ts';
import {
  MOVEMENT_MACHINE_ID,
  MOVEMENT_MACHINE_VERSION,
  movementMachine,
  type MovementContext,
  type MovementEvent,
} from '../machines/movement-machine.ts';
import { movementDurationSeconds, transitionsTotal } from '../metrics.ts';
import type { NewArtifact } from '../persistence/artifacts.ts';
import { writeAudit, type AuditEntry } from '../persistence/audit.ts';
import { attemptKey } from '../ids.ts';
import { afterCommit, withTransaction, type Client, type Pool, type Queryable } from '../persistence/db.ts';
import { log as rootLog } from '../log.ts';
import type { Logger } from 'pino';
import {
  lockMovements,
  writeGroup,
  type LockedMovement,
  type NewTransitionRow,
  type NodeWriteRow,
  type MovementWriteRow,
} from '../persistence/group-commit.ts';
import type { NodeRow, MovementRow, TransitionRow } from '../persistence/movements.ts';

/**
 * The one durable transition function, batched. Delivering events to movements and nodes is, inside
 * the caller's transaction:
 *   lock every movement the batch touches with all its nodes (one statement, movement id order, so
 *   writers never deadlock); for each event in turn, rebuild the machine snapshot from the row as
 *   this batch left it and compute the next one with XState's pure transition(); refuse an event the
 *   machine does not accept (InvalidTransitionError, for that event only) or whose dispatch lease is
 *   gone (LeaseLostError); turn the machine's messages (successors unblocked, movement state derived,
 *   callbacks) into more transitions of the same batch; then write every changed row, one log row
 *   per transition and the artifacts of accepted events in one set-based statement, which also
 *   queues one NOTIFY for the commit (see persistence/group-commit.ts).
 *
 * A single delivery is a batch of one. The result of every event is its own: a refused event leaves
 * no row, no log entry and no artifact, and the batch's other events are written.
 */

/** What a committed transition tells listeners on EVENTS_CHANNEL (one notice per entity state reached). */
export interface EventNotice {
  request_id: string;
  entity: 'request' | 'node';
  node_id?: string;
  state: string;
  /** The movement's write_version once the commit that sent this is in (absent from older writers). */
  write_version?: number;
}

export const EVENTS_CHANNEL = 'ferry_events';

export interface CallbackInput {
  movement: MovementRow;
  eventType: string;
  nodeKey?: string | null;
  /** For a node callback (node_<state>): the node's change. */
  node?: NodeChange;
  occurredAt: string;
}

/** What a node callback says of the node's change. */
export interface NodeChange {
  node_id: string;
  node_key: string;
  from_state: string;
  node_state: string;
  attempt_no: number;
  error_code: string | null;
}

/** Writes one callback outbox row (and its delivery job) inside the transaction. */
export type CallbackSink = (client: Queryable, input: CallbackInput) => Promise<unknown>;

export interface TransitionDeps {
  callbacks: CallbackSink;
  /** Where the one info line per committed transition goes; unset: Ferry's logger. */
  log?: Logger;
  /**
   * The actor runtime's lease holder of this process: a write of a movement whose live lease it
   * holds extends that lease (persistence/group-commit.ts), so a movement being worked on never
   * waits on the renewal timer, which is then only needed by actors that wait.
   */
  lease?: { owner: string; ttlSeconds: number };
}

export interface DeliverOptions {
  actor: string;
  deps: TransitionDeps;
  /** Return null instead of throwing when the machine does not accept the event. */
  ifAccepted?: boolean;
}

export interface Delivered {
  from: string;
  to: string;
  transition: TransitionRow;
}

export interface DeliveredToNode extends Delivered {
  node: NodeRow;
}

export interface DeliveredToMovement extends Delivered {
  movement: MovementRow;
}

/** One event for one node in a batch. */
export interface NodeItem {
  nodeId: string;
  event: NodeEvent;
  /** The lease token this write belongs to: refused with LeaseLostError unless the node still holds it. */
  fence?: string | null;
  /** A claim: the node takes this lease token with the transition. */
  lease?: string | null;
  /** Written only if the event is accepted (and fenced writes only if the lease holds). */
  artifacts?: NewArtifact[];
  /** Audit rows of this event (e.g. a signer's refusal), written with it only if it is accepted. */
  audits?: AuditEntry[];
  actor?: string;
}

export interface MovementItem {
  movementId: string;
  event: MovementEvent;
  actor?: string;
}

export type Refusal = InvalidTransitionError | LeaseLostError;

/** A node a batch unblocked and, as asked by `claimUnblocked`, claimed in the same commit. */
export interface CarriedClaim {
  node: NodeRow;
  movement: MovementRow;
  /** Every node of the movement as the commit left them (for the execution context). */
  nodes: NodeRow[];
  lease: string;
  /** Set when the claim is still to be written, with the dispatch's commit (a movement actor's first claim). */
  unwritten?: UnwrittenClaim;
}

/**
 * A claim computed over held rows and not yet written (see previewHeld): `held` is what the
 * database holds, and the items are written ahead of the dispatch's own, in its commit.
 */
export interface UnwrittenClaim {
  held: LockedMovement;
  movements: MovementItem[];
  nodes: NodeItem[];
  /** Artifacts those items store (a predecessor's result): the claimed node's context reads them. */
  artifacts?: NewArtifact[];
}

export interface BatchOptions {
  actor: string;
  deps: TransitionDeps;
  /**
   * Offered each node this batch made READY whose request is EXECUTING and has no other node in
   * dispatch; a returned token claims it (DISPATCH_CLAIMED) in the same commit, so the caller can
   * carry the movement onward without waiting for a NOTIFY.
   */
  claimUnblocked?: (node: NodeRow) => string | null;
  /**
   * The movements (with all their nodes) as the caller's own last commit left them. When they cover
   * every movement the batch touches, the batch skips the locking re-read: its write is fenced by
   * the write_version of each (see persistence/group-commit.ts) and a movement written since makes
   * it throw TransitionConflictError, after which the caller delivers again without `held`.
   */
  held?: LockedMovement[];
}

export interface BatchResult {
  nodes: (DeliveredToNode | Refusal)[];
  movements: (DeliveredToMovement | Refusal)[];
  claimed: CarriedClaim[];
  /** Every node of a movement the batch locked, as the batch left them. */
  nodesOf(movementId: string): NodeRow[];
  /** A request the batch locked, as the batch left it. */
  movementOf(movementId: string): MovementRow;
}

// ---------------------------------------------------------------------------------------------
// Row <-> context

const iso = (d: Date | null) => (d ? d.toISOString() : null);

export function nodeContextFromRow(row: NodeRow): NodeContext {
  return {
    nodeKind: row.node_kind,
    actionType: row.action_type,
    retryable: row.retryable,
    attemptNo: row.attempt_no,
    startedAt: iso(row.started_at),
    providerState: row.provider_state,
    providerRefs: row.provider_refs ?? {},
    providerRefId: row.provider_ref_id,
    nextObserveAt: iso(row.next_observe_at),
    lastObservedAt: iso(row.last_observed_at),
    observeCount: row.observe_count,
    dispatchAfter: iso(row.dispatch_after),
    errorCode: row.error_code,
    errorDetail: row.error_detail,
    manualInterventionRequired: row.manual_intervention_required ?? false,
  };
}

export function movementContextFromRow(row: MovementRow): MovementContext {
  return {
    createdBy: row.created_by,
    quorum: row.approval_quorum,
    approvals: row.approvals ?? [],
    approvalStatus: row.approval_status,
    decidedBy: row.decided_by,
    expiresAt: iso(row.expires_at),
  };
}

// ---------------------------------------------------------------------------------------------
// Public entry points

export async function deliverMovementEvent(
  client: Client,
  movementId: string,
  event: MovementEvent,
  opts: DeliverOptions,
): Promise<DeliveredToMovement | null> {
  const result = await deliverBatch(client, { movements: [{ movementId, event, actor: opts.actor }] }, opts);
  return single(result.movements[0], opts);
}

export async function deliverNodeEvent(
  client: Client,
  nodeId: string,
  event: NodeEvent,
  opts: DeliverOptions,
): Promise<DeliveredToNode | null> {
  const result = await deliverBatch(client, { nodes: [{ nodeId, event, actor: opts.actor }] }, opts);
  return single(result.nodes[0], opts);
}

function single<T>(r: T | Refusal, opts: DeliverOptions): T | null {
  if (r instanceof InvalidTransitionError || r instanceof LeaseLostError) {
    if (opts.ifAccepted && r instanceof InvalidTransitionError) return null;
    throw r;
  }
  return r;
}

/**
 * Delivers request events, then node events, in the order given, in the caller's transaction, and
 * writes the lot with one statement. Each event's result is its own (a delivery or a refusal).
 */
export async function deliverBatch(
  client: Client,
  items: { movements?: MovementItem[]; nodes?: NodeItem[] },
  opts: BatchOptions,
): Promise<BatchResult> {
  const movementItems = items.movements ?? [];
  const nodeItems = items.nodes ?? [];
  const b = new Batch(opts);
  const held = opts.held && covers(opts.held, movementItems, nodeItems) ? opts.held : null;
  if (held) {
    for (const m of held) b.load(m.movement, m.nodes, m.movement.write_version);
  } else {
    const locked = await lockMovements(
      client,
      movementItems.map((i) => i.movementId),
      nodeItems.map((i) => i.nodeId),
    );
    for (const m of locked) b.load(m.movement, m.nodes, null);
  }

  const movementEvents = movementItems.map((i) => b.movementEvent(i.movementId, i.event, i.actor ?? opts.actor));
  const nodes = nodeItems.map((i) => b.nodeEvent(i, i.actor ?? opts.actor));
  b.derive();
  b.carryOnward();
  await b.flush(client);
  return batchResult(b, movementEvents, nodes);
}

/**
 * deliverBatch over one movement's held rows, without a transaction when it can: the batch is
 * computed in memory, and when its write is the group statement alone (no callback or audit rows)
 * that statement runs in autocommit, one round trip in all. It is all or nothing by itself
 * (persistence/group-commit.ts), and fenced by the movement's write_version: a movement written
 * since throws TransitionConflictError, with nothing written. Otherwise it runs in a transaction.
 */
export async function deliverHeld(
  pool: Pool,
  items: { movements?: MovementItem[]; nodes?: NodeItem[] },
  opts: BatchOptions & { held: LockedMovement[] },
): Promise<BatchResult> {
  const movementItems = items.movements ?? [];
  const nodeItems = items.nodes ?? [];
  if (opts.held.length !== 1 || !covers(opts.held, movementItems, nodeItems)) {
    return withTransaction(pool, (client) => deliverBatch(client, items, opts));
  }
  const b = new Batch(opts);
  for (const m of opts.held) b.load(m.movement, m.nodes, m.movement.write_version);
  const movementEvents = movementItems.map((i) => b.movementEvent(i.movementId, i.event, i.actor ?? opts.actor));
  const nodes = nodeItems.map((i) => b.nodeEvent(i, i.actor ?? opts.actor));
  b.derive();
  b.carryOnward();
  await flushHeld(pool, b);
  return batchResult(b, movementEvents, nodes);
}

/**
 * What the items would leave one held movement as, computed without writing anything; null when
 * the machines refuse one of them. A movement actor prepares its first node over a claim computed
 * this way and writes the claim with the node's SUBMITTING: one statement less, and nothing is
 * lost by a crash in between (the node is still READY in the database, and prepare has no effect
 * outside Ferry's own rows).
 */
export function previewHeld(held: LockedMovement, items: { movements?: MovementItem[]; nodes?: NodeItem[] }, opts: BatchOptions): LockedMovement | null {
  const r = previewBatch(held, items, opts);
  if (![...r.movements, ...r.nodes].every((x) => !(x instanceof Error))) return null;
  return { movement: r.movementOf(held.movement.id), nodes: r.nodesOf(held.movement.id) };
}

/**
 * The result the items would have over one held movement (refusals, the claims `claimUnblocked`
 * makes, the rows as left), computed without writing anything.
 */
export function previewBatch(held: LockedMovement, items: { movements?: MovementItem[]; nodes?: NodeItem[] }, opts: BatchOptions): BatchResult {
  const b = new Batch(opts);
  b.load(held.movement, held.nodes, held.movement.write_version);
  const movementEvents = (items.movements ?? []).map((i) => b.movementEvent(i.movementId, i.event, i.actor ?? opts.actor));
  const nodes = (items.nodes ?? []).map((i) => b.nodeEvent(i, i.actor ?? opts.actor));
  b.derive();
  b.carryOnward();
  return batchResult(b, movementEvents, nodes);
}

/**
 * Writes a batch computed over held rows: the group statement alone in autocommit, or in a
 * transaction when the batch also writes callback or audit rows.
 */
export async function flushHeld(pool: Pool, b: Batch): Promise<void> {
  if (b.needsTransaction()) {
    await withTransaction(pool, (client) => b.flush(client));
  } else {
    const lines: (() => void)[] = [];
    await b.flush(pool, (fn) => lines.push(fn));
    for (const fn of lines) fn();
  }
}

/** The results of one caller's events in a batch (all of them, or those at `movements` and `nodes`). */
export function batchResult(b: Batch, movementEvents: (Pending | Refusal)[], nodes: (Pending | Refusal)[], movementIds?: Set<string>): BatchResult {
  return {
    movements: movementEvents.map((r) => (r instanceof Pending ? b.deliveredToMovement(r) : r)),
    nodes: nodes.map((r) => (r instanceof Pending ? b.deliveredToNode(r) : r)),
    claimed: b.claims
      .filter((c) => !movementIds || movementIds.has(c.movementId))
      .map((c) => ({ node: b.nodeRow(c.nodeId), movement: b.movementRow(c.movementId), nodes: b.siblings(c.movementId), lease: c.lease })),
    nodesOf: (movementId) => b.siblings(movementId),
    movementOf: (movementId) => b.movementRow(movementId),
  };
}

/** Whether the held movements hold every movement and node the items name. */
export function covers(held: LockedMovement[], movements: MovementItem[], nodes: NodeItem[]): boolean {
  const movementIds = new Set(held.map((m) => m.movement.id));
  const nodeIds = new Set(held.flatMap((m) => m.nodes.map((n) => n.id)));
  return movements.every((i) => movementIds.has(i.movementId)) && nodes.every((i) => nodeIds.has(i.nodeId));
}

// ---------------------------------------------------------------------------------------------

/** The snapshot a row stands for; a row written by another machine or version is refused, not guessed at. */
function resolve<M extends AnyStateMachine>(machine: M, id: string, row: { machine_id: string; machine_version: string }, value: string, context: unknown) {
  if (row.machine_id !== machine.id || row.machine_version !== machine.version) {
    throw new SnapshotIncompatibleError(machine.id, id, `stored ${row.machine_id}@${row.machine_version}, running ${machine.id}@${machine.version}`);
  }
  try {
    return machine.resolveState({ value, context } as never);
  } catch (err) {
    throw new SnapshotIncompatibleError(machine.id, id, err);
  }
}

interface Entity<Row> {
  row: Row;
  fromState: string;
  fromVersion: number;
  dirty: boolean;
  /** A movement read without a lock: the write_version its write must still find (else null). */
  expectedWrite?: number | null;
}

/** The movement states that end a run of it (FAILED may be retried, and then ends again). */
const MOVEMENT_ENDS = new Set(['COMPLETED', 'FAILED', 'CANCELLED', 'REJECTED', 'EXPIRED']);

/** An accepted transition waiting for its log row id and time. */
export class Pending {
  id = 0;
  at = new Date(0);
  constructor(
    readonly index: number,
    readonly row: NewTransitionRow,
  ) {}
}

interface QueuedCallback {
  movementId: string;
  eventType: string;
  nodeKey: string | null;
  node?: NodeChange;
  /** The transition whose time is the callback's occurred_at. */
  at: Pending;
}

const SETTLED = new Set(['COMPLETED', 'SKIPPED']);
const TERMINAL_OR_WAITING = new Set(['BLOCKED', 'COMPLETED', 'SKIPPED', 'CANCELLED', 'FAILED']);
const IN_DISPATCH = new Set(['PREPARING', 'AWAITING_SIGNATURE', 'SUBMITTING']);

/**
 * What a person following a movement in the log needs of one transition: which movement and node,
 * from and to, the attempt, and where the provider has it (transaction hash or provider reference),
 * with the error code when there is one. Never the event payload (it may hold provider answers).
 */
function transitionLine(t: NewTransitionRow, node: NodeRow | undefined): Record<string, unknown> {
  const line: Record<string, unknown> = { entity: t.entity_type, movement_id: t.request_id, from: t.from_state, to: t.to_state, event: t.event_type, actor: t.actor };
  if (t.entity_type !== 'node' || !node) return line;
  const refs = (node.provider_refs ?? {}) as Record<string, unknown>;
  return {
    ...line,
    node_id: t.entity_id,
    node_key: t.node_key,
    attempt: node.attempt_no,
    ...(typeof refs.tx_hash === 'string' ? { tx_hash: refs.tx_hash } : {}),
    ...(node.provider_ref_id ? { provider_ref: node.provider_ref_id } : {}),
    ...(node.error_code ? { error_code: node.error_code } : {}),
  };
}

/** Exported for the group writer (group-writer.ts), which merges several callers into one batch, and for the model check (test/model), which drives it without a database. */
export class Batch {
  readonly movements = new Map<string, Entity<MovementRow>>();
  readonly nodes = new Map<string, Entity<NodeRow>>();
  readonly nodesOfMovement = new Map<string, string[]>();
  readonly transitions: Pending[] = [];
  readonly callbacks: QueuedCallback[] = [];
  readonly artifacts: NewArtifact[] = [];
  readonly audits: AuditEntry[] = [];
  /** What this batch's NOTIFY tells listeners, per entity changed (the movement's write_version is added at flush). */
  readonly notifications = new Map<string, Omit<EventNotice, 'write_version'>>();
  readonly deriveMovements = new Set<string>();
  readonly unblocked: string[] = [];
  readonly claims: { nodeId: string; movementId: string; lease: string }[] = [];

  constructor(readonly opts: BatchOptions) {}

  load(movement: MovementRow, nodes: NodeRow[], expectedWrite: number | null) {
    this.movements.set(movement.id, { row: movement, fromState: movement.request_state, fromVersion: movement.row_version, dirty: false, expectedWrite });
    this.nodesOfMovement.set(movement.id, nodes.map((n) => n.id));
    for (const n of nodes) this.nodes.set(n.id, { row: n, fromState: n.node_state, fromVersion: n.row_version, dirty: false });
  }

  nodeRow = (id: string) => this.nodes.get(id)!.row;
  movementRow = (id: string) => this.movements.get(id)!.row;
  siblings = (movementId: string) => (this.nodesOfMovement.get(movementId) ?? []).map(this.nodeRow);

  #stamped(n: Omit<EventNotice, 'write_version'>): EventNotice {
    const version = this.movements.get(n.request_id)?.row.write_version;
    return version === undefined ? n : { ...n, write_version: Number(version) + 1 };
  }

  /** One notice per state an entity passes through (a state reached twice in one batch is told once, as before). */
  #notice(n: Omit<EventNotice, 'write_version'>) {
    const key = `${n.entity}:${n.node_id ?? n.request_id}:${n.state}`;
    this.notifications.delete(key);
    this.notifications.set(key, n);
  }

  #log(t: Omit<NewTransitionRow, 'event_payload' | 'event_type'>, event: { type: string }): Pending {
    const p = new Pending(this.transitions.length, { ...t, event_type: event.type, event_payload: eventPayload(event) });
    this.transitions.push(p);
    return p;
  }

  // -------------------------------------------------------------------------------------------
  // Movements

  movementEvent(movementId: string, event: MovementEvent, actor: string): Pending | Refusal {
    const e = this.movements.get(movementId);
    if (!e) return new InvalidTransitionError(MOVEMENT_MACHINE_ID, movementId, 'MISSING', 'lock');
    const row = e.row;
    // Built only when needed: derivations that change nothing are refused on every batch.
    const refusal = () => new InvalidTransitionError(MOVEMENT_MACHINE_ID, movementId, row.request_state, event.type);
    const prev = resolve(movementMachine, movementId, row, row.request_state, movementContextFromRow(row));
    if (prev.status !== 'active') return refusal();
    const [next, actions] = step(movementMachine, prev, event);
    if (next === prev) return refusal();

    const from = row.request_state;
    const to = String(next.value);
    const ctx = next.context;
    e.row = {
      ...row,
      request_state: to,
      approval_status: ctx.approvalStatus,
      approvals: ctx.approvals,
      decided_by: ctx.decidedBy,
      row_version: row.row_version + 1,
    };
    e.dirty = true;
    const logged = this.#log(
      { machine_id: MOVEMENT_MACHINE_ID, machine_version: MOVEMENT_MACHINE_VERSION, entity_type: 'request', entity_id: movementId, request_id: movementId, node_key: null, seq: e.row.row_version, from_state: from, to_state: to, actor },
      event,
    );
    this.#notice({ request_id: movementId, entity: 'request', state: to });
    transitionsTotal.inc({ machine: MOVEMENT_MACHINE_ID, from, to });

    if (to !== from) this.#callback(movementId, `request_${to.toLowerCase()}`, null, logged);
    for (const action of actions) {
      switch (action.type) {
        case 'readyFrontier':
          this.#readyFrontier(movementId, actor);
          break;
        case 'cancelOpenNodes':
          for (const n of this.siblings(movementId)) {
            if (n.node_state === 'BLOCKED' || n.node_state === 'READY') this.#applyNode(n.id, { type: 'CANCEL_REQUESTED' }, actor, {});
          }
          break;
        case 'requestAttention':
          this.#callback(movementId, 'request_attention', null, logged);
          break;
      }
    }
    return logged;
  }

  #callback(movementId: string, eventType: string, nodeKey: string | null, at: Pending, node?: NodeChange) {
    if (this.movementRow(movementId).callback_url) this.callbacks.push({ movementId, eventType, nodeKey, at, ...(node ? { node } : {}) });
  }

  #setFrontier(movementId: string, frontier: string[]) {
    const e = this.movements.get(movementId)!;
    e.row = { ...e.row, current_frontier: frontier };
    e.dirty = true;
  }

  /** On approval, the plan's root nodes become READY. */
  #readyFrontier(movementId: string, actor: string) {
    const ready: string[] = [];
    for (const n of this.siblings(movementId)) {
      if (n.node_state !== 'BLOCKED' || n.predecessor_keys.length > 0) continue;
      if (this.#applyNode(n.id, { type: 'UNBLOCKED' }, actor, {}) instanceof Pending) ready.push(n.node_key);
    }
    ready.sort();
    this.#setFrontier(movementId, ready);
    this.deriveMovements.add(movementId);
  }

  // -------------------------------------------------------------------------------------------
  // Nodes

  nodeEvent(item: NodeItem, actor: string): Pending | Refusal {
    if (!this.nodes.has(item.nodeId)) return new InvalidTransitionError(NODE_MACHINE_ID, item.nodeId, 'MISSING', item.event.type);
    return this.#applyNode(item.nodeId, item.event, actor, item);
  }

  #applyNode(nodeId: string, event: NodeEvent, actor: string, item: Pick<NodeItem, 'fence' | 'lease' | 'artifacts' | 'audits'>): Pending | Refusal {
    const e = this.nodes.get(nodeId)!;
    const row = e.row;
    if (item.fence !== undefined && item.fence !== null && row.claim_token !== item.fence) {
      return new LeaseLostError(nodeId, row.node_state, event.type);
    }
    const refusal = () => new InvalidTransitionError(NODE_MACHINE_ID, nodeId, row.node_state, event.type);
    // Serial per movement: a claim never puts a second node of one movement in dispatch (the claim
    // query checks it on its snapshot; this checks it on the locked rows).
    if (item.lease && this.siblings(row.request_id).some((s) => s.id !== nodeId && IN_DISPATCH.has(s.node_state))) return refusal();
    const prev = resolve(nodeMachine, nodeId, row, row.node_state, nodeContextFromRow(row));
    if (prev.status !== 'active') return refusal();
    const [next, actions] = step(nodeMachine, prev, event);
    if (next === prev) return refusal();

    const from = row.node_state;
    const to = String(next.value);
    const c = next.context;
    const date = (s: string | null) => (s ? new Date(s) : null);
    e.row = {
      ...row,
      node_state: to,
      attempt_no: c.attemptNo,
      idempotency_key: c.attemptNo > 0 ? attemptKey(row.id, c.attemptNo) : null,
      started_at: date(c.startedAt),
      provider_state: c.providerState,
      provider_refs: c.providerRefs,
      provider_ref_id: c.providerRefId,
      next_observe_at: date(c.nextObserveAt),
      last_observed_at: date(c.lastObservedAt),
      observe_count: c.observeCount,
      dispatch_after: date(c.dispatchAfter),
      error_code: c.errorCode,
      error_detail: c.errorDetail,
      manual_intervention_required: c.manualInterventionRequired,
      // A claim takes a new lease; back in READY the node belongs to no dispatch.
      claim_token: item.lease ?? (to === 'READY' ? null : row.claim_token),
      row_version: row.row_version + 1,
    };
    e.dirty = true;
    if (item.artifacts) this.artifacts.push(...item.artifacts);
    if (item.audits) this.audits.push(...item.audits);
    const logged = this.#log(
      { machine_id: NODE_MACHINE_ID, machine_version: NODE_MACHINE_VERSION, entity_type: 'node', entity_id: nodeId, request_id: row.request_id, node_key: row.node_key, seq: e.row.row_version, from_state: from, to_state: to, actor },
      event,
    );
    this.#notice({ request_id: row.request_id, entity: 'node', node_id: nodeId, state: to });
    transitionsTotal.inc({ machine: NODE_MACHINE_ID, from, to });
    // A node callback, when the movement's destination asked for them: queued before what the
    // change leads to (successors, the movement's state), so it is delivered before their callbacks.
    if (to !== from && this.movementRow(row.request_id).node_callbacks) {
      this.#callback(row.request_id, `node_${to.toLowerCase()}`, row.node_key, logged, {
        node_id: nodeId,
        node_key: row.node_key,
        from_state: from,
        node_state: to,
        attempt_no: e.row.attempt_no,
        error_code: e.row.error_code,
      });
    }

    for (const action of actions) {
      switch (action.type) {
        case 'advanceFrontier':
          this.#advanceFrontier(e.row, actor, logged);
          break;
        case 'deriveMovementState':
          this.deriveMovements.add(row.request_id);
          break;
      }
    }
    return logged;
  }

  /** Successors whose predecessors have all completed become READY; the frontier moves with them. */
  #advanceFrontier(completed: NodeRow, actor: string, at: Pending) {
    const byKey = new Map(this.siblings(completed.request_id).map((n) => [n.node_key, n]));
    let unblocked = 0;
    for (const key of completed.successor_keys) {
      const succ = byKey.get(key);
      if (!succ || succ.node_state !== 'BLOCKED') continue;
      if (!succ.predecessor_keys.every((p) => SETTLED.has(byKey.get(p)?.node_state ?? ''))) continue;
      if (this.#applyNode(succ.id, { type: 'UNBLOCKED' }, actor, {}) instanceof Pending) {
        unblocked++;
        this.unblocked.push(succ.id);
        byKey.set(key, this.nodeRow(succ.id));
      }
    }
    const frontier = [...byKey.values()].filter((n) => !TERMINAL_OR_WAITING.has(n.node_state)).map((n) => n.node_key).sort();
    this.#setFrontier(completed.request_id, frontier);
    if (unblocked > 0) this.#callback(completed.request_id, 'frontier_advanced', completed.node_key, at);
    this.deriveMovements.add(completed.request_id);
  }

  /** Movement states derived from their nodes once, after all node changes of the batch. */
  derive() {
    while (this.deriveMovements.size > 0) {
      const [movementId] = this.deriveMovements;
      this.deriveMovements.delete(movementId);
      this.movementEvent(movementId, { type: 'NODES_SETTLED', summary: summarizeNodes(this.siblings(movementId)) }, this.opts.actor);
    }
  }

  /**
   * The claim the dispatcher would make next, made now: a node this batch unblocked, of a movement
   * still EXECUTING with nothing else in dispatch, due now, automatic. Same rules as the claim query.
   */
  carryOnward() {
    const choose = this.opts.claimUnblocked;
    if (!choose) return;
    const now = Date.now();
    for (const id of this.unblocked) {
      const node = this.nodeRow(id);
      const request = this.movementRow(node.request_id);
      if (node.node_state !== 'READY' || request.request_state !== 'EXECUTING' || isManualNode(node)) continue;
      if (node.dispatch_after && node.dispatch_after.getTime() > now) continue;
      if (this.siblings(node.request_id).some((s) => IN_DISPATCH.has(s.node_state))) continue;
      const lease = choose(node);
      if (!lease) continue;
      const claimed = this.#applyNode(id, { type: 'DISPATCH_CLAIMED', at: new Date(now).toISOString() }, this.opts.actor, { lease });
      if (claimed instanceof Pending) this.claims.push({ nodeId: id, movementId: node.request_id, lease });
    }
  }

  // -------------------------------------------------------------------------------------------

  /** Whether flushing writes more than the one group statement (callback rows, audit rows). */
  needsTransaction(): boolean {
    return this.callbacks.length > 0 || this.audits.length > 0;
  }

  /**
   * Writes the batch. `client` is the caller's transaction; `onCommit` runs a function once what
   * was written is durable (afterCommit of that transaction, or at once for a lone statement in
   * autocommit, see deliverHeld).
   */
  async flush(client: Queryable, onCommit: (fn: () => void) => void = (fn) => afterCommit(client as Client, fn)) {
    if (this.transitions.length === 0) return;
    const nodeWrites: NodeWriteRow[] = [];
    // Every movement whose row or nodes change is written (its write_version moves: the fence).
    const touched = new Set<string>();
    for (const [id, e] of this.nodes) {
      if (!e.dirty) continue;
      const r = e.row;
      touched.add(r.request_id);
      nodeWrites.push({
        id,
        from_state: e.fromState,
        from_version: e.fromVersion,
        node_state: r.node_state,
        row_version: r.row_version,
        attempt_no: r.attempt_no,
        idempotency_key: r.idempotency_key,
        started_at: iso(r.started_at),
        provider_state: r.provider_state,
        provider_refs: r.provider_refs,
        provider_ref_id: r.provider_ref_id,
        next_observe_at: iso(r.next_observe_at),
        last_observed_at: iso(r.last_observed_at),
        observe_count: r.observe_count,
        dispatch_after: iso(r.dispatch_after),
        error_code: r.error_code,
        error_detail: r.error_detail,
        manual_intervention_required: r.manual_intervention_required ?? false,
        claim_token: r.claim_token,
      });
    }
    const movementWrites: MovementWriteRow[] = [];
    for (const [id, e] of this.movements) {
      if (!e.dirty && !touched.has(id)) continue;
      const r = e.row;
      movementWrites.push({
        id,
        from_state: e.fromState,
        from_version: e.fromVersion,
        expected_write_version: e.expectedWrite ?? null,
        request_state: r.request_state,
        row_version: r.row_version,
        approval_status: r.approval_status,
        approvals: r.approvals,
        decided_by: r.decided_by,
        current_frontier: r.current_frontier,
        next_work_at: nextWorkAt(r, this.siblings(id)),
        lease_owner: this.opts.deps.lease?.owner ?? null,
        lease_ttl_seconds: this.opts.deps.lease?.ttlSeconds ?? null,
      });
    }
    const written = await writeGroup(client, {
      nodes: nodeWrites,
      movements: movementWrites,
      transitions: this.transitions.map((t) => t.row),
      artifacts: this.artifacts,
      channel: EVENTS_CHANNEL,
      // Each notice carries the write_version its movement has once this commit is in: a holder
      // whose rows are at that version or past it already has what the notice tells (lease-holder.ts).
      notices: chunkNotices([...this.notifications.values()].map((n) => JSON.stringify(this.#stamped(n)))),
    });
    // Nothing was written: a movement was written since it was read (the fence), or a row was not
    // at its version (never under the locks).
    if (written === null) throw new TransitionConflictError(MOVEMENT_MACHINE_ID, movementWrites.map((m) => m.id).join(','));
    for (const n of written.nodes) {
      const e = this.nodes.get(n.id)!;
      e.row = { ...e.row, ...n };
    }
    for (const r of written.movements) {
      const e = this.movements.get(r.id)!;
      e.row = { ...e.row, ...r };
    }
    written.logged.forEach((l, i) => {
      this.transitions[i].id = l.id;
      this.transitions[i].at = l.at;
    });
    // How long each movement that ended took, from its creation (ferry_movement_duration_seconds).
    const ended = this.transitions
      .filter((t) => t.row.entity_type === 'request' && t.row.from_state !== t.row.to_state && MOVEMENT_ENDS.has(t.row.to_state))
      .map((t) => {
        const m = this.movementRow(t.row.entity_id);
        return { labels: { template: m.template_key, state: t.row.to_state }, seconds: (Date.now() - new Date(m.created_at).getTime()) / 1000 };
      });
    if (ended.length > 0) onCommit(() => ended.forEach((e) => movementDurationSeconds.observe(e.labels, e.seconds)));
    // One info line per committed transition, for people reading the log (see transitionLine).
    const transitionLog = this.opts.deps.log ?? rootLog;
    if (transitionLog.isLevelEnabled('info')) {
      const lines = this.transitions.map((t) => transitionLine(t.row, t.row.entity_type === 'node' ? this.nodes.get(t.row.entity_id)?.row : undefined));
      onCommit(() => {
        for (const line of lines) transitionLog.info({ component: 'transitions', ...line }, line.entity === 'node' ? 'node transition' : 'movement transition');
      });
    }
    for (const cb of this.callbacks) {
      await this.opts.deps.callbacks(client, {
        movement: this.movementRow(cb.movementId),
        eventType: cb.eventType,
        nodeKey: cb.nodeKey,
        ...(cb.node ? { node: cb.node } : {}),
        occurredAt: cb.at.at.toISOString(),
      });
    }
    for (const entry of this.audits) await writeAudit(client, entry);
  }

  #logged(p: Pending): TransitionRow {
    return { ...p.row, id: p.id, at: p.at } as TransitionRow;
  }

  deliveredToNode(p: Pending): DeliveredToNode {
    return { from: p.row.from_state, to: p.row.to_state, transition: this.#logged(p), node: this.nodeRow(p.row.entity_id) };
  }

  deliveredToMovement(p: Pending): DeliveredToMovement {
    return { from: p.row.from_state, to: p.row.to_state, transition: this.#logged(p), movement: this.movementRow(p.row.entity_id) };
  }
}

/**
 * When a movement next has work a lease holder must do (migration 0201): now for an automatic READY
 * node without a later dispatch_after, a SUBMITTED or OBSERVING node's next_observe_at (now when
 * unset); null when none (nodes blocked, in dispatch, waiting for a person, or settled) or the
 * movement is not running. Nodes in dispatch are their holder's; if it dies, recovery's write sets
 * the movement's next_work_at again.
 */
export function nextWorkAt(movement: MovementRow, nodes: NodeRow[], now = new Date()): string | null {
  if (movement.request_state !== 'APPROVED' && movement.request_state !== 'EXECUTING') return null;
  let due: number | null = null;
  for (const n of nodes) {
    let at: Date | null | undefined;
    if (n.node_state === 'READY' && !isManualNode(n)) at = n.dispatch_after ?? now;
    else if (n.node_state === 'SUBMITTED' || n.node_state === 'OBSERVING') at = n.next_observe_at ?? now;
    if (at && (due === null || at.getTime() < due)) due = at.getTime();
  }
  return due === null ? null : new Date(due).toISOString();
}

/** One NOTIFY per commit carries every notice; payloads are chunked under Postgres' 8000-byte limit. */
function chunkNotices(notices: string[]): string[] {
  const out: string[] = [];
  let chunk: string[] = [];
  let size = 2;
  for (const notice of notices) {
    if (size + notice.length + 1 > 7900 && chunk.length > 0) {
      out.push(`[${chunk.join(',')}]`);
      chunk = [];
      size = 2;
    }
    chunk.push(notice);
    size += notice.length + 1;
  }
  if (chunk.length > 0) out.push(`[${chunk.join(',')}]`);
  return out;
}

function eventPayload(event: { type: string }): Record<string, unknown> {
  const { type: _type, ...rest } = event as Record<string, unknown>;
  return rest;
}
