import type { Job, PgBoss, Schedule } from 'pg-boss';
import type { CallbackQueue } from '../callbacks/jobs.ts';
import { configValue, type ConfigVariable, type FerryConfig } from '../config.ts';
import { FerryError } from '../errors.ts';
import type { Logger } from '../log.ts';
import { callbackStrandedRequeuedTotal, sweepBudgetExhaustedTotal, workerItemsTotal, workerRunSeconds, workerRunsTotal } from '../metrics.ts';
import { writeAudit } from '../persistence/audit.ts';
import { withTransaction, type Pool, type Queryable } from '../persistence/db.ts';
import {
  activeRuns,
  hasPendingOrRecentRun,
  lastFinishedRuns,
  announceSweepRun,
  lockSweepStart,
  nextQueuedRuns,
  type SweepJobRow,
} from '../persistence/sweep-jobs.ts';
import { runBalanceSnapshotSweep, type BalanceSweepDeps } from '../balances/sweep.ts';
import { lanes as allLanes, type LaneList } from '../executors/lanes.ts';
import { promoteAuditRun } from './audit-promoter.ts';
import { PGBOSS_SCHEMA } from '../persistence/pgboss-jobs.ts';
import { ensureQueue, registerQueueWorkers, unregisterQueueWorkers, type QueueDefinition } from '../actors/boss.ts';
import { sweepStrandedCallbacks } from '../actors/callback-delivery.ts';
import type { WorkerDeps } from '../actors/execution.ts';
import { refreshRegistryHealth } from './executor-health.ts';
import { expirePendingMovements } from './expiry.ts';
import { reconcileBatch } from './reconciliation.ts';
import { runStandingOrders } from '../services/standing-orders.ts';
import { settleDuePolicyProposals } from '../services/policy.ts';
import { expireDueProposals, finalizeDueProposals } from '../services/template-proposals.ts';
import { reconcileWithProviders } from './provider-reconciliation.ts';
import { runNotificationDispatcher } from './notification-dispatcher.ts';
import { followUpWaitingMovements } from '../services/followups.ts';
import { runBalanceHistoryRollup } from '../balances/rollup.ts';
import { runCexTransferIngest } from './cex-transfer-ingest.ts';
import { runVerifyDrift } from './verify-drift.ts';

/**
 * Sweeps: the periodic, batch-shaped workers (approval expiry, executor health, audit promotion,
 * stranded callbacks, reconciliation...). Each is a pg-boss queue of its own and each run is one job
 * on it, so pg-boss gives every sweep what an in-process loop cannot:
 *
 * - one run at a time across every process and host: the queues are 'stately' (at most one job
 *   queued and one active per queue, enforced by a unique index in pg-boss's job table);
 * - a run whose process dies is retried elsewhere: the job stops sending heartbeats, pg-boss
 *   maintenance fails it into 'retry', and another process's worker picks it up. Every sweep's effect
 *   is idempotent per row (each row is claimed under its own lock and re-checked by its machine), so
 *   the retry finishes the work and repeats none of it;
 * - the run's result (what it did, whether its budget stopped it) is the job's output, kept for
 *   FERRY_SWEEP_RETENTION_SECONDS and visible in /dashboard and GET /v3/workers.
 *
 * Timing. pg-boss's cron resolves to one job per minute at most, so a sweep whose interval is a cron
 * expression (whole minutes that divide an hour, whole hours that divide a day) is a pg-boss schedule.
 * Any other interval, in particular every one under a minute, is a chain: each run first queues its
 * successor with startAfter = the interval (the stately policy drops it when one is already
 * waiting), and a per-minute schedule on the same queue restarts a chain that broke (the successor
 * could not be written). Either way the schedule row shows the sweep on the dashboard's Schedules page.
 *
 * Waking. An idle worker should cost the database next to nothing, so no sweep polls pg-boss every
 * second or two. The process that queues a chain's successor wakes its own worker when the successor
 * falls due (a timer, no statement); an operator's requested run is announced on SWEEP_CHANNEL at
 * commit and wakes every process's worker; a cron run's insert sends pg-boss's NOTIFY (the queues
 * are `notify`, src/actors/boss.ts "Waking"), which wakes the workers too. Polling
 * (sweepPollingSeconds) is otherwise the backstop for a process that died between queuing a
 * successor and waking for it (at most the interval of a chain under FERRY_SWEEP_POLL_BACKSTOP_SECONDS)
 * and for a lost notification (at most FERRY_SWEEP_POLL_BACKSTOP_SECONDS).
 *
 * Idle chains. A sweep with an idle interval (the audit promoter: FERRY_AUDIT_PROMOTER_IDLE_INTERVAL_SECONDS)
 * runs at its interval while it finds work; once a run of this process found none, and nothing was
 * announced since it started, the next successor is queued after the idle interval instead, so an
 * idle cluster pays one run (its pg-boss insert, fetch and completion) per idle interval rather than
 * per interval. The sweep's work announces itself (the audit outbox's NOTIFY, migration 0440): the
 * process that parked the successor brings it forward to now (poke), at once.
 *
 * A new sweep is one entry in the sweep table: its name, the configuration variables of its settings,
 * and its run function returning a SweepOutcome.
 */

export const SWEEP_QUEUE_PREFIX = 'ferry-sweep-';

/** Why a run happened: its schedule, the chain, a process start, an operator, or a retry of one. */
export type SweepTrigger = 'schedule' | 'chain' | 'start' | 'manual';

export interface SweepSettings {
  enabled: boolean;
  intervalSeconds: number;
  /** Items per run or per batch, as the sweep defines it; null when it has none. */
  batchSize: number | null;
  /** Time budget of a run in milliseconds; 0 = none. */
  maxRunMs: number;
  /** A chain's interval once a run found nothing (see "Idle chains"); absent: always intervalSeconds. */
  idleIntervalSeconds?: number;
}

/** What a run did. Stored as the job's output, with the trigger and the duration beside it. */
export interface SweepOutcome {
  /** Items the run handled (rows, nodes, callbacks, probes). */
  items: number;
  /** The run stopped at its budget with work left; the next run continues. */
  budget_exhausted: boolean;
  [detail: string]: unknown;
}

export interface SweepDeps extends Pick<WorkerDeps, 'pool' | 'config' | 'executors' | 'signers' | 'transitions' | 'log'> {
  callbackQueue: CallbackQueue;
  /** The balance fetchers with their per-process caches (clients, decimals, watch list); when enabled. */
  balances?: BalanceSweepDeps;
  /** What each lane's register() returned in this process, by lane name (the EVM lane's: its nonce manager with this process's wallets). */
  lanes?: Readonly<Record<string, unknown>>;
}

/** The configuration variables behind a sweep's settings: its switch, its interval and, when it has them, a batch size and a run time budget (ms). */
export interface SweepVariables {
  enabled: ConfigVariable<boolean>;
  interval: ConfigVariable<number>;
  batchSize?: ConfigVariable<number>;
  budget?: ConfigVariable<number>;
}

export interface SweepDefinition {
  /** Stable name: the worker name in metrics and reports, and the queue's suffix. */
  name: string;
  summary: string;
  /** The configuration variables behind its settings (for reports and docs). */
  variables: SweepVariables;
  settings(config: FerryConfig): SweepSettings;
  run(deps: SweepDeps, settings: SweepSettings): Promise<SweepOutcome>;
}

/** A row of the sweep table: without `settings`, they are its variables' values (no batch size or budget variable: null, 0). */
type SweepEntry = Omit<SweepDefinition, 'settings'> & Partial<Pick<SweepDefinition, 'settings'>>;

function sweepDefinition(entry: SweepEntry): SweepDefinition {
  const v = entry.variables;
  const settings = (c: FerryConfig): SweepSettings => ({
    enabled: configValue(c, v.enabled),
    intervalSeconds: configValue(c, v.interval),
    batchSize: v.batchSize ? configValue(c, v.batchSize) : null,
    maxRunMs: v.budget ? configValue(c, v.budget) : 0,
  });
  return { settings, ...entry };
}

const sweepTable: SweepEntry[] = [
  {
    name: 'expiration_checker',
    summary: 'PENDING_APPROVAL movements past their deadline become EXPIRED (request_expired callback)',
    variables: {
      enabled: 'FERRY_EXPIRATION_CHECK_ENABLED',
      interval: 'FERRY_EXPIRATION_CHECK_INTERVAL_SECONDS',
      batchSize: 'FERRY_EXPIRATION_BATCH_SIZE',
      budget: 'FERRY_EXPIRATION_MAX_RUN_MS',
    },
    async run(deps) {
      const r = await expirePendingMovements(deps);
      return { items: r.expired, budget_exhausted: r.budgetExhausted, expired: r.expired, skipped: r.skipped };
    },
  },
  {
    name: 'executor_health',
    summary: 'calls health() on every registered executor and signer and writes the roster',
    variables: { enabled: 'FERRY_EXECUTOR_HEALTH_ENABLED', interval: 'FERRY_EXECUTOR_HEALTH_INTERVAL_SECONDS', budget: 'FERRY_EXECUTOR_HEALTH_TIMEOUT_MS' },
    async run(deps, s) {
      const r = await refreshRegistryHealth(deps.pool, deps.executors, deps.signers, { timeoutMs: s.maxRunMs || undefined, log: deps.log });
      const down = [...r.executors, ...r.signers].filter((x) => x.health_state === 'down').length;
      return {
        items: r.executors.length + r.signers.length,
        budget_exhausted: false,
        executors: r.executors.length,
        signers: r.signers.length,
        down,
        orphaned: r.orphaned.executors.length + r.orphaned.signers.length,
      };
    },
  },
  {
    name: 'audit_outbox_promoter',
    summary: 'moves audit outbox rows onto the hash-chained audit log',
    variables: {
      enabled: 'FERRY_AUDIT_PROMOTER_ENABLED',
      interval: 'FERRY_AUDIT_PROMOTER_INTERVAL_SECONDS',
      batchSize: 'FERRY_AUDIT_PROMOTER_BATCH_SIZE',
      budget: 'FERRY_AUDIT_PROMOTER_MAX_BATCHES',
    },
    // Its budget is a number of batches (auditMaxBatches, read by the run), not a run time.
    // Idle, it waits FERRY_AUDIT_PROMOTER_IDLE_INTERVAL_SECONDS, and an outbox insert's NOTIFY pokes it.
    settings: (c) => ({
      enabled: c.auditEnabled,
      intervalSeconds: c.auditIntervalSeconds,
      batchSize: c.auditBatchSize,
      maxRunMs: 0,
      idleIntervalSeconds: Math.max(c.auditIdleIntervalSeconds, c.auditIntervalSeconds),
    }),
    async run(deps, s) {
      const r = await promoteAuditRun(deps.pool, { batchSize: s.batchSize ?? undefined, maxBatches: deps.config.auditMaxBatches });
      return { items: r.promoted, budget_exhausted: r.budgetExhausted, promoted: r.promoted, batches: r.batches };
    },
  },
  {
    name: 'callback_stranded_sweep',
    summary: 'writes a delivery job for every overdue pending callback whose job was lost',
    variables: {
      enabled: 'FERRY_CALLBACK_STRANDED_SWEEP_ENABLED',
      interval: 'FERRY_CALLBACK_STRANDED_SWEEP_INTERVAL_SECONDS',
      batchSize: 'FERRY_CALLBACK_STRANDED_SWEEP_BATCH_SIZE',
      budget: 'FERRY_CALLBACK_STRANDED_SWEEP_MAX_RUN_MS',
    },
    async run(deps, s) {
      const r = await sweepStrandedCallbacks(deps.pool, deps.callbackQueue, { limit: s.batchSize ?? 500, maxRunMs: s.maxRunMs });
      if (r.written > 0) deps.log.warn({ worker: 'callback_stranded_sweep', written: r.written }, 'stranded callbacks re-enqueued');
      callbackStrandedRequeuedTotal.inc(r.written);
      return { items: r.written, budget_exhausted: r.budgetExhausted, requeued: r.written };
    },
  },
  {
    name: 'reconciliation',
    summary: "replays movements' transition logs through the machines and reports drift",
    variables: {
      enabled: 'FERRY_RECONCILIATION_ENABLED',
      interval: 'FERRY_RECONCILIATION_INTERVAL_SECONDS',
      batchSize: 'FERRY_RECONCILIATION_BATCH_SIZE',
      budget: 'FERRY_RECONCILIATION_MAX_RUN_MS',
    },
    async run(deps) {
      const r = await reconcileBatch(deps);
      // Then the providers' evidence about recently settled nodes (provider-reconciliation.ts).
      const p = await reconcileWithProviders(deps);
      return {
        items: r.checked + p.checked,
        budget_exhausted: r.budgetExhausted || p.budgetExhausted,
        checked: r.checked,
        drifted: r.drifted,
        provider: { checked: p.checked, drifted: p.drifted, repaired: p.repaired, unanswered: p.unanswered, by_class: p.byClass },
      };
    },
  },
  {
    name: 'balance_snapshot',
    summary: 'fetches the balances of watched wallets per chain and asset; deletes snapshots past retention',
    variables: {
      enabled: 'FERRY_BALANCE_SNAPSHOT_ENABLED',
      interval: 'FERRY_BALANCE_SNAPSHOT_INTERVAL_SECONDS',
      batchSize: 'FERRY_BALANCE_SNAPSHOT_BATCH_SIZE',
      budget: 'FERRY_BALANCE_SNAPSHOT_MAX_RUN_MS',
    },
    async run(deps, s) {
      if (!deps.balances) return { items: 0, budget_exhausted: false, skipped: 'balance fetchers not configured in this process' };
      const r = await runBalanceSnapshotSweep(deps.balances, { batchSize: s.batchSize ?? 50, maxRunMs: s.maxRunMs });
      return {
        items: r.snapshots + r.errors,
        budget_exhausted: r.budgetExhausted,
        snapshots: r.snapshots,
        errors: r.errors,
        released: r.released,
        deleted_snapshots: r.deleted.snapshots,
      };
    },
  },
  // --- Balance history (src/balances/rollup.ts; docs/operations.md "Balances").
  {
    name: 'balance_history_rollup',
    summary: 'folds balance snapshots into hourly and daily min/max/last buckets; deletes buckets past retention',
    variables: {
      enabled: 'FERRY_BALANCE_HISTORY_ENABLED',
      interval: 'FERRY_BALANCE_HISTORY_INTERVAL_SECONDS',
      batchSize: 'FERRY_BALANCE_HISTORY_BATCH_SIZE',
      budget: 'FERRY_BALANCE_HISTORY_MAX_RUN_MS',
    },
    async run(deps, s) {
      const r = await runBalanceHistoryRollup(deps.pool, deps.config, { batchSize: s.batchSize ?? 5_000, maxRunMs: s.maxRunMs });
      return { items: r.folded, budget_exhausted: r.budgetExhausted, folded: r.folded, deleted_buckets: r.deleted };
    },
  },
  // --- Exchange transfers no movement made (src/sweeps/cex-transfer-ingest.ts; docs/operations.md "Exchange transfers").
  {
    name: 'cex_transfer_ingest',
    summary: 'records deposits and withdrawals on the listed exchange accounts that no movement made',
    variables: { enabled: 'FERRY_CEX_TRANSFER_INGEST_ENABLED', interval: 'FERRY_CEX_TRANSFER_INGEST_INTERVAL_SECONDS' },
    // On only with venues listed (FERRY_CEX_TRANSFER_INGEST_VENUES).
    settings: (c) => ({ enabled: c.cexTransferIngestEnabled && c.cexTransferIngestVenues.length > 0, intervalSeconds: c.cexTransferIngestIntervalSeconds, batchSize: null, maxRunMs: 0 }),
    async run(deps) {
      const r = await runCexTransferIngest({ pool: deps.pool, config: deps.config, log: deps.log });
      return { items: r.recorded, budget_exhausted: false, venues: r.venues, seen: r.seen, recorded: r.recorded, own: r.own, failed: r.failed };
    },
  },
  // --- Template proposals (src/services/template-proposals.ts; docs/operations.md "Template proposals").
  {
    name: 'template_proposal_expiration',
    summary: 'PROPOSED template proposals past their review window become EXPIRED',
    variables: {
      enabled: 'FERRY_TEMPLATE_PROPOSAL_EXPIRATION_ENABLED',
      interval: 'FERRY_TEMPLATE_PROPOSAL_EXPIRATION_INTERVAL_SECONDS',
      batchSize: 'FERRY_TEMPLATE_PROPOSAL_EXPIRATION_BATCH_SIZE',
      budget: 'FERRY_TEMPLATE_PROPOSAL_EXPIRATION_MAX_RUN_MS',
    },
    async run(deps, s) {
      const r = await expireDueProposals(deps, { batchSize: s.batchSize ?? 50, maxRunMs: s.maxRunMs });
      return { items: r.done, budget_exhausted: r.budgetExhausted, expired: r.done, skipped: r.skipped };
    },
  },
  {
    name: 'template_finalization',
    summary: 'APPROVED template proposals past their challenge window become FINALIZED (the live version)',
    variables: {
      enabled: 'FERRY_TEMPLATE_FINALIZATION_ENABLED',
      interval: 'FERRY_TEMPLATE_FINALIZATION_INTERVAL_SECONDS',
      batchSize: 'FERRY_TEMPLATE_FINALIZATION_BATCH_SIZE',
      budget: 'FERRY_TEMPLATE_FINALIZATION_MAX_RUN_MS',
    },
    async run(deps, s) {
      const r = await finalizeDueProposals(deps, { batchSize: s.batchSize ?? 50, maxRunMs: s.maxRunMs });
      return { items: r.done, budget_exhausted: r.budgetExhausted, finalized: r.done, skipped: r.skipped };
    },
  },
  // --- Operator notifications (src/sweeps/notification-dispatcher.ts; docs/operations.md "Operator notifications").
  {
    name: 'notification_dispatcher',
    summary: 'records attention events and sends them to the operator channels (signed webhook, Slack-style)',
    variables: {
      enabled: 'FERRY_NOTIFY_ENABLED',
      interval: 'FERRY_NOTIFY_INTERVAL_SECONDS',
      batchSize: 'FERRY_NOTIFY_BATCH_SIZE',
      budget: 'FERRY_NOTIFY_MAX_RUN_MS',
    },
    async run(deps, s) {
      const r = await runNotificationDispatcher({ pool: deps.pool, config: deps.config, log: deps.log }, { batchSize: s.batchSize ?? 100, maxRunMs: s.maxRunMs });
      return { items: r.recorded + r.delivered + r.failed + r.retried, ...r };
    },
  },
  // --- Capital transfer follow-up (src/services/followups.ts; docs/operations.md "Movements waiting too long").
  {
    name: 'capital_transfer_followup',
    summary: 'surfaces movements waiting in a non-terminal state past their template age (attention, notification)',
    variables: {
      enabled: 'FERRY_CAPITAL_TRANSFER_FOLLOWUP_ENABLED',
      interval: 'FERRY_CAPITAL_TRANSFER_FOLLOWUP_INTERVAL_SECONDS',
      batchSize: 'FERRY_CAPITAL_TRANSFER_FOLLOWUP_BATCH_SIZE',
    },
    async run(deps, s) {
      const r = await followUpWaitingMovements({ pool: deps.pool, config: deps.config }, { batchSize: s.batchSize ?? 100 });
      return { items: r.surfaced, budget_exhausted: false, surfaced: r.surfaced };
    },
  },
  // --- Standing orders (src/services/standing-orders.ts; docs/policy.md "Standing orders").
  {
    name: 'standing_orders',
    summary: 'creates the due run of every ACTIVE standing order (once per schedule slot or balance crossing) and expires orders past their expiry',
    variables: { enabled: 'FERRY_STANDING_ORDERS_ENABLED', interval: 'FERRY_STANDING_ORDERS_INTERVAL_SECONDS', batchSize: 'FERRY_STANDING_ORDERS_BATCH_SIZE' },
    async run(deps, s) {
      const r = await runStandingOrders(deps, { limit: s.batchSize ?? 100 });
      return { items: r.created, budget_exhausted: false, ...r };
    },
  },
  // --- Policy proposals (src/services/policy.ts; docs/policy.md "Changing the policy: proposals").
  {
    name: 'policy_proposals',
    summary: 'makes approved address book and rule set changes live once their cool-down has passed, and expires proposals left unreviewed',
    variables: { enabled: 'FERRY_POLICY_PROPOSALS_ENABLED', interval: 'FERRY_POLICY_PROPOSALS_INTERVAL_SECONDS', batchSize: 'FERRY_POLICY_PROPOSALS_BATCH_SIZE' },
    async run(deps, s) {
      const r = await settleDuePolicyProposals({ pool: deps.pool }, s.batchSize ?? 50);
      return { items: r.finalized + r.expired, budget_exhausted: false, ...r };
    },
  },
];

/**
 * verify_drift (src/sweeps/verify-drift.ts; docs/operations.md "Registry drift"): the on-chain
 * baselines the lanes of the list declare, read and compared with the configuration.
 */
function verifyDriftSweep(list: LaneList): SweepEntry {
  return {
    name: 'verify_drift',
    summary: "reads the lanes' registry baselines on each chain (token decimals and symbols, CCTP contracts, OFT peers, bridge code) and records drift from the configuration",
    variables: { enabled: 'FERRY_VERIFY_DRIFT_ENABLED', interval: 'FERRY_VERIFY_DRIFT_INTERVAL_SECONDS', budget: 'FERRY_VERIFY_DRIFT_LANE_TIMEOUT_MS' },
    // Its budget is each lane's time on a chain (the run takes about that long at most), not the run's.
    settings: (c) => ({ enabled: c.verifyDriftEnabled, intervalSeconds: c.verifyDriftIntervalSeconds, batchSize: null, maxRunMs: c.verifyDriftLaneTimeoutMs }),
    async run(deps, s) {
      const r = await runVerifyDrift({ pool: deps.pool, config: deps.config, log: deps.log, lanes: list }, { concurrency: deps.config.verifyDriftRpcConcurrency, laneTimeoutMs: s.maxRunMs });
      return { items: r.checked, budget_exhausted: false, ...r };
    },
  };
}

/** The sweeps of a list of lanes (each lane's own, src/executors/<lane>/lane.ts) after Ferry's. */
export function sweepDefinitionsOf(list: LaneList): SweepDefinition[] {
  const laneSweeps: SweepEntry[] = list.flatMap((lane) => lane.sweeps.map((s) => ({ ...s, variables: s.variables as SweepVariables })));
  return [...sweepTable, verifyDriftSweep(list), ...laneSweeps].map(sweepDefinition);
}

export const sweepDefinitions: readonly SweepDefinition[] = sweepDefinitionsOf(allLanes);

/** Queues of the scheme before sweeps were jobs; removed on start (see retireLegacySweeps). */
export const LEGACY_SWEEP_QUEUES = ['ferry-callbacks-sweep'] as const;

export function sweepQueue(name: string): string {
  return `${SWEEP_QUEUE_PREFIX}${name}`;
}

export function findSweep(name: string, definitions: readonly SweepDefinition[] = sweepDefinitions): SweepDefinition {
  const found = definitions.find((d) => d.name === name);
  if (!found) {
    throw new FerryError('NOT_FOUND', `no sweep named ${JSON.stringify(name)}`, {
      kind: 'sweep',
      id: name,
      sweeps: definitions.map((d) => d.name),
    });
  }
  return found;
}

export type SweepSchedule =
  /** A pg-boss cron schedule sends each run. */
  | { mode: 'cron'; cron: string }
  /** Each run queues its successor; the per-minute schedule only restarts a broken chain. */
  | { mode: 'chain'; cron: string; everySeconds: number };

const WATCHDOG_CRON = '* * * * *';

/** How a sweep with this interval is timed (see the module comment). */
export function sweepSchedule(intervalSeconds: number): SweepSchedule {
  const s = intervalSeconds;
  if (Number.isInteger(s) && s >= 60) {
    const minutes = s / 60;
    if (Number.isInteger(minutes) && minutes <= 60 && 60 % minutes === 0) {
      return { mode: 'cron', cron: minutes === 60 ? '0 * * * *' : minutes === 1 ? '* * * * *' : `*/${minutes} * * * *` };
    }
    const hours = s / 3600;
    if (Number.isInteger(hours) && hours <= 24 && 24 % hours === 0) {
      return { mode: 'cron', cron: hours === 24 ? '0 0 * * *' : hours === 1 ? '0 * * * *' : `0 */${hours} * * *` };
    }
  }
  return { mode: 'chain', cron: WATCHDOG_CRON, everySeconds: s };
}

/** FERRY_SWEEP_POLL_BACKSTOP_SECONDS's default: the longest a due run waits for a poll. */
export const SWEEP_POLL_BACKSTOP_SECONDS = 60;

/**
 * How often a sweep's worker asks pg-boss for a run. Every run is woken (a chain's by a timer of the
 * process that queued it, a cron run and a requested one by their NOTIFY), so the poll is only the
 * backstop: at the backstop, or at a chain's interval when that is shorter, so that a chain whose
 * waking process died goes on within about one interval elsewhere.
 */
export function sweepPollingSeconds(plan: SweepSchedule, intervalSeconds: number, backstopSeconds: number = SWEEP_POLL_BACKSTOP_SECONDS): number {
  if (plan.mode === 'chain') return Math.min(backstopSeconds, Math.max(2, intervalSeconds));
  return backstopSeconds;
}

/**
 * The queue's settings. 'stately': one queued and one active job at most, so runs never overlap and
 * never pile up. A run that stops beating (its process died) fails after heartbeatSeconds and is
 * retried; expireInSeconds bounds a run that hangs while its process lives.
 */
export function sweepQueueDefinition(settings: SweepSettings, config: FerryConfig): QueueDefinition {
  const budgetSeconds = Math.ceil(settings.maxRunMs / 1000);
  return {
    policy: 'stately',
    // A cron run, a requested run or one brought forward wakes the workers (src/actors/boss.ts, "Waking").
    notify: true,
    retryLimit: config.sweepRetryLimit,
    retryDelay: 1,
    expireInSeconds: Math.max(120, budgetSeconds * 2 + 60),
    heartbeatSeconds: config.sweepHeartbeatSeconds,
    deleteAfterSeconds: config.sweepRetentionSeconds,
  };
}

/** pg-boss calls through the caller's client, so they commit or roll back with its transaction. */
function onClient(client: Queryable) {
  return { executeSql: (text: string, values?: unknown[]) => client.query(text, values as unknown[]) };
}

export interface StartSweepsOptions {
  boss: PgBoss;
  deps: SweepDeps;
  processId: string;
  definitions?: readonly SweepDefinition[];
  /** Called after each run this process made, with the error it threw (null when none): the worker roster. */
  onRun?: (sweep: string, error: unknown) => void;
}

export interface SweepWorkers {
  /** The sweeps this process runs. */
  names: string[];
  /** A run of this queue was requested elsewhere (SWEEP_CHANNEL): fetch it now. Unknown queues are ignored. */
  wake(queue: string): void;
  /**
   * The sweep has work (its announcement, e.g. the audit outbox's NOTIFY): a successor this process
   * parked at the idle interval is brought forward to now. Other sweeps and unknown names are ignored.
   */
  poke(sweep: string): void;
  stop(): Promise<void>;
}

/**
 * Retires the in-process scheme's leftovers: the stranded-callback sweep queue of the callback
 * module (and its schedule, if a standalone delivery worker ever set one). Its queued jobs carry
 * nothing the new sweep does not redo from the outbox rows.
 */
export async function retireLegacySweeps(boss: PgBoss): Promise<void> {
  for (const name of LEGACY_SWEEP_QUEUES) {
    if (!(await boss.getQueue(name))) continue;
    await boss.unschedule(name);
    await boss.deleteQueue(name);
  }
}

/**
 * Creates every sweep's queue and schedule from this process's configuration and works the enabled
 * ones. The schedule is rewritten on every start, so a changed interval takes effect then; a
 * disabled sweep loses its schedule (its queue and history stay).
 */
export async function startSweeps(opts: StartSweepsOptions): Promise<SweepWorkers> {
  const { boss, deps, processId } = opts;
  const definitions = opts.definitions ?? sweepDefinitions;
  const log = deps.log.child({ component: 'sweeps' });
  await retireLegacySweeps(boss);
  const worked: string[] = [];
  const workerIds = new Map<string, string>();
  const timers = new Set<NodeJS.Timeout>();
  const idle = new IdleChains();
  const wake = (queue: string) => {
    const id = workerIds.get(queue);
    if (id) boss.notifyWorker(id);
  };
  // The chain's successor is due in `seconds`: wake this process's worker for it then.
  const wakeIn = (queue: string, seconds: number) => {
    const timer = setTimeout(() => {
      timers.delete(timer);
      wake(queue);
    }, seconds * 1000 + 100);
    timer.unref();
    timers.add(timer);
  };
  for (const def of definitions) {
    const settings = def.settings(deps.config);
    const queue = sweepQueue(def.name);
    await ensureQueue(boss, queue, sweepQueueDefinition(settings, deps.config));
    if (!settings.enabled) {
      await boss.unschedule(queue);
      log.info({ worker: def.name }, 'sweep disabled in this configuration');
      continue;
    }
    const plan = sweepSchedule(settings.intervalSeconds);
    await boss.schedule(queue, plan.cron, { trigger: 'schedule' }, { tz: 'UTC' });
    const id = await boss.work(
      queue,
      // An idle chain's poll goes by its idle interval: its runs are woken, and a parked one is due only then.
      { batchSize: 1, pollingIntervalSeconds: sweepPollingSeconds(plan, settings.idleIntervalSeconds ?? settings.intervalSeconds, deps.config.sweepPollBackstopSeconds) },
      (jobs: Job<{ trigger?: SweepTrigger }>[]) =>
        runSweepJob(def, settings, plan, jobs[0], { boss, deps, processId, log, wakeIn, idle }).then(
          (output) => (opts.onRun?.(def.name, null), output),
          (err: unknown) => {
            opts.onRun?.(def.name, err);
            throw err;
          },
        ),
    );
    workerIds.set(queue, id);
    registerQueueWorkers(boss, queue, id);
    worked.push(def.name);
    if (await queueStartRun(boss, deps.pool, queue, settings.intervalSeconds)) wake(queue);
  }
  return {
    names: worked,
    wake,
    poke(sweep: string) {
      const queue = sweepQueue(sweep);
      const parked = idle.poke(queue);
      if (!parked) return;
      // Brought forward to now: the update's NOTIFY wakes every process's worker, this one's at once.
      boss
        .update(queue, { trigger: 'chain' }, { id: parked, startAfter: new Date() })
        .then(() => wake(queue))
        .catch((err: unknown) => log.warn({ worker: sweep, err }, 'could not bring the idle sweep run forward; it runs at its idle interval'));
    },
    async stop() {
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
      for (const name of worked) {
        unregisterQueueWorkers(boss, sweepQueue(name));
        await boss.offWork(sweepQueue(name), { wait: true });
      }
    },
  };
}

/**
 * This process's view of its idle chains (see "Idle chains" above): per queue, whether its last run
 * here found nothing, when the sweep was last poked, and the successor it parked at the idle interval.
 */
class IdleChains {
  #state = new Map<string, { emptySince: number | null; pokedAt: number; parked: string | null }>();

  #of(queue: string) {
    let st = this.#state.get(queue);
    if (!st) this.#state.set(queue, (st = { emptySince: null, pokedAt: 0, parked: null }));
    return st;
  }

  /** Whether the next successor may wait the idle interval: the last run found nothing, and no poke came since it began. */
  idle(queue: string): boolean {
    const st = this.#of(queue);
    return st.emptySince !== null && st.pokedAt < st.emptySince;
  }

  parked(queue: string, jobId: string): void {
    this.#of(queue).parked = jobId;
  }

  /** A run began (its time) and, once over, found nothing or did something. */
  ran(queue: string, startedAt: number, empty: boolean): void {
    const st = this.#of(queue);
    st.emptySince = empty ? startedAt : null;
  }

  /** Records the poke; returns the parked successor to bring forward (once), if any. */
  poke(queue: string): string | null {
    const st = this.#of(queue);
    st.pokedAt = Date.now();
    const parked = st.parked;
    st.parked = null;
    return parked;
  }
}

/**
 * A run right away when the sweep is overdue, as the loops ran at start: none waiting or running and
 * none finished within the interval. Decided under a per-queue lock in the same transaction as the
 * send, so processes starting together (an upgrade's switch-over) queue one run between them, and a
 * restart in the middle of a healthy chain or schedule adds none.
 */
async function queueStartRun(boss: PgBoss, pool: Pool, queue: string, intervalSeconds: number): Promise<boolean> {
  return withTransaction(pool, async (client) => {
    await lockSweepStart(client, queue);
    if (await hasPendingOrRecentRun(client, PGBOSS_SCHEMA, queue, intervalSeconds)) return false;
    return (await boss.send(queue, { trigger: 'start' }, { db: onClient(client) })) !== null;
  });
}

async function runSweepJob(
  def: SweepDefinition,
  settings: SweepSettings,
  plan: SweepSchedule,
  job: Job<{ trigger?: SweepTrigger }>,
  ctx: { boss: PgBoss; deps: SweepDeps; processId: string; log: Logger; wakeIn: (queue: string, seconds: number) => void; idle: IdleChains },
): Promise<Record<string, unknown>> {
  const queue = sweepQueue(def.name);
  const trigger = job.data?.trigger ?? 'schedule';
  const startedAt = Date.now();
  if (plan.mode === 'chain') {
    // The successor first, so the chain survives this run dying. Dropped when one already waits.
    // After an empty run (and no poke since), it waits the idle interval, parked for a poke.
    const idle = settings.idleIntervalSeconds !== undefined && ctx.idle.idle(queue);
    const seconds = idle ? settings.idleIntervalSeconds! : plan.everySeconds;
    const successor = await ctx.boss.send(queue, { trigger: 'chain' }, { startAfter: new Date(startedAt + seconds * 1000) });
    if (idle && successor) ctx.idle.parked(queue, successor);
    ctx.wakeIn(queue, seconds);
  }
  ctx.log.debug({ worker: def.name, job_id: job.id, trigger, process_id: ctx.processId, pid: process.pid }, 'sweep run started');
  const started = performance.now();
  try {
    const outcome = await def.run(ctx.deps, settings);
    ctx.idle.ran(queue, startedAt, outcome.items === 0 && !outcome.budget_exhausted);
    const ms = performance.now() - started;
    workerRunsTotal.inc({ worker: def.name, outcome: 'ok' });
    workerRunSeconds.observe({ worker: def.name }, ms / 1000);
    if (outcome.items > 0) workerItemsTotal.inc({ worker: def.name }, outcome.items);
    if (outcome.budget_exhausted) sweepBudgetExhaustedTotal.inc({ worker: def.name });
    // Sweeps run every few seconds: at debug, unless a run could not finish its work in its budget.
    const level = outcome.budget_exhausted ? 'warn' : 'debug';
    ctx.log[level]({ worker: def.name, job_id: job.id, ...outcome, duration_ms: Math.round(ms) }, 'sweep run finished');
    return { ...outcome, trigger, process_id: ctx.processId, duration_ms: Math.round(ms) };
  } catch (err) {
    workerRunsTotal.inc({ worker: def.name, outcome: 'error' });
    workerRunSeconds.observe({ worker: def.name }, (performance.now() - started) / 1000);
    ctx.idle.ran(queue, startedAt, false);
    ctx.log.error({ worker: def.name, job_id: job.id, err }, 'sweep run failed; pg-boss retries it');
    // pg-boss retries it after retryDelay (1 s, sweepQueueDefinition): not announced, so woken here.
    ctx.wakeIn(queue, 1);
    throw err;
  }
}

export interface SweepRunRequest {
  sweep: string;
  job_id: string;
  /** 'queued': a new run; 'advanced': the run already waiting was brought forward to now. */
  how: 'queued' | 'advanced';
}

/**
 * Runs a sweep now (operators: `ferry sweeps run NAME`). One transaction writes the job through
 * pg-boss and the audit event, so neither exists without the other. A run already waiting (the
 * chain's next one, a scheduled one) is brought forward rather than doubled, and a run in progress
 * is never overlapped: the new one starts when it ends.
 */
export async function requestSweepRun(
  deps: { pool: Pool; boss: PgBoss; config: FerryConfig },
  name: string,
  actor: string,
  definitions: readonly SweepDefinition[] = sweepDefinitions,
): Promise<SweepRunRequest> {
  const def = findSweep(name, definitions);
  const settings = def.settings(deps.config);
  const queue = sweepQueue(def.name);
  await ensureQueue(deps.boss, queue, sweepQueueDefinition(settings, deps.config));
  return withTransaction(deps.pool, async (client) => {
    const db = onClient(client);
    const data = { trigger: 'manual' as const, requested_by: actor };
    let how: SweepRunRequest['how'] = 'queued';
    let id = await deps.boss.send(queue, data, { db });
    if (!id) {
      const waiting = (await deps.boss.findJobs(queue, { queued: true, db })).filter((j) => j.state === 'created');
      const next = waiting.sort((a, b) => +a.startAfter - +b.startAfter)[0];
      if (!next) throw new FerryError('SERVICE_UNAVAILABLE', `sweep ${name} could not be queued; try again`, { sweep: name });
      await deps.boss.update(queue, data, { id: next.id, startAfter: new Date(), db });
      id = next.id;
      how = 'advanced';
    }
    await announceSweepRun(client, queue);
    await writeAudit(client, {
      actor,
      action: 'sweep.run_requested',
      entity_type: 'sweep',
      entity_id: def.name,
      details: { queue, job_id: id, how },
    });
    return { sweep: def.name, job_id: id, how };
  });
}

export interface SweepRunView {
  job_id: string;
  state: string;
  trigger: string | null;
  started_at: string | null;
  finished_at: string | null;
  duration_ms: number | null;
  retry_count: number;
  output: Record<string, unknown> | null;
}

export interface SweepStatus {
  name: string;
  summary: string;
  queue: string;
  enabled: boolean;
  interval_seconds: number;
  batch_size: number | null;
  max_run_ms: number;
  variables: SweepDefinition['variables'];
  /** How runs are timed, and the schedule pg-boss holds for the queue (null when unscheduled). */
  timing: SweepSchedule['mode'];
  schedule: { cron: string; timezone: string } | null;
  last_run: (SweepRunView & { outcome: 'completed' | 'failed'; budget_exhausted: boolean | null }) | null;
  running: SweepRunView | null;
  next_due_at: string | null;
}

const iso = (d: Date | null) => (d ? new Date(d).toISOString() : null);

function runView(row: SweepJobRow): SweepRunView {
  const started = row.started_on ? +new Date(row.started_on) : null;
  const finished = row.completed_on ? +new Date(row.completed_on) : null;
  return {
    job_id: row.id,
    state: row.state,
    trigger: typeof row.data?.trigger === 'string' ? row.data.trigger : null,
    started_at: iso(row.started_on),
    finished_at: iso(row.completed_on),
    duration_ms: started !== null && finished !== null ? finished - started : null,
    retry_count: row.retry_count,
    output: row.output,
  };
}

/**
 * Every sweep's report from pg-boss's job records: the last finished run (when, how long, completed
 * or failed, its output), the run in progress, and when the next is due: the waiting job's start
 * time, else the schedule's next occurrence.
 */
export async function sweepStatuses(
  deps: { pool: Pool; boss: PgBoss; config: FerryConfig },
  definitions: readonly SweepDefinition[] = sweepDefinitions,
): Promise<SweepStatus[]> {
  const queues = definitions.map((d) => sweepQueue(d.name));
  const [last, active, queued, schedules] = await Promise.all([
    lastFinishedRuns(deps.pool, PGBOSS_SCHEMA, queues),
    activeRuns(deps.pool, PGBOSS_SCHEMA, queues),
    nextQueuedRuns(deps.pool, PGBOSS_SCHEMA, queues),
    deps.boss.getSchedules(),
  ]);
  const by = <T extends { name: string }>(rows: T[]) => new Map(rows.map((r) => [r.name, r]));
  const lastBy = by(last);
  const activeBy = by(active);
  const queuedBy = by(queued);
  const scheduleBy = new Map<string, Schedule>(schedules.map((s) => [s.name, s]));
  return definitions.map((def) => {
    const queue = sweepQueue(def.name);
    const s = def.settings(deps.config);
    const schedule = scheduleBy.get(queue) ?? null;
    const lastRow = lastBy.get(queue);
    const activeRow = activeBy.get(queue);
    const queuedRow = queuedBy.get(queue);
    let next: string | null = queuedRow ? iso(queuedRow.start_after) : null;
    if (!next && schedule) {
      next = iso(deps.boss.previewSchedule(schedule.cron, { tz: schedule.timezone, count: 1 })[0] ?? null);
    }
    const lastView = lastRow ? runView(lastRow) : null;
    return {
      name: def.name,
      summary: def.summary,
      queue,
      enabled: s.enabled,
      interval_seconds: s.intervalSeconds,
      batch_size: s.batchSize,
      max_run_ms: s.maxRunMs,
      variables: def.variables,
      timing: sweepSchedule(s.intervalSeconds).mode,
      schedule: schedule ? { cron: schedule.cron, timezone: schedule.timezone } : null,
      last_run: lastView
        ? {
            ...lastView,
            outcome: lastRow!.state === 'completed' ? 'completed' : 'failed',
            budget_exhausted: typeof lastRow!.output?.budget_exhausted === 'boolean' ? (lastRow!.output.budget_exhausted as boolean) : null,
          }
        : null,
      running: activeRow ? runView(activeRow) : null,
      next_due_at: next,
    };
  });
}
