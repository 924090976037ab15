import { randomBytes, randomUUID } from 'node:crypto';
import { writeAudit } from '../persistence/audit.ts';
import { withTransaction, type Pool, type Queryable } from '../persistence/db.ts';
import { insertCallback, type CallbackRow } from '../persistence/callbacks.ts';
import type { CallbackQueue } from './jobs.ts';
import { redriveCallback } from './lifecycle.ts';

/**
 * Writing callbacks. The durable transition function calls enqueueCallback inside the transaction
 * that changes a movement, so the callback (and its delivery job) exist exactly when the change does.
 */

/** The movement as a callback reports it: the movement_requests fields, times as ISO 8601. */
export interface CallbackMovement {
  id: string;
  template_key: string;
  template_version: number;
  compiled_plan_hash: string;
  intent: unknown;
  request_state: string;
  approval_status: string;
  current_frontier: unknown;
  created_at: string;
  updated_at: string;
}

/** The movement_requests fields a callback reports; pass the row as it is after the transition. */
export interface CallbackMovementRow extends Omit<CallbackMovement, 'created_at' | 'updated_at'> {
  callback_url: string | null;
  created_at: Date | string;
  updated_at: Date | string;
}

export interface EnqueueCallbackInput {
  movement: CallbackMovementRow;
  /** The callback's id; enqueueCallback makes one. */
  callbackId?: string;
  /** request_<lowercased new state>, frontier_advanced, request_attention or node_<lowercased new state>. */
  eventType: string;
  nodeKey?: string | null;
  /** A node callback's node change (event node_<state>). */
  node?: CallbackNode;
  /** ISO 8601. */
  occurredAt: string;
  maxAttempts: number;
}

/** What a node callback reports of the node's change. */
export interface CallbackNode {
  node_id: string;
  node_key: string;
  from_state: string;
  node_state: string;
  attempt_no: number;
  error_code: string | null;
}

export interface CallbackPayload {
  /** The callback's id, also its webhook-id header: the same on every retry and redrive. */
  callback_id: string;
  event_type: string;
  request_id: string;
  request_state: string;
  node_key?: string;
  /** Node callbacks only. */
  node?: CallbackNode;
  occurred_at: string;
  movement: CallbackMovement;
}

function iso(t: Date | string): string {
  return t instanceof Date ? t.toISOString() : t;
}

/** The POST body. node_key is present only for events about a node; node only for node callbacks. */
export function buildCallbackPayload(input: Omit<EnqueueCallbackInput, 'maxAttempts'> & { callbackId: string }): CallbackPayload {
  const r = input.movement;
  return {
    callback_id: input.callbackId,
    event_type: input.eventType,
    request_id: r.id,
    request_state: r.request_state,
    ...(input.nodeKey ? { node_key: input.nodeKey } : {}),
    ...(input.node ? { node: input.node } : {}),
    occurred_at: input.occurredAt,
    movement: {
      id: r.id,
      template_key: r.template_key,
      template_version: r.template_version,
      compiled_plan_hash: r.compiled_plan_hash,
      intent: r.intent,
      request_state: r.request_state,
      approval_status: r.approval_status,
      current_frontier: r.current_frontier,
      created_at: iso(r.created_at),
      updated_at: iso(r.updated_at),
    },
  };
}

/**
 * Writes the outbox row (and, given a queue, its delivery job) on the caller's client, so both commit
 * or roll back with the caller's transaction. The body is serialized here, once: every attempt sends
 * and signs these exact bytes with the timestamp and nonce fixed here. Returns the callback id.
 * Without a queue the row is still delivered, later, by the stranded-callback sweep.
 */
export async function enqueueCallback(
  client: Queryable,
  input: EnqueueCallbackInput,
  queue?: CallbackQueue,
): Promise<string> {
  const url = input.movement.callback_url;
  if (!url) throw new Error(`movement ${input.movement.id} has no callback_url; enqueueCallback must not be called for it`);
  const id = input.callbackId ?? randomUUID();
  const row = await insertCallback(client, {
    id,
    movementId: input.movement.id,
    eventType: input.eventType,
    nodeKey: input.nodeKey ?? null,
    callbackUrl: url,
    body: JSON.stringify(buildCallbackPayload({ ...input, callbackId: id })),
    maxAttempts: input.maxAttempts,
    timestamp: Math.floor(Date.now() / 1000),
    nonce: randomBytes(16).toString('hex'),
  });
  if (queue) await queue.enqueue(client, { callbackId: row.id, attempts: row.attempts, redriveCount: row.redrive_count });
  return row.id;
}

/**
 * Binds the delivery settings once, giving the (client, input) function the transition function
 * calls for each callback.
 */
export function callbackSink(opts: { maxAttempts: number; queue?: CallbackQueue }) {
  return (client: Queryable, input: Omit<EnqueueCallbackInput, 'maxAttempts'>): Promise<string> =>
    enqueueCallback(client, { ...input, maxAttempts: opts.maxAttempts }, opts.queue);
}

/**
 * Redrives a callback and writes its delivery job, on the caller's client (inside the caller's
 * transaction, e.g. with its audit row). Same body, timestamp and nonce as before.
 * Throws NotFoundError, or FerryError CALLBACK_NOT_REDRIVABLE for a callback already sent.
 */
export async function redriveAndEnqueue(client: Queryable, id: string, queue: CallbackQueue): Promise<CallbackRow> {
  const row = await redriveCallback(client, id);
  await queue.enqueue(client, { callbackId: row.id, attempts: row.attempts, redriveCount: row.redrive_count });
  return row;
}

/**
 * The redrive an operator asks for: the redrive, its delivery job and its audit event, in one
 * transaction. Routes and tools call this rather than writing themselves.
 */
export async function redriveCallbackAudited(pool: Pool, queue: CallbackQueue, input: { actor: string; id: string }): Promise<CallbackRow> {
  return withTransaction(pool, async (client) => {
    const redriven = await redriveAndEnqueue(client, input.id, queue);
    await writeAudit(client, {
      actor: input.actor,
      action: 'callback.redrive',
      entity_type: 'callback',
      entity_id: input.id,
      details: { movement_id: redriven.request_id, event_type: redriven.event_type, redrive_count: redriven.redrive_count },
    });
    return redriven;
  });
}
