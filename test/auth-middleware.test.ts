import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Hono } from 'hono';
import { isFerryError } from '../src/errors.ts';
import { loadConfig } from '../src/config.ts';
import { createApp } from '../src/http/app.ts';
import { AuthThrottle } from '../src/http/auth-throttle.ts';
import { log } from '../src/log.ts';
import { authFailuresTotal } from '../src/metrics.ts';
import { authenticate, bearerToken, can, permissions, requirePermission, roles, type AuthEnv, type Permission, type Role } from '../src/http/auth.ts';
import { markPrincipalDisabled } from '../src/persistence/principals.ts';
import { createToken, revokeToken } from '../src/persistence/tokens.ts';
import { testDatabase } from './helpers/db.ts';

const { pool } = await testDatabase();

// The policy, written out independently of src/http/auth.ts: a change to either must be deliberate.
const expected: Record<Role, Permission[]> = {
  viewer: ['read'],
  requester: ['read', 'movement.create', 'movement.cancel'],
  approver: ['read', 'movement.approve', 'template.approve', 'template.challenge', 'policy.approve'],
  operator: ['read', 'movement.cancel', 'movement.operate', 'callback.redrive', 'template.write', 'dashboard', 'callback.destination', 'policy.write'],
  admin: [
    'read',
    'movement.create',
    // No movement.approve: approving is its own grant (the approver role), never part of admin.
    'movement.cancel',
    'movement.operate',
    'template.write',
    'template.approve',
    'template.challenge',
    'callback.redrive',
    'callback.destination',
    'signer.identity',
    'dashboard',
    'dashboard.jobs',
    'token.admin',
    'policy.write',
    'policy.approve',
    'notify.channel',
  ],
};

function app() {
  const a = new Hono<AuthEnv>();
  a.onError((err, c) => {
    if (isFerryError(err)) return c.json(err.toJSON(), err.httpStatus as 401 | 403);
    return c.json({ error: { code: 'INTERNAL', message: String(err) } }, 500);
  });
  a.use('/v3/*', authenticate(pool));
  for (const p of permissions) {
    a.post(`/v3/check/${p}`, requirePermission(p), (c) => c.json({ principal: c.get('principal') }));
  }
  a.get('/v3/whoami', (c) => c.json(c.get('principal')));
  return a;
}

const tokens = {} as Record<Role, { id: string; token: string; principal_id: string }>;
for (const role of roles) tokens[role] = await createToken(pool, { name: `${role}-1`, role });

test('the permission matrix: every role x permission', () => {
  assert.deepEqual([...roles].sort(), Object.keys(expected).sort());
  let asserted = 0;
  for (const role of roles) {
    for (const p of permissions) {
      assert.equal(can(role, p), expected[role].includes(p), `${role} / ${p}`);
      asserted++;
    }
  }
  assert.equal(asserted, roles.length * permissions.length);
  // Four-eyes by role: whoever may create movements may not approve them, and the reverse.
  for (const role of roles) {
    assert.ok(!(can(role, 'movement.create') && can(role, 'movement.approve')), role);
  }
});

test('the middleware enforces the same matrix for every role x permission', async () => {
  const a = app();
  for (const role of roles) {
    for (const p of permissions) {
      const res = await a.request(`/v3/check/${p}`, { method: 'POST', headers: { Authorization: `Bearer ${tokens[role].token}` } });
      const body = await res.json();
      if (expected[role].includes(p)) {
        assert.equal(res.status, 200, `${role} / ${p}`);
        assert.deepEqual(body.principal, { principalId: tokens[role].principal_id, name: `${role}-1`, tokenId: tokens[role].id, tokenName: `${role}-1`, role });
      } else {
        assert.equal(res.status, 403, `${role} / ${p}`);
        assert.equal(body.error.code, 'FORBIDDEN');
        assert.match(body.error.message, new RegExp(`${role}.*${p.replace('.', '\\.')}`));
        assert.deepEqual(body.error.details, { permission: p, role });
      }
    }
  }
});

test('missing, malformed, unknown, revoked and expired tokens, and tokens of a disabled principal, are all 401 UNAUTHENTICATED with one message', async () => {
  const a = app();
  const revoked = await createToken(pool, { name: 'leaver', role: 'admin' });
  await revokeToken(pool, 'leaver');
  // Expired: created with an expiry, then backdated past it (no sleeping).
  const expired = await createToken(pool, { name: 'temp', role: 'admin', expiresAt: new Date(Date.now() + 3_600_000) });
  await pool.query(`UPDATE api_tokens SET expires_at = now() - interval '1 second' WHERE id = $1`, [expired.id]);
  const ofDisabled = await createToken(pool, { name: 'gone-person', role: 'admin' });
  await markPrincipalDisabled(pool, 'gone-person');
  const unknown = 'fy_' + 'A'.repeat(43);
  const cases: Record<string, string | undefined> = {
    missing: undefined,
    empty: '',
    'basic scheme': `Basic ${Buffer.from('a:b').toString('base64')}`,
    'scheme only': 'Bearer',
    'scheme and space': 'Bearer ',
    'two tokens': `Bearer ${tokens.admin.token} ${tokens.admin.token}`,
    'token without scheme': tokens.admin.token,
    'unknown token': `Bearer ${unknown}`,
    'garbage token': 'Bearer not-a-token',
    'revoked token': `Bearer ${revoked.token}`,
    'expired token': `Bearer ${expired.token}`,
    'token of a disabled principal': `Bearer ${ofDisabled.token}`,
  };
  const messages = new Set<string>();
  for (const [name, header] of Object.entries(cases)) {
    const res = await a.request('/v3/whoami', { headers: header === undefined ? {} : { Authorization: header } });
    assert.equal(res.status, 401, name);
    assert.equal(res.headers.get('WWW-Authenticate'), 'Bearer', name);
    const body = await res.json();
    assert.equal(body.error.code, 'UNAUTHENTICATED', name);
    messages.add(body.error.message);
  }
  assert.equal(messages.size, 1, 'a caller cannot tell why a token was refused');
});

test('a valid token passes and the scheme is case-insensitive', async () => {
  const a = app();
  for (const scheme of ['Bearer', 'bearer', 'BEARER']) {
    const res = await a.request('/v3/whoami', { headers: { Authorization: `${scheme} ${tokens.viewer.token}` } });
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { principalId: tokens.viewer.principal_id, name: 'viewer-1', tokenId: tokens.viewer.id, tokenName: 'viewer-1', role: 'viewer' });
  }
});

test('requirePermission without authenticate refuses instead of crashing', async () => {
  const a = new Hono<AuthEnv>();
  a.onError((err, c) => (isFerryError(err) ? c.json(err.toJSON(), err.httpStatus as 401) : c.json({}, 500)));
  a.get('/open', requirePermission('read'), (c) => c.text('never'));
  const res = await a.request('/open');
  assert.equal(res.status, 401);
  assert.equal((await res.json()).error.code, 'UNAUTHENTICATED');
});

test('bearerToken parses only the Bearer scheme with a single credential', () => {
  assert.equal(bearerToken('Bearer abc'), 'abc');
  assert.equal(bearerToken('Bearer   abc  '), 'abc');
  assert.equal(bearerToken('Bearerabc'), null);
  assert.equal(bearerToken('Token abc'), null);
  assert.equal(bearerToken(undefined), null);
});

// --- Failed authentication: logged, counted, throttled per address (docs/security.md) ----------

/** The connection a request came over, as @hono/node-server hands it to the app. */
const from = (remoteAddress: string) => ({ incoming: { socket: { remoteAddress } } });

/** An app behind a throttle of `limit` failures per minute, on a clock the test moves, counting token lookups. */
function throttledApp(limit: number, maxAddresses = 100) {
  const clock = { ms: 1_000_000 };
  const throttle = new AuthThrottle({ limit, windowMs: 60_000, maxAddresses, now: () => clock.ms });
  const lookups = { n: 0 };
  const counting = { query: (...args: Parameters<typeof pool.query>) => (lookups.n++, pool.query(...args)) } as unknown as typeof pool;
  const a = new Hono<AuthEnv>();
  a.onError((err, c) => (isFerryError(err) ? c.json(err.toJSON(), err.httpStatus as 401 | 429) : c.json({ error: String(err) }, 500)));
  a.use('/v3/*', authenticate(counting, throttle));
  a.get('/v3/whoami', (c) => c.json(c.get('principal')));
  const call = (token: string | null, address: string) =>
    a.request('/v3/whoami', { headers: token === null ? {} : { Authorization: `Bearer ${token}` } }, from(address));
  return { call, clock, throttle, lookups };
}

const guess = (i: number) => `fy_${String(i).padStart(43, 'G')}`;

test('after the limit of failed tokens an address gets 429 AUTH_THROTTLED with Retry-After, and its tokens are not even looked up', async () => {
  const { call, clock, lookups } = throttledApp(5);
  for (let i = 0; i < 5; i++) assert.equal((await call(guess(i), '203.0.113.7')).status, 401, `guess ${i}`);
  const before = lookups.n;
  const refused = await call(guess(99), '203.0.113.7');
  assert.equal(refused.status, 429);
  assert.equal(refused.headers.get('Retry-After'), '60');
  const body = await refused.json();
  assert.equal(body.error.code, 'AUTH_THROTTLED');
  assert.equal(body.error.details.retry_after_seconds, 60);
  // A valid token from that address cannot be told from a guess without a lookup: refused as well.
  assert.equal((await call(tokens.viewer.token, '203.0.113.7')).status, 429);
  assert.equal(lookups.n, before, 'no token of a throttled address reaches the database');

  // Another address is not throttled by these failures: its valid token passes, its guesses are 401.
  assert.equal((await call(tokens.viewer.token, '198.51.100.2')).status, 200);
  assert.equal((await call(guess(1), '198.51.100.2')).status, 401);

  // The window ends 60 s after the first failure; then the address is checked again.
  clock.ms += 30_000;
  const later = await call(guess(100), '203.0.113.7');
  assert.equal(later.status, 429);
  assert.equal(later.headers.get('Retry-After'), '30');
  clock.ms += 30_000;
  assert.equal((await call(tokens.viewer.token, '203.0.113.7')).status, 200);
});

test('a request without credentials is no guess; a success does not clear the count', async () => {
  const { call } = throttledApp(3);
  for (let i = 0; i < 10; i++) assert.equal((await call(null, '203.0.113.8')).status, 401);
  assert.equal((await call(guess(1), '203.0.113.8')).status, 401);
  assert.equal((await call(tokens.viewer.token, '203.0.113.8')).status, 200);
  assert.equal((await call(guess(2), '203.0.113.8')).status, 401);
  assert.equal((await call(tokens.viewer.token, '203.0.113.8')).status, 200);
  assert.equal((await call(guess(3), '203.0.113.8')).status, 401);
  assert.equal((await call(tokens.viewer.token, '203.0.113.8')).status, 429, 'three failures, whatever succeeded in between');
});

test('an IPv6 client is counted by its /64, an IPv4-mapped one as its IPv4 address', async () => {
  const { call } = throttledApp(2);
  assert.equal((await call(guess(1), '2001:db8:1:2::1')).status, 401);
  assert.equal((await call(guess(2), '2001:db8:1:2:ffff:0:0:2')).status, 401);
  assert.equal((await call(tokens.viewer.token, '2001:db8:1:2::99')).status, 429, 'a fresh address in the same /64');
  assert.equal((await call(tokens.viewer.token, '2001:db8:1:3::1')).status, 200, 'another /64');
  assert.equal((await call(guess(3), '::ffff:192.0.2.1')).status, 401);
  assert.equal((await call(guess(4), '192.0.2.1')).status, 401);
  assert.equal((await call(tokens.viewer.token, '::ffff:192.0.2.1')).status, 429);
});

test('memory is bounded: past the cap the least recently failed address is forgotten', async () => {
  const { call, throttle } = throttledApp(1, 3);
  for (let i = 1; i <= 5; i++) assert.equal((await call(guess(i), `192.0.2.${i}`)).status, 401);
  assert.equal(throttle.tracked, 3);
  assert.equal((await call(tokens.viewer.token, '192.0.2.1')).status, 200, 'the oldest was dropped');
  assert.equal((await call(tokens.viewer.token, '192.0.2.5')).status, 429, 'the newest is still held');
});

test('a failure is logged at warn with the address and path, never the token, and counted in the metric', async () => {
  const { call } = throttledApp(2);
  const lines: Array<{ obj: Record<string, unknown>; msg: string }> = [];
  const warn = log.warn;
  log.warn = ((obj: Record<string, unknown>, msg: string) => void lines.push({ obj, msg })) as typeof log.warn;
  const count = async (result: string) => (await authFailuresTotal.get()).values.find((v) => v.labels.result === result)?.value ?? 0;
  const [refused0, throttled0] = [await count('refused'), await count('throttled')];
  const secret = guess(7);
  try {
    await call(secret, '203.0.113.9');
    await call(`${secret}x`, '203.0.113.9');
    await call(secret, '203.0.113.9');
  } finally {
    log.warn = warn;
  }
  assert.equal(lines.length, 2, 'one line per checked failure');
  assert.deepEqual(lines[0], { obj: { client: '203.0.113.9', method: 'GET', path: '/v3/whoami', failures: 1, limit: 2 }, msg: 'authentication failed' });
  const text = JSON.stringify(lines);
  for (const part of [secret, secret.slice(3), secret.slice(0, 12), secret.slice(-12)]) assert.ok(!text.includes(part), 'no part of the token is logged');
  assert.equal((await count('refused')) - refused0, 2);
  assert.equal((await count('throttled')) - throttled0, 1);
});

test('createApp shares one throttle, set from the configuration, across /v3, /inspect and /metrics', async () => {
  const app = createApp({ pool, config: loadConfig({ FERRY_LOG_LEVEL: 'silent', FERRY_AUTH_FAILURE_LIMIT: '3', FERRY_AUTH_FAILURE_WINDOW_SECONDS: '120' }) });
  const at = from('203.0.113.10');
  const bad = { headers: { Authorization: `Bearer ${guess(1)}` } };
  assert.equal((await app.request('/v3/movements', bad, at)).status, 401);
  assert.equal((await app.request('/inspect/movements', bad, at)).status, 401);
  assert.equal((await app.request('/metrics', bad, at)).status, 401);
  const res = await app.request('/v3/movements', { headers: { Authorization: `Bearer ${tokens.viewer.token}` } }, at);
  assert.equal(res.status, 429);
  assert.equal(res.headers.get('Retry-After'), '120');
  assert.equal((await app.request('/inspect/movements', { headers: { Authorization: `Bearer ${tokens.viewer.token}` } }, from('203.0.113.11'))).status, 200);
  await app.close();
});
