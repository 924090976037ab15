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
import { policyProposalsSettledTotal } from '../metrics.ts';
import { writeAudit } from '../persistence/audit.ts';
import { withTransaction, type Client, type Pool, type Queryable } from '../persistence/db.ts';
import { appendEntityTransition } from '../persistence/entity-transitions.ts';
import { namesOfActors } from '../persistence/principals.ts';
import {
  dispatchedMovements,
  dispatchedSums,
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
  velocitySums,
  windowAssets,
  type AssetSum,
  type MovementPolicyRecord,
  type PolicyChange,
  type PolicyProposalRow,
  type PolicySubjectKind,
  type PolicyTransitionRow,
  type RuleSetRow,
  type SumQuery,
} from '../persistence/policy.ts';
import {
  addDecimals,
  addressBookEntrySchema,
  addressKey,
  allows,
  applicableLimits,
  cmp,
  compareWithBound,
  decide,
  destinationKey,
  expandGroups,
  formatValue,
  intentFacts,
  limitCovers,
  limitUnit,
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
  valueOfAmounts,
} from '../policy/rules.ts';
import type { PriceSource } from '../prices/price-source.ts';
import { deliverToRow, type RowMachine } from '../durable/row-machine.ts';

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
  if (report.finalized) policyProposalsSettledTotal.inc({ result: 'finalized' }, report.finalized);
  if (report.expired) policyProposalsSettledTotal.inc({ result: 'expired' }, report.expired);
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
  /** The asset it sums (a limit in the asset), else null. */
  asset: string | null;
  /** The reference currency it values the window in (a limit in a currency), else null. */
  currency: string | null;
  destination: string | null;
  /** The source (per_source) or requester (per_requester) whose sum it is, else null. */
  source: string | null;
  requester: string | null;
  window_seconds: number;
  max_amount: string;
  /** The window's sum before this movement (in the asset, or its value in the currency). */
  used: string;
  /** With this movement. */
  total: string;
  /** A limit in a currency: each asset's sum and the price it was valued at. */
  valued?: Record<string, unknown>[];
}

/** Where a velocity check finds a price: the prices read ahead, never an RPC call under the locks. */
type PriceLookup = (asset: string, currency: string) => Promise<PriceReading>;

const notReadAhead = (asset: string, currency: string): PriceReading => ({
  ok: false,
  asset,
  currency,
  code: 'PRICE_NOT_READ_AHEAD',
  message: `${priceKey(asset, currency)} was not read before this check (a movement of ${asset} entered the window, or the rule set changed, meanwhile); try again`,
  feed: null,
});

/** A lookup in a read-ahead price source (pricesReadAhead), or none: every price then unavailable. */
function lookupIn(prices: PriceSource | null | undefined, at: Date): PriceLookup {
  return (asset, currency) => readOne(prices, asset, currency, at);
}

/** What one limit's window holds with this movement in it. */
type WindowCheck =
  | { ok: true; used: string; amount: string; total: string; exceeded: boolean; valued?: Record<string, unknown>[] }
  | { ok: false; price: Extract<PriceReading, { ok: false }> };

/**
 * The window's sum of one limit with this movement's amount (which must be known), from `sums`
 * (approved movements, or dispatched ones). A limit in an asset sums that asset; a limit in a
 * currency values each asset's sum, and this movement's amount, at its price (looked up, never
 * read from a feed here), exactly: an asset whose price cannot be used makes the check fail.
 */
async function windowCheck(
  db: Queryable,
  sums: (db: Queryable, q: SumQuery) => Promise<AssetSum[]>,
  a: ApplicableLimit,
  facts: MovementFacts & { amount: string; asset: string },
  at: Date,
  except: string | null,
  priceOf: PriceLookup,
): Promise<WindowCheck> {
  const currency = a.limit.currency;
  const rows = await sums(db, {
    assets: currency !== undefined ? (a.limit.assets?.map((x) => x.toUpperCase()) ?? null) : [facts.asset],
    destination: a.destination,
    since: new Date(at.getTime() - a.limit.window_seconds * 1000),
    except,
    filter: a.limit.destination ?? null,
    source: a.source,
    requester: a.requester,
  });
  if (currency === undefined) {
    const used = rows[0]?.total ?? '0';
    const total = addDecimals(used, facts.amount);
    return { ok: true, used, amount: facts.amount, total, exceeded: cmp(total, a.limit.max_amount) > 0 };
  }
  const byAsset = new Map(rows.map((r) => [r.asset, r.total]));
  const priced: { asset: string; used: string; price: Extract<PriceReading, { ok: true }> }[] = [];
  for (const asset of [...new Set([...byAsset.keys(), facts.asset])].sort()) {
    const price = await priceOf(asset, currency);
    if (!price.ok) return { ok: false, price };
    priced.push({ asset, used: byAsset.get(asset) ?? '0', price });
  }
  const own = priced.find((p) => p.asset === facts.asset)!.price;
  const usedParts = priced.map((p) => ({ amount: p.used, price: p.price }));
  const total = valueOfAmounts([...usedParts, { amount: facts.amount, price: own }]);
  return {
    ok: true,
    used: formatValue(valueOfAmounts(usedParts)),
    amount: formatValue(valueOfAmounts([{ amount: facts.amount, price: own }])),
    total: formatValue(total),
    exceeded: compareWithBound(total, a.limit.max_amount) > 0,
    valued: priced.map((p) => ({ asset: p.asset, used: p.used, answer: p.price.answer, decimals: p.price.decimals, feed: p.price.feed })),
  };
}

/** A limit in a currency that cannot value its window: refused, like a rule that cannot price its amount (fail closed). */
function limitPriceRefusal(a: ApplicableLimit, p: Extract<PriceReading, { ok: false }>, ruleSetVersion: number | null, checkedAt?: string): FerryError {
  return new FerryError(
    'POLICY_PRICE_UNAVAILABLE',
    `velocity limit ${a.limit.id} values its window in ${p.currency}, and the price of ${p.asset} in ${p.currency} cannot be used: ${p.message}; the movement is refused until it can`,
    { ...limitBase(a), rule_set_version: ruleSetVersion, rule_id: null, asset: p.asset, price_code: p.code, feed: p.feed, ...(checkedAt ? { checked_at: checkedAt } : {}) },
  );
}

function amountUnknown(a: ApplicableLimit, who: string, ruleSetVersion: number | null, checkedAt?: string): FerryError {
  return new FerryError('VELOCITY_LIMIT_EXCEEDED', `velocity limit ${a.limit.id} bounds ${limitUnit(a.limit)}, but ${who} names no amount to count`, {
    ...limitBase(a),
    rule_set_version: ruleSetVersion,
    reason: 'AMOUNT_UNKNOWN',
    ...(checkedAt ? { checked_at: checkedAt } : {}),
  });
}

function limitExceeded(a: ApplicableLimit, w: Extract<WindowCheck, { ok: true }>, verb: string, ruleSetVersion: number | null, checkedAt?: string): FerryError {
  const unit = limitUnit(a.limit);
  return new FerryError(
    'VELOCITY_LIMIT_EXCEEDED',
    `velocity limit ${a.limit.id}: ${w.used} ${unit} ${verb} in the last ${a.limit.window_seconds} s${sumOf(a)}; ` +
      `${w.amount} more would make ${w.total}, above its maximum ${a.limit.max_amount}`,
    { ...limitBase(a), rule_set_version: ruleSetVersion, used: w.used, amount: w.amount, total: w.total, ...(w.valued ? { valued: w.valued } : {}), ...(checkedAt ? { checked_at: checkedAt } : {}) },
  );
}

/**
 * Checks the velocity limits that bound the movement, each under its lock (held until the
 * caller's transaction ends): the sum of the window's counted movements plus this one must not
 * pass the limit's maximum. The window ends at `at`. A limit in a currency values the window with
 * `priceOf`, the prices read before the transaction.
 */
export async function checkVelocity(
  client: Client,
  limits: ApplicableLimit[],
  facts: MovementFacts,
  at: Date,
  movementId: string | null,
  ruleSetVersion: number | null,
  priceOf: PriceLookup = async (asset, currency) => notReadAhead(asset, currency),
): Promise<VelocityCheck[]> {
  const checks: VelocityCheck[] = [];
  for (const a of limits) {
    const base = limitBase(a);
    if (facts.amount === null) throw amountUnknown(a, "this movement's intent", ruleSetVersion);
    await lockVelocitySum(client, a.key);
    const w = await windowCheck(client, velocitySums, a, { ...facts, amount: facts.amount, asset: facts.asset! }, at, movementId, priceOf);
    if (!w.ok) throw limitPriceRefusal(a, w.price, ruleSetVersion);
    if (w.exceeded) throw limitExceeded(a, w, 'moved', ruleSetVersion);
    checks.push({ ...base, used: w.used, total: w.total, ...(w.valued ? { valued: w.valued } : {}) });
  }
  return checks;
}

/** What a velocity refusal or check says about the limit and the sum it bounds. */
function limitBase(a: ApplicableLimit) {
  return {
    limit_id: a.limit.id,
    asset: a.limit.asset ?? null,
    currency: a.limit.currency ?? null,
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

/** Reads one price; a price source that throws gives an unreadable price, no price source a missing feed. */
async function readOne(prices: PriceSource | null | undefined, asset: string, currency: string, at: Date): Promise<PriceReading> {
  if (!prices) return { ok: false, asset, currency, code: 'PRICE_FEED_NOT_CONFIGURED', message: 'no price source is configured (price_feeds in FERRY_CONFIG_FILE)', feed: null };
  try {
    return await prices.read(asset, currency, at);
  } catch (err) {
    return { ok: false, asset, currency, code: 'PRICE_UNREADABLE', message: `the price source failed: ${(err as Error).message}`, feed: null };
  }
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
  return readEach(prices, pricesNeeded(set, facts), at);
}

async function readEach(prices: PriceSource | null | undefined, needed: { asset: string; currency: string }[], at: Date, cache?: Map<string, PriceReading>): Promise<Record<string, PriceReading>> {
  const out: Record<string, PriceReading> = {};
  for (const { asset, currency } of needed) {
    const key = priceKey(asset, currency);
    const reading = cache?.get(key) ?? (await readOne(prices, asset, currency, at));
    cache?.set(key, reading);
    out[key] = reading;
  }
  return out;
}

/**
 * The prices the rule set's limits in a currency will need to value a window with a movement of
 * `asset`: its own, and every asset with movements counted in the window now (read outside any
 * transaction; the window checked later, inside one, can only have lost movements at its start).
 */
async function limitPricesNeeded(db: Queryable, set: { limits: RuleSet['limits'] } | null, asset: string | null, at: Date): Promise<{ asset: string; currency: string }[]> {
  if (!set || !asset) return [];
  const out = new Map<string, { asset: string; currency: string }>();
  for (const l of set.limits) {
    if (l.currency === undefined || !limitCovers(l, asset)) continue;
    out.set(priceKey(asset, l.currency), { asset, currency: l.currency });
    const since = new Date(at.getTime() - l.window_seconds * 1000);
    for (const a of await windowAssets(db, since, l.assets?.map((x) => x.toUpperCase()) ?? null)) out.set(priceKey(a, l.currency), { asset: a, currency: l.currency });
  }
  return [...out.values()];
}

/** The prices a decision on this intent needs under the rule set: its rules' and its limits'. */
async function allPricesNeeded(db: Queryable, set: { rules: RuleSet['rules']; limits: RuleSet['limits'] } | null, intent: Readonly<Record<string, unknown>>, at: Date) {
  const facts = intentFacts(intent, []);
  const needed = new Map(pricesNeeded(set, facts).map((n) => [priceKey(n.asset, n.currency), n]));
  for (const n of await limitPricesNeeded(db, set, facts.asset, at)) needed.set(priceKey(n.asset, n.currency), n);
  return [...needed.values()];
}

/**
 * The prices a decision on this intent will need under the live rule set (its rules' amounts in a
 * currency, and its limits in a currency: the movement's asset and every asset in their windows),
 * read now, before the caller opens its transaction, as a price source that answers from them:
 * the checks at creation and approval then make no RPC call while they hold the movement's row and
 * the velocity locks. A price asked for inside the transaction that was not read here (the rule set
 * changed in between, or a movement of another asset entered a window) is unreadable, and the check
 * refuses (fail closed); trying again reads it.
 */
export async function pricesReadAhead(
  db: Queryable,
  prices: PriceSource | null | undefined,
  intent: Readonly<Record<string, unknown>>,
  at: Date,
): Promise<PriceSource | null> {
  if (!prices) return null;
  const readings = await readEach(prices, await allPricesNeeded(db, await liveRuleSet(db), intent, at), at);
  return {
    read: async (asset, currency) => readings[priceKey(asset, currency)] ?? notReadAhead(asset, currency),
  };
}

/**
 * Whether a refusal says only that a price was not read before the transaction (the rule set
 * changed, or a movement of another asset entered a limit's window, meanwhile): the caller reads
 * the prices again and tries once more; the new read sees what the transaction saw.
 */
export function priceNotReadAhead(err: unknown): boolean {
  return err instanceof FerryError && err.code === 'POLICY_PRICE_UNAVAILABLE' && err.details.price_code === 'PRICE_NOT_READ_AHEAD';
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
  const velocity = live ? await checkVelocity(client, applicableLimits(live.limits, facts), facts, at, null, live.version, lookupIn(prices, at)) : [];
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
    out.velocity = await checkVelocity(client, applicableLimits(live.limits, facts), facts, at, m.id, live.version, lookupIn(prices, at));
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
  seen?: RuleSetMemo,
): Promise<Map<string, FerryError>> {
  const refused = new Map<string, FerryError>();
  const subjects = movements.filter((m) => m.policy_rule_set_version != null);
  if (subjects.length === 0) return refused;
  // The one read of the rule set per dispatch: the prices were read ahead for the set seen last
  // time (pricesForDispatch); this read, inside the transaction, is the one that decides.
  const live = await liveRuleSet(client);
  if (seen) seen.live = live;
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
    // A price the live rule set needs that was not read then (the rule set changed since) is
    // "not read ahead": the dispatcher defers the node and reads it on the next round.
    facts.prices = withUnread(prices[m.id] ?? {}, live, facts);
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
    // Read before this transaction (pricesForDispatch): a price not read then is unavailable here.
    const priceOf: PriceLookup = async (asset, currency) => prices[m.id]?.[priceKey(asset, currency)] ?? notReadAhead(asset, currency);
    for (const a of limits) {
      if (facts.amount === null) {
        refusedHere = amountUnknown(a, `movement ${m.id}`, live.version, 'dispatch');
        break;
      }
      const w = await windowCheck(client, dispatchedSums, a, { ...facts, amount: facts.amount, asset: facts.asset! }, at, m.id, priceOf);
      if (!w.ok) {
        refusedHere = limitPriceRefusal(a, w.price, live.version, 'dispatch');
        break;
      }
      if (w.exceeded) {
        refusedHere = limitExceeded(a, w, 'dispatched', live.version, 'dispatch');
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
    // Deferred by the dispatcher (its prices are read again), not refused.
    if (priceNotReadAhead(err)) continue;
    await writeAudit(client, { actor: 'worker:dispatcher', action: 'policy.dispatch_refused', entity_type: 'request', entity_id: id, details: { code: err.code, message: err.message, ...err.details } });
  }
  return refused;
}

/**
 * What a dispatcher remembers of the rule set between rounds: the live set its last check read
 * (undefined before the first). Its prices for the next round are read for that set, so the
 * round reads the rule set once, inside its transaction.
 */
export interface RuleSetMemo {
  live?: RuleSetRow | null;
}

/** The prices read ahead, with a "not read ahead" reading for each one the live set needs besides. */
function withUnread(read: Readonly<Record<string, PriceReading>>, live: RuleSetRow, facts: MovementFacts): Record<string, PriceReading> {
  const out: Record<string, PriceReading> = { ...read };
  for (const { asset, currency } of pricesNeeded(live, facts)) out[priceKey(asset, currency)] ??= notReadAhead(asset, currency);
  return out;
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
  seen?: RuleSetMemo,
): Promise<Record<string, Record<string, PriceReading>>> {
  const out: Record<string, Record<string, PriceReading>> = {};
  const subjects = movements.filter((m) => m.policy_rule_set_version != null);
  if (subjects.length === 0) return out;
  // The set the last check read, when there was one (policyAtDispatch reads the live one again).
  const live = seen?.live !== undefined ? seen.live : await liveRuleSet(db);
  if (!live || !(live.rules.some((r) => r.match.amount?.currency) || live.limits.some((l) => l.currency !== undefined))) return out;
  const cache = new Map<string, PriceReading>();
  for (const m of subjects) out[m.id] = await readEach(prices, await allPricesNeeded(db, live, m.intent, at), at, cache);
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
  limits: {
    limit_id: string;
    /** A limit in a currency: the currency its used and total are values in. */
    currency: string | null;
    destination: string | null;
    source: string | null;
    requester: string | null;
    window_seconds: number;
    max_amount: string;
    used: string;
    total: string | null;
    exceeded: boolean;
    /** Why its window could not be valued (a price that cannot be used). */
    price_code?: string;
  }[];
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
  const cache = new Map<string, PriceReading>();
  const priceOf: PriceLookup = async (asset, currency) => {
    const key = priceKey(asset, currency);
    if (!cache.has(key)) cache.set(key, await readOne(prices, asset, currency, at));
    return cache.get(key)!;
  };
  let priceRefusal: FerryError | null = null;
  for (const a of set ? applicableLimits(set.limits, facts) : []) {
    // A movement without an amount: the window's sum, and no total (it is refused).
    const w = await windowCheck(db, velocitySums, a, { ...facts, amount: facts.amount ?? '0', asset: facts.asset! }, at, null, priceOf);
    if (!w.ok) priceRefusal ??= limitPriceRefusal(a, w.price, set!.version);
    limits.push({
      limit_id: a.limit.id,
      currency: a.limit.currency ?? null,
      destination: a.destination,
      source: a.source,
      requester: a.requester,
      window_seconds: a.limit.window_seconds,
      max_amount: a.limit.max_amount,
      used: w.ok ? w.used : '?',
      total: w.ok && facts.amount !== null ? w.total : null,
      exceeded: !w.ok || facts.amount === null || w.exceeded,
      ...(!w.ok ? { price_code: w.price.code } : {}),
    });
  }
  const refused = !allows(d) ? refusal(d, facts, 'creation') : priceRefusal ? priceRefusal : limits.find((l) => l.exceeded) ? new FerryError('VELOCITY_LIMIT_EXCEEDED', `velocity limit ${limits.find((l) => l.exceeded)!.limit_id} would be exceeded`) : null;
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
