import { isUuid } from '../ids.ts';
import type { Client, Queryable } from './db.ts';
import type { NewEntityTransition } from './entity-transitions.ts';

/**
 * Credential proposals: the only module with SQL for credential_proposals and for their rows of
 * `transitions`. The service (src/services/credential-proposals.ts) owns the transactions and audit.
 */

export const credentialOperations = ['principal.create', 'token.create'] as const;
export type CredentialOperation = (typeof credentialOperations)[number];

/** What a principal proposal asks for. */
export interface PrincipalRequest {
  name: string;
  kind: string;
}

/** What a token proposal asks for: never a secret (it is made at confirmation). */
export interface TokenRequest {
  /** The principal (id or name); absent: a new principal named like the token. */
  principal?: string;
  name: string;
  role: string;
  expires_at: string | null;
}

export interface NewCredentialProposal {
  operation: CredentialOperation;
  request: PrincipalRequest | TokenRequest;
  subject: string;
  machine_id: string;
  machine_version: string;
  proposal_state: string;
  proposed_by: string;
  review_expires_at: string;
}

export interface CredentialProposalRow extends Omit<NewCredentialProposal, 'review_expires_at'> {
  id: string;
  row_version: number;
  review_expires_at: Date;
  decided_by: string | null;
  decided_at: Date | null;
  reason: string | null;
  result_id: string | null;
  created_at: Date;
  updated_at: Date;
}

export async function insertCredentialProposal(client: Client, p: NewCredentialProposal): Promise<CredentialProposalRow> {
  const { rows } = await client.query<CredentialProposalRow>(
    `INSERT INTO credential_proposals (operation, request, subject, machine_id, machine_version, proposal_state, proposed_by, review_expires_at)
     VALUES ($1, $2::jsonb, $3, $4, $5, $6, $7, $8) RETURNING *`,
    [p.operation, JSON.stringify(p.request), p.subject, p.machine_id, p.machine_version, p.proposal_state, p.proposed_by, p.review_expires_at],
  );
  return rows[0];
}

// An id that is not a UUID names no proposal: not found, never a cast error.
export async function getCredentialProposal(db: Queryable, id: string): Promise<CredentialProposalRow | null> {
  if (!isUuid(id)) return null;
  const { rows } = await db.query<CredentialProposalRow>('SELECT * FROM credential_proposals WHERE id = $1', [id]);
  return rows[0] ?? null;
}

export async function lockCredentialProposal(client: Client, id: string): Promise<CredentialProposalRow | null> {
  if (!isUuid(id)) return null;
  const { rows } = await client.query<CredentialProposalRow>('SELECT * FROM credential_proposals WHERE id = $1 FOR UPDATE', [id]);
  return rows[0] ?? null;
}

/** Newest first; at most `limit` rows. */
export async function listCredentialProposals(db: Queryable, filter: { state?: string; limit: number }): Promise<CredentialProposalRow[]> {
  const { rows } = await db.query<CredentialProposalRow>(
    `SELECT * FROM credential_proposals WHERE ($1::text IS NULL OR proposal_state = $1) ORDER BY created_at DESC, id DESC LIMIT $2`,
    [filter.state ?? null, filter.limit],
  );
  return rows;
}

export interface CredentialProposalUpdate {
  proposal_state: string;
  decided_by: string | null;
  decided_at: string | null;
  reason: string | null;
}

/** Writes the new snapshot of a locked row; row_version guards against a writer that did not lock. */
export async function updateCredentialProposal(
  client: Client,
  id: string,
  rowVersion: number,
  u: CredentialProposalUpdate,
): Promise<CredentialProposalRow | null> {
  const { rows } = await client.query<CredentialProposalRow>(
    `UPDATE credential_proposals
        SET proposal_state = $3, decided_by = $4, decided_at = $5, reason = $6, row_version = row_version + 1, updated_at = now()
      WHERE id = $1 AND row_version = $2 RETURNING *`,
    [id, rowVersion, u.proposal_state, u.decided_by, u.decided_at, u.reason],
  );
  return rows[0] ?? null;
}

export async function recordCredentialResult(client: Client, id: string, resultId: string): Promise<CredentialProposalRow> {
  const { rows } = await client.query<CredentialProposalRow>('UPDATE credential_proposals SET result_id = $2 WHERE id = $1 RETURNING *', [id, resultId]);
  return rows[0];
}

export interface CredentialTransitionRow extends Omit<NewEntityTransition, 'at'> {
  id: number;
  entity_type: 'credential_proposal';
  at: Date;
}

export async function credentialProposalTransitions(db: Queryable, id: string): Promise<CredentialTransitionRow[]> {
  const { rows } = await db.query<CredentialTransitionRow>(
    `SELECT * FROM transitions WHERE entity_id = $1 AND entity_type = 'credential_proposal' ORDER BY seq`,
    [id],
  );
  return rows;
}
