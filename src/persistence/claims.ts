import type { Queryable } from './db.ts';
import { reviveNode, reviveMovement } from './group-commit.ts';
import type { NodeRow, MovementRow } from './movements.ts';

/**
 * Claim queries for the dispatcher, observer and recovery workers. Each is ONE statement that
 * finds due work in FIFO order and locks it, node and movement together, with
 * FOR UPDATE ... SKIP LOCKED:
 *
 * - SKIP LOCKED: a row another transaction holds (a claim in progress, an approver, a writer) is
 *   passed over, never waited for, so claimers in many processes never queue behind each other
 *   and a locked row never blocks the rows behind it.
 * - The locking clause is applied after ORDER BY and LIMIT, and a locked row is re-checked against
 *   the WHERE clause on its newest version (READ COMMITTED's EvalPlanQual): a node another claimer
 *   moved on between our snapshot and our lock drops out instead of being claimed twice (the
 *   dispatch and observe claims test the row versions their walk read: every state change moves
 *   a row's version).
 * - Locking the movement row too makes it the per-movement mutex every node writer takes first
 *   (see group-commit.ts); the dispatch claim returns at most one node per movement (serial per
 *   request), and the durable transition function refuses a claim that would put a second node of
 *   a movement in dispatch.
 * - Live nodes are reached only through their movement (index on (request_id, node_state),
 *   migration 0160): statistics of the live slices of tables that are mostly history are stale
 *   (autovacuum re-analyzes a table after 10% of it changed), and with a partial index per live
 *   state the planner, estimating one row on each side, joined every active movement to every live
 *   node (2-3 s per claim with 1,000 approved movements over 100,000 finished ones). The dispatch
 *   and observe claims walk the active movements and probe each through a LATERAL subquery, which
 *   the planner cannot turn into such a join; their cost is bounded by the active movements
 *   whatever the statistics say.
 *
 * The caller moves what it claimed through the machines in the same transaction (one batched
 * transition) and commits, which releases the locks; a dispatch then holds its node through its
 * lease token, not a lock.
 *
 * Each claim is two statements in the caller's transaction: the locking one returns only ids, and
 * `readLocked` then reads the locked rows whole. PostgreSQL computes a query's output columns before
 * its ORDER BY, LIMIT and locking, so a claim that returned whole rows as JSON would build them for
 * every due row (a backlog of a thousand READY nodes, with their movements' compiled plans) to keep
 * 32. The read is a new statement with a new snapshot (READ COMMITTED), so it sees the newest
 * version of every row, which the locks keep from changing until the commit.
 */

// The key of a binding that is either a string or an object with executor_key.
const EXECUTOR_KEY = `(CASE jsonb_typeof(n.executor_binding) WHEN 'string' THEN n.executor_binding #>> '{}'
                          ELSE n.executor_binding ->> 'executor_key' END)`;
const manual = (a: string) => `(${a}.node_kind = 'manual_gate' OR ${a}.action_type LIKE 'manual\\_%')`;
// Serial per movement: a movement with a node already being prepared, signed or submitted waits.
const NO_SIBLING_IN_DISPATCH = `NOT EXISTS (SELECT 1 FROM request_nodes s WHERE s.request_id = r.id
                                  AND s.node_state IN ('PREPARING', 'AWAITING_SIGNATURE', 'SUBMITTING'))`;
// A node the dispatcher may take, on alias `a` (the probe per movement and the recheck of the locked row).
const DISPATCHABLE_NODE = (a: string) => `${a}.node_state = 'READY' AND NOT ${manual(a)}
                      AND (${a}.dispatch_after IS NULL OR ${a}.dispatch_after <= now())`;
const OBSERVABLE_NODE = (a: string) => `${a}.node_state IN ('SUBMITTED', 'OBSERVING')
                    AND (${a}.next_observe_at IS NULL OR ${a}.next_observe_at <= now())`;

export interface Claimed {
  node: NodeRow;
  movement: MovementRow;
}

function split(row: Record<string, unknown>): Claimed {
  const { n, r } = row as { n: NodeRow; r: MovementRow };
  return { node: reviveNode(n), movement: reviveMovement(r) };
}

/** The rows of nodes this transaction has locked (with their movements), in the claim's order. */
async function readLocked(db: Queryable, locked: Array<{ node_id: string }>): Promise<Claimed[]> {
  if (locked.length === 0) return [];
  const ids = locked.map((l) => l.node_id);
  const { rows } = await db.query(
    `SELECT to_jsonb(n) AS n, to_jsonb(r) AS r
       FROM unnest($1::uuid[]) WITH ORDINALITY AS c(id, ord)
       JOIN request_nodes n ON n.id = c.id
       JOIN movement_requests r ON r.id = n.request_id
      ORDER BY c.ord`,
    [ids],
  );
  return rows.map(split);
}

/** Keeps the first claimed node of each movement (the oldest, given the claim order). */
function firstPerMovement(claims: Claimed[]): Claimed[] {
  const seen = new Set<string>();
  return claims.filter((c) => !seen.has(c.movement.id) && seen.add(c.movement.id));
}

// How many candidates a claim's walk collects per row it may lock: concurrent claimers read the same
// oldest candidates from their snapshots and skip each other's locks, so each needs some beyond its
// limit to fill a batch.
const CANDIDATES_PER_ROW = 4;
// The lock step reads node and movement by primary key, from the walk's ids as arrays: joined to the
// walk alone, a small table (a young database) is scanned whole and hashed instead.
const BY_DUE_IDS = `n.id = ANY (ARRAY(SELECT node_id FROM due)) AND r.id = ANY (ARRAY(SELECT request_id FROM due))`;

/**
 * The lock step after a walk `due`: node and movement rows still at the versions the walk read,
 * locked in `order`, skipping rows another claimer holds; `$1` is the claim's limit.
 */
const LOCK_DUE = (order: string) => `
     SELECT n.id AS node_id
       FROM due
       JOIN request_nodes n ON n.id = due.node_id AND n.row_version = due.node_version
       JOIN movement_requests r ON r.id = due.request_id AND r.row_version = due.request_version
      WHERE ${BY_DUE_IDS}
      ORDER BY ${order}
      LIMIT $1
      FOR UPDATE OF n, r SKIP LOCKED`;

/**
 * Up to `limit` READY nodes, oldest movement first, at most one per movement, none of a movement that
 * already has a node in dispatch. The caller moves them to PREPARING in the same transaction.
 *
 * Two steps in one statement. The walk (`due`, no locks) goes through the active movements oldest
 * first and probes each for its first dispatchable node; the probe is a LATERAL subquery with a
 * LIMIT, which PostgreSQL cannot turn into a join, so it is always an index probe per movement
 * (request_id, node_state; migration 0160) whatever the statistics say. The lock step then locks
 * exactly the row versions the walk chose (id and row_version of node and movement), skipping locked
 * ones: a row changed since the walk's snapshot fails that test on its newest version
 * (EvalPlanQual) and drops out. Node and request are reached only through the walk's ids, so no
 * plan can join every active movement to every live node.
 */
export async function claimDispatchBatch(db: Queryable, limit: number): Promise<Claimed[]> {
  const { rows } = await db.query<{ node_id: string }>(
    `WITH due AS MATERIALIZED (
       SELECT f.id AS node_id, f.row_version AS node_version, r.id AS request_id, r.row_version AS request_version, r.created_at
         FROM movement_requests r
        CROSS JOIN LATERAL (SELECT f.id, f.row_version FROM request_nodes f
                             WHERE f.request_id = r.id AND ${DISPATCHABLE_NODE('f')}
                             ORDER BY f.created_at, f.node_key
                             LIMIT 1) f
        WHERE r.request_state IN ('APPROVED', 'EXECUTING') AND ${NO_SIBLING_IN_DISPATCH}
        ORDER BY r.created_at, r.id
        LIMIT $2)${LOCK_DUE('due.created_at, due.request_id')}`,
    [limit, limit * CANDIDATES_PER_ROW],
  );
  return firstPerMovement(await readLocked(db, rows));
}

/**
 * Up to `limit` due SUBMITTED / OBSERVING nodes of executing movements, oldest movement first. The
 * observer holds these locks through observe() and its commit, as the reference runtime does: the
 * observer, recovery and operators never act on one attempt at the same time. Walk and lock as in
 * claimDispatchBatch (the per-request probe is a LATERAL subquery kept apart by OFFSET 0).
 */
export async function claimObserveBatch(db: Queryable, limit: number): Promise<Claimed[]> {
  const { rows } = await db.query<{ node_id: string }>(
    `WITH due AS MATERIALIZED (
       SELECT f.id AS node_id, f.row_version AS node_version, f.created_at AS node_created_at, f.node_key,
              r.id AS request_id, r.row_version AS request_version, r.created_at
         FROM movement_requests r
        CROSS JOIN LATERAL (SELECT f.id, f.row_version, f.created_at, f.node_key FROM request_nodes f
                             WHERE f.request_id = r.id AND ${OBSERVABLE_NODE('f')}
                             OFFSET 0) f
        WHERE r.request_state = 'EXECUTING'
        ORDER BY r.created_at, r.id, f.created_at, f.node_key
        LIMIT $2)${LOCK_DUE('due.created_at, due.request_id, due.node_created_at, due.node_key')}`,
    [limit, limit * CANDIDATES_PER_ROW],
  );
  return readLocked(db, rows);
}

export interface RecoveryArm {
  /** Lane names (the second segment of exec.<lane>.*) this arm takes; null = every other lane. */
  lanes: string[] | null;
  limit: number;
}

/**
 * Claims UNKNOWN nodes, and nodes stuck in SUBMITTING longer than their lane's grace, of executing
 * requests only; longest idle first. The lane grace is applied in SQL through a lane table. Like the
 * observer, recovery holds the locks across recover(): it must not race the observer or an
 * operator while it decides what happened to the attempt.
 */
export async function claimRecoveryBatch(
  db: Queryable,
  arm: RecoveryArm,
  otherLanes: string[],
  grace: { lane: string; seconds: number }[],
  defaultGraceSeconds: number,
): Promise<Claimed[]> {
  const laneFilter = arm.lanes ? `l.lane = ANY($2::text[])` : `NOT (l.lane = ANY($2::text[]))`;
  const { rows } = await db.query<{ node_id: string }>(
    `WITH g AS (SELECT * FROM jsonb_to_recordset($3::jsonb) AS g(lane text, seconds double precision))
     SELECT n.id AS node_id
       FROM movement_requests r JOIN request_nodes n ON n.request_id = r.id
            CROSS JOIN LATERAL (SELECT split_part(${EXECUTOR_KEY}, '.', 2) AS lane) l
            LEFT JOIN g ON g.lane = l.lane
      WHERE n.node_state IN ('UNKNOWN', 'SUBMITTING') AND r.request_state = 'EXECUTING'
        AND ${laneFilter}
        AND (n.node_state = 'UNKNOWN' OR n.updated_at < now() - make_interval(secs => coalesce(g.seconds, $4)))
      ORDER BY n.updated_at
      LIMIT $1
      FOR UPDATE OF n, r SKIP LOCKED`,
    [arm.limit, arm.lanes ?? otherLanes, JSON.stringify(grace), defaultGraceSeconds],
  );
  return readLocked(db, rows);
}

/**
 * Claims nodes whose dispatch was abandoned before SUBMITTING (the process died, or stalled, in
 * preflight, prepare or signing): idle in PREPARING or AWAITING_SIGNATURE past the grace. Nothing
 * was submitted for them; releasing them clears their lease, so a stalled dispatcher that wakes up
 * later has its writes refused.
 */
export async function claimAbandonedDispatches(db: Queryable, graceSeconds: number, limit: number): Promise<Claimed[]> {
  const { rows } = await db.query<{ node_id: string }>(
    `SELECT n.id AS node_id
       FROM movement_requests r JOIN request_nodes n ON n.request_id = r.id
      WHERE n.node_state IN ('PREPARING', 'AWAITING_SIGNATURE') AND r.request_state = 'EXECUTING'
        AND n.updated_at < now() - make_interval(secs => $1)
      ORDER BY n.updated_at
      LIMIT $2
      FOR UPDATE OF n, r SKIP LOCKED`,
    [graceSeconds, limit],
  );
  return readLocked(db, rows);
}

/** PENDING_APPROVAL movements past their expiry, without locks (the sweep claims each one). */
export async function expiredCandidates(db: Queryable, limit: number): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    `SELECT id FROM movement_requests
      WHERE request_state = 'PENDING_APPROVAL' AND expires_at IS NOT NULL AND expires_at < now()
      ORDER BY expires_at LIMIT $1`,
    [limit],
  );
  return rows.map((r) => r.id);
}

/** Locks one expiry candidate; a movement an approver holds right now is skipped this round. */
export async function claimForExpiry(db: Queryable, movementId: string): Promise<MovementRow | null> {
  const { rows } = await db.query<MovementRow>(
    `SELECT * FROM movement_requests WHERE id = $1 AND request_state = 'PENDING_APPROVAL' FOR UPDATE SKIP LOCKED`,
    [movementId],
  );
  return rows[0] ?? null;
}
