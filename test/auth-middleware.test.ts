import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Hono } from 'hono';
import { isFerryError } from '../src/errors.ts';
import { authenticate, bearerToken, can, permissions, requirePermission, roles, type AuthEnv, type Permission, type Role } from '../src/http/auth.ts';
import { createToken, revokeToken } from '../src/persistence/tokens.ts';
import { testDatabase } from './helpers/db.ts';

const { pool } = await testDatabase();

// The policy, written out independently of src/http/auth.ts: a change to either must be deliberate.
const expected: Record<Role, Permission[]> = {
  viewer: ['read'],
  requester: ['read', 'movement.create', 'movement.cancel'],
  approver: ['read', 'movement.approve'],
  operator: ['read', 'movement.cancel', 'movement.operate', 'callback.redrive', 'template.write', 'dashboard'],
  admin: [
    'read',
    'movement.create',
    'movement.approve',
    'movement.cancel',
    'movement.operate',
    'template.write',
    'callback.redrive',
    'signer.identity',
    'dashboard',
    'token.admin',
    'dashboard.jobs',
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

const tokens = {} as Record<Role, { id: string; token: string }>;
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
  assert.equal(asserted, 5 * 11);
  // Four-eyes by role: whoever may create movements may not approve them, and the reverse.
  for (const role of ['requester', 'approver', 'operator', 'viewer'] as const) {
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
        assert.deepEqual(body.principal, { tokenId: tokens[role].id, name: `${role}-1`, role });
      } else {
        assert.equal(res.status, 403, `${role} / ${p}`);
        assert.equal(body.error.code, 'FORBIDDEN');
        assert.match(body.error.message, new RegExp(`${role}.*${p.replace('.', '\\.')}`));
        assert.deepEqual(body.error.details, { permission: p, role });
      }
    }
  }
});

test('missing, malformed, unknown and revoked tokens are all 401 UNAUTHENTICATED with one message', async () => {
  const a = app();
  const revoked = await createToken(pool, { name: 'leaver', role: 'admin' });
  await revokeToken(pool, 'leaver');
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
    assert.deepEqual(await res.json(), { tokenId: tokens.viewer.id, name: 'viewer-1', role: 'viewer' });
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
