import { CURSOR_AT_SQL, decodeCursor, pageOfRows } from './cursor.ts';
import type { Queryable } from './db.ts';
import { MOVEMENT_SUMMARY_COLUMNS, type MovementSummaryRow } from './movements.ts';

/**
 * Read-only queries behind the inspection API, the visualizer and /metrics. Nothing here locks or
 * writes: these are what an operator looks at, and looking must never slow the workers down.
 */

/** A movement as the list pages carry it, with how many of its nodes are in each state. */
export interface MovementOverview extends MovementSummaryRow {
  node_states: Record<string, number>;
  nodes_total: number;
  /** The first node (by its last change) that is FAILED or UNKNOWN with an error code, if any. */
  failed_node_key: string | null;
  failed_error_code: string | null;
}

export interface MovementOverviewQuery {
  /** Only movements in one of these states (all when empty). */
  states?: string[];
  limit: number;
  /** Opaque, from a previous page's nextCursor: only movements created before its (created_at, id). */
  cursor?: string | null;
}

export interface MovementOverviewPage {
  movements: MovementOverview[];
  nextCursor: string | null;
}

/**
 * Newest first, paginated by (created_at, id) with the cursors of listMovements, with a per-state
 * count of each movement's nodes (counted for the page's movements only).
 */
export async function movementOverviews(db: Queryable, q: MovementOverviewQuery): Promise<MovementOverviewPage> {
  const states = q.states && q.states.length > 0 ? q.states : null;
  const before = q.cursor ? decodeCursor(q.cursor) : null;
  const { rows } = await db.query<MovementOverview & { cursor_at: string }>(
    `SELECT r.*, COALESCE(n.node_states, '{}'::jsonb) AS node_states, COALESCE(n.total, 0)::int AS nodes_total,
            f.node_key AS failed_node_key, f.error_code AS failed_error_code
       FROM (SELECT ${MOVEMENT_SUMMARY_COLUMNS}, ${CURSOR_AT_SQL} AS cursor_at
               FROM movement_requests
              WHERE ($1::text[] IS NULL OR request_state = ANY($1::text[]))
                AND ($2::timestamptz IS NULL OR (created_at, id) < ($2::timestamptz, $3::uuid))
              ORDER BY created_at DESC, id DESC
              LIMIT $4) r
       LEFT JOIN LATERAL (
              SELECT jsonb_object_agg(s.node_state, s.c) AS node_states, sum(s.c) AS total
                FROM (SELECT node_state, count(*)::int AS c FROM request_nodes
                       WHERE request_id = r.id GROUP BY node_state) s
            ) n ON true
       LEFT JOIN LATERAL (
              SELECT node_key, error_code FROM request_nodes
               WHERE request_id = r.id AND node_state IN ('FAILED', 'UNKNOWN') AND error_code IS NOT NULL
               ORDER BY updated_at, node_key LIMIT 1
            ) f ON true
      ORDER BY r.created_at DESC, r.id DESC`,
    [states, before?.at ?? null, before?.id ?? null, q.limit + 1],
  );
  const page = pageOfRows(rows, q.limit);
  return { movements: page.rows, nextCursor: page.nextCursor };
}

export interface StateCount {
  state: string;
  count: number;
}

export async function movementCountsByState(db: Queryable): Promise<StateCount[]> {
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
