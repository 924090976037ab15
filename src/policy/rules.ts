import { z } from 'zod';
import { executorKeyOf, signerKeyOf } from '../plan/bindings.ts';
import { ASSET_SYMBOL_PATTERN, DECIMAL_PATTERN, MAX_DECIMALS, scaled } from '../plan/intent-schema.ts';
import { TEMPLATE_KEY_PATTERN } from '../plan/template-schema.ts';

/**
 * The treasury policy as data (docs/policy.md): the shapes of an address book entry and of a rule
 * set, and what a rule set says about one movement. Pure: the policy service (src/services/policy.ts)
 * reads the book and the live rule set and hands them in with the movement's facts.
 *
 * A rule set is an ordered list of rules, first match wins. A rule matches on template, lane,
 * asset, source (the signer or account its nodes move funds from), destination (a book entry, its
 * kind, or not in the book), amount (in the asset, or in a reference currency through a price
 * source) and requester; its action allows, blocks with a reason, or requires N approvals from
 * distinct principals (optionally only from named ones). A movement no rule matches is refused.
 * Velocity limits bound the sum of one asset's amounts, or the value of several assets' in a
 * reference currency (per destination, per source, per requester if asked), over a rolling window.
 */

export const ENTRY_NAME_PATTERN = /^[a-z0-9][a-z0-9_.-]{0,63}$/;
export const RULE_ID_PATTERN = /^[a-z0-9][a-z0-9_.-]{0,63}$/;
const PRINCIPAL_NAME = /^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$/;
const LANE_PATTERN = /^[a-z][a-z0-9_-]{0,31}$/;
/** A source as the rules name it: a signer key (`hot`) or an account key (`binance_main`), as the configuration spells them. */
export const SOURCE_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;
/** A reference currency (`USD`, `EUR`): what a price feed quotes in. */
export const CURRENCY_PATTERN = /^[A-Z][A-Z0-9]{1,9}$/;
const printable = (max: number) => z.string().min(1).max(max).regex(/^[\x20-\x7e]+$/, 'must be printable ASCII');
const noSpaces = (max: number) => z.string().min(1).max(max).regex(/^[\x21-\x7e]+$/, 'must be printable, without spaces');

const decimal = z.string().max(MAX_DECIMALS + 80).regex(DECIMAL_PATTERN, 'must be a decimal string such as "1000" or "0.5"');
const symbol = z.string().regex(ASSET_SYMBOL_PATTERN, 'must be an asset symbol');
const entryName = z.string().regex(ENTRY_NAME_PATTERN, 'book entry names are lowercase letters, digits, "_", "." or "-" (1-64)');
const principalName = z.string().regex(PRINCIPAL_NAME, 'must be a principal name');

// ---------------------------------------------------------------------------------------------
// The address book

export const entryKinds = ['internal', 'external'] as const;
export type EntryKind = (typeof entryKinds)[number];

export const addressBookEntrySchema = z.strictObject({
  name: entryName,
  /** The chain or venue ("ethereum", "base", "binance"). */
  network: z.string().regex(LANE_PATTERN, 'network is lowercase letters, digits, "_" or "-" (1-32)'),
  address: noSpaces(256),
  /** The memo or tag the lane needs beside the address. */
  tag: noSpaces(128).nullable().default(null),
  owner: printable(200),
  kind: z.enum(entryKinds),
  notes: z.string().max(2000).nullable().default(null),
});
export type AddressBookEntry = z.output<typeof addressBookEntrySchema>;

/** How an address is compared: 0x-hex addresses without regard to case, anything else exactly. */
export function addressKey(address: string): string {
  return /^0x[0-9a-fA-F]+$/.test(address) ? address.toLowerCase() : address;
}

// ---------------------------------------------------------------------------------------------
// Rules and limits

const destinationMatch = z
  .strictObject({
    /** true: the destination is a book entry; false: it is not (or the intent names none). */
    in_book: z.boolean().optional(),
    kinds: z.array(z.enum(entryKinds)).min(1).max(2).optional(),
    entries: z.array(entryName).min(1).max(500).optional(),
  })
  .refine((d) => d.in_book !== undefined || d.kinds || d.entries, { message: 'a destination match names in_book, kinds or entries' });

const matchSchema = z.strictObject({
  templates: z.array(z.string().regex(TEMPLATE_KEY_PATTERN, 'must be a template key')).min(1).max(200).optional(),
  /** The lanes the movement runs on (from its nodes' executors: exec.<lane>.*); every one must be listed. */
  lanes: z.array(z.string().regex(LANE_PATTERN, 'must be a lane name')).min(1).max(20).optional(),
  assets: z.array(symbol).min(1).max(100).optional(),
  /**
   * The sources the movement's nodes move funds from (a signing node's signer key, an exchange
   * node's account); every one must be listed.
   */
  sources: z.array(z.string().regex(SOURCE_PATTERN, 'must be a signer or account key')).min(1).max(200).optional(),
  destination: destinationMatch.optional(),
  /**
   * at_least inclusive, below exclusive. In the asset (then the rule names its assets), or with
   * `currency` in that reference currency, read through the asset's price feed.
   */
  amount: z
    .strictObject({
      at_least: decimal.optional(),
      below: decimal.optional(),
      currency: z.string().regex(CURRENCY_PATTERN, 'must be a currency code such as USD').optional(),
    })
    .refine((a) => a.at_least !== undefined || a.below !== undefined, { message: 'an amount match names at_least or below' })
    .optional(),
  /** Principal names; the movement's creator must be one of them. */
  requesters: z.array(principalName).min(1).max(500).optional(),
});

const actionSchema = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('allow') }),
  z.strictObject({ type: z.literal('block'), reason: printable(500) }),
  z.strictObject({
    type: z.literal('require_approvals'),
    /** Distinct principals, never the requester; the global quorum (FERRY_APPROVAL_QUORUM) is a floor. */
    approvals: z.number().int().min(1).max(20),
    /** Only these principals (by name) count; absent: any principal that may approve. */
    from: z.array(principalName).min(1).max(500).optional(),
    /** Only members of these groups (the rule set's `groups`) count, besides those in `from`. */
    from_groups: z.array(z.string().regex(RULE_ID_PATTERN, 'must be a group name')).min(1).max(50).optional(),
  }),
]);

export const ruleSchema = z.strictObject({
  id: z.string().regex(RULE_ID_PATTERN, 'rule ids are lowercase letters, digits, "_", "." or "-" (1-64)'),
  description: z.string().max(500).optional(),
  match: matchSchema.default({}),
  action: actionSchema,
});
export type PolicyRule = z.output<typeof ruleSchema>;

export const limitSchema = z.strictObject({
  id: z.string().regex(RULE_ID_PATTERN, 'limit ids are lowercase letters, digits, "_", "." or "-" (1-64)'),
  description: z.string().max(500).optional(),
  /** The asset whose amounts it sums (a limit in the asset). A limit names `asset` or `currency`. */
  asset: symbol.optional(),
  /**
   * A reference currency (a limit in value): the window's amounts of every asset (of `assets` when
   * listed) are valued in it through the price feeds, and summed.
   */
  currency: z.string().regex(CURRENCY_PATTERN, 'must be a currency code such as USD').optional(),
  /** With `currency`: only movements of these assets count and are checked (absent: every asset). */
  assets: z.array(symbol).min(1).max(100).optional(),
  /** The rolling window, seconds (one minute to 31 days). */
  window_seconds: z.number().int().min(60).max(31 * 24 * 3600),
  /** The most the window's movements may add up to: in the asset, or in `currency`. */
  max_amount: decimal,
  /** true: one sum per destination address; false: one sum over all destinations. */
  per_destination: z.boolean().default(false),
  /** true: one sum per source (a movement counts in the sum of each of its sources). */
  per_source: z.boolean().default(false),
  /** true: one sum per requester (the principal that created the movement). */
  per_requester: z.boolean().default(false),
  /** Only movements whose destination matches count and are checked (absent: all). */
  destination: destinationMatch.optional(),
});
export type VelocityLimit = z.output<typeof limitSchema>;

export const groupSchema = z.strictObject({
  name: z.string().regex(RULE_ID_PATTERN, 'group names are lowercase letters, digits, "_", "." or "-" (1-64)'),
  description: z.string().max(500).optional(),
  /** Principal names. */
  members: z.array(principalName).min(1).max(500),
});
export type ApproverGroup = z.output<typeof groupSchema>;

export const ruleSetSchema = z.strictObject({
  rules: z.array(ruleSchema).max(500),
  limits: z.array(limitSchema).max(200).default([]),
  /** Named groups of principals a tier's approvals may come from (`from_groups`). */
  groups: z.array(groupSchema).max(100).default([]),
});
export type RuleSet = z.output<typeof ruleSetSchema>;

/**
 * The rule set with every tier's `from_groups` read into its `from` (the union of the named
 * principals and the groups' members), as it is stored and decided: a group's members are part of
 * the rule set version, changed only by a new, reviewed version. Unknown groups are left for
 * ruleSetProblems to name.
 */
export function expandGroups(set: RuleSet): RuleSet {
  const members = new Map(set.groups.map((g) => [g.name, g.members]));
  const rules = set.rules.map((r) => {
    const a = r.action;
    if (a.type !== 'require_approvals' || !a.from_groups) return r;
    const from = [...new Set([...(a.from ?? []), ...a.from_groups.flatMap((g) => members.get(g) ?? [])])].sort();
    return { ...r, action: { ...a, from } };
  });
  return { ...set, rules };
}

/** What is wrong with a rule set its shape alone cannot say, as sentences (empty when nothing). */
export function ruleSetProblems(set: RuleSet): string[] {
  const problems: string[] = [];
  const seen = new Set<string>();
  for (const r of set.rules) {
    if (seen.has(r.id)) problems.push(`rule id "${r.id}" is used twice`);
    seen.add(r.id);
    const m = r.match;
    if (m.amount && !m.amount.currency && !m.assets) problems.push(`rule "${r.id}" matches an amount without naming its assets: an amount is in one asset`);
    if (m.amount?.at_least !== undefined && m.amount.below !== undefined && cmp(m.amount.at_least, m.amount.below) >= 0) {
      problems.push(`rule "${r.id}" matches amounts at least ${m.amount.at_least} and below ${m.amount.below}: none`);
    }
    if (m.destination?.in_book === false && (m.destination.kinds || m.destination.entries)) {
      problems.push(`rule "${r.id}" matches destinations outside the book by book kind or entry: none`);
    }
    if (r.action.type === 'require_approvals') {
      for (const g of r.action.from_groups ?? []) if (!set.groups.some((x) => x.name === g)) problems.push(`rule "${r.id}" takes approvals from group "${g}", which the rule set does not define`);
    }
    if (r.action.type === 'require_approvals' && r.action.from && new Set(r.action.from).size < r.action.approvals) {
      problems.push(`rule "${r.id}" requires ${r.action.approvals} approvals from ${new Set(r.action.from).size} named principals`);
    }
  }
  const groups = new Set<string>();
  for (const g of set.groups) {
    if (groups.has(g.name)) problems.push(`group "${g.name}" is defined twice`);
    groups.add(g.name);
  }
  const limits = new Set<string>();
  for (const l of set.limits) {
    if (limits.has(l.id)) problems.push(`limit id "${l.id}" is used twice`);
    limits.add(l.id);
    if (scaled(l.max_amount, MAX_DECIMALS) === 0n) problems.push(`limit "${l.id}" has max_amount 0; block the asset with a rule instead`);
    if (l.asset === undefined && l.currency === undefined) problems.push(`limit "${l.id}" names neither an asset nor a currency: it sums one asset, or values every asset in a currency`);
    if (l.asset !== undefined && l.currency !== undefined) problems.push(`limit "${l.id}" names an asset and a currency: name the asset in \`assets\` to value only it`);
    if (l.assets && l.currency === undefined) problems.push(`limit "${l.id}" lists assets without a currency: amounts of different assets add up only as values`);
  }
  return problems;
}

/** Compares two decimal strings exactly. */
export function cmp(a: string, b: string): number {
  const x = scaled(a, MAX_DECIMALS);
  const y = scaled(b, MAX_DECIMALS);
  return x < y ? -1 : x > y ? 1 : 0;
}

/** The sum of two decimal strings, exactly, in its shortest form. */
export function addDecimals(a: string, b: string): string {
  const units = scaled(a, MAX_DECIMALS) + scaled(b, MAX_DECIMALS);
  const digits = units.toString().padStart(MAX_DECIMALS + 1, '0');
  const whole = digits.slice(0, -MAX_DECIMALS).replace(/^0+(?=\d)/, '');
  const fraction = digits.slice(-MAX_DECIMALS).replace(/0+$/, '');
  return fraction ? `${whole}.${fraction}` : whole;
}

// ---------------------------------------------------------------------------------------------
// A movement as the policy reads it

export interface MovementFacts {
  templateKey: string;
  /** The lanes of its nodes' executors (exec.<lane>.*), sorted, without repeats. */
  lanes: string[];
  /** The intent's asset, upper case; null when it names none. */
  asset: string | null;
  /** The intent's amount as a decimal string; null when it names none. */
  amount: string | null;
  /** The intent's destination; null when it names none. */
  destination: { address: string; tag: string | null } | null;
  /**
   * Where its nodes move funds from, sorted, without repeats: each signing node's signer key, each
   * other node's account (its executor binding's `account`, else its config's, as the exchange lane
   * reads it). Read from the compiled plan only, never from the intent, so a requester cannot add one.
   */
  sources: string[];
  /** The book entry the destination is, if any. */
  entry: { name: string; kind: EntryKind } | null;
  /** The creator: its actor id and principal name (null when it names no principal). */
  requester: { actor: string; name: string | null };
}

/** The lane of an executor key: `exec.evm.native_transfer` is on the evm lane. */
export function laneOf(executorKey: string): string {
  const parts = executorKey.split('.');
  return parts[0] === 'exec' && parts.length > 1 ? parts[1]! : parts[0]!;
}

/** A plan node as the policy reads it. */
export interface PolicyNode {
  executor_binding?: unknown;
  signer_binding?: unknown;
  config?: unknown;
}

/** The source a node moves funds from: its signer key, else the account it names; null when neither. */
export function sourceOf(n: PolicyNode): string | null {
  const signer = signerKeyOf(n.signer_binding);
  if (signer) return signer;
  const field = (o: unknown) => (o && typeof o === 'object' && !Array.isArray(o) ? (o as Record<string, unknown>).account : undefined);
  const account = field(n.executor_binding) ?? field(n.config);
  return typeof account === 'string' && account !== '' ? account : null;
}

/** The intent's facts (asset, amount, destination) and the plan's lanes and sources. */
export function intentFacts(
  intent: Readonly<Record<string, unknown>>,
  nodes: ReadonlyArray<PolicyNode>,
): Pick<MovementFacts, 'lanes' | 'asset' | 'amount' | 'destination' | 'sources'> {
  const lanes = [...new Set(nodes.map((n) => executorKeyOf(n.executor_binding)).filter((k): k is string => !!k).map(laneOf))].sort();
  const sources = [...new Set(nodes.map(sourceOf).filter((s): s is string => s !== null))].sort();
  const asset = typeof intent.asset === 'string' && intent.asset !== '' ? intent.asset.toUpperCase() : null;
  const a = intent.amount;
  const amount =
    typeof a === 'string' && DECIMAL_PATTERN.test(a) ? a : typeof a === 'number' && Number.isSafeInteger(a) && a >= 0 ? String(a) : null;
  const d = intent.destination;
  let destination: MovementFacts['destination'] = null;
  if (typeof d === 'string' && d !== '') destination = { address: d, tag: null };
  else if (d && typeof d === 'object' && !Array.isArray(d)) {
    const o = d as Record<string, unknown>;
    if (typeof o.address === 'string' && o.address !== '') destination = { address: o.address, tag: typeof o.tag === 'string' ? o.tag : null };
  }
  return { lanes, asset, amount, destination, sources };
}

function destinationMatches(m: z.output<typeof destinationMatch>, f: MovementFacts): boolean {
  if (m.in_book !== undefined && m.in_book !== (f.entry !== null)) return false;
  if (m.kinds && !(f.entry && m.kinds.includes(f.entry.kind))) return false;
  if (m.entries && !(f.entry && m.entries.includes(f.entry.name))) return false;
  return true;
}

/**
 * A price as the rules read it: the answer of the asset's feed in a reference currency, already
 * judged by the price source (fresh, positive, from a complete round), or why there is none.
 */
export type PriceReading =
  | {
      ok: true;
      asset: string;
      currency: string;
      /** The feed's answer as an integer string, with `decimals` decimals (Chainlink's int256 answer). */
      answer: string;
      decimals: number;
      round_id: string;
      updated_at: string;
      /** Where it was read: `<chain id>:<feed address>`. */
      feed: string;
    }
  | {
      ok: false;
      asset: string;
      currency: string;
      /** PRICE_FEED_NOT_CONFIGURED, PRICE_STALE, PRICE_NOT_POSITIVE, PRICE_ROUND_INCOMPLETE, PRICE_UNREADABLE. */
      code: string;
      message: string;
      feed: string | null;
    };

/** The key of a price: `USDC/USD`. */
export const priceKey = (asset: string, currency: string) => `${asset.toUpperCase()}/${currency}`;

/** The movement's facts with the prices read for it (by priceKey). */
export type FactsWithPrices = MovementFacts & { prices?: Readonly<Record<string, PriceReading>> };

/**
 * The value of `amount` of an asset in its reference currency compared with `bound`, exactly:
 * amount * answer / 10^decimals against bound (-1, 0, 1).
 */
export function compareValue(amount: string, price: { answer: string; decimals: number }, bound: string): number {
  const left = scaled(amount, MAX_DECIMALS) * BigInt(price.answer);
  const right = scaled(bound, MAX_DECIMALS) * 10n ** BigInt(price.decimals);
  return left < right ? -1 : left > right ? 1 : 0;
}

/** The value of `amount` in the price's currency, as a decimal string (rounded down to 2 places below a unit of the answer). */
export function valueOf(amount: string, price: { answer: string; decimals: number }): string {
  const units = (scaled(amount, MAX_DECIMALS) * BigInt(price.answer)) / 10n ** BigInt(price.decimals);
  const digits = units.toString().padStart(MAX_DECIMALS + 1, '0');
  const whole = digits.slice(0, -MAX_DECIMALS).replace(/^0+(?=\d)/, '');
  const fraction = digits.slice(-MAX_DECIMALS).replace(/0+$/, '');
  return fraction ? `${whole}.${fraction}` : whole;
}

type Match = { matches: boolean; unreadable?: Extract<PriceReading, { ok: false }> };

/**
 * Whether a rule matches the movement: every condition it names holds. An amount in a reference
 * currency whose price could not be read (stale, not positive, an incomplete round, no feed) is
 * `unreadable` once every other condition holds: the rule can neither be applied nor skipped.
 */
export function ruleMatch(rule: PolicyRule, f: FactsWithPrices): Match {
  const m = rule.match;
  const no = { matches: false };
  if (m.templates && !m.templates.includes(f.templateKey)) return no;
  if (m.lanes && (f.lanes.length === 0 || !f.lanes.every((l) => m.lanes!.includes(l)))) return no;
  if (m.assets && !(f.asset && m.assets.some((a) => a.toUpperCase() === f.asset))) return no;
  if (m.sources && (f.sources.length === 0 || !f.sources.every((s) => m.sources!.includes(s)))) return no;
  if (m.destination && !destinationMatches(m.destination, f)) return no;
  if (m.requesters && !(f.requester.name && m.requesters.includes(f.requester.name))) return no;
  if (m.amount) {
    if (f.amount === null) return no;
    if (m.amount.currency) {
      if (f.asset === null) return no;
      const key = priceKey(f.asset, m.amount.currency);
      const price: PriceReading = f.prices?.[key] ?? {
        ok: false,
        asset: f.asset,
        currency: m.amount.currency,
        code: 'PRICE_UNREADABLE',
        message: `no price of ${key} was read for this check`,
        feed: null,
      };
      if (!price.ok) return { matches: false, unreadable: price };
      if (m.amount.at_least !== undefined && compareValue(f.amount, price, m.amount.at_least) < 0) return no;
      if (m.amount.below !== undefined && compareValue(f.amount, price, m.amount.below) >= 0) return no;
    } else {
      if (m.amount.at_least !== undefined && cmp(f.amount, m.amount.at_least) < 0) return no;
      if (m.amount.below !== undefined && cmp(f.amount, m.amount.below) >= 0) return no;
    }
  }
  return { matches: true };
}

/** Whether a rule matches the movement (an unreadable price is not a match: see ruleMatch). */
export function ruleMatches(rule: PolicyRule, f: FactsWithPrices): boolean {
  return ruleMatch(rule, f).matches;
}

/** The prices the rule set's reference-currency amounts need for this movement (none without an asset and an amount). */
export function pricesNeeded(set: { rules: readonly PolicyRule[] } | null, f: Pick<MovementFacts, 'asset' | 'amount'>): { asset: string; currency: string }[] {
  if (!set || !f.asset || f.amount === null) return [];
  const currencies = new Set<string>();
  for (const r of set.rules) if (r.match.amount?.currency) currencies.add(r.match.amount.currency);
  return [...currencies].sort().map((currency) => ({ asset: f.asset!, currency }));
}

export interface PolicyDecision {
  /** The live rule set's version; null: there is none, and movements are not policy-checked. */
  ruleSetVersion: number | null;
  /** The rule that matched; null when none did (or there is no rule set). */
  ruleId: string | null;
  /**
   * 'none': no rule matched, so the movement is refused. 'price_unavailable': the rule that would
   * decide compares a reference-currency amount whose price could not be read: refused (fail closed).
   */
  action: 'allow' | 'block' | 'require_approvals' | 'none' | 'no_policy' | 'price_unavailable';
  /** Approvals the rule requires (require_approvals), else null. */
  approvals: number | null;
  /** The principals whose approvals count, or null for any approver. */
  from: string[] | null;
  reason: string | null;
  /** Why the price could not be used (price_unavailable). */
  price?: Extract<PriceReading, { ok: false }>;
}

/** What the rule set says about the movement: the first rule that matches. */
export function decide(set: { version: number; rules: PolicyRule[] } | null, f: FactsWithPrices): PolicyDecision {
  if (!set) return { ruleSetVersion: null, ruleId: null, action: 'no_policy', approvals: null, from: null, reason: null };
  const base = { ruleSetVersion: set.version, approvals: null, from: null, reason: null };
  for (const rule of set.rules) {
    const m = ruleMatch(rule, f);
    // Fail closed: a rule that might decide but cannot be evaluated refuses; skipping it could let a later rule allow.
    if (m.unreadable) return { ...base, ruleId: rule.id, action: 'price_unavailable', reason: m.unreadable.message, price: m.unreadable };
    if (!m.matches) continue;
    const a = rule.action;
    if (a.type === 'allow') return { ...base, ruleId: rule.id, action: 'allow' };
    if (a.type === 'block') return { ...base, ruleId: rule.id, action: 'block', reason: a.reason };
    return { ...base, ruleId: rule.id, action: 'require_approvals', approvals: a.approvals, from: a.from ?? null };
  }
  return { ...base, ruleId: null, action: 'none' };
}

/** Whether the decision lets the movement be created. */
export const allows = (d: PolicyDecision) => d.action === 'allow' || d.action === 'require_approvals' || d.action === 'no_policy';

/** The quorum a movement gets: the rule's approvals, never fewer than the global quorum. */
export function quorumOf(d: PolicyDecision, globalQuorum: number): number {
  return Math.max(globalQuorum, d.approvals ?? 0);
}

/** The unit a limit's max_amount is in: its currency, else its asset. */
export const limitUnit = (l: VelocityLimit): string => l.currency ?? l.asset ?? '?';

/** Whether a limit bounds movements of this asset. */
export function limitCovers(l: VelocityLimit, asset: string): boolean {
  if (l.currency !== undefined) return !l.assets || l.assets.some((a) => a.toUpperCase() === asset);
  return l.asset !== undefined && l.asset.toUpperCase() === asset;
}

/** An exact value in a currency: units / 10^scale. */
export interface Value {
  units: bigint;
  scale: number;
}

/**
 * The value of amounts of several assets in one currency, each at its price, exactly: the sum of
 * amount * answer / 10^decimals, over a common denominator.
 */
export function valueOfAmounts(parts: ReadonlyArray<{ amount: string; price: { answer: string; decimals: number } }>): Value {
  const d = Math.max(0, ...parts.map((p) => p.price.decimals));
  let units = 0n;
  for (const p of parts) units += scaled(p.amount, MAX_DECIMALS) * BigInt(p.price.answer) * 10n ** BigInt(d - p.price.decimals);
  return { units, scale: MAX_DECIMALS + d };
}

/** A value compared with a decimal bound, exactly (-1, 0, 1). */
export function compareWithBound(v: Value, bound: string): number {
  const right = scaled(bound, MAX_DECIMALS) * 10n ** BigInt(v.scale - MAX_DECIMALS);
  return v.units < right ? -1 : v.units > right ? 1 : 0;
}

/** A value as a decimal string (rounded down to MAX_DECIMALS places). */
export function formatValue(v: Value): string {
  const units = v.units / 10n ** BigInt(v.scale - MAX_DECIMALS);
  const digits = units.toString().padStart(MAX_DECIMALS + 1, '0');
  const whole = digits.slice(0, -MAX_DECIMALS).replace(/^0+(?=\d)/, '');
  const fraction = digits.slice(-MAX_DECIMALS).replace(/0+$/, '');
  return fraction ? `${whole}.${fraction}` : whole;
}

/** One velocity limit that applies to a movement, with the sum it bounds named by `key`. */
export interface ApplicableLimit {
  limit: VelocityLimit;
  /** The destination whose sum it is (per_destination), else null. */
  destination: string | null;
  /** The source whose sum it is (per_source), else null: all sources. */
  source: string | null;
  /** The requester (actor id) whose sum it is (per_requester), else null: all requesters. */
  requester: string | null;
  /** Names the sum: what the lock that serialises it is keyed by. */
  key: string;
}

/**
 * The limits of the rule set that bound this movement (its asset, and destination filter). A
 * per_source limit bounds one sum per source of the movement (a movement with two sources counts
 * in both; one with none counts against the sum over all sources); a per_requester limit the sum
 * of the movement's creator.
 */
export function applicableLimits(limits: readonly VelocityLimit[], f: MovementFacts): ApplicableLimit[] {
  if (!f.asset) return [];
  const out: ApplicableLimit[] = [];
  for (const limit of limits) {
    if (!limitCovers(limit, f.asset)) continue;
    if (limit.destination && !destinationMatches(limit.destination, f)) continue;
    const destination = limit.per_destination ? destinationKey(f.destination) : null;
    const requester = limit.per_requester ? f.requester.actor : null;
    const sources: (string | null)[] = limit.per_source && f.sources.length > 0 ? f.sources : [null];
    for (const source of sources) {
      // A limit in a currency has one sum over its assets: one key (one lock) whatever the movement's asset.
      let key = `${limit.id}:${limit.currency !== undefined ? `=${limit.currency}` : f.asset}:${destination ?? '*'}`;
      if (limit.per_source) key += `:source=${source ?? '*'}`;
      if (limit.per_requester) key += `:requester=${requester}`;
      out.push({ limit, destination, source, requester, key });
    }
  }
  // One order for every transaction that locks several: no two wait on each other.
  return out.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

/** A destination as the velocity sums group it (address key and tag). */
export function destinationKey(d: MovementFacts['destination']): string | null {
  if (!d) return null;
  return d.tag ? `${addressKey(d.address)}#${d.tag}` : addressKey(d.address);
}
