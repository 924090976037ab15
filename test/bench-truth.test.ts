import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { INJECTED_ERROR_CODE } from '../scripts/lib/bench-faults.ts';
import { dropStaleScratchDatabases, scratchAgeSeconds, scratchDatabaseName } from '../scripts/lib/bench-run.ts';
import { createEmptyDatabase, databasesNamed, dropDatabase } from '../scripts/lib/test-databases.ts';
import { exited } from './helpers/processes.ts';
import { waitFor } from './helpers/wait.ts';

/**
 * The benchmark tells the truth: a run in which movements cannot complete ends within the stall
 * limit with a non-zero exit, the states and error codes it saw, and no scratch database left.
 */
function adminUrl(): string {
  const url = process.env.FERRY_TEST_ADMIN_URL;
  if (!url) throw new Error('run tests through `npm test` (it prepares the database server)');
  return url;
}

function runBench(args: string[]) {
  const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/bench.ts', ...args], {
    env: { ...process.env, BENCH_DATABASE_URL: adminUrl(), FERRY_LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const out = { stdout: '', stderr: '' };
  child.stdout.on('data', (d) => (out.stdout += String(d)));
  child.stderr.on('data', (d) => (out.stderr += String(d)));
  // A liveness bound only: the run must end by itself long before this.
  const guard = setTimeout(() => child.kill('SIGKILL'), 240_000);
  const done = exited(child).finally(() => clearTimeout(guard));
  const scratchName = () => /bench: scratch database (ferry_bench_\w+)/.exec(out.stderr)?.[1] ?? null;
  return { child, out, done, scratchName };
}

async function databaseExists(name: string): Promise<boolean> {
  return (await databasesNamed(adminUrl(), name)).includes(name);
}

test('a bench run whose movements cannot complete exits non-zero with states and error codes and drops its database', async () => {
  const run = runBench(['--movements', '3', '--processes', '1', '--failing', '1', '--stuck', '1', '--stall-seconds', '5', '--ceiling-seconds', '1']);
  const { code } = await run.done;
  assert.equal(code, 1, `bench exit code; stderr:\n${run.out.stderr}`);
  const last = run.out.stdout.trim().split('\n').at(-1)!;
  const result = JSON.parse(last);
  assert.equal(result.outcome, 'stalled', 'the stuck movement ends the run at the stall limit');
  assert.deepEqual(result.states, { COMPLETED: 3, FAILED: 1, EXECUTING: 1 });
  assert.deepEqual(result.error_codes, { [INJECTED_ERROR_CODE]: 1 });
  assert.match(run.out.stderr, /no movement progressed for \d+ s \(the stall limit\); 3 of 5 movements completed/);
  assert.match(run.out.stderr, new RegExp(`FAILED +FAILED +${INJECTED_ERROR_CODE} +1`));
  assert.match(run.out.stderr, /EXECUTING +OBSERVING +- +1/);
  const name = run.scratchName();
  assert.ok(name, 'the bench named its scratch database');
  assert.equal(await databaseExists(name), false, 'the scratch database is dropped');
});

test('SIGTERM stops the bench and drops its scratch database', async () => {
  const run = runBench(['--movements', '2', '--processes', '1', '--stuck', '1', '--stall-seconds', '600', '--ceiling-seconds', '1']);
  const name = await waitFor('the bench to create its scratch database', async () => run.scratchName(), 120_000, 50);
  assert.equal(await databaseExists(name), true);
  run.child.kill('SIGTERM');
  const { code } = await run.done;
  assert.equal(code, 143, `exit code after SIGTERM; stderr:\n${run.out.stderr}`);
  assert.equal(await databaseExists(name), false, 'the scratch database is dropped');
});

test('stale scratch databases (older than an hour by their name) are dropped, fresh ones kept', async () => {
  const now = Date.now();
  const stale = scratchDatabaseName(now - 2 * 3600_000);
  const fresh = scratchDatabaseName(now - 60_000);
  assert.equal(scratchAgeSeconds(stale, now), 7200);
  assert.equal(scratchAgeSeconds(`ferry_bench_${randomBytes(4).toString('hex')}`, now), null);
  await createEmptyDatabase(adminUrl(), stale);
  await createEmptyDatabase(adminUrl(), fresh);
  try {
    const dropped = await dropStaleScratchDatabases(adminUrl(), 3600, now);
    assert.ok(dropped.includes(stale));
    assert.ok(!dropped.includes(fresh));
    assert.equal(await databaseExists(stale), false);
    assert.equal(await databaseExists(fresh), true);
  } finally {
    await dropDatabase(adminUrl(), stale);
    await dropDatabase(adminUrl(), fresh);
  }
});
