/**
 * The error contract of the HTTP layer: whatever goes wrong, the client gets
 * `{"error": {"code", "message", "details"}}` with the status its code implies, and bad input is a 4xx.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import { after, test } from 'node:test';
import { OpenAPIHono, createRoute, z as oz } from '@hono/zod-openapi';
import { bearerAuth } from 'hono/bearer-auth';
import { HTTPException } from 'hono/http-exception';
import { Agent, fetch as undiciFetch } from 'undici';
import { z } from 'zod';
import { loadConfig } from '../src/config.ts';
import { InvalidTransitionError } from '../src/errors.ts';
import { createApp, type RouteModule } from '../src/http/app.ts';
import { validate } from '../src/http/errors.ts';
import { log } from '../src/log.ts';
import { createPool } from '../src/persistence/db.ts';
import { createEmptyDatabase, dropDatabase } from '../scripts/lib/test-databases.ts';
import { testDatabase } from './helpers/db.ts';
import { serveApp } from './helpers/http.ts';
import { within } from './helpers/wait.ts';

const db = await testDatabase();
const MAX_BODY = 1024;
const config = loadConfig({ FERRY_MAX_BODY_BYTES: String(MAX_BODY) });

const movement = z.object({
  amount: z.number().int().positive(),
  asset: z.string().min(1),
  meta: z.object({ note: z.string() }).optional(),
  tags: z.record(z.string(), z.string()).optional(),
});

const openapiBody = oz.object({ amount: oz.number().int(), meta: oz.object({ note: oz.string() }).optional() });

function openapiRoutes(): OpenAPIHono {
  const sub = new OpenAPIHono();
  sub.openapi(
    createRoute({
      method: 'post',
      path: '/things',
      request: { body: { content: { 'application/json': { schema: openapiBody } }, required: true } },
      responses: { 200: { description: 'ok' } },
    }),
    (c) => c.json({ got: c.req.valid('json') }, 200),
  );
  return sub;
}

const testRoutes: RouteModule = (app) => {
  app.post('/t/json', validate('json', movement), (c) => c.json({ got: c.req.valid('json') }));
  app.get('/t/query', validate('query', z.object({ limit: z.coerce.number().int().max(100).optional() })), (c) =>
    c.json({ got: c.req.valid('query') }),
  );
  app.get('/t/ferry-error', () => {
    throw new InvalidTransitionError('request', 'r-1', 'COMPLETED', 'APPROVED');
  });
  app.get('/t/zod', () => {
    movement.parse({ amount: 'x' });
    return new Response('unreachable');
  });
  app.get('/t/http-exception', () => {
    throw new HTTPException(429, { message: 'slow down' });
  });
  app.get('/t/bearer', bearerAuth({ token: 'secret-token' }), (c) => c.json({ ok: true }));
  app.get('/t/boom', () => {
    throw new Error('connection string postgres://admin:hunter2@db');
  });
  app.route('/t/openapi', openapiRoutes());
};

const app = createApp({ pool: db.pool, config, routes: [testRoutes] });

function postJson(path: string, body: string, headers: Record<string, string> = { 'content-type': 'application/json' }) {
  return app.request(path, { method: 'POST', body, headers });
}

async function errorOf(res: Response): Promise<{ code: string; message: string; details: any }> {
  assert.match(res.headers.get('content-type') ?? '', /application\/json/);
  const body = await res.json();
  assert.deepEqual(Object.keys(body), ['error']);
  assert.deepEqual(Object.keys(body.error).sort(), ['code', 'details', 'message']);
  return body.error;
}

test('valid input reaches the handler, parsed', async () => {
  const res = await postJson('/t/json', JSON.stringify({ amount: 5, asset: 'USDC', tags: { any: 'key' } }));
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), { got: { amount: 5, asset: 'USDC', tags: { any: 'key' } } });
});

test('malformed JSON is 400 MALFORMED_JSON', async () => {
  const res = await postJson('/t/json', '{"amount": 5,');
  assert.equal(res.status, 400);
  assert.equal((await errorOf(res)).code, 'MALFORMED_JSON');
});

test('wrong types are 400 VALIDATION_FAILED with every issue named by path', async () => {
  const res = await postJson('/t/json', JSON.stringify({ amount: '5', asset: '', meta: { note: 7 } }));
  assert.equal(res.status, 400);
  const error = await errorOf(res);
  assert.equal(error.code, 'VALIDATION_FAILED');
  assert.equal(error.details.target, 'json');
  const paths = error.details.issues.map((i: { path: string }) => i.path).sort();
  assert.deepEqual(paths, ['amount', 'asset', 'meta.note']);
  for (const issue of error.details.issues) assert.equal(typeof issue.message, 'string');
  assert.match(error.message, /amount/);
});

test('unknown fields are refused, at the top level and nested', async () => {
  let res = await postJson('/t/json', JSON.stringify({ amount: 5, asset: 'USDC', amout: 6 }));
  assert.equal(res.status, 400);
  let error = await errorOf(res);
  assert.equal(error.code, 'VALIDATION_FAILED');
  assert.deepEqual(error.details.issues, [{ path: 'amout', message: 'unknown field' }]);

  res = await postJson('/t/json', JSON.stringify({ amount: 5, asset: 'USDC', meta: { note: 'n', extra: true } }));
  assert.equal(res.status, 400);
  error = await errorOf(res);
  assert.deepEqual(error.details.issues, [{ path: 'meta.extra', message: 'unknown field' }]);

  res = await app.request('/t/query?limit=5&lmit=6');
  assert.equal(res.status, 400);
  assert.deepEqual((await errorOf(res)).details.issues, [{ path: 'lmit', message: 'unknown field' }]);
});

test('a missing body is a validation failure, a non-JSON body is 415', async () => {
  let res = await app.request('/t/json', { method: 'POST' });
  assert.equal(res.status, 400);
  assert.equal((await errorOf(res)).code, 'VALIDATION_FAILED');

  res = await postJson('/t/json', 'amount=5', { 'content-type': 'application/x-www-form-urlencoded' });
  assert.equal(res.status, 415);
  assert.equal((await errorOf(res)).code, 'UNSUPPORTED_MEDIA_TYPE');
});

test('query values are validated and coerced', async () => {
  let res = await app.request('/t/query?limit=7');
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), { got: { limit: 7 } });
  res = await app.request('/t/query?limit=1000');
  assert.equal(res.status, 400);
  assert.equal((await errorOf(res)).details.target, 'query');
});

test('an oversized body is 413 PAYLOAD_TOO_LARGE, with or without a declared length', async () => {
  const big = JSON.stringify({ amount: 1, asset: 'x'.repeat(MAX_BODY * 2) });
  let res = await postJson('/t/json', big);
  assert.equal(res.status, 413);
  assert.equal((await errorOf(res)).code, 'PAYLOAD_TOO_LARGE');

  res = await postJson('/t/json', big, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(big)) });
  assert.equal(res.status, 413);
  assert.equal((await errorOf(res)).code, 'PAYLOAD_TOO_LARGE');

  // Just under the limit still passes.
  const fits = JSON.stringify({ amount: 1, asset: 'x'.repeat(MAX_BODY - 40) });
  assert.ok(Buffer.byteLength(fits) <= MAX_BODY);
  assert.equal((await postJson('/t/json', fits)).status, 200);
});

test('an unknown route is a JSON 404', async () => {
  const res = await app.request('/no/such/route');
  assert.equal(res.status, 404);
  const error = await errorOf(res);
  assert.equal(error.code, 'NOT_FOUND');
  assert.equal(error.details.path, '/no/such/route');
});

test('a thrown FerryError keeps its code, status, message and details', async () => {
  const res = await app.request('/t/ferry-error');
  assert.equal(res.status, 409);
  const error = await errorOf(res);
  assert.equal(error.code, 'INVALID_TRANSITION');
  assert.equal(error.details.state, 'COMPLETED');
  assert.equal(error.details.event, 'APPROVED');
});

test('a ZodError thrown by a handler is a 400', async () => {
  const res = await app.request('/t/zod');
  assert.equal(res.status, 400);
  assert.equal((await errorOf(res)).code, 'VALIDATION_FAILED');
});

test('hono HTTPExceptions keep their status and get a code; auth headers survive', async () => {
  let res = await app.request('/t/http-exception');
  assert.equal(res.status, 429);
  assert.deepEqual(await errorOf(res), { code: 'RATE_LIMITED', message: 'slow down', details: {} });

  res = await app.request('/t/bearer');
  assert.equal(res.status, 401);
  assert.equal((await errorOf(res)).code, 'UNAUTHENTICATED');
  assert.match(res.headers.get('www-authenticate') ?? '', /Bearer/);
  assert.equal((await app.request('/t/bearer', { headers: { authorization: 'Bearer secret-token' } })).status, 200);
});

test('an unexpected throw is 500 INTERNAL with a generic message, logged with its stack', async () => {
  const logged: unknown[][] = [];
  const original = log.error;
  log.error = ((...args: unknown[]) => void logged.push(args)) as typeof log.error;
  let res: Response;
  try {
    res = await app.request('/t/boom', { headers: { 'x-request-id': 'req-123' } });
  } finally {
    log.error = original;
  }
  assert.equal(res.status, 500);
  const text = await res.clone().text();
  assert.ok(!text.includes('hunter2'), 'internals stay out of the response');
  const error = await errorOf(res);
  assert.equal(error.code, 'INTERNAL');
  assert.equal(error.message, 'Internal error');
  assert.equal(error.details.request_id, 'req-123');

  assert.equal(logged.length, 1);
  const [fields] = logged[0] as [{ err: Error; request_id: string }];
  assert.match(fields.err.stack ?? '', /hunter2/);
  assert.equal(fields.request_id, 'req-123');
});

test('OpenAPI route modules mounted on the app get the same contract', async () => {
  let res = await postJson('/t/openapi/things', JSON.stringify({ amount: 3 }));
  assert.equal(res.status, 200);

  res = await postJson('/t/openapi/things', '{not json');
  assert.equal(res.status, 400);
  assert.equal((await errorOf(res)).code, 'MALFORMED_JSON');

  res = await postJson('/t/openapi/things', JSON.stringify({ amount: 'three' }));
  assert.equal(res.status, 400);
  const error = await errorOf(res);
  assert.equal(error.code, 'VALIDATION_FAILED');
  assert.equal(error.details.issues[0].path, 'amount');

  res = await postJson('/t/openapi/things', JSON.stringify({ amount: 3, meta: { note: 'n', other: 1 } }));
  assert.equal(res.status, 400);
  assert.deepEqual((await errorOf(res)).details.issues, [{ path: 'meta.other', message: 'unknown field' }]);

  res = await postJson('/t/openapi/things', 'amount=3', { 'content-type': 'text/plain' });
  assert.equal(res.status, 415);
  assert.equal((await errorOf(res)).code, 'UNSUPPORTED_MEDIA_TYPE');
});

test('healthz answers; readyz is 200 on a migrated database', async () => {
  let res = await app.request('/healthz');
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), { status: 'ok' });
  res = await app.request('/readyz');
  assert.equal(res.status, 200);
  assert.equal((await res.json()).status, 'ready');
});

test('readyz is 503 MIGRATIONS_PENDING on an unmigrated database', async () => {
  const adminUrl = process.env.FERRY_TEST_ADMIN_URL!;
  const name = `ferry_t_${process.pid}_empty_${randomBytes(3).toString('hex')}`;
  const pool = createPool(await createEmptyDatabase(adminUrl, name), 2);
  after(async () => {
    await pool.end();
    await dropDatabase(adminUrl, name);
  });
  const res = await createApp({ pool, config }).request('/readyz');
  assert.equal(res.status, 503);
  const error = await errorOf(res);
  assert.equal(error.code, 'MIGRATIONS_PENDING');
  assert.ok(error.details.pending > 0);
});

test('readyz is 503 DATABASE_UNAVAILABLE when the database does not answer', async () => {
  // Port 1 on loopback: nothing listens there, so the connection is refused at once.
  const pool = createPool('postgres://postgres@127.0.0.1:1/none', 1);
  after(() => pool.end());
  let connects = 0;
  const connect = pool.connect.bind(pool);
  (pool as { connect: unknown }).connect = () => {
    connects += 1;
    return connect();
  };
  const unready = createApp({ pool, config });
  const res = await unready.request('/readyz');
  assert.equal(res.status, 503);
  const error = await errorOf(res);
  assert.equal(error.code, 'DATABASE_UNAVAILABLE');
  // No driver text (hosts, ports, users) on a route anyone can call: a class only.
  assert.deepEqual(error.details, { reason: 'connection_failed' });
  assert.doesNotMatch(JSON.stringify(error), /127\.0\.0\.1|ECONNREFUSED|postgres/);
  // Answers within a moment reuse the last check instead of asking the database again.
  const again = await Promise.all([unready.request('/readyz'), unready.request('/readyz')]);
  assert.deepEqual(again.map((r) => r.status), [503, 503]);
  assert.equal(connects, 1);
  // Liveness does not depend on the database.
  assert.equal((await createApp({ pool, config }).request('/healthz')).status, 200);
});

test('a 413 for a large body closes the connection instead of offering keep-alive on a socket about to close', async () => {
  const { port } = await serveApp(app);

  // A client that streams a large body slowly, as the fuzzer did: it reads the answer, then the end
  // of the connection, never a reset.
  const total = MAX_BODY * 200;
  const socket = connect(port, '127.0.0.1');
  let answer = '';
  socket.setEncoding('utf8').on('data', (d: string) => (answer += d));
  const closed = new Promise<{ error: Error | null }>((resolve) => {
    let error: Error | null = null;
    socket.on('error', (e) => (error = e));
    socket.on('close', () => resolve({ error }));
  });
  socket.write(`POST /t/json HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${total}\r\nConnection: keep-alive\r\n\r\n`);
  const chunk = Buffer.alloc(4096, 0x61);
  // Like a well-behaved client, it stops sending once the answer has come.
  for (let sent = 0; sent < total && !socket.destroyed && !answer.includes('\r\n\r\n'); sent += chunk.length) {
    socket.write(chunk);
    await new Promise((r) => setImmediate(r));
  }
  const { error } = await within('the server to close the connection', closed);
  // A write already on its way when the server closed may fail with EPIPE; a reset that loses the
  // answer may not.
  assert.ok(error === null || (error as NodeJS.ErrnoException).code === 'EPIPE', `connection reset: ${error?.message}`);
  const [rawHead, body] = answer.split('\r\n\r\n');
  assert.equal(JSON.parse(body!).error.code, 'PAYLOAD_TOO_LARGE');
  const head = rawHead!.toLowerCase();
  assert.match(head, /^http\/1\.1 413 /);
  assert.match(head, /\r\nconnection: close\r\n/);
  assert.doesNotMatch(head, /keep-alive/);

  // A keep-alive client's next request goes out on a fresh connection and succeeds.
  const agent = new Agent({ keepAliveTimeout: 10_000 });
  after(() => agent.close());
  const big = JSON.stringify({ amount: 1, asset: 'x'.repeat(MAX_BODY * 2) });
  const first = await undiciFetch(`http://127.0.0.1:${port}/t/json`, { method: 'POST', body: big, headers: { 'content-type': 'application/json' }, dispatcher: agent });
  assert.equal(first.status, 413);
  await first.arrayBuffer();
  const second = await undiciFetch(`http://127.0.0.1:${port}/t/json`, {
    method: 'POST',
    body: JSON.stringify({ amount: 1, asset: 'x' }),
    headers: { 'content-type': 'application/json' },
    dispatcher: agent,
  });
  assert.equal(second.status, 200);
});
