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

export async function countMovementsByState(db: Queryable, ids: string[]): Promise<Record<string, number>> {
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

/** Commits of one database so far (pg_stat_database; the statistics lag by up to a second). */
export async function databaseCommits(db: Queryable, database: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>('SELECT xact_commit::bigint AS n FROM pg_stat_database WHERE datname = $1', [database]);
  return Number(rows[0]?.n ?? 0);
}

/**
 * Transaction ids the server has assigned so far. PostgreSQL assigns one only to a transaction
 * that writes, so the difference over a span counts the writing commits (and the rare rollback of
 * one) of every database on the server. Reading it assigns none.
 */
export async function assignedTransactionIds(db: Queryable): Promise<number> {
  const { rows } = await db.query<{ n: string }>('SELECT pg_snapshot_xmax(pg_current_snapshot())::text AS n');
  return Number(rows[0].n);
}

/**
 * History for the benchmark: `count` finished movements cloned from `sampleRequestId` (a fresh
 * movement of the bench plan), created before it, COMPLETED with all their nodes and each with its
 * transition log (request: init, APPROVED, EXECUTING, COMPLETED; node: init, READY, PREPARING,
 * SUBMITTING, COMPLETED), already reconciled, as a settled history would be. One statement per
 * chunk of 5,000 movements.
 */
export async function preloadFinishedMovements(db: Queryable, sampleRequestId: string, count: number): Promise<void> {
  for (let done = 0; done < count; done += 5000) {
    const n = Math.min(5000, count - done);
    await db.query(
      `WITH s AS (SELECT * FROM movement_requests WHERE id = $1),
            g AS (SELECT gen_random_uuid() AS id, i, now() - interval '1 day' + make_interval(secs => i * 0.001) AS at
                    FROM generate_series(1, $2) i),
            r AS (INSERT INTO movement_requests (id, template_version_id, template_key, template_version, intent, input_params,
                    compiled_plan_hash, compiled_plan, machine_id, machine_version, request_state, row_version, approval_status,
                    approval_quorum, approvals, decided_by, current_frontier, created_by, created_at, updated_at, reconciled_at)
                  SELECT g.id, s.template_version_id, s.template_key, s.template_version, s.intent, s.input_params,
                         s.compiled_plan_hash, s.compiled_plan, s.machine_id, s.machine_version, 'COMPLETED', 3, 'approved',
                         s.approval_quorum, jsonb_build_array(jsonb_build_object('by', 'bench:approver', 'at', g.at)),
                         'bench:approver', '[]', s.created_by, g.at, g.at, now()
                    FROM g, s RETURNING id),
            n AS (INSERT INTO request_nodes (request_id, plan_node_id, node_key, node_kind, action_type, executor_binding,
                    signer_binding, config, timeout_policy, predecessor_keys, successor_keys, retryable, machine_id, machine_version,
                    node_state, row_version, attempt_no, idempotency_key, provider_state, started_at, created_at, updated_at, reconciled_at)
                  SELECT g.id, sn.plan_node_id, sn.node_key, sn.node_kind, sn.action_type, sn.executor_binding, sn.signer_binding,
                         sn.config, sn.timeout_policy, sn.predecessor_keys, sn.successor_keys, sn.retryable, sn.machine_id,
                         sn.machine_version, 'COMPLETED', 4, 1, 'preloaded:' || g.id || ':' || sn.node_key, 'SIM_COMPLETED', g.at, g.at, g.at, now()
                    FROM g JOIN request_nodes sn ON sn.request_id = $1
                  RETURNING id, request_id, node_key),
            steps(entity, seq, from_state, to_state, event_type) AS (VALUES
                    ('request', 0, 'PENDING_APPROVAL', 'PENDING_APPROVAL', 'xstate.init'), ('request', 1, 'PENDING_APPROVAL', 'APPROVED', 'APPROVE'),
                    ('request', 2, 'APPROVED', 'EXECUTING', 'DISPATCH_STARTED'), ('request', 3, 'EXECUTING', 'COMPLETED', 'NODES_SETTLED'),
                    ('node', 0, 'BLOCKED', 'BLOCKED', 'xstate.init'), ('node', 1, 'BLOCKED', 'READY', 'UNBLOCKED'),
                    ('node', 2, 'READY', 'PREPARING', 'DISPATCH_CLAIMED'), ('node', 3, 'PREPARING', 'SUBMITTING', 'PREPARED'),
                    ('node', 4, 'SUBMITTING', 'COMPLETED', 'SUBMIT_RESULT'))
       INSERT INTO transitions (machine_id, machine_version, entity_type, entity_id, request_id, node_key, seq, from_state, to_state,
                                event_type, actor, at)
       SELECT 'ferry.request', '1', 'request', r.id, r.id, NULL, st.seq, st.from_state, st.to_state, st.event_type, 'bench:preload', now() - interval '1 day'
         FROM r, steps st WHERE st.entity = 'request'
       UNION ALL
       SELECT 'ferry.node', '1', 'node', n.id, n.request_id, n.node_key, st.seq, st.from_state, st.to_state, st.event_type, 'bench:preload', now() - interval '1 day'
         FROM n, steps st WHERE st.entity = 'node'`,
      [sampleRequestId, n],
    );
  }
  await db.query('ANALYZE movement_requests, request_nodes, transitions');
}
