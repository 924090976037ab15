import type { Queryable } from './db.ts';

/**
 * Registry drift (migration 0420, src/sweeps/verify-drift.ts): the latest answer for every on-chain
 * fact a lane's configuration asserts (registry_checks), and the episodes in which the chain
 * contradicted it (registry_drifts). A fact is named by (lane, chain_id, subject, property).
 */

export interface RegistryFactKey {
  lane: string;
  chain_id: number;
  subject: string;
  property: string;
}

export type RegistryCheckOutcome = 'match' | 'drift' | 'unverified';

export interface RegistryCheckInput extends RegistryFactKey {
  address: string;
  expected: string;
  outcome: RegistryCheckOutcome;
  observed: string | null;
  error_code: string | null;
}

export interface RegistryCheckRow extends RegistryCheckInput {
  checked_at: Date;
}

export interface RegistryDriftRow extends RegistryFactKey {
  id: number;
  address: string;
  expected: string;
  observed: string;
  first_seen: Date;
  last_seen: Date;
  resolved_at: Date | null;
  resolution: 'matched' | 'unconfigured' | null;
}

const driftRow = (r: Record<string, unknown>): RegistryDriftRow => ({ ...(r as unknown as RegistryDriftRow), id: Number(r.id), chain_id: Number(r.chain_id) });

/** The latest answer for a fact, replacing the one before. */
export async function recordRegistryCheck(db: Queryable, c: RegistryCheckInput): Promise<void> {
  await db.query(
    `INSERT INTO registry_checks (lane, chain_id, subject, property, address, expected, outcome, observed, error_code, checked_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, now())
     ON CONFLICT (lane, chain_id, subject, property) DO UPDATE
       SET address = EXCLUDED.address, expected = EXCLUDED.expected, outcome = EXCLUDED.outcome,
           observed = EXCLUDED.observed, error_code = EXCLUDED.error_code, checked_at = EXCLUDED.checked_at`,
    [c.lane, c.chain_id, c.subject, c.property, c.address, c.expected, c.outcome, c.observed, c.error_code],
  );
}

/**
 * A drift seen now: the fact's open episode moves its last_seen (and takes the values seen now), or
 * a new episode begins. Answers the row and whether it is new (first detected by this call).
 */
export async function observeRegistryDrift(
  db: Queryable,
  d: RegistryFactKey & { address: string; expected: string; observed: string },
): Promise<{ drift: RegistryDriftRow; detected: boolean }> {
  const { rows } = await db.query(
    `INSERT INTO registry_drifts (lane, chain_id, subject, property, address, expected, observed)
     VALUES ($1, $2, $3, $4, $5, $6, $7)
     ON CONFLICT (lane, chain_id, subject, property) WHERE resolved_at IS NULL DO UPDATE
       SET last_seen = now(), address = EXCLUDED.address, expected = EXCLUDED.expected, observed = EXCLUDED.observed
     RETURNING *, (xmax = 0) AS detected`,
    [d.lane, d.chain_id, d.subject, d.property, d.address, d.expected, d.observed],
  );
  const { detected, ...row } = rows[0] as Record<string, unknown> & { detected: boolean };
  return { drift: driftRow(row), detected };
}

/** The fact's open episode, if any, resolved: the chain agrees again. Answers the resolved row. */
export async function resolveRegistryDrift(db: Queryable, k: RegistryFactKey): Promise<RegistryDriftRow | null> {
  const { rows } = await db.query(
    `UPDATE registry_drifts SET resolved_at = now(), resolution = 'matched'
     WHERE lane = $1 AND chain_id = $2 AND subject = $3 AND property = $4 AND resolved_at IS NULL
     RETURNING *`,
    [k.lane, k.chain_id, k.subject, k.property],
  );
  return rows[0] ? driftRow(rows[0]) : null;
}

/**
 * Facts nothing asserts any more (the configuration dropped the token, the lane left the list): their
 * open episodes are resolved as unconfigured and their latest answers forgotten. Answers the resolved rows.
 */
export async function forgetUnassertedFacts(db: Queryable, asserted: readonly RegistryFactKey[], onlyLanes: readonly string[] | null = null): Promise<RegistryDriftRow[]> {
  const keys = JSON.stringify(asserted.map((k) => [k.lane, String(k.chain_id), k.subject, k.property]));
  // onlyLanes: a check of some lanes (ccip_drift) forgets only their facts, never another lane's.
  const where = `($2::text[] IS NULL OR lane = ANY($2::text[])) AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements($1::jsonb) k
                   WHERE k->>0 = lane AND (k->>1)::bigint = chain_id AND k->>2 = subject AND k->>3 = property)`;
  const lanes = onlyLanes ? [...onlyLanes] : null;
  await db.query(`DELETE FROM registry_checks WHERE ${where}`, [keys, lanes]);
  const { rows } = await db.query(`UPDATE registry_drifts SET resolved_at = now(), resolution = 'unconfigured' WHERE resolved_at IS NULL AND ${where} RETURNING *`, [keys, lanes]);
  return rows.map(driftRow);
}

export async function listRegistryDrifts(db: Queryable, q: { lane?: string; state: 'open' | 'resolved' | 'all'; limit: number }): Promise<RegistryDriftRow[]> {
  const { rows } = await db.query(
    `SELECT * FROM registry_drifts
     WHERE ($1::text IS NULL OR lane = $1)
       AND ($2 = 'all' OR ($2 = 'open') = (resolved_at IS NULL))
     ORDER BY (resolved_at IS NULL) DESC, last_seen DESC, id DESC LIMIT $3`,
    [q.lane ?? null, q.state, q.limit],
  );
  return rows.map(driftRow);
}

/** The latest answers, unverified first (what a person should look at beside the drifts); `newest`: the most recent first. */
export async function listRegistryChecks(db: Queryable, q: { lane?: string; outcome?: RegistryCheckOutcome; limit: number; newest?: boolean }): Promise<RegistryCheckRow[]> {
  const order = q.newest ? 'checked_at DESC' : "(outcome = 'unverified') DESC, checked_at DESC, lane, chain_id, subject, property";
  const { rows } = await db.query(
    `SELECT * FROM registry_checks
     WHERE ($1::text IS NULL OR lane = $1) AND ($2::text IS NULL OR outcome = $2)
     ORDER BY ${order} LIMIT $3`,
    [q.lane ?? null, q.outcome ?? null, q.limit],
  );
  return rows.map((r) => ({ ...r, chain_id: Number(r.chain_id) }) as RegistryCheckRow);
}

/** Open drifts per lane (the ferry_registry_drifts_open gauge, read at scrape time). */
export async function openRegistryDriftCounts(db: Queryable): Promise<Array<{ lane: string; count: number }>> {
  const { rows } = await db.query<{ lane: string; count: number }>(`SELECT lane, count(*)::int AS count FROM registry_drifts WHERE resolved_at IS NULL GROUP BY lane`);
  return rows;
}
