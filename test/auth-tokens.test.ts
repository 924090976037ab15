import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import { FerryError, NotFoundError } from '../src/errors.ts';
import {
  authenticateToken,
  createToken,
  hasAdminToken,
  listTokens,
  revokeToken,
} from '../src/persistence/tokens.ts';
import { testDatabase } from './helpers/db.ts';

const { pool } = await testDatabase();

test('hasAdminToken follows active admin tokens only', async () => {
  assert.equal(await hasAdminToken(pool), false);
  await createToken(pool, { name: 'watcher', role: 'viewer' });
  assert.equal(await hasAdminToken(pool), false);
  const admin = await createToken(pool, { name: 'root', role: 'admin' });
  assert.equal(await hasAdminToken(pool), true);
  await revokeToken(pool, admin.id);
  assert.equal(await hasAdminToken(pool), false);
});

test('a created token is fy_ + 43 base64url characters and only its sha256 is stored', async () => {
  const created = await createToken(pool, { name: 'alice', role: 'requester' });
  assert.match(created.token, /^fy_[A-Za-z0-9_-]{43}$/);
  assert.equal(Buffer.from(created.token.slice(3), 'base64url').length, 32);
  const { rows } = await pool.query('SELECT * FROM api_tokens WHERE id = $1', [created.id]);
  assert.equal(rows[0].token_hash, createHash('sha256').update(created.token).digest('hex'));
  assert.ok(!JSON.stringify(rows).includes(created.token), 'the token itself is never stored');
  const other = await createToken(pool, { name: 'alice2', role: 'requester' });
  assert.notEqual(other.token, created.token);
});

test('authenticateToken returns the identity of a known token and null for anything else', async () => {
  const created = await createToken(pool, { name: 'bob', role: 'approver' });
  assert.deepEqual(await authenticateToken(pool, created.token), {
    id: created.id,
    name: 'bob',
    role: 'approver',
    principalId: created.principal_id,
    principalName: 'bob',
  });
  const wrong = created.token.slice(0, -1) + (created.token.endsWith('A') ? 'B' : 'A');
  assert.equal(await authenticateToken(pool, wrong), null);
  assert.equal(await authenticateToken(pool, ''), null);
  assert.equal(await authenticateToken(pool, 'fy_short'), null);
  assert.equal(await authenticateToken(pool, created.token + ' '), null);
  // The stored hash itself is not a credential.
  const { rows } = await pool.query('SELECT token_hash FROM api_tokens WHERE id = $1', [created.id]);
  assert.equal(await authenticateToken(pool, rows[0].token_hash), null);
});

test('last_used_at is written on first use and then at most once a minute', async () => {
  const created = await createToken(pool, { name: 'carol', role: 'viewer' });
  const lastUsed = async () =>
    (await pool.query('SELECT last_used_at FROM api_tokens WHERE id = $1', [created.id])).rows[0].last_used_at as Date | null;
  assert.equal(await lastUsed(), null);
  await authenticateToken(pool, created.token);
  const first = await lastUsed();
  assert.ok(first instanceof Date);
  await authenticateToken(pool, created.token);
  await authenticateToken(pool, created.token);
  assert.equal((await lastUsed())!.getTime(), first.getTime(), 'no write within the minute');
  await pool.query(`UPDATE api_tokens SET last_used_at = now() - interval '2 minutes' WHERE id = $1`, [created.id]);
  const stale = await lastUsed();
  await authenticateToken(pool, created.token);
  assert.ok((await lastUsed())!.getTime() > stale!.getTime(), 'refreshed once the minute has passed');
});

test('revoking by name or id stops authentication; unknown or already revoked is NotFound', async () => {
  const byName = await createToken(pool, { name: 'dave', role: 'operator' });
  const byId = await createToken(pool, { name: 'erin', role: 'operator' });
  const revoked = await revokeToken(pool, 'dave');
  assert.equal(revoked.id, byName.id);
  assert.ok(revoked.revoked_at instanceof Date);
  await revokeToken(pool, byId.id);
  assert.equal(await authenticateToken(pool, byName.token), null);
  assert.equal(await authenticateToken(pool, byId.token), null);
  await assert.rejects(revokeToken(pool, 'dave'), NotFoundError);
  await assert.rejects(revokeToken(pool, byId.id), NotFoundError);
  await assert.rejects(revokeToken(pool, 'nobody'), NotFoundError);
  await assert.rejects(revokeToken(pool, '00000000-0000-4000-8000-000000000000'), NotFoundError);
  // A revoked name can be given to a new token (of the principal named, never landed on by the bare name).
  const again = await createToken(pool, { name: 'dave', role: 'viewer', principal: 'dave' });
  assert.equal((await authenticateToken(pool, again.token))?.role, 'viewer');
});

test('bad names, unknown roles and duplicate active names are refused with VALIDATION_FAILED', async () => {
  const refused = (p: Promise<unknown>, field: string) =>
    assert.rejects(p, (e: unknown) => e instanceof FerryError && e.code === 'VALIDATION_FAILED' && e.details.field === field);
  await refused(createToken(pool, { name: 'frank', role: 'superuser' }), 'role');
  await refused(createToken(pool, { name: '', role: 'viewer' }), 'name');
  await refused(createToken(pool, { name: 'has space', role: 'viewer' }), 'name');
  await refused(createToken(pool, { name: 'x'.repeat(65), role: 'viewer' }), 'name');
  await refused(createToken(pool, { name: '11111111-2222-4333-8444-555555555555', role: 'viewer' }), 'name');
  await createToken(pool, { name: 'grace', role: 'viewer' });
  await refused(createToken(pool, { name: 'grace', role: 'admin', principal: 'grace' }), 'name');
  // A bare name that is a principal's is refused rather than landing on that principal.
  await refused(createToken(pool, { name: 'grace', role: 'admin' }), 'principal');
  const { rows } = await pool.query(`SELECT count(*)::int AS n FROM api_tokens WHERE name IN ('frank', 'grace')`);
  assert.equal(rows[0].n, 1, 'nothing half-written');
});

test('listTokens never returns hashes or tokens, and hides revoked tokens unless asked', async () => {
  const kept = await createToken(pool, { name: 'heidi', role: 'admin' });
  const gone = await createToken(pool, { name: 'ivan', role: 'viewer' });
  await revokeToken(pool, 'ivan');
  const active = await listTokens(pool);
  const all = await listTokens(pool, { includeRevoked: true });
  assert.ok(active.some((t) => t.id === kept.id));
  assert.ok(!active.some((t) => t.id === gone.id));
  assert.ok(all.some((t) => t.id === gone.id && t.revoked_at instanceof Date));
  const { rows } = await pool.query<{ token_hash: string }>('SELECT token_hash FROM api_tokens');
  const text = JSON.stringify(all);
  for (const t of all) assert.deepEqual(Object.keys(t).sort(), ['created_at', 'expires_at', 'id', 'last_used_at', 'name', 'principal_id', 'principal_name', 'revoked_at', 'role']);
  for (const { token_hash } of rows) assert.ok(!text.includes(token_hash));
  assert.ok(!text.includes(kept.token) && !text.includes(gone.token));
});
