import type { Queryable } from '../../src/persistence/db.ts';

/**
 * What the benchmark reads to tell whether its movements progress and, when they do not all
 * complete, where they ended and why. Read-only; every figure comes from committed rows.
 */

export interface BenchProgress {
  /** Movements per request state. */
  states: Record<string, number>;
  /** Transitions committed so far for these movements: it grows while anything progresses. */
  transitions: number;
}

export async function benchProgress(db: Queryable, ids: string[]): Promise<BenchProgress> {
  const { rows } = await db.query<{ states: Record<string, number> | null; transitions: number }>(
    `SELECT (SELECT jsonb_object_agg(request_state, n)
               FROM (SELECT request_state, count(*)::int AS n FROM movement_requests
                      WHERE id = ANY($1::uuid[]) GROUP BY request_state) s) AS states,
            (SELECT count(*)::int FROM transitions WHERE request_id = ANY($1::uuid[])) AS transitions`,
    [ids],
  );
  return { states: rows[0].states ?? {}, transitions: rows[0].transitions };
}

export interface UnfinishedNodes {
  request_state: string;
  node_state: string;
  error_code: string | null;
  /** One of the group's error details (shortened), to tell causes apart. */
  sample_detail: string | null;
  n: number;
}

/** The nodes of the movements that did not complete, by movement state, node state and error code. */
export async function unfinishedNodes(db: Queryable, ids: string[]): Promise<UnfinishedNodes[]> {
  const { rows } = await db.query<UnfinishedNodes>(
    `SELECT r.request_state, n.node_state, n.error_code, left(min(n.error_detail), 160) AS sample_detail, count(*)::int AS n
       FROM movement_requests r JOIN request_nodes n ON n.request_id = r.id
      WHERE r.id = ANY($1::uuid[]) AND r.request_state <> 'COMPLETED'
      GROUP BY 1, 2, 3 ORDER BY 1, 2, 3 NULLS FIRST`,
    [ids],
  );
  return rows;
}
