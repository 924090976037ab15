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
