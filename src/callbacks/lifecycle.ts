import { FerryError, NotFoundError } from '../errors.ts';
import {
  callbackMachine,
  type CallbackContext,
  type CallbackEvent,
  type CallbackState,
} from '../machines/callback-delivery-machine.ts';
import {
  lockCallback,
  markStrandedRequeued,
  writeCallbackLifecycle,
  type CallbackLifecycleWrite,
  type CallbackRow,
} from '../persistence/callbacks.ts';
import { step } from '../machines/step.ts';
import type { Queryable } from '../persistence/db.ts';

/**
 * The callback lifecycle, run: every change of a callback's status, attempts or schedule is an
 * event delivered to the callback machine (src/machines/callback-delivery-machine.ts) on the row as
 * it is, and persistence writes what the machine decided. Single-row changes (an attempt's outcome,
 * a redrive) lock the row first, so the machine decides on the row that is written; the stranded
 * sweep's marks are decided per row and written in one statement fenced by the attempt they were
 * decided from.
 *
 * Event times are the transaction's time (Postgres now()), as the rows' other times are, unless a
 * caller passes one (tests replaying the machine's paths).
 */

const MAX_ERROR_LENGTH = 2000;

const iso = (d: Date | string | null): string | null => (d === null ? null : new Date(d).toISOString());

export function callbackContextFromRow(row: CallbackRow): CallbackContext {
  return {
    attempts: row.attempts,
    maxAttempts: row.max_attempts,
    nextAttemptAt: iso(row.next_attempt_at)!,
    redriveCount: row.redrive_count,
    lastAttemptAt: iso(row.last_attempt_at),
    lastError: row.last_error,
    lastStatusCode: row.last_status_code,
    sentAt: iso(row.sent_at),
    strandedRequeuedAt: iso(row.stranded_requeued_at),
  };
}

export interface CallbackDecision {
  from: CallbackState;
  to: CallbackState;
  context: CallbackContext;
}

/** What the machine makes of `event` on this row; null when the row's state does not take it. */
export function decideCallback(row: CallbackRow, event: CallbackEvent): CallbackDecision | null {
  const snapshot = callbackMachine.resolveState({ value: row.status, context: callbackContextFromRow(row) });
  if (!snapshot.can(event)) return null;
  const [next] = step(callbackMachine, snapshot, event);
  return { from: row.status, to: next.value as CallbackState, context: next.context };
}

function lifecycleWrite(d: CallbackDecision): CallbackLifecycleWrite {
  return { status: d.to, ...d.context };
}

/** What one delivery attempt came to. `retriable: false`: the destination refuses it, not worth retrying. */
export type AttemptResult =
  | { ok: true; statusCode: number }
  | { ok: false; statusCode: number | null; error: string; retriable: boolean };

/**
 * Records an attempt's outcome on the row whose lease the attempt holds, and releases the lease.
 * Returns null when the lease was lost (someone else owns this attempt now), or the row no longer
 * takes an outcome.
 */
export async function recordAttemptOutcome(
  client: Queryable,
  id: string,
  leaseToken: string,
  result: AttemptResult,
  opts: { at?: string } = {},
): Promise<CallbackRow | null> {
  const locked = await lockCallback(client, id, { leaseToken });
  if (!locked) return null;
  const at = opts.at ?? locked.now.toISOString();
  const event: CallbackEvent = result.ok
    ? { type: 'DELIVERED', at, statusCode: result.statusCode }
    : { type: 'DELIVERY_FAILED', at, retriable: result.retriable, statusCode: result.statusCode, error: result.error.slice(0, MAX_ERROR_LENGTH) };
  const decision = decideCallback(locked.row, event);
  if (!decision) return null;
  return writeCallbackLifecycle(client, id, lifecycleWrite(decision), { releaseLease: true });
}

/**
 * Puts a 'dlq' (or still 'pending') callback back to work (the machine's REDRIVEN): attempts 0, due
 * now, redrive_count + 1. Timestamp, nonce and body are kept, so the receiver sees the same delivery
 * again. A lease held by an in-flight attempt is left alone: that attempt records its outcome
 * against the reset row. Throws NotFoundError, or CALLBACK_NOT_REDRIVABLE for a callback already sent.
 */
export async function redriveCallback(client: Queryable, id: string, opts: { at?: string } = {}): Promise<CallbackRow> {
  const locked = await lockCallback(client, id);
  if (!locked) throw new NotFoundError('callback', id);
  const decision = decideCallback(locked.row, { type: 'REDRIVEN', at: opts.at ?? locked.now.toISOString() });
  if (!decision) {
    const status = locked.row.status;
    throw new FerryError('CALLBACK_NOT_REDRIVABLE', `callback ${id} is ${status}; only pending or dlq callbacks can be redriven`, { id, status });
  }
  return writeCallbackLifecycle(client, id, lifecycleWrite(decision), { releaseLease: false });
}

/**
 * The stranded sweep wrote a job for each of these rows (STRANDED_REQUEUED at `at`): one statement
 * for all of them. A row the machine would not take it for is left out. Returns how many were written.
 */
export async function recordStrandedRequeues(client: Queryable, rows: readonly CallbackRow[], at: string): Promise<number> {
  const marks = [];
  for (const row of rows) {
    const decision = decideCallback(row, { type: 'STRANDED_REQUEUED', at });
    if (!decision) continue;
    marks.push({ id: row.id, status: row.status, attempts: row.attempts, redriveCount: row.redrive_count, strandedRequeuedAt: decision.context.strandedRequeuedAt! });
  }
  return markStrandedRequeued(client, marks);
}
