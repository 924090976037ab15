import type { Queryable } from '../../src/persistence/db.ts';

/**
 * Queries the benchmark and the throughput tests read their figures from. Everything is derived
 * from the transition log and the simulation ledger, so the numbers describe what was committed.
 */

/** A scratch table for the commit ceiling: one durable single-row UPDATE per transaction. */
export async function prepareCeilingTable(db: Queryable, rows: number): Promise<void> {
  await db.query('CREATE TABLE IF NOT EXISTS bench_ceiling (id int PRIMARY KEY, n bigint NOT NULL DEFAULT 0)');
  await db.query('INSERT INTO bench_ceiling (id) SELECT g FROM generate_series(1, $1) g ON CONFLICT DO NOTHING', [rows]);
}

export async function bumpCeilingRow(db: Queryable, id: number): Promise<void> {
  await db.query('UPDATE bench_ceiling SET n = n + 1 WHERE id = $1', [id]);
}

export async function dropCeilingTable(db: Queryable): Promise<void> {
  await db.query('DROP TABLE IF EXISTS bench_ceiling');
}

export async function countRequestsByState(db: Queryable, ids: string[]): Promise<Record<string, number>> {
  const { rows } = await db.query<{ request_state: string; n: number }>(
    'SELECT request_state, count(*)::int AS n FROM movement_requests WHERE id = ANY($1::uuid[]) GROUP BY request_state',
    [ids],
  );
  return Object.fromEntries(rows.map((r) => [r.request_state, r.n]));
}

export interface MovementTiming {
  request_id: string;
  approved_at: Date;
  first_submit_at: Date | null;
  completed_at: Date | null;
}

/** Per movement: when it was approved, when its first submit reached the provider, when it completed. */
export async function movementTimings(db: Queryable, ids: string[]): Promise<MovementTiming[]> {
  const { rows } = await db.query<MovementTiming>(
    `SELECT r.id AS request_id,
            (SELECT min(t.at) FROM transitions t WHERE t.entity_id = r.id AND t.to_state = 'APPROVED') AS approved_at,
            (SELECT min(s.at) FROM sim_side_effects s JOIN request_nodes n ON n.id = s.request_node_id
              WHERE n.request_id = r.id AND s.call = 'submit') AS first_submit_at,
            (SELECT min(t.at) FROM transitions t WHERE t.entity_id = r.id AND t.to_state = 'COMPLETED') AS completed_at
       FROM movement_requests r WHERE r.id = ANY($1::uuid[])`,
    [ids],
  );
  return rows;
}

export async function transitionsBetween(db: Queryable, ids: string[]): Promise<{ n: number; first: Date; last: Date }> {
  const { rows } = await db.query(
    `SELECT count(*)::int AS n, min(at) AS first, max(at) AS last FROM transitions
      WHERE request_id = ANY($1::uuid[]) AND event_type <> 'xstate.init'`,
    [ids],
  );
  return rows[0];
}

export interface ExactlyOnceReport {
  nodes: number;
  submits: number;
  keysSubmittedTwice: number;
  nodesClaimedTwice: number;
  nodesWithRetries: number;
}

/** Side-effect and claim accounting for a set of movements. */
export async function exactlyOnceReport(db: Queryable, ids: string[]): Promise<ExactlyOnceReport> {
  const { rows } = await db.query<ExactlyOnceReport>(
    `WITH nodes AS (SELECT id, attempt_no FROM request_nodes WHERE request_id = ANY($1::uuid[])),
          subs AS (SELECT s.idempotency_key, count(*) AS c FROM sim_side_effects s JOIN nodes ON nodes.id = s.request_node_id
                    WHERE s.call = 'submit' GROUP BY s.idempotency_key),
          claims AS (SELECT t.entity_id, count(*) AS c FROM transitions t JOIN nodes ON nodes.id = t.entity_id
                      WHERE t.event_type = 'DISPATCH_CLAIMED' GROUP BY t.entity_id)
     SELECT (SELECT count(*) FROM nodes)::int AS nodes,
            (SELECT coalesce(sum(c), 0) FROM subs)::int AS submits,
            (SELECT count(*) FROM subs WHERE c > 1)::int AS "keysSubmittedTwice",
            (SELECT count(*) FROM claims WHERE c > 1)::int AS "nodesClaimedTwice",
            (SELECT count(*) FROM nodes WHERE attempt_no <> 1)::int AS "nodesWithRetries"`,
    [ids],
  );
  return rows[0];
}
