// @test-runs-alone: 2 worker processes, 500 movements, a SIGKILL every 2 s.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { benchTemplate, createMovements } from '../scripts/lib/load.ts';
import { countMovementsByState, exactlyOnceReport } from '../scripts/lib/bench-queries.ts';
import { approveAndFinish, assertOneSubmitPerNode, killStorm, startWorkers } from './helpers/cluster.ts';
import { scratchDatabase } from './helpers/db.ts';

/**
 * 500 movements on two worker processes while one of them is killed with SIGKILL every 2 s (and
 * replaced): batches die half-claimed, half-prepared, between SUBMITTING and submit, between submit
 * and its result. Every movement still completes, and the side-effect ledger shows exactly one
 * submit per node: recovery resolves every attempt a kill left open by asking the provider, never by
 * submitting again.
 */
const MOVEMENTS = 500;
const ENV = {
  FERRY_SUBMITTING_GRACE_SECONDS: '5',
  FERRY_SUBMITTING_GRACE_SECONDS_BY_LANE: 'sim=5',
  FERRY_NODE_RECOVERY_INTERVAL_SECONDS: '0.5',
  FERRY_NODE_DISPATCH_INTERVAL_SECONDS: '0.2',
  FERRY_NODE_OBSERVE_INTERVAL_SECONDS: '0.2',
  FERRY_NODE_DISPATCH_CONCURRENCY: '2',
  FERRY_NODE_DISPATCH_BATCH_SIZE: '8',
  FERRY_NODE_RECOVERY_BATCH_SIZE: '200',
  FERRY_DB_POOL_MAX: '6',
};

test(`${MOVEMENTS} movements on 2 processes, a worker SIGKILLed every 2 s: all complete, one submit per node`, async (t) => {
  const db = await scratchDatabase(t);
  const ids = await createMovements(db.pool, benchTemplate(), MOVEMENTS);
  const cluster = await startWorkers(db.url, db.pool, 2, ENV);
  const storm = killStorm(cluster, db.url, db.pool, ENV);
  let kills = 0;
  await approveAndFinish(cluster, db.pool, ids, {
    beforeStop: async () => {
      kills = await storm.stop();
    },
  });
  assert.ok(kills >= 3, `workers were killed mid-run (${kills} kills)`);
  assert.deepEqual(await countMovementsByState(db.pool, ids), { COMPLETED: MOVEMENTS });
  const report = await exactlyOnceReport(db.pool, ids);
  assert.equal(report.nodes, MOVEMENTS * 3);
  assert.equal(report.keysSubmittedTwice, 0, 'no attempt submitted twice');
  await assertOneSubmitPerNode(db.pool, ids);
});
