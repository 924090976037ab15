// @test-runs-alone: 4 worker processes, 1,000 movements.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { approveMovements, benchTemplate, createMovements } from '../scripts/lib/load.ts';
import { countRequestsByState, exactlyOnceReport } from '../scripts/lib/bench-queries.ts';
import { scratchDatabase } from './helpers/db.ts';
import { collectingDeps } from './helpers/fixtures.ts';
import { exited, spawnWorker } from './helpers/processes.ts';
import { waitFor } from './helpers/wait.ts';

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
    FERRY_NODE_DISPATCH_CONCURRENCY: '2',
    FERRY_NODE_OBSERVE_BATCH_SIZE: '20',
    FERRY_DB_POOL_MAX: '5',
    // The connection budget counts the whole cluster: these workers, no API process.
    FERRY_API_PROCESSES: '0',
    FERRY_WORKER_PROCESSES: String(PROCESSES),
  };
  const workers = Array.from({ length: PROCESSES }, () => spawnWorker(db.url, env));
  try {
    await approveMovements(db.pool, ids, collectingDeps());
    await waitFor(
      'every movement to finish',
      async () => {
        const states = await countRequestsByState(db.pool, ids);
        const finished = (states.COMPLETED ?? 0) + (states.FAILED ?? 0) + (states.MANUAL_INTERVENTION ?? 0);
        return finished === ids.length ? states : null;
      },
      600_000,
      500,
    );
  } finally {
    for (const w of workers) w.kill('SIGTERM');
    await Promise.all(workers.map(exited));
  }
  assert.deepEqual(await countRequestsByState(db.pool, ids), { COMPLETED: MOVEMENTS });
  const report = await exactlyOnceReport(db.pool, ids);
  assert.deepEqual(report, {
    nodes: MOVEMENTS * 3,
    submits: MOVEMENTS * 3,
    keysSubmittedTwice: 0,
    nodesClaimedTwice: 0,
    nodesWithRetries: 0,
  });
});
