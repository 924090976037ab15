import { NotFoundError, ValidationError } from '../errors.ts';
import { CURSOR_AT_SQL, decodeCursor, isUuid, pageOfRows } from './cursor.ts';
import type { Queryable } from './db.ts';
import { callbackStates, type CallbackContext, type CallbackState } from '../machines/callback-delivery-machine.ts';

/**
 * SQL for the callback outbox: one row per callback a movement owes its caller, written in the
 * transaction of the state change it reports, then delivered (and retried) by the delivery worker.
 *
 * A delivery attempt is: claim (a short lease, own statement), HTTP call with no lock held, then
 * record the outcome fenced by the lease token. Callbacks of one request are delivered in creation
 * order: a row is claimable only when no older row of the same request is still pending.
 *
 * Which status, attempts and schedule a row goes to is not decided here: the callback machine
 * (src/machines/callback-delivery-machine.ts, run by src/callbacks/lifecycle.ts) decides, and
 * writeCallbackLifecycle / markStrandedRequeued write exactly what it decided.
 */

/** A callback's status is its delivery machine's state. */
export type CallbackStatus = CallbackState;
export const callbackStatuses: readonly CallbackStatus[] = callbackStates;

export interface CallbackRow {
  id: string;
  request_id: string;
  event_type: string;
  node_key: string | null;
  callback_url: string;
  payload: Record<string, unknown>;
  /** The exact body bytes (UTF-8) that are signed and sent on every attempt. */
  payload_body: string;
  status: CallbackStatus;
  attempts: number;
  max_attempts: number;
  next_attempt_at: Date;
  /** Unix seconds at creation; reused on every retry and redrive. */
  callback_timestamp: number;
  /** 128-bit hex; reused on every retry and redrive, so receivers can dedupe on it. */
  callback_nonce: string;
  last_error: string | null;
  last_status_code: number | null;
  last_attempt_at: Date | null;
  sent_at: Date | null;
  redrive_count: number;
  lease_token: string | null;
  lease_expires_at: Date | null;
  created_at: Date;
  updated_at: Date;
  /** The registered destination it reports to (copied from its movement); null for a raw callback_url. */
  destination_id: string | null;
  /** When the stranded-callback sweep last wrote a job for it. */
  stranded_requeued_at: Date | null;
}

export interface NewCallback {
  /** The callback's id, chosen before the insert when the body carries it; made here otherwise. */
  id?: string;
  movementId: string;
  eventType: string;
  nodeKey: string | null;
  callbackUrl: string;
  /** Serialized JSON body; stored verbatim and also as jsonb for querying. */
  body: string;
  maxAttempts: number;
  timestamp: number;
  nonce: string;
}


/** Ids reach here from URLs; a malformed one is simply not found, never a database error. */

export async function insertCallback(db: Queryable, c: NewCallback): Promise<CallbackRow> {
  if (!Number.isInteger(c.maxAttempts) || c.maxAttempts < 1) {
    throw new ValidationError('max_attempts must be a positive integer', { max_attempts: c.maxAttempts });
  }
  const { rows } = await db.query<CallbackRow>(
    `INSERT INTO callback_outbox
       (id, request_id, event_type, node_key, callback_url, payload, payload_body, max_attempts,
        callback_timestamp, callback_nonce, destination_id)
     VALUES (COALESCE($10::uuid, gen_random_uuid()), $1, $2, $3, $4, $5::jsonb, $6, $7, $8, $9,
             (SELECT callback_destination_id FROM movement_requests WHERE id = $1))
     RETURNING *`,
    [c.movementId, c.eventType, c.nodeKey, c.callbackUrl, c.body, c.body, c.maxAttempts, c.timestamp, c.nonce, c.id ?? null],
  );
  return rows[0];
}

export async function getCallback(db: Queryable, id: string): Promise<CallbackRow | null> {
  if (!isUuid(id)) return null;
  const { rows } = await db.query<CallbackRow>('SELECT * FROM callback_outbox WHERE id = $1', [id]);
  return rows[0] ?? null;
}

/** Every callback of one request, oldest first (the order they are delivered in). */
export async function callbacksForMovement(db: Queryable, movementId: string): Promise<CallbackRow[]> {
  if (!isUuid(movementId)) return [];
  const { rows } = await db.query<CallbackRow>(
    'SELECT * FROM callback_outbox WHERE request_id = $1 ORDER BY created_at, id',
    [movementId],
  );
  return rows;
}

/** Names one delivery attempt; a job carrying a different one is left over and does nothing. */
export interface AttemptRef {
  attempts: number;
  redriveCount: number;
}

export type ClaimSkip = 'missing' | 'not_pending' | 'stale_attempt' | 'leased' | 'waiting_for_earlier';
export type Claim = { row: CallbackRow; skipped?: undefined } | { row?: undefined; skipped: ClaimSkip };

/**
 * Takes the delivery lease on a pending callback, in one autocommitted statement. The lease, not a
 * row lock, keeps a second worker out while the HTTP call runs; it expires on its own if this
 * worker dies, after which the callback can be claimed again.
 */
export async function claimCallback(
  db: Queryable,
  id: string,
  opts: { leaseSeconds: number; expect?: AttemptRef },
): Promise<Claim> {
  if (!isUuid(id)) return { skipped: 'missing' };
  const { rows } = await db.query<CallbackRow>(
    `UPDATE callback_outbox c
        SET lease_token = gen_random_uuid(),
            lease_expires_at = now() + make_interval(secs => $2),
            updated_at = now()
      WHERE c.id = $1
        AND c.status = 'pending'
        AND ($3::int IS NULL OR c.attempts = $3)
        AND ($4::int IS NULL OR c.redrive_count = $4)
        AND (c.lease_expires_at IS NULL OR c.lease_expires_at <= now())
        AND NOT EXISTS (
              SELECT 1 FROM callback_outbox e
               WHERE e.request_id = c.request_id
                 AND e.status = 'pending'
                 AND (e.created_at, e.id) < (c.created_at, c.id))
      RETURNING c.*`,
    [id, opts.leaseSeconds, opts.expect?.attempts ?? null, opts.expect?.redriveCount ?? null],
  );
  if (rows[0]) return { row: rows[0] };

  const row = await getCallback(db, id);
  if (!row) return { skipped: 'missing' };
  if (row.status !== 'pending') return { skipped: 'not_pending' };
  if (opts.expect && (row.attempts !== opts.expect.attempts || row.redrive_count !== opts.expect.redriveCount)) {
    return { skipped: 'stale_attempt' };
  }
  if (row.lease_expires_at && row.lease_expires_at.getTime() > Date.now()) return { skipped: 'leased' };
  return { skipped: 'waiting_for_earlier' };
}

/**
 * The lifecycle columns of a callback as the callback machine decided them (src/callbacks/lifecycle.ts
 * runs it); written verbatim, never derived here.
 */
export type CallbackLifecycleWrite = { status: CallbackStatus } & Omit<CallbackContext, 'maxAttempts'>;

/**
 * Locks one callback row FOR UPDATE for a lifecycle write, with the transaction's time (the `at` of
 * the event the caller builds). With a lease token, only the row that still carries it: null when
 * the lease was lost (or the row does not exist).
 */
export async function lockCallback(
  db: Queryable,
  id: string,
  opts: { leaseToken?: string } = {},
): Promise<{ row: CallbackRow; now: Date } | null> {
  if (!isUuid(id)) return null;
  const { rows } = await db.query<CallbackRow & { tx_now: Date }>(
    `SELECT c.*, now() AS tx_now FROM callback_outbox c
      WHERE c.id = $1 AND ($2::uuid IS NULL OR c.lease_token = $2)
      FOR UPDATE`,
    [id, opts.leaseToken ?? null],
  );
  if (!rows[0]) return null;
  const { tx_now, ...row } = rows[0];
  return { row, now: tx_now };
}

/**
 * Writes what the machine decided for a row the caller locked (lockCallback). `releaseLease` ends
 * the delivery lease (an attempt's outcome is recorded); otherwise the lease is left as it is.
 */
export async function writeCallbackLifecycle(
  db: Queryable,
  id: string,
  w: CallbackLifecycleWrite,
  opts: { releaseLease: boolean },
): Promise<CallbackRow> {
  const { rows } = await db.query<CallbackRow>(
    `UPDATE callback_outbox
        SET status = $2, attempts = $3, next_attempt_at = $4, redrive_count = $5, last_attempt_at = $6,
            last_error = $7, last_status_code = $8, sent_at = $9, stranded_requeued_at = $10,
            lease_token = CASE WHEN $11 THEN NULL ELSE lease_token END,
            lease_expires_at = CASE WHEN $11 THEN NULL ELSE lease_expires_at END,
            updated_at = now()
      WHERE id = $1
      RETURNING *`,
    [
      id,
      w.status,
      w.attempts,
      w.nextAttemptAt,
      w.redriveCount,
      w.lastAttemptAt,
      w.lastError,
      w.lastStatusCode,
      w.sentAt,
      w.strandedRequeuedAt,
      opts.releaseLease,
    ],
  );
  if (!rows[0]) throw new NotFoundError('callback', id);
  return rows[0];
}

/** The oldest pending callback of a request: the one whose turn it is. */
export async function nextPendingCallback(db: Queryable, movementId: string): Promise<CallbackRow | null> {
  const { rows } = await db.query<CallbackRow>(
    `SELECT * FROM callback_outbox
      WHERE request_id = $1 AND status = 'pending'
      ORDER BY created_at, id
      LIMIT 1`,
    [movementId],
  );
  return rows[0] ?? null;
}

/**
 * Pending callbacks whose turn it is (oldest pending of their request), not leased, and overdue by
 * more than overdueSeconds: their queue job was lost or never written.
 */
export async function listStrandedCallbacks(
  db: Queryable,
  opts: { overdueSeconds: number; limit: number },
): Promise<CallbackRow[]> {
  const { rows } = await db.query<CallbackRow>(
    `SELECT c.* FROM callback_outbox c
      WHERE c.status = 'pending'
        AND c.next_attempt_at < now() - make_interval(secs => $1)
        AND (c.lease_expires_at IS NULL OR c.lease_expires_at <= now())
        AND (c.stranded_requeued_at IS NULL OR c.stranded_requeued_at < now() - make_interval(secs => $1))
        AND NOT EXISTS (
              SELECT 1 FROM callback_outbox e
               WHERE e.request_id = c.request_id
                 AND e.status = 'pending'
                 AND (e.created_at, e.id) < (c.created_at, c.id))
      ORDER BY c.next_attempt_at, c.created_at
      LIMIT $2`,
    [opts.overdueSeconds, opts.limit],
  );
  return rows;
}

/**
 * Records, in one statement, the stranded_requeued_at the machine decided for each callback the
 * stranded sweep wrote a job for (see listStrandedCallbacks). The rows were read without a lock, so
 * each write holds only while the row is still at the attempt it was decided from; a row that has
 * moved on since keeps its own value. Returns how many rows were written.
 */
export async function markStrandedRequeued(
  db: Queryable,
  marks: ReadonlyArray<{ id: string; status: CallbackStatus; attempts: number; redriveCount: number; strandedRequeuedAt: string }>,
): Promise<number> {
  if (marks.length === 0) return 0;
  const { rowCount } = await db.query(
    `UPDATE callback_outbox c
        SET stranded_requeued_at = m.at
       FROM unnest($1::uuid[], $2::text[], $3::int[], $4::int[], $5::timestamptz[]) AS m(id, status, attempts, redrive_count, at)
      WHERE c.id = m.id AND c.status = m.status AND c.attempts = m.attempts AND c.redrive_count = m.redrive_count`,
    [
      marks.map((m) => m.id),
      marks.map((m) => m.status),
      marks.map((m) => m.attempts),
      marks.map((m) => m.redriveCount),
      marks.map((m) => m.strandedRequeuedAt),
    ],
  );
  return rowCount ?? 0;
}

export interface ListCallbacksQuery {
  status?: CallbackStatus;
  movementId?: string;
  limit: number;
  /** Opaque, from a previous page's nextCursor. */
  cursor?: string | null;
}

export interface CallbackPage {
  callbacks: CallbackRow[];
  nextCursor: string | null;
}

export const MAX_CALLBACK_PAGE = 500;

/** Oldest first, paginated by (created_at, id). */
export async function listCallbacks(db: Queryable, q: ListCallbacksQuery): Promise<CallbackPage> {
  if (!Number.isInteger(q.limit) || q.limit < 1 || q.limit > MAX_CALLBACK_PAGE) {
    throw new ValidationError(`limit must be an integer from 1 to ${MAX_CALLBACK_PAGE}`, { limit: q.limit });
  }
  if (q.status !== undefined && !callbackStatuses.includes(q.status)) {
    throw new ValidationError(`status must be one of ${callbackStatuses.join(', ')}`, { status: q.status });
  }
  if (q.movementId !== undefined && !isUuid(q.movementId)) return { callbacks: [], nextCursor: null };
  const after = q.cursor ? decodeCursor(q.cursor) : null;

  const { rows } = await db.query<CallbackRow & { cursor_at: string }>(
    `SELECT c.*, ${CURSOR_AT_SQL} AS cursor_at
       FROM callback_outbox c
      WHERE ($1::text IS NULL OR c.status = $1)
        AND ($2::uuid IS NULL OR c.request_id = $2)
        AND ($3::timestamptz IS NULL OR (c.created_at, c.id) > ($3::timestamptz, $4::uuid))
      ORDER BY c.created_at, c.id
      LIMIT $5`,
    [q.status ?? null, q.movementId ?? null, after?.at ?? null, after?.id ?? null, q.limit + 1],
  );
  const page = pageOfRows(rows, q.limit);
  return { callbacks: page.rows, nextCursor: page.nextCursor };
}

