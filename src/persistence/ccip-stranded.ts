import type { Queryable } from './db.ts';

/** A delivery node of the CCIP lane that has not resolved past the threshold and was not surfaced yet. */
export interface StrandedSend {
  node_id: string;
  movement_id: string;
  node_key: string;
  node_state: string;
  template_key: string;
  message_id: string | null;
  destination_chain_id: number | null;
  started_at: Date;
  age_seconds: number;
}

/**
 * Delivery nodes (`executorKey`) still undecided (SUBMITTED, OBSERVING, UNKNOWN) whose watch started
 * more than `afterSeconds` ago, with no attention event of theirs yet (source_key
 * 'ccip_stranded:<node id>'), oldest first.
 */
export async function unsurfacedStrandedSends(db: Queryable, opts: { executorKey: string; afterSeconds: number; limit: number }): Promise<StrandedSend[]> {
  const { rows } = await db.query<StrandedSend>(
    `SELECT n.id AS node_id, n.request_id AS movement_id, n.node_key, n.node_state, r.template_key,
            n.provider_refs->>'message_id' AS message_id,
            (n.provider_refs->>'destination_chain_id')::bigint AS destination_chain_id,
            n.started_at, floor(extract(epoch FROM (clock_timestamp() - n.started_at)))::int AS age_seconds
       FROM request_nodes n JOIN movement_requests r ON r.id = n.request_id
      WHERE n.node_state IN ('SUBMITTED', 'OBSERVING', 'UNKNOWN')
        AND COALESCE(n.executor_binding->>'executor_key', n.executor_binding #>> '{}') = $1
        AND n.started_at < clock_timestamp() - make_interval(secs => $2)
        AND NOT EXISTS (SELECT 1 FROM attention_events a WHERE a.source_key = 'ccip_stranded:' || n.id)
      ORDER BY n.started_at
      LIMIT $3`,
    [opts.executorKey, opts.afterSeconds, opts.limit],
  );
  return rows.map((r) => ({ ...r, destination_chain_id: r.destination_chain_id === null ? null : Number(r.destination_chain_id) }));
}
