// @test-runs-alone: 2 worker processes, 500 movements, a SIGKILL every 2 s.
import { test } from 'node:test';
import { runKillStorm } from './helpers/cluster.ts';
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
  // The polling loops' storm (test/kill-storm-actors.test.ts is the actor runtime's).
  FERRY_RUNTIME: 'loops',
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
  await runKillStorm(db, MOVEMENTS, ENV, 3);
});
