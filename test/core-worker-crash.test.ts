/**
 * A core worker that cannot go on takes its process down: FERRY_CORE_WORKER_CRASH_AFTER_FAILURES
 * failed runs in a row (not counting Ferry's database being away) end the worker process with exit
 * code 1 and a fatal line naming the worker, so that the cluster primary or the service manager
 * starts a fresh one instead of a live process doing nothing with healthy-looking heartbeats.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { listHeartbeats } from '../src/persistence/heartbeats.ts';
import { scratchDatabase } from './helpers/db.ts';
import { exited, spawnWorker } from './helpers/processes.ts';
import { waitFor, within } from './helpers/wait.ts';

test('a core worker whose runs keep failing stops its process with exit code 1, naming the worker', async (t) => {
  const db = await scratchDatabase(t);
  const worker = spawnWorker(
    db.url,
    {
      FERRY_CORE_WORKER_CRASH_AFTER_FAILURES: '3',
      FERRY_NODE_RECOVERY_INTERVAL_SECONDS: '0.2',
      FERRY_NODE_DISPATCH_INTERVAL_SECONDS: '0.2',
      FERRY_LOG_LEVEL: 'warn',
    },
    { output: 'pipe' },
  );
  let out = '';
  worker.stdout!.on('data', (d) => (out += String(d)));
  t.after(() => void worker.kill('SIGKILL'));
  await waitFor('the worker to beat', async () => (await listHeartbeats(db.pool)).some((h) => h.pid === worker.pid));
  // Not a database outage but a schema the workers' queries no longer fit (42703, undefined column):
  // backing off cannot mend it.
  await db.pool.query('ALTER TABLE request_nodes RENAME COLUMN updated_at TO updated_at_moved');
  const { code } = await within('the worker to exit', exited(worker));
  assert.equal(code, 1, out);
  const fatal = out.split('\n').filter((l) => l.includes('core worker died'));
  assert.equal(fatal.length, 1, out);
  const line = JSON.parse(fatal[0]);
  assert.equal(line.level, 60);
  assert.match(line.worker, /^(node_recovery|lease_holder)$/);
  assert.match(line.err.message, /failed 3 runs in a row: .*updated_at/);
});
