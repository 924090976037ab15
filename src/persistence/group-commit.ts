import type { NewArtifact } from './artifacts.ts';
import { named, type Queryable } from './db.ts';
import type { NodeRow, MovementRow, TransitionRow } from './movements.ts';

/**
 * The two statements of a batched durable transition (src/durable/transition.ts): lock what the
 * batch touches, then write everything the machines decided in one set-based statement.
 *
 * Concurrency. Every writer of a node locks its movement row first (the movement row is the mutex of
 * a movement: claims take node and movement together, the API locks the movement before it delivers).
 * A batch locks all its movements, and their nodes, in one statement ordered by movement id: the
 * locking clause is applied after the sort, so two batches over overlapping sets of movements take
 * the locks in the same order and never deadlock; a single delivery locks one movement, which cannot
 * form a cycle with them. Locks a claim already holds in this transaction are simply held again.
 *
 * The write repeats the machine's precondition in SQL: each row must still be in the state and at
 * the row version it was read at. Under the locks that always holds; if it ever does not, the
 * counts come back short and the caller throws TransitionConflictError, rolling back the whole
 * transaction (its log rows and its NOTIFY included: Postgres delivers NOTIFY only on commit).
 *
 * The write fence (migration 0200). The write updates the row of every movement it touches, even
 * one whose own columns did not change, and increments its write_version: a movement's nodes change
 * only together with their movement row. A writer that kept the rows of its own last commit (a
 * dispatcher between its SUBMITTING and its result commit) may skip the locking re-read and pass
 * the write_version it holds (`expected_write_version`). The movement UPDATE then takes the row lock
 * itself; when another writer holds it, PostgreSQL waits and re-checks the condition on the version
 * that writer committed (READ COMMITTED's EvalPlanQual), so a movement written since drops out. The
 * node updates join the movement updates, so no node of a dropped movement is written either, and
 * the short count rolls the transaction back. Since every writer of a movement's nodes writes its
 * movement row in the same statement, an unchanged write_version under the lock means no machine
 * state of the movement changed since the caller's read.
 */

export interface LockedMovement {
  movement: MovementRow;
  nodes: NodeRow[];
}

// Row-to-JSON loses Date types; restore them so the rows look like plain SELECT rows.
const NODE_DATES = ['next_observe_at', 'last_observed_at', 'dispatch_after', 'started_at', 'created_at', 'updated_at'] as const;
const MOVEMENT_DATES = ['expires_at', 'created_at', 'updated_at', 'lease_expires_at', 'next_work_at'] as const;
function revive<T>(row: T, fields: readonly string[]): T {
  const r = row as Record<string, unknown>;
  for (const f of fields) if (typeof r[f] === 'string') r[f] = new Date(r[f] as string);
  return row;
}
export const reviveNode = (row: NodeRow): NodeRow => revive(row, NODE_DATES);
export const reviveMovement = (row: MovementRow): MovementRow => revive(row, MOVEMENT_DATES);

/**
 * Locks the given movements and the movements of the given nodes, with all their nodes, in movement id
 * order (FOR UPDATE, waiting: a delivery must not skip its entity). One row per movement.
 */
export async function lockMovements(db: Queryable, movementIds: string[], nodeIds: string[]): Promise<LockedMovement[]> {
  const { rows } = await db.query<{ r: MovementRow; n: NodeRow[] }>(
    `WITH ids AS (SELECT unnest($1::uuid[]) AS id
                  UNION SELECT request_id FROM request_nodes WHERE id = ANY($2::uuid[])),
          locked AS (SELECT r.* FROM movement_requests r WHERE r.id IN (SELECT id FROM ids) ORDER BY r.id FOR UPDATE),
          nodes AS (SELECT n.* FROM request_nodes n WHERE n.request_id IN (SELECT id FROM locked)
                     ORDER BY n.request_id, n.id FOR UPDATE)
     -- The rows come from the locking CTEs: after a lock wait they are the versions just committed,
     -- where a fresh scan would still see this statement's older snapshot.
     SELECT to_jsonb(l) AS r,
            coalesce((SELECT jsonb_agg(to_jsonb(n) ORDER BY n.created_at, n.node_key) FROM nodes n WHERE n.request_id = l.id), '[]') AS n
       FROM locked l`,
    [movementIds, nodeIds],
  );
  return rows.map((row) => ({ movement: reviveMovement(row.r), nodes: row.n.map(reviveNode) }));
}

/** A node row's new values; `from_*` is the precondition. */
export interface NodeWriteRow {
  id: string;
  from_state: string;
  from_version: number;
  node_state: string;
  row_version: number;
  attempt_no: number;
  /** attemptKey(id, attempt_no) once dispatched; built in TypeScript only (src/ids.ts). */
  idempotency_key: string | null;
  started_at: string | null;
  provider_state: string | null;
  provider_refs: Record<string, unknown>;
  provider_ref_id: string | null;
  next_observe_at: string | null;
  last_observed_at: string | null;
  observe_count: number;
  dispatch_after: string | null;
  error_code: string | null;
  error_detail: string | null;
  manual_intervention_required: boolean;
  claim_token: string | null;
}

/**
 * A movement row's new values (its current ones when only its nodes changed); a frontier-only
 * change keeps state and version.
 */
export interface MovementWriteRow {
  id: string;
  from_state: string;
  from_version: number;
  /** The write_version the caller read without a lock: the write is refused unless it still holds. Null: the caller holds the lock. */
  expected_write_version: number | null;
  /** When the movement next has due work (migration 0201), computed from its nodes by the caller. */
  next_work_at: string | null;
  request_state: string;
  row_version: number;
  approval_status: string;
  approvals: unknown[];
  decided_by: string | null;
  current_frontier: string[];
  /** The writer's lease owner: a live lease of this owner on the movement is extended by `lease_ttl_seconds`. */
  lease_owner: string | null;
  lease_ttl_seconds: number | null;
}

export type NewTransitionRow = Omit<TransitionRow, 'id' | 'at'>;

export interface GroupWrite {
  nodes: NodeWriteRow[];
  movements: MovementWriteRow[];
  /** In the order they happened: ids and clock_timestamp() follow it. */
  transitions: NewTransitionRow[];
  artifacts: NewArtifact[];
  channel: string;
  /** NOTIFY payloads, each under Postgres' 8000-byte limit. */
  notices: string[];
}

/** What the write set that the caller could not compute itself: ids, log ids and times. */
export interface GroupWritten {
  nodes: Pick<NodeRow, 'id' | 'idempotency_key' | 'updated_at'>[];
  movements: Pick<MovementRow, 'id' | 'updated_at' | 'write_version'>[];
  /** id and at of each transition, in input order. */
  logged: { id: number; at: Date }[];
}

/** SQLSTATE of ferry_write_refused() (migration 0201). */
const WRITE_REFUSED = 'FW001';

/**
 * Writes a batch's rows, log entries and artifacts, and queues its NOTIFY, in one statement, all or
 * nothing: null when a row was not where the caller read it (nothing was written; in a transaction,
 * the transaction is aborted and must be rolled back).
 */
export async function writeGroup(db: Queryable, w: GroupWrite): Promise<GroupWritten | null> {
  type Stamp = { id: string; updated_at: string; idempotency_key?: string | null; write_version?: number };
  const result = await db.query<{ n: Stamp[] | null; r: Stamp[] | null; t: { id: number; at: string }[] | null }>({
    ...named(
      db,
      'ferry_write_group',
      `WITH rw AS (SELECT * FROM jsonb_to_recordset($2::jsonb) AS x(id uuid, from_state text, from_version int, expected_write_version bigint,
                   request_state text, row_version int, approval_status text, approvals jsonb, decided_by text, current_frontier jsonb,
                   next_work_at timestamptz, lease_owner text, lease_ttl_seconds float8)),
          ru AS (UPDATE movement_requests r
                    SET request_state = rw.request_state, approval_status = rw.approval_status, approvals = rw.approvals,
                        decided_by = rw.decided_by, current_frontier = rw.current_frontier, row_version = rw.row_version,
                        write_version = r.write_version + 1, next_work_at = rw.next_work_at,
                        -- A movement no longer running is no holder's work: its lease goes with it.
                        lease_owner = CASE WHEN rw.request_state IN ('APPROVED', 'EXECUTING') THEN r.lease_owner END,
                        -- A writer's own live lease is extended by its write (the renewal, for free); an
                        -- expired one stays expired: another holder may be taking the movement.
                        lease_expires_at = CASE WHEN rw.request_state NOT IN ('APPROVED', 'EXECUTING') THEN NULL
                                                WHEN rw.lease_owner IS NOT NULL AND r.lease_owner = rw.lease_owner AND r.lease_expires_at > now()
                                                THEN greatest(r.lease_expires_at, now() + make_interval(secs => rw.lease_ttl_seconds))
                                                ELSE r.lease_expires_at END,
                        updated_at = CASE WHEN rw.row_version <> rw.from_version THEN now() ELSE r.updated_at END
                   FROM rw
                  WHERE r.id = rw.id AND r.request_state = rw.from_state AND r.row_version = rw.from_version
                    AND (rw.expected_write_version IS NULL OR r.write_version = rw.expected_write_version)
                  RETURNING r.id, r.updated_at, r.write_version),
          nw AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(id uuid, from_state text, from_version int, node_state text,
                   row_version int, attempt_no int, idempotency_key text, started_at timestamptz, provider_state text, provider_refs jsonb,
                   provider_ref_id text, next_observe_at timestamptz, last_observed_at timestamptz, observe_count int,
                   dispatch_after timestamptz, error_code text, error_detail text, manual_intervention_required boolean, claim_token uuid)),
          -- Only nodes whose movement row the statement wrote (ru): the movement's fence holds.
          nu AS (UPDATE request_nodes n
                    SET node_state = nw.node_state, attempt_no = nw.attempt_no,
                        idempotency_key = nw.idempotency_key,
                        started_at = nw.started_at, provider_state = nw.provider_state, provider_refs = nw.provider_refs,
                        provider_ref_id = nw.provider_ref_id, next_observe_at = nw.next_observe_at,
                        last_observed_at = nw.last_observed_at, observe_count = nw.observe_count,
                        dispatch_after = nw.dispatch_after, error_code = nw.error_code, error_detail = nw.error_detail,
                        manual_intervention_required = nw.manual_intervention_required,
                        claim_token = nw.claim_token, row_version = nw.row_version, updated_at = now()
                   FROM nw, ru
                  WHERE n.id = nw.id AND ru.id = n.request_id AND n.node_state = nw.from_state AND n.row_version = nw.from_version
                  RETURNING n.id, n.idempotency_key, n.updated_at),
          tw AS (INSERT INTO transitions (machine_id, machine_version, entity_type, entity_id, request_id, node_key, seq,
                                          from_state, to_state, event_type, event_payload, actor)
                 SELECT machine_id, machine_version, entity_type, entity_id, request_id, node_key, seq, from_state, to_state,
                        event_type, event_payload, actor
                   FROM jsonb_to_recordset($3::jsonb) AS x(machine_id text, machine_version text, entity_type text,
                        entity_id uuid, request_id uuid, node_key text, seq int, from_state text, to_state text, event_type text,
                        event_payload jsonb, actor text, ord int)
                  -- Log rows only of the rows written: a fenced-out write leaves no log row to collide
                  -- with the newer writer's (the short count then rolls the rest back).
                  WHERE x.entity_id IN (SELECT id FROM nu UNION ALL SELECT id FROM ru)
                  ORDER BY ord
                 RETURNING id, at),
          aw AS (INSERT INTO artifacts (request_id, request_node_id, attempt_no, artifact_type, artifact_digest, content_format,
                                        content_inline, content_uri, artifact_metadata)
                 SELECT a.request_id, a.request_node_id, a.attempt_no, a.artifact_type, a.artifact_digest, a.content_format,
                        a.content_inline, a.content_uri, a.artifact_metadata
                   FROM jsonb_to_recordset($4::jsonb) AS a(request_id uuid, request_node_id uuid, attempt_no int, artifact_type text,
                        artifact_digest text, content_format text, content_inline text, content_uri text, artifact_metadata jsonb)
                  WHERE a.request_node_id IS NULL OR a.request_node_id IN (SELECT id FROM nu)
                 RETURNING 1),
          nt AS (SELECT count(pg_notify($5, p)) AS c FROM unnest($6::text[]) AS p)
     SELECT (SELECT jsonb_agg(to_jsonb(nu)) FROM nu) AS n,
            (SELECT jsonb_agg(to_jsonb(ru)) FROM ru) AS r,
            (SELECT jsonb_agg(jsonb_build_object('id', id, 'at', at) ORDER BY id) FROM tw) AS t,
            (SELECT count(*) FROM aw) AS a,
            (SELECT c FROM nt) AS notified,
            -- All or nothing: a row fenced out or not at its version read aborts the whole statement.
            CASE WHEN (SELECT count(*) FROM nu) <> $7 OR (SELECT count(*) FROM ru) <> $8
                 THEN ferry_write_refused('a movement was written since it was read') ELSE 0 END AS complete`,
    ),
    values: [
      JSON.stringify(w.nodes),
      JSON.stringify(w.movements),
      JSON.stringify(w.transitions.map((t, ord) => ({ ...t, ord }))),
      JSON.stringify(w.artifacts),
      w.channel,
      w.notices,
      w.nodes.length,
      w.movements.length,
    ],
  }).catch((err: { code?: string }) => {
    if (err?.code === WRITE_REFUSED) return null;
    throw err;
  });
  if (result === null) return null;
  const row = result.rows[0];
  return {
    nodes: (row.n ?? []).map((n) => ({ id: n.id, idempotency_key: n.idempotency_key ?? null, updated_at: new Date(n.updated_at) })),
    movements: (row.r ?? []).map((r) => ({ id: r.id, updated_at: new Date(r.updated_at), write_version: Number(r.write_version) })),
    logged: (row.t ?? []).map((t) => ({ id: Number(t.id), at: new Date(t.at) })),
  };
}
