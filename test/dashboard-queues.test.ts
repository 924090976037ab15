import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import { QUEUES } from '../src/actors/boss.ts';
import { DASHBOARD_COOKIE } from '../src/http/dashboard.ts';
import { createToken } from '../src/persistence/tokens.ts';
import { dashboardAppForFile } from './helpers/app.ts';

/**
 * The pg-boss dashboard mounted in Ferry, against Ferry's own pg-boss schema: it lists Ferry's queues
 * and opens a job, and only operators and admins get in.
 */

const { db, boss, app } = await dashboardAppForFile({ FERRY_DATA_DIR: '.ferry/test-dashboard' });
const token = async (role: string) => (await createToken(db.pool, { name: `dash-${role}`, role })).token;
const operator = await token('operator');
const viewer = await token('viewer');
const admin = await token('admin');

const html = { Accept: 'text/html' };

test('the dashboard bundles the pg-boss schema Ferry runs', async () => {
  const require = createRequire(import.meta.url);
  const pgBossPkg = JSON.parse(readFileSync(require.resolve('pg-boss/package.json'), 'utf8'));
  const bundle = readFileSync(new URL('../node_modules/@pg-boss/dashboard/build/server/index.js', import.meta.url), 'utf8');
  const bundled = /pgboss: \{ "schema": (\d+) \}/.exec(bundle);
  assert.ok(bundled, 'the dashboard bundle names its pg-boss schema version');
  assert.equal(Number(bundled[1]), pgBossPkg.pgboss.schema, 'Ferry\'s pg-boss and the dashboard\'s agree on the schema');
  const { rows } = await db.pool.query('SELECT version FROM pgboss.version');
  assert.equal(Number(rows[0].version), Number(bundled[1]), 'the database holds that schema');
});

test('without a token a browser is sent to sign in, and an API client gets 401', async () => {
  const page = await app.request('/dashboard/queues', { headers: html });
  assert.equal(page.status, 303);
  assert.equal(page.headers.get('location'), '/dashboard/login');
  const login = await app.request('/dashboard/login');
  assert.equal(login.status, 200);
  assert.match(await login.text(), /<form method="post" action="\/dashboard\/login">/);

  const api = await app.request('/dashboard/queues');
  assert.equal(api.status, 401);
  assert.equal(((await api.json()) as any).error.code, 'UNAUTHENTICATED');
});

test('roles without the dashboard permission are refused', async () => {
  const r = await app.request('/dashboard/queues', { headers: { Authorization: `Bearer ${viewer}` } });
  assert.equal(r.status, 403);
  assert.equal(((await r.json()) as any).error.code, 'FORBIDDEN');
  const login = await app.request('/dashboard/login', { method: 'POST', body: new URLSearchParams({ token: viewer }) });
  assert.equal(login.status, 403);
  assert.equal(login.headers.get('set-cookie'), null, 'no session for a viewer');
  const bad = await app.request('/dashboard/login', { method: 'POST', body: new URLSearchParams({ token: 'fy_nope' }) });
  assert.equal(bad.status, 401);
  const elsewhere = await app.request('http://localhost/dashboard/login', {
    method: 'POST',
    body: new URLSearchParams({ token: operator }),
    headers: { Origin: 'http://evil.example' },
  });
  assert.equal(elsewhere.status, 403, 'a sign-in form posted from another site is refused');
});

test('an operator signs in; the cookie opens the queue list with Ferry\'s queues and a job page', async () => {
  const login = await app.request('/dashboard/login', { method: 'POST', body: new URLSearchParams({ token: operator }) });
  assert.equal(login.status, 303);
  assert.equal(login.headers.get('location'), '/dashboard/');
  const setCookie = login.headers.get('set-cookie') ?? '';
  assert.match(setCookie, new RegExp(`^${DASHBOARD_COOKIE}=`));
  assert.match(setCookie, /HttpOnly/);
  assert.match(setCookie, /SameSite=Strict/);
  assert.match(setCookie, /Path=\/dashboard/);
  const cookie = setCookie.split(';')[0];

  const queues = await app.request('/dashboard/queues', { headers: { ...html, Cookie: cookie } });
  assert.equal(queues.status, 200);
  const list = await queues.text();
  for (const q of Object.values(QUEUES)) assert.ok(list.includes(q), `queue ${q} is listed`);
  // Nothing on the page reaches past this server: no web font links, and a policy that says so.
  assert.doesNotMatch(list, /fonts\.googleapis|fonts\.gstatic|https:\/\//);
  assert.match(queues.headers.get('content-security-policy') ?? '', /default-src 'self'.*font-src 'self'/);

  const jobId = await boss!.send(QUEUES.callbacks, { callbackId: '00000000-0000-0000-0000-000000000001', attempts: 0, redriveCount: 0 });
  assert.ok(jobId);
  const job = await app.request(`/dashboard/queues/${QUEUES.callbacks}/jobs/${jobId}`, { headers: { ...html, Cookie: cookie } });
  assert.equal(job.status, 200);
  const detail = await job.text();
  assert.ok(detail.includes(jobId!), 'the job page shows the job');
  assert.ok(detail.includes('00000000-0000-0000-0000-000000000001'), 'and its data');

  // A bearer token works too (scripts), and an admin is let in like an operator.
  const asAdmin = await app.request('/dashboard/queues', { headers: { ...html, Authorization: `Bearer ${admin}` } });
  assert.equal(asAdmin.status, 200);

  // Its static assets come from Ferry, under the same mount.
  const asset = /\/dashboard\/assets\/[^"']+\.js/.exec(list)?.[0];
  assert.ok(asset, 'the page references its script under /dashboard/assets');
  const js = await app.request(asset!, { headers: { Cookie: cookie } });
  assert.equal(js.status, 200);
  // The font links point at this server, in the page and in the scripts that render them again
  // when React hydrates it (the two must agree, or React throws the page away: error #418).
  assert.match(list, /<link rel="stylesheet" href="\/dashboard\/ferry-no-fonts\.css"\/>/);
  const scripts = [...new Set([...list.matchAll(/\/dashboard\/assets\/[^"']+\.js/g)].map((m) => m[0]))];
  const rendering = [];
  for (const path of scripts) {
    const text = await (await app.request(path, { headers: { Cookie: cookie } })).text();
    assert.doesNotMatch(text, /fonts\.googleapis|fonts\.gstatic/, path);
    if (text.includes('/dashboard/ferry-no-fonts.css')) rendering.push(path);
  }
  assert.equal(rendering.length, 1, 'one client script renders the links, with the same href as the page');
  const css = await app.request('/dashboard/ferry-no-fonts.css');
  assert.equal(css.status, 200);
  assert.match(css.headers.get('content-type') ?? '', /^text\/css/);
  assert.doesNotMatch(await css.text(), /@import|url\(|@font-face/);

  const out = await app.request('/dashboard/logout', { method: 'POST', headers: { Cookie: cookie } });
  assert.equal(out.status, 303);
  assert.match(out.headers.get('set-cookie') ?? '', /Max-Age=0/);
});

test('revoking the token ends the session at once', async () => {
  const temp = await createToken(db.pool, { name: 'dash-temp', role: 'operator' });
  const login = await app.request('/dashboard/login', { method: 'POST', body: new URLSearchParams({ token: temp.token }) });
  const cookie = (login.headers.get('set-cookie') ?? '').split(';')[0];
  assert.equal((await app.request('/dashboard/queues', { headers: { ...html, Cookie: cookie } })).status, 200);
  await db.pool.query('UPDATE api_tokens SET revoked_at = now() WHERE id = $1', [temp.id]);
  const after = await app.request('/dashboard/queues', { headers: { ...html, Cookie: cookie } });
  assert.equal(after.status, 303);
  assert.equal(after.headers.get('location'), '/dashboard/login');
});
