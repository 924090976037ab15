import type { Client, Queryable } from './db.ts';

/**
 * SQL of the EVM nonce reservation table (migrations/0040). One wallet is (chain_id, sender); the
 * sender is a lowercase 0x address.
 *
 * Concurrency: every statement that hands out a nonce or changes who holds one runs inside a
 * transaction that first takes `lockWallet` (a transaction-scoped advisory lock on the wallet).
 * Reservations of one wallet are therefore serialised, and each sees every earlier one committed;
 * reservations of different wallets never wait for each other (two wallets whose keys share a hash
 * only wait, they never mix). Waiting, not SKIP LOCKED: every caller needs the next nonce of that
 * very wallet, there is nothing else to pick, and the critical section is a few index lookups with
 * no RPC, signer or other external call inside it. The partial unique indexes back the lock up: two
 * live rows can never hold the same nonce, nor one attempt two nonces of a wallet.
 */

export type NonceStatus = 'reserved' | 'broadcast' | 'confirmed' | 'released' | 'filled';

export interface WalletKey {
  chainId: number;
  sender: string;
}

export interface NonceRow {
  id: number;
  chain_id: number;
  sender: string;
  nonce: number;
  request_node_id: string;
  attempt_no: number;
  status: NonceStatus;
  tx_hash: string | null;
  filler_tx_hash: string | null;
  filler_raw: string | null;
  detail: string | null;
  created_at: Date;
  updated_at: Date;
  broadcast_at: Date | null;
  closed_at: Date | null;
}

const LIVE_FOR_ATTEMPT = `('reserved', 'broadcast', 'confirmed')`;

/** Serialises nonce decisions of one wallet until the transaction ends. */
export async function lockWallet(client: Client, w: WalletKey): Promise<void> {
  await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`ferry.evm_nonce:${w.chainId}:${w.sender}`]);
}

/** The attempt's live reservation on this wallet, if it has one. */
export async function reservationOfAttempt(db: Queryable, w: WalletKey, requestNodeId: string, attemptNo: number): Promise<NonceRow | null> {
  const { rows } = await db.query<NonceRow>(
    `SELECT * FROM evm_nonce_reservations
      WHERE chain_id = $1 AND sender = $2 AND request_node_id = $3 AND attempt_no = $4 AND status IN ${LIVE_FOR_ATTEMPT}`,
    [w.chainId, w.sender, requestNodeId, attemptNo],
  );
  return rows[0] ?? null;
}

/** The attempt's live reservation on any wallet of this sender (an attempt is on one chain). */
export async function reservationOfAttemptAnyChain(db: Queryable, sender: string, requestNodeId: string, attemptNo: number): Promise<NonceRow | null> {
  const { rows } = await db.query<NonceRow>(
    `SELECT * FROM evm_nonce_reservations
      WHERE sender = $1 AND request_node_id = $2 AND attempt_no = $3 AND status IN ${LIVE_FOR_ATTEMPT}
      ORDER BY id DESC LIMIT 1`,
    [sender, requestNodeId, attemptNo],
  );
  return rows[0] ?? null;
}

/**
 * Whether the reaper took the attempt's nonce back before any version of it was cleared for
 * broadcast: a released or filled row and no row of the attempt that was ever cleared. Then no byte
 * of the attempt left Ferry (every send passes clearForBroadcast, which the reaper's takeover
 * excludes under the wallet lock), so the attempt did nothing, however the nonce was used since.
 */
export async function reclaimedBeforeBroadcast(db: Queryable, sender: string, requestNodeId: string, attemptNo: number): Promise<boolean> {
  const { rows } = await db.query<{ reclaimed: boolean }>(
    `SELECT bool_or(status IN ('released', 'filled')) AND bool_and(broadcast_at IS NULL AND status IN ('released', 'filled')) AS reclaimed
       FROM evm_nonce_reservations
      WHERE sender = $1 AND request_node_id = $2 AND attempt_no = $3`,
    [sender, requestNodeId, attemptNo],
  );
  return rows[0]?.reclaimed === true;
}

/** Highest nonce any live (not released) row of the wallet holds; null when none. */
export async function highestLiveNonce(db: Queryable, w: WalletKey): Promise<number | null> {
  const { rows } = await db.query<{ nonce: number }>(
    `SELECT nonce FROM evm_nonce_reservations WHERE chain_id = $1 AND sender = $2 AND status <> 'released'
      ORDER BY nonce DESC LIMIT 1`,
    [w.chainId, w.sender],
  );
  return rows[0]?.nonce ?? null;
}

/**
 * The lowest released nonce at or above `floor` that no live row has taken again: a gap below the
 * wallet's highest live nonce, which must be used before the chain can mine anything above it.
 */
export async function lowestReusableGap(db: Queryable, w: WalletKey, floor: number): Promise<number | null> {
  const { rows } = await db.query<{ nonce: number }>(
    `SELECT r.nonce FROM evm_nonce_reservations r
      WHERE r.chain_id = $1 AND r.sender = $2 AND r.status = 'released' AND r.nonce >= $3
        AND NOT EXISTS (SELECT 1 FROM evm_nonce_reservations l
                         WHERE l.chain_id = r.chain_id AND l.sender = r.sender AND l.nonce = r.nonce AND l.status <> 'released')
      ORDER BY r.nonce LIMIT 1`,
    [w.chainId, w.sender, floor],
  );
  return rows[0]?.nonce ?? null;
}

export async function insertReservation(db: Queryable, w: WalletKey, nonce: number, requestNodeId: string, attemptNo: number): Promise<NonceRow> {
  const { rows } = await db.query<NonceRow>(
    `INSERT INTO evm_nonce_reservations (chain_id, sender, nonce, request_node_id, attempt_no, status)
     VALUES ($1, $2, $3, $4, $5, 'reserved') RETURNING *`,
    [w.chainId, w.sender, nonce, requestNodeId, attemptNo],
  );
  return rows[0]!;
}

/** Locks one row (inside a wallet-locked transaction) to decide its fate. */
export async function lockReservation(client: Client, id: number): Promise<NonceRow | null> {
  const { rows } = await client.query<NonceRow>('SELECT * FROM evm_nonce_reservations WHERE id = $1 FOR UPDATE', [id]);
  return rows[0] ?? null;
}

/** reserved|broadcast -> broadcast, with the hash of the version about to be sent. */
export async function markBroadcast(db: Queryable, id: number, txHash: string | null): Promise<void> {
  await db.query(
    `UPDATE evm_nonce_reservations
        SET status = 'broadcast', tx_hash = COALESCE($2, tx_hash), broadcast_at = now(), updated_at = now()
      WHERE id = $1`,
    [id, txHash],
  );
}

/** Ends a row's hold: released (reusable), filled or confirmed; `closed` when the chain has settled it. */
export async function setStatus(db: Queryable, id: number, status: NonceStatus, detail: string | null, closed: boolean): Promise<void> {
  await db.query(
    `UPDATE evm_nonce_reservations
        SET status = $2, detail = COALESCE($3, detail), updated_at = now(), closed_at = CASE WHEN $4 THEN now() ELSE closed_at END
      WHERE id = $1`,
    [id, status, detail, closed],
  );
}

/** The gap filler's signed bytes, durable before they are broadcast. */
export async function storeFiller(db: Queryable, id: number, raw: string, hash: string): Promise<void> {
  await db.query(
    `UPDATE evm_nonce_reservations SET filler_raw = $2, filler_tx_hash = $3, updated_at = now() WHERE id = $1 AND status = 'filled'`,
    [id, raw, hash],
  );
}

/** Pushes a row's age back to now, so the reaper looks at it again only after the stuck threshold. */
export async function touchReservation(db: Queryable, id: number, detail: string | null): Promise<void> {
  await db.query('UPDATE evm_nonce_reservations SET updated_at = now(), detail = COALESCE($2, detail) WHERE id = $1', [id, detail]);
}

/** Is any live row of the wallet above this nonce (something the chain cannot mine until it is used)? */
export async function hasLiveAbove(db: Queryable, w: WalletKey, nonce: number): Promise<boolean> {
  const { rows } = await db.query(
    `SELECT 1 FROM evm_nonce_reservations WHERE chain_id = $1 AND sender = $2 AND nonce > $3 AND status <> 'released' LIMIT 1`,
    [w.chainId, w.sender, nonce],
  );
  return rows.length > 0;
}

/** Wallets with rows the chain has not settled yet. */
export async function openWallets(db: Queryable, limit: number): Promise<WalletKey[]> {
  const { rows } = await db.query<{ chain_id: number; sender: string }>(
    `SELECT DISTINCT chain_id, sender FROM evm_nonce_reservations
      WHERE closed_at IS NULL AND status <> 'released' ORDER BY chain_id, sender LIMIT $1`,
    [limit],
  );
  return rows.map((r) => ({ chainId: Number(r.chain_id), sender: r.sender }));
}

/**
 * Closes every open row of the wallet below the chain's mined count (`latest`): those nonces are
 * used for good. A row cleared for broadcast becomes confirmed; one still only reserved was used by
 * a transaction Ferry did not send, so it is recorded as filled. Idempotent; no lock needed, as a
 * nonce below the chain's count can never be handed out or sent again.
 */
export async function closeConsumed(db: Queryable, w: WalletKey, latest: number): Promise<number> {
  const { rowCount } = await db.query(
    `UPDATE evm_nonce_reservations
        SET status = CASE status WHEN 'broadcast' THEN 'confirmed' WHEN 'reserved' THEN 'filled' ELSE status END,
            detail = CASE status WHEN 'reserved' THEN COALESCE(detail, 'used on chain by a transaction Ferry did not send') ELSE detail END,
            closed_at = now(), updated_at = now()
      WHERE chain_id = $1 AND sender = $2 AND closed_at IS NULL AND status <> 'released' AND nonce < $3`,
    [w.chainId, w.sender, latest],
  );
  return rowCount ?? 0;
}

/** Open rows of the wallet at or above `floor` untouched for `stuckSeconds`, lowest nonce first. */
export async function stuckReservations(db: Queryable, w: WalletKey, floor: number, stuckSeconds: number, limit: number): Promise<NonceRow[]> {
  const { rows } = await db.query<NonceRow>(
    `SELECT * FROM evm_nonce_reservations
      WHERE chain_id = $1 AND sender = $2 AND closed_at IS NULL AND status <> 'released' AND nonce >= $3
        AND updated_at < now() - make_interval(secs => $4)
      ORDER BY nonce LIMIT $5`,
    [w.chainId, w.sender, floor, stuckSeconds, limit],
  );
  return rows;
}

/**
 * Open rows of the wallet at or above the chain's pending nonce `pending`, held longer than
 * `olderThanSeconds` and not reported yet: the chain does not know them (docs/evm-lane.md, "Chain
 * state disagreements"). With the lowest open nonce of the wallet, to tell a gap from a queue.
 */
export async function unreportedAhead(db: Queryable, w: WalletKey, pending: number, olderThanSeconds: number, limit: number): Promise<{ rows: (NonceRow & { request_id: string | null })[]; lowest: number | null }> {
  const { rows } = await db.query<NonceRow & { request_id: string | null }>(
    `SELECT r.*, n.request_id FROM evm_nonce_reservations r LEFT JOIN request_nodes n ON n.id = r.request_node_id
      WHERE r.chain_id = $1 AND r.sender = $2 AND r.closed_at IS NULL AND r.status <> 'released' AND r.nonce >= $3
        AND r.disagreement_reported_at IS NULL AND r.created_at < now() - make_interval(secs => $4)
      ORDER BY r.nonce LIMIT $5`,
    [w.chainId, w.sender, pending, olderThanSeconds, limit],
  );
  const low = await db.query<{ n: number | null }>(
    `SELECT min(nonce)::int AS n FROM evm_nonce_reservations WHERE chain_id = $1 AND sender = $2 AND closed_at IS NULL AND status <> 'released'`,
    [w.chainId, w.sender],
  );
  return { rows, lowest: low.rows[0]?.n ?? null };
}

/** Marks rows as reported (see unreportedAhead). */
export async function markDisagreementReported(db: Queryable, ids: number[]): Promise<void> {
  if (ids.length > 0) await db.query('UPDATE evm_nonce_reservations SET disagreement_reported_at = now() WHERE id = ANY($1::bigint[])', [ids]);
}

/** All rows of a wallet, lowest nonce first (inspection and tests). */
export async function reservationsOfWallet(db: Queryable, w: WalletKey): Promise<NonceRow[]> {
  const { rows } = await db.query<NonceRow>('SELECT * FROM evm_nonce_reservations WHERE chain_id = $1 AND sender = $2 ORDER BY nonce, id', [
    w.chainId,
    w.sender,
  ]);
  return rows;
}

/** The signed versions stored for an attempt ('signature' artifacts), oldest first. */
export async function signedVersionsOfAttempt(db: Queryable, requestNodeId: string, attemptNo: number): Promise<string[]> {
  const { rows } = await db.query<{ content_inline: string }>(
    `SELECT content_inline FROM artifacts
      WHERE request_node_id = $1 AND attempt_no = $2 AND artifact_type = 'signature' AND content_inline IS NOT NULL
      ORDER BY created_at, id`,
    [requestNodeId, attemptNo],
  );
  return rows.map((r) => r.content_inline);
}

/**
 * Seconds since the attempt's nonce was last cleared for broadcast (the newest version was sent),
 * by the database's clock; null when the attempt holds no broadcast nonce of this sender.
 */
export async function broadcastAgeSeconds(db: Queryable, sender: string, requestNodeId: string, attemptNo: number): Promise<number | null> {
  const { rows } = await db.query<{ age: number | null }>(
    `SELECT EXTRACT(EPOCH FROM now() - broadcast_at)::float8 AS age FROM evm_nonce_reservations
      WHERE sender = $1 AND request_node_id = $2 AND attempt_no = $3 AND status = 'broadcast'
      ORDER BY id DESC LIMIT 1`,
    [sender, requestNodeId, attemptNo],
  );
  return rows[0]?.age ?? null;
}
