import { reviveMovement, reviveNode, type LockedMovement } from './group-commit.ts';
import { named, type Queryable } from './db.ts';
import type { MovementRow, NodeRow } from './movements.ts';

/**
 * Leases per movement for the actor runtime (migration 0201, src/actors/lease-holder.ts). Each
 * operation is one statement in autocommit.
 *
 * Concurrency. Acquiring takes due movements whose lease is free or expired with FOR UPDATE SKIP
 * LOCKED, so holders in many processes never wait for each other or take one movement twice (a row
 * another acquirer or a writer holds is passed over; a locked row is re-checked on its newest
 * version). An acquisition increments the movement's write_version as well as its lease_epoch: the
 * rows an earlier holder kept no longer pass the write fence (group-commit.ts), so a holder that
 * stalled past its expiry and resumes has every write refused, whether or not the new holder has
 * written yet. Renewing and handing back name the owner in their WHERE, so a holder can only ever
 * extend or give up what it still holds; a movement missing from a renewal's answer is lost.
 *
 * The movement and its nodes come back with the acquisition (one round trip). The nodes are read
 * with the statement's snapshot: a writer that committed while the acquisition waited for the
 * movement's row would leave them one version behind, which the actor's first write finds (the
 * fence refuses it, nothing is written) and answers with a fresh read (readMovements).
 */

const MOVEMENT_WITH_NODES = `to_jsonb(m) AS r,
       coalesce((SELECT jsonb_agg(to_jsonb(n) ORDER BY n.created_at, n.node_key) FROM request_nodes n WHERE n.request_id = m.id), '[]') AS n`;

function rows(result: { rows: { r: MovementRow; n: NodeRow[] }[] }): LockedMovement[] {
  return result.rows.map((row) => ({ movement: reviveMovement(row.r), nodes: row.n.map(reviveNode) }));
}

/** A leased movement, with whether its nodes hold no artifact yet (`noArtifacts`). */
export interface LeasedMovement extends LockedMovement {
  /**
   * True when no node of the movement has an artifact, as of nodes that are current: the read of
   * the nodes saw the movement at the version the lease moved on from (no writer came between),
   * so a holder may start with an empty artifact cache instead of reading them.
   */
  noArtifacts: boolean;
}

/**
 * Leases up to `limit` movements with due work to `owner` for `ttlSeconds`, oldest due first.
 *
 * `noArtifacts`: the subqueries see the statement's snapshot, the UPDATE the newest row version.
 * Only when the snapshot's write_version is the one the lease incremented were the nodes (and the
 * absence of artifacts) read as they are now; otherwise a writer committed in between and the
 * holder reads the artifacts itself.
 */
export async function acquireLeases(db: Queryable, owner: string, ttlSeconds: number, limit: number): Promise<LeasedMovement[]> {
  if (limit <= 0) return [];
  const result = await db.query({
    ...named(
      db,
      'ferry_acquire_leases',
      `WITH due AS (SELECT id FROM movement_requests
                     WHERE request_state IN ('APPROVED', 'EXECUTING') AND next_work_at IS NOT NULL AND next_work_at <= now()
                       AND (lease_owner IS NULL OR lease_expires_at < now())
                     ORDER BY next_work_at
                     LIMIT $3
                     FOR UPDATE SKIP LOCKED),
            m AS (UPDATE movement_requests r
                     SET lease_owner = $1, lease_epoch = r.lease_epoch + 1, write_version = r.write_version + 1,
                         lease_expires_at = now() + make_interval(secs => $2)
                    FROM due WHERE r.id = due.id
                  RETURNING r.*)
       SELECT ${MOVEMENT_WITH_NODES},
              (SELECT s.write_version FROM movement_requests s WHERE s.id = m.id) + 1 = m.write_version
                AND NOT EXISTS (SELECT 1 FROM request_nodes n JOIN artifacts a ON a.request_node_id = n.id WHERE n.request_id = m.id) AS no_artifacts
         FROM m`,
    ),
    values: [owner, ttlSeconds, limit],
  });
  const leased = rows(result);
  return leased.map((m, i) => ({ ...m, noArtifacts: result.rows[i].no_artifacts === true }));
}

/**
 * Extends the leases `owner` still holds among `ids`. Returns the ids it still holds, and apart from
 * them those that are no longer running (a write that ended the movement cleared its lease): a
 * running movement in neither set is lost. Both come from one snapshot, so a movement ended by a
 * commit just before this statement is seen as ended, never as lost.
 */
export async function renewLeases(db: Queryable, owner: string, ids: string[], ttlSeconds: number): Promise<{ kept: Set<string>; ended: Set<string> }> {
  if (ids.length === 0) return { kept: new Set(), ended: new Set() };
  const { rows } = await db.query<{ id: string; kept: boolean }>(
    `WITH renewed AS (UPDATE movement_requests SET lease_expires_at = now() + make_interval(secs => $3)
                       WHERE lease_owner = $1 AND id = ANY($2::uuid[]) AND lease_expires_at > now()
                       RETURNING id)
     SELECT m.id, m.id IN (SELECT id FROM renewed) AS kept
       FROM movement_requests m
      WHERE m.id = ANY($2::uuid[]) AND (m.id IN (SELECT id FROM renewed) OR m.request_state NOT IN ('APPROVED', 'EXECUTING'))`,
    [owner, ids, ttlSeconds],
  );
  return { kept: new Set(rows.filter((r) => r.kept).map((r) => r.id)), ended: new Set(rows.filter((r) => !r.kept).map((r) => r.id)) };
}

/** Hands back the leases `owner` holds among `ids`: another holder may take them at once. */
export async function releaseLeases(db: Queryable, owner: string, ids: string[]): Promise<number> {
  if (ids.length === 0) return 0;
  const { rowCount } = await db.query(
    'UPDATE movement_requests SET lease_owner = NULL, lease_expires_at = NULL WHERE lease_owner = $1 AND id = ANY($2::uuid[])',
    [owner, ids],
  );
  return rowCount ?? 0;
}

/** The movements and their nodes as committed now, without a lock (a holder's fresh read). */
export async function readMovements(db: Queryable, ids: string[]): Promise<LockedMovement[]> {
  if (ids.length === 0) return [];
  return rows(await db.query(`SELECT ${MOVEMENT_WITH_NODES} FROM movement_requests m WHERE m.id = ANY($1::uuid[])`, [ids]));
}

/** The movements `owner` holds now (tests and the worker view). */
export async function leasesOf(db: Queryable, owner: string): Promise<{ id: string; lease_epoch: number; lease_expires_at: Date }[]> {
  const { rows: held } = await db.query('SELECT id, lease_epoch, lease_expires_at FROM movement_requests WHERE lease_owner = $1 ORDER BY id', [owner]);
  return held;
}

/**
 * The leases each owner holds now (live) and holds past their expiry (another holder may take
 * those), for GET /v3/workers. Leases exist only on running movements, so the scan stays on them.
 */
export async function leasesByOwner(db: Queryable): Promise<Map<string, { live: number; expired: number }>> {
  const { rows: counts } = await db.query<{ owner: string; live: number; expired: number }>(
    `SELECT lease_owner AS owner,
            count(*) FILTER (WHERE lease_expires_at > now())::int AS live,
            count(*) FILTER (WHERE lease_expires_at <= now())::int AS expired
       FROM movement_requests
      WHERE request_state IN ('APPROVED', 'EXECUTING') AND lease_owner IS NOT NULL
      GROUP BY lease_owner`,
  );
  return new Map(counts.map((c) => [c.owner, { live: c.live, expired: c.expired }]));
}
