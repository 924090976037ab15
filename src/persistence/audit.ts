import { createHash } from 'node:crypto';
import { ValidationError } from '../errors.ts';
import { withTransaction, type Pool, type Queryable } from './db.ts';

/**
 * The audit trail. A mutating call writes an audit_outbox row inside its own transaction (so the
 * record exists exactly when the change does); the promoter later moves rows into audit_events,
 * where each event carries the hash of the one before it. Anyone holding the rows can re-check the
 * chain with nothing but SHA-256 and the encoding below.
 *
 * Chain encoding (version 1), for an external verifier:
 *
 *   events are taken in ascending `id`; ids start at 1 and have no gaps.
 *   prev_hash(1) = "sha256:" followed by 64 "0" characters; prev_hash(n) = hash(n-1)
 *   hash(n)      = "sha256:" + lowercase hex SHA-256 of the UTF-8 bytes of
 *                  prev_hash(n) + "\n" + body(n)
 *   body(n)      = a JSON object with exactly these members, in this order, with no whitespace
 *                  outside strings:
 *                  {"outbox_id":N,"actor":S,"action":S,"entity_type":S,"entity_id":S|null,
 *                   "details":D,"occurred_at":S}
 *     - strings and numbers are written as ECMAScript JSON.stringify writes them (RFC 8785 rules);
 *     - D is the stored details value with every object's members sorted by key (UTF-16 code
 *       units, recursively); arrays keep their order;
 *     - occurred_at is UTC with microseconds: YYYY-MM-DDTHH:MM:SS.ffffffZ.
 *
 * Appends are serialised by a transaction-scoped advisory lock, so concurrent promoters cannot fork
 * the chain. The chain proves that no event inside it was changed, removed or reordered; removing
 * events from its end is only detectable against a head recorded elsewhere (auditChainHead, and the
 * checkpoint option of verifyAuditChain).
 */

export const GENESIS_HASH = 'sha256:' + '0'.repeat(64);
/** The channel an insert into audit_outbox notifies at commit (migration 0440): the promoter has work. */
export const AUDIT_OUTBOX_CHANNEL = 'ferry_audit_outbox';
/** The advisory lock key that makes the promoter the single writer of the chain. */
const AUDIT_CHAIN_LOCK = 465_241_900;
const DEFAULT_BATCH = 500;
const VERIFY_PAGE = 1000;

export interface AuditEntry {
  /** Who did it: a principal (`principal:<id>`; `token:<id>` on rows from before principals), a worker name, or `cli:<user>`. */
  actor: string;
  /** What was done, e.g. `movement.approve`. */
  action: string;
  entity_type: string;
  entity_id?: string | null;
  details?: Record<string, unknown>;
}

export interface AuditEvent {
  id: number;
  outbox_id: number;
  actor: string;
  action: string;
  entity_type: string;
  entity_id: string | null;
  details: Record<string, unknown>;
  /** UTC with microseconds, exactly as hashed. */
  occurred_at: string;
  prev_hash: string;
  hash: string;
  promoted_at: Date;
}

export interface ChainHead {
  id: number;
  hash: string;
}

export interface ChainVerification {
  ok: boolean;
  /** Events whose links verified (all of them when ok). */
  checked: number;
  /** The first broken link. */
  broken?: { id: number; reason: string };
}

const ISO_MICROS = `to_char(occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

/** Records an audited action in the caller's transaction; returns the outbox row id. */
export async function writeAudit(client: Queryable, entry: AuditEntry): Promise<number> {
  for (const field of ['actor', 'action', 'entity_type'] as const) {
    if (typeof entry[field] !== 'string' || entry[field].length === 0) {
      throw new ValidationError(`audit ${field} must be a non-empty string`, { field });
    }
  }
  const details = entry.details ?? {};
  if (typeof details !== 'object' || details === null || Array.isArray(details)) {
    throw new ValidationError('audit details must be an object', { field: 'details' });
  }
  const { rows } = await client.query<{ id: number }>(
    `INSERT INTO audit_outbox (actor, action, entity_type, entity_id, details)
     VALUES ($1, $2, $3, $4, $5::jsonb) RETURNING id`,
    [entry.actor, entry.action, entry.entity_type, entry.entity_id ?? null, JSON.stringify(details)],
  );
  return rows[0].id;
}

/** JSON with object members sorted by key at every level; see the chain encoding above. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return '[' + value.map(canonicalJson).join(',') + ']';
  const obj = value as Record<string, unknown>;
  return (
    '{' +
    Object.keys(obj)
      .sort()
      .map((k) => JSON.stringify(k) + ':' + canonicalJson(obj[k]))
      .join(',') +
    '}'
  );
}

interface HashedFields {
  outbox_id: number;
  actor: string;
  action: string;
  entity_type: string;
  entity_id: string | null;
  details: unknown;
  occurred_at: string;
}

export function auditEventHash(prevHash: string, e: HashedFields): string {
  const body =
    '{"outbox_id":' + JSON.stringify(e.outbox_id) +
    ',"actor":' + JSON.stringify(e.actor) +
    ',"action":' + JSON.stringify(e.action) +
    ',"entity_type":' + JSON.stringify(e.entity_type) +
    ',"entity_id":' + JSON.stringify(e.entity_id) +
    ',"details":' + canonicalJson(e.details) +
    ',"occurred_at":' + JSON.stringify(e.occurred_at) +
    '}';
  return 'sha256:' + createHash('sha256').update(prevHash + '\n' + body, 'utf8').digest('hex');
}

/**
 * Moves up to `limit` outbox rows, oldest first, onto the end of the chain, in one short
 * transaction; returns how many it moved. Safe to run from any number of processes at once.
 */
export async function promoteAuditBatch(pool: Pool, limit = DEFAULT_BATCH): Promise<number> {
  // One autocommit statement when the outbox is empty (an idle cluster, every run of the 1 s chain)
  // instead of a transaction and the chain lock. A row committed just after this read waits for the
  // next run, as it would behind the lock.
  if (!(await hasPendingAudit(pool))) return 0;
  return withTransaction(pool, async (client) => {
    // Taken before any read, so the head read below already sees the previous writer's commit.
    await client.query('SELECT pg_advisory_xact_lock($1)', [AUDIT_CHAIN_LOCK]);
    const pending = await client.query<Omit<HashedFields, 'outbox_id'> & { id: number }>(
      `SELECT id, actor, action, entity_type, entity_id, details, ${ISO_MICROS} AS occurred_at
         FROM audit_outbox ORDER BY id LIMIT $1`,
      [limit],
    );
    if (pending.rows.length === 0) return 0;
    const head = await client.query<ChainHead>('SELECT id, hash FROM audit_events ORDER BY id DESC LIMIT 1');
    let prevHash = head.rows[0]?.hash ?? GENESIS_HASH;

    const outboxIds: number[] = [];
    const prevHashes: string[] = [];
    const hashes: string[] = [];
    for (const row of pending.rows) {
      const hash = auditEventHash(prevHash, { ...row, outbox_id: row.id });
      outboxIds.push(row.id);
      prevHashes.push(prevHash);
      hashes.push(hash);
      prevHash = hash;
    }
    // The move itself is ferry_promote_audit (migration 0090), which runs with the tables' owner's
    // rights: the application role may neither insert events nor delete outbox rows on its own. It
    // copies the content from the outbox rows (so timestamps keep their microseconds and details
    // their exact jsonb value), numbers the events after the head and checks that the batch links to it.
    const moved = await client.query<{ n: number }>('SELECT ferry_promote_audit($1::bigint[], $2::text[], $3::text[]) AS n', [
      outboxIds,
      prevHashes,
      hashes,
    ]);
    if (moved.rows[0].n !== outboxIds.length) throw new Error('audit outbox changed during promotion');
    return outboxIds.length;
  });
}

/** Whether any row waits for the chain. */
async function hasPendingAudit(db: Queryable): Promise<boolean> {
  const { rows } = await db.query<{ pending: boolean }>('SELECT EXISTS (SELECT 1 FROM audit_outbox) AS pending');
  return rows[0].pending;
}

/** Rows written but not yet on the chain. */
export async function pendingAuditCount(db: Queryable): Promise<number> {
  const { rows } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM audit_outbox');
  return rows[0].n;
}

/** The last event of the chain; record it outside the database to detect a truncated tail later. */
export async function auditChainHead(db: Queryable): Promise<ChainHead | null> {
  const { rows } = await db.query<ChainHead>('SELECT id, hash FROM audit_events ORDER BY id DESC LIMIT 1');
  return rows[0] ?? null;
}

/**
 * Re-computes the whole chain and names the first broken link. With a checkpoint (a head recorded
 * earlier), it also proves that the chain still reaches that event unchanged.
 */
export async function verifyAuditChain(db: Queryable, opts: { checkpoint?: ChainHead } = {}): Promise<ChainVerification> {
  let prevHash = GENESIS_HASH;
  let prevId = 0;
  let checked = 0;
  let checkpointSeen = false;
  for (;;) {
    const { rows } = await db.query<AuditEvent>(
      `SELECT id, outbox_id, actor, action, entity_type, entity_id, details, ${ISO_MICROS} AS occurred_at, prev_hash, hash
         FROM audit_events WHERE id > $1 ORDER BY id LIMIT $2`,
      [prevId, VERIFY_PAGE],
    );
    for (const e of rows) {
      const broken = (reason: string): ChainVerification => ({ ok: false, checked, broken: { id: e.id, reason } });
      if (e.id !== prevId + 1) {
        const missing = e.id - 1 === prevId + 1 ? `event ${prevId + 1} is` : `events ${prevId + 1}..${e.id - 1} are`;
        return broken(`gap in the chain: ${missing} missing before event ${e.id}`);
      }
      if (e.prev_hash !== prevHash) {
        return broken(`prev_hash mismatch: event ${e.id} does not link to the hash of event ${prevId || 'genesis'}`);
      }
      if (auditEventHash(prevHash, e) !== e.hash) {
        return broken(`hash mismatch: the content of event ${e.id} does not match its hash`);
      }
      if (opts.checkpoint && e.id === opts.checkpoint.id) {
        if (e.hash !== opts.checkpoint.hash) {
          return broken(`checkpoint mismatch: event ${e.id} has hash ${e.hash}, the checkpoint says ${opts.checkpoint.hash}`);
        }
        checkpointSeen = true;
      }
      prevHash = e.hash;
      prevId = e.id;
      checked++;
    }
    if (rows.length < VERIFY_PAGE) break;
  }
  if (opts.checkpoint && !checkpointSeen) {
    return {
      ok: false,
      checked,
      broken: {
        id: opts.checkpoint.id,
        reason: `checkpoint event ${opts.checkpoint.id} is missing: the chain ends at event ${prevId}, so its tail was removed`,
      },
    };
  }
  return { ok: true, checked };
}

export interface AuditPage {
  events: AuditEvent[];
  /** Pass back as `cursor` for the next page; null on the last page. */
  next_cursor: string | null;
}

/** Audit events by id, oldest first (or newest first with order 'desc'), `limit` per page (1..1000). */
export async function listAuditEvents(
  db: Queryable,
  opts: { limit?: number; cursor?: string | null; order?: 'asc' | 'desc'; entity_type?: string; entity_id?: string } = {},
): Promise<AuditPage> {
  const limit = opts.limit ?? 100;
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) {
    throw new ValidationError('limit must be an integer from 1 to 1000', { field: 'limit' });
  }
  if (opts.cursor != null && !/^[1-9][0-9]{0,15}$/.test(opts.cursor)) {
    throw new ValidationError('cursor is not one this API returned', { field: 'cursor' });
  }
  const desc = opts.order === 'desc';
  const { rows } = await db.query<AuditEvent>(
    `SELECT id, outbox_id, actor, action, entity_type, entity_id, details, ${ISO_MICROS} AS occurred_at,
            prev_hash, hash, promoted_at
       FROM audit_events
      WHERE ($1::bigint IS NULL OR ${desc ? 'id < $1' : 'id > $1'})
        AND ($2::text IS NULL OR entity_type = $2)
        AND ($3::text IS NULL OR entity_id = $3)
      ORDER BY id ${desc ? 'DESC' : 'ASC'}
      LIMIT $4`,
    [opts.cursor ?? null, opts.entity_type ?? null, opts.entity_id ?? null, limit + 1],
  );
  const more = rows.length > limit;
  const events = more ? rows.slice(0, limit) : rows;
  return { events, next_cursor: more ? String(events[events.length - 1].id) : null };
}
