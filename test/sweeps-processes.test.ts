/**
 * Sweeps across real processes: two worker processes run every sweep on its (shortened) schedule and
 * never two runs of one sweep at once, checked from pg-boss's job records; the dashboard lists every
 * sweep queue and its schedule; and a process SIGKILLed in the middle of an expiry run has its job
 * retried by the other process, with each expired approval expiring exactly once (one transition,
 * one callback, one audit event).
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, test } from 'node:test';
import { PGBOSS_SCHEMA } from '../src/persistence/pgboss-jobs.ts';
import { sweepDefinitions, sweepQueue } from '../src/sweeps/sweeps.ts';
import { loadConfig } from '../src/config.ts';
import { createApp, type FerryApp } from '../src/http/app.ts';
import { runsSince, type SweepJobRow } from '../src/persistence/sweep-jobs.ts';
import { createToken } from '../src/persistence/tokens.ts';
import { testDatabase } from './helpers/db.ts';
import { seedMovement } from './helpers/fixtures.ts';
import { exited } from './helpers/processes.ts';
import { waitFor } from './helpers/wait.ts';
import { plan, simNode } from './helpers/runtime.ts';

const INTERVALS: Record<string, number> = {
  expiration_checker: 1,
  audit_outbox_promoter: 1,
  reconciliation: 2,
  callback_stranded_sweep: 2,
  executor_health: 2,
  balance_snapshot: 2,
  evm_nonce_reaper: 2,
  template_proposal_expiration: 2,
  template_finalization: 2,
  notification_dispatcher: 2,
  capital_transfer_followup: 2,
  standing_orders: 2,
  policy_proposals: 2,
  balance_history_rollup: 2,
  cex_transfer_ingest: 2,
  verify_drift: 2,
  ccip_drift: 2,
};

const ENV = {
  // "sweep run started" is a debug line (sweeps run every few seconds; people read the info lines).
  FERRY_LOG_LEVEL: 'debug',
  FERRY_EXPIRATION_CHECK_INTERVAL_SECONDS: String(INTERVALS.expiration_checker),
  FERRY_AUDIT_PROMOTER_INTERVAL_SECONDS: String(INTERVALS.audit_outbox_promoter),
  // Its outbox is mostly empty here: without this, its runs would wait the 30 s idle interval.
  FERRY_AUDIT_PROMOTER_IDLE_INTERVAL_SECONDS: String(INTERVALS.audit_outbox_promoter),
  FERRY_RECONCILIATION_INTERVAL_SECONDS: String(INTERVALS.reconciliation),
  FERRY_CALLBACK_STRANDED_SWEEP_INTERVAL_SECONDS: String(INTERVALS.callback_stranded_sweep),
  FERRY_EXECUTOR_HEALTH_INTERVAL_SECONDS: String(INTERVALS.executor_health),
  FERRY_BALANCE_SNAPSHOT_ENABLED: 'true',
  FERRY_BALANCE_SNAPSHOT_INTERVAL_SECONDS: String(INTERVALS.balance_snapshot),
  FERRY_EVM_NONCE_REAPER_INTERVAL_SECONDS: String(INTERVALS.evm_nonce_reaper),
  FERRY_TEMPLATE_PROPOSAL_EXPIRATION_INTERVAL_SECONDS: String(INTERVALS.template_proposal_expiration),
  FERRY_TEMPLATE_FINALIZATION_INTERVAL_SECONDS: String(INTERVALS.template_finalization),
  // Off by default; on here so every sweep of the registry runs across the processes.
  FERRY_NOTIFY_ENABLED: 'true',
  FERRY_NOTIFY_INTERVAL_SECONDS: String(INTERVALS.notification_dispatcher),
  FERRY_CAPITAL_TRANSFER_FOLLOWUP_ENABLED: 'true',
  FERRY_CAPITAL_TRANSFER_FOLLOWUP_INTERVAL_SECONDS: String(INTERVALS.capital_transfer_followup),
  FERRY_STANDING_ORDERS_INTERVAL_SECONDS: String(INTERVALS.standing_orders),
  FERRY_POLICY_PROPOSALS_INTERVAL_SECONDS: String(INTERVALS.policy_proposals),
  FERRY_BALANCE_HISTORY_INTERVAL_SECONDS: String(INTERVALS.balance_history_rollup),
  // On only with venues; an account the configuration lacks is reported in each run's result.
  FERRY_CEX_TRANSFER_INGEST_VENUES: 'no-such-account',
  FERRY_CEX_TRANSFER_INGEST_INTERVAL_SECONDS: String(INTERVALS.cex_transfer_ingest),
  FERRY_VERIFY_DRIFT_INTERVAL_SECONDS: String(INTERVALS.verify_drift),
  // Without a ccip section each run reports it skipped.
  FERRY_CCIP_DRIFT_INTERVAL_SECONDS: String(INTERVALS.ccip_drift),
  // A dead process's run is noticed within heartbeat + one maintenance pass.
  FERRY_PGBOSS_SUPERVISE_INTERVAL_SECONDS: '1',
  FERRY_SWEEP_HEARTBEAT_SECONDS: '10',
  FERRY_CALLBACK_SECRET: 'a-test-secret-of-enough-length',
};

interface Worker {
  child: ChildProcess;
  /** "sweep run started" lines: job id -> this process's id. */
  started: Map<string, string>;
}

const workers: Worker[] = [];
const apps: FerryApp[] = [];
after(async () => {
  for (const app of apps) await app.close();
  for (const w of workers) {
    if (w.child.exitCode === null && w.child.signalCode === null) {
      w.child.kill('SIGTERM');
      await exited(w.child);
    }
  }
});

const db = await testDatabase();

function startWorker(): Worker {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/worker.ts'], {
    env: { ...process.env, DATABASE_URL: db.url, FERRY_DATA_DIR: mkdtempSync(join(tmpdir(), 'ferry-sweeps-')), ...ENV },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const w: Worker = { child, started: new Map() };
  createInterface({ input: child.stdout! }).on('line', (line) => {
    try {
      const entry = JSON.parse(line);
      if (entry.msg === 'sweep run started') w.started.set(entry.job_id, entry.process_id);
    } catch {
      // not a log line
    }
  });
  workers.push(w);
  return w;
}

const since = new Date(Date.now() - 1000);
// Empty until the first worker process has installed pg-boss's schema.
const runs = (name: string): Promise<SweepJobRow[]> =>
  runsSince(db.pool, PGBOSS_SCHEMA, sweepQueue(name), since).catch((err) => {
    if (err.code === '42P01') return [];
    throw err;
  });

test('two processes run every sweep on schedule, never two runs of one sweep at once', async () => {
  startWorker();
  startWorker();
  for (const def of sweepDefinitions) {
    await waitFor(`${def.name} runs several times`, async () => (await runs(def.name)).filter((r) => r.state === 'completed').length >= 5, 90_000, 200);
  }
  const processes = new Set<string>();
  for (const def of sweepDefinitions) {
    const all = await runs(def.name);
    const ran = all.filter((r) => r.started_on).sort((a, b) => +a.started_on! - +b.started_on!);
    for (let i = 1; i < ran.length; i++) {
      const prev = ran[i - 1];
      assert.ok(prev.completed_on, `${def.name}: a run started (${ran[i].id}) while ${prev.id} had not finished`);
      assert.ok(+ran[i].started_on! >= +prev.completed_on!, `${def.name}: runs ${prev.id} and ${ran[i].id} overlap`);
    }
    // On schedule: every chained run was queued to start one interval after the run that wrote it.
    const chained = all.filter((r) => r.data?.trigger === 'chain');
    assert.ok(chained.length >= 3, `${def.name} chains its runs`);
    for (const r of chained) {
      const delayMs = +r.start_after - +r.created_on;
      assert.ok(Math.abs(delayMs - INTERVALS[def.name] * 1000) < 1000, `${def.name}: run ${r.id} was due ${delayMs} ms after it was queued`);
    }
    // Both processes started at once: one start run between them.
    assert.equal(all.filter((r) => r.data?.trigger === 'start').length, 1, `${def.name}: one start run`);
    for (const r of ran.filter((x) => x.state === 'completed')) {
      assert.equal(typeof r.output?.items, 'number');
      processes.add(String(r.output?.process_id));
    }
  }
  assert.ok(processes.size >= 1);
});

test("the dashboard's pages list every sweep queue and its schedule", async () => {
  const app = createApp({ pool: db.pool, config: loadConfig({ FERRY_DATA_DIR: '.ferry/test-sweeps-dash' }) });
  apps.push(app);
  const operator = await createToken(db.pool, { name: 'sweeps-operator', role: 'operator' });
  const headers = { Accept: 'text/html', Authorization: `Bearer ${operator.token}` };
  const queues = await app.request('/dashboard/queues', { headers });
  assert.equal(queues.status, 200);
  const schedules = await app.request('/dashboard/schedules', { headers });
  assert.equal(schedules.status, 200);
  const [queuePage, schedulePage] = [await queues.text(), await schedules.text()];
  for (const def of sweepDefinitions) {
    assert.ok(queuePage.includes(sweepQueue(def.name)), `queue ${sweepQueue(def.name)} is listed`);
    assert.ok(schedulePage.includes(sweepQueue(def.name)), `its schedule is listed`);
  }
  assert.ok(schedulePage.includes('* * * * *'), 'with its cron expression');
});

test('a process killed mid-sweep: the other process retries the run, and each approval expires exactly once', async () => {
  const template = plan('sweep-kill', [simNode('pay', { outcome: 'completed' })]);
  const ids: string[] = [];
  for (let i = 0; i < 6; i++) {
    const { movement } = await seedMovement(db.pool, template, {
      createdBy: 'requester',
      intent: { i },
      expiresAt: new Date(Date.now() + 3_600_000).toISOString(),
      callbackUrl: 'http://127.0.0.1:9/never-delivered',
    });
    ids.push(movement.id);
  }
  // The sweep handles candidates oldest deadline first; it expires the first two, then its
  // transition of the third waits on a log row of the same seq that this transaction holds open.
  const blocker = await db.pool.connect();
  let blocked = true;
  try {
    await blocker.query('BEGIN');
    const { rows } = await blocker.query('SELECT row_version FROM movement_requests WHERE id = $1', [ids[2]]);
    await blocker.query(
      `INSERT INTO transitions (machine_id, machine_version, entity_type, entity_id, request_id, seq, from_state, to_state, event_type, actor)
       VALUES ('test', '0', 'request', $1, $1, $2, 'PENDING_APPROVAL', 'EXPIRED', 'EXPIRE', 'test:blocker')`,
      [ids[2], rows[0].row_version + 1],
    );
    await db.pool.query(
      `UPDATE movement_requests SET expires_at = now() - make_interval(secs => 60 - array_position($1::uuid[], id)) WHERE id = ANY($1::uuid[])`,
      [ids],
    );
    const state = async () => {
      const { rows: r } = await db.pool.query<{ id: string; request_state: string }>(
        'SELECT id, request_state FROM movement_requests WHERE id = ANY($1::uuid[])',
        [ids],
      );
      return new Map(r.map((x) => [x.id, x.request_state]));
    };
    await waitFor('the first two expired and the run stuck on the third', async () => {
      const s = await state();
      if (s.get(ids[0]) !== 'EXPIRED' || s.get(ids[1]) !== 'EXPIRED') return false;
      const { rows: waiting } = await db.pool.query(
        `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
      );
      return waiting.length > 0;
    });
    const { rows: active } = await db.pool.query(`SELECT id::text FROM ${PGBOSS_SCHEMA}.job WHERE name = $1 AND state = 'active'`, [
      sweepQueue('expiration_checker'),
    ]);
    assert.equal(active.length, 1, 'one run of the expiry sweep is in progress');
    const jobId = active[0].id as string;
    const victim = await waitFor('the process running it', async () => workers.find((w) => w.started.has(jobId)));
    const victimProcess = victim.started.get(jobId)!;
    const survivor = workers.find((w) => w !== victim && w.child.exitCode === null)!;

    victim.child.kill('SIGKILL');
    assert.equal((await exited(victim.child)).signal, 'SIGKILL');
    await blocker.query('ROLLBACK');
    blocked = false;

    await waitFor(
      'every approval expired',
      async () => [...(await state()).values()].every((s) => s === 'EXPIRED'),
      90_000,
      200,
    );
    const retried = await waitFor(
      'the killed run retried and finished',
      async () => {
        const { rows: r } = await db.pool.query(`SELECT state::text, retry_count, output FROM ${PGBOSS_SCHEMA}.job WHERE id = $1`, [jobId]);
        return r[0]?.state === 'completed' ? r[0] : null;
      },
      90_000,
      200,
    );
    assert.ok(retried.retry_count >= 1, 'the job was retried');
    assert.notEqual(retried.output.process_id, victimProcess, 'by the other process');
    assert.ok(survivor.started.has(jobId), 'the surviving process ran the retry');
  } finally {
    if (blocked) await blocker.query('ROLLBACK').catch(() => {});
    blocker.release();
  }

  for (const id of ids) {
    const { rows: t } = await db.pool.query(`SELECT count(*)::int AS n FROM transitions WHERE entity_id = $1 AND event_type = 'EXPIRE'`, [id]);
    assert.equal(t[0].n, 1, `${id}: expired once`);
    const { rows: c } = await db.pool.query(
      `SELECT count(*)::int AS n FROM callback_outbox WHERE request_id = $1 AND event_type = 'request_expired'`,
      [id],
    );
    assert.equal(c[0].n, 1, `${id}: one request_expired callback`);
    const { rows: a } = await db.pool.query(
      `SELECT (SELECT count(*) FROM audit_outbox WHERE action = 'movement.expire' AND entity_id = $1)
            + (SELECT count(*) FROM audit_events WHERE action = 'movement.expire' AND entity_id = $1) AS n`,
      [id],
    );
    assert.equal(Number(a[0].n), 1, `${id}: one audit event`);
  }
});
