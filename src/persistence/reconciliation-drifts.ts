import type { Queryable } from './db.ts';
import { reviveNode } from './group-commit.ts';
import type { NodeRow } from './movements.ts';

/**
 * Reconciliation with provider evidence (src/sweeps/provider-reconciliation.ts): which settled
 * nodes to ask about, and what was found. Reading candidates takes no lock: the provider is asked
 * with no transaction open, and a repair re-checks the node under its lock through the machine.
 */

export const driftClasses = ['completed_but_provider_failed', 'failed_but_provider_completed', 'unknown_but_provider_knows'] as const;
export type DriftClass = (typeof driftClasses)[number];

/** A reconciliation_drifts row: what recordDrift writes (NewDrift), and the columns of its life after. */
export interface DriftRow extends NewDrift {
  id: number;
  detected_at: Date;
  last_seen_at: Date;
  repaired_at: Date | null;
  repaired_by: string | null;
}

/**
 * Nodes in COMPLETED, FAILED or UNKNOWN changed within the lookback window, that had an attempt and
 * whose provider was not asked since they last changed (or not within `recheckSeconds`): those never
 * asked first. Manual gates have no provider; UNKNOWN nodes of EXECUTING movements are recovery's.
 * The UNKNOWN nodes of MANUAL_INTERVENTION movements are a person's: they are candidates, and the
 * provider is asked about them through inspect() only, which never acts.
 */
export async function evidenceCandidates(
  db: Queryable,
  opts: { lookbackSeconds: number; recheckSeconds: number; limit: number },
): Promise<NodeRow[]> {
  const { rows } = await db.query<NodeRow>(
    `SELECT n.* FROM request_nodes n JOIN movement_requests r ON r.id = n.request_id
      WHERE n.node_state IN ('COMPLETED', 'FAILED', 'UNKNOWN')
        -- An UNKNOWN node of an EXECUTING movement is recovery's: it asks the provider itself.
        AND NOT (n.node_state = 'UNKNOWN' AND r.request_state = 'EXECUTING')
        AND n.updated_at > now() - make_interval(secs => $1)
        AND n.attempt_no > 0
        AND n.node_kind <> 'manual_gate' AND n.action_type NOT LIKE 'manual\\_%'
        AND (n.provider_checked_at IS NULL OR n.provider_checked_at < n.updated_at
             OR n.provider_checked_at < now() - make_interval(secs => $2))
      ORDER BY n.provider_checked_at NULLS FIRST, n.updated_at
      LIMIT $3`,
    [opts.lookbackSeconds, opts.recheckSeconds, opts.limit],
  );
  return rows.map(reviveNode);
}

/** Bookkeeping of the sweep, not a state change: updated_at stays as the machine left it. */
export async function markProviderChecked(db: Queryable, nodeIds: string[]): Promise<void> {
  if (nodeIds.length === 0) return;
  await db.query('UPDATE request_nodes SET provider_checked_at = now() WHERE id = ANY($1::uuid[])', [nodeIds]);
}

export interface NewDrift {
  request_id: string;
  request_node_id: string;
  node_key: string;
  attempt_no: number;
  drift_class: DriftClass;
  stored_state: string;
  provider_state: string;
  evidence: Record<string, unknown>;
}

/** Records a drift; one seen before only moves its last_seen_at. `created` says which it was. */
export async function recordDrift(db: Queryable, d: NewDrift): Promise<{ id: number; created: boolean }> {
  const { rows } = await db.query<{ id: string; created: boolean }>(
    `INSERT INTO reconciliation_drifts (request_id, request_node_id, node_key, attempt_no, drift_class, stored_state, provider_state, evidence)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
     ON CONFLICT (request_node_id, attempt_no, drift_class) DO UPDATE
        SET last_seen_at = now(), provider_state = EXCLUDED.provider_state, evidence = EXCLUDED.evidence
     RETURNING id, (xmax = 0) AS created`,
    [d.request_id, d.request_node_id, d.node_key, d.attempt_no, d.drift_class, d.stored_state, d.provider_state, JSON.stringify(d.evidence)],
  );
  return { id: Number(rows[0].id), created: rows[0].created };
}

export async function markDriftRepaired(db: Queryable, id: number, by: string): Promise<void> {
  await db.query('UPDATE reconciliation_drifts SET repaired_at = now(), repaired_by = $2 WHERE id = $1 AND repaired_at IS NULL', [id, by]);
}

/** Newest first; `open` only those not repaired. */
export async function listDrifts(db: Queryable, opts: { open: boolean; limit: number }): Promise<DriftRow[]> {
  const { rows } = await db.query<DriftRow>(
    `SELECT * FROM reconciliation_drifts WHERE ($1::boolean IS FALSE OR repaired_at IS NULL)
      ORDER BY last_seen_at DESC, id DESC LIMIT $2`,
    [opts.open, opts.limit],
  );
  return rows.map((r) => ({ ...r, id: Number(r.id) }));
}
