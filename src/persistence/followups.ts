import type { Queryable } from './db.ts';

/**
 * SQL for capital_transfer_followup: movements waiting in a non-terminal state longer than their
 * template's age. What a movement waits on, in order: an approval not given (since creation), a
 * manual gate nobody operated (READY since), a node observed too long (SUBMITTED or UNKNOWN since
 * its attempt started), else the movement's own state (since its last change). Each waiting
 * episode (movement, reason, node, since) is surfaced once: its attention event's source_key.
 */

export const WAITING_STATES = ['PENDING_APPROVAL', 'APPROVED', 'EXECUTING', 'WAITING_MANUAL_ACTION', 'MANUAL_INTERVENTION'] as const;

export type WaitingReason = 'approval_not_given' | 'manual_gate_untouched' | 'node_observed_too_long' | 'waiting_in_state';

export interface WaitingMovement {
  movement_id: string;
  template_key: string;
  request_state: string;
  reason: WaitingReason;
  node_key: string | null;
  since: Date;
  age_seconds: number;
  source_key: string;
}

const WAITING_SQL = `
  SELECT m.id AS movement_id, m.template_key, m.request_state, w.reason, w.node_key, w.since, w.age AS age_seconds,
         'waiting_too_long:' || m.id || ':' || w.reason || ':' || COALESCE(w.node_key, '') || ':' || floor(extract(epoch FROM w.since) * 1000)::bigint AS source_key
    FROM movement_requests m
    CROSS JOIN LATERAL (SELECT COALESCE(($1::jsonb ->> m.template_key)::int, $2::int) AS age) a
    CROSS JOIN LATERAL (
      SELECT x.*, a.age FROM (
        SELECT 'approval_not_given' AS reason, NULL::text AS node_key, m.created_at AS since, 1 AS prio
         WHERE m.request_state = 'PENDING_APPROVAL'
        UNION ALL
        SELECT 'manual_gate_untouched', n.node_key, n.updated_at, 2
          FROM request_nodes n WHERE n.request_id = m.id AND n.node_kind = 'manual_gate' AND n.node_state = 'READY'
        UNION ALL
        SELECT 'node_observed_too_long', n.node_key, COALESCE(n.started_at, n.updated_at), 3
          FROM request_nodes n WHERE n.request_id = m.id AND n.node_state IN ('SUBMITTED', 'UNKNOWN')
        UNION ALL
        SELECT 'waiting_in_state', NULL, m.updated_at, 4
         WHERE m.request_state IN ('APPROVED', 'WAITING_MANUAL_ACTION', 'MANUAL_INTERVENTION')
      ) x
      WHERE x.since < now() - make_interval(secs => a.age)
      ORDER BY x.prio, x.since
      LIMIT 1
    ) w
   WHERE m.request_state = ANY($3::text[])`;

/** Movements waiting too long whose current waiting episode has not been surfaced yet, oldest first. */
export async function unsurfacedWaiting(db: Queryable, q: { byTemplate: Record<string, number>; defaultSeconds: number; limit: number }): Promise<WaitingMovement[]> {
  const { rows } = await db.query<WaitingMovement>(
    `SELECT * FROM (${WAITING_SQL}) c
      WHERE NOT EXISTS (SELECT 1 FROM attention_events e WHERE e.source_key = c.source_key)
      ORDER BY c.since LIMIT $4`,
    [JSON.stringify(q.byTemplate), q.defaultSeconds, WAITING_STATES, q.limit],
  );
  return rows;
}

export interface WaitingListRow extends WaitingMovement {
  attention_id: string;
  surfaced_at: Date;
}

/** Movements still waiting in an episode that was surfaced: the "waiting too long" list, oldest wait first. */
export async function listWaitingTooLong(db: Queryable, q: { byTemplate: Record<string, number>; defaultSeconds: number; limit: number }): Promise<WaitingListRow[]> {
  const { rows } = await db.query<WaitingListRow>(
    `SELECT c.*, e.id AS attention_id, e.created_at AS surfaced_at
       FROM (${WAITING_SQL}) c JOIN attention_events e ON e.source_key = c.source_key
      ORDER BY c.since LIMIT $4`,
    [JSON.stringify(q.byTemplate), q.defaultSeconds, WAITING_STATES, q.limit],
  );
  return rows;
}
