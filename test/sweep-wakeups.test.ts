/**
 * An idle sweep worker polls pg-boss rarely (sweepPollingSeconds: at most every
 * FERRY_SWEEP_POLL_BACKSTOP_SECONDS, 60 s), so the runs that must start now are woken instead: the
 * start run by the process that queued it, an operator's requested run by its announcement on
 * SWEEP_CHANNEL, which every process's wake-up connection hears at commit (and never when the
 * request rolls back).
 *
 * The probe sweep below runs every two hours, so its poll is the 60 s backstop: a run that starts
 * within 10 s was woken, not polled.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { startBoss, stopBoss } from '../src/actors/boss.ts';
import { requestSweepRun, startSweeps, sweepPollingSeconds, sweepSchedule, type SweepDefinition, type SweepDeps, type SweepWorkers } from '../src/sweeps/sweeps.ts';
import { Wakeups } from '../src/actors/wakeups.ts';
import { loadConfig } from '../src/config.ts';
import { log } from '../src/log.ts';
import { withTransaction } from '../src/persistence/db.ts';
import { announceSweepRun } from '../src/persistence/sweep-jobs.ts';
import { testDatabase } from './helpers/db.ts';
import { waitFor } from './helpers/wait.ts';

const db = await testDatabase();
const quiet = log.child({}, { level: 'silent' });
const config = loadConfig({ FERRY_DATA_DIR: '.ferry/test-sweep-wakeups', FERRY_LOG_LEVEL: 'silent' });
const cleanups: (() => Promise<void>)[] = [];
after(async () => {
  for (const fn of cleanups.reverse()) await fn().catch(() => {});
});

test('polling is a backstop: the interval of a short chain, else FERRY_SWEEP_POLL_BACKSTOP_SECONDS', () => {
  assert.equal(sweepPollingSeconds(sweepSchedule(1), 1), 2);
  assert.equal(sweepPollingSeconds(sweepSchedule(5), 5), 5);
  assert.equal(sweepPollingSeconds(sweepSchedule(30), 30), 30);
  assert.equal(sweepPollingSeconds(sweepSchedule(90), 90), 60);
  // A cron run's insert sends pg-boss's NOTIFY: its poll is the backstop, whatever the interval.
  assert.equal(sweepPollingSeconds(sweepSchedule(60), 60), 60);
  assert.equal(sweepPollingSeconds(sweepSchedule(7200), 7200), 60);
  assert.equal(sweepPollingSeconds(sweepSchedule(7200), 7200, 20), 20);
  assert.equal(sweepPollingSeconds(sweepSchedule(30), 30, 20), 20);
});

test('an announced run wakes the listener at commit, a rolled-back one never', async () => {
  const heard: string[] = [];
  const wakeups = new Wakeups(db.url, { sweep: (q) => heard.push(q) }, quiet);
  await wakeups.start();
  cleanups.push(() => wakeups.stop());
  await assert.rejects(
    withTransaction(db.pool, async (client) => {
      await announceSweepRun(client, 'ferry-sweep-rolled-back');
      throw new Error('the request fails after its announcement');
    }),
    /the request fails/,
  );
  await withTransaction(db.pool, async (client) => {
    await announceSweepRun(client, 'ferry-sweep-committed');
    // Not delivered before the commit.
    await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual(heard, []);
  });
  await waitFor('the committed announcement', async () => heard.length > 0, 10_000);
  assert.deepEqual(heard, ['ferry-sweep-committed']);
});

test('the start run and a requested run start at once, though the sweep polls every 60 s', async () => {
  const boss = await startBoss(db.url, { supervise: false, schedule: false, log: quiet });
  cleanups.push(() => stopBoss(boss));
  const runs: number[] = [];
  const probe: SweepDefinition = {
    name: 'wake_probe',
    summary: 'records when it runs',
    variables: { enabled: 'FERRY_AUDIT_PROMOTER_ENABLED', interval: 'FERRY_AUDIT_PROMOTER_INTERVAL_SECONDS' },
    settings: () => ({ enabled: true, intervalSeconds: 7200, batchSize: null, maxRunMs: 0 }),
    run: async () => {
      runs.push(Date.now());
      return { items: 0, budget_exhausted: false };
    },
  };
  assert.equal(sweepPollingSeconds(sweepSchedule(7200), 7200), 60);
  let sweeps: SweepWorkers | undefined;
  const wakeups = new Wakeups(db.url, { sweep: (q) => sweeps?.wake(q) }, quiet);
  await wakeups.start();
  cleanups.push(() => wakeups.stop());
  const deps = { pool: db.pool, config, log: quiet } as unknown as SweepDeps;
  sweeps = await startSweeps({ boss, deps, processId: 'wake-test', definitions: [probe] });
  cleanups.push(() => sweeps!.stop());

  // Nothing ran before: the start run is queued after the worker's first fetch and woken.
  await waitFor('the start run', async () => runs.length === 1, 10_000);

  // A request from elsewhere (this pool, no direct call to wake): its announcement wakes the worker.
  await requestSweepRun({ pool: db.pool, boss, config }, 'wake_probe', 'operator:test', [probe]);
  await waitFor('the requested run', async () => runs.length === 2, 10_000);

  // An unknown queue is ignored.
  sweeps.wake('ferry-sweep-no-such-sweep');
});
