import type { Queryable } from './db.ts';

/**
 * Read-only queries behind the inspection API, the visualizer and /metrics. Nothing here locks or
 * writes: these are what an operator looks at, and looking must never slow the workers down.
 */

export interface MovementOverview {
  id: string;
  template_key: string;
  template_version: number;
  request_state: string;
  approval_status: string;
  created_by: string;
  created_at: Date;
  updated_at: Date;
  /** How many of the movement's nodes are in each state. */
  node_states: Record<string, number>;
  nodes_total: number;
}

export interface MovementOverviewQuery {
  /** Only movements in one of these states (all when empty). */
  states?: string[];
  limit: number;
  /** Only movements created before this one (newest-first paging), by (created_at, id). */
  beforeId?: string | null;
}

/** Newest first, with a per-state count of each movement's nodes. */
export async function movementOverviews(db: Queryable, q: MovementOverviewQuery): Promise<MovementOverview[]> {
  const states = q.states && q.states.length > 0 ? q.states : null;
  const { rows } = await db.query<MovementOverview>(
    `SELECT r.id, r.template_key, r.template_version, r.request_state, r.approval_status, r.created_by,
            r.created_at, r.updated_at,
            COALESCE(n.node_states, '{}'::jsonb) AS node_states, COALESCE(n.total, 0)::int AS nodes_total
       FROM movement_requests r
       LEFT JOIN LATERAL (
              SELECT jsonb_object_agg(s.node_state, s.c) AS node_states, sum(s.c) AS total
                FROM (SELECT node_state, count(*)::int AS c FROM request_nodes
                       WHERE request_id = r.id GROUP BY node_state) s
            ) n ON true
      WHERE ($1::text[] IS NULL OR r.request_state = ANY($1::text[]))
        AND ($2::uuid IS NULL OR (r.created_at, r.id) <
             (SELECT created_at, id FROM movement_requests WHERE id = $2::uuid))
      ORDER BY r.created_at DESC, r.id DESC
      LIMIT $3`,
    [states, q.beforeId ?? null, q.limit],
  );
  return rows;
}

export interface StateCount {
  state: string;
  count: number;
}

export async function requestCountsByState(db: Queryable): Promise<StateCount[]> {
  const { rows } = await db.query<StateCount>(
    'SELECT request_state AS state, count(*)::int AS count FROM movement_requests GROUP BY request_state',
  );
  return rows;
}

export async function nodeCountsByState(db: Queryable): Promise<StateCount[]> {
  const { rows } = await db.query<StateCount>(
    'SELECT node_state AS state, count(*)::int AS count FROM request_nodes GROUP BY node_state',
  );
  return rows;
}
