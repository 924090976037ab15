// @test-runs-alone: 2 worker processes, 500 movements, a SIGKILL every 2 s.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { benchTemplate, createMovements } from '../scripts/lib/load.ts';
import { countMovementsByState, exactlyOnceReport } from '../scripts/lib/bench-queries.ts';
import { listHeartbeats } from '../src/persistence/heartbeats.ts';
import { approveAndFinish, startWorkers } from './helpers/cluster.ts';
import { scratchDatabase } from './helpers/db.ts';
import { exited, spawnWorker } from './helpers/processes.ts';

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
  const { workers } = cluster;
  let kills = 0;
  let stopped = false;
  // Every 2 s the longer-running of the workers that are up (started their loops) is killed and
  // replaced; a replacement still starting is not killed before it did anything.
  const storm = (async () => {
    while (!stopped) {
      await new Promise((r) => setTimeout(r, 2000));
      if (stopped) break;
      const up = new Set((await listHeartbeats(db.pool)).map((h) => h.pid));
      const victim = workers.findIndex((w) => up.has(w.pid!));
      if (victim < 0) continue;
      const child = workers[victim];
      child.kill('SIGKILL');
      await exited(child);
      kills++;
      workers.splice(victim, 1);
      workers.push(spawnWorker(db.url, ENV));
    }
  })();
  await approveAndFinish(cluster, db.pool, ids, {
    beforeStop: async () => {
      stopped = true;
      await storm;
    },
  });
  assert.ok(kills >= 3, `workers were killed mid-run (${kills} kills)`);
  assert.deepEqual(await countMovementsByState(db.pool, ids), { COMPLETED: MOVEMENTS });
  const report = await exactlyOnceReport(db.pool, ids);
  assert.equal(report.nodes, MOVEMENTS * 3);
  assert.equal(report.keysSubmittedTwice, 0, 'no attempt submitted twice');
  const { rows } = await db.pool.query(
    `SELECT n.id, count(s.id)::int AS submits FROM request_nodes n
       LEFT JOIN sim_side_effects s ON s.request_node_id = n.id AND s.call = 'submit'
      WHERE n.request_id = ANY($1::uuid[]) GROUP BY n.id HAVING count(s.id) <> 1`,
    [ids],
  );
  assert.deepEqual(rows, [], 'exactly one submit per node in the ledger');
});
