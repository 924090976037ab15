import { CronExpressionParser } from 'cron-parser';
import { z } from 'zod';
import { ASSET_SYMBOL_PATTERN, DECIMAL_PATTERN, MAX_DECIMALS, scaled } from '../plan/intent-schema.ts';
import { TEMPLATE_KEY_PATTERN } from '../plan/template-schema.ts';
import { ENTRY_NAME_PATTERN, addDecimals, cmp } from './rules.ts';

/**
 * Standing orders as data (docs/policy.md, "Standing orders"): the shape of an order and what one
 * of its runs would do, from the facts the standing order service reads (the schedule's last slot,
 * the balance snapshots, the window's sum). Pure; the clock arrives as an argument.
 *
 * A trigger is one of:
 *   - schedule: a cron expression in a time zone; each slot moves `amount`;
 *   - ceiling: a watched balance above `ceiling` is swept down to `target` (default: the ceiling),
 *     once per crossing, or once per slot of its `schedule` when it has one;
 *   - floor: a watched balance below `floor` is topped up to `target`, likewise.
 */

const decimal = z.string().max(MAX_DECIMALS + 80).regex(DECIMAL_PATTERN, 'must be a decimal string such as "1000" or "0.5"');
const positive = decimal.refine((d) => d.length <= MAX_DECIMALS + 80 && DECIMAL_PATTERN.test(d) && scaled(d, MAX_DECIMALS) > 0n, 'must be above 0');

function validCron(expr: string, tz: string): boolean {
  try {
    CronExpressionParser.parse(expr, { tz });
    return true;
  } catch {
    return false;
  }
}

const scheduleSchema = z
  .strictObject({
    /** Five fields (minute hour day month weekday), as pg-boss schedules read them. */
    cron: z.string().min(9).max(100),
    /** IANA time zone; absent: the operator's (FERRY_OPERATOR_TIME_ZONE). */
    time_zone: z.string().min(1).max(64).optional(),
  })
  .refine((s) => s.cron.trim().split(/\s+/).length === 5, { message: 'a schedule is five cron fields: minute hour day month weekday' });

const balanceSchema = z.strictObject({
  /** The watched balance (GET /v3/balances): chain, wallet and asset as the balance sweep names them. */
  chain: z.string().min(1).max(64),
  wallet: z.string().min(1).max(128),
  asset: z.string().min(1).max(128),
});

export const triggerSchema = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.literal('schedule'), schedule: scheduleSchema, amount: positive }),
  z.strictObject({ kind: z.literal('ceiling'), balance: balanceSchema, ceiling: decimal, target: decimal.optional(), schedule: scheduleSchema.optional() }),
  z.strictObject({ kind: z.literal('floor'), balance: balanceSchema, floor: decimal, target: decimal, schedule: scheduleSchema.optional() }),
]);
export type StandingOrderTrigger = z.output<typeof triggerSchema>;

export const standingOrderInputSchema = z.strictObject({
  name: z.string().regex(ENTRY_NAME_PATTERN, 'names are lowercase letters, digits, "_", "." or "-" (1-64)'),
  template_key: z.string().regex(TEMPLATE_KEY_PATTERN, 'must be a template key'),
  /** The intent's fixed fields; a run adds amount and destination. */
  intent: z.record(z.string(), z.unknown()).default({}),
  asset: z.string().regex(ASSET_SYMBOL_PATTERN, 'must be an asset symbol'),
  /** Book entry names: a run goes to the first. */
  destinations: z.array(z.string().regex(ENTRY_NAME_PATTERN, 'must be a book entry name')).min(1).max(20),
  max_per_run: positive,
  max_per_window: positive,
  window_seconds: z.number().int().min(60).max(31 * 24 * 3600),
  trigger: triggerSchema,
  expires_at: z.iso.datetime({ offset: true }),
});
export type StandingOrderInput = z.output<typeof standingOrderInputSchema>;

/** What is wrong with an order its shape alone cannot say (empty when nothing). */
export function standingOrderProblems(o: StandingOrderInput, operatorTimeZone: string, now: Date): string[] {
  const problems: string[] = [];
  if (cmp(o.max_per_run, o.max_per_window) > 0) problems.push('max_per_run is above max_per_window');
  if (Date.parse(o.expires_at) <= now.getTime()) problems.push('expires_at is not in the future');
  const t = o.trigger;
  const schedule = 'schedule' in t ? t.schedule : undefined;
  if (schedule && !validCron(schedule.cron, schedule.time_zone ?? operatorTimeZone)) problems.push(`schedule "${schedule.cron}" (${schedule.time_zone ?? operatorTimeZone}) is not a valid cron expression and time zone`);
  if (t.kind === 'ceiling' && t.target !== undefined && cmp(t.target, t.ceiling) > 0) problems.push('a ceiling trigger sweeps down to a target at or below its ceiling');
  if (t.kind === 'floor' && cmp(t.target, t.floor) < 0) problems.push('a floor trigger tops up to a target at or above its floor');
  if ('intent' in o && ('amount' in o.intent || 'destination' in o.intent)) problems.push('the intent leaves amount and destination to each run');
  return problems;
}

/** The last slot of a schedule at or before `now`, in its time zone. */
export function lastSlot(schedule: { cron: string; time_zone?: string }, operatorTimeZone: string, now: Date): Date {
  const it = CronExpressionParser.parse(schedule.cron, { currentDate: new Date(now.getTime() + 1), tz: schedule.time_zone ?? operatorTimeZone });
  return it.prev().toDate();
}

/** A balance snapshot in the asset's units, exactly ("1500.25"). */
export function unitsOf(baseUnits: string, decimals: number): string {
  const negative = baseUnits.startsWith('-');
  const digits = (negative ? baseUnits.slice(1) : baseUnits).padStart(decimals + 1, '0');
  const whole = decimals === 0 ? digits : digits.slice(0, -decimals);
  const fraction = decimals === 0 ? '' : digits.slice(-decimals).replace(/0+$/, '');
  return `${negative ? '-' : ''}${whole.replace(/^0+(?=\d)/, '')}${fraction ? `.${fraction}` : ''}`;
}

/** a - b for decimal strings with a >= b, exactly. */
export function subtractDecimals(a: string, b: string): string {
  const units = scaled(a, MAX_DECIMALS) - scaled(b, MAX_DECIMALS);
  if (units < 0n) throw new Error('subtractDecimals: negative result');
  return addDecimals(unitsOf(units.toString(), MAX_DECIMALS), '0');
}

/** What the service read for one due check of an order. */
export interface RunFacts {
  /** The schedule's last slot (schedule triggers, or balance triggers with a schedule). */
  slot: Date | null;
  /** The latest balance snapshot, in units; null when there is none. */
  balance: string | null;
  /** The first snapshot of the balance's current excursion past the threshold (its crossing), when there is one. */
  crossingSnapshotId: string | null;
}

export interface PlannedRun {
  /** The run's unique key within its order: the slot or the crossing. */
  slotKey: string;
  /** What to move; null: nothing to move at this slot (the balance is within bounds). */
  amount: string | null;
}

/**
 * What a due check of the order would run, or null when there is no slot or crossing to run for.
 * `activeSince`: slots before the order was active never run.
 */
export function planRun(trigger: StandingOrderTrigger, facts: RunFacts, activeSince: Date): PlannedRun | null {
  const slotKey = facts.slot && facts.slot.getTime() >= activeSince.getTime() ? `slot:${facts.slot.toISOString()}` : null;
  if (trigger.kind === 'schedule') return slotKey ? { slotKey, amount: trigger.amount } : null;
  const scheduled = trigger.schedule !== undefined;
  if (scheduled && !slotKey) return null;
  if (facts.balance === null) return null;
  if (trigger.kind === 'ceiling') {
    const over = cmp(facts.balance, trigger.ceiling) > 0;
    if (!over) return scheduled ? { slotKey: slotKey!, amount: null } : null;
    const amount = subtractDecimals(facts.balance, trigger.target ?? trigger.ceiling);
    if (scheduled) return { slotKey: slotKey!, amount };
    return facts.crossingSnapshotId ? { slotKey: `crossing:${facts.crossingSnapshotId}`, amount } : null;
  }
  const under = cmp(facts.balance, trigger.floor) < 0;
  if (!under) return scheduled ? { slotKey: slotKey!, amount: null } : null;
  const amount = subtractDecimals(trigger.target, facts.balance);
  if (scheduled) return { slotKey: slotKey!, amount };
  return facts.crossingSnapshotId ? { slotKey: `crossing:${facts.crossingSnapshotId}`, amount } : null;
}

/** Whether a run of `amount` keeps the order's bounds, given what its window already moved. */
export function withinBounds(o: { max_per_run: string; max_per_window: string }, amount: string, windowUsed: string): { ok: true } | { ok: false; bound: 'max_per_run' | 'max_per_window' } {
  if (cmp(amount, o.max_per_run) > 0) return { ok: false, bound: 'max_per_run' };
  if (cmp(addDecimals(windowUsed, amount), o.max_per_window) > 0) return { ok: false, bound: 'max_per_window' };
  return { ok: true };
}
