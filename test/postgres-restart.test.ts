import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { approveMovements, createMovements } from '../scripts/lib/load.ts';
import { countMovementsByState, exactlyOnceReport } from '../scripts/lib/bench-queries.ts';
import { createPool } from '../src/persistence/db.ts';
import { startEmbeddedPostgres } from '../src/persistence/embedded.ts';
import { migrate } from '../src/persistence/migrate.ts';
import { prepareDatabase } from '../src/persistence/roles.ts';
import type { TemplateDefinitionInput } from '../src/plan/template-schema.ts';
import { collectingDeps } from './helpers/fixtures.ts';
import { exited, spawnWorker } from './helpers/processes.ts';
import { waitFor } from './helpers/wait.ts';
import { freePort } from './helpers/net.ts';

/**
 * PostgreSQL stops in the middle of a run and comes back. The worker process rides it out (its
 * loops back off, its listener reconnects), every movement completes, and no attempt is submitted
 * twice: what was in flight when the database went away is resolved by recovery.
 */


const template: TemplateDefinitionInput = {
  template_key: 'restart-two-step',
  nodes: [
    { node_key: 'pay', node_kind: 'action', action_type: 'sim_action', executor_binding: 'exec.sim.action', config: { sim: { latency_ms: 100 } } },
    { node_key: 'confirm', node_kind: 'observe', action_type: 'sim_observe', executor_binding: 'exec.sim.observe', config: { sim: { latency_ms: 100 } } },
  ],
  edges: [{ from: 'pay', to: 'confirm' }],
} as TemplateDefinitionInput;

test('a PostgreSQL restart mid-run loses no movement and submits no attempt twice', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'ferry-restart-'));
  const port = await freePort();
  let server = await startEmbeddedPostgres({ dataDir, port });
  // The runtime's own role, as Ferry runs it: its URL outlives a restart (the superuser's password
  // is made anew at every start and revoked once start-up is done).
  const url = server.appUrl;
  await prepareDatabase({ ownerUrl: server.url, appUrl: url, setup: true, migrate: (owner) => migrate(owner) });
  let pool = createPool(url, 4);
  const ids = await createMovements(pool, template, 40, 4);

  const worker = spawnWorker(url, {
    FERRY_SUBMITTING_GRACE_SECONDS: '3',
    FERRY_NODE_RECOVERY_INTERVAL_SECONDS: '1',
    FERRY_NODE_DISPATCH_INTERVAL_SECONDS: '0.5',
    FERRY_DB_POOL_MAX: '6',
    // Its warnings and errors show that it noticed the outage (below).
    FERRY_LOG_LEVEL: 'warn',
  }, { output: 'pipe' });
  let workerLog = '';
  worker.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    workerLog += chunk;
    if (process.env.FERRY_TEST_WORKER_LOG) process.stdout.write(chunk);
  });
  try {
    await approveMovements(pool, ids, collectingDeps(), 4);
    await waitFor('some movements to finish before the restart', async () => ((await countMovementsByState(pool, ids)).COMPLETED ?? 0) >= 5, 120_000, 50);
    const before = await countMovementsByState(pool, ids);
    assert.ok((before.COMPLETED ?? 0) < ids.length, 'work is still in flight when the database stops');

    await pool.end();
    const logged = workerLog.length;
    await server.stop();
    // The database stays down until the worker has felt it: a failed run or a lost listener.
    await waitFor('the worker to notice the database is gone', () => /worker run failed|could not listen|wake-up/.test(workerLog.slice(logged)), 60_000);
    server = await startEmbeddedPostgres({ dataDir, port });
    pool = createPool(url, 4);

    const states = await waitFor(
      'every movement to finish after the restart',
      async () => {
        const s = await countMovementsByState(pool, ids);
        return (s.COMPLETED ?? 0) + (s.FAILED ?? 0) + (s.MANUAL_INTERVENTION ?? 0) === ids.length ? s : null;
      },
      240_000,
      250,
    );
    assert.deepEqual(states, { COMPLETED: ids.length });
    const report = await exactlyOnceReport(pool, ids);
    assert.equal(report.keysSubmittedTwice, 0, 'no attempt submitted twice');
    assert.equal(report.nodes, ids.length * 2);
    assert.ok(report.submits >= report.nodes, 'every node submitted at least once');
  } finally {
    worker.kill('SIGTERM');
    await exited(worker);
    await pool.end().catch(() => {});
    await server.stop();
  }
});
