/**
 * Dashboard sessions and job changes, over a real HTTP server on loopback: the cookie holds a random
 * server-side session id (never the token, nothing derived from it), a revoked token or a sign-out
 * ends the session, the cookie is Secure whenever the request did not plainly come over loopback,
 * and changing jobs through the dashboard is for admins only and audited.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { after, test } from 'node:test';
import { QUEUES } from '../src/actors/boss.ts';
import { loadConfig } from '../src/config.ts';
import { createApp } from '../src/http/app.ts';
import { DASHBOARD_COOKIE } from '../src/http/dashboard.ts';
import { createToken, revokeToken } from '../src/persistence/tokens.ts';
import { dashboardAppForFile } from './helpers/app.ts';
import { serveApp } from './helpers/http.ts';

const { db, boss, app } = await dashboardAppForFile({ FERRY_DATA_DIR: '.ferry/test-dashboard-sessions' });
const { port } = await serveApp(app);

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** A request over real HTTP with whatever headers (Host included) the test chooses. */
function send(method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, method, path, headers: { ...(body ? { 'content-length': Buffer.byteLength(body) } : {}), ...headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const form = { 'content-type': 'application/x-www-form-urlencoded' };
async function signIn(token: string, headers: Record<string, string> = {}): Promise<{ setCookie: string; cookie: string; value: string }> {
  const r = await send('POST', '/dashboard/login', { ...form, ...headers }, new URLSearchParams({ token }).toString());
  assert.equal(r.status, 303, r.body);
  const setCookie = String(r.headers['set-cookie'] ?? '');
  const cookie = setCookie.split(';')[0];
  assert.ok(cookie.startsWith(`${DASHBOARD_COOKIE}=`), setCookie);
  return { setCookie, cookie, value: cookie.slice(DASHBOARD_COOKIE.length + 1) };
}
const page = (cookie: string) => send('GET', '/dashboard/queues', { accept: 'text/html', cookie });

const operator = await createToken(db.pool, { name: 'sess-operator', role: 'operator' });
const admin = await createToken(db.pool, { name: 'sess-admin', role: 'admin' });

test('the cookie holds a random session id: not the token, not derived from it, stored only as a hash', async () => {
  const a = await signIn(operator.token);
  const b = await signIn(operator.token);
  assert.notEqual(a.value, b.value, 'two sign-ins with one token get unrelated sessions');
  for (const s of [a, b]) {
    assert.ok(!s.value.includes(operator.token) && !operator.token.includes(s.value));
    const tokenHash = createHash('sha256').update(operator.token).digest();
    for (const derived of [tokenHash.toString('hex'), tokenHash.toString('base64url'), operator.token.slice(3)]) {
      assert.ok(!s.value.includes(derived), 'the cookie carries nothing computed from the token');
    }
    assert.equal((await page(s.cookie)).status, 200, 'the session opens the dashboard');
  }
  const { rows } = await db.pool.query(`SELECT id_hash, token_id FROM dashboard_sessions WHERE token_id = $1`, [operator.id]);
  assert.equal(rows.length, 2);
  const stored = rows.map((r) => r.id_hash).sort();
  assert.deepEqual(stored, [a.value, b.value].map((v) => createHash('sha256').update(v).digest('hex')).sort(), 'only the id\'s hash is kept');

  // The token itself in the cookie (what the cookie used to hold) opens nothing.
  const old = await page(`${DASHBOARD_COOKIE}=${operator.token}`);
  assert.equal(old.status, 303);
  assert.equal(old.headers.location, '/dashboard/login');
});

test('revoking the token ends its sessions; signing out ends the session on the server', async () => {
  const temp = await createToken(db.pool, { name: 'sess-temp', role: 'operator' });
  const s = await signIn(temp.token);
  assert.equal((await page(s.cookie)).status, 200);
  await revokeToken(db.pool, temp.id);
  const after = await page(s.cookie);
  assert.equal(after.status, 303);
  assert.equal(after.headers.location, '/dashboard/login');
  const api = await send('GET', '/dashboard/queues', { cookie: s.cookie });
  assert.equal(api.status, 401);
  assert.equal(JSON.parse(api.body).error.code, 'UNAUTHENTICATED');

  const t = await signIn(operator.token);
  const out = await send('POST', '/dashboard/logout', { cookie: t.cookie });
  assert.equal(out.status, 303);
  assert.equal((await page(t.cookie)).status, 303, 'a replayed cookie after sign-out opens nothing');
  // A second sign-out of the ended session changes nothing and is not audited again.
  assert.equal((await send('POST', '/dashboard/logout', { cookie: t.cookie })).status, 303);

  // Both ends of the session are in the audit trail, by the principal, without the session id.
  const { rows: audit } = await db.pool.query(
    `SELECT action, actor, details::text AS details FROM (
       SELECT action, actor, details, entity_type, entity_id FROM audit_outbox
       UNION ALL SELECT action, actor, details, entity_type, entity_id FROM audit_events) a
      WHERE entity_type = 'api_token' AND entity_id = $1 AND action LIKE 'dashboard.sign_%'`,
    [operator.id],
  );
  const outs = audit.filter((r) => r.action === 'dashboard.sign_out');
  assert.equal(outs.length, 1, 'one sign-out recorded');
  assert.ok(audit.some((r) => r.action === 'dashboard.sign_in'), 'the sign-in recorded');
  for (const r of audit) {
    assert.equal(r.actor, `principal:${operator.principal_id}`);
    assert.ok(!r.details.includes(t.value) && !r.details.includes(operator.token), 'neither the session id nor the token is in the audit');
  }
});

test('the cookie is HttpOnly, SameSite=Strict, and Secure unless the request came plainly over loopback', async () => {
  const local = await signIn(operator.token);
  assert.match(local.setCookie, /HttpOnly/);
  assert.match(local.setCookie, /SameSite=Strict/);
  assert.match(local.setCookie, /Path=\/dashboard/);
  assert.doesNotMatch(local.setCookie, /Secure/, 'http on 127.0.0.1: a browser would drop a Secure cookie');
  assert.doesNotMatch((await signIn(operator.token, { host: `localhost:${port}` })).setCookie, /Secure/);

  const remote: Array<[string, Record<string, string>]> = [
    ['a public Host name', { host: 'ferry.example.com' }],
    ['a private address as Host', { host: '10.1.2.3:3000' }],
    ['X-Forwarded-Proto https', { 'x-forwarded-proto': 'https' }],
    ['X-Forwarded-Proto http (a proxy all the same)', { 'x-forwarded-proto': 'http' }],
    ['X-Forwarded-For', { 'x-forwarded-for': '203.0.113.7' }],
    ['X-Forwarded-Host', { 'x-forwarded-host': 'ferry.example.com' }],
    ['Forwarded', { forwarded: 'for=203.0.113.7;proto=https' }],
  ];
  for (const [what, headers] of remote) {
    const s = await signIn(operator.token, headers);
    assert.match(s.setCookie, /; Secure/, `${what}: Secure`);
    assert.match(s.setCookie, /HttpOnly/);
  }
  // In process (no socket): https is Secure; a sign-out clears the cookie with the same attributes.
  const viaHttps = await app.request('https://localhost/dashboard/login', { method: 'POST', body: new URLSearchParams({ token: operator.token }) });
  assert.match(viaHttps.headers.get('set-cookie') ?? '', /; Secure/);
  const out = await send('POST', '/dashboard/logout', { host: 'ferry.example.com' });
  assert.match(String(out.headers['set-cookie']), /Max-Age=0.*Secure|Secure.*Max-Age=0/);
});

async function jobState(id: string): Promise<string> {
  const { rows } = await db.pool.query(`SELECT state FROM pgboss.job WHERE id = $1`, [id]);
  return rows[0]?.state;
}
async function auditOf(jobId: string) {
  const { rows } = await db.pool.query(`SELECT actor, action, entity_type, entity_id, details FROM audit_outbox WHERE entity_id = $1 ORDER BY id`, [jobId]);
  const { rows: promoted } = await db.pool.query(`SELECT actor, action, entity_type, entity_id, details FROM audit_events WHERE entity_id = $1 ORDER BY id`, [jobId]);
  return [...promoted, ...rows];
}

test('changing a job through the dashboard: an operator is refused, an admin\'s change is audited', async () => {
  const jobId = (await boss!.send(QUEUES.callbacks, { callbackId: '00000000-0000-0000-0000-000000000002', attempts: 0, redriveCount: 0 }))!;
  assert.equal(await jobState(jobId), 'created');
  const path = `/dashboard/queues/${QUEUES.callbacks}/jobs/${jobId}`;
  const cancel = new URLSearchParams({ intent: 'cancel' }).toString();

  const op = await signIn(operator.token);
  assert.equal((await send('GET', path, { accept: 'text/html', cookie: op.cookie })).status, 200, 'an operator reads the job');
  for (const method of ['POST', 'PUT', 'DELETE', 'PATCH']) {
    const refused = await send(method, path, { ...form, cookie: op.cookie }, cancel);
    assert.equal(refused.status, 403, `${method} by an operator`);
    assert.equal(JSON.parse(refused.body).error.code, 'FORBIDDEN');
    assert.equal(JSON.parse(refused.body).error.details.permission, 'dashboard.jobs');
  }
  const bearer = await send('POST', path, { ...form, authorization: `Bearer ${operator.token}` }, cancel);
  assert.equal(bearer.status, 403, 'with a bearer token too');
  assert.equal(await jobState(jobId), 'created', 'the job is untouched');
  assert.deepEqual(await auditOf(jobId), [], 'a refused change is not recorded as done');

  const ad = await signIn(admin.token);
  const done = await send('POST', path, { ...form, cookie: ad.cookie }, cancel);
  assert.ok(done.status < 400, `the admin's cancel is passed on (${done.status})`);
  assert.equal(await jobState(jobId), 'cancelled');
  const audit = await auditOf(jobId);
  assert.equal(audit.length, 1);
  assert.deepEqual(audit[0], {
    actor: `principal:${admin.principal_id}`,
    action: 'dashboard.job.cancel',
    entity_type: 'pgboss_job',
    entity_id: jobId,
    details: {
      queue: QUEUES.callbacks,
      job_id: jobId,
      intent: 'cancel',
      path: `/queues/${QUEUES.callbacks}/jobs/${jobId}`,
      outcome: 'applied',
      status: done.status,
      state_before: 'created',
      state_after: 'cancelled',
    },
  });

  // The queue page's form names the job in its body; that is recorded the same way.
  const resume = await send('POST', `/dashboard/queues/${QUEUES.callbacks}`, { ...form, cookie: ad.cookie }, new URLSearchParams({ intent: 'resume', jobId }).toString());
  assert.ok(resume.status < 400, `resume (${resume.status})`);
  assert.equal(await jobState(jobId), 'created');
  assert.deepEqual((await auditOf(jobId)).map((a) => [a.action, a.details.outcome]), [['dashboard.job.cancel', 'applied'], ['dashboard.job.resume', 'applied']]);

  // The page's own scripts post to the route's data URL (React Router's `.data` suffix): the same job.
  const viaData = await send('POST', `${path}.data`, { ...form, cookie: ad.cookie }, cancel);
  assert.ok(viaData.status < 400, `cancel through the data URL (${viaData.status})`);
  assert.equal(await jobState(jobId), 'cancelled');
  const last = (await auditOf(jobId)).at(-1);
  assert.equal(last.action, 'dashboard.job.cancel');
  assert.equal(last.details.path, `/queues/${QUEUES.callbacks}/jobs/${jobId}`);
  assert.equal(last.details.outcome, 'applied');
  // Paths the dashboard would fail on are 404 from Ferry, before anything is recorded.
  for (const odd of ['/dashboard/queues/a%ED%A0%80/jobs/x', `/dashboard/queues/${QUEUES.callbacks}/jobs/not-a-uuid`, `/dashboard/queues/q/jobs/x%00y.data`, '/dashboard/queues/%zz', '/dashboard/queues/a%00b', '/dashboard/queues/a%20b.data']) {
    for (const method of ['GET', 'POST']) {
      const r = await send(method, odd, { ...form, cookie: ad.cookie }, method === 'POST' ? cancel : undefined);
      assert.equal(r.status, 404, `${method} ${odd}`);
      assert.equal(JSON.parse(r.body).error.code, 'NOT_FOUND');
    }
  }
  // Text jsonb cannot store (NUL) is replaced in the record, not a 500.
  const nul = await send('POST', `/dashboard/queues/${QUEUES.callbacks}`, { ...form, cookie: ad.cookie }, new URLSearchParams({ intent: 'cancel', jobId: 'x\u0000y' }).toString());
  assert.ok(nul.status < 500, `an odd job id in the form is no server error (${nul.status})`);
  const { rows: nulRows } = await db.pool.query(`SELECT details FROM audit_outbox WHERE entity_id = 'x\ufffdy'`);
  assert.equal(nulRows.length, 1);
  assert.equal(nulRows[0].details.job_id, 'x\ufffdy');
  assert.equal(nulRows[0].details.outcome, 'refused', 'no such job: nothing was done');
  const refusedData = await send('POST', `${path}.data`, { ...form, cookie: op.cookie }, new URLSearchParams({ intent: 'resume' }).toString());
  assert.equal(refusedData.status, 403);
  assert.equal(await jobState(jobId), 'cancelled');
});

test('failed sign-ins and bearer tokens are throttled per address: 429 with Retry-After, the token not looked up', async () => {
  // An app of its own (its own throttle), so the other tests' sign-ins from 127.0.0.1 are untouched.
  const strict = createApp({ pool: db.pool, config: loadConfig({ FERRY_LOG_LEVEL: 'silent', FERRY_AUTH_FAILURE_LIMIT: '2' }) });
  after(() => strict.close());
  const { port: strictPort } = await serveApp(strict);
  const post = (token: string) =>
    fetch(`http://127.0.0.1:${strictPort}/dashboard/login`, { method: 'POST', headers: form, body: new URLSearchParams({ token }), redirect: 'manual' });
  assert.equal((await post('fy_wrong-1')).status, 401);
  const viaBearer = await fetch(`http://127.0.0.1:${strictPort}/dashboard/queues`, { headers: { authorization: 'Bearer fy_wrong-2' } });
  assert.equal(viaBearer.status, 401);
  const throttled = await post(admin.token);
  assert.equal(throttled.status, 429, 'even a valid token: the address is over its limit');
  assert.equal(throttled.headers.get('retry-after'), '60');
  assert.equal(throttled.headers.get('set-cookie'), null, 'no session');
  assert.match(await throttled.text(), /Too many failed sign-ins/);
  const api = await fetch(`http://127.0.0.1:${strictPort}/dashboard/queues`, { headers: { authorization: `Bearer ${admin.token}` } });
  assert.equal(api.status, 429);
  assert.equal(((await api.json()) as any).error.code, 'AUTH_THROTTLED');
  // The shared app's own throttle saw none of this.
  assert.equal((await signIn(admin.token)).cookie.startsWith(`${DASHBOARD_COOKIE}=`), true);
});

test('a job action the dashboard refused is recorded as refused, never as done', async () => {
  const jobId = (await boss!.send(QUEUES.callbacks, { callbackId: '00000000-0000-0000-0000-000000000003', attempts: 0, redriveCount: 0 }))!;
  const path = `/dashboard/queues/${QUEUES.callbacks}/jobs/${jobId}`;
  const ad = await signIn(admin.token);
  const post = (intent: string, to = path) => send('POST', to, { ...form, cookie: ad.cookie }, new URLSearchParams({ intent }).toString());

  // Retrying a job that did not fail: pg-boss changes nothing and the dashboard still answers 200.
  const retry = await post('retry');
  assert.ok(retry.status < 400, `the dashboard answers (${retry.status})`);
  assert.equal(await jobState(jobId), 'created');
  assert.ok((await post('cancel')).status < 400);
  assert.equal(await jobState(jobId), 'cancelled');
  // A second cancel of the cancelled job: refused by pg-boss, recorded so.
  const again = await post('cancel', `${path}.data`);
  assert.ok(again.status < 400, `answered (${again.status})`);
  // Resuming a job of another queue by its id: nothing of that queue has the id.
  const elsewhere = await post('resume', `/dashboard/queues/${QUEUES.callbacksDeadLetter}/jobs/${jobId}`);
  assert.ok(elsewhere.status < 500, `answered (${elsewhere.status})`);
  assert.equal(await jobState(jobId), 'cancelled', 'the job was not resumed through another queue');

  const audit = (await auditOf(jobId)).map((a) => [a.action, a.details.outcome, a.details.state_before, a.details.state_after]);
  assert.deepEqual(audit, [
    ['dashboard.job.retry', 'refused', 'created', 'created'],
    ['dashboard.job.cancel', 'applied', 'created', 'cancelled'],
    ['dashboard.job.cancel', 'refused', 'cancelled', 'cancelled'],
    ['dashboard.job.resume', 'refused', null, null],
  ]);
});
