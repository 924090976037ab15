import type { FerryConfig } from '../config.ts';
import { FerryError, NotFoundError, ValidationError } from '../errors.ts';
import {
  STANDING_ORDER_EXPIRER,
  STANDING_ORDER_MACHINE_ID,
  STANDING_ORDER_MACHINE_VERSION,
  standingOrderMachine,
  standingOrderRefusalOf,
  type StandingOrderContext,
  type StandingOrderEvent,
  type StandingOrderState,
} from '../machines/standing-order-machine.ts';
import { standingOrderRunsTotal } from '../metrics.ts';
import { writeAudit } from '../persistence/audit.ts';
import { withTransaction, type Client, type Pool } from '../persistence/db.ts';
import { appendEntityTransition } from '../persistence/entity-transitions.ts';
import { getAddressBookEntry, liveRuleSet } from '../persistence/policy.ts';
import {
  balanceFacts,
  dueStandingOrders,
  finishRun,
  getStandingOrder,
  insertRun,
  leaseRun,
  insertStandingOrder,
  listStandingOrders,
  lockStandingOrder,
  pendingRuns,
  runsOf,
  standingOrderTransitions,
  updateStandingOrder,
  windowUsed,
  type StandingOrderRow,
  type StandingOrderRunRow,
} from '../persistence/standing-orders.ts';
import { allows, decide, quorumOf } from '../policy/rules.ts';
import { MAX_DECIMALS, scaled } from '../plan/intent-schema.ts';
import {
  lastSlot,
  planRun,
  standingOrderInputSchema,
  standingOrderProblems,
  unitsOf,
  withinBounds,
  type StandingOrderInput,
} from '../policy/standing-orders.ts';
import type { TransitionDeps } from '../durable/transition.ts';
import { approveMovement, createMovement, pricesOf } from './movements.ts';
import { movementFacts, pricesReadAhead, readPrices } from './policy.ts';
import { getTemplateVersion } from '../persistence/templates.ts';
import type { PriceSource } from '../prices/price-source.ts';
import { deliverToRow, type RowMachine } from '../durable/row-machine.ts';

/**
 * Standing orders (docs/policy.md, "Standing orders"): the one owner of writes to standing orders
 * and their runs.
 *
 * An order is proposed by one principal and becomes ACTIVE when as many distinct other principals
 * as the policy requires for its maximum per run have approved it. Each change locks the order's
 * row, is decided by the standing order machine, and writes the row, one `transitions` row and the
 * audit event in one transaction.
 *
 * A run is created once per schedule slot or trigger crossing: its row's unique key (order, slot)
 * is taken first, so a restart or a second process finds it taken and creates nothing; its
 * movement is then created through the movement service under an idempotency key of the same slot,
 * so a process that stopped between the two steps leaves a pending run the next check carries on,
 * never a second movement. A run within the order's bounds is approved by the order's approvers
 * (recorded with the standing order's id; the policy still checks each approval, and the signer and
 * the dispatcher what follows); a run above them waits for people like any movement.
 */

export interface StandingOrderDeps {
  pool: Pool;
  config: Pick<FerryConfig, 'approvalQuorum' | 'approvalTtlSeconds' | 'callbackAllowedHosts' | 'operatorTimeZone'> & Partial<Pick<FerryConfig, 'file' | 'evmMaxFeePerGasCapWei'>>;
  transitions: TransitionDeps;
  now?: () => Date;
  /** Where the policy reads prices (unset: the configuration's price_feeds). */
  prices?: PriceSource | null;
}

/** How long one runner holds a pending run it carries on (a runner that died leaves it to the next after this). */
const RUN_LEASE_SECONDS = 120;

const clock = (deps: { now?: () => Date }) => (deps.now ?? (() => new Date()))();
const iso = (d: Date) => new Date(d).toISOString();
/** The actor a standing order's movements are created by. */
export const standingOrderActor = (id: string) => `standing-order:${id}`;

function contextFromRow(row: StandingOrderRow): StandingOrderContext {
  return { proposedBy: row.proposed_by, requiredApprovals: row.required_approvals, expiresAt: iso(row.expires_at), approvals: row.approvals, decidedBy: row.decided_by, reason: row.reason };
}

function refusedError(row: StandingOrderRow, event: StandingOrderEvent, why: string): FerryError {
  const details = { standing_order_id: row.id, name: row.name, state: row.proposal_state, event: event.type };
  switch (why) {
    case 'approverIsNotProposer':
      return new FerryError('FOUR_EYES_VIOLATION', `whoever proposed standing order ${row.name} cannot approve it; another person must`, details);
    case 'approverHasNotApprovedYet':
      return new FerryError('ALREADY_APPROVED', `this principal has already approved standing order ${row.name}; approvals come from distinct principals`, details);
    case 'notExpired':
      return new FerryError('STANDING_ORDER_EXPIRED', `standing order ${row.name} expired at ${iso(row.expires_at)}`, details);
    case 'givesAReason':
      return new ValidationError('a rejection needs a reason', { ...details, field: 'reason' });
    default:
      return new FerryError('STANDING_ORDER_STATE_CONFLICT', `standing order ${row.name} is ${row.proposal_state}; it does not take ${event.type}`, details);
  }
}

const orderRows: RowMachine<StandingOrderRow, StandingOrderState, StandingOrderContext, StandingOrderEvent> = {
  machine: standingOrderMachine,
  machineId: STANDING_ORDER_MACHINE_ID,
  machineVersion: STANDING_ORDER_MACHINE_VERSION,
  entityType: 'standing_order',
  context: contextFromRow,
  refusal: standingOrderRefusalOf,
  refused: refusedError,
  write: (client, row, to, c) => updateStandingOrder(client, row.id, row.row_version, { order_state: to, approvals: c.approvals, decided_by: c.decidedBy, reason: c.reason }),
};

function parseOrder(input: unknown, deps: StandingOrderDeps): StandingOrderInput {
  const parsed = standingOrderInputSchema.safeParse(input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new ValidationError(`standing order: ${issue.path.join('.') || 'order'}: ${issue.message}`, { field: issue.path.join('.') });
  }
  const problems = standingOrderProblems(parsed.data, deps.config.operatorTimeZone, clock(deps));
  if (problems.length > 0) throw new FerryError('STANDING_ORDER_INVALID', `standing order refused: ${problems[0]}`, { problems });
  return parsed.data;
}

/** What the policy requires for the order's maximum per run to its first destination: refused, or the approvals it needs. */
async function requiredApprovals(client: Client, deps: StandingOrderDeps, o: StandingOrderInput, actor: string, prices: PriceSource | null): Promise<number> {
  const entry = await getAddressBookEntry(client, o.destinations[0]!);
  const live = await liveRuleSet(client);
  // The live template's nodes: its lanes and sources are what a run's movement will have.
  const version = await getTemplateVersion(client, o.template_key);
  const facts = await movementFacts(client, {
    templateKey: o.template_key,
    intent: { ...o.intent, asset: o.asset, amount: o.max_per_run, destination: entry ? (entry.tag ? { address: entry.address, tag: entry.tag } : entry.address) : undefined },
    nodes: version?.nodes ?? [],
    createdBy: actor,
  });
  // A lookup in the prices read before this transaction opened: no RPC call while it is open.
  const decision = decide(live, { ...facts, prices: await readPrices(prices, live, facts, clock(deps)) });
  if (!allows(decision)) {
    const code = decision.action === 'block' ? 'POLICY_BLOCKED' : decision.action === 'price_unavailable' ? 'POLICY_PRICE_UNAVAILABLE' : 'POLICY_NO_MATCHING_RULE';
    throw new FerryError(code, `the policy does not allow a run of standing order ${o.name} at its maximum (rule ${decision.ruleId ?? 'none'})`, {
      rule_set_version: decision.ruleSetVersion,
      rule_id: decision.ruleId,
      reason: decision.reason,
    });
  }
  return quorumOf(decision, deps.config.approvalQuorum);
}

/** A new standing order, PROPOSED: it runs once approved by the number of principals the policy requires. */
export async function proposeStandingOrder(deps: StandingOrderDeps, input: unknown, actor: string): Promise<StandingOrderRow> {
  const o = parseOrder(input, deps);
  const now = clock(deps);
  // The price of its maximum per run, for reference-currency rules, read before the transaction opens.
  const prices = await pricesReadAhead(deps.pool, pricesOf(deps), { asset: o.asset, amount: o.max_per_run }, now);
  return withTransaction(deps.pool, async (client) => {
    for (const name of o.destinations) {
      if (!(await getAddressBookEntry(client, name))) throw new FerryError('STANDING_ORDER_INVALID', `destination ${name} is not an address book entry`, { problems: ['destination_not_in_book'], destination: name });
    }
    const required = await requiredApprovals(client, deps, o, actor, prices);
    const row = await insertStandingOrder(client, {
      name: o.name,
      template_key: o.template_key,
      intent: o.intent,
      asset: o.asset.toUpperCase(),
      destinations: o.destinations,
      max_per_run: o.max_per_run,
      max_per_window: o.max_per_window,
      window_seconds: o.window_seconds,
      trigger: o.trigger,
      expires_at: o.expires_at,
      machine_id: STANDING_ORDER_MACHINE_ID,
      machine_version: STANDING_ORDER_MACHINE_VERSION,
      order_state: 'PROPOSED',
      proposed_by: actor,
      required_approvals: required,
    });
    if (!row) throw new FerryError('STANDING_ORDER_EXISTS', `a standing order named ${o.name} exists already`, { name: o.name });
    await appendEntityTransition(client, 'standing_order', {
      machine_id: STANDING_ORDER_MACHINE_ID,
      machine_version: STANDING_ORDER_MACHINE_VERSION,
      entity_id: row.id,
      seq: 0,
      from_state: '',
      to_state: 'PROPOSED',
      event_type: 'xstate.init',
      event_payload: { proposed_by: actor, required_approvals: required, expires_at: o.expires_at },
      actor,
      at: now.toISOString(),
    });
    await writeAudit(client, { actor, action: 'standing_order.propose', entity_type: 'standing_order', entity_id: row.id, details: { name: row.name, required_approvals: required, order: o } });
    return row;
  });
}

async function deliverTo(deps: StandingOrderDeps, id: string, actor: string, event: StandingOrderEvent, action: string): Promise<StandingOrderRow> {
  return withTransaction(deps.pool, async (client) => {
    const row = await lockStandingOrder(client, id);
    if (!row) throw new NotFoundError('standing order', id);
    const d = await deliverToRow(orderRows, client, row, event, actor);
    await writeAudit(client, {
      actor,
      action,
      entity_type: 'standing_order',
      entity_id: row.id,
      details: { name: row.name, from: d.from, to: d.to, approvals: d.row.approvals.length, required_approvals: d.row.required_approvals, ...('reason' in event && event.reason ? { reason: event.reason } : {}) },
    });
    return d.row;
  });
}

export const approveStandingOrder = (deps: StandingOrderDeps, id: string, actor: string) =>
  deliverTo(deps, id, actor, { type: 'APPROVE', by: actor, at: clock(deps).toISOString() }, 'standing_order.approve');
export const rejectStandingOrder = (deps: StandingOrderDeps, id: string, actor: string, reason: string) =>
  deliverTo(deps, id, actor, { type: 'REJECT', by: actor, at: clock(deps).toISOString(), reason }, 'standing_order.reject');
export const pauseStandingOrder = (deps: StandingOrderDeps, id: string, actor: string, reason?: string) =>
  deliverTo(deps, id, actor, { type: 'PAUSE', by: actor, at: clock(deps).toISOString(), reason }, 'standing_order.pause');
export const resumeStandingOrder = (deps: StandingOrderDeps, id: string, actor: string) =>
  deliverTo(deps, id, actor, { type: 'RESUME', by: actor, at: clock(deps).toISOString() }, 'standing_order.resume');
export const revokeStandingOrder = (deps: StandingOrderDeps, id: string, actor: string, reason?: string) =>
  deliverTo(deps, id, actor, { type: 'REVOKE', by: actor, at: clock(deps).toISOString(), reason }, 'standing_order.revoke');

export function listStandingOrderRows(pool: Pool, filter: { state?: string; limit: number }): Promise<StandingOrderRow[]> {
  return listStandingOrders(pool, filter);
}

export async function standingOrderDetail(pool: Pool, id: string, runLimit = 50) {
  const order = await getStandingOrder(pool, id);
  if (!order) throw new NotFoundError('standing order', id);
  return { order, runs: await runsOf(pool, order.id, runLimit), history: await standingOrderTransitions(pool, order.id) };
}

// ---------------------------------------------------------------------------------------------
// Runs

export interface StandingOrderSweepReport {
  orders: number;
  created: number;
  approved: number;
  waiting: number;
  refused: number;
  skipped: number;
  expired: number;
}

/**
 * Checks every ACTIVE order once (at most `limit`): the slot or crossing it is due for, if any,
 * becomes a run (once: the run's unique key), and pending runs are carried on. Orders past their
 * expiry become EXPIRED. With no standing orders it is one indexed read.
 */
export async function runStandingOrders(deps: StandingOrderDeps, opts: { limit?: number } = {}): Promise<StandingOrderSweepReport> {
  const now = clock(deps);
  const report: StandingOrderSweepReport = { orders: 0, created: 0, approved: 0, waiting: 0, refused: 0, skipped: 0, expired: 0 };
  const { active, expired } = await dueStandingOrders(deps.pool, now, opts.limit ?? 100);
  for (const id of expired) {
    try {
      await deliverTo(deps, id, STANDING_ORDER_EXPIRER, { type: 'EXPIRE', at: now.toISOString() }, 'standing_order.expire');
      report.expired++;
    } catch (err) {
      if (!(err instanceof FerryError)) throw err;
    }
  }
  for (const order of active) {
    report.orders++;
    const planned = await plannedRun(deps, order, now);
    if (planned) {
      const run = await insertRun(deps.pool, {
        standing_order_id: order.id,
        slot_key: planned.slotKey,
        amount: planned.amount,
        destination_entry: order.destinations[0] ?? null,
        outcome: planned.amount === null ? 'skipped' : 'pending',
      });
      if (run) {
        report.created++;
        if (run.outcome === 'skipped') {
          report.skipped++;
          standingOrderRunsTotal.inc({ outcome: 'skipped' });
        }
      }
    }
    for (const run of await pendingRuns(deps.pool, order.id)) {
      // One runner carries a pending run on; another (a second process) leaves it to that one.
      if (!(await leaseRun(deps.pool, run.id, RUN_LEASE_SECONDS))) continue;
      const done = await carryRun(deps, order, run, now);
      if (done) {
        report[done.outcome as 'approved' | 'waiting' | 'refused']++;
        standingOrderRunsTotal.inc({ outcome: done.outcome });
      }
    }
  }
  return report;
}

/** When the order last became ACTIVE: slots before it never run. */
function activeSince(order: StandingOrderRow): Date {
  const last = order.approvals[order.approvals.length - 1];
  const resumed = order.decided_by && order.updated_at ? order.updated_at : null;
  const approved = last ? new Date(last.at) : order.created_at;
  return resumed && resumed.getTime() > approved.getTime() ? resumed : approved;
}

async function plannedRun(deps: StandingOrderDeps, order: StandingOrderRow, now: Date) {
  const t = order.trigger;
  const schedule = 'schedule' in t ? t.schedule : undefined;
  const slot = schedule ? lastSlot(schedule, deps.config.operatorTimeZone, now) : null;
  let balance: string | null = null;
  let crossing: string | null = null;
  if (t.kind !== 'schedule') {
    const threshold = t.kind === 'ceiling' ? t.ceiling : t.floor;
    const facts = await balanceFacts(deps.pool, t.balance, (decimals) => (scaled(threshold, MAX_DECIMALS) / 10n ** BigInt(MAX_DECIMALS - Math.min(decimals, MAX_DECIMALS))).toString(), t.kind === 'ceiling' ? 'above' : 'below');
    if (facts) {
      balance = unitsOf(facts.amount, facts.decimals);
      crossing = facts.crossingId;
    }
  }
  return planRun(t, { slot, balance, crossingSnapshotId: crossing }, activeSince(order));
}

/** Creates a pending run's movement (idempotently) and approves it when within the order's bounds. */
async function carryRun(deps: StandingOrderDeps, order: StandingOrderRow, run: StandingOrderRunRow, now: Date): Promise<StandingOrderRunRow | null> {
  const actor = standingOrderActor(order.id);
  const finish = async (set: Parameters<typeof finishRun>[2]) => {
    const done = await finishRun(deps.pool, run.id, set);
    if (done) {
      await withTransaction(deps.pool, (client) =>
        writeAudit(client, {
          actor,
          action: 'standing_order.run',
          entity_type: 'standing_order',
          entity_id: order.id,
          details: { run_id: run.id, slot_key: run.slot_key, amount: run.amount, movement_id: done.movement_id, outcome: done.outcome, error_code: done.error_code },
        }),
      );
    }
    return done;
  };
  const entry = await getAddressBookEntry(deps.pool, run.destination_entry ?? order.destinations[0]!);
  if (!entry) return finish({ movement_id: null, outcome: 'refused', error_code: 'STANDING_ORDER_DESTINATION_MISSING', error_detail: `book entry ${run.destination_entry} is gone` });
  const intent = { ...order.intent, asset: order.asset, amount: run.amount!, destination: entry.tag ? { address: entry.address, tag: entry.tag } : entry.address };
  let movement;
  try {
    movement = await createMovement(deps, { actor, templateKey: order.template_key, intent, idempotencyKey: `${order.id}:${run.slot_key}` });
  } catch (err) {
    if (!(err instanceof FerryError) || err.httpStatus >= 500) throw err;
    return finish({ movement_id: null, outcome: 'refused', error_code: err.code, error_detail: err.message });
  }
  const m = movement.movement;
  const bounds = withinBounds(order, run.amount!, await windowUsed(deps.pool, order.id, new Date(now.getTime() - order.window_seconds * 1000), run.id));
  if (!bounds.ok || m.approval_quorum > order.approvals.length) {
    const why = !bounds.ok ? `above its ${bounds.bound}` : `needs ${m.approval_quorum} approvals; the order has ${order.approvals.length}`;
    return finish({ movement_id: m.id, outcome: 'waiting', error_code: !bounds.ok ? (bounds.bound === 'max_per_run' ? 'STANDING_ORDER_ABOVE_MAX_PER_RUN' : 'STANDING_ORDER_ABOVE_MAX_PER_WINDOW') : 'STANDING_ORDER_QUORUM', error_detail: `run ${why}: it waits for people` });
  }
  // Approved by the order: its approvers' approvals of runs within its bounds, each still checked by the policy.
  try {
    let approvals = m.approvals.length;
    for (const a of order.approvals) {
      if (approvals >= m.approval_quorum) break;
      if (m.approvals.some((x) => x.by === a.by)) continue;
      await approveMovement(deps, m.id, { actor: a.by, compiledPlanHash: m.compiled_plan_hash, standingOrderId: order.id });
      approvals++;
    }
  } catch (err) {
    if (!(err instanceof FerryError) || err.httpStatus >= 500) throw err;
    return finish({ movement_id: m.id, outcome: 'waiting', error_code: err.code, error_detail: err.message });
  }
  return finish({ movement_id: m.id, outcome: 'approved' });
}
