import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Hono } from 'hono';
import { isFerryError } from '../src/errors.ts';
import { authenticate, bearerToken, can, permissions, requirePermission, roles, type AuthEnv, type Permission, type Role } from '../src/http/auth.ts';
import { markPrincipalDisabled } from '../src/persistence/principals.ts';
import { createToken, revokeToken } from '../src/persistence/tokens.ts';
import { testDatabase } from './helpers/db.ts';

const { pool } = await testDatabase();

// The policy, written out independently of src/http/auth.ts: a change to either must be deliberate.
const expected: Record<Role, Permission[]> = {
  viewer: ['read'],
  requester: ['read', 'movement.create', 'movement.cancel'],
  approver: ['read', 'movement.approve', 'template.approve', 'template.challenge'],
  operator: ['read', 'movement.cancel', 'movement.operate', 'callback.redrive', 'template.write', 'dashboard', 'callback.destination'],
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
