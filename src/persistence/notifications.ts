import type { Queryable } from './db.ts';
import type { NotificationContext, NotificationState } from '../machines/notification-delivery-machine.ts';

/**
 * SQL for operator notifications: attention events (each recorded once, by its source_key), the
 * cursors over the append-only sources they are read from, and one delivery row per event per
 * channel. Which status a delivery goes to is the notification machine's decision; writeDelivery
 * writes it, fenced by the attempt it was decided from.
 */

export type AttentionKind =
  | 'manual_intervention'
  | 'node_failed_after_side_effect'
  | 'drift'
  | 'signer_identity_mismatch'
  | 'balance_stale'
  | 'callback_dlq'
  | 'waiting_too_long'
  | 'ccip_stranded'
  | 'registry_drift';

export interface AttentionRow {
  id: string;
  kind: AttentionKind;
  source_key: string;
  dedup_key: string;
  movement_id: string | null;
  summary: string;
  details: Record<string, unknown>;
  created_at: Date;
}

export interface NewAttention {
  kind: AttentionKind;
  sourceKey: string;
  dedupKey: string;
  movementId?: string | null;
  summary: string;
  details?: Record<string, unknown>;
}

/** Records an attention event unless its source already raised one; returns it when written. */
export async function insertAttention(db: Queryable, a: NewAttention): Promise<AttentionRow | null> {
  const { rows } = await db.query<AttentionRow>(
    `INSERT INTO attention_events (kind, source_key, dedup_key, movement_id, summary, details)
     VALUES ($1, $2, $3, $4, $5, $6::jsonb)
     ON CONFLICT (source_key) DO NOTHING RETURNING *`,
    [a.kind, a.sourceKey, a.dedupKey, a.movementId ?? null, a.summary, JSON.stringify(a.details ?? {})],
  );
  return rows[0] ?? null;
}

/** Where a source's cursor stands; a source read for the first time starts at its newest row (history is not announced). */
async function cursorOf(db: Queryable, source: string, newest: string): Promise<number | null> {
  const { rows } = await db.query<{ last_id: string }>('SELECT last_id FROM notification_cursors WHERE source = $1 FOR UPDATE', [source]);
  if (rows[0]) return Number(rows[0].last_id);
  await db.query(`INSERT INTO notification_cursors (source, last_id) SELECT $1, COALESCE((${newest}), 0) ON CONFLICT (source) DO NOTHING`, [source]);
  return null;
}

async function moveCursor(db: Queryable, source: string, to: number): Promise<void> {
  await db.query('UPDATE notification_cursors SET last_id = GREATEST(last_id, $2), updated_at = now() WHERE source = $1', [source, to]);
}

/**
 * How old a transition must be before the cursor passes it: ids are taken when a row is written but
 * become visible at commit, so a writer still committing may hold a lower id than one already seen.
 * Transactions are short (no external call inside one); reading only rows this old leaves none behind.
 */
export const TRANSITION_SETTLE_SECONDS = 10;

/**
 * Attention from the transition log, after the cursor, up to `limit` transitions read: a movement
 * entering MANUAL_INTERVENTION, and a node FAILED while another node of its movement has COMPLETED
 * (a side effect already happened). Call inside a transaction. Returns the events written.
 */
export async function ingestTransitions(db: Queryable, limit: number): Promise<number> {
  const from = await cursorOf(db, 'transitions', 'SELECT max(id) FROM transitions');
  if (from === null) return 0;
  const { rows } = await db.query<{ upto: string | null; written: string }>(
    `WITH scan AS (SELECT * FROM transitions WHERE id > $1 AND at < clock_timestamp() - make_interval(secs => $3) ORDER BY id LIMIT $2),
          found AS (
            SELECT 'manual_intervention' AS kind, 'transition:' || s.id AS source_key, 'manual_intervention:' || s.request_id AS dedup_key,
                   s.request_id AS movement_id, 'movement ' || s.request_id || ' needs manual intervention (was ' || s.from_state || ')' AS summary,
                   jsonb_build_object('transition_id', s.id, 'from_state', s.from_state, 'event', s.event_type) AS details, s.id
              FROM scan s WHERE s.entity_type = 'request' AND s.to_state = 'MANUAL_INTERVENTION'
            UNION ALL
            SELECT 'node_failed_after_side_effect', 'transition:' || s.id, 'node_failed:' || s.request_id || ':' || s.node_key,
                   s.request_id, 'node ' || s.node_key || ' of movement ' || s.request_id || ' failed after a side effect',
                   jsonb_build_object('transition_id', s.id, 'node_key', s.node_key, 'error_code', n.error_code), s.id
              FROM scan s JOIN request_nodes n ON n.id = s.entity_id
             WHERE s.entity_type = 'node' AND s.to_state = 'FAILED'
               AND EXISTS (SELECT 1 FROM request_nodes o WHERE o.request_id = s.request_id AND o.id <> s.entity_id AND o.node_state = 'COMPLETED')),
          ins AS (INSERT INTO attention_events (kind, source_key, dedup_key, movement_id, summary, details)
                  SELECT kind, source_key, dedup_key, movement_id, summary, details FROM found ORDER BY id
                  ON CONFLICT (source_key) DO NOTHING RETURNING 1)
     SELECT (SELECT max(id) FROM scan) AS upto, (SELECT count(*) FROM ins) AS written`,
    [from, limit, TRANSITION_SETTLE_SECONDS],
  );
  if (rows[0]?.upto) await moveCursor(db, 'transitions', Number(rows[0].upto));
  return Number(rows[0]?.written ?? 0);
}

/** Attention from the audit log after the cursor: reconciliation drift (transition logs and providers). */
export async function ingestAudit(db: Queryable, limit: number): Promise<number> {
  const from = await cursorOf(db, 'audit_events', 'SELECT max(id) FROM audit_events');
  if (from === null) return 0;
  const { rows } = await db.query<{ upto: string | null; written: string }>(
    `WITH scan AS (SELECT * FROM audit_events WHERE id > $1 ORDER BY id LIMIT $2),
          ins AS (INSERT INTO attention_events (kind, source_key, dedup_key, movement_id, summary, details)
                  SELECT 'drift', 'audit:' || s.id, 'drift:' || s.action || ':' || COALESCE(s.entity_id, ''),
                         CASE WHEN s.entity_type = 'movement' AND s.entity_id ~ '^[0-9a-f-]{36}$' THEN s.entity_id::uuid END,
                         s.action || ' on ' || s.entity_type || ' ' || COALESCE(s.entity_id, ''),
                         jsonb_build_object('audit_id', s.id, 'action', s.action, 'entity_type', s.entity_type, 'entity_id', s.entity_id)
                    FROM scan s
                   WHERE s.action IN ('reconciliation.drift', 'reconciliation.provider_drift')
                     AND (s.entity_type <> 'movement' OR EXISTS (SELECT 1 FROM movement_requests m WHERE m.id::text = s.entity_id))
                   ORDER BY s.id
                  ON CONFLICT (source_key) DO NOTHING RETURNING 1)
     SELECT (SELECT max(id) FROM scan) AS upto, (SELECT count(*) FROM ins) AS written`,
    [from, limit],
  );
  if (rows[0]?.upto) await moveCursor(db, 'audit_events', Number(rows[0].upto));
  return Number(rows[0]?.written ?? 0);
}

/** Attention for callbacks in the dead-letter queue (each dead-lettering once: a redrive that dies again is new). */
export async function ingestDeadLetters(db: Queryable, limit: number): Promise<number> {
  const { rowCount } = await db.query(
    `INSERT INTO attention_events (kind, source_key, dedup_key, movement_id, summary, details)
     SELECT 'callback_dlq', 'callback_dlq:' || c.id || ':' || c.redrive_count, 'callback_dlq:' || c.request_id, c.request_id,
            'callback ' || c.event_type || ' of movement ' || c.request_id || ' is dead-lettered after ' || c.attempts || ' attempts',
            jsonb_build_object('callback_id', c.id, 'event_type', c.event_type, 'attempts', c.attempts, 'last_error', c.last_error)
       FROM callback_outbox c
      WHERE c.status = 'dlq'
        AND NOT EXISTS (SELECT 1 FROM attention_events a WHERE a.source_key = 'callback_dlq:' || c.id || ':' || c.redrive_count)
      ORDER BY c.updated_at
      LIMIT $1
     ON CONFLICT (source_key) DO NOTHING`,
    [limit],
  );
  return rowCount ?? 0;
}

/** Attention for watched balances last fetched longer ago than the threshold (once per reading that went stale). */
export async function ingestStaleBalances(db: Queryable, thresholdSeconds: number, limit: number): Promise<number> {
  const { rowCount } = await db.query(
    `INSERT INTO attention_events (kind, source_key, dedup_key, summary, details)
     SELECT 'balance_stale', 'balance_stale:' || b.chain || ':' || b.wallet || ':' || b.asset || ':' || extract(epoch FROM b.as_of)::bigint,
            'balance_stale:' || b.chain || ':' || b.wallet || ':' || b.asset,
            'balance of ' || COALESCE(b.symbol, b.asset) || ' in ' || b.wallet || ' on ' || b.chain || ' is stale (last read ' || to_char(b.as_of AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') || ')',
            jsonb_build_object('chain', b.chain, 'wallet', b.wallet, 'asset', b.asset, 'as_of', b.as_of, 'error_code', b.error_code)
       FROM balance_watch b
      WHERE b.as_of IS NOT NULL AND b.as_of < now() - make_interval(secs => $1)
        AND NOT EXISTS (SELECT 1 FROM attention_events a
                         WHERE a.source_key = 'balance_stale:' || b.chain || ':' || b.wallet || ':' || b.asset || ':' || extract(epoch FROM b.as_of)::bigint)
      LIMIT $2
     ON CONFLICT (source_key) DO NOTHING`,
    [thresholdSeconds, limit],
  );
  return rowCount ?? 0;
}

/** Attention for signers whose observed identity is not the one enrolled (once per observed identity). */
export async function ingestSignerMismatches(db: Queryable, limit: number): Promise<number> {
  const { rowCount } = await db.query(
    `INSERT INTO attention_events (kind, source_key, dedup_key, summary, details)
     SELECT 'signer_identity_mismatch', 'signer_mismatch:' || s.signer_key || ':' || s.observed_signer_address, 'signer_mismatch:' || s.signer_key,
            'signer ' || s.signer_key || ' answers as ' || s.observed_signer_address || ', not the enrolled ' || s.expected_signer_address,
            jsonb_build_object('signer_key', s.signer_key, 'expected', s.expected_signer_address, 'observed', s.observed_signer_address)
       FROM signer_registry s
      WHERE s.expected_signer_address IS NOT NULL AND s.observed_signer_address IS NOT NULL
        AND lower(s.expected_signer_address) <> lower(s.observed_signer_address)
        AND NOT EXISTS (SELECT 1 FROM attention_events a WHERE a.source_key = 'signer_mismatch:' || s.signer_key || ':' || s.observed_signer_address)
      LIMIT $1
     ON CONFLICT (source_key) DO NOTHING`,
    [limit],
  );
  return rowCount ?? 0;
}

export interface DeliveryRow {
  id: string;
  attention_id: string;
  channel: string;
  dedup_key: string;
  status: NotificationState;
  attempts: number;
  max_attempts: number;
  next_attempt_at: Date;
  last_attempt_at: Date | null;
  last_error: string | null;
  last_status_code: number | null;
  delivered_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

/**
 * Gives a channel its delivery rows for the attention events after its cursor (a new channel starts
 * at the newest event), in event order: 'suppressed' when the channel has a pending or delivered
 * row with the same dedup_key made within `dedupSeconds`, else 'pending'. Call inside a transaction.
 */
export async function fanOut(db: Queryable, channel: { name: string; maxAttempts: number; dedupSeconds: number }, limit: number): Promise<{ pending: number; suppressed: number }> {
  const source = `channel:${channel.name}`;
  const from = await cursorOf(db, source, 'SELECT max(id) FROM attention_events');
  const out = { pending: 0, suppressed: 0 };
  if (from === null) return out;
  const { rows: events } = await db.query<{ id: string; dedup_key: string }>(
    'SELECT id, dedup_key FROM attention_events WHERE id > $1 ORDER BY id LIMIT $2',
    [from, limit],
  );
  for (const e of events) {
    const { rows } = await db.query<{ status: NotificationState }>(
      `INSERT INTO notification_deliveries (attention_id, channel, dedup_key, status, max_attempts)
       SELECT $1, $2, $3,
              CASE WHEN EXISTS (SELECT 1 FROM notification_deliveries d
                                 WHERE d.channel = $2 AND d.dedup_key = $3 AND d.status IN ('pending', 'delivered')
                                   AND d.created_at > clock_timestamp() - make_interval(secs => $5))
                   THEN 'suppressed' ELSE 'pending' END,
              $4
       ON CONFLICT (attention_id, channel) DO NOTHING RETURNING status`,
      [e.id, channel.name, e.dedup_key, channel.maxAttempts, channel.dedupSeconds],
    );
    if (rows[0]?.status === 'suppressed') out.suppressed++;
    else if (rows[0]) out.pending++;
  }
  if (events.length > 0) await moveCursor(db, source, Number(events[events.length - 1].id));
  return out;
}

/** How many deliveries of the channel were attempted in the last minute (its rate limit's count). */
export async function attemptsLastMinute(db: Queryable, channel: string): Promise<number> {
  const { rows } = await db.query<{ n: string }>(
    `SELECT count(*) AS n FROM notification_deliveries WHERE channel = $1 AND last_attempt_at > now() - interval '60 seconds'`,
    [channel],
  );
  return Number(rows[0].n);
}

export type DueDelivery = DeliveryRow & { event: AttentionRow };

/** The channel's pending deliveries that are due, oldest first. */
export async function dueDeliveries(db: Queryable, channel: string, limit: number): Promise<DueDelivery[]> {
  if (limit <= 0) return [];
  const { rows } = await db.query<DeliveryRow & { event: AttentionRow }>(
    `SELECT d.*, to_jsonb(a) AS event
       FROM notification_deliveries d JOIN attention_events a ON a.id = d.attention_id
      WHERE d.channel = $1 AND d.status = 'pending' AND d.next_attempt_at <= now()
      ORDER BY d.created_at, d.id
      LIMIT $2`,
    [channel, limit],
  );
  return rows;
}

/** A delivery row's columns as the notification machine's context. */
export function deliveryContext(row: DeliveryRow): NotificationContext {
  const iso = (d: Date | null) => (d ? new Date(d).toISOString() : null);
  return {
    attempts: row.attempts,
    maxAttempts: row.max_attempts,
    nextAttemptAt: new Date(row.next_attempt_at).toISOString(),
    lastAttemptAt: iso(row.last_attempt_at),
    lastError: row.last_error,
    lastStatusCode: row.last_status_code,
    deliveredAt: iso(row.delivered_at),
  };
}

/** A channel's pending deliveries, locked (the channel service settles them when it closes the channel). */
export async function pendingDeliveriesOf(db: Queryable, channel: string): Promise<DeliveryRow[]> {
  const { rows } = await db.query<DeliveryRow>(`SELECT * FROM notification_deliveries WHERE channel = $1 AND status = 'pending' ORDER BY created_at, id FOR UPDATE`, [channel]);
  return rows;
}

/**
 * Forgets how far a channel has read the attention events: the next run starts it at the newest
 * event again, as a new channel (what happened while it was disabled or before it existed is not sent).
 */
export async function forgetChannelCursor(db: Queryable, channel: string): Promise<void> {
  await db.query('DELETE FROM notification_cursors WHERE source = $1', [`channel:${channel}`]);
}

/** Writes what the machine decided for an attempt, if the row is still at the attempt it was decided from. */
export async function writeDelivery(db: Queryable, id: string, fromAttempts: number, to: NotificationState, c: NotificationContext): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE notification_deliveries
        SET status = $3, attempts = $4, next_attempt_at = $5, last_attempt_at = $6, last_error = $7, last_status_code = $8,
            delivered_at = $9, updated_at = now()
      WHERE id = $1 AND attempts = $2 AND status = 'pending'`,
    [id, fromAttempts, to, c.attempts, c.nextAttemptAt, c.lastAttemptAt, c.lastError, c.lastStatusCode, c.deliveredAt],
  );
  return (rowCount ?? 0) > 0;
}

export async function deliveriesOf(db: Queryable, opts: { channel?: string; limit?: number } = {}): Promise<DeliveryRow[]> {
  const { rows } = await db.query<DeliveryRow>(
    `SELECT * FROM notification_deliveries WHERE ($1::text IS NULL OR channel = $1) ORDER BY created_at DESC, id LIMIT $2`,
    [opts.channel ?? null, opts.limit ?? 100],
  );
  return rows;
}

export async function listAttention(db: Queryable, opts: { kind?: AttentionKind; limit?: number } = {}): Promise<AttentionRow[]> {
  const { rows } = await db.query<AttentionRow>(
    `SELECT * FROM attention_events WHERE ($1::text IS NULL OR kind = $1) ORDER BY id DESC LIMIT $2`,
    [opts.kind ?? null, opts.limit ?? 100],
  );
  return rows;
}

/** The database's clock, for event times. */
export async function dbNow(db: Queryable): Promise<Date> {
  const { rows } = await db.query<{ now: Date }>('SELECT now() AS now');
  return rows[0].now;
}
