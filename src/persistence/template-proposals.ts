import type { TemplateDefinition } from '../plan/template-schema.ts';
import type { Client, Queryable } from './db.ts';
import type { NewEntityTransition } from './entity-transitions.ts';
import { isUuid } from '../ids.ts';
import { CURSOR_AT_SQL, decodeCursor, pageOfRows } from './cursor.ts';

/**
 * Template proposals: the only module with SQL for template_proposals and for the proposal rows of
 * `transitions`. The service (src/services/template-proposals.ts) owns the transactions and the audit.
 */

/** A template_proposals row: what insertProposal writes (NewProposal), and the columns its decisions fill. */
export interface ProposalRow extends Omit<NewProposal, 'review_expires_at'> {
  id: string;
  row_version: number;
  review_expires_at: Date;
  approved_by: string | null;
  approved_at: Date | null;
  challenge_ends_at: Date | null;
  decided_by: string | null;
  reason: string | null;
  finalized_version: number | null;
  created_at: Date;
  updated_at: Date;
}

export interface NewProposal {
  template_key: string;
  base_version: number;
  graph_hash: string;
  definition: TemplateDefinition;
  machine_id: string;
  machine_version: string;
  proposal_state: string;
  proposed_by: string;
  system: boolean;
  review_expires_at: string;
  challenge_seconds: number;
}

/** Inserts a proposal; null when another proposal of the key is still open (the partial unique index). */
export async function insertProposal(client: Client, p: NewProposal): Promise<ProposalRow | null> {
  const { rows } = await client.query<ProposalRow>(
    `INSERT INTO template_proposals (template_key, base_version, graph_hash, definition, machine_id, machine_version,
                                     proposal_state, proposed_by, system, review_expires_at, challenge_seconds)
     VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7, $8, $9, $10, $11)
     ON CONFLICT (template_key) WHERE proposal_state IN ('PROPOSED', 'APPROVED') DO NOTHING
     RETURNING *`,
    [
      p.template_key,
      p.base_version,
      p.graph_hash,
      JSON.stringify(p.definition),
      p.machine_id,
      p.machine_version,
      p.proposal_state,
      p.proposed_by,
      p.system,
      p.review_expires_at,
      p.challenge_seconds,
    ],
  );
  return rows[0] ?? null;
}

// An id that is not a UUID names no proposal: not found, never a cast error.
export async function getProposal(db: Queryable, id: string): Promise<ProposalRow | null> {
  if (!isUuid(id)) return null;
  const { rows } = await db.query<ProposalRow>('SELECT * FROM template_proposals WHERE id = $1', [id]);
  return rows[0] ?? null;
}

/** The proposal row, locked FOR UPDATE until the caller's transaction ends; null if absent. */
export async function lockProposal(client: Client, id: string): Promise<ProposalRow | null> {
  if (!isUuid(id)) return null;
  const { rows } = await client.query<ProposalRow>('SELECT * FROM template_proposals WHERE id = $1 FOR UPDATE', [id]);
  return rows[0] ?? null;
}

/** The open (PROPOSED or APPROVED) proposal of a template, if any. */
export async function openProposalOf(db: Queryable, templateKey: string): Promise<ProposalRow | null> {
  const { rows } = await db.query<ProposalRow>(
    `SELECT * FROM template_proposals WHERE template_key = $1 AND proposal_state IN ('PROPOSED', 'APPROVED')`,
    [templateKey],
  );
  return rows[0] ?? null;
}

/** Newest first, paginated by (created_at, id) with an opaque cursor (src/persistence/cursor.ts). */
export async function listProposals(
  db: Queryable,
  filter: { state?: string; templateKey?: string; limit: number; cursor?: string | null },
): Promise<{ proposals: ProposalRow[]; nextCursor: string | null }> {
  const before = filter.cursor ? decodeCursor(filter.cursor) : null;
  const { rows } = await db.query<ProposalRow & { cursor_at: string }>(
    `SELECT *, ${CURSOR_AT_SQL} AS cursor_at FROM template_proposals
      WHERE ($1::text IS NULL OR proposal_state = $1) AND ($2::text IS NULL OR template_key = $2)
        AND ($3::timestamptz IS NULL OR (created_at, id) < ($3::timestamptz, $4::uuid))
      ORDER BY created_at DESC, id DESC LIMIT $5`,
    [filter.state ?? null, filter.templateKey ?? null, before?.at ?? null, before?.id ?? null, filter.limit + 1],
  );
  const page = pageOfRows(rows, filter.limit);
  return { proposals: page.rows, nextCursor: page.nextCursor };
}

/** PROPOSED proposals whose review window ended by `now`, oldest first (no lock: each is locked on its own). */
export async function reviewExpiredCandidates(db: Queryable, now: Date, limit: number): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    `SELECT id FROM template_proposals WHERE proposal_state = 'PROPOSED' AND review_expires_at <= $1
      ORDER BY review_expires_at, id LIMIT $2`,
    [now, limit],
  );
  return rows.map((r) => r.id);
}

/** APPROVED proposals whose challenge window ended by `now`, oldest first. */
export async function finalizationCandidates(db: Queryable, now: Date, limit: number): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    `SELECT id FROM template_proposals WHERE proposal_state = 'APPROVED' AND challenge_ends_at <= $1
      ORDER BY challenge_ends_at, id LIMIT $2`,
    [now, limit],
  );
  return rows.map((r) => r.id);
}

export interface ProposalUpdate {
  proposal_state: string;
  approved_by: string | null;
  approved_at: string | null;
  challenge_ends_at: string | null;
  decided_by: string | null;
  reason: string | null;
  finalized_version?: number | null;
}

/** Writes the new snapshot of a locked row; row_version guards against a writer that did not lock. */
export async function updateProposal(client: Client, id: string, rowVersion: number, u: ProposalUpdate): Promise<ProposalRow | null> {
  const { rows } = await client.query<ProposalRow>(
    `UPDATE template_proposals
        SET proposal_state = $3, approved_by = $4, approved_at = $5, challenge_ends_at = $6, decided_by = $7, reason = $8,
            finalized_version = COALESCE($9, finalized_version), row_version = row_version + 1, updated_at = now()
      WHERE id = $1 AND row_version = $2 RETURNING *`,
    [id, rowVersion, u.proposal_state, u.approved_by, u.approved_at, u.challenge_ends_at, u.decided_by, u.reason, u.finalized_version ?? null],
  );
  return rows[0] ?? null;
}

/** The template version a finalized proposal wrote (its writeVersion message, in the same transaction). */
export async function recordFinalizedVersion(client: Client, id: string, version: number): Promise<ProposalRow> {
  const { rows } = await client.query<ProposalRow>('UPDATE template_proposals SET finalized_version = $2 WHERE id = $1 RETURNING *', [id, version]);
  return rows[0];
}

export interface ProposalTransitionRow extends Omit<NewEntityTransition, 'at'> {
  id: number;
  entity_type: 'template_proposal';
  at: Date;
}

export async function proposalTransitions(db: Queryable, id: string): Promise<ProposalTransitionRow[]> {
  const { rows } = await db.query<ProposalTransitionRow>(
    `SELECT * FROM transitions WHERE entity_id = $1 AND entity_type = 'template_proposal' ORDER BY seq`,
    [id],
  );
  return rows;
}
