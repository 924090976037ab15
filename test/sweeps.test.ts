/**
 * Sweeps as pg-boss jobs, in one process: how an interval becomes a schedule, the first runs and
 * their stored results, a manual run (audited, never beside a running one), GET /v3/workers, a
 * changed interval rewriting the schedule on the next start, and the move from the loop scheme.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { PGBOSS_SCHEMA } from '../src/persistence/pgboss-jobs.ts';
import { startRuntime, type Runtime } from '../src/actors/runtime.ts';
import { requestSweepRun, sweepDefinitions, sweepQueue, sweepSchedule } from '../src/sweeps/sweeps.ts';
import { runCli } from '../src/cli/run.ts';
import { loadConfig } from '../src/config.ts';
import { createApp, type FerryApp } from '../src/http/app.ts';
import { log } from '../src/log.ts';
import { runsSince } from '../src/persistence/sweep-jobs.ts';
import { createToken } from '../src/persistence/tokens.ts';
import { testDatabase } from './helpers/db.ts';
import { seedMovement } from './helpers/fixtures.ts';
import { plan, simNode } from './helpers/runtime.ts';
import { waitFor } from './helpers/wait.ts';

let runtime: Runtime | undefined;
const apps: FerryApp[] = [];
after(async () => {
  for (const app of apps) await app.close();
  await runtime?.stop();
});
const db = await testDatabase();

const env = (extra: Record<string, string> = {}) =>
  loadConfig({
    FERRY_DATA_DIR: '.ferry/test-sweeps',
    FERRY_LOG_LEVEL: 'silent',
    FERRY_EXPIRATION_CHECK_INTERVAL_SECONDS: '1',
    FERRY_AUDIT_PROMOTER_INTERVAL_SECONDS: '1',
    FERRY_RECONCILIATION_INTERVAL_SECONDS: '2',
    FERRY_CALLBACK_STRANDED_SWEEP_INTERVAL_SECONDS: '2',
    FERRY_EXECUTOR_HEALTH_INTERVAL_SECONDS: '120',
    // Off by default; on here so every sweep of the registry is exercised (no wallets: it records nothing).
    FERRY_BALANCE_SNAPSHOT_ENABLED: 'true',
    FERRY_BALANCE_SNAPSHOT_INTERVAL_SECONDS: '2',
    // On by default; no EVM lane here, so each run records that it had nothing to reap.
    FERRY_EVM_NONCE_REAPER_INTERVAL_SECONDS: '2',
    FERRY_TEMPLATE_PROPOSAL_EXPIRATION_INTERVAL_SECONDS: '2',
    FERRY_TEMPLATE_FINALIZATION_INTERVAL_SECONDS: '2',
    FERRY_POLICY_PROPOSALS_INTERVAL_SECONDS: '2',
    // Off by default; on here so they are exercised too (no channels, nothing waiting: they record nothing).
    FERRY_NOTIFY_ENABLED: 'true',
    FERRY_NOTIFY_INTERVAL_SECONDS: '2',
    FERRY_CAPITAL_TRANSFER_FOLLOWUP_ENABLED: 'true',
    FERRY_CAPITAL_TRANSFER_FOLLOWUP_INTERVAL_SECONDS: '2',
    // No standing orders here: each run is one indexed read.
    FERRY_STANDING_ORDERS_INTERVAL_SECONDS: '2',
    FERRY_BALANCE_HISTORY_INTERVAL_SECONDS: '2',
    // On only with venues; an account the configuration lacks is reported in each run's result.
    FERRY_CEX_TRANSFER_INGEST_VENUES: 'no-such-account',
    FERRY_CEX_TRANSFER_INGEST_INTERVAL_SECONDS: '2',
    // On by default (every 6 hours); no lane declares a baseline here, so each run reads nothing.
    FERRY_VERIFY_DRIFT_INTERVAL_SECONDS: '2',
    // Without a ccip section each run reports it skipped.
    FERRY_CCIP_DRIFT_INTERVAL_SECONDS: '2',
    ...extra,
  });

const schedules = async () => {
  const { rows } = await db.pool.query<{ name: string; cron: string }>(`SELECT name, cron FROM ${PGBOSS_SCHEMA}.schedule ORDER BY name`);
  return Object.fromEntries(rows.map((r) => [r.name, r.cron]));
};

test('an interval cron can express is a schedule; any other one (all under a minute) a chain with a watchdog', () => {
  assert.deepEqual(sweepSchedule(60), { mode: 'cron', cron: '* * * * *' });
  assert.deepEqual(sweepSchedule(300), { mode: 'cron', cron: '*/5 * * * *' });
  assert.deepEqual(sweepSchedule(3600), { mode: 'cron', cron: '0 * * * *' });
  assert.deepEqual(sweepSchedule(7200), { mode: 'cron', cron: '0 */2 * * *' });
  assert.deepEqual(sweepSchedule(86_400), { mode: 'cron', cron: '0 0 * * *' });
  assert.deepEqual(sweepSchedule(30), { mode: 'chain', cron: '* * * * *', everySeconds: 30 });
  assert.deepEqual(sweepSchedule(1), { mode: 'chain', cron: '* * * * *', everySeconds: 1 });
  assert.deepEqual(sweepSchedule(90), { mode: 'chain', cron: '* * * * *', everySeconds: 90 });
  assert.deepEqual(sweepSchedule(420), { mode: 'chain', cron: '* * * * *', everySeconds: 420 });
});

test('a database of the loop scheme moves over on start: its sweep queue is retired, every sweep gets a queue and a schedule', async () => {
  // What the previous version left: its stranded-callback queue (with a schedule, as a standalone
  // delivery worker set it) and heartbeat rows of the sidecar loops.
  const { startBoss, stopBoss } = await import('../src/actors/boss.ts');
  const old = await startBoss(db.url, { supervise: false, schedule: false });
  await old.createQueue('ferry-callbacks-sweep', { policy: 'singleton' });
  await old.schedule('ferry-callbacks-sweep', '* * * * *');
  await stopBoss(old);
  // An approval that expired while nothing ran: the new scheme's first expiry run handles it, once.
  const { movement: overdue } = await seedMovement(db.pool, plan('sweeps-upgrade', [simNode('pay', {})]), {
    expiresAt: new Date(Date.now() - 60_000).toISOString(),
    callbackUrl: 'http://127.0.0.1:9/never-delivered',
  });

  const started = new Date(Date.now() - 1000);
  runtime = await startRuntime({ pool: db.pool, config: env(), databaseUrl: db.url, log, workers: true });
  assert.equal(await runtime.boss.getQueue('ferry-callbacks-sweep'), null, 'the old sweep queue is gone');
  const s = await schedules();
  assert.equal(s['ferry-callbacks-sweep'], undefined);
  for (const def of sweepDefinitions) {
    const queue = await runtime.boss.getQueue(sweepQueue(def.name));
    assert.ok(queue, `${def.name} has a queue`);
    assert.equal(queue.policy, 'stately', 'one queued and one active run at most');
    assert.ok(s[sweepQueue(def.name)], `${def.name} has a schedule`);
  }
  assert.equal(s[sweepQueue('executor_health')], '*/2 * * * *', 'a 120 s interval is a cron schedule');
  assert.equal(s[sweepQueue('expiration_checker')], '* * * * *', 'a 1 s interval is a chain with its per-minute watchdog');

  // Every sweep runs at start, and the chained ones again and again; each result is stored.
  for (const def of sweepDefinitions) {
    const runs = await waitFor(`${def.name} runs`, async () => {
      const rows = (await runsSince(db.pool, PGBOSS_SCHEMA, sweepQueue(def.name), started)).filter((r) => r.state === 'completed');
      const enough = def.name === 'executor_health' ? 1 : 3;
      return rows.length >= enough ? rows : null;
    });
    assert.equal(runs[0].data?.trigger, 'start', `${def.name}: the first run is the start run`);
    for (const r of runs) {
      assert.equal(typeof r.output?.items, 'number', `${def.name}: the output says what the run did`);
      assert.equal(typeof r.output?.budget_exhausted, 'boolean', `${def.name}: and whether the budget stopped it`);
      assert.equal(r.output?.process_id, runtime.processId);
    }
    if (def.name !== 'executor_health') assert.ok(runs.slice(1).some((r) => r.data?.trigger === 'chain'), `${def.name} chains its runs`);
    assert.equal(runs.filter((r) => r.data?.trigger === 'start').length, 1, `${def.name}: one start run`);
  }
  const { rows: expired } = await db.pool.query(
    `SELECT (SELECT request_state FROM movement_requests WHERE id = $1) AS state,
            (SELECT count(*)::int FROM transitions WHERE entity_id = $1 AND event_type = 'EXPIRE') AS n`,
    [overdue.id],
  );
  assert.deepEqual(expired[0], { state: 'EXPIRED', n: 1 }, 'the overdue approval expired once at the switch');
});

test('GET /v3/workers reports each sweep from the job records and the hot loops from their heartbeats', async () => {
  const config = env();
  const app = createApp({ pool: db.pool, config, runtime });
  apps.push(app);
  const viewer = await createToken(db.pool, { name: 'workers-viewer', role: 'viewer' });
  const res = await app.request('/v3/workers', { headers: { authorization: `Bearer ${viewer.token}` } });
  assert.equal(res.status, 200);
  const body = (await res.json()) as any;
  assert.deepEqual(
    body.sweeps.map((s: any) => s.name),
    sweepDefinitions.map((d) => d.name),
  );
  for (const s of body.sweeps) {
    assert.ok(s.last_run || s.running, `${s.name} has run`);
    if (s.last_run) {
      assert.equal(s.last_run.outcome, 'completed');
      assert.equal(typeof s.last_run.duration_ms, 'number');
      assert.equal(typeof s.last_run.budget_exhausted, 'boolean');
    }
    assert.ok(s.next_due_at, `${s.name} has a next due time`);
    assert.ok(s.schedule?.cron);
  }
  const health = body.sweeps.find((s: any) => s.name === 'executor_health');
  assert.equal(health.timing, 'cron');
  assert.equal(health.schedule.cron, '*/2 * * * *');
  assert.ok(body.loops.some((l: any) => l.worker_name === 'lease_holder' && l.process_id === runtime!.processId), 'hot loops beat');
  assert.ok(!body.loops.some((l: any) => l.worker_name === 'expiration_checker'), 'sweeps are not loops any more');

  const anonymous = await app.request('/v3/workers');
  assert.equal(anonymous.status, 401);
});

test('running a sweep by hand queues one run, audited in the same transaction; a waiting run is brought forward, not doubled', async () => {
  const config = env();
  const queue = sweepQueue('executor_health');
  const since = new Date();
  // The cron sweep has nothing waiting between runs: a new job is written.
  const first = await requestSweepRun({ pool: db.pool, boss: runtime!.boss, config }, 'executor_health', 'cli:alice');
  assert.equal(first.how, 'queued');
  const done = await waitFor('the manual run', async () => {
    const rows = await runsSince(db.pool, PGBOSS_SCHEMA, queue, since);
    return rows.find((r) => r.id === first.job_id && r.state === 'completed');
  });
  assert.equal(done.data?.trigger, 'manual');
  assert.equal(done.data?.requested_by, 'cli:alice');

  // The chained sweep always has its next run waiting: that one is moved to now.
  const chained = await requestSweepRun({ pool: db.pool, boss: runtime!.boss, config }, 'reconciliation', 'cli:bob');
  assert.equal(chained.how, 'advanced');

  // Pending in the outbox or already promoted onto the chain: one row either way.
  const { rows } = await db.pool.query(
    `SELECT id, actor, entity_id, details FROM audit_outbox WHERE action = 'sweep.run_requested'
     UNION ALL SELECT outbox_id, actor, entity_id, details FROM audit_events WHERE action = 'sweep.run_requested' ORDER BY 1`,
  );
  assert.deepEqual(
    rows.map((r) => [r.actor, r.entity_id, r.details.job_id]),
    [
      ['cli:alice', 'executor_health', first.job_id],
      ['cli:bob', 'reconciliation', chained.job_id],
    ],
  );
  await assert.rejects(requestSweepRun({ pool: db.pool, boss: runtime!.boss, config }, 'no_such_sweep', 'cli:x'), { code: 'NOT_FOUND' });
});

test('ferry sweeps run NAME runs a sweep now through the same audited service; ferry sweeps list shows them all', async () => {
  const out: string[] = [];
  const err: string[] = [];
  const io = { out: (t: string) => out.push(t), err: (t: string) => err.push(t) };
  const env = { DATABASE_URL: db.url, FERRY_DATA_DIR: '.ferry/test-sweeps-cli', FERRY_LOG_LEVEL: 'silent' };
  assert.equal(await runCli(['sweeps', 'run', 'executor_health', '--by', 'carol', '--json'], { env, io }), 0, err.join('\n'));
  const queued = JSON.parse(out.pop()!);
  assert.equal(queued.sweep, 'executor_health');
  const { rows } = await db.pool.query(
    `SELECT actor FROM audit_outbox WHERE action = 'sweep.run_requested' AND details->>'job_id' = $1
     UNION ALL SELECT actor FROM audit_events WHERE action = 'sweep.run_requested' AND details->>'job_id' = $1`,
    [queued.job_id],
  );
  assert.deepEqual(rows, [{ actor: 'cli:carol' }]);
  await waitFor('the CLI-requested run', async () => {
    const r = await db.pool.query(`SELECT state FROM ${PGBOSS_SCHEMA}.job WHERE id = $1`, [queued.job_id]);
    return r.rows[0]?.state === 'completed';
  });

  assert.equal(await runCli(['sweeps', 'run', 'nope'], { env, io }), 2, 'an unknown sweep is a usage error');
  assert.match(err.join('\n'), /unknown sweep "nope"; choose one of: expiration_checker/);

  assert.equal(await runCli(['sweeps', 'list'], { env, io }), 0);
  const table = out.join('\n');
  for (const def of sweepDefinitions) assert.match(table, new RegExp(`^${def.name} `, 'm'));
});

test('a changed interval changes the schedule on the next start; a disabled sweep loses its schedule; a restart mid-chain adds no run', async () => {
  await runtime!.stop();
  const restarted = new Date();
  runtime = await startRuntime({
    pool: db.pool,
    config: env({ FERRY_EXECUTOR_HEALTH_INTERVAL_SECONDS: '300', FERRY_RECONCILIATION_ENABLED: 'false' }),
    databaseUrl: db.url,
    log,
    workers: true,
  });
  const s = await schedules();
  assert.equal(s[sweepQueue('executor_health')], '*/5 * * * *');
  assert.equal(s[sweepQueue('reconciliation')], undefined);
  assert.ok(await runtime.boss.getQueue(sweepQueue('reconciliation')), 'its queue and history stay');
  // The chained sweeps still had their next run waiting: the restart queued no start run for them.
  for (const name of ['expiration_checker', 'audit_outbox_promoter', 'callback_stranded_sweep']) {
    const rows = await runsSince(db.pool, PGBOSS_SCHEMA, sweepQueue(name), restarted);
    assert.equal(rows.filter((r) => r.data?.trigger === 'start').length, 0, `${name}: no start run on restart`);
  }
});
