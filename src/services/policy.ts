import type { FerryConfig } from '../config.ts';
import { FerryError, NotFoundError, ValidationError } from '../errors.ts';
import {
  POLICY_EXPIRER,
  POLICY_FINALIZER,
  POLICY_PROPOSAL_MACHINE_ID,
  POLICY_PROPOSAL_MACHINE_VERSION,
  initialPolicyProposalContext,
  policyProposalMachine,
  policyRefusalOf,
  type PolicyProposalContext,
  type PolicyProposalEvent,
  type PolicyProposalState,
} from '../machines/policy-proposal-machine.ts';
import { replayLog, type ReplayResult } from '../machines/replay.ts';
import { writeAudit } from '../persistence/audit.ts';
import { withTransaction, type Client, type Pool, type Queryable } from '../persistence/db.ts';
import { appendEntityTransition } from '../persistence/entity-transitions.ts';
import { namesOfActors } from '../persistence/principals.ts';
import {
  dispatchedMovements,
  dispatchedSum,
  duePolicyExpirations,
  duePolicyFinalizations,
  entryForDestination,
  entryWithAddress,
  getAddressBookEntry,
  getPolicyProposal,
  insertPolicyProposal,
  insertRuleSet,
  listPolicyProposals,
  liveRuleSet,
  lockPolicyProposal,
  lockVelocitySum,
  openPolicyProposalOf,
  openProposalWithAddress,
  policyProposalTransitions,
  putAddressBookEntry,
  recordDispatch,
  recordPolicyResult,
  removeAddressBookEntry,
  updatePolicyProposal,
  velocitySum,
  type MovementPolicyRecord,
  type PolicyChange,
  type PolicyProposalRow,
  type PolicySubjectKind,
  type PolicyTransitionRow,
  type RuleSetRow,
} from '../persistence/policy.ts';
import {
  addDecimals,
  addressBookEntrySchema,
  addressKey,
  allows,
  applicableLimits,
  cmp,
  decide,
  destinationKey,
  expandGroups,
  intentFacts,
  pricesNeeded,
  priceKey,
  quorumOf,
  ruleSetProblems,
  ruleSetSchema,
  type AddressBookEntry,
  type ApplicableLimit,
  type FactsWithPrices,
  type MovementFacts,
  type PolicyDecision,
  type PolicyNode,
  type PriceReading,
  type RuleSet,
} from '../policy/rules.ts';
import type { PriceSource } from '../prices/price-source.ts';
import { deliverToRow, type RowMachine } from './row-machine.ts';

/**
 * The treasury policy (docs/policy.md): the one owner of writes to the address book, the rule set
 * and their proposals, and the checks a movement passes at creation and at approval.
 *
 * Changes are reviewed like template proposals: one principal proposes, another approves, and the
 * change goes live only after the cool-down (FERRY_POLICY_COOLDOWN_SECONDS), in which anyone who may
 * approve policy can challenge it. Each change of a proposal locks its one row, re-checks the event
 * against the policy proposal machine inside the lock, and writes the row, one `transitions` row and
 * the audit event in one transaction; finalization writes the book entry or the rule set version in
 * that same transaction.
 *
 * Proposals whose cool-down has passed are finalized by settleDuePolicyProposals, which the
 * movement service runs before it reads the policy (so a change is live once due, whoever asks
 * first) and which a sweep can run on a schedule.
 */

export interface PolicyDeps {
  pool: Pool;
  config: Pick<FerryConfig, 'policyReviewWindowSeconds' | 'policyCooldownSeconds'>;
  /** The clock; tests inject one to stand at a window's edge. */
  now?: () => Date;
}

const clock = (deps: { now?: () => Date }) => (deps.now ?? (() => new Date()))();
const iso = (d: Date | null) => (d ? new Date(d).toISOString() : null);

// ---------------------------------------------------------------------------------------------
// The machine over its row

export function policyContextFromRow(row: PolicyProposalRow): PolicyProposalContext {
  return {
    proposedBy: row.proposed_by,
    reviewExpiresAt: iso(row.review_expires_at)!,
    challengeSeconds: row.challenge_seconds,
    approvedBy: row.approved_by,
    approvedAt: iso(row.approved_at),
    challengeEndsAt: iso(row.challenge_ends_at),
    decidedBy: row.decided_by,
    reason: row.reason,
  };
}

function refusedError(row: PolicyProposalRow, event: PolicyProposalEvent, why: NonNullable<ReturnType<typeof policyRefusalOf>>): FerryError {
  const details = { proposal_id: row.id, subject_kind: row.subject_kind, subject: row.subject, state: row.proposal_state, event: event.type };
  switch (why) {
    case 'state':
      return new FerryError('PROPOSAL_STATE_CONFLICT', `policy proposal ${row.id} is ${row.proposal_state}; it no longer takes ${event.type}`, details);
    case 'approverIsNotProposer':
      return new FerryError('FOUR_EYES_VIOLATION', `whoever proposed policy proposal ${row.id} cannot approve it; a second person must`, details);
    case 'reviewWindowOpen':
      return new FerryError('REVIEW_WINDOW_CLOSED', `the review window of policy proposal ${row.id} closed; propose it again`, {
        ...details,
        review_expires_at: iso(row.review_expires_at),
      });
    case 'challengeWindowOpen':
      return new FerryError('CHALLENGE_WINDOW_CLOSED', `the cool-down of policy proposal ${row.id} is over; it is live or about to be`, {
        ...details,
        challenge_ends_at: iso(row.challenge_ends_at),
      });
    case 'challengeWindowElapsed':
      return new FerryError('CHALLENGE_WINDOW_OPEN', `the cool-down of policy proposal ${row.id} is still running`, {
        ...details,
        challenge_ends_at: iso(row.challenge_ends_at),
      });
    case 'givesAReason':
      return new ValidationError(`a ${event.type === 'REJECT' ? 'rejection' : 'challenge'} needs a reason`, { ...details, field: 'reason' });
    case 'withdrawnByProposer':
      return new FerryError('NOT_PROPOSER', `only whoever proposed policy proposal ${row.id} may withdraw it`, details);
    case 'reviewWindowElapsed':
      return new FerryError('INVALID_TRANSITION', `policy proposal ${row.id} does not take ${event.type} yet (${why})`, {
        machine: POLICY_PROPOSAL_MACHINE_ID,
        entity_id: row.id,
        state: row.proposal_state,
        event: event.type,
      });
  }
}

const policyRows: RowMachine<PolicyProposalRow, PolicyProposalState, PolicyProposalContext, PolicyProposalEvent> = {
  machine: policyProposalMachine,
  machineId: POLICY_PROPOSAL_MACHINE_ID,
  machineVersion: POLICY_PROPOSAL_MACHINE_VERSION,
  entityType: 'policy_proposal',
  context: policyContextFromRow,
  refusal: policyRefusalOf,
  refused: refusedError,
  write: (client, row, to, c) =>
    updatePolicyProposal(client, row.id, row.row_version, {
      proposal_state: to,
      approved_by: c.approvedBy,
      approved_at: c.approvedAt,
      challenge_ends_at: c.challengeEndsAt,
      decided_by: c.decidedBy,
      reason: c.reason,
    }),
};

async function locked(client: Client, id: string): Promise<PolicyProposalRow> {
  const row = await lockPolicyProposal(client, id);
  if (!row) throw new NotFoundError('policy proposal', id);
  return row;
}

/** What an audit event of a proposal says about it. */
function proposalDetails(row: PolicyProposalRow): Record<string, unknown> {
  return { subject_kind: row.subject_kind, subject: row.subject, change: row.change };
}

// ---------------------------------------------------------------------------------------------
// Proposing

async function propose(client: Client, deps: PolicyDeps, kind: PolicySubjectKind, subject: string, change: PolicyChange, actor: string) {
  const now = clock(deps);
  const context = initialPolicyProposalContext({
    proposedBy: actor,
    reviewExpiresAt: new Date(now.getTime() + deps.config.policyReviewWindowSeconds * 1000).toISOString(),
    challengeSeconds: deps.config.policyCooldownSeconds,
  });
  const row = await insertPolicyProposal(client, {
    subject_kind: kind,
    subject,
    change,
    machine_id: POLICY_PROPOSAL_MACHINE_ID,
    machine_version: POLICY_PROPOSAL_MACHINE_VERSION,
    proposal_state: 'PROPOSED',
    proposed_by: actor,
    review_expires_at: context.reviewExpiresAt,
    challenge_seconds: context.challengeSeconds,
  });
  if (!row) {
    const open = await openPolicyProposalOf(client, kind, subject);
    throw new FerryError(
      'PROPOSAL_ALREADY_OPEN',
      `${kind === 'rule_set' ? 'the rule set' : `book entry ${subject}`} already has an open proposal (${open?.id}); decide or withdraw it first`,
      { subject_kind: kind, subject, proposal_id: open?.id ?? null, state: open?.proposal_state ?? null },
    );
  }
  await appendEntityTransition(client, 'policy_proposal', {
    machine_id: POLICY_PROPOSAL_MACHINE_ID,
    machine_version: POLICY_PROPOSAL_MACHINE_VERSION,
    entity_id: row.id,
    seq: 0,
    from_state: '',
    to_state: 'PROPOSED',
    event_type: 'xstate.init',
    event_payload: { proposed_by: actor, review_expires_at: context.reviewExpiresAt, challenge_seconds: context.challengeSeconds },
    actor,
    at: now.toISOString(),
  });
  await writeAudit(client, {
    actor,
    action: 'policy_proposal.propose',
    entity_type: 'policy_proposal',
    entity_id: row.id,
    details: { ...proposalDetails(row), review_expires_at: context.reviewExpiresAt, cooldown_seconds: context.challengeSeconds },
  });
  return row;
}

function parseEntry(input: unknown): AddressBookEntry {
  const parsed = addressBookEntrySchema.safeParse(input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new ValidationError(`address book entry: ${issue.path.join('.') || 'entry'}: ${issue.message}`, { field: issue.path.join('.') });
  }
  return parsed.data;
}

/** A new or changed book entry, proposed: live once approved by another principal and its cool-down passes. */
export async function proposeBookEntry(deps: PolicyDeps, input: unknown, actor: string): Promise<PolicyProposalRow> {
  const entry = parseEntry(input);
  const key = addressKey(entry.address);
  return withTransaction(deps.pool, async (client) => {
    const taken = (await entryWithAddress(client, key, entry.tag, entry.name)) ?? (await openProposalWithAddress(client, key, entry.tag, entry.name));
    if (taken) {
      throw new FerryError('POLICY_INVALID', `the address book already has (or is about to have) this destination under another name (${taken})`, {
        problems: ['destination_taken'],
        conflict: taken,
      });
    }
    return propose(client, deps, 'address_book', entry.name, { op: 'put', entry: { ...entry, address_key: key } }, actor);
  });
}

/** Removing a book entry, proposed like any change of the book. */
export async function proposeBookRemoval(deps: PolicyDeps, name: string, actor: string): Promise<PolicyProposalRow> {
  return withTransaction(deps.pool, async (client) => {
    if (!(await getAddressBookEntry(client, name))) throw new NotFoundError('address book entry', name);
    return propose(client, deps, 'address_book', name, { op: 'remove', name }, actor);
  });
}

/** Parses and checks a rule set (POLICY_INVALID names every problem). */
export function parseRuleSet(input: unknown): RuleSet {
  const parsed = ruleSetSchema.safeParse(input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new ValidationError(`rule set: ${issue.path.join('.') || 'rule set'}: ${issue.message}`, { field: issue.path.join('.') });
  }
  const problems = ruleSetProblems(parsed.data);
  const expanded = problems.length === 0 ? expandGroups(parsed.data) : parsed.data;
  // Checked again with the groups read in: a tier must have enough people to reach its count.
  if (problems.length === 0) problems.push(...ruleSetProblems(expanded));
  if (problems.length > 0) throw new FerryError('POLICY_INVALID', `rule set refused: ${problems[0]}`, { problems });
  return expanded;
}

/** A new rule set version, proposed: it replaces the live one once approved and past its cool-down. */
export async function proposeRuleSet(deps: PolicyDeps, input: unknown, actor: string): Promise<PolicyProposalRow> {
  const set = parseRuleSet(input);
  return withTransaction(deps.pool, async (client) => {
    const live = await liveRuleSet(client);
    return propose(client, deps, 'rule_set', 'rules', { op: 'replace', base_version: live?.version ?? 0, rules: set.rules, limits: set.limits }, actor);
  });
}

// ---------------------------------------------------------------------------------------------
// Deciding

async function decideProposal(
  deps: PolicyDeps,
  id: string,
  actor: string,
  event: (at: string) => PolicyProposalEvent,
  action: string,
  details: (row: PolicyProposalRow) => Record<string, unknown> = () => ({}),
): Promise<PolicyProposalRow> {
  return withTransaction(deps.pool, async (client) => {
    const row = await locked(client, id);
    const d = await deliverToRow(policyRows, client, row, event(clock(deps).toISOString()), actor);
    await writeAudit(client, { actor, action, entity_type: 'policy_proposal', entity_id: id, details: { ...proposalDetails(row), from: d.from, ...details(d.row) } });
    return d.row;
  });
}

export function approvePolicyProposal(deps: PolicyDeps, id: string, actor: string): Promise<PolicyProposalRow> {
  return decideProposal(deps, id, actor, (at) => ({ type: 'APPROVE', by: actor, at }), 'policy_proposal.approve', (r) => ({
    challenge_ends_at: iso(r.challenge_ends_at),
  }));
}

export function challengePolicyProposal(deps: PolicyDeps, id: string, actor: string, reason: string): Promise<PolicyProposalRow> {
  return decideProposal(deps, id, actor, (at) => ({ type: 'CHALLENGE', by: actor, at, reason }), 'policy_proposal.challenge', () => ({ reason }));
}

export function rejectPolicyProposal(deps: PolicyDeps, id: string, actor: string, reason: string): Promise<PolicyProposalRow> {
  return decideProposal(deps, id, actor, (at) => ({ type: 'REJECT', by: actor, at, reason }), 'policy_proposal.reject', () => ({ reason }));
}

export function withdrawPolicyProposal(deps: PolicyDeps, id: string, actor: string): Promise<PolicyProposalRow> {
  return decideProposal(deps, id, actor, (at) => ({ type: 'WITHDRAW', by: actor, at }), 'policy_proposal.withdraw');
}

export function expirePolicyProposal(deps: Pick<PolicyDeps, 'pool' | 'now'>, id: string): Promise<PolicyProposalRow> {
  return withTransaction(deps.pool, async (client) => {
    const row = await locked(client, id);
    const d = await deliverToRow(policyRows, client, row, { type: 'EXPIRE', at: clock(deps).toISOString() }, POLICY_EXPIRER);
    await writeAudit(client, {
      actor: POLICY_EXPIRER,
      action: 'policy_proposal.expire',
      entity_type: 'policy_proposal',
      entity_id: id,
      details: { ...proposalDetails(row), review_expires_at: iso(row.review_expires_at) },
    });
    return d.row;
  });
}

/** Writes what a finalized proposal changes: the book entry, or the next rule set version. */
async function applyChange(client: Client, row: PolicyProposalRow): Promise<{ version: number; details: Record<string, unknown> }> {
  const change = row.change;
  switch (change.op) {
    case 'put': {
      const e = change.entry as AddressBookEntry & { address_key: string };
      const taken = await entryWithAddress(client, e.address_key, e.tag, e.name);
      if (taken) {
        throw new FerryError('POLICY_INVALID', `book entry ${taken} took this destination first; withdraw proposal ${row.id} and propose again`, {
          problems: ['destination_taken'],
          conflict: taken,
        });
      }
      const written = await putAddressBookEntry(client, e, row.id);
      return { version: written.version, details: { entry: written.name, entry_version: written.version } };
    }
    case 'remove': {
      const existed = await removeAddressBookEntry(client, change.name);
      return { version: 0, details: { entry: change.name, removed: existed } };
    }
    case 'replace': {
      const live = await liveRuleSet(client);
      // One open rule set proposal at a time, so the base is the live version; a version written
      // some other way since is not silently overwritten.
      if ((live?.version ?? 0) !== change.base_version) {
        throw new FerryError('PROPOSAL_STATE_CONFLICT', `rule set version ${live?.version} was written after proposal ${row.id} was made on ${change.base_version}`, {
          proposal_id: row.id,
          base_version: change.base_version,
          live_version: live?.version ?? 0,
        });
      }
      const version = change.base_version + 1;
      await insertRuleSet(client, { version, rules: change.rules, limits: change.limits, proposal_id: row.id, proposed_by: row.proposed_by, approved_by: row.approved_by! });
      return { version, details: { rule_set_version: version } };
    }
  }
}

/** Finalizes one approved proposal whose cool-down has passed: the change goes live in the same transaction. */
export function finalizePolicyProposal(deps: Pick<PolicyDeps, 'pool' | 'now'>, id: string): Promise<PolicyProposalRow> {
  return withTransaction(deps.pool, async (client) => {
    const row = await locked(client, id);
    const d = await deliverToRow(policyRows, client, row, { type: 'FINALIZE', at: clock(deps).toISOString() }, POLICY_FINALIZER);
    if (!d.actions.includes('applyChange')) throw new Error('the policy proposal machine finalized without applyChange');
    const applied = await applyChange(client, d.row);
    const done = await recordPolicyResult(client, id, applied.version);
    await writeAudit(client, {
      actor: POLICY_FINALIZER,
      action: 'policy_proposal.finalize',
      entity_type: 'policy_proposal',
      entity_id: id,
      details: { ...proposalDetails(row), proposed_by: row.proposed_by, approved_by: row.approved_by, ...applied.details },
    });
    return done;
  });
}

const isLostRace = (err: unknown) =>
  err instanceof FerryError &&
  // POLICY_INVALID: a change that can no longer be applied (its destination was taken); it stays
  // APPROVED until withdrawn, and must not stop every movement from being checked.
  ['PROPOSAL_STATE_CONFLICT', 'CHALLENGE_WINDOW_OPEN', 'INVALID_TRANSITION', 'NOT_FOUND', 'TRANSITION_CONFLICT', 'POLICY_INVALID'].includes(err.code);

export interface PolicySettleReport {
  finalized: number;
  expired: number;
  skipped: number;
}

/**
 * Finalizes every approved proposal whose cool-down has passed and expires every proposal past its
 * review window (at most `limit` of each). A row another writer decided first is skipped.
 */
export async function settleDuePolicyProposals(deps: Pick<PolicyDeps, 'pool' | 'now'>, limit = 50): Promise<PolicySettleReport> {
  const now = clock(deps);
  const report: PolicySettleReport = { finalized: 0, expired: 0, skipped: 0 };
  const run = async (ids: string[], one: (id: string) => Promise<unknown>, field: 'finalized' | 'expired') => {
    for (const id of ids) {
      try {
        await one(id);
        report[field]++;
      } catch (err) {
        if (!isLostRace(err)) throw err;
        report.skipped++;
      }
    }
  };
  await run(await duePolicyFinalizations(deps.pool, now, limit), (id) => finalizePolicyProposal(deps, id), 'finalized');
  await run(await duePolicyExpirations(deps.pool, now, limit), (id) => expirePolicyProposal(deps, id), 'expired');
  return report;
}

// ---------------------------------------------------------------------------------------------
// Reading proposals

export function listPolicyProposalRows(pool: Pool, filter: { state?: string; kind?: PolicySubjectKind; limit: number }): Promise<PolicyProposalRow[]> {
  return listPolicyProposals(pool, filter);
}

export async function policyProposalDetail(pool: Pool, id: string): Promise<{ proposal: PolicyProposalRow; history: PolicyTransitionRow[]; replay: ReplayResult }> {
  const proposal = await getPolicyProposal(pool, id);
  if (!proposal) throw new NotFoundError('policy proposal', id);
  const history = await policyProposalTransitions(pool, id);
  return { proposal, history, replay: replayPolicyProposal(history) };
}

/** Replays a proposal's transition log through the machine, from the input its creation logged. */
export function replayPolicyProposal(log: PolicyTransitionRow[]): ReplayResult {
  const birth = (log[0]?.event_payload ?? {}) as { proposed_by?: string; review_expires_at?: string; challenge_seconds?: number };
  const input = initialPolicyProposalContext({
    proposedBy: birth.proposed_by ?? '',
    reviewExpiresAt: birth.review_expires_at ?? '',
    challengeSeconds: birth.challenge_seconds ?? 0,
  });
  return replayLog(policyProposalMachine, input, log);
}

// ---------------------------------------------------------------------------------------------
// A movement under the policy

export interface MovementSubject {
  templateKey: string;
  intent: Readonly<Record<string, unknown>>;
  nodes: ReadonlyArray<PolicyNode>;
  /** The creator's actor id. */
  createdBy: string;
}

/** The movement's facts as the rules read them: the intent's, the plan's lanes, the book entry, the requester's name. */
export async function movementFacts(db: Queryable, s: MovementSubject): Promise<MovementFacts> {
  const facts = intentFacts(s.intent, s.nodes);
  const entry = facts.destination ? await entryForDestination(db, addressKey(facts.destination.address), facts.destination.tag) : null;
  const name = (await namesOfActors(db, [s.createdBy])).get(s.createdBy) ?? null;
  return { templateKey: s.templateKey, ...facts, entry, requester: { actor: s.createdBy, name } };
}

function refusal(decision: PolicyDecision, facts: MovementFacts, when: 'creation' | 'approval' | 'dispatch'): FerryError {
  const details = {
    rule_set_version: decision.ruleSetVersion,
    rule_id: decision.ruleId,
    checked_at: when,
    destination_entry: facts.entry?.name ?? null,
  };
  if (decision.action === 'price_unavailable') {
    const p = decision.price!;
    return new FerryError(
      'POLICY_PRICE_UNAVAILABLE',
      `policy rule ${decision.ruleId} (rule set version ${decision.ruleSetVersion}) compares an amount in ${p.currency}, and the price of ${p.asset} in ${p.currency} cannot be used: ${p.message}; the movement is refused until it can`,
      { ...details, asset: p.asset, currency: p.currency, price_code: p.code, feed: p.feed },
    );
  }
  if (decision.action === 'block') {
    return new FerryError('POLICY_BLOCKED', `policy rule ${decision.ruleId} (rule set version ${decision.ruleSetVersion}) blocks this movement: ${decision.reason}`, {
      ...details,
      reason: decision.reason,
    });
  }
  return new FerryError(
    'POLICY_NO_MATCHING_RULE',
    `no rule of rule set version ${decision.ruleSetVersion} allows this movement (template ${facts.templateKey}, asset ${facts.asset ?? '-'}, ` +
      `destination ${facts.entry ? `book entry ${facts.entry.name}` : 'not in the address book'})`,
    details,
  );
}

export interface VelocityCheck {
  limit_id: string;
  asset: string;
  destination: string | null;
  /** The source (per_source) or requester (per_requester) whose sum it is, else null. */
  source: string | null;
  requester: string | null;
  window_seconds: number;
  max_amount: string;
  /** The window's sum before this movement. */
  used: string;
  /** With this movement. */
  total: string;
}

/**
 * Checks the velocity limits that bound the movement, each under its lock (held until the
 * caller's transaction ends): the sum of the window's counted movements plus this one must not
 * pass the limit's maximum. The window ends at `at`.
 */
export async function checkVelocity(
  client: Client,
  limits: ApplicableLimit[],
  facts: MovementFacts,
  at: Date,
  movementId: string | null,
  ruleSetVersion: number | null,
): Promise<VelocityCheck[]> {
  const checks: VelocityCheck[] = [];
  for (const a of limits) {
    const base = limitBase(a);
    if (facts.amount === null) {
      throw new FerryError('VELOCITY_LIMIT_EXCEEDED', `velocity limit ${a.limit.id} bounds ${a.limit.asset}, but this movement's intent names no amount to count`, {
        ...base,
        rule_set_version: ruleSetVersion,
        reason: 'AMOUNT_UNKNOWN',
      });
    }
    await lockVelocitySum(client, a.key);
    const used = await velocitySum(client, {
      asset: facts.asset!,
      destination: a.destination,
      since: new Date(at.getTime() - a.limit.window_seconds * 1000),
      except: movementId,
      filter: a.limit.destination ?? null,
      source: a.source,
      requester: a.requester,
    });
    const total = addDecimals(used, facts.amount);
    if (cmp(total, a.limit.max_amount) > 0) {
      throw new FerryError(
        'VELOCITY_LIMIT_EXCEEDED',
        `velocity limit ${a.limit.id}: ${used} ${a.limit.asset} moved in the last ${a.limit.window_seconds} s${sumOf(a)}; ` +
          `${facts.amount} more would make ${total}, above its maximum ${a.limit.max_amount}`,
        { ...base, rule_set_version: ruleSetVersion, used, amount: facts.amount, total },
      );
    }
    checks.push({ ...base, used, total });
  }
  return checks;
}

/** What a velocity refusal or check says about the limit and the sum it bounds. */
function limitBase(a: ApplicableLimit) {
  return {
    limit_id: a.limit.id,
    asset: a.limit.asset,
    destination: a.destination,
    source: a.source,
    requester: a.requester,
    window_seconds: a.limit.window_seconds,
    max_amount: a.limit.max_amount,
  };
}

/** Whose sum a limit bounds, in words (" to 0xabc from hot by principal:..."). */
function sumOf(a: ApplicableLimit): string {
  return `${a.destination ? ` to ${a.destination}` : ''}${a.source ? ` from ${a.source}` : ''}${a.requester ? ` requested by ${a.requester}` : ''}`;
}

/**
 * Reads the prices the rule set's reference-currency amounts need for this movement, by priceKey.
 * A price source that throws gives an unreadable price (the rule then refuses), never an allowed
 * movement; no price source gives the same for every needed price.
 */
export async function readPrices(
  prices: PriceSource | null | undefined,
  set: { rules: RuleSet['rules'] } | null,
  facts: Pick<MovementFacts, 'asset' | 'amount'>,
  at: Date,
): Promise<Record<string, PriceReading>> {
  const out: Record<string, PriceReading> = {};
  for (const { asset, currency } of pricesNeeded(set, facts)) {
    let reading: PriceReading;
    if (!prices) {
      reading = { ok: false, asset, currency, code: 'PRICE_FEED_NOT_CONFIGURED', message: 'no price source is configured (price_feeds in FERRY_CONFIG_FILE)', feed: null };
    } else {
      try {
        reading = await prices.read(asset, currency, at);
      } catch (err) {
        reading = { ok: false, asset, currency, code: 'PRICE_UNREADABLE', message: `the price source failed: ${(err as Error).message}`, feed: null };
      }
    }
    out[priceKey(asset, currency)] = reading;
  }
  return out;
}

/**
 * The prices a decision on this intent will need under the live rule set, read now, before the
 * caller opens its transaction, as a price source that answers from them: the checks at creation and
 * approval then make no RPC call while they hold the movement's row and the velocity locks. A price
 * the rule set asks for inside the transaction that was not read here (the rule set changed in
 * between) is unreadable, and the rule refuses (fail closed); trying again reads it.
 */
export async function pricesReadAhead(
  db: Queryable,
  prices: PriceSource | null | undefined,
  intent: Readonly<Record<string, unknown>>,
  at: Date,
): Promise<PriceSource | null> {
  if (!prices) return null;
  const readings = await readPrices(prices, await liveRuleSet(db), intentFacts(intent, []), at);
  return {
    read: async (asset, currency) =>
      readings[priceKey(asset, currency)] ?? {
        ok: false,
        asset,
        currency,
        code: 'PRICE_UNREADABLE',
        message: `the rule set changed while ${priceKey(asset, currency)} was read; try again`,
        feed: null,
      },
  };
}

/** The prices a decision used, as a movement's audit event records them. */
function pricesUsed(prices: Record<string, PriceReading>): Record<string, unknown>[] {
  return Object.values(prices).map((p) =>
    p.ok ? { asset: p.asset, currency: p.currency, answer: p.answer, decimals: p.decimals, round_id: p.round_id, updated_at: p.updated_at, feed: p.feed } : { asset: p.asset, currency: p.currency, code: p.code, feed: p.feed },
  );
}

export interface NewMovementPolicy {
  quorum: number;
  record: MovementPolicyRecord;
  velocity: VelocityCheck[];
  /** The prices its reference-currency rules read (empty when none). */
  prices: Record<string, unknown>[];
}

/**
 * What the policy says about a movement being created, inside its creating transaction: refused
 * (POLICY_BLOCKED, POLICY_NO_MATCHING_RULE, VELOCITY_LIMIT_EXCEEDED) or the quorum it needs and
 * what it records (the rule set version and the rule).
 */
export async function policyForNewMovement(
  client: Client,
  s: MovementSubject,
  globalQuorum: number,
  at: Date,
  prices?: PriceSource | null,
): Promise<NewMovementPolicy> {
  const live = await liveRuleSet(client);
  const facts: FactsWithPrices = await movementFacts(client, s);
  facts.prices = await readPrices(prices, live, facts, at);
  const decision = decide(live, facts);
  if (!allows(decision)) throw refusal(decision, facts, 'creation');
  const velocity = live ? await checkVelocity(client, applicableLimits(live.limits, facts), facts, at, null, live.version) : [];
  return {
    quorum: quorumOf(decision, globalQuorum),
    velocity,
    prices: pricesUsed(facts.prices),
    record: {
      rule_set_version: decision.ruleSetVersion,
      rule_id: decision.ruleId,
      action: decision.action,
      asset: facts.asset,
      amount: facts.amount,
      destination: destinationKey(facts.destination),
      destination_entry: facts.entry?.name ?? null,
      sources: facts.sources,
      approvers: decision.from ? { principals: decision.from } : null,
    },
  };
}

/** A movement row's policy columns, as the approval check reads them. */
export interface MovementPolicyColumns {
  id: string;
  template_key: string;
  intent: Record<string, unknown>;
  compiled_plan: Record<string, unknown>;
  created_by: string;
  approvals: { by: string; at: string }[];
  approval_quorum: number;
  policy_rule_set_version?: number | null;
  policy_rule_id?: string | null;
  policy_approvers?: { principals: string[] } | null;
}

/**
 * The policy's checks of one approval, inside the approving transaction (the movement row locked):
 * the approver must be one the movement's rule counts; the live rule set must still allow the
 * movement; and the approval that reaches the quorum must keep every velocity limit, each checked
 * under its lock, so two approvals cannot both squeeze under one limit.
 */
export async function policyForApproval(
  client: Client,
  m: MovementPolicyColumns,
  approver: string,
  at: Date,
  prices?: PriceSource | null,
): Promise<Record<string, unknown>> {
  const from = m.policy_approvers?.principals ?? null;
  if (from) {
    const name = (await namesOfActors(client, [approver])).get(approver) ?? null;
    if (!name || !from.includes(name)) {
      throw new FerryError('POLICY_APPROVER_NOT_ELIGIBLE', `policy rule ${m.policy_rule_id} counts approvals of movement ${m.id} only from ${from.join(', ')}`, {
        movement_id: m.id,
        rule_set_version: m.policy_rule_set_version ?? null,
        rule_id: m.policy_rule_id ?? null,
        eligible: from,
      });
    }
  }
  const live = await liveRuleSet(client);
  if (!live) return {};
  const facts: FactsWithPrices = await movementFacts(client, {
    templateKey: m.template_key,
    intent: m.intent,
    nodes: planNodes(m.compiled_plan),
    createdBy: m.created_by,
  });
  facts.prices = await readPrices(prices, live, facts, at);
  const decision = decide(live, facts);
  if (!allows(decision)) throw refusal(decision, facts, 'approval');
  const out: Record<string, unknown> = { policy_checked_under: { rule_set_version: live.version, rule_id: decision.ruleId } };
  if (Object.keys(facts.prices).length) out.prices = pricesUsed(facts.prices);
  if (m.approvals.length + 1 >= m.approval_quorum) {
    out.velocity = await checkVelocity(client, applicableLimits(live.limits, facts), facts, at, m.id, live.version);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// At dispatch: the last check before a movement's first effect

/** A movement row as the dispatch check reads it. */
export type DispatchSubject = MovementPolicyColumns & { policy_rule_set_version?: number | null };

/**
 * The policy's last word on movements about to record SUBMITTING, inside the transaction that
 * records it (the dispatcher's commit). For every movement that was created under a rule set:
 *
 * - the live rule set (which may be newer than the one its approvals were given under) must still
 *   allow it, and must not require more approvals than it was approved with
 *   (POLICY_BLOCKED, POLICY_NO_MATCHING_RULE, POLICY_QUORUM_RAISED);
 * - on its first dispatch, every velocity limit that bounds it is checked against the sum of the
 *   movements dispatched in the window, under the limit's advisory lock (every key the batch needs
 *   is locked first, in one order, so two dispatchers never wait on each other), and the movement
 *   is then counted: the lock is held until the commit, so two movements that each fit but not
 *   together are let through one at a time and the second sees the first.
 *
 * Returns the refusal of each movement that may not go on; the others were counted.
 */
export async function policyAtDispatch(
  client: Client,
  movements: DispatchSubject[],
  globalQuorum: number,
  at: Date,
  prices: Readonly<Record<string, Record<string, PriceReading>>> = {},
): Promise<Map<string, FerryError>> {
  const refused = new Map<string, FerryError>();
  const subjects = movements.filter((m) => m.policy_rule_set_version != null);
  if (subjects.length === 0) return refused;
  const live = await liveRuleSet(client);
  if (!live) return refused;
  const counted = await dispatchedMovements(client, subjects.map((m) => m.id));
  const pending: { m: DispatchSubject; facts: MovementFacts; limits: ApplicableLimit[] }[] = [];
  for (const m of subjects) {
    const facts: FactsWithPrices = await movementFacts(client, {
      templateKey: m.template_key,
      intent: m.intent,
      nodes: planNodes(m.compiled_plan),
      createdBy: m.created_by,
    });
    // Read before this transaction (pricesForDispatch): no RPC call is made while the locks are held.
    // A price missing here (the rule set changed since) is unreadable, and the rule refuses.
    facts.prices = prices[m.id] ?? {};
    const decision = decide(live, facts);
    if (!allows(decision)) {
      refused.set(m.id, refusal(decision, facts, 'dispatch'));
      continue;
    }
    const needed = quorumOf(decision, globalQuorum);
    if (needed > m.approval_quorum) {
      refused.set(
        m.id,
        new FerryError('POLICY_QUORUM_RAISED', `rule ${decision.ruleId} of rule set version ${live.version} requires ${needed} approvals; movement ${m.id} was approved by ${m.approval_quorum}`, {
          movement_id: m.id,
          rule_set_version: live.version,
          rule_id: decision.ruleId,
          approved_under: m.policy_rule_set_version ?? null,
          required: needed,
          approved_by: m.approval_quorum,
          checked_at: 'dispatch',
        }),
      );
      continue;
    }
    if (!counted.has(m.id)) pending.push({ m, facts, limits: applicableLimits(live.limits, facts) });
  }
  const keys = [...new Set(pending.flatMap((p) => p.limits.map((l) => l.key)))].sort();
  for (const key of keys) await lockVelocitySum(client, key);
  for (const { m, facts, limits } of pending) {
    let refusedHere: FerryError | null = null;
    for (const a of limits) {
      const base = limitBase(a);
      if (facts.amount === null) {
        refusedHere = new FerryError('VELOCITY_LIMIT_EXCEEDED', `velocity limit ${a.limit.id} bounds ${a.limit.asset}, but movement ${m.id} names no amount to count`, {
          ...base,
          rule_set_version: live.version,
          reason: 'AMOUNT_UNKNOWN',
          checked_at: 'dispatch',
        });
        break;
      }
      const used = await dispatchedSum(client, {
        asset: facts.asset!,
        destination: a.destination,
        since: new Date(at.getTime() - a.limit.window_seconds * 1000),
        except: m.id,
        filter: a.limit.destination ?? null,
        source: a.source,
        requester: a.requester,
      });
      const total = addDecimals(used, facts.amount);
      if (cmp(total, a.limit.max_amount) > 0) {
        refusedHere = new FerryError(
          'VELOCITY_LIMIT_EXCEEDED',
          `velocity limit ${a.limit.id}: ${used} ${a.limit.asset} dispatched in the last ${a.limit.window_seconds} s${sumOf(a)}; ${facts.amount} more would make ${total}, above its maximum ${a.limit.max_amount}`,
          { ...base, rule_set_version: live.version, used, amount: facts.amount, total, checked_at: 'dispatch' },
        );
        break;
      }
    }
    if (refusedHere) {
      refused.set(m.id, refusedHere);
      continue;
    }
    if (facts.asset && facts.amount !== null) {
      await recordDispatch(client, {
        movement_id: m.id,
        rule_set_version: live.version,
        asset: facts.asset,
        amount: facts.amount,
        destination: destinationKey(facts.destination),
        destination_entry: facts.entry?.name ?? null,
        sources: facts.sources,
        at,
      });
    }
  }
  for (const [id, err] of refused) {
    await writeAudit(client, { actor: 'worker:dispatcher', action: 'policy.dispatch_refused', entity_type: 'request', entity_id: id, details: { code: err.code, message: err.message, ...err.details } });
  }
  return refused;
}

/** A compiled plan's nodes as the policy reads them. */
function planNodes(plan: Record<string, unknown>): PolicyNode[] {
  const nodes = (plan as { nodes?: unknown }).nodes;
  return Array.isArray(nodes) ? (nodes as PolicyNode[]) : [];
}

/**
 * The prices the live rule set needs for each of these movements, read before the dispatcher's
 * SUBMITTING transaction opens (policyAtDispatch takes them), by movement id.
 */
export async function pricesForDispatch(
  db: Queryable,
  prices: PriceSource | null | undefined,
  movements: ReadonlyArray<Pick<DispatchSubject, 'id' | 'intent' | 'policy_rule_set_version'>>,
  at: Date,
): Promise<Record<string, Record<string, PriceReading>>> {
  const out: Record<string, Record<string, PriceReading>> = {};
  const subjects = movements.filter((m) => m.policy_rule_set_version != null);
  if (subjects.length === 0) return out;
  const live = await liveRuleSet(db);
  if (!live || !live.rules.some((r) => r.match.amount?.currency)) return out;
  for (const m of subjects) out[m.id] = await readPrices(prices, live, intentFacts(m.intent, []), at);
  return out;
}

// ---------------------------------------------------------------------------------------------
// `ferry policy test`: what the live and a proposed rule set would do

export interface PolicyVerdict {
  rule_set_version: number | null;
  rule_id: string | null;
  action: PolicyDecision['action'];
  outcome: 'allowed' | 'refused';
  /** The error code a creation would answer, when refused. */
  code: string | null;
  message: string | null;
  approvals_required: number | null;
  approvers_from: string[] | null;
  /** The prices its reference-currency rules read. */
  prices: Record<string, unknown>[];
  limits: { limit_id: string; destination: string | null; source: string | null; requester: string | null; window_seconds: number; max_amount: string; used: string; total: string | null; exceeded: boolean }[];
}

async function verdict(
  db: Queryable,
  set: { version: number; rules: RuleSet['rules']; limits: RuleSet['limits'] } | null,
  base: MovementFacts,
  globalQuorum: number,
  at: Date,
  prices: PriceSource | null | undefined,
): Promise<PolicyVerdict> {
  const facts: FactsWithPrices = { ...base, prices: await readPrices(prices, set, base, at) };
  const d = decide(set, facts);
  const limits: PolicyVerdict['limits'] = [];
  for (const a of set ? applicableLimits(set.limits, facts) : []) {
    const used = await velocitySum(db, {
      asset: facts.asset!,
      destination: a.destination,
      since: new Date(at.getTime() - a.limit.window_seconds * 1000),
      except: null,
      filter: a.limit.destination ?? null,
      source: a.source,
      requester: a.requester,
    });
    const total = facts.amount === null ? null : addDecimals(used, facts.amount);
    limits.push({
      limit_id: a.limit.id,
      destination: a.destination,
      source: a.source,
      requester: a.requester,
      window_seconds: a.limit.window_seconds,
      max_amount: a.limit.max_amount,
      used,
      total,
      exceeded: total === null || cmp(total, a.limit.max_amount) > 0,
    });
  }
  const refused = !allows(d) ? refusal(d, facts, 'creation') : limits.find((l) => l.exceeded) ? new FerryError('VELOCITY_LIMIT_EXCEEDED', `velocity limit ${limits.find((l) => l.exceeded)!.limit_id} would be exceeded`) : null;
  return {
    rule_set_version: d.ruleSetVersion,
    rule_id: d.ruleId,
    action: d.action,
    outcome: refused ? 'refused' : 'allowed',
    code: refused?.code ?? null,
    message: refused?.message ?? null,
    approvals_required: allows(d) ? quorumOf(d, globalQuorum) : null,
    approvers_from: d.from,
    prices: pricesUsed(facts.prices ?? {}),
    limits,
  };
}

export interface PolicyTestResult {
  facts: MovementFacts;
  live: PolicyVerdict;
  /** Under the open rule set proposal, if there is one. */
  proposed: (PolicyVerdict & { proposal_id: string | null; proposal_state: string }) | null;
}

/** What the live rule set, and the open rule set proposal if any, would do with a movement. */
export async function testPolicy(
  deps: Pick<PolicyDeps, 'pool' | 'now'>,
  s: MovementSubject,
  globalQuorum: number,
  candidate?: unknown,
  prices?: PriceSource | null,
): Promise<PolicyTestResult> {
  await settleDuePolicyProposals(deps);
  const at = clock(deps);
  const facts = await movementFacts(deps.pool, s);
  const live: RuleSetRow | null = await liveRuleSet(deps.pool);
  const liveVerdict = await verdict(deps.pool, live, facts, globalQuorum, at, prices);
  let proposed: PolicyTestResult['proposed'] = null;
  if (candidate !== undefined) {
    const set = parseRuleSet(candidate);
    proposed = { ...(await verdict(deps.pool, { version: (live?.version ?? 0) + 1, ...set }, facts, globalQuorum, at, prices)), proposal_id: null, proposal_state: 'CANDIDATE' };
  } else {
    const open = await openPolicyProposalOf(deps.pool, 'rule_set', 'rules');
    if (open && open.change.op === 'replace') {
      const v = await verdict(deps.pool, { version: open.change.base_version + 1, rules: open.change.rules, limits: open.change.limits }, facts, globalQuorum, at, prices);
      proposed = { ...v, proposal_id: open.id, proposal_state: open.proposal_state };
    }
  }
  return { facts, live: liveVerdict, proposed };
}
