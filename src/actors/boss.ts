import { createHash } from 'node:crypto';
import { PgBoss, type Queue } from 'pg-boss';
import { APP_NAMES } from '../connection-budget.ts';
import { log as rootLog, type Logger } from '../log.ts';
import { PGBOSS_SCHEMA } from '../persistence/pgboss-jobs.ts';
import { schemaExists } from '../persistence/roles.ts';

/**
 * The pg-boss runtime: durable timing for sweeps and callback deliveries. Ferry pins pg-boss to the
 * release its operator dashboard bundles (12.33.x), because the dashboard refuses any other schema
 * version; upgrade the two together.
 */

/** Ferry's queue names. The sweeps' queues (ferry-sweep-NAME) come from src/sweeps/sweeps.ts. */
export const QUEUES = {
  callbacks: 'ferry-callbacks',
  callbacksDeadLetter: 'ferry-callbacks-dlq',
} as const;

export type QueueName = (typeof QUEUES)[keyof typeof QUEUES];
export type QueueDefinition = Omit<Queue, 'name'>;

/**
 * Waking. Every Ferry queue is created with pg-boss's `notify`: a job inserted ready to run (or
 * brought forward to now) sends a NOTIFY on pg-boss's channel in the inserting transaction, at no
 * extra statement. Ferry does not use pg-boss's own listener (useListenNotify), whose connection
 * would go through DATABASE_URL, which may be PgBouncer in transaction mode, where LISTEN does not
 * work: the process's wake-up connection (src/actors/wakeups.ts, on FERRY_DATABASE_DIRECT_URL)
 * listens on the channel too and wakes the queue's workers (wakeQueue below). Their polling is only
 * the backstop for a lost notification, a job that becomes due later (startAfter, pg-boss's own
 * retries) and a producer that bypasses pg-boss.
 */

/** pg-boss's NOTIFY channel for a schema (plans.notifyChannelSql in pg-boss, computed here). */
export function bossNotifyChannel(schema: string = PGBOSS_SCHEMA): string {
  const name = /^".*"$/.test(schema) ? schema.slice(1, -1) : schema;
  return `pgboss_${createHash('sha224').update(name).digest('hex').slice(0, 24)}`;
}

/** The workers of each queue this process works, by queue and the work() call's id. */
const workersOf = new WeakMap<PgBoss, Map<string, Set<string>>>();

/** Records a work() call's workers (its id and its localConcurrency siblings) for wakeQueue. */
export function registerQueueWorkers(boss: PgBoss, queue: string, workId: string): void {
  let queues = workersOf.get(boss);
  if (!queues) workersOf.set(boss, (queues = new Map()));
  const ids = queues.get(queue) ?? new Set<string>();
  ids.add(workId);
  queues.set(queue, ids);
}

/** Forgets a queue's workers (offWork) and its pending wake-ups. */
export function unregisterQueueWorkers(boss: PgBoss, queue: string): void {
  workersOf.get(boss)?.delete(queue);
  const timers = dueTimers.get(boss);
  for (const [key, timer] of timers ?? []) {
    if (key.startsWith(`${queue}@`)) {
      clearTimeout(timer);
      timers!.delete(key);
    }
  }
}

/**
 * A job arrived on `queue` (its NOTIFY): wakes one of this process's idle workers of the queue, or
 * every queue's when `queue` is null (the wake-up connection came back: notifications may have been
 * missed). One, not all: a NOTIFY stands for a transaction's jobs, and a worker that fetched a job
 * passes the wake-up on (passingWakeUps), so k jobs cost about k + 1 fetches whatever the concurrency.
 * Returns whether the queue is worked here.
 */
export function wakeQueue(boss: PgBoss, queue: string | null): boolean {
  const queues = workersOf.get(boss);
  if (!queues) return false;
  if (queue === null) {
    for (const name of queues.keys()) wakeQueue(boss, name);
    return queues.size > 0;
  }
  const workIds = queues.get(queue);
  if (!workIds) return false;
  const workers = boss.getWipData().filter((w) => w.name === queue && workIds.has(w.workId) && w.state === 'active');
  const idle = workers.find((w) => w.count === 0) ?? workers[0];
  if (idle) boss.notifyWorker(idle.id);
  return true;
}

/**
 * A worker of `queue` got a job: the next one may be waiting, so an idle sibling fetches too.
 * Returns false when every sibling is busy (nobody was woken).
 */
export function wakeNextWorker(boss: PgBoss, queue: string): boolean {
  const queues = workersOf.get(boss);
  const workIds = queues?.get(queue);
  if (!workIds) return false;
  const idle = boss.getWipData().find((w) => w.name === queue && workIds.has(w.workId) && w.state === 'active' && w.count === 0);
  if (idle) boss.notifyWorker(idle.id);
  return idle !== undefined;
}

/**
 * A queue's handler that passes the wake-up on: having got a job, it wakes an idle sibling at once
 * (the next job of the same commit, or of a backlog, may be waiting); when every sibling was busy,
 * it wakes one when its own job is done (wakeQueue: an idle one by then, else one that fetches as
 * soon as it is free). So while jobs remain, some worker always fetches next, and a backlog behind
 * busy workers drains at their pace rather than at the backstop poll.
 */
export function passingWakeUps<J, R>(boss: PgBoss, queue: string, handler: (jobs: J) => Promise<R>): (jobs: J) => Promise<R> {
  return async (jobs) => {
    const passed = wakeNextWorker(boss, queue);
    try {
      return await handler(jobs);
    } finally {
      if (!passed) wakeQueue(boss, queue);
    }
  };
}

/** Pending wakeQueueAt timers, by boss and due time (rounded up to 250 ms: one timer per slot). */
const dueTimers = new WeakMap<PgBoss, Map<string, NodeJS.Timeout>>();
const DUE_SLOT_MS = 250;

/**
 * A job was written to become due at `at` (a callback's retry): its NOTIFY went out at insert,
 * before it could be fetched, so this process wakes the queue's workers when it falls due (a timer,
 * no statement). Without it the job would wait for the backstop poll. A job that did not commit
 * costs one empty fetch.
 */
export function wakeQueueAt(boss: PgBoss, queue: string, at: Date): void {
  const delay = at.getTime() - Date.now();
  if (!(delay > 0)) return;
  const slot = Math.ceil(at.getTime() / DUE_SLOT_MS) * DUE_SLOT_MS;
  let timers = dueTimers.get(boss);
  if (!timers) dueTimers.set(boss, (timers = new Map()));
  const key = `${queue}@${slot}`;
  if (timers.has(key)) return;
  const timer = setTimeout(() => {
    timers.delete(key);
    wakeQueue(boss, queue);
  }, slot - Date.now() + 50);
  timer.unref();
  timers.set(key, timer);
}

/**
 * Queue settings, created in this order (a dead-letter queue before the queue that points at it).
 *
 * ferry-callbacks: a job is one delivery attempt. Ferry's own retry schedule (backoff, max_attempts,
 * 'dlq') lives on the outbox row, so pg-boss retries only cover a handler that threw (the database
 * was unreachable); jobs that keep throwing land in ferry-callbacks-dlq for operators, and the
 * stranded-callback sweep still delivers their rows.
 */
export const queueDefinitions: ReadonlyArray<[string, QueueDefinition]> = [
  [QUEUES.callbacksDeadLetter, { policy: 'standard', deleteAfterSeconds: 14 * 86_400 }],
  [
    QUEUES.callbacks,
    {
      policy: 'standard',
      notify: true,
      retryLimit: 5,
      retryDelay: 5,
      retryBackoff: true,
      retryDelayMax: 300,
      expireInSeconds: 300,
      deleteAfterSeconds: 86_400,
      deadLetter: QUEUES.callbacksDeadLetter,
    },
  ],
];

/**
 * Creates a queue if it is missing and brings an existing one's settings up to date, so a settings
 * change in code reaches databases created by an earlier version. Safe for processes starting together.
 */
export async function ensureQueue(boss: PgBoss, name: string, def: QueueDefinition): Promise<void> {
  await boss.createQueue(name, def);
  const { policy: _policy, partition: _partition, ...updatable } = def;
  if (Object.keys(updatable).length > 0) await boss.updateQueue(name, updatable);
}

export interface StartBossOptions {
  schema?: string;
  /** Run pg-boss maintenance (expiry, retention, monitoring) in this process. Default true. */
  supervise?: boolean;
  /** Send cron jobs from this process. Default true. */
  schedule?: boolean;
  /** pg-boss's own pool size. Default 10. */
  max?: number;
  /** How often maintenance runs (job expiry, heartbeat failures, retention). Default 60 s. */
  superviseIntervalSeconds?: number;
  /**
   * How often pg-boss's flow resolver (job dependencies, which Ferry does not use) claims its turn
   * (FERRY_PGBOSS_FLOW_INTERVAL_SECONDS): three statements a turn, in every process. Default 60 s.
   */
  flowIntervalSeconds?: number;
  log?: Logger;
}

/**
 * Starts pg-boss (installing or migrating its schema) and creates Ferry's queues. Errors pg-boss
 * reports later (a database outage) are logged; they never crash the process, and pg-boss keeps
 * retrying on its own.
 */
export async function startBoss(connectionString: string, opts: StartBossOptions = {}): Promise<PgBoss> {
  const log = (opts.log ?? rootLog).child({ component: 'pg-boss' });
  const schema = opts.schema ?? PGBOSS_SCHEMA;
  const boss = new PgBoss({
    connectionString,
    schema,
    // An application role may own pg-boss's schema without the right to create schemas
    // (src/persistence/roles.ts): pg-boss then installs into the schema it finds.
    createSchema: !(await schemaExists(connectionString, schema)),
    supervise: opts.supervise ?? true,
    schedule: opts.schedule ?? true,
    max: opts.max ?? 10,
    superviseIntervalSeconds: opts.superviseIntervalSeconds ?? 60,
    monitorIntervalSeconds: opts.superviseIntervalSeconds ?? 60,
    flowIntervalSeconds: opts.flowIntervalSeconds ?? 60,
    application_name: APP_NAMES.pgboss,
  });
  boss.on('error', (err) => log.error({ err }, 'pg-boss error'));
  boss.on('warning', (w) => log.warn({ warning: w }, 'pg-boss warning'));
  await boss.start();
  try {
    for (const [name, def] of queueDefinitions) await ensureQueue(boss, name, def);
  } catch (err) {
    await boss.stop({ graceful: false }).catch(() => {});
    throw err;
  }
  return boss;
}

/** How long stopping pg-boss waits for running handlers by default. */
const STOP_TIMEOUT_MS = 30_000;

/** Stops taking jobs, waits for running handlers (up to timeoutMs), then closes pg-boss's pool. */
export async function stopBoss(boss: PgBoss, opts: { timeoutMs?: number } = {}): Promise<void> {
  await boss.stop({ graceful: true, close: true, timeout: opts.timeoutMs ?? STOP_TIMEOUT_MS });
}
