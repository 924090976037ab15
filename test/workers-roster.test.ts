/**
 * Workers at a glance: every worker of every process is listed by GET /v3/workers and `ferry workers`
 * (two real worker processes), a worker disabled by its FERRY_WORKER_<NAME>_ENABLED switch shows as
 * disabled and never runs, and a failing worker's consecutive errors and last error (secrets
 * redacted) appear.
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { after, test } from 'node:test';
import { runLoop } from '../src/actors/loop-runner.ts';
import { sweepDefinitions } from '../src/sweeps/sweeps.ts';
import { redactSecrets, WorkerRoster } from '../src/actors/worker-roster.ts';
import { log } from '../src/log.ts';
import { createToken } from '../src/persistence/tokens.ts';
import { singleNodeTemplate, seedMovement } from './helpers/fixtures.ts';
import { runCliProcess } from './helpers/cli.ts';
import { ferryForFile } from './helpers/ferry.ts';
import { callApi } from './helpers/http.ts';
import { exited, spawnWorker } from './helpers/processes.ts';
import { waitFor } from './helpers/wait.ts';

const children: ChildProcess[] = [];
after(async () => {
  for (const c of children) {
    if (c.exitCode === null && c.signalCode === null) {
      c.kill('SIGTERM');
      await exited(c);
    }
  }
});
// The API process runs no workers: the two worker processes below are the ones listed.
const { db, ferry } = await ferryForFile({}, { runtime: 'api' });
const viewer = (await createToken(db.pool, { name: 'workers-viewer', role: 'viewer' })).token;
const workersNow = async () => {
  const r = await callApi(ferry.url, 'GET', '/v3/workers', viewer);
  assert.equal(r.status, 200, r.text);
  return r.body.workers as any[];
};

test('two processes: every worker listed with its switch and interval; a disabled one never runs', async () => {
  const common = { FERRY_CALLBACK_SECRET: 'a-test-secret-of-enough-length', FERRY_NODE_RECOVERY_INTERVAL_SECONDS: '0.2' };
  // The same workers in both processes; the quiet one has its recovery loop switched off.
  const quiet = spawnWorker(db.url, { ...common, FERRY_WORKER_NODE_RECOVERY_ENABLED: 'false' });
  const busy = spawnWorker(db.url, common);
  children.push(quiet, busy);
  // The lanes' core workers have rows too: the CCIP lane's reaper, disabled here (no ccip section).
  const others = ['node_recovery', 'ccip_stranded_reaper', 'callback_dispatcher', ...sweepDefinitions.map((d) => d.name)];
  const expected = ['lease_holder', ...others].sort();

  const rows = await waitFor('both processes to report their recovery loop', async () => {
    const all = await workersNow();
    const recovery = all.filter((w) => w.worker_name === 'node_recovery');
    const ran = recovery.find((w) => w.pid === busy.pid && w.runs > 0);
    return recovery.length === 2 && ran ? all : null;
  }, 60_000, 200);

  for (const child of [quiet, busy]) {
    const mine = rows.filter((w) => w.pid === child.pid);
    assert.deepEqual(mine.map((w) => w.worker_name).sort(), expected, `every worker of process ${child.pid}`);
    assert.equal(new Set(mine.map((w) => w.process_id)).size, 1);
    const cb = mine.find((w) => w.worker_name === 'callback_dispatcher');
    assert.equal(cb.kind, 'queue');
    assert.equal(cb.interval_seconds, 30, 'the callback dispatch interval setting (its default, a backstop: jobs wake the consumer)');
    // A queue consumer polls from its start: running before its first job, never left at 'starting'.
    assert.equal(cb.status, 'running', `callback_dispatcher of ${child.pid}`);
    const audit = mine.find((w) => w.worker_name === 'audit_outbox_promoter');
    assert.equal(audit.kind, 'sweep');
    assert.equal(audit.enabled, true);
  }
  const reaper = rows.find((w) => w.pid === busy.pid && w.worker_name === 'ccip_stranded_reaper');
  assert.deepEqual([reaper.group, reaper.enabled, reaper.status], ['core', false, 'disabled']);
  const disabled = rows.find((w) => w.pid === quiet.pid && w.worker_name === 'node_recovery');
  assert.equal(disabled.enabled, false);
  assert.equal(disabled.status, 'disabled');
  const running = rows.find((w) => w.pid === busy.pid && w.worker_name === 'node_recovery');
  assert.equal(running.enabled, true);
  assert.equal(running.interval_seconds, 0.2);
  // The busy process's recovery has run again and again by now; the disabled one still has not.
  await waitFor('the enabled recovery loop to report more runs', async () => {
    const r = (await workersNow()).find((w) => w.pid === busy.pid && w.worker_name === 'node_recovery');
    return r.runs > running.runs ? r : null;
  }, 30_000, 200);
  const still = (await workersNow()).find((w) => w.pid === quiet.pid && w.worker_name === 'node_recovery');
  assert.equal(still.runs, 0, 'a disabled worker does not run');
  assert.equal(still.last_run_at, null);
  assert.equal(still.status, 'disabled');

  const out = await runCliProcess(['workers'], { FERRY_URL: ferry.url, FERRY_TOKEN: viewer });
  assert.equal(out.code, 0, out.stderr);
  const lines = out.stdout.split('\n');
  assert.match(lines[0], /^PROCESS\s+CLASS\s+STATE\s+CORE\s+SIDECAR\s+ACTORS\s+LEASES/);
  assert.ok(lines.some((l) => /^PROCESS\s+WORKER\s+KIND\s+ENABLED\s+EVERY\s+STATUS/.test(l)), out.stdout);
  assert.ok(lines.some((l) => l.includes(`:${quiet.pid}:`) && /node_recovery\s+loop\s+no\s+0.2s\s+disabled/.test(l)), out.stdout);
  assert.ok(lines.some((l) => l.includes(`:${busy.pid}:`) && /node_recovery\s+loop\s+yes\s+0.2s\s+running/.test(l)), out.stdout);
});

test("a failing worker's consecutive errors and last error appear, with secrets redacted", async () => {
  const secret = 'hunter2-is-the-password';
  const roster = new WorkerRoster(db.pool, 'test-host:1:failing', log.child({ test: true }), [secret]);
  await roster.seed([{ name: 'failing_loop', group: 'core', kind: 'loop', enabled: true, intervalSeconds: 0.1 }]);
  const stop = new AbortController();
  let calls = 0;
  const key = `0x${'ab'.repeat(32)}`;
  await runLoop(
    {
      name: 'failing_loop',
      intervalMs: 100,
      run: async () => {
        if (++calls >= 3) stop.abort();
        throw new Error(`provider said no: postgres://ferry:${secret}@127.0.0.1:1/db refused; Bearer ferry_${'x'.repeat(30)}; key ${key}; token=abc123`);
      },
      onRun: (stats) => roster.loopRan('failing_loop', stats),
    },
    stop.signal,
    log.child({ test: true, level: 'silent' }),
  );
  const row = await waitFor('the failing worker to report three errors', async () => {
    const r = (await workersNow()).find((w) => w.process_id === 'test-host:1:failing');
    return r && r.consecutive_errors === 3 ? r : null;
  });
  assert.equal(row.status, 'failing');
  assert.equal(row.runs, 3);
  assert.match(row.last_error, /^provider said no: postgres:\/\/\[redacted\]@127\.0\.0\.1:1\/db refused/);
  for (const leaked of [secret, 'ferry_xxxx', key, 'abc123']) assert.ok(!row.last_error.includes(leaked), `${leaked} in ${row.last_error}`);
  assert.equal(redactSecrets('api_key: s3cr3t and password=p4ss'), 'api_key: [redacted] and password=[redacted]');
  // Ferry's own secrets, in the shapes it issues them (tokens.ts, callback-destinations, dashboard sessions).
  const apiToken = (await createToken(db.pool, { name: 'redaction-probe', role: 'viewer' })).token;
  assert.equal(redactSecrets(`refused ${apiToken} and fcs_${'a'.repeat(64)}`), 'refused [redacted] and [redacted]');
});

test('processes: groups expected against running, actors and leases; stopped, gone and other network classes', async () => {
  const common = { FERRY_CALLBACK_SECRET: 'a-test-secret-of-enough-length' };
  const actors = spawnWorker(db.url, { ...common, FERRY_NETWORK_CLASS: 'testnet' });
  const stopping = spawnWorker(db.url, { ...common, FERRY_NETWORK_CLASS: 'testnet' });
  const mainnet = spawnWorker(db.url, { ...common, FERRY_NETWORK_CLASS: 'mainnet' });
  children.push(actors, stopping, mainnet);
  const processesOf = async (cls: string) => {
    const r = await callApi(ferry.url, 'GET', `/v3/workers?network_class=${cls}`, viewer);
    assert.equal(r.status, 200, r.text);
    return r.body as { processes: any[]; workers: any[] };
  };
  const seen = await waitFor('the testnet processes to be alive with their core groups running', async () => {
    const { processes } = await processesOf('testnet');
    const a = processes.find((p) => p.pid === actors.pid);
    const s = processes.find((p) => p.pid === stopping.pid);
    return a?.state === 'alive' && s?.state === 'alive' && a.groups.core.running === a.groups.core.expected && s.groups.core.running === s.groups.core.expected ? { a, s, processes } : null;
  }, 60_000, 200);
  assert.ok(!seen.processes.some((p) => p.pid === mainnet.pid), 'another network class is not in this one');
  assert.equal(seen.a.network_class, 'testnet');
  assert.equal(seen.a.live_actors, 0, "a worker process reports its lease holder's live actors");
  assert.deepEqual(seen.a.groups.core.not_running, []);
  assert.ok(Number.isInteger(seen.a.last_beat_age_seconds) && seen.a.last_beat_age_seconds >= 0 && seen.a.last_beat_age_seconds < 60, `a live process beat lately: ${seen.a.last_beat_age_seconds}`);
  assert.ok(seen.a.groups.core.expected >= 2, 'the lease holder and recovery');
  // The mainnet process is listed under all (it may seed its rows a moment after the others).
  await waitFor('every class under all', async () => {
    const { processes } = await processesOf('all');
    return processes.some((p) => p.pid === mainnet.pid) && processes.some((p) => p.pid === actors.pid);
  }, 60_000, 200);
  const bad = await callApi(ferry.url, 'GET', '/v3/workers?network_class=Not%20A%20Class', viewer);
  assert.equal(bad.status, 400, bad.text);

  // A lease the actor process holds on a running movement is counted for it; an expired one apart.
  const movement = await seedMovement(db.pool, singleNodeTemplate('workers-leases'));
  const actorProcess = seen.a.process_id;
  await db.pool.query(
    "UPDATE movement_requests SET request_state = 'EXECUTING', next_work_at = NULL, lease_owner = $2, lease_expires_at = now() - interval '1 minute' WHERE id = $1",
    [movement.movement.id, actorProcess],
  );
  const expired = (await processesOf('testnet')).processes.find((p) => p.pid === actors.pid);
  assert.deepEqual(expired.leases, { live: 0, expired: 1 });

  // SIGTERM: the process marks itself stopped; SIGKILL: it is gone once its beats are old enough.
  stopping.kill('SIGTERM');
  assert.equal((await exited(stopping)).code, 0);
  const stopped = (await processesOf('testnet')).processes.find((p) => p.pid === stopping.pid);
  assert.equal(stopped.state, 'stopped');
  assert.equal(stopped.groups.core.running, 0);
  actors.kill('SIGKILL');
  await exited(actors);
  await db.pool.query("UPDATE worker_heartbeats SET last_beat_at = now() - interval '5 minutes' WHERE process_id = $1", [actorProcess]);
  const gone = (await processesOf('testnet')).processes.find((p) => p.pid === actors.pid);
  assert.equal(gone.state, 'gone');
  assert.ok(gone.last_beat_age_seconds >= 300 && gone.last_beat_age_seconds < 400, `its beats are five minutes old: ${gone.last_beat_age_seconds}`);
  assert.equal(gone.live_actors, 0);
  assert.deepEqual(gone.groups.core.not_running.sort(), ['lease_holder', 'node_recovery']);

  // The CLI shows the live processes; --all the stopped and gone ones too.
  const cli = await runCliProcess(['workers', '--network-class', 'testnet'], { FERRY_URL: ferry.url, FERRY_TOKEN: viewer });
  assert.equal(cli.code, 0, cli.stderr);
  assert.ok(!cli.stdout.includes(`:${stopping.pid}:`), cli.stdout);
  assert.match(cli.stdout, /2 stopped or gone processes not shown/);
  const all = await runCliProcess(['workers', '--network-class', 'testnet', '--all'], { FERRY_URL: ferry.url, FERRY_TOKEN: viewer });
  assert.ok(all.stdout.split('\n').some((l) => l.includes(`:${stopping.pid}:`) && /testnet\s+stopped/.test(l)), all.stdout);
  assert.ok(all.stdout.split('\n').some((l) => l.includes(`:${actors.pid}:`) && /testnet\s+gone/.test(l)), all.stdout);
});

test('a sidecar the supervisor restarts shows restarting, then its restarts', async () => {
  const roster = new WorkerRoster(db.pool, 'test-host:2:supervised', log.child({ test: true }), [], { networkClass: 'default' });
  await roster.seed([{ name: 'some_sidecar', group: 'sidecar', kind: 'loop', enabled: true, intervalSeconds: 1 }]);
  roster.supervised('some_sidecar', 'restarting');
  await waitFor('the row to say restarting', async () => (await workersNow()).find((w) => w.process_id === 'test-host:2:supervised' && w.status === 'restarting'));
  roster.supervised('some_sidecar', 'restarted');
  roster.ran('some_sidecar', null);
  const row = await waitFor('the row to count the restart', async () => (await workersNow()).find((w) => w.process_id === 'test-host:2:supervised' && w.restarts === 1 && w.status === 'running'));
  assert.equal(row.network_class, 'default');
  await roster.stopped();
  const after = (await workersNow()).find((w) => w.process_id === 'test-host:2:supervised');
  assert.equal(after.status, 'stopped');
});
