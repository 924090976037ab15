/**
 * The API and the workers have pools of their own, each with its statement_timeout and its
 * application_name. A slow statement through the API's pool is cancelled by the server and
 * answered as 503 DATABASE_TIMEOUT (not a hanging request); the workers' pool keeps its own, longer
 * limit.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ferryForFile } from './helpers/ferry.ts';

const { ferry } = await ferryForFile(
  { FERRY_API_STATEMENT_TIMEOUT_MS: '300', FERRY_WORKER_STATEMENT_TIMEOUT_MS: '20000' },
  {
    runtime: 'none',
    // A route that runs a slow statement on the API's pool, as a heavy read would.
    routes: [
      (app, deps) => {
        app.get('/test/slow', async (c) => {
          await deps.pool.query('SELECT pg_sleep(30)');
          return c.json({ slept: true });
        });
      },
    ],
  },
);

test('each pool has its own statement_timeout and application_name', async () => {
  assert.notEqual(ferry.workerPool, ferry.pool, 'the worker loops run here, on a pool of their own');
  const api = await ferry.pool.query("SELECT current_setting('statement_timeout') AS t, current_setting('application_name') AS app");
  const workers = await ferry.workerPool.query("SELECT current_setting('statement_timeout') AS t, current_setting('application_name') AS app");
  assert.deepEqual(api.rows[0], { t: '300ms', app: 'ferry' });
  assert.deepEqual(workers.rows[0], { t: '20s', app: 'ferry-worker' });
});

test('a slow statement through the API is cancelled and answered 503 DATABASE_TIMEOUT; the workers are unaffected', async () => {
  // Without the timeout this request would wait 30 s; the signal turns a hang into a failure.
  const res = await fetch(`${ferry.url}/test/slow`, { signal: AbortSignal.timeout(15_000) });
  assert.equal(res.status, 503);
  const body = (await res.json()) as { error: { code: string; message: string } };
  assert.equal(body.error.code, 'DATABASE_TIMEOUT');
  assert.doesNotMatch(body.error.message, /pg_sleep|canceling/, 'the driver text stays inside');

  // The same statement length is fine on the workers' pool, whose limit is its own.
  const slept = await ferry.workerPool.query('SELECT pg_sleep(0.6) AS done');
  assert.equal(slept.rowCount, 1);
  // The API keeps serving: the cancelled statement returned its connection in good shape.
  const ready = await fetch(`${ferry.url}/readyz`);
  assert.equal(ready.status, 200, await ready.text());
});
