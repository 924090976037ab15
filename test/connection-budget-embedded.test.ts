// @test-runs-alone: worker processes filling a 30-connection PostgreSQL, 500 movements.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { approveMovements, benchTemplate, createMovements } from '../scripts/lib/load.ts';
import { countMovementsByState, exactlyOnceReport } from '../scripts/lib/bench-queries.ts';
import { createPool } from '../src/persistence/db.ts';
import { startEmbeddedPostgres, type EmbeddedServer } from '../src/persistence/embedded.ts';
import { migrate } from '../src/persistence/migrate.ts';
import { createEmptyDatabase, withDatabase } from '../scripts/lib/test-databases.ts';
import { collectingDeps } from './helpers/fixtures.ts';
import { approveAndFinish, startWorkers, waitForAllFinished } from './helpers/cluster.ts';
import { freePort } from './helpers/net.ts';
import { exited } from './helpers/processes.ts';

/**
 * A PostgreSQL with room for only 30 connections. Four worker processes either fit (the budget
 * shrinks their pools) and run every movement to completion, or refuse to start naming the
 * settings; they never fail mid-run. Connections taken by someone else while movements run cost
 * time, never a movement.
 */
const MAX_CONNECTIONS = 30;
const PROCESSES = 4;
const MOVEMENTS = Number(process.env.FERRY_TEST_BUDGET_MOVEMENTS ?? 500);

let server: EmbeddedServer;
let dataDir: string;
let databases = 0;

before(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'ferry-budget-'));
  // As root, PostgreSQL runs as its own user, which must reach the folder.
  chmodSync(dataDir, 0o755);
  server = await startEmbeddedPostgres({ dataDir, port: await freePort(), settings: { max_connections: MAX_CONNECTIONS } });
});
after(async () => {
  await server?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

async function migratedDatabase(): Promise<string> {
  const url = await createEmptyDatabase(withDatabase(server.url, 'postgres'), `budget_${++databases}`);
  await migrate(url);
  return url;
}

/** The worker processes' settings: the whole cluster is these four workers, no API process. */
const workerEnv = {
  FERRY_API_PROCESSES: '0',
  FERRY_WORKER_PROCESSES: String(PROCESSES),
  FERRY_NODE_OBSERVE_BATCH_SIZE: '20',
};

/** Recovery of abandoned SUBMITTING nodes after 5 s, looked for every second. */
const RECOVER_SOON = { FERRY_SUBMITTING_GRACE_SECONDS: '5', FERRY_NODE_RECOVERY_INTERVAL_SECONDS: '1' };

async function nodesFailedOrUnknown(pool: pg.Pool, ids: string[]) {
  const { rows } = await pool.query(
    `SELECT node_state, error_code, count(*)::int AS n FROM request_nodes
      WHERE request_id = ANY($1::uuid[]) AND node_state IN ('FAILED', 'UNKNOWN') GROUP BY 1, 2`,
    [ids],
  );
  return rows;
}

test(`1 API + ${PROCESSES} workers on max_connections=${MAX_CONNECTIONS}: start refuses with one line naming the settings`, async () => {
  const url = await migratedDatabase();
  // The main program with four forked workers; its API process alone may open the dashboard's 10.
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    env: {
      ...process.env,
      DATABASE_URL: url,
      PORT: '0',
      FERRY_WORKER_PROCESSES: String(PROCESSES),
      FERRY_LOG_LEVEL: 'error',
      FERRY_DATA_DIR: mkdtempSync(join(tmpdir(), 'ferry-budget-main-')),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += String(d)));
  child.stdout.resume();
  const { code } = await exited(child);
  assert.equal(code, 1, stderr);
  const lines = stderr.trim().split('\n');
  assert.equal(lines.length, 1, `one line: ${stderr}`);
  for (const name of ['connection budget', 'FERRY_WORKER_PROCESSES', 'FERRY_DB_CONNECTION_RESERVE', `max_connections ${MAX_CONNECTIONS}`]) {
    assert.ok(lines[0].includes(name), `the line names ${name}: ${lines[0]}`);
  }
});

test(`${PROCESSES} worker processes on max_connections=${MAX_CONNECTIONS} fit and run ${MOVEMENTS} movements to completion`, async () => {
  const url = await migratedDatabase();
  const pool = createPool(url, 2, 'ferry-test');
  try {
    const ids = await createMovements(pool, benchTemplate(), MOVEMENTS, 2);
    const cluster = await startWorkers(url, pool, PROCESSES, workerEnv);
    await approveAndFinish(cluster, pool, ids, { approveConcurrency: 2 });
    assert.deepEqual(await countMovementsByState(pool, ids), { COMPLETED: MOVEMENTS });
    assert.deepEqual(await nodesFailedOrUnknown(pool, ids), []);
    const report = await exactlyOnceReport(pool, ids);
    assert.equal(report.keysSubmittedTwice, 0);
    assert.equal(report.nodesClaimedTwice, 0);
  } finally {
    await pool.end();
  }
});

// Ferry's own infrastructure errors (a refused connection here) defer the node and retry; they never
// fail it (src/persistence/infra-errors.ts).
test('a client that takes every free connection for a few seconds costs time, never a movement', async () => {
  const url = await migratedDatabase();
  // The test's own two connections stay open through the fault (no idle reaping), so it can still
  // approve and watch while nobody else gets a connection.
  const pool = new pg.Pool({ connectionString: url, max: 2, idleTimeoutMillis: 0, application_name: 'ferry-test' });
  const hog: pg.Client[] = [];
  try {
    const ids = await createMovements(pool, benchTemplate(), MOVEMENTS, 2);
    // A submit whose record met the refused connection is left SUBMITTING for recovery, which asks
    // the provider once the grace has passed: 5 s here, not the production 300 s the run would wait.
    const cluster = await startWorkers(url, pool, PROCESSES, { ...workerEnv, ...RECOVER_SOON });
    try {
      const warm = await Promise.all([pool.connect(), pool.connect()]);
      for (const c of warm) c.release();
      // The workers idle with the few connections they hold; the approvals then need more.
      for (;;) {
        const client = new pg.Client({ connectionString: url, application_name: 'connection-hog' });
        client.on('error', () => {});
        try {
          await client.connect();
        } catch (err) {
          // 53300: too many clients already. Every slot, the superusers' reserve included, is taken.
          assert.equal((err as { code?: string }).code, '53300', String(err));
          break;
        }
        hog.push(client);
        assert.ok(hog.length <= MAX_CONNECTIONS, 'the server refuses connections at some point');
      }
      await approveMovements(pool, ids, collectingDeps(), 2);
      // The fault lasts a few seconds: its duration is the point, not a synchronisation.
      await new Promise((r) => setTimeout(r, 5000));
      await Promise.all(hog.splice(0).map((c) => c.end().catch(() => {})));
      await waitForAllFinished(pool, ids);
    } finally {
      await Promise.all(hog.splice(0).map((c) => c.end().catch(() => {})));
      await cluster.stop();
    }
    assert.deepEqual(await nodesFailedOrUnknown(pool, ids), [], 'no node FAILED or UNKNOWN because of it');
    assert.deepEqual(await countMovementsByState(pool, ids), { COMPLETED: MOVEMENTS });
  } finally {
    await pool.end();
  }
});
