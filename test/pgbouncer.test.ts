// @test-runs-alone: 4 worker processes, 1,000 movements through PgBouncer.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, test } from 'node:test';
import { benchTemplate, createMovements } from '../scripts/lib/load.ts';
import { startFerry } from '../src/main.ts';
import { createPool } from '../src/persistence/db.ts';
import { createEmptyDatabase, dropDatabase } from '../scripts/lib/test-databases.ts';
import { approveAndFinish, assertAllCompletedExactlyOnce, startWorkers } from './helpers/cluster.ts';
import { scratchDatabase } from './helpers/db.ts';
import { pgbouncerBinary, startPgBouncer, type PgBouncer } from './helpers/pgbouncer.ts';

/**
 * Ferry behind PgBouncer in transaction mode: the pools (API, workers, pg-boss, the simulation
 * lane) go through PgBouncer, where consecutive transactions of one client may run on different
 * server connections, so nothing may rely on session state; LISTEN and the migrations' advisory
 * lock go over FERRY_DATABASE_DIRECT_URL.
 */
const binary = pgbouncerBinary();
const skip = binary ? false : 'pgbouncer is not installed (Debian: apt-get install pgbouncer); these tests need it';
const MOVEMENTS = Number(process.env.FERRY_TEST_CLUSTER_MOVEMENTS ?? 1000);
const PROCESSES = 4;

let bouncer: PgBouncer | undefined;
before(async () => {
  if (!binary) return;
  const adminUrl = process.env.FERRY_TEST_ADMIN_URL;
  if (!adminUrl) throw new Error('run tests through `npm test` (it prepares the database server)');
  // Fewer server connections than the cluster's pools hold client connections: PgBouncer really
  // has to multiplex transactions of different clients over shared server connections.
  bouncer = await startPgBouncer(binary, adminUrl, { poolSize: 12 });
});
after(async () => {
  await bouncer?.stop();
});

/** Transactions PgBouncer carried for a database. */
async function pooledTransactions(database: string): Promise<number> {
  const rows = await bouncer!.admin<{ database: string; total_xact_count: string }>('SHOW STATS');
  return Number(rows.find((r) => r.database === database)?.total_xact_count ?? 0);
}

test('Ferry starts through PgBouncer: migrations and LISTEN on the direct connection, the pool through PgBouncer', { skip }, async () => {
  const adminUrl = process.env.FERRY_TEST_ADMIN_URL!;
  const name = `ferry_t_${process.pid}_bouncer_${randomBytes(3).toString('hex')}`;
  const direct = await createEmptyDatabase(adminUrl, name);
  after(() => dropDatabase(adminUrl, name));
  const ferry = await startFerry({
    DATABASE_URL: bouncer!.urlFor(name),
    FERRY_DATABASE_DIRECT_URL: direct,
    HOST: '127.0.0.1',
    PORT: '0',
    FERRY_LOG_LEVEL: 'silent',
  });
  try {
    const res = await fetch(`${ferry.url}/readyz`);
    assert.equal(res.status, 200, 'every migration applied, the database answers through PgBouncer');
    assert.ok((await pooledTransactions(name)) > 0, 'the pool went through PgBouncer');
  } finally {
    await ferry.stop();
  }
});

test(`${PROCESSES} processes run ${MOVEMENTS} movements through PgBouncer in transaction mode`, { skip }, async (t) => {
  const db = await scratchDatabase(t);
  const pooledUrl = bouncer!.urlFor(db.name);
  // Movements are created and approved through PgBouncer as well.
  const pooled = createPool(pooledUrl, 8, 'ferry-test-pooled');
  t.after(() => pooled.end());
  const ids = await createMovements(pooled, benchTemplate(), MOVEMENTS);
  const env = {
    FERRY_DATABASE_DIRECT_URL: db.url,
    FERRY_NODE_OBSERVE_BATCH_SIZE: '20',
    FERRY_DB_POOL_MAX: '5',
    FERRY_API_PROCESSES: '0',
    FERRY_WORKER_PROCESSES: String(PROCESSES),
  };
  const cluster = await startWorkers(pooledUrl, db.pool, PROCESSES, env);
  await approveAndFinish(cluster, db.pool, ids, { approvePool: pooled });
  assert.equal(ids.length, MOVEMENTS);
  await assertAllCompletedExactlyOnce(db.pool, ids);
  // Every claim, step and observation is a transaction; all of them went through PgBouncer.
  assert.ok((await pooledTransactions(db.name)) > MOVEMENTS * 3, 'the workers worked through PgBouncer');
});
