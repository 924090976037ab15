import { transition, type AnyStateMachine } from 'xstate';
import { InvalidTransitionError, SnapshotIncompatibleError, TransitionConflictError } from '../errors.ts';
import {
  NODE_MACHINE_ID,
  NODE_MACHINE_VERSION,
  nodeMachine,
  type NodeContext,
  type NodeEvent,
} from '../machines/node-machine.ts';
import { summarizeNodes } from '../machines/node-summary.ts';
import {
  REQUEST_MACHINE_ID,
  REQUEST_MACHINE_VERSION,
  requestMachine,
  type RequestContext,
  type RequestEvent,
} from '../machines/request-machine.ts';
import { transitionsTotal } from '../metrics.ts';
import type { Client, Queryable } from '../persistence/db.ts';
import {
  lockNode,
  lockRequest,
  nodesOfRequest,
  notifyOnCommit,
  lockRequestOfNode,
  setFrontier,
  writeNodeTransition,
  writeRequestTransition,
  type NodeRow,
  type RequestRow,
  type TransitionRow,
} from '../persistence/movements.ts';

/**
 * The one durable transition function. Delivering an event to a request or node is, inside the
 * caller's transaction:
 *   lock the request row, then the node row (always in that order, so writers never deadlock);
 *   rebuild the machine snapshot from the row; compute the next snapshot with XState's pure
 *   transition(); refuse an event the machine does not accept (InvalidTransitionError); write the
 *   new state with the old state and row version as a precondition; append the transition row; and
 *   turn the machine's messages (successors unblocked, request state derived, callbacks) into writes
 *   in the same transaction. pg_notify wakes the workers when that transaction commits.
 */

export const EVENTS_CHANNEL = 'ferry_events';

export interface CallbackInput {
  request: RequestRow;
  eventType: string;
  nodeKey?: string | null;
  occurredAt: string;
}

/** Writes one callback outbox row (and its delivery job) inside the transaction. */
export type CallbackSink = (client: Queryable, input: CallbackInput) => Promise<unknown>;

export interface TransitionDeps {
  callbacks: CallbackSink;
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

export interface DeliveredToRequest extends Delivered {
  request: RequestRow;
}

/** What one top-level delivery accumulates before it finishes: derivations and wake-ups. */
class Session {
  deriveRequests = new Set<string>();
  requests = new Map<string, RequestRow>();
  /**
   * Each request's nodes as last read or written in this transaction. The request row is locked
   * for the whole delivery and every node writer locks it first, so nothing else changes them.
   */
  nodes = new Map<string, Map<string, NodeRow>>();
  notifications = new Set<string>();
  depth = 0;
  constructor(
    readonly client: Client,
    readonly actor: string,
    readonly deps: TransitionDeps,
  ) {}
}

const sessions = new WeakMap<Client, Session>();

async function inSession<T>(client: Client, opts: DeliverOptions, fn: (s: Session) => Promise<T>): Promise<T> {
  let session = sessions.get(client);
  const outermost = !session;
  if (!session) {
    session = new Session(client, opts.actor, opts.deps);
    sessions.set(client, session);
  }
  session.depth++;
  try {
    const result = await fn(session);
    if (outermost) await finish(session);
    return result;
  } finally {
    session.depth--;
    if (outermost) sessions.delete(client);
  }
}

/** Derive request states from their nodes once, after all node changes of this delivery, then notify. */
async function finish(s: Session): Promise<void> {
  while (s.deriveRequests.size > 0) {
    const [requestId] = s.deriveRequests;
    s.deriveRequests.delete(requestId);
    const nodes = await nodesOf(s, requestId);
    await applyRequestEvent(s, requestId, { type: 'NODES_SETTLED', summary: summarizeNodes(nodes) }, true);
  }
  // One NOTIFY per transaction, carrying every notice (chunked under Postgres' 8000-byte limit).
  let chunk: string[] = [];
  let size = 2;
  for (const notice of s.notifications) {
    if (size + notice.length + 1 > 7900 && chunk.length > 0) {
      await notifyOnCommit(s.client, EVENTS_CHANNEL, `[${chunk.join(',')}]`);
      chunk = [];
      size = 2;
    }
    chunk.push(notice);
    size += notice.length + 1;
  }
  if (chunk.length > 0) await notifyOnCommit(s.client, EVENTS_CHANNEL, `[${chunk.join(',')}]`);
}

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
  };
}

export function requestContextFromRow(row: RequestRow): RequestContext {
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

export async function deliverRequestEvent(
  client: Client,
  requestId: string,
  event: RequestEvent,
  opts: DeliverOptions,
): Promise<DeliveredToRequest | null> {
  return inSession(client, opts, (s) => applyRequestEvent(s, requestId, event, !!opts.ifAccepted, opts.actor));
}

export async function deliverNodeEvent(
  client: Client,
  nodeId: string,
  event: NodeEvent,
  opts: DeliverOptions,
): Promise<DeliveredToNode | null> {
  return inSession(client, opts, async (s) => {
    const request = await lockRequestOfNode(client, nodeId);
    if (!request) throw new InvalidTransitionError(NODE_MACHINE_ID, nodeId, 'MISSING', event.type);
    if (!s.requests.has(request.id)) s.requests.set(request.id, request);
    return applyNodeEvent(s, nodeId, event, !!opts.ifAccepted, opts.actor);
  });
}

// ---------------------------------------------------------------------------------------------

async function lockedRequest(s: Session, requestId: string): Promise<RequestRow> {
  const known = s.requests.get(requestId);
  if (known) return known;
  const row = await lockRequest(s.client, requestId);
  if (!row) throw new InvalidTransitionError(REQUEST_MACHINE_ID, requestId, 'MISSING', 'lock');
  s.requests.set(requestId, row);
  return row;
}

async function applyRequestEvent(
  s: Session,
  requestId: string,
  event: RequestEvent,
  ifAccepted: boolean,
  actor = s.actor,
): Promise<DeliveredToRequest | null> {
  const row = await lockedRequest(s, requestId);
  const prev = resolve(requestMachine, requestId, row, row.request_state, requestContextFromRow(row));
  const refuse = () => {
    if (ifAccepted) return null;
    throw new InvalidTransitionError(REQUEST_MACHINE_ID, requestId, row.request_state, event.type);
  };
  if (prev.status !== 'active') return refuse();
  const [next, actions] = transition(requestMachine, prev, event);
  if (next === prev) return refuse();

  const to = String(next.value);
  const ctx = next.context;
  const written = await writeRequestTransition(
    s.client,
    requestId,
    row.request_state,
    row.row_version,
    { request_state: to, approval_status: ctx.approvalStatus, approvals: ctx.approvals, decided_by: ctx.decidedBy },
    { machine_id: REQUEST_MACHINE_ID, machine_version: REQUEST_MACHINE_VERSION, event_type: event.type, event_payload: eventPayload(event), actor },
  );
  if (!written) throw new TransitionConflictError(REQUEST_MACHINE_ID, requestId);
  const logged = written.transition;
  s.requests.set(requestId, written.row);
  s.notifications.add(JSON.stringify({ request_id: requestId, entity: 'request', state: to }));
  transitionsTotal.inc({ machine: REQUEST_MACHINE_ID, from: row.request_state, to });

  const at = logged.at.toISOString();
  if (to !== row.request_state) {
    await emitCallback(s, requestId, `request_${to.toLowerCase()}`, null, at);
  }
  for (const action of actions) {
    switch (action.type) {
      case 'readyFrontier':
        await readyFrontier(s, requestId);
        break;
      case 'cancelOpenNodes':
        await cancelOpenNodes(s, requestId);
        break;
      case 'requestAttention':
        await emitCallback(s, requestId, 'request_attention', null, at);
        break;
    }
  }
  return { from: row.request_state, to, transition: logged, request: s.requests.get(requestId)! };
}

async function applyNodeEvent(
  s: Session,
  nodeId: string,
  event: NodeEvent,
  ifAccepted: boolean,
  actor = s.actor,
): Promise<DeliveredToNode | null> {
  const row = await lockNode(s.client, nodeId);
  if (!row) throw new InvalidTransitionError(NODE_MACHINE_ID, nodeId, 'MISSING', event.type);
  const prev = resolve(nodeMachine, nodeId, row, row.node_state, nodeContextFromRow(row));
  const refuse = () => {
    if (ifAccepted) return null;
    throw new InvalidTransitionError(NODE_MACHINE_ID, nodeId, row.node_state, event.type);
  };
  if (prev.status !== 'active') return refuse();
  const [next, actions] = transition(nodeMachine, prev, event);
  if (next === prev) return refuse();

  const to = String(next.value);
  const c = next.context;
  const written = await writeNodeTransition(
    s.client,
    row,
    row.node_state,
    row.row_version,
    {
      node_state: to,
      attempt_no: c.attemptNo,
      started_at: c.startedAt,
      provider_state: c.providerState,
      provider_refs: c.providerRefs,
      provider_ref_id: c.providerRefId,
      next_observe_at: c.nextObserveAt,
      last_observed_at: c.lastObservedAt,
      observe_count: c.observeCount,
      dispatch_after: c.dispatchAfter,
      error_code: c.errorCode,
      error_detail: c.errorDetail,
    },
    { machine_id: NODE_MACHINE_ID, machine_version: NODE_MACHINE_VERSION, event_type: event.type, event_payload: eventPayload(event), actor },
  );
  if (!written) throw new TransitionConflictError(NODE_MACHINE_ID, nodeId);
  const { row: updated, transition: logged } = written;
  s.nodes.get(row.request_id)?.set(nodeId, updated);
  s.notifications.add(JSON.stringify({ request_id: row.request_id, entity: 'node', node_id: nodeId, state: to }));
  transitionsTotal.inc({ machine: NODE_MACHINE_ID, from: row.node_state, to });

  for (const action of actions) {
    switch (action.type) {
      case 'advanceFrontier':
        await advanceFrontier(s, updated, logged.at.toISOString());
        break;
      case 'deriveRequestState':
        s.deriveRequests.add(row.request_id);
        break;
    }
  }
  return { from: row.node_state, to, transition: logged, node: updated };
}

// ---------------------------------------------------------------------------------------------
// Messages

async function nodesOf(s: Session, requestId: string): Promise<NodeRow[]> {
  let cached = s.nodes.get(requestId);
  if (!cached) {
    cached = new Map((await nodesOfRequest(s.client, requestId)).map((n) => [n.id, n]));
    s.nodes.set(requestId, cached);
  }
  return [...cached.values()];
}

const SETTLED = new Set(['COMPLETED', 'SKIPPED']);
const TERMINAL_OR_WAITING = new Set(['BLOCKED', 'COMPLETED', 'SKIPPED', 'CANCELLED', 'FAILED']);

/** Successors whose predecessors have all completed become READY; the frontier moves with them. */
async function advanceFrontier(s: Session, completed: NodeRow, at: string): Promise<void> {
  const nodes = await nodesOf(s, completed.request_id);
  const byKey = new Map(nodes.map((n) => [n.node_key, n]));
  const unblocked: string[] = [];
  for (const key of completed.successor_keys) {
    const succ = byKey.get(key);
    if (!succ || succ.node_state !== 'BLOCKED') continue;
    if (!succ.predecessor_keys.every((p) => SETTLED.has(byKey.get(p)?.node_state ?? ''))) continue;
    const done = await applyNodeEvent(s, succ.id, { type: 'UNBLOCKED' }, true, s.actor);
    if (done) {
      unblocked.push(key);
      byKey.set(key, done.node);
    }
  }
  const frontier = [...byKey.values()].filter((n) => !TERMINAL_OR_WAITING.has(n.node_state)).map((n) => n.node_key).sort();
  await setFrontier(s.client, completed.request_id, frontier);
  const req = s.requests.get(completed.request_id);
  if (req) s.requests.set(completed.request_id, { ...req, current_frontier: frontier });
  if (unblocked.length > 0) await emitCallback(s, completed.request_id, 'frontier_advanced', completed.node_key, at);
  s.deriveRequests.add(completed.request_id);
}

/** On approval, the plan's root nodes become READY. */
async function readyFrontier(s: Session, requestId: string): Promise<void> {
  const nodes = await nodesOf(s, requestId);
  const ready: string[] = [];
  for (const n of nodes) {
    if (n.node_state !== 'BLOCKED' || n.predecessor_keys.length > 0) continue;
    if (await applyNodeEvent(s, n.id, { type: 'UNBLOCKED' }, true, s.actor)) ready.push(n.node_key);
  }
  ready.sort();
  await setFrontier(s.client, requestId, ready);
  const req = s.requests.get(requestId);
  if (req) s.requests.set(requestId, { ...req, current_frontier: ready });
  s.deriveRequests.add(requestId);
}

/** Nodes that have not started are cancelled with their request; started ones keep their state. */
async function cancelOpenNodes(s: Session, requestId: string): Promise<void> {
  const nodes = await nodesOf(s, requestId);
  for (const n of nodes) {
    if (n.node_state === 'BLOCKED' || n.node_state === 'READY') {
      await applyNodeEvent(s, n.id, { type: 'CANCEL_REQUESTED' }, true, s.actor);
    }
  }
}

async function emitCallback(s: Session, requestId: string, eventType: string, nodeKey: string | null, occurredAt: string) {
  const request = s.requests.get(requestId);
  if (!request?.callback_url) return;
  await s.deps.callbacks(s.client, { request, eventType, nodeKey, occurredAt });
}

function eventPayload(event: { type: string }): Record<string, unknown> {
  const { type: _type, ...rest } = event as Record<string, unknown>;
  return rest;
}
