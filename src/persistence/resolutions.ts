import type { Queryable } from './db.ts';

/** Operators' resolutions of nodes that need a person (migration 0120; src/services/resolutions.ts). */

export const resolutionKinds = ['complete', 'fail', 'retry'] as const;
export type ResolutionKind = (typeof resolutionKinds)[number];

export interface ResolutionRow {
  id: string;
  request_id: string;
  request_node_id: string;
  node_key: string;
  attempt_no: number;
  resolution: ResolutionKind;
  provider_ref: string | null;
  reason: string;
  evidence: Record<string, unknown>;
  status: 'proposed' | 'applied' | 'refused';
  proposed_by: string;
  proposed_at: Date;
  confirmed_by: string | null;
  confirmed_at: Date | null;
  refusal: string | null;
}

export type NewResolution = Pick<
  ResolutionRow,
  'request_id' | 'request_node_id' | 'node_key' | 'attempt_no' | 'resolution' | 'provider_ref' | 'reason' | 'evidence' | 'proposed_by'
>;

/** Null when the node already has an open proposal (one at a time). */
export async function insertResolution(db: Queryable, r: NewResolution): Promise<ResolutionRow | null> {
  const { rows } = await db.query<ResolutionRow>(
    `INSERT INTO node_resolutions (request_id, request_node_id, node_key, attempt_no, resolution, provider_ref, reason, evidence, proposed_by)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
     ON CONFLICT (request_node_id) WHERE status = 'proposed' DO NOTHING
     RETURNING *`,
    [r.request_id, r.request_node_id, r.node_key, r.attempt_no, r.resolution, r.provider_ref, r.reason, JSON.stringify(r.evidence), r.proposed_by],
  );
  return rows[0] ?? null;
}

export async function lockResolution(db: Queryable, movementId: string, id: string): Promise<ResolutionRow | null> {
  const { rows } = await db.query<ResolutionRow>('SELECT * FROM node_resolutions WHERE id = $1 AND request_id = $2 FOR UPDATE', [id, movementId]);
  return rows[0] ?? null;
}

export async function settleResolution(
  db: Queryable,
  id: string,
  s: { status: 'applied' | 'refused'; confirmedBy: string; refusal?: string | null },
): Promise<ResolutionRow> {
  const { rows } = await db.query<ResolutionRow>(
    `UPDATE node_resolutions SET status = $2, confirmed_by = $3, confirmed_at = now(), refusal = $4 WHERE id = $1 RETURNING *`,
    [id, s.status, s.confirmedBy, s.refusal ?? null],
  );
  return rows[0];
}

export async function resolutionsOf(db: Queryable, movementId: string): Promise<ResolutionRow[]> {
  const { rows } = await db.query<ResolutionRow>('SELECT * FROM node_resolutions WHERE request_id = $1 ORDER BY proposed_at, id', [movementId]);
  return rows;
}
