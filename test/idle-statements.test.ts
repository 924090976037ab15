/**
 * What an idle worker process asks pg-boss for. Its queue workers are woken by pg-boss's NOTIFY (heard
 * on the wake-up connection) and poll only as a backstop, and the audit promoter waits its idle
 * interval once the outbox is empty (src/actors/boss.ts "Waking", src/sweeps/sweeps.ts "Idle chains").
 * Counted, not timed: every statement pg-boss's pool sends is recorded with its text, which names the
 * queue a fetch is for, and the counts over an idle stretch are bounded by what the backstops allow
 * (at most one poll per worker in a stretch shorter than its backstop), well below what the former
 * one-to-three-second polls sent. Work that arrives is still taken at once: a job on a queue whose
 * workers poll every 600 s, and an audit row while the promoter's next run is parked 30 s away.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, test } from 'node:test';
import pg from 'pg';
import { QUEUES, ensureQueue, passingWakeUps, registerQueueWorkers, startBoss, stopBoss, wakeQueue } from '../src/actors/boss.ts';
import { startRuntime, type Runtime } from '../src/actors/runtime.ts';
import { Wakeups } from '../src/actors/wakeups.ts';
import { APP_NAMES } from '../src/connection-budget.ts';
import { loadConfig } from '../src/config.ts';
import { log } from '../src/log.ts';
import { writeAudit } from '../src/persistence/audit.ts';
import { withTransaction } from '../src/persistence/db.ts';
import { PGBOSS_SCHEMA } from '../src/persistence/pgboss-jobs.ts';
import { nextQueuedRuns, runsSince } from '../src/persistence/sweep-jobs.ts';
import { MOVEMENT_QUEUE } from '../src/queue/movement-queue.ts';
import { sweepQueue } from '../src/sweeps/sweeps.ts';
import { testDatabase } from './helpers/db.ts';
import { waitFor } from './helpers/wait.ts';

const db = await testDatabase();
const quiet = log.child({}, { level: 'silent' });
const cleanups: (() => Promise<void>)[] = [];
after(async () => {
  for (const fn of cleanups.reverse()) await fn().catch(() => {});
});

/** pg-boss's statements in this process, while recording. */
const statements: string[] = [];
let recording = false;
const original = pg.Client.prototype.query;
pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
  const app = (this as unknown as { connectionParameters?: { application_name?: string } }).connectionParameters?.application_name;
  if (recording && app === APP_NAMES.pgboss) {
    const first = args[0];
    const text = typeof first === 'string' ? first : ((first as { text?: string } | undefined)?.text ?? '');
    statements.push(text.replace(/\s+/g, ' ').trim());
  }
  return (original as (...a: unknown[]) => unknown).apply(this, args);
} as typeof original;
cleanups.push(async () => {
  pg.Client.prototype.query = original;
});

const isFetch = (text: string) => text.startsWith('WITH next AS');
const fetchesOf = (queue: string) => statements.filter((s) => isFetch(s) && s.includes(`name = '${queue}'`)).length;

async function record(ms: number): Promise<void> {
  statements.length = 0;
  recording = true;
  await new Promise((r) => setTimeout(r, ms));
  recording = false;
}

test('a job announced by its NOTIFY is taken at once by workers that poll every 600 s, one fetch per job and one more', async () => {
  const boss = await startBoss(db.url, { supervise: false, schedule: false, log: quiet });
  cleanups.push(() => stopBoss(boss));
  const queue = 'ferry-idle-probe';
  await ensureQueue(boss, queue, { policy: 'standard', notify: true });
  const done: string[] = [];
  // Open for the first test; the second holds every worker busy while a backlog waits.
  let gate: Promise<void> = Promise.resolve();
  const workId = await boss.work(
    queue,
    { batchSize: 1, localConcurrency: 4, pollingIntervalSeconds: 600 },
    passingWakeUps(boss, queue, async ([job]: { id: string }[]) => {
      await gate;
      done.push(job!.id);
    }),
  );
  registerQueueWorkers(boss, queue, workId);
  const wakeups = new Wakeups(db.url, { queue: (name) => void wakeQueue(boss, name) }, quiet);
  await wakeups.start();
  cleanups.push(() => wakeups.stop());
  // Every worker has made its first fetch; from here on, each fetch was woken.
  await waitFor('the first fetches', async () => boss.getWipData().filter((w) => w.name === queue && w.lastFetchedOn !== null).length === 4, 10_000);

  statements.length = 0;
  recording = true;
  // Three jobs in one transaction: one NOTIFY (PostgreSQL folds a transaction's identical ones).
  const producer = await startBoss(db.url, { supervise: false, schedule: false, log: quiet });
  cleanups.push(() => stopBoss(producer));
  await withTransaction(db.pool, async (client) => {
    const dbc = { executeSql: (text: string, values?: unknown[]) => client.query(text, values as unknown[]) };
    for (let i = 0; i < 3; i++) await producer.send(queue, { i }, { db: dbc });
  });
  await waitFor('the three jobs', async () => done.length === 3, 15_000);
  // Let the last woken worker's fetch (which finds nothing) land.
  await waitFor('the workers to go idle', async () => boss.getWipData().filter((w) => w.name === queue && w.count > 0).length === 0, 10_000);
  recording = false;
  const fetches = fetchesOf(queue);
  assert.ok(fetches >= 3, `${fetches} fetches for three jobs`);
  // Woken one at a time: each job's worker wakes one idle sibling, so not 4 workers x 3 jobs.
  assert.ok(fetches <= 5, `${fetches} fetches for three jobs (one per job, one that finds the queue empty, at most one more)`);

  // Ten jobs while every worker is busy: each worker that found no idle sibling wakes one when its
  // job is done, so the backlog drains without waiting for the 600 s poll.
  let open!: () => void;
  gate = new Promise<void>((r) => (open = r));
  await withTransaction(db.pool, async (client) => {
    const dbc = { executeSql: (text: string, values?: unknown[]) => client.query(text, values as unknown[]) };
    for (let i = 0; i < 10; i++) await producer.send(queue, { i }, { db: dbc });
  });
  await waitFor('every worker busy', async () => boss.getWipData().filter((w) => w.name === queue && w.count > 0).length === 4, 10_000);
  open();
  await waitFor('the backlog behind busy workers', async () => done.length === 13, 15_000);
});

let runtime: Runtime;

test('an idle worker process: each queue worker polls at most once in 8 s, the audit promoter runs at most once', async () => {
  const config = loadConfig({ FERRY_DATA_DIR: '.ferry/test-idle-statements', FERRY_LOG_LEVEL: 'silent', FERRY_CALLBACK_SECRET: 'a-test-secret-of-enough-length' });
  assert.equal(config.callbackIntervalSeconds, 30);
  assert.equal(config.movementQueuePollSeconds, 30);
  assert.equal(config.auditIdleIntervalSeconds, 30);
  runtime = await startRuntime({ pool: db.pool, config, databaseUrl: db.url, log: quiet, workers: true });
  cleanups.push(() => runtime.stop());
  const audit = sweepQueue('audit_outbox_promoter');
  // Settled: the audit promoter found the outbox empty and parked its next run at the idle interval.
  await waitFor(
    'the promoter to park its next run',
    async () => {
      const [next] = await nextQueuedRuns(db.pool, PGBOSS_SCHEMA, [audit]);
      return next !== undefined && +next.start_after - Date.now() > 15_000;
    },
    30_000,
    200,
  );
  // Away from a minute's start, when pg-boss's cron sends the per-minute sweeps (and wakes them).
  const second = new Date().getUTCSeconds();
  if (second > 48) await new Promise((r) => setTimeout(r, (62 - second) * 1000));

  const since = new Date();
  await record(8000);
  const callbackWorkers = config.callbackBatchSize;
  const queueWorkers = config.movementQueueConcurrency;
  assert.ok(fetchesOf(QUEUES.callbacks) <= callbackWorkers, `${fetchesOf(QUEUES.callbacks)} callback fetches by ${callbackWorkers} workers polling every 30 s`);
  assert.ok(fetchesOf(MOVEMENT_QUEUE) <= queueWorkers, `${fetchesOf(MOVEMENT_QUEUE)} movement queue fetches by ${queueWorkers} workers polling every 30 s`);
  assert.ok(fetchesOf(audit) <= 1, `${fetchesOf(audit)} audit promoter fetches`);
  const auditRuns = (await runsSince(db.pool, PGBOSS_SCHEMA, audit, since)).filter((r) => r.started_on && +r.started_on >= +since);
  assert.ok(auditRuns.length <= 1, `${auditRuns.length} audit promoter runs in 8 s`);
  const fetches = statements.filter(isFetch).length;
  // The former polls (movement queue 1 s x 2, callbacks 3 s x 5, the audit chain 1 s) alone sent about 36.
  assert.ok(fetches <= 12, `${fetches} pg-boss fetches in 8 s of idleness`);
});

test('an audit row is promoted at once, though the idle promoter had parked its next run 30 s away', async () => {
  const audit = sweepQueue('audit_outbox_promoter');
  const [parked] = await nextQueuedRuns(db.pool, PGBOSS_SCHEMA, [audit]);
  assert.ok(parked && +parked.start_after - Date.now() > 5_000, 'the next run is parked');
  const parkedUntil = +parked.start_after;
  const entity = randomUUID();
  await writeAudit(db.pool, { actor: 'test', action: 'idle.probe', entity_type: 'probe', entity_id: entity });
  await waitFor(
    'the row on the chain',
    async () => (await db.pool.query('SELECT 1 FROM audit_events WHERE entity_id = $1', [entity])).rowCount === 1,
    20_000,
    100,
  );
  assert.ok(Date.now() < parkedUntil, 'promoted before the parked run was due: its NOTIFY brought the run forward');
});
