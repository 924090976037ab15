import type { Queryable } from './db.ts';

/**
 * Exchange transfers no movement made (migration 0361). Recording is idempotent: one row per
 * (venue, direction, provider id); a transfer seen again by a later run is not recorded again.
 */

export interface ForeignTransferInput {
  venue: string;
  direction: 'deposit' | 'withdrawal';
  provider_id: string;
  asset: string;
  amount: string;
  network: string | null;
  tx_id: string | null;
  address: string | null;
  provider_status: string | null;
  occurred_at: Date;
}

export interface ForeignTransferRow extends ForeignTransferInput {
  id: number;
  recorded_at: Date;
}

/** Records a transfer; answers the new row, or null when it was already recorded. */
export async function recordForeignTransfer(db: Queryable, t: ForeignTransferInput): Promise<ForeignTransferRow | null> {
  const { rows } = await db.query(
    `INSERT INTO cex_foreign_transfers (venue, direction, provider_id, asset, amount, network, tx_id, address, provider_status, occurred_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
     ON CONFLICT (venue, direction, provider_id) DO NOTHING
     RETURNING *`,
    [t.venue, t.direction, t.provider_id, t.asset, t.amount, t.network, t.tx_id, t.address, t.provider_status, t.occurred_at],
  );
  return rows[0] ? { ...rows[0], id: Number(rows[0].id) } : null;
}

/**
 * Which of these exchange transfers a movement made: a withdrawal whose withdrawOrderId is a CEX
 * node's idempotency key or recorded withdraw_order_id, or whose exchange id a node recorded; a
 * deposit whose transaction hash or exchange id a node recorded. Answers the matched references.
 */
export async function ownTransferRefs(db: Queryable, refs: { orderIds: string[]; ids: string[]; txIds: string[] }): Promise<Set<string>> {
  const { rows } = await db.query<{ ref: string }>(
    `SELECT DISTINCT ref FROM (
       SELECT idempotency_key AS ref FROM request_nodes WHERE idempotency_key = ANY($1::text[])
       UNION ALL SELECT provider_refs->>'withdraw_order_id' FROM request_nodes WHERE provider_refs->>'withdraw_order_id' = ANY($1::text[])
       UNION ALL SELECT provider_refs->>'exchange_withdrawal_id' FROM request_nodes WHERE provider_refs->>'exchange_withdrawal_id' = ANY($2::text[])
       UNION ALL SELECT provider_refs->>'exchange_deposit_id' FROM request_nodes WHERE provider_refs->>'exchange_deposit_id' = ANY($2::text[])
       UNION ALL SELECT lower(provider_refs->>'tx_hash') FROM request_nodes WHERE lower(provider_refs->>'tx_hash') = ANY($3::text[])
       UNION ALL SELECT lower(config->>'tx_hash') FROM request_nodes WHERE lower(config->>'tx_hash') = ANY($3::text[])
     ) refs WHERE ref IS NOT NULL`,
    [refs.orderIds, refs.ids, refs.txIds.map((t) => t.toLowerCase())],
  );
  return new Set(rows.map((r) => r.ref));
}

export async function listForeignTransfers(db: Queryable, q: { venue?: string; limit: number }): Promise<ForeignTransferRow[]> {
  const { rows } = await db.query(
    `SELECT * FROM cex_foreign_transfers WHERE ($1::text IS NULL OR venue = $1) ORDER BY occurred_at DESC, id DESC LIMIT $2`,
    [q.venue ?? null, q.limit],
  );
  return rows.map((r) => ({ ...r, id: Number(r.id) }));
}
