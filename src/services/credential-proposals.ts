import type { FerryConfig } from '../config.ts';
import { FerryError, NotFoundError, ValidationError } from '../errors.ts';
import {
  CREDENTIAL_MACHINE_ID,
  CREDENTIAL_MACHINE_VERSION,
  credentialProposalMachine,
  credentialRefusalOf,
  initialCredentialProposalContext,
  type CredentialProposalContext,
  type CredentialProposalEvent,
  type CredentialProposalState,
} from '../machines/credential-proposal-machine.ts';
import { replayLog, type ReplayResult } from '../machines/replay.ts';
import { writeAudit } from '../persistence/audit.ts';
import {
  credentialProposalTransitions,
  getCredentialProposal,
  insertCredentialProposal,
  listCredentialProposals,
  lockCredentialProposal,
  recordCredentialResult,
  updateCredentialProposal,
  type CredentialProposalRow,
  type CredentialTransitionRow,
  type PrincipalRequest,
  type TokenRequest,
} from '../persistence/credential-proposals.ts';
import { withTransaction, type Client, type Pool } from '../persistence/db.ts';
import { appendEntityTransition } from '../persistence/entity-transitions.ts';
import { assertName, findPrincipal, isPrincipalKind, principalKinds, type PrincipalInfo } from '../persistence/principals.ts';
import type { CreatedToken, Role } from '../persistence/tokens.ts';
import { roleDecides } from './permissions.ts';
import { deliverToRow, type RowMachine } from '../durable/row-machine.ts';
import { createApiToken, insertPrincipalAudited, insertTokenAudited, resolveTokenInput, type CreateApiTokenInput } from './principals.ts';

/**
 * Credentials under four-eyes. Four-eyes and quorum count principals, so whoever can make
 * principals or hand out their credentials could otherwise approve alone: mint a token on bob and
 * approve as bob, or create as many principals as a quorum needs. Through the API these changes are
 * therefore two-person operations, run by the credential proposal machine:
 *
 * - creating a principal;
 * - giving a token to a principal other than the caller's own;
 * - giving any token of a role that decides for others (approver, admin: permissions.roleDecides),
 *   the caller's own included.
 *
 * One admin proposes, another principal with token.admin confirms; the confirmation creates the
 * principal or the token in the transaction of its transition, and a token's secret is shown only
 * in the confirming answer (never to the proposer, never stored). A token of one's own principal
 * whose role decides nothing is made at once. The CLI (database access, the root of trust) creates
 * directly, audited as `cli:<user>`, and may confirm an API proposal as the second person.
 *
 * Like the template proposal service: each change locks the one row, re-checks the event against
 * the machine inside the lock, and writes the row, one `transitions` row and the audit events in
 * one transaction.
 */

export interface CredentialDeps {
  pool: Pool;
  config: Pick<FerryConfig, 'credentialReviewWindowSeconds'>;
  /** The clock; tests inject one to stand at the window's edge. */
  now?: () => Date;
}

const clock = (deps: { now?: () => Date }) => (deps.now ?? (() => new Date()))();
const EXPIRER = 'system:expiry';

export function credentialContextFromRow(row: CredentialProposalRow): CredentialProposalContext {
  return {
    proposedBy: row.proposed_by,
    reviewExpiresAt: new Date(row.review_expires_at).toISOString(),
    decidedBy: row.decided_by,
    decidedAt: row.decided_at ? new Date(row.decided_at).toISOString() : null,
    reason: row.reason,
  };
}

function refusedError(row: CredentialProposalRow, event: CredentialProposalEvent, why: NonNullable<ReturnType<typeof credentialRefusalOf>>): FerryError {
  const details = { proposal_id: row.id, operation: row.operation, subject: row.subject, state: row.proposal_state, event: event.type };
  switch (why) {
    case 'state':
      return new FerryError('PROPOSAL_STATE_CONFLICT', `credential proposal ${row.id} is ${row.proposal_state}; it no longer takes ${event.type}`, details);
    case 'confirmerIsNotProposer':
      return new FerryError('FOUR_EYES_VIOLATION', `whoever proposed credential proposal ${row.id} cannot confirm it; a second admin must`, details);
    case 'reviewWindowOpen':
      return new FerryError('REVIEW_WINDOW_CLOSED', `the review window of credential proposal ${row.id} closed; propose it again`, {
        ...details,
        review_expires_at: new Date(row.review_expires_at).toISOString(),
      });
    case 'reviewWindowElapsed':
      return new FerryError('INVALID_TRANSITION', `credential proposal ${row.id} does not take ${event.type} yet (${why})`, {
        machine: CREDENTIAL_MACHINE_ID,
        entity_id: row.id,
        state: row.proposal_state,
        event: event.type,
      });
  }
}

/** The credential proposal machine over its row (see row-machine.ts). */
const credentialRows: RowMachine<CredentialProposalRow, CredentialProposalState, CredentialProposalContext, CredentialProposalEvent> = {
  machine: credentialProposalMachine,
  machineId: CREDENTIAL_MACHINE_ID,
  machineVersion: CREDENTIAL_MACHINE_VERSION,
  entityType: 'credential_proposal',
  context: credentialContextFromRow,
  refusal: credentialRefusalOf,
  refused: refusedError,
  write: (client, row, to, c) =>
    updateCredentialProposal(client, row.id, row.row_version, { proposal_state: to, decided_by: c.decidedBy, decided_at: c.decidedAt, reason: c.reason }),
};

/** Delivers one event to a locked row: the machine decides, the row and one transition are written. */
async function deliver(client: Client, row: CredentialProposalRow, event: CredentialProposalEvent, actor: string) {
  const d = await deliverToRow(credentialRows, client, row, event, actor);
  return { ...d, applyChange: d.actions.includes('applyChange') };
}

async function locked(client: Client, id: string): Promise<CredentialProposalRow> {
  const row = await lockCredentialProposal(client, id);
  if (!row) throw new NotFoundError('credential proposal', id);
  return row;
}

/** What an audit event of a proposal says about it: never a secret (there is none before confirmation). */
function proposalDetails(row: CredentialProposalRow): Record<string, unknown> {
  return { operation: row.operation, subject: row.subject, request: row.request };
}

// ---------------------------------------------------------------------------------------------
// Proposing.

async function propose(
  client: Client,
  deps: CredentialDeps,
  input: { operation: CredentialProposalRow['operation']; request: PrincipalRequest | TokenRequest; subject: string },
  actor: string,
): Promise<CredentialProposalRow> {
  const now = clock(deps);
  const context = initialCredentialProposalContext({
    proposedBy: actor,
    reviewExpiresAt: new Date(now.getTime() + deps.config.credentialReviewWindowSeconds * 1000).toISOString(),
  });
  const row = await insertCredentialProposal(client, {
    ...input,
    machine_id: CREDENTIAL_MACHINE_ID,
    machine_version: CREDENTIAL_MACHINE_VERSION,
    proposal_state: 'PROPOSED',
    proposed_by: actor,
    review_expires_at: context.reviewExpiresAt,
  });
  await appendEntityTransition(client, 'credential_proposal', {
    machine_id: CREDENTIAL_MACHINE_ID,
    machine_version: CREDENTIAL_MACHINE_VERSION,
    entity_id: row.id,
    seq: 0,
    from_state: '',
    to_state: 'PROPOSED',
    event_type: 'xstate.init',
    event_payload: { proposed_by: actor, review_expires_at: context.reviewExpiresAt },
    actor,
    at: now.toISOString(),
  });
  await writeAudit(client, {
    actor,
    action: 'credential_proposal.propose',
    entity_type: 'credential_proposal',
    entity_id: row.id,
    details: { ...proposalDetails(row), review_expires_at: context.reviewExpiresAt },
  });
  return row;
}

function assertPrincipalRequest(input: { name: string; kind: string }): void {
  assertName('principal', input.name);
  if (!isPrincipalKind(input.kind)) {
    throw new ValidationError(`unknown principal kind ${JSON.stringify(input.kind)}; expected one of ${principalKinds.join(', ')}`, {
      field: 'kind',
      allowed: [...principalKinds],
    });
  }
}

/** A new principal, proposed: it exists once a second admin confirms. */
export async function proposePrincipal(deps: CredentialDeps, input: { name: string; kind: string }, actor: string): Promise<CredentialProposalRow> {
  assertPrincipalRequest(input);
  return withTransaction(deps.pool, async (client) => {
    if (await findPrincipal(client, input.name)) throw new ValidationError(`a principal named ${input.name} already exists`, { field: 'name' });
    return propose(client, deps, { operation: 'principal.create', request: { name: input.name, kind: input.kind }, subject: input.name }, actor);
  });
}

/** Who asks for a credential through the API: its actor id and its principal. */
export interface CredentialCaller {
  actor: string;
  principalId: string;
}

export type TokenRequestOutcome =
  /** The caller's own token of a role that decides nothing: made at once, its secret in `token`. */
  | { outcome: 'created'; token: CreatedToken & { principal_created: boolean } }
  /** Anything else: a proposal waiting for a second admin. */
  | { outcome: 'proposed'; proposal: CredentialProposalRow };

/** Whether one admin may make this token alone: only for its own principal, and of a role that decides nothing. */
export function tokenNeedsSecondAdmin(caller: CredentialCaller, principal: PrincipalInfo | null, role: Role): boolean {
  return principal?.id !== caller.principalId || roleDecides(role);
}

/** A token asked for through the API: made at once, or proposed (tokenNeedsSecondAdmin). */
export async function requestToken(deps: CredentialDeps, input: CreateApiTokenInput, caller: CredentialCaller): Promise<TokenRequestOutcome> {
  const resolved = await resolveTokenInput(deps.pool, input);
  if (!tokenNeedsSecondAdmin(caller, resolved.principal, resolved.role as Role)) {
    return { outcome: 'created', token: await createApiToken(deps.pool, input, caller.actor) };
  }
  const request: TokenRequest = {
    ...(resolved.principal ? { principal: resolved.principal.id } : {}),
    name: resolved.name,
    role: resolved.role,
    expires_at: resolved.expiresAt?.toISOString() ?? null,
  };
  const proposal = await withTransaction(deps.pool, (client) =>
    propose(client, deps, { operation: 'token.create', request, subject: resolved.principal?.name ?? resolved.name }, caller.actor),
  );
  return { outcome: 'proposed', proposal };
}

// ---------------------------------------------------------------------------------------------
// Deciding.

export interface ConfirmResult {
  proposal: CredentialProposalRow;
  principal?: PrincipalInfo;
  /** The token and, once, its secret: shown to the confirmer only. */
  token?: CreatedToken;
}

/**
 * A second principal confirms: the machine checks it is not the proposer and the window is open,
 * and the principal or token is created in the same transaction. A confirmation after the window
 * expires the proposal (committed) and is refused with REVIEW_WINDOW_CLOSED.
 */
export async function confirmCredentialProposal(deps: CredentialDeps, id: string, actor: string): Promise<ConfirmResult> {
  const result = await withTransaction(deps.pool, async (client): Promise<ConfirmResult | { late: FerryError }> => {
    const row = await locked(client, id);
    const at = clock(deps).toISOString();
    const event: CredentialProposalEvent = { type: 'CONFIRM', by: actor, at };
    if (credentialRefusalOf(row.proposal_state as CredentialProposalState, credentialContextFromRow(row), event) === 'reviewWindowOpen') {
      await expireLocked(client, row, at);
      return { late: refusedError(row, event, 'reviewWindowOpen') };
    }
    const d = await deliver(client, row, event, actor);
    const extra = { credential_proposal_id: row.id, proposed_by: row.proposed_by };
    let out: ConfirmResult;
    if (row.operation === 'principal.create') {
      const principal = await insertPrincipalAudited(client, row.request as PrincipalRequest, actor, extra);
      out = { proposal: await recordCredentialResult(client, row.id, principal.id), principal };
    } else {
      const r = row.request as TokenRequest;
      const token = await insertTokenAudited(
        client,
        { principal: r.principal, name: r.name, role: r.role, expiresAt: r.expires_at ? new Date(r.expires_at) : null },
        actor,
        extra,
      );
      out = { proposal: await recordCredentialResult(client, row.id, token.id), token };
    }
    await writeAudit(client, {
      actor,
      action: 'credential_proposal.confirm',
      entity_type: 'credential_proposal',
      entity_id: row.id,
      details: { ...proposalDetails(d.row), proposed_by: row.proposed_by, result_id: out.proposal.result_id },
    });
    return out;
  });
  if ('late' in result) throw result.late;
  return result;
}

export function rejectCredentialProposal(deps: CredentialDeps, id: string, actor: string, reason: string | null): Promise<CredentialProposalRow> {
  return withTransaction(deps.pool, async (client) => {
    const row = await locked(client, id);
    const d = await deliver(client, row, { type: 'REJECT', by: actor, at: clock(deps).toISOString(), reason }, actor);
    await writeAudit(client, {
      actor,
      action: 'credential_proposal.reject',
      entity_type: 'credential_proposal',
      entity_id: id,
      details: { ...proposalDetails(d.row), reason },
    });
    return d.row;
  });
}

async function expireLocked(client: Client, row: CredentialProposalRow, at: string): Promise<CredentialProposalRow> {
  const d = await deliver(client, row, { type: 'EXPIRE', at }, EXPIRER);
  await writeAudit(client, {
    actor: EXPIRER,
    action: 'credential_proposal.expire',
    entity_type: 'credential_proposal',
    entity_id: row.id,
    details: { ...proposalDetails(d.row), review_expires_at: new Date(row.review_expires_at).toISOString() },
  });
  return d.row;
}

/** Expires a proposal whose review window has passed (refused with INVALID_TRANSITION before). */
export function expireCredentialProposal(deps: CredentialDeps, id: string): Promise<CredentialProposalRow> {
  return withTransaction(deps.pool, async (client) => expireLocked(client, await locked(client, id), clock(deps).toISOString()));
}

// ---------------------------------------------------------------------------------------------
// Reading.

export function listCredentialProposalRows(pool: Pool, filter: { state?: string; limit: number }): Promise<CredentialProposalRow[]> {
  return listCredentialProposals(pool, filter);
}

export async function credentialProposalDetail(
  pool: Pool,
  id: string,
): Promise<{ proposal: CredentialProposalRow; history: CredentialTransitionRow[]; replay: ReplayResult }> {
  const proposal = await getCredentialProposal(pool, id);
  if (!proposal) throw new NotFoundError('credential proposal', id);
  const history = await credentialProposalTransitions(pool, id);
  return { proposal, history, replay: replayCredentialProposal(history) };
}

/** Replays a proposal's transition log through the machine, from the input its creation logged. */
export function replayCredentialProposal(log: CredentialTransitionRow[]): ReplayResult {
  const birth = (log[0]?.event_payload ?? {}) as { proposed_by?: string; review_expires_at?: string };
  const input = initialCredentialProposalContext({ proposedBy: birth.proposed_by ?? '', reviewExpiresAt: birth.review_expires_at ?? '' });
  return replayLog(credentialProposalMachine, input, log);
}
