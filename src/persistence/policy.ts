import { isUuid } from '../ids.ts';
import type { AddressBookEntry, EntryKind, PolicyRule, VelocityLimit } from '../policy/rules.ts';
import type { Client, Queryable } from './db.ts';
import type { NewEntityTransition } from './entity-transitions.ts';

/**
 * The treasury policy's tables (migration 0250): the address book, the rule set versions, the
 * policy proposals and their rows of `transitions`, the policy columns of a movement and the
 * velocity sums. The policy service (src/services/policy.ts) owns the transactions and audit.
 */

// ---------------------------------------------------------------------------------------------
// The address book

export interface AddressBookRow extends AddressBookEntry {
  address_key: string;
  version: number;
  proposal_id: string;
  created_at: Date;
  updated_at: Date;
}

export async function listAddressBook(db: Queryable): Promise<AddressBookRow[]> {
  const { rows } = await db.query<AddressBookRow>('SELECT * FROM address_book_entries ORDER BY name');
  return rows;
}

export async function getAddressBookEntry(db: Queryable, name: string): Promise<AddressBookRow | null> {
  const { rows } = await db.query<AddressBookRow>('SELECT * FROM address_book_entries WHERE name = $1', [name]);
  return rows[0] ?? null;
}

/** The entry for this destination (address key and tag), if the book has one. */
export async function entryForDestination(db: Queryable, key: string, tag: string | null): Promise<{ name: string; kind: EntryKind } | null> {
  const { rows } = await db.query<{ name: string; kind: EntryKind }>(
    `SELECT name, kind FROM address_book_entries WHERE address_key = $1 AND coalesce(tag, '') = coalesce($2, '')`,
    [key, tag],
  );
  return rows[0] ?? null;
}

/** An entry with the same destination under another name, if any. */
export async function entryWithAddress(db: Queryable, key: string, tag: string | null, otherThan: string): Promise<string | null> {
  const { rows } = await db.query<{ name: string }>(
    `SELECT name FROM address_book_entries WHERE address_key = $1 AND coalesce(tag, '') = coalesce($2, '') AND name <> $3`,
    [key, tag, otherThan],
  );
  return rows[0]?.name ?? null;
}

export async function putAddressBookEntry(client: Client, e: AddressBookEntry & { address_key: string }, proposalId: string): Promise<AddressBookRow> {
  const { rows } = await client.query<AddressBookRow>(
    `INSERT INTO address_book_entries (name, network, address, address_key, tag, owner, kind, notes, proposal_id)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
     ON CONFLICT (name) DO UPDATE
        SET network = EXCLUDED.network, address = EXCLUDED.address, address_key = EXCLUDED.address_key, tag = EXCLUDED.tag,
            owner = EXCLUDED.owner, kind = EXCLUDED.kind, notes = EXCLUDED.notes, proposal_id = EXCLUDED.proposal_id,
            version = address_book_entries.version + 1, updated_at = now()
     RETURNING *`,
    [e.name, e.network, e.address, e.address_key, e.tag, e.owner, e.kind, e.notes, proposalId],
  );
  return rows[0];
}

export async function removeAddressBookEntry(client: Client, name: string): Promise<boolean> {
  const { rowCount } = await client.query('DELETE FROM address_book_entries WHERE name = $1', [name]);
  return (rowCount ?? 0) > 0;
}

// ---------------------------------------------------------------------------------------------
// Rule sets

export interface RuleSetRow {
  version: number;
  rules: PolicyRule[];
  limits: VelocityLimit[];
  proposal_id: string;
  proposed_by: string;
  approved_by: string;
  created_at: Date;
}

/** The live rule set (the highest version), or null when there has never been one. */
export async function liveRuleSet(db: Queryable): Promise<RuleSetRow | null> {
  const { rows } = await db.query<RuleSetRow>('SELECT * FROM policy_rule_sets ORDER BY version DESC LIMIT 1');
  return rows[0] ?? null;
}

export async function ruleSetVersion(db: Queryable, version: number): Promise<RuleSetRow | null> {
  const { rows } = await db.query<RuleSetRow>('SELECT * FROM policy_rule_sets WHERE version = $1', [version]);
  return rows[0] ?? null;
}

export async function insertRuleSet(
  client: Client,
  r: { version: number; rules: PolicyRule[]; limits: VelocityLimit[]; proposal_id: string; proposed_by: string; approved_by: string },
): Promise<RuleSetRow> {
  const { rows } = await client.query<RuleSetRow>(
    `INSERT INTO policy_rule_sets (version, rules, limits, proposal_id, proposed_by, approved_by)
     VALUES ($1, $2::jsonb, $3::jsonb, $4, $5, $6) RETURNING *`,
    [r.version, JSON.stringify(r.rules), JSON.stringify(r.limits), r.proposal_id, r.proposed_by, r.approved_by],
  );
  return rows[0];
}

// ---------------------------------------------------------------------------------------------
// Proposals

export const policySubjectKinds = ['address_book', 'rule_set'] as const;
export type PolicySubjectKind = (typeof policySubjectKinds)[number];

export type PolicyChange =
  | { op: 'put'; entry: AddressBookEntry & { address_key: string } }
  | { op: 'remove'; name: string }
  | { op: 'replace'; base_version: number; rules: PolicyRule[]; limits: VelocityLimit[] };

export interface NewPolicyProposal {
  subject_kind: PolicySubjectKind;
  subject: string;
  change: PolicyChange;
  machine_id: string;
  machine_version: string;
  proposal_state: string;
  proposed_by: string;
  review_expires_at: string;
  challenge_seconds: number;
}

export interface PolicyProposalRow extends Omit<NewPolicyProposal, 'review_expires_at'> {
  id: string;
  row_version: number;
  review_expires_at: Date;
  approved_by: string | null;
  approved_at: Date | null;
  challenge_ends_at: Date | null;
  decided_by: string | null;
  reason: string | null;
  result_version: number | null;
  created_at: Date;
  updated_at: Date;
}

const ONE_OPEN = 'policy_proposals_one_open';

/** Inserts a proposal; null when the subject already has an open one (the partial unique index). */
export async function insertPolicyProposal(client: Client, p: NewPolicyProposal): Promise<PolicyProposalRow | null> {
  const { rows } = await client.query<PolicyProposalRow>(
    `INSERT INTO policy_proposals (subject_kind, subject, change, machine_id, machine_version, proposal_state, proposed_by,
                                   review_expires_at, challenge_seconds)
     VALUES ($1, $2, $3::jsonb, $4, $5, $6, $7, $8, $9)
     ON CONFLICT (subject_kind, subject) WHERE proposal_state IN ('PROPOSED', 'APPROVED') DO NOTHING
     RETURNING *`,
    [p.subject_kind, p.subject, JSON.stringify(p.change), p.machine_id, p.machine_version, p.proposal_state, p.proposed_by, p.review_expires_at, p.challenge_seconds],
  );
  return rows[0] ?? null;
}
export { ONE_OPEN as POLICY_ONE_OPEN_INDEX };

export async function openPolicyProposalOf(db: Queryable, kind: PolicySubjectKind, subject: string): Promise<PolicyProposalRow | null> {
  const { rows } = await db.query<PolicyProposalRow>(
    `SELECT * FROM policy_proposals WHERE subject_kind = $1 AND subject = $2 AND proposal_state IN ('PROPOSED', 'APPROVED')`,
    [kind, subject],
  );
  return rows[0] ?? null;
}

/** Open book proposals that would put this destination under another entry's name. */
export async function openProposalWithAddress(db: Queryable, key: string, tag: string | null, otherThan: string): Promise<string | null> {
  const { rows } = await db.query<{ id: string }>(
    `SELECT id FROM policy_proposals
      WHERE subject_kind = 'address_book' AND proposal_state IN ('PROPOSED', 'APPROVED') AND subject <> $3
        AND change->>'op' = 'put' AND change->'entry'->>'address_key' = $1 AND coalesce(change->'entry'->>'tag', '') = coalesce($2, '')
      LIMIT 1`,
    [key, tag, otherThan],
  );
  return rows[0]?.id ?? null;
}

export async function getPolicyProposal(db: Queryable, id: string): Promise<PolicyProposalRow | null> {
  if (!isUuid(id)) return null;
  const { rows } = await db.query<PolicyProposalRow>('SELECT * FROM policy_proposals WHERE id = $1', [id]);
  return rows[0] ?? null;
}

export async function lockPolicyProposal(client: Client, id: string): Promise<PolicyProposalRow | null> {
  if (!isUuid(id)) return null;
  const { rows } = await client.query<PolicyProposalRow>('SELECT * FROM policy_proposals WHERE id = $1 FOR UPDATE', [id]);
  return rows[0] ?? null;
}

/** Newest first; at most `limit` rows. */
export async function listPolicyProposals(
  db: Queryable,
  filter: { state?: string; kind?: PolicySubjectKind; limit: number },
): Promise<PolicyProposalRow[]> {
  const { rows } = await db.query<PolicyProposalRow>(
    `SELECT * FROM policy_proposals
      WHERE ($1::text IS NULL OR proposal_state = $1) AND ($2::text IS NULL OR subject_kind = $2)
      ORDER BY created_at DESC, id DESC LIMIT $3`,
    [filter.state ?? null, filter.kind ?? null, filter.limit],
  );
  return rows;
}

export interface PolicyProposalUpdate {
  proposal_state: string;
  approved_by: string | null;
  approved_at: string | null;
  challenge_ends_at: string | null;
  decided_by: string | null;
  reason: string | null;
}

/** Writes the new snapshot of a locked row; row_version guards against a writer that did not lock. */
export async function updatePolicyProposal(client: Client, id: string, rowVersion: number, u: PolicyProposalUpdate): Promise<PolicyProposalRow | null> {
  const { rows } = await client.query<PolicyProposalRow>(
    `UPDATE policy_proposals
        SET proposal_state = $3, approved_by = $4, approved_at = $5, challenge_ends_at = $6, decided_by = $7, reason = $8,
            row_version = row_version + 1, updated_at = now()
      WHERE id = $1 AND row_version = $2 RETURNING *`,
    [id, rowVersion, u.proposal_state, u.approved_by, u.approved_at, u.challenge_ends_at, u.decided_by, u.reason],
  );
  return rows[0] ?? null;
}

export async function recordPolicyResult(client: Client, id: string, version: number): Promise<PolicyProposalRow> {
  const { rows } = await client.query<PolicyProposalRow>('UPDATE policy_proposals SET result_version = $2 WHERE id = $1 RETURNING *', [id, version]);
  return rows[0];
}

/** APPROVED proposals whose cool-down has passed, oldest first. */
export async function duePolicyFinalizations(db: Queryable, now: Date, limit: number): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    `SELECT id FROM policy_proposals WHERE proposal_state = 'APPROVED' AND challenge_ends_at <= $1 ORDER BY challenge_ends_at, id LIMIT $2`,
    [now, limit],
  );
  return rows.map((r) => r.id);
}

/** PROPOSED proposals past their review window, oldest first. */
export async function duePolicyExpirations(db: Queryable, now: Date, limit: number): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    `SELECT id FROM policy_proposals WHERE proposal_state = 'PROPOSED' AND review_expires_at <= $1 ORDER BY review_expires_at, id LIMIT $2`,
    [now, limit],
  );
  return rows.map((r) => r.id);
}

export interface PolicyTransitionRow extends Omit<NewEntityTransition, 'at'> {
  id: number;
  entity_type: 'policy_proposal';
  at: Date;
}

export async function policyProposalTransitions(db: Queryable, id: string): Promise<PolicyTransitionRow[]> {
  const { rows } = await db.query<PolicyTransitionRow>(
    `SELECT * FROM transitions WHERE entity_id = $1 AND entity_type = 'policy_proposal' ORDER BY seq`,
    [id],
  );
  return rows;
}

// ---------------------------------------------------------------------------------------------
// A movement's policy record and the velocity sums

export interface MovementPolicyRecord {
  rule_set_version: number | null;
  rule_id: string | null;
  action: string;
  asset: string | null;
  amount: string | null;
  destination: string | null;
  destination_entry: string | null;
  /** The sources its nodes move funds from (signer keys, accounts). */
  sources: string[];
  approvers: { principals: string[] } | null;
}

/** Writes what a new movement records of the policy (in its creating transaction). */
export async function recordMovementPolicy(client: Client, movementId: string, p: MovementPolicyRecord): Promise<void> {
  await client.query(
    `UPDATE movement_requests
        SET policy_rule_set_version = $2, policy_rule_id = $3, policy_action = $4, policy_asset = $5, policy_amount = $6::numeric,
            policy_destination = $7, policy_destination_entry = $8, policy_approvers = $9::jsonb, policy_sources = $10::text[]
      WHERE id = $1`,
    [movementId, p.rule_set_version, p.rule_id, p.action, p.asset, p.amount, p.destination, p.destination_entry, p.approvers ? JSON.stringify(p.approvers) : null, p.sources],
  );
}

/** The states whose movements a velocity window counts: approved, and not ended without moving anything. */
export const VELOCITY_STATES = ['APPROVED', 'EXECUTING', 'WAITING_MANUAL_ACTION', 'MANUAL_INTERVENTION', 'COMPLETED'] as const;

/**
 * Serialises one velocity sum: held until the transaction ends, so a second approval under the same
 * limit waits for the first to commit (or roll back) and then counts it.
 */
export async function lockVelocitySum(client: Client, key: string): Promise<void> {
  await client.query(`SELECT pg_advisory_xact_lock(hashtextextended('ferry.velocity:' || $1, 0))`, [key]);
}

/** Which movements a window's sum counts: the limit's assets, destination, source and requester. */
export interface SumQuery {
  /** The assets whose amounts count (upper case); null: every asset. */
  assets: string[] | null;
  destination: string | null;
  since: Date;
  except: string | null;
  /** The limit's destination filter: only movements whose recorded book entry matches it count. */
  filter?: { in_book?: boolean; kinds?: readonly string[]; entries?: readonly string[] } | null;
  /** One source's sum (per_source): only movements that recorded it among their sources count. */
  source?: string | null;
  /** One requester's sum (per_requester): only movements it created count. */
  requester?: string | null;
}

/** A window's sum of one asset. */
export interface AssetSum {
  asset: string;
  total: string;
}

const sumParams = (q: SumQuery) => {
  const f = q.filter ?? null;
  return [q.assets, q.destination, [...VELOCITY_STATES], q.since, q.except, f?.in_book ?? null, f?.entries ? [...f.entries] : null, f?.kinds ? [...f.kinds] : null, q.source ?? null, q.requester ?? null];
};

/**
 * The sums of the amounts of each asset (of one destination when given) over movements approved at
 * or after `since` and still counted (VELOCITY_STATES): the approval that reached the quorum is the
 * last of the movement's approvals (ferry_last_approval_at, indexed per asset: migration 0430). `except` leaves one movement out (the one being decided). One
 * row per asset with movements in the window.
 */
export async function velocitySums(db: Queryable, q: SumQuery): Promise<AssetSum[]> {
  const { rows } = await db.query<AssetSum>(
    `SELECT policy_asset AS asset, sum(policy_amount)::text AS total
       FROM movement_requests
      WHERE policy_asset IS NOT NULL
        AND ($1::text[] IS NULL OR policy_asset = ANY($1::text[]))
        AND ($2::text IS NULL OR policy_destination = $2)
        AND request_state = ANY($3::text[])
        AND policy_amount IS NOT NULL
        AND ferry_last_approval_at(approvals) >= $4
        AND ($5::uuid IS NULL OR id <> $5::uuid)
        AND ($6::boolean IS NULL OR (policy_destination_entry IS NOT NULL) = $6)
        AND ($7::text[] IS NULL OR policy_destination_entry = ANY($7::text[]))
        AND ($8::text[] IS NULL OR policy_destination_entry IN (SELECT name FROM address_book_entries WHERE kind = ANY($8::text[])))
        AND ($9::text IS NULL OR $9 = ANY(policy_sources))
        AND ($10::text IS NULL OR created_by = $10)
      GROUP BY policy_asset ORDER BY policy_asset`,
    sumParams(q),
  );
  return rows.map((r) => ({ asset: r.asset, total: normalizeNumeric(r.total) }));
}

/**
 * The assets (of `assets`, or any) with movements counted in a window that starts at `since`,
 * approved or dispatched: the prices a limit in a currency will need, read before the transaction
 * that checks it.
 */
export async function windowAssets(db: Queryable, since: Date, assets: string[] | null): Promise<string[]> {
  const { rows } = await db.query<{ asset: string }>(
    `SELECT policy_asset AS asset FROM movement_requests
      WHERE policy_asset IS NOT NULL AND ($1::text[] IS NULL OR policy_asset = ANY($1::text[]))
        AND request_state = ANY($3::text[]) AND ferry_last_approval_at(approvals) >= $2
     UNION
     SELECT d.asset FROM policy_velocity_dispatches d JOIN movement_requests r ON r.id = d.movement_id
      WHERE ($1::text[] IS NULL OR d.asset = ANY($1::text[])) AND d.dispatched_at >= $2 AND r.request_state = ANY($3::text[])`,
    [assets, since, [...VELOCITY_STATES]],
  );
  return rows.map((r) => r.asset).sort();
}

/** A numeric's text in the shortest decimal form ("1500.000000" -> "1500"). */
function normalizeNumeric(text: string): string {
  if (!text.includes('.')) return text;
  const t = text.replace(/0+$/, '').replace(/\.$/, '');
  return t === '' ? '0' : t;
}

// ---------------------------------------------------------------------------------------------
// The velocity sums at dispatch (migration 0370)

/** The movements of `ids` the dispatcher already counted (their first node was let through). */
export async function dispatchedMovements(db: Queryable, ids: string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const { rows } = await db.query<{ movement_id: string }>('SELECT movement_id FROM policy_velocity_dispatches WHERE movement_id = ANY($1::uuid[])', [ids]);
  return new Set(rows.map((r) => r.movement_id));
}

/**
 * The sums of each asset over movements dispatched at or after `since` and still counted
 * (VELOCITY_STATES), of one destination when given, with the limit's destination filter.
 */
export async function dispatchedSums(db: Queryable, q: SumQuery): Promise<AssetSum[]> {
  const { rows } = await db.query<AssetSum>(
    `SELECT d.asset, sum(d.amount)::text AS total
       FROM policy_velocity_dispatches d JOIN movement_requests r ON r.id = d.movement_id
      WHERE ($1::text[] IS NULL OR d.asset = ANY($1::text[]))
        AND ($2::text IS NULL OR d.destination = $2)
        AND r.request_state = ANY($3::text[])
        AND d.dispatched_at >= $4
        AND ($5::uuid IS NULL OR d.movement_id <> $5::uuid)
        AND ($6::boolean IS NULL OR (d.destination_entry IS NOT NULL) = $6)
        AND ($7::text[] IS NULL OR d.destination_entry = ANY($7::text[]))
        AND ($8::text[] IS NULL OR d.destination_entry IN (SELECT name FROM address_book_entries WHERE kind = ANY($8::text[])))
        AND ($9::text IS NULL OR $9 = ANY(d.sources))
        AND ($10::text IS NULL OR r.created_by = $10)
      GROUP BY d.asset ORDER BY d.asset`,
    sumParams(q),
  );
  return rows.map((r) => ({ asset: r.asset, total: normalizeNumeric(r.total) }));
}

export async function recordDispatch(
  client: Client,
  r: {
    movement_id: string;
    rule_set_version: number;
    asset: string;
    amount: string;
    destination: string | null;
    destination_entry: string | null;
    sources: string[];
    at: Date;
  },
): Promise<void> {
  await client.query(
    `INSERT INTO policy_velocity_dispatches (movement_id, rule_set_version, asset, amount, destination, destination_entry, sources, dispatched_at)
     VALUES ($1, $2, $3, $4::numeric, $5, $6, $7::text[], $8) ON CONFLICT (movement_id) DO NOTHING`,
    [r.movement_id, r.rule_set_version, r.asset, r.amount, r.destination, r.destination_entry, r.sources, r.at],
  );
}
