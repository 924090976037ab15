import { FerryError, NotFoundError, ValidationError } from '../errors.ts';
import { CURSOR_AT_SQL, decodeCursor, encodeCursor, isUuid } from './cursor.ts';
import type { Queryable } from './db.ts';

/**
 * SQL for the callback outbox: one row per callback a movement owes its caller, written in the
 * transaction of the state change it reports, then delivered (and retried) by the delivery worker.
 *
 * A delivery attempt is: claim (a short lease, own statement), HTTP call with no lock held, then
 * record the outcome fenced by the lease token. Callbacks of one request are delivered in creation
 * order: a row is claimable only when no older row of the same request is still pending.
 */

export type CallbackStatus = 'pending' | 'sent' | 'dlq';
export const callbackStatuses: readonly CallbackStatus[] = ['pending', 'sent', 'dlq'];

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
}

export interface NewCallback {
  requestId: string;
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
       (request_id, event_type, node_key, callback_url, payload, payload_body, max_attempts,
        callback_timestamp, callback_nonce, destination_id)
     VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, $8, $9,
             (SELECT callback_destination_id FROM movement_requests WHERE id = $1))
     RETURNING *`,
    [c.requestId, c.eventType, c.nodeKey, c.callbackUrl, c.body, c.body, c.maxAttempts, c.timestamp, c.nonce],
  );
  return rows[0];
}

export async function getCallback(db: Queryable, id: string): Promise<CallbackRow | null> {
  if (!isUuid(id)) return null;
  const { rows } = await db.query<CallbackRow>('SELECT * FROM callback_outbox WHERE id = $1', [id]);
  return rows[0] ?? null;
}

/** Every callback of one request, oldest first (the order they are delivered in). */
export async function callbacksForRequest(db: Queryable, requestId: string): Promise<CallbackRow[]> {
  if (!isUuid(requestId)) return [];
  const { rows } = await db.query<CallbackRow>(
    'SELECT * FROM callback_outbox WHERE request_id = $1 ORDER BY created_at, id',
    [requestId],
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

/** Records a 2xx. Returns null when the lease was lost (someone else owns this attempt now). */
export async function recordDeliverySuccess(
  db: Queryable,
  id: string,
  leaseToken: string,
  statusCode: number,
): Promise<CallbackRow | null> {
  const { rows } = await db.query<CallbackRow>(
    `UPDATE callback_outbox
        SET status = 'sent', attempts = attempts + 1, sent_at = now(), last_attempt_at = now(),
            last_status_code = $3, lease_token = NULL, lease_expires_at = NULL, updated_at = now()
      WHERE id = $1 AND lease_token = $2 AND status = 'pending'
      RETURNING *`,
    [id, leaseToken, statusCode],
  );
  return rows[0] ?? null;
}

/**
 * Records a failed attempt (non-2xx, network error, timeout). The row goes to 'dlq' once attempts
 * reach max_attempts; otherwise next_attempt_at = now() + 2^min(attempts, 6) seconds, where now()
 * is the recorded attempt time (last_attempt_at). A `final` failure (the destination is disabled)
 * goes to 'dlq' at once. Returns null when the lease was lost.
 */
export async function recordDeliveryFailure(
  db: Queryable,
  id: string,
  leaseToken: string,
  failure: { statusCode: number | null; error: string; final?: boolean },
): Promise<CallbackRow | null> {
  const { rows } = await db.query<CallbackRow>(
    `UPDATE callback_outbox
        SET attempts = attempts + 1,
            status = CASE WHEN $5 OR attempts + 1 >= max_attempts THEN 'dlq' ELSE 'pending' END,
            next_attempt_at = CASE WHEN $5 OR attempts + 1 >= max_attempts THEN next_attempt_at
                                   ELSE now() + make_interval(secs => power(2, least(attempts + 1, 6))) END,
            last_attempt_at = now(), last_error = $3, last_status_code = $4,
            lease_token = NULL, lease_expires_at = NULL, updated_at = now()
      WHERE id = $1 AND lease_token = $2 AND status = 'pending'
      RETURNING *`,
    [id, leaseToken, failure.error.slice(0, 2000), failure.statusCode, failure.final ?? false],
  );
  return rows[0] ?? null;
}

/** The oldest pending callback of a request: the one whose turn it is. */
export async function nextPendingCallback(db: Queryable, requestId: string): Promise<CallbackRow | null> {
  const { rows } = await db.query<CallbackRow>(
    `SELECT * FROM callback_outbox
      WHERE request_id = $1 AND status = 'pending'
      ORDER BY created_at, id
      LIMIT 1`,
    [requestId],
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

/** Notes that the stranded-callback sweep wrote a job for this row (see listStrandedCallbacks). */
export async function markStrandedRequeued(db: Queryable, id: string): Promise<void> {
  await db.query('UPDATE callback_outbox SET stranded_requeued_at = now() WHERE id = $1', [id]);
}

/**
 * Puts a 'dlq' (or still 'pending') callback back to work: attempts 0, due now, redrive_count + 1.
 * Timestamp, nonce and body are kept, so the receiver sees the same delivery again. A lease held by
 * an in-flight attempt is left alone: that attempt records its outcome against the reset row.
 */
export async function redriveCallback(db: Queryable, id: string): Promise<CallbackRow> {
  if (!isUuid(id)) throw new NotFoundError('callback', id);
  const { rows } = await db.query<CallbackRow>(
    `UPDATE callback_outbox
        SET status = 'pending', attempts = 0, next_attempt_at = now(),
            redrive_count = redrive_count + 1, updated_at = now()
      WHERE id = $1 AND status IN ('pending', 'dlq')
      RETURNING *`,
    [id],
  );
  if (rows[0]) return rows[0];
  const row = await getCallback(db, id);
  if (!row) throw new NotFoundError('callback', id);
  throw new FerryError('CALLBACK_NOT_REDRIVABLE', `callback ${id} is ${row.status}; only pending or dlq callbacks can be redriven`, {
    id,
    status: row.status,
  });
}

export interface ListCallbacksQuery {
  status?: CallbackStatus;
  requestId?: string;
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
  if (q.requestId !== undefined && !isUuid(q.requestId)) return { callbacks: [], nextCursor: null };
  const after = q.cursor ? decodeCursor(q.cursor) : null;

  const { rows } = await db.query<CallbackRow & { cursor_at: string }>(
    `SELECT c.*, ${CURSOR_AT_SQL} AS cursor_at
       FROM callback_outbox c
      WHERE ($1::text IS NULL OR c.status = $1)
        AND ($2::uuid IS NULL OR c.request_id = $2)
        AND ($3::timestamptz IS NULL OR (c.created_at, c.id) > ($3::timestamptz, $4::uuid))
      ORDER BY c.created_at, c.id
      LIMIT $5`,
    [q.status ?? null, q.requestId ?? null, after?.at ?? null, after?.id ?? null, q.limit + 1],
  );
  const page = rows.slice(0, q.limit);
  const last = page[page.length - 1];
  const nextCursor = rows.length > q.limit && last ? encodeCursor(last.cursor_at, last.id) : null;
  return { callbacks: page.map(({ cursor_at: _c, ...row }) => row), nextCursor };
}

