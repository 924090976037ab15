import { decodeTupleCursor, encodeTupleCursor, invalidCursor } from './cursor.ts';
import type { Queryable } from './db.ts';

/**
 * Balance snapshots (migration 0070): `balance_watch`, one row per watched (chain, wallet, asset)
 * holding the sweep's schedule and the latest result, and `balance_snapshots`, the append-only
 * history of successful fetches.
 *
 * Concurrency: several processes may run the sweep. A run claims due rows by setting a lease
 * (`leased_until`) in one short statement (`FOR UPDATE SKIP LOCKED`, so two runs never claim the
 * same row), then fetches with no transaction open, then records each result in its own short
 * transaction. A process that dies mid-run leaves leases that expire on their own.
 */

export interface WatchKey {
  chain: string;
  wallet: string;
  asset: string;
}

export interface WatchEntry extends WatchKey {
  lane: string;
  fetcher: string;
  symbol: string | null;
  label: string | null;
}

export interface WatchRow extends WatchEntry {
  amount: string | null;
  decimals: number | null;
  as_of: Date | null;
  last_attempt_at: Date | null;
  error_code: string | null;
  error_at: Date | null;
  consecutive_errors: number;
}

const keyArrays = (keys: readonly WatchKey[]) => [keys.map((k) => k.chain), keys.map((k) => k.wallet), keys.map((k) => k.asset)];

/**
 * Makes sure every configured entry has its row (new ones are due at once) and that labels and
 * symbols follow the configuration. Rows are rewritten only when something changed.
 */
export async function syncWatchEntries(db: Queryable, entries: readonly WatchEntry[]): Promise<void> {
  if (entries.length === 0) return;
  await db.query(
    `INSERT INTO balance_watch (chain, wallet, asset, lane, fetcher, symbol, label)
     SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[])
     ON CONFLICT (chain, wallet, asset) DO UPDATE
        SET lane = EXCLUDED.lane, fetcher = EXCLUDED.fetcher, symbol = EXCLUDED.symbol, label = EXCLUDED.label
      WHERE (balance_watch.lane, balance_watch.fetcher, balance_watch.symbol, balance_watch.label)
            IS DISTINCT FROM (EXCLUDED.lane, EXCLUDED.fetcher, EXCLUDED.symbol, EXCLUDED.label)`,
    [
      ...keyArrays(entries),
      entries.map((e) => e.lane),
      entries.map((e) => e.fetcher),
      entries.map((e) => e.symbol),
      entries.map((e) => e.label),
    ],
  );
}

/**
 * Claims up to `limit` of the given entries that are due (never attempted, or last attempted at
 * least `intervalSeconds` ago) and not leased by another run: never attempted first, then the
 * longest waiting. The lease lasts `leaseMs`. Returns the claimed rows in that order.
 */
export async function claimDueWatchEntries(
  db: Queryable,
  keys: readonly WatchKey[],
  opts: { limit: number; intervalSeconds: number; leaseMs: number },
): Promise<WatchRow[]> {
  if (keys.length === 0) return [];
  const { rows } = await db.query<WatchRow & { prior_attempt_at: Date | null }>(
    `WITH due AS (
       SELECT w.chain, w.wallet, w.asset
         FROM balance_watch w
         JOIN unnest($1::text[], $2::text[], $3::text[]) AS k(chain, wallet, asset)
           ON (w.chain, w.wallet, w.asset) = (k.chain, k.wallet, k.asset)
        WHERE (w.last_attempt_at IS NULL OR w.last_attempt_at <= now() - make_interval(secs => $4))
          AND (w.leased_until IS NULL OR w.leased_until < now())
        ORDER BY w.last_attempt_at ASC NULLS FIRST, w.chain, w.wallet, w.asset
        LIMIT $5
          FOR UPDATE OF w SKIP LOCKED)
     UPDATE balance_watch t SET leased_until = now() + make_interval(secs => $6)
       FROM due
      WHERE (t.chain, t.wallet, t.asset) = (due.chain, due.wallet, due.asset)
     RETURNING t.*`,
    [...keyArrays(keys), opts.intervalSeconds, opts.limit, opts.leaseMs / 1000],
  );
  return rows
    .map(watchRow)
    .sort((a, b) => (a.last_attempt_at?.getTime() ?? -Infinity) - (b.last_attempt_at?.getTime() ?? -Infinity) || keyOrder(a, b));
}

function keyOrder(a: WatchKey, b: WatchKey): number {
  return a.chain.localeCompare(b.chain) || a.wallet.localeCompare(b.wallet) || a.asset.localeCompare(b.asset);
}

/** A successful fetch: one history row and the latest values, in one transaction (the caller's). */
export async function recordSnapshot(db: Queryable, key: WatchKey, amount: bigint, decimals: number): Promise<void> {
  await db.query(
    `WITH snap AS (
       INSERT INTO balance_snapshots (chain, wallet, asset, amount, decimals)
       VALUES ($1, $2, $3, $4, $5)
       RETURNING taken_at)
     UPDATE balance_watch
        SET amount = $4, decimals = $5, as_of = (SELECT taken_at FROM snap), last_attempt_at = now(),
            leased_until = NULL, error_code = NULL, error_at = NULL, consecutive_errors = 0
      WHERE (chain, wallet, asset) = ($1, $2, $3)`,
    [key.chain, key.wallet, key.asset, amount.toString(), decimals],
  );
}

/** A failed fetch: the latest amount stays (and grows stale); the error's class is recorded. */
export async function recordFetchError(db: Queryable, key: WatchKey, errorCode: string): Promise<void> {
  await db.query(
    `UPDATE balance_watch
        SET last_attempt_at = now(), leased_until = NULL, error_code = $4, error_at = now(),
            consecutive_errors = consecutive_errors + 1
      WHERE (chain, wallet, asset) = ($1, $2, $3)`,
    [key.chain, key.wallet, key.asset, errorCode],
  );
}

/** Gives back claimed entries a run did not get to (its budget ran out): due again at once. */
export async function releaseWatchEntries(db: Queryable, keys: readonly WatchKey[]): Promise<void> {
  if (keys.length === 0) return;
  await db.query(
    `UPDATE balance_watch w SET leased_until = NULL
       FROM unnest($1::text[], $2::text[], $3::text[]) AS k(chain, wallet, asset)
      WHERE (w.chain, w.wallet, w.asset) = (k.chain, k.wallet, k.asset)`,
    keyArrays(keys),
  );
}

/**
 * Retention: deletes history rows taken more than `retentionSeconds` ago, and watch rows nobody has
 * attempted for that long (an entry removed from the configuration). At most `limit` history rows
 * per call, so one run stays short; the next run deletes the rest.
 */
export async function deleteExpiredBalances(
  db: Queryable,
  retentionSeconds: number,
  limit = 10_000,
): Promise<{ snapshots: number; entries: number }> {
  const snaps = await db.query(
    `DELETE FROM balance_snapshots WHERE id IN (
       SELECT id FROM balance_snapshots WHERE taken_at < now() - make_interval(secs => $1) ORDER BY taken_at LIMIT $2)`,
    [retentionSeconds, limit],
  );
  const entries = await db.query(
    `DELETE FROM balance_watch
      WHERE coalesce(last_attempt_at, created_at) < now() - make_interval(secs => $1)
        AND (leased_until IS NULL OR leased_until < now())`,
    [retentionSeconds],
  );
  return { snapshots: snaps.rowCount ?? 0, entries: entries.rowCount ?? 0 };
}

// ---------------------------------------------------------------------------------------------
// Reading

export interface BalanceListQuery {
  chain?: string;
  wallet?: string;
  /** 'native', a token address, or a symbol (case-insensitive). */
  asset?: string;
  staleThresholdSeconds: number;
  limit: number;
  cursor?: string | null;
}

export interface BalanceListRow extends WatchRow {
  stale: boolean;
}

export interface BalancePage {
  balances: BalanceListRow[];
  next_cursor: string | null;
}

export const MAX_BALANCE_PAGE = 500;

function encodeBalanceCursor(k: WatchKey): string {
  return encodeTupleCursor([k.chain, k.wallet, k.asset]);
}

function decodeBalanceCursor(cursor: string): WatchKey {
  const parsed = decodeTupleCursor(cursor, 3);
  if (!parsed.every((p): p is string => typeof p === 'string' && p.length > 0 && p.length <= 200)) throw invalidCursor();
  return { chain: parsed[0], wallet: parsed[1], asset: parsed[2] };
}

/**
 * The latest balance per (chain, wallet, asset), ordered by that key, with `stale` judged now by the
 * database clock (the same clock that stamped as_of): never fetched, or last fetched longer ago than
 * the threshold.
 */
export async function listBalances(db: Queryable, q: BalanceListQuery): Promise<BalancePage> {
  const after = q.cursor ? decodeBalanceCursor(q.cursor) : null;
  const { rows } = await db.query<WatchRow & { stale: boolean }>(
    `SELECT chain, wallet, asset, lane, fetcher, symbol, label, amount, decimals, as_of, last_attempt_at,
            error_code, error_at, consecutive_errors,
            (as_of IS NULL OR as_of < now() - make_interval(secs => $1)) AS stale
       FROM balance_watch
      WHERE ($2::text IS NULL OR chain = $2)
        AND ($3::text IS NULL OR wallet = $3)
        AND ($4::text IS NULL OR asset = lower($4) OR upper(symbol) = upper($4))
        AND ($5::text IS NULL OR (chain, wallet, asset) > ($5, $6, $7))
      ORDER BY chain, wallet, asset
      LIMIT $8`,
    [
      q.staleThresholdSeconds,
      q.chain ?? null,
      q.wallet ?? null,
      q.asset ?? null,
      after?.chain ?? null,
      after?.wallet ?? null,
      after?.asset ?? null,
      q.limit + 1,
    ],
  );
  const page = rows.slice(0, q.limit).map((r) => ({ ...watchRow(r), stale: r.stale }));
  const last = page[page.length - 1];
  return { balances: page, next_cursor: rows.length > q.limit && last ? encodeBalanceCursor(last) : null };
}

/** A watched balance as the metrics gauges show it: the latest amount and its age by the database clock. */
export interface BalanceGaugeRow extends WatchKey {
  symbol: string | null;
  amount: string | null;
  decimals: number | null;
  age_seconds: number | null;
  consecutive_errors: number;
}

/** The first `limit` watched balances in key order, for the scrape-time gauges. */
export async function balanceGaugeRows(db: Queryable, limit: number): Promise<BalanceGaugeRow[]> {
  const { rows } = await db.query<BalanceGaugeRow>(
    `SELECT chain, wallet, asset, symbol, amount::text AS amount, decimals, consecutive_errors,
            extract(epoch FROM now() - as_of)::float8 AS age_seconds
       FROM balance_watch ORDER BY chain, wallet, asset LIMIT $1`,
    [limit],
  );
  return rows;
}

/** The history of one balance, newest first (for tests and operators' queries). */
export async function snapshotsOf(db: Queryable, key: WatchKey): Promise<Array<{ id: number; amount: string; decimals: number; taken_at: Date }>> {
  const { rows } = await db.query(
    `SELECT id, amount::text AS amount, decimals, taken_at FROM balance_snapshots
      WHERE (chain, wallet, asset) = ($1, $2, $3) ORDER BY taken_at DESC, id DESC`,
    [key.chain, key.wallet, key.asset],
  );
  return rows.map((r) => ({ ...r, id: Number(r.id) }));
}

function watchRow(r: WatchRow): WatchRow {
  return {
    chain: r.chain,
    wallet: r.wallet,
    asset: r.asset,
    lane: r.lane,
    fetcher: r.fetcher,
    symbol: r.symbol,
    label: r.label,
    // numeric arrives as text from pg: exact, as it must be for 78-digit amounts.
    amount: r.amount === null ? null : String(r.amount),
    decimals: r.decimals,
    as_of: r.as_of,
    last_attempt_at: r.last_attempt_at,
    error_code: r.error_code,
    error_at: r.error_at,
    consecutive_errors: Number(r.consecutive_errors),
  };
}

// ---------------------------------------------------------------------------------------------
// Balance history rollups (migration 0360, src/balances/rollup.ts)

export type RollupBucket = 'hour' | 'day';

/**
 * Folds the next snapshots (by id, after the recorded progress) into the hourly and daily rollups,
 * in one short transaction: min and max widen, `last` follows the latest snapshot, samples add up,
 * and the progress moves to the last id folded, so each snapshot is counted once even when the run
 * is retried. Snapshots younger than `settleSeconds` wait for the next run (and so do those after
 * them), so a snapshot whose insert commits late is not skipped. Returns how many were folded.
 */
export async function foldSnapshotsIntoRollups(db: Queryable, opts: { limit: number; settleSeconds: number }): Promise<{ folded: number; more: boolean }> {
  const { rows } = await db.query<{ folded: string; more: boolean }>(
    `WITH progress AS (SELECT last_snapshot_id FROM balance_rollup_progress WHERE id FOR UPDATE),
     candidates AS (
       SELECT s.*, s.taken_at >= now() - make_interval(secs => $2) AS young
         FROM balance_snapshots s, progress p
        WHERE s.id > p.last_snapshot_id
        ORDER BY s.id
        LIMIT $1),
     batch AS (
       SELECT * FROM candidates
        WHERE id < coalesce((SELECT min(id) FROM candidates WHERE young), 9223372036854775807)),
     buckets AS (
       SELECT chain, wallet, asset, b.bucket, date_trunc(b.bucket, taken_at, 'UTC') AS bucket_start,
              max(decimals) AS decimals, min(amount) AS min_amount, max(amount) AS max_amount,
              (array_agg(amount ORDER BY taken_at DESC, id DESC))[1] AS last_amount, max(taken_at) AS last_at,
              count(*)::int AS samples
         FROM batch CROSS JOIN (VALUES ('hour'), ('day')) AS b(bucket)
        GROUP BY chain, wallet, asset, b.bucket, date_trunc(b.bucket, taken_at, 'UTC')),
     upserted AS (
       INSERT INTO balance_rollups AS r (chain, wallet, asset, bucket, bucket_start, decimals, min_amount, max_amount, last_amount, last_at, samples)
       SELECT * FROM buckets
       ON CONFLICT (chain, wallet, asset, bucket, bucket_start) DO UPDATE
          SET min_amount = LEAST(r.min_amount, EXCLUDED.min_amount),
              max_amount = GREATEST(r.max_amount, EXCLUDED.max_amount),
              last_amount = CASE WHEN EXCLUDED.last_at >= r.last_at THEN EXCLUDED.last_amount ELSE r.last_amount END,
              last_at = GREATEST(r.last_at, EXCLUDED.last_at),
              decimals = CASE WHEN EXCLUDED.last_at >= r.last_at THEN EXCLUDED.decimals ELSE r.decimals END,
              samples = r.samples + EXCLUDED.samples
       RETURNING 1),
     moved AS (
       UPDATE balance_rollup_progress SET last_snapshot_id = (SELECT max(id) FROM batch), updated_at = now()
        WHERE id AND EXISTS (SELECT 1 FROM batch)
       RETURNING 1)
     SELECT (SELECT count(*) FROM batch) AS folded,
            (SELECT count(*) FROM candidates) = $1 AND NOT EXISTS (SELECT 1 FROM candidates WHERE young) AS more,
            (SELECT count(*) FROM upserted) AS buckets, (SELECT count(*) FROM moved) AS moved`,
    [opts.limit, opts.settleSeconds],
  );
  return { folded: Number(rows[0]?.folded ?? 0), more: Boolean(rows[0]?.more) };
}

/** Retention of the rollups: hourly and daily buckets older than their own number of days. */
export async function deleteExpiredRollups(db: Queryable, opts: { hourlyDays: number; dailyDays: number }): Promise<number> {
  const r = await db.query(
    `DELETE FROM balance_rollups
      WHERE (bucket = 'hour' AND bucket_start < now() - make_interval(days => $1))
         OR (bucket = 'day' AND bucket_start < now() - make_interval(days => $2))`,
    [opts.hourlyDays, opts.dailyDays],
  );
  return r.rowCount ?? 0;
}

export interface RollupRow {
  bucket_start: Date;
  decimals: number;
  min_amount: string;
  max_amount: string;
  last_amount: string;
  last_at: Date;
  samples: number;
}

/** One balance's rollups of one bucket size, oldest first, from `since` on (at most `limit`, the newest). */
export async function rollupsOf(db: Queryable, key: WatchKey, bucket: RollupBucket, opts: { since: Date | null; limit: number }): Promise<RollupRow[]> {
  const { rows } = await db.query(
    `SELECT * FROM (
       SELECT bucket_start, decimals, min_amount::text AS min_amount, max_amount::text AS max_amount,
              last_amount::text AS last_amount, last_at, samples
         FROM balance_rollups
        WHERE (chain, wallet, asset, bucket) = ($1, $2, $3, $4)
          AND ($5::timestamptz IS NULL OR bucket_start >= $5)
        ORDER BY bucket_start DESC
        LIMIT $6) newest
      ORDER BY bucket_start`,
    [key.chain, key.wallet, key.asset, bucket, opts.since, opts.limit],
  );
  return rows.map((r) => ({ ...r, decimals: Number(r.decimals), samples: Number(r.samples) }));
}

/** Whether a balance is watched (its row exists). */
export async function watchEntryExists(db: Queryable, key: WatchKey): Promise<boolean> {
  const { rowCount } = await db.query(`SELECT 1 FROM balance_watch WHERE (chain, wallet, asset) = ($1, $2, $3)`, [key.chain, key.wallet, key.asset]);
  return (rowCount ?? 0) > 0;
}
