// @test-runs-alone: 4 worker processes, 1,000 movements.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { benchTemplate, createMovements } from '../scripts/lib/load.ts';
import { approveAndFinish, assertAllCompletedExactlyOnce, startWorkers } from './helpers/cluster.ts';
import { scratchDatabase } from './helpers/db.ts';

/**
 * Four worker processes share one database and run 1,000 movements together: every movement
 * completes, every node is claimed once, and the side-effect ledger shows exactly one submit per
 * node attempt. Nothing but Postgres coordinates the processes.
 */
const MOVEMENTS = Number(process.env.FERRY_TEST_CLUSTER_MOVEMENTS ?? 1000);
const PROCESSES = 4;

test(`${PROCESSES} processes run ${MOVEMENTS} movements: all complete, one claim and one submit per node`, async (t) => {
  const db = await scratchDatabase(t);
  const ids = await createMovements(db.pool, benchTemplate(), MOVEMENTS);
  const env = {
    FERRY_NODE_OBSERVE_BATCH_SIZE: '20',
    FERRY_DB_POOL_MAX: '5',
    // The connection budget counts the whole cluster: these workers, no API process.
    FERRY_API_PROCESSES: '0',
    FERRY_WORKER_PROCESSES: String(PROCESSES),
  };
  const cluster = await startWorkers(db.url, db.pool, PROCESSES, env);
  await approveAndFinish(cluster, db.pool, ids);
  assert.equal(ids.length, MOVEMENTS);
  await assertAllCompletedExactlyOnce(db.pool, ids);
});
