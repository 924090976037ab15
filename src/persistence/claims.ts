import type { Queryable } from './db.ts';
import type { NodeRow, RequestRow } from './movements.ts';

/**
 * Claim queries for the dispatcher, observer and recovery workers, shaped as the reference runtime
 * describes: an unlocked candidate listing, then a per-candidate joined claim of node and request
 * with FOR UPDATE ... SKIP LOCKED that the caller runs inside a savepoint (a miss rolls the savepoint
 * back, releasing any partial lock the skipped attempt took).
 */

// The key of a binding that is either a string or an object with executor_key.
const EXECUTOR_KEY = `(CASE jsonb_typeof(n.executor_binding) WHEN 'string' THEN n.executor_binding #>> '{}'
                          ELSE n.executor_binding ->> 'executor_key' END)`;
const MANUAL = `(n.node_kind = 'manual_gate' OR n.action_type LIKE 'manual\\_%')`;
// Serial per request: a request with a node already being prepared, signed or submitted waits.
const NO_SIBLING_IN_DISPATCH = `NOT EXISTS (SELECT 1 FROM request_nodes s WHERE s.request_id = n.request_id
                                  AND s.node_state IN ('PREPARING', 'AWAITING_SIGNATURE', 'SUBMITTING'))`;
const DISPATCHABLE = `n.node_state = 'READY' AND r.request_state IN ('APPROVED', 'EXECUTING') AND NOT ${MANUAL}
                      AND (n.dispatch_after IS NULL OR n.dispatch_after <= now())`;
const OBSERVABLE = `n.node_state IN ('SUBMITTED', 'OBSERVING') AND r.request_state = 'EXECUTING'
                    AND (n.next_observe_at IS NULL OR n.next_observe_at <= now())`;

export interface Claimed {
  node: NodeRow;
  request: RequestRow;
}

function split(row: Record<string, unknown>): Claimed {
  const { n, r } = row as { n: NodeRow; r: RequestRow };
  return { node: revive(n, NODE_DATES), request: revive(r, REQUEST_DATES) };
}

// Row-to-JSON loses Date types; restore them so the claimed rows look like plain SELECT rows.
const NODE_DATES = ['next_observe_at', 'last_observed_at', 'dispatch_after', 'started_at', 'created_at', 'updated_at'];
const REQUEST_DATES = ['expires_at', 'created_at', 'updated_at'];
function revive<T>(row: T, fields: string[]): T {
  const r = row as Record<string, unknown>;
  for (const f of fields) if (typeof r[f] === 'string') r[f] = new Date(r[f] as string);
  return row;
}

/** READY nodes in FIFO order of their requests, without locks. */
export async function dispatchCandidates(db: Queryable, limit: number, exclude: string[]): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    `SELECT n.id FROM request_nodes n JOIN movement_requests r ON r.id = n.request_id
      WHERE ${DISPATCHABLE} AND ${NO_SIBLING_IN_DISPATCH} AND NOT (n.id = ANY($2::uuid[]))
      ORDER BY r.created_at, n.created_at LIMIT $1`,
    [limit, exclude],
  );
  return rows.map((r) => r.id);
}

export async function claimForDispatch(db: Queryable, nodeId: string): Promise<Claimed | null> {
  const { rows } = await db.query(
    `SELECT to_jsonb(n) AS n, to_jsonb(r) AS r FROM request_nodes n JOIN movement_requests r ON r.id = n.request_id
      WHERE n.id = $1 AND ${DISPATCHABLE} AND ${NO_SIBLING_IN_DISPATCH}
      FOR UPDATE OF n, r SKIP LOCKED`,
    [nodeId],
  );
  return rows[0] ? split(rows[0]) : null;
}

/** Due SUBMITTED / OBSERVING nodes of executing requests, FIFO by request, without locks. */
export async function observeCandidates(db: Queryable, limit: number): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    `SELECT n.id FROM request_nodes n JOIN movement_requests r ON r.id = n.request_id
      WHERE ${OBSERVABLE} ORDER BY r.created_at, n.created_at LIMIT $1`,
    [limit],
  );
  return rows.map((r) => r.id);
}

export async function claimForObserve(db: Queryable, nodeId: string): Promise<Claimed | null> {
  const { rows } = await db.query(
    `SELECT to_jsonb(n) AS n, to_jsonb(r) AS r FROM request_nodes n JOIN movement_requests r ON r.id = n.request_id
      WHERE n.id = $1 AND ${OBSERVABLE}
      FOR UPDATE OF n, r SKIP LOCKED`,
    [nodeId],
  );
  return rows[0] ? split(rows[0]) : null;
}

export interface RecoveryArm {
  /** Lane names (the second segment of exec.<lane>.*) this arm takes; null = every other lane. */
  lanes: string[] | null;
  limit: number;
}

/**
 * UNKNOWN nodes, and nodes stuck in SUBMITTING longer than their lane's grace, of executing
 * requests only; longest idle first. `graceSeconds(lane)` is applied in SQL through a lane table.
 */
export async function recoveryCandidates(
  db: Queryable,
  arm: RecoveryArm,
  otherLanes: string[],
  grace: { lane: string; seconds: number }[],
  defaultGraceSeconds: number,
): Promise<{ id: string; row_version: number }[]> {
  const laneFilter = arm.lanes ? `c.lane = ANY($2::text[])` : `NOT (c.lane = ANY($2::text[]))`;
  const { rows } = await db.query<{ id: string; row_version: number }>(
    `WITH g AS (SELECT * FROM jsonb_to_recordset($3::jsonb) AS g(lane text, seconds double precision)),
          c AS (SELECT n.id, n.row_version, n.node_state, n.updated_at, split_part(${EXECUTOR_KEY}, '.', 2) AS lane
                  FROM request_nodes n JOIN movement_requests r ON r.id = n.request_id
                 WHERE n.node_state IN ('UNKNOWN', 'SUBMITTING') AND r.request_state = 'EXECUTING')
     SELECT c.id, c.row_version FROM c LEFT JOIN g ON g.lane = c.lane
      WHERE ${laneFilter}
        AND (c.node_state = 'UNKNOWN'
             OR c.updated_at < now() - make_interval(secs => coalesce(g.seconds, $4)))
      ORDER BY c.updated_at LIMIT $1`,
    [arm.limit, arm.lanes ?? otherLanes, JSON.stringify(grace), defaultGraceSeconds],
  );
  return rows;
}

/**
 * Claims a listed candidate only if it has not moved since it was listed (same row_version) and is
 * still in one of `states`: a node that left SUBMITTING and came back as a new attempt is not the
 * stuck attempt that was listed.
 */
export async function claimUnchangedNode(db: Queryable, nodeId: string, rowVersion: number, states: readonly string[]): Promise<Claimed | null> {
  const { rows } = await db.query(
    `SELECT to_jsonb(n) AS n, to_jsonb(r) AS r FROM request_nodes n JOIN movement_requests r ON r.id = n.request_id
      WHERE n.id = $1 AND n.row_version = $2 AND n.node_state = ANY($3::text[])
        AND r.request_state = 'EXECUTING'
      FOR UPDATE OF n, r SKIP LOCKED`,
    [nodeId, rowVersion, states],
  );
  return rows[0] ? split(rows[0]) : null;
}

/** PENDING_APPROVAL requests past their expiry, without locks (the sweep claims each one). */
export async function expiredCandidates(db: Queryable, limit: number): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    `SELECT id FROM movement_requests
      WHERE request_state = 'PENDING_APPROVAL' AND expires_at IS NOT NULL AND expires_at < now()
      ORDER BY expires_at LIMIT $1`,
    [limit],
  );
  return rows.map((r) => r.id);
}

/** Locks one expiry candidate; a request an approver holds right now is skipped this round. */
export async function claimForExpiry(db: Queryable, requestId: string): Promise<RequestRow | null> {
  const { rows } = await db.query<RequestRow>(
    `SELECT * FROM movement_requests WHERE id = $1 AND request_state = 'PENDING_APPROVAL' FOR UPDATE SKIP LOCKED`,
    [requestId],
  );
  return rows[0] ?? null;
}

/**
 * Nodes whose dispatch was abandoned before SUBMITTING (the process died in preflight, prepare or
 * signing): idle in PREPARING or AWAITING_SIGNATURE past the grace. Nothing was submitted for them.
 */
export async function abandonedDispatches(db: Queryable, graceSeconds: number, limit: number): Promise<{ id: string; row_version: number }[]> {
  const { rows } = await db.query<{ id: string; row_version: number }>(
    `SELECT n.id, n.row_version FROM request_nodes n JOIN movement_requests r ON r.id = n.request_id
      WHERE n.node_state IN ('PREPARING', 'AWAITING_SIGNATURE') AND r.request_state = 'EXECUTING'
        AND n.updated_at < now() - make_interval(secs => $1)
      ORDER BY n.updated_at LIMIT $2`,
    [graceSeconds, limit],
  );
  return rows;
}
