import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { startRuntime, type Runtime } from '../src/actors/runtime.ts';
import { log } from '../src/log.ts';
import { startFerry } from '../src/main.ts';
import { createToken } from '../src/persistence/tokens.ts';
import { scratchDatabase } from './helpers/db.ts';
import { spawnFerry } from './helpers/ferry-process.ts';
import { singleNodeTemplate } from './helpers/fixtures.ts';
import { callApi, type Reply } from './helpers/http.ts';
import { freePort, portRefuses } from './helpers/net.ts';
import { within } from './helpers/wait.ts';

/**
 * The runtime (registries, pg-boss) starts before the HTTP server listens and is handed to the app,
 * so no request ever finds an app without it: a write sent the moment the port accepts connections
 * is served, never answered 503 for want of a runtime.
 */

const refused = (err: unknown) => (err as { cause?: { code?: string } })?.cause?.code === 'ECONNREFUSED';

/**
 * Sends `send` again and again while the port refuses connections (with no pause but a turn of the
 * event loop, so the first moment it accepts one is not missed) and returns the first answer.
 */
async function firstAnswer(send: () => Promise<Reply>, timeoutMs = 60_000): Promise<{ reply: Reply; refusals: number }> {
  const deadline = Date.now() + timeoutMs;
  let refusals = 0;
  for (;;) {
    try {
      return { reply: await send(), refusals };
    } catch (err) {
      if (!refused(err)) throw err;
      refusals++;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for the port to accept a connection`);
    await new Promise((r) => setImmediate(r));
  }
}

test('npm start: a write sent as soon as the port accepts connections is served, not answered 503', async (t) => {
  const db = await scratchDatabase(t);
  const operator = (await createToken(db.pool, { name: 'early-writer', role: 'operator' })).token;
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  // Polling starts before the process does, so the very first accepted connection carries the write.
  const first = firstAnswer(() => callApi(base, 'POST', '/v3/templates', operator, singleNodeTemplate('early-write')));
  const ferry = spawnFerry({
    DATABASE_URL: db.url,
    PORT: String(port),
    FERRY_DATA_DIR: mkdtempSync(join(tmpdir(), 'ferry-early-')),
    // pg-boss and the registries still start (they are what a write needs); the loops stay off.
    FERRY_WORKERS_ENABLED: 'false',
  });
  t.after(async () => {
    if (ferry.child.exitCode === null && ferry.child.signalCode === null) ferry.child.kill('SIGKILL');
    await ferry.exit;
  });
  const { reply, refusals } = await first;
  assert.ok(refusals > 0, 'the write was sent before the server listened, so its first accepted connection is the earliest one');
  assert.notEqual(reply.status, 503, `the first write met an app without its runtime: ${reply.text}`);
  assert.equal(reply.status, 202, reply.text);
  assert.equal(reply.body.proposal.template_key, 'early-write');

  ferry.child.kill('SIGTERM');
  const { code } = await within('ferry to stop', ferry.exit, 30_000);
  assert.equal(code, 0, ferry.output());
});

test('startRuntime runs before the server listens, reaches the app, and is stopped by stop()', async (t) => {
  const db = await scratchDatabase(t);
  const operator = (await createToken(db.pool, { name: 'hook-writer', role: 'operator' })).token;
  const port = await freePort();
  const events: string[] = [];
  let runtime: Runtime | undefined;
  const ferry = await startFerry(
    { DATABASE_URL: db.url, HOST: '127.0.0.1', PORT: String(port), FERRY_LOG_LEVEL: 'silent', FERRY_DATA_DIR: mkdtempSync(join(tmpdir(), 'ferry-early-')) },
    {
      startRuntime: async (r) => {
        assert.ok(await portRefuses(port), 'nothing listens while the runtime starts');
        const started = await startRuntime({ pool: r.workerPool, config: r.config, databaseUrl: r.databaseUrl, log, workers: false });
        events.push('runtime started');
        runtime = started;
        return {
          ...started,
          stop: async () => {
            events.push('runtime stopping');
            await started.stop();
          },
        };
      },
      onStarted: (r) => {
        events.push('listening');
        assert.equal(r.appDeps.runtime?.boss, runtime!.boss, 'the app was built with the runtime');
      },
      onStopping: () => {
        events.push('stopping');
      },
    },
  );
  try {
    const posted = await callApi(ferry.url, 'POST', '/v3/templates', operator, singleNodeTemplate('hook-write'));
    assert.equal(posted.status, 202, posted.text);
  } finally {
    await ferry.stop();
  }
  assert.deepEqual(events, ['runtime started', 'listening', 'stopping', 'runtime stopping']);
  assert.ok(await portRefuses(port));
});

test('a start that fails after the runtime started stops the runtime again', async (t) => {
  const db = await scratchDatabase(t);
  let stopped = false;
  await assert.rejects(
    startFerry(
      { DATABASE_URL: db.url, HOST: '127.0.0.1', PORT: '0', FERRY_LOG_LEVEL: 'silent', FERRY_DATA_DIR: mkdtempSync(join(tmpdir(), 'ferry-early-')) },
      {
        startRuntime: async (r) => {
          const started = await startRuntime({ pool: r.workerPool, config: r.config, databaseUrl: r.databaseUrl, log, workers: false });
          return {
            ...started,
            stop: async () => {
              stopped = true;
              await started.stop();
            },
          };
        },
        onStarted: () => {
          throw new Error('could not start the worker processes');
        },
      },
    ),
    /could not start the worker processes/,
  );
  assert.ok(stopped, 'the runtime was stopped when the start was undone');
});
