import type { FerryConfig } from '../config.ts';
import { FerryError, NotFoundError, ValidationError } from '../errors.ts';
import {
  PROPOSAL_MACHINE_ID,
  PROPOSAL_MACHINE_VERSION,
  initialProposalContext,
  proposalMachine,
  refusalOf,
  type ProposalContext,
  type ProposalEvent,
  type ProposalState,
} from '../machines/template-proposal-machine.ts';
import { replayLog, type ReplayResult } from '../machines/replay.ts';
import { templateProposalSweepTotal } from '../metrics.ts';
import { writeAudit } from '../persistence/audit.ts';
import { withTransaction, type Client, type Pool } from '../persistence/db.ts';
import { appendEntityTransition } from '../persistence/entity-transitions.ts';
import {
  finalizationCandidates,
  getProposal,
  insertProposal,
  lockProposal,
  openProposalOf,
  proposalTransitions,
  recordFinalizedVersion,
  reviewExpiredCandidates,
  updateProposal,
  type ProposalRow,
  type ProposalTransitionRow,
} from '../persistence/template-proposals.ts';
import {
  getTemplate,
  getTemplateVersion,
  lockTemplateKey,
  saveTemplate,
  versionWithGraphHash,
  type SaveTemplateResult,
  type TemplateRow,
  type TemplateVersionRecord,
} from '../persistence/templates.ts';
import { graphHash } from '../plan/compile.ts';
import type { TemplateDefinition } from '../plan/template-schema.ts';
import { validateTemplate, validateTemplateStructure, type BindingCatalog } from '../plan/validate.ts';
import { runBudget } from '../run-budget.ts';
import { deliverToRow, type RowMachine } from '../durable/row-machine.ts';

/**
 * The template proposal service: the one owner of proposal writes. Every change of a proposal
 * runs, in one short transaction: lock the proposal row FOR UPDATE, rebuild the machine snapshot
 * from it, re-check the event against the machine inside the lock (the state, the windows, who
 * acts), write the new row, one `transitions` row and one audit event. Finalize (the finalization
 * sweep) and challenge (the API) lock the same single row first and nothing before it, so they
 * serialize on it: whichever commits first wins, and the other finds the proposal decided and
 * gets PROPOSAL_STATE_CONFLICT (a 409 for the challenger; a skip for the sweep).
 *
 * Only a FINALIZED proposal writes a template version (persistence/templates.ts saveTemplate), in
 * the same transaction as its transition, so template_versions holds nothing but finalized plans
 * and movements compile from nothing else.
 */

export interface ProposalDeps {
  pool: Pool;
  config: Pick<FerryConfig, 'templateReviewWindowSeconds' | 'templateChallengeWindowSeconds'>;
  /** The clock; tests inject one to stand at a window's edge. */
  now?: () => Date;
}

const clock = (deps: { now?: () => Date }) => (deps.now ?? (() => new Date()))();

const FINALIZER = 'worker:template_finalization';
const EXPIRER = 'worker:template_proposal_expiration';

// ---------------------------------------------------------------------------------------------
// The durable transition of one proposal.

function contextFromRow(row: ProposalRow): ProposalContext {
  const iso = (d: Date | null) => (d ? new Date(d).toISOString() : null);
  return {
    proposedBy: row.proposed_by,
    system: row.system,
    reviewExpiresAt: iso(row.review_expires_at)!,
    challengeSeconds: row.challenge_seconds,
    approvedBy: row.approved_by,
    approvedAt: iso(row.approved_at),
    challengeEndsAt: iso(row.challenge_ends_at),
    decidedBy: row.decided_by,
    reason: row.reason,
  };
}
export { contextFromRow as proposalContextFromRow };

function refusedError(row: ProposalRow, event: ProposalEvent, why: NonNullable<ReturnType<typeof refusalOf>>): FerryError {
  const details = { proposal_id: row.id, template_key: row.template_key, state: row.proposal_state, event: event.type };
  switch (why) {
    case 'state':
      return new FerryError(
        'PROPOSAL_STATE_CONFLICT',
        `template proposal ${row.id} is ${row.proposal_state}; it no longer takes ${event.type}`,
        details,
      );
    case 'approverIsNotProposer':
      return new FerryError('FOUR_EYES_VIOLATION', `whoever proposed template proposal ${row.id} cannot approve it; a second person must`, details);
    case 'reviewWindowOpen':
      return new FerryError('REVIEW_WINDOW_CLOSED', `the review window of template proposal ${row.id} closed`, {
        ...details,
        review_expires_at: new Date(row.review_expires_at).toISOString(),
      });
    case 'challengeWindowOpen':
      return new FerryError('CHALLENGE_WINDOW_CLOSED', `the challenge window of template proposal ${row.id} closed; it is being finalized`, {
        ...details,
        challenge_ends_at: row.challenge_ends_at ? new Date(row.challenge_ends_at).toISOString() : null,
      });
    case 'challengeWindowElapsed':
      return new FerryError('CHALLENGE_WINDOW_OPEN', `the challenge window of template proposal ${row.id} is still open`, {
        ...details,
        challenge_ends_at: row.challenge_ends_at ? new Date(row.challenge_ends_at).toISOString() : null,
      });
    case 'challengeGivesAReason':
      return new ValidationError('a challenge needs a reason', { ...details, field: 'reason' });
    case 'withdrawnByProposer':
      return new FerryError('NOT_PROPOSER', `only whoever proposed template proposal ${row.id} may withdraw it`, details);
    case 'reviewWindowElapsed':
    case 'proposedBySystem':
      return new FerryError('INVALID_TRANSITION', `template proposal ${row.id} does not take ${event.type} now (${why})`, {
        machine: PROPOSAL_MACHINE_ID,
        entity_id: row.id,
        state: row.proposal_state,
        event: event.type,
      });
  }
}

/** The template proposal machine over its row (see row-machine.ts). */
const proposalRows: RowMachine<ProposalRow, ProposalState, ProposalContext, ProposalEvent> = {
  machine: proposalMachine,
  machineId: PROPOSAL_MACHINE_ID,
  machineVersion: PROPOSAL_MACHINE_VERSION,
  entityType: 'template_proposal',
  context: contextFromRow,
  refusal: refusalOf,
  refused: refusedError,
  write: (client, row, to, c) =>
    updateProposal(client, row.id, row.row_version, {
      proposal_state: to,
      approved_by: c.approvedBy,
      approved_at: c.approvedAt,
      challenge_ends_at: c.challengeEndsAt,
      decided_by: c.decidedBy,
      reason: c.reason,
    }),
};

type Delivered = Awaited<ReturnType<typeof deliver>>;

/**
 * Delivers one event to a proposal row the caller has locked: the machine decides, the row and a
 * transition are written. Refusals throw (see refusedError) and write nothing.
 */
async function deliver(client: Client, row: ProposalRow, event: ProposalEvent, actor: string) {
  const d = await deliverToRow(proposalRows, client, row, event, actor);
  /** The machine asked for the definition to become the template's next version. */
  return { ...d, writeVersion: d.actions.includes('writeVersion') };
}

/** Writes the definition as the template's next version (the machine's writeVersion message). */
async function writeVersion(client: Client, delivered: Delivered): Promise<{ row: ProposalRow; saved: SaveTemplateResult }> {
  const p = delivered.row;
  // Bindings were checked when it was proposed; a movement's compile checks them again.
  const saved = await saveTemplate(client, p.definition, p.proposed_by);
  const row = await recordFinalizedVersion(client, p.id, saved.version.version);
  return { row, saved };
}

/** Loads and locks a proposal, or 404. */
async function locked(client: Client, id: string): Promise<ProposalRow> {
  const row = await lockProposal(client, id);
  if (!row) throw new NotFoundError('template proposal', id);
  return row;
}

// ---------------------------------------------------------------------------------------------
// Proposing.

export type ProposeResult =
  /** The graph is new: a PROPOSED proposal waits for approval. */
  | { outcome: 'proposed'; proposal: ProposalRow }
  /** The same graph is already proposed and open: that proposal is returned. */
  | { outcome: 'already_proposed'; proposal: ProposalRow }
  /** The graph is a finalized version already: nothing to review (a description is updated in place). */
  | { outcome: 'unchanged'; template: TemplateRow; version: TemplateVersionRecord; timeout_policy_not_applied: string[] };

async function proposalInput(client: Client, deps: ProposalDeps, def: TemplateDefinition, actor: string, system: boolean) {
  const now = clock(deps);
  const template = await getTemplate(client, def.template_key);
  return {
    now,
    base_version: template?.latest_version ?? 0,
    context: initialProposalContext({
      proposedBy: actor,
      system,
      reviewExpiresAt: new Date(now.getTime() + deps.config.templateReviewWindowSeconds * 1000).toISOString(),
      challengeSeconds: deps.config.templateChallengeWindowSeconds,
    }),
  };
}

async function insertWithBirth(client: Client, deps: ProposalDeps, def: TemplateDefinition, actor: string, system: boolean) {
  const input = await proposalInput(client, deps, def, actor, system);
  const row = await insertProposal(client, {
    template_key: def.template_key,
    base_version: input.base_version,
    graph_hash: graphHash(def),
    definition: def,
    machine_id: PROPOSAL_MACHINE_ID,
    machine_version: PROPOSAL_MACHINE_VERSION,
    proposal_state: 'PROPOSED',
    proposed_by: actor,
    system,
    review_expires_at: input.context.reviewExpiresAt,
    challenge_seconds: input.context.challengeSeconds,
  });
  if (!row) return null;
  await appendEntityTransition(client, 'template_proposal', {
    machine_id: PROPOSAL_MACHINE_ID,
    machine_version: PROPOSAL_MACHINE_VERSION,
    entity_id: row.id,
    seq: 0,
    from_state: '',
    to_state: 'PROPOSED',
    event_type: 'xstate.init',
    event_payload: {
      proposed_by: actor,
      system,
      review_expires_at: input.context.reviewExpiresAt,
      challenge_seconds: input.context.challengeSeconds,
    },
    actor,
    at: input.now.toISOString(),
  });
  return row;
}

/**
 * Posting a template. The definition is validated first (bindings too when a catalog is given). A
 * graph that is already a finalized version changes nothing but its description; any other graph
 * becomes a proposal, unless the template has an open proposal of another graph
 * (PROPOSAL_ALREADY_OPEN: decide or withdraw that one first).
 */
export async function proposeTemplate(
  deps: ProposalDeps,
  def: TemplateDefinition,
  actor: string,
  bindings?: BindingCatalog,
): Promise<ProposeResult> {
  if (bindings) validateTemplate(def, bindings);
  else validateTemplateStructure(def);
  const hash = graphHash(def);
  return withTransaction(deps.pool, async (client) => {
    await lockTemplateKey(client, def.template_key);
    if ((await versionWithGraphHash(client, def.template_key, hash)) !== null) {
      const saved = await saveTemplate(client, def, actor, bindings);
      await writeAudit(client, {
        actor,
        action: 'template.save',
        entity_type: 'template',
        entity_id: def.template_key,
        details: { version: saved.version.version, graph_hash: saved.version.graph_hash, created: false },
      });
      return { outcome: 'unchanged', template: saved.template, version: saved.version, timeout_policy_not_applied: saved.timeout_policy_not_applied };
    }
    const open = await openProposalOf(client, def.template_key);
    if (open) {
      if (open.graph_hash === hash) return { outcome: 'already_proposed', proposal: open };
      throw new FerryError('PROPOSAL_ALREADY_OPEN', `template ${def.template_key} already has an open proposal (${open.id}); decide or withdraw it first`, {
        template_key: def.template_key,
        proposal_id: open.id,
        state: open.proposal_state,
      });
    }
    const row = (await insertWithBirth(client, deps, def, actor, false))!;
    await writeAudit(client, {
      actor,
      action: 'template_proposal.propose',
      entity_type: 'template_proposal',
      entity_id: row.id,
      details: { template_key: row.template_key, graph_hash: hash, base_version: row.base_version, review_expires_at: contextFromRow(row).reviewExpiresAt },
    });
    return { outcome: 'proposed', proposal: row };
  });
}

/**
 * A template Ferry installs itself (the demo, the sandbox's): a system proposal that goes through
 * the machine and is finalized at once (INSTALL), with an audit event that says so. A graph that is
 * already a version installs nothing ('present').
 */
export async function installSystemTemplate(
  deps: ProposalDeps,
  def: TemplateDefinition,
  actor: string,
): Promise<{ outcome: 'installed' | 'present'; version: number; proposal_id: string | null }> {
  validateTemplateStructure(def);
  const hash = graphHash(def);
  return withTransaction(deps.pool, async (client) => {
    await lockTemplateKey(client, def.template_key);
    const existing = await versionWithGraphHash(client, def.template_key, hash);
    if (existing !== null) return { outcome: 'present', version: existing, proposal_id: null };
    const row = await insertWithBirth(client, deps, def, actor, true);
    if (!row) {
      const open = await openProposalOf(client, def.template_key);
      throw new FerryError('PROPOSAL_ALREADY_OPEN', `template ${def.template_key} has an open proposal; Ferry does not install over it`, {
        template_key: def.template_key,
        proposal_id: open?.id ?? null,
      });
    }
    const delivered = await deliver(client, row, { type: 'INSTALL', at: clock(deps).toISOString() }, actor);
    const { saved } = await writeVersion(client, delivered);
    await writeAudit(client, {
      actor,
      action: 'template_proposal.system_install',
      entity_type: 'template_proposal',
      entity_id: row.id,
      details: {
        template_key: def.template_key,
        version: saved.version.version,
        graph_hash: hash,
        system: true,
        note: 'installed by Ferry itself; finalized at once without review',
      },
    });
    return { outcome: 'installed', version: saved.version.version, proposal_id: row.id };
  });
}

// ---------------------------------------------------------------------------------------------
// Deciding.

/**
 * A principal's decision on a proposal, in one transaction: the row locked, the machine given the
 * event (made with the decision's time), and the audit event: the template key and what `details`
 * takes from the outcome.
 */
function decide(
  deps: ProposalDeps,
  id: string,
  actor: string,
  event: (at: string) => ProposalEvent,
  action: string,
  details: (d: Delivered) => Record<string, unknown>,
): Promise<ProposalRow> {
  return withTransaction(deps.pool, async (client) => {
    const row = await locked(client, id);
    const d = await deliver(client, row, event(clock(deps).toISOString()), actor);
    await writeAudit(client, { actor, action, entity_type: 'template_proposal', entity_id: id, details: { template_key: row.template_key, ...details(d) } });
    return d.row;
  });
}

export function approveProposal(deps: ProposalDeps, id: string, actor: string): Promise<ProposalRow> {
  return decide(deps, id, actor, (at) => ({ type: 'APPROVE', by: actor, at }), 'template_proposal.approve', (d) => ({
    challenge_ends_at: d.row.challenge_ends_at ? new Date(d.row.challenge_ends_at).toISOString() : null,
  }));
}

export function challengeProposal(deps: ProposalDeps, id: string, actor: string, reason: string): Promise<ProposalRow> {
  return decide(deps, id, actor, (at) => ({ type: 'CHALLENGE', by: actor, at, reason }), 'template_proposal.challenge', () => ({ reason }));
}

export function withdrawProposal(deps: ProposalDeps, id: string, actor: string): Promise<ProposalRow> {
  return decide(deps, id, actor, (at) => ({ type: 'WITHDRAW', by: actor, at }), 'template_proposal.withdraw', (d) => ({ from: d.from }));
}

/**
 * Finalizes one approved proposal whose challenge window has passed: the definition becomes the
 * template's next version. What the finalization sweep does per row; throws like the routes do
 * (PROPOSAL_STATE_CONFLICT when a challenge won the lock first).
 */
export async function finalizeProposal(deps: ProposalDeps, id: string): Promise<{ row: ProposalRow; version: number }> {
  return withTransaction(deps.pool, async (client) => {
    const row = await locked(client, id);
    const d = await deliver(client, row, { type: 'FINALIZE', at: clock(deps).toISOString() }, FINALIZER);
    const { row: done, saved } = await writeVersion(client, d);
    await writeAudit(client, {
      actor: FINALIZER,
      action: 'template_proposal.finalize',
      entity_type: 'template_proposal',
      entity_id: id,
      details: { template_key: row.template_key, version: saved.version.version, created: saved.created, approved_by: row.approved_by },
    });
    return { row: done, version: saved.version.version };
  });
}

export async function expireProposal(deps: ProposalDeps, id: string): Promise<ProposalRow> {
  return withTransaction(deps.pool, async (client) => {
    const row = await locked(client, id);
    const d = await deliver(client, row, { type: 'EXPIRE', at: clock(deps).toISOString() }, EXPIRER);
    await writeAudit(client, {
      actor: EXPIRER,
      action: 'template_proposal.expire',
      entity_type: 'template_proposal',
      entity_id: id,
      details: { template_key: row.template_key, review_expires_at: new Date(row.review_expires_at).toISOString() },
    });
    return d.row;
  });
}

// ---------------------------------------------------------------------------------------------
// The two sweeps.

export interface ProposalSweepBudget {
  batchSize: number;
  /** Milliseconds; 0 = unlimited. */
  maxRunMs: number;
}

export interface ProposalSweepReport {
  done: number;
  /** Rows another writer decided first (found in another state, or no longer due, inside the lock). */
  skipped: number;
  budgetExhausted: boolean;
}

/** A FerryError that means "someone else decided this row first": the sweep skips it. */
const isLostRace = (err: unknown) =>
  err instanceof FerryError && ['PROPOSAL_STATE_CONFLICT', 'CHALLENGE_WINDOW_OPEN', 'INVALID_TRANSITION', 'NOT_FOUND', 'TRANSITION_CONFLICT'].includes(err.code);

async function sweep(
  deps: ProposalDeps,
  budget: ProposalSweepBudget,
  sweepName: 'template_proposal_expiration' | 'template_finalization',
  candidates: (now: Date, limit: number) => Promise<string[]>,
  one: (id: string) => Promise<unknown>,
): Promise<ProposalSweepReport> {
  const runTime = runBudget(budget.maxRunMs, () => clock(deps).getTime());
  const report: ProposalSweepReport = { done: 0, skipped: 0, budgetExhausted: false };
  const ids = await candidates(clock(deps), budget.batchSize);
  for (const id of ids) {
    if (runTime.spent()) {
      report.budgetExhausted = true;
      break;
    }
    try {
      await one(id);
      report.done++;
    } catch (err) {
      if (!isLostRace(err)) throw err;
      report.skipped++;
    }
  }
  // A full batch means there may be more due rows: the next run continues.
  if (!report.budgetExhausted && ids.length >= budget.batchSize) report.budgetExhausted = true;
  templateProposalSweepTotal.inc({ sweep: sweepName, result: sweepName === 'template_finalization' ? 'finalized' : 'expired' }, report.done);
  templateProposalSweepTotal.inc({ sweep: sweepName, result: 'skipped' }, report.skipped);
  return report;
}

/** The template_proposal_expiration sweep: PROPOSED proposals past their review window become EXPIRED. */
export function expireDueProposals(deps: ProposalDeps, budget: ProposalSweepBudget): Promise<ProposalSweepReport> {
  return sweep(deps, budget, 'template_proposal_expiration', (now, limit) => reviewExpiredCandidates(deps.pool, now, limit), (id) =>
    expireProposal(deps, id),
  );
}

/** The template_finalization sweep: APPROVED proposals past their challenge window become FINALIZED. */
export function finalizeDueProposals(deps: ProposalDeps, budget: ProposalSweepBudget): Promise<ProposalSweepReport> {
  return sweep(deps, budget, 'template_finalization', (now, limit) => finalizationCandidates(deps.pool, now, limit), (id) =>
    finalizeProposal(deps, id),
  );
}

// ---------------------------------------------------------------------------------------------
// Reading.

export interface ProposalDetail {
  proposal: ProposalRow;
  live: TemplateVersionRecord | null;
  history: ProposalTransitionRow[];
  replay: ReplayResult;
}

/** A proposal with the template's live version (the diff's other side), its history and its replay. */
export async function proposalDetail(pool: Pool, id: string): Promise<ProposalDetail> {
  const proposal = await getProposal(pool, id);
  if (!proposal) throw new NotFoundError('template proposal', id);
  const [live, history] = await Promise.all([getTemplateVersion(pool, proposal.template_key), proposalTransitions(pool, id)]);
  return { proposal, live, history, replay: replayProposal(history) };
}

/** Replays a proposal's transition log through the machine, from the input its creation logged. */
export function replayProposal(log: ProposalTransitionRow[]): ReplayResult {
  const birth = (log[0]?.event_payload ?? {}) as { proposed_by?: string; system?: boolean; review_expires_at?: string; challenge_seconds?: number };
  const input = initialProposalContext({
    proposedBy: birth.proposed_by ?? '',
    system: birth.system ?? false,
    reviewExpiresAt: birth.review_expires_at ?? '',
    challengeSeconds: birth.challenge_seconds ?? 0,
  });
  return replayLog(proposalMachine, input, log);
}
