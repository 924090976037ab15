/**
 * Principals and tokens through the admin API (/v3/principals, /v3/tokens): who may act, each change
 * audited in its own transaction, names (never token ids) wherever a person reads an actor, rows from
 * before principals (`token:<id>`) still resolved and still counted as their principal, and the
 * migration that gives every existing token a principal.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { promoteAuditBatch } from '../src/persistence/audit.ts';
import { withTransaction } from '../src/persistence/db.ts';
import { migrationsDir } from '../src/persistence/migrate.ts';
import { authenticateToken, createToken } from '../src/persistence/tokens.ts';
import { appForFile } from './helpers/app.ts';
import { callApi, expectStatus, type Reply } from './helpers/http.ts';
import { makeTemplateLive } from './helpers/templates.ts';

// Workers off: the tests only need the API's writes.
const { db, app } = await appForFile({ FERRY_DATA_DIR: '.ferry/test-api-principals' }, { workers: false });

const admin = await createToken(db.pool, { name: 'root', role: 'admin' });
// A second admin: principals and tokens for others are made by two (src/services/credential-proposals.ts).
const admin2 = await createToken(db.pool, { name: 'root2', role: 'admin' });
const operator = await createToken(db.pool, { name: 'ops', role: 'operator' });
const viewer = await createToken(db.pool, { name: 'watcher', role: 'viewer' });

const call = (method: string, path: string, token: string, body?: unknown): Promise<Reply> => callApi(app, method, path, token, body);

/** root proposes, root2 confirms: the confirming answer (what was created, a token's secret), or the refusal. */
async function byTwo(path: string, body: unknown): Promise<Reply> {
  const proposed = await call('POST', path, admin.token, body);
  if (proposed.status !== 202) return proposed;
  return call('POST', `/v3/credential-proposals/${proposed.body.proposal.id}/confirm`, admin2.token);
}

async function auditEvents(): Promise<any[]> {
  while ((await promoteAuditBatch(db.pool)) > 0);
  const r = await call('GET', '/v3/audit-events?limit=500', viewer.token);
  expectStatus(r, 200);
  return r.body.events;
}

const templateApprover = await createToken(db.pool, { name: 'template-approver', role: 'approver' });
await makeTemplateLive(app, db.pool, {
  template_key: 'pair',
  nodes: [{ node_key: 'a', node_kind: 'action', action_type: 'sim_action', executor_binding: 'exec.sim.action' }],
}, { proposer: operator.token, approver: templateApprover.token });

describe('the admin API', () => {
  test('create a principal and its tokens, list them, revoke one, disable the principal; each change is audited by name', async () => {
    const p = await byTwo('/v3/principals', { name: 'erin', kind: 'person' });
    expectStatus(p, 200);
    assert.equal(p.body.principal.name, 'erin');
    assert.equal(p.body.principal.actor, `principal:${p.body.principal.id}`);
    expectStatus(await call('POST', '/v3/principals', admin.token, { name: 'erin' }), 400, 'VALIDATION_FAILED');
    expectStatus(await call('POST', '/v3/principals', admin.token, { name: 'bad name' }), 400, 'VALIDATION_FAILED');

    const expiresAt = new Date(Date.now() + 7 * 86_400_000).toISOString();
    const t = await byTwo('/v3/tokens', { principal: 'erin', role: 'requester', expires_at: expiresAt });
    expectStatus(t, 200);
    assert.equal(t.body.token.name, 'erin.requester');
    assert.equal(t.body.token.principal_name, 'erin');
    assert.equal(t.body.token.expires_at, expiresAt);
    assert.match(t.body.secret, /^fy_[A-Za-z0-9_-]{43}$/);
    assert.equal((await authenticateToken(db.pool, t.body.secret))?.principalName, 'erin');
    const t2 = await byTwo('/v3/tokens', { principal: p.body.principal.id, role: 'viewer', name: 'erin-laptop' });
    expectStatus(t2, 200);

    expectStatus(await call('POST', '/v3/tokens', admin.token, { principal: 'nobody', role: 'viewer' }), 404, 'NOT_FOUND');
    expectStatus(await call('POST', '/v3/tokens', admin.token, { principal: 'erin', role: 'root' }), 400, 'VALIDATION_FAILED');
    const past = await call('POST', '/v3/tokens', admin.token, { principal: 'erin', role: 'viewer', name: 'erin-old', expires_at: new Date(Date.now() - 1000).toISOString() });
    expectStatus(past, 400, 'VALIDATION_FAILED');
    expectStatus(await call('POST', '/v3/tokens', admin.token, { principal: 'erin', role: 'viewer', name: 'erin-x', expires_at: 'tomorrow' }), 400, 'VALIDATION_FAILED');

    const list = await call('GET', '/v3/tokens?principal=erin', admin.token);
    expectStatus(list, 200);
    assert.deepEqual(list.body.tokens.map((x: any) => x.name), ['erin.requester', 'erin-laptop']);
    assert.ok(!list.text.includes(t.body.secret) && !list.text.includes('token_hash'), 'a secret is shown once, at creation');

    const revoked = await call('POST', '/v3/tokens/erin-laptop/revoke', admin.token);
    expectStatus(revoked, 200);
    assert.ok(revoked.body.token.revoked_at);
    expectStatus(await call('POST', '/v3/tokens/erin-laptop/revoke', admin.token), 404, 'NOT_FOUND');
    expectStatus(await call('GET', '/v3/movements', t2.body.secret), 401, 'UNAUTHENTICATED');
    assert.equal((await call('GET', '/v3/tokens?principal=erin&include_revoked=true', admin.token)).body.tokens.length, 2);

    expectStatus(await call('GET', '/v3/movements', t.body.secret), 200);
    const disabled = await call('POST', '/v3/principals/erin/disable', admin.token);
    expectStatus(disabled, 200);
    assert.ok(disabled.body.principal.disabled_at);
    expectStatus(await call('GET', '/v3/movements', t.body.secret), 401, 'UNAUTHENTICATED');
    expectStatus(await call('POST', '/v3/tokens', admin.token, { principal: 'erin', role: 'viewer', name: 'erin-again' }), 400, 'VALIDATION_FAILED');
    const listed = await call('GET', '/v3/principals', admin.token);
    assert.ok(!listed.body.principals.some((x: any) => x.name === 'erin'));
    assert.ok((await call('GET', '/v3/principals?include_disabled=true', admin.token)).body.principals.some((x: any) => x.name === 'erin'));

    const events = (await auditEvents()).filter(
      (e) => ['principal.create', 'principal.disable', 'token.create', 'token.revoke'].includes(e.action) && ['root', 'root2'].includes(e.actor_name),
    );
    assert.deepEqual(
      events.map((e) => `${e.action} ${e.details.name} ${e.actor_name}`),
      ['principal.create erin root2', 'token.create erin.requester root2', 'token.create erin-laptop root2', 'token.revoke erin-laptop root', 'principal.disable erin root'],
      'what two admins made is recorded as the confirmer, the proposer beside it',
    );
    const actorOf = { root: `principal:${admin.principal_id}`, root2: `principal:${admin2.principal_id}` } as Record<string, string>;
    for (const e of events) assert.equal(e.actor, actorOf[e.actor_name], 'the actor is the admin principal, its name beside it');
    for (const e of events.slice(0, 3)) assert.equal(e.details.proposed_by, `principal:${admin.principal_id}`);
    assert.equal(events[1].entity_id, t.body.token.id);
    assert.equal(events[1].details.expires_at, expiresAt);
    const text = JSON.stringify(events);
    assert.ok(!text.includes(t.body.secret) && !text.includes(t2.body.secret), 'no secret in the audit trail');
  });

  test('a refused change writes no audit event', async () => {
    const before = (await db.pool.query('SELECT count(*)::int AS n FROM audit_outbox')).rows[0].n;
    expectStatus(await call('POST', '/v3/tokens', admin.token, { principal: 'nobody', role: 'viewer' }), 404);
    expectStatus(await call('POST', '/v3/principals', admin.token, { name: 'root' }), 400);
    expectStatus(await call('POST', '/v3/tokens/nothing/revoke', admin.token), 404);
    assert.equal((await db.pool.query('SELECT count(*)::int AS n FROM audit_outbox')).rows[0].n, before);
  });
});

describe('people, not tokens', () => {
  test('API answers and the audit trail name the principal, not the token that was used', async () => {
    await byTwo('/v3/principals', { name: 'frank' });
    const laptop = (await byTwo('/v3/tokens', { principal: 'frank', role: 'requester', name: 'frank-laptop' })).body;
    const m = await call('POST', '/v3/movements', laptop.secret, { template_key: 'pair', intent: { n: 1 } });
    expectStatus(m, 201);
    assert.equal(m.body.movement.created_by, `principal:${laptop.token.principal_id}`);
    assert.equal(m.body.movement.created_by_name, 'frank', "the principal's name, not the token's");
    const history = await call('GET', `/v3/movements/${m.body.movement.id}/transitions`, viewer.token);
    assert.equal(history.body.transitions[0].actor_name, 'frank');
    const created = (await auditEvents()).find((e) => e.action === 'movement.create' && e.entity_id === m.body.movement.id);
    assert.deepEqual([created.actor, created.actor_name], [`principal:${laptop.token.principal_id}`, 'frank']);
  });

  test("an Idempotency-Key is the principal's: a retry through another of its tokens returns the first movement", async () => {
    await byTwo('/v3/principals', { name: 'hal', kind: 'service' });
    const a = (await byTwo('/v3/tokens', { principal: 'hal', role: 'requester', name: 'hal-a' })).body;
    const b = (await byTwo('/v3/tokens', { principal: 'hal', role: 'requester', name: 'hal-b' })).body;
    const body = { template_key: 'pair', intent: { n: 3 } };
    const first = await callApi(app, 'POST', '/v3/movements', a.secret, body, { 'idempotency-key': 'hal-1' });
    expectStatus(first, 201);
    const again = await callApi(app, 'POST', '/v3/movements', b.secret, body, { 'idempotency-key': 'hal-1' });
    assert.ok(again.status < 300, JSON.stringify(again.body));
    assert.equal(again.body.movement.id, first.body.movement.id);
    const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM movement_requests WHERE idempotency_key = 'hal-1'`);
    assert.equal(rows[0].n, 1);
  });

  test('a row from before principals (token:<id>) shows its principal and still counts as that principal', async () => {
    await byTwo('/v3/principals', { name: 'gail' });
    const asRequester = (await byTwo('/v3/tokens', { principal: 'gail', role: 'requester' })).body;
    const asApprover = (await byTwo('/v3/tokens', { principal: 'gail', role: 'approver' })).body;
    const m = (await call('POST', '/v3/movements', asRequester.secret, { template_key: 'pair', intent: { n: 2 } })).body.movement;
    // Backdate the row to how an older Ferry recorded it: the token, not the principal.
    await db.pool.query('UPDATE movement_requests SET created_by = $2 WHERE id = $1', [m.id, `token:${asRequester.token.id}`]);
    await withTransaction(db.pool, (c) =>
      c.query(`INSERT INTO audit_outbox (actor, action, entity_type, entity_id, details) VALUES ($1, 'legacy.test', 'movement', $2, '{}')`, [
        `token:${asRequester.token.id}`,
        m.id,
      ]),
    );

    const read = await call('GET', `/v3/movements/${m.id}`, viewer.token);
    assert.equal(read.body.movement.created_by, `token:${asRequester.token.id}`, 'the stored id is kept');
    assert.equal(read.body.movement.created_by_name, 'gail');
    const legacy = (await auditEvents()).find((e) => e.action === 'legacy.test');
    assert.equal(legacy.actor_name, 'gail');

    const self = await call('POST', `/v3/movements/${m.id}/approve`, asApprover.secret, { compiled_plan_hash: m.compiled_plan_hash });
    expectStatus(self, 403, 'FOUR_EYES_VIOLATION');
    // The requester's principal may still cancel its own movement through its current actor id.
    expectStatus(await call('POST', `/v3/movements/${m.id}/cancel`, asRequester.secret, {}), 200);
  });
});

test('migration 0080 gives every existing token a principal of its name, so upgrades keep working', async () => {
  const sql = await readFile(join(migrationsDir, '0080_principals.sql'), 'utf8');
  const [up, down] = sql.split('-- Down Migration');
  // Tables added after 0080 that point at principals go first and come back after it.
  const [laterUp, laterDown] = (await readFile(join(migrationsDir, '0190_queue_credentials.sql'), 'utf8')).split('-- Down Migration');
  await withTransaction(db.pool, async (c) => {
    // A database as an older Ferry left it: no principals; tokens named, one name reused after a revoke.
    await c.query(laterDown!);
    await c.query('DELETE FROM api_tokens');
    await c.query('DELETE FROM principals');
    await c.query(down!);
    await c.query(
      `INSERT INTO api_tokens (name, role, token_hash, created_at, revoked_at) VALUES
         ('hana', 'requester', 'h1', now() - interval '2 days', now() - interval '1 day'),
         ('hana', 'requester', 'h2', now() - interval '1 day', NULL),
         ('ivo', 'approver', 'h3', now(), NULL)`,
    );
    await c.query(up!);
    await c.query(laterUp!);
  });
  const { rows } = await db.pool.query<{ name: string; principal: string; kind: string }>(
    `SELECT t.name, p.name AS principal, p.kind FROM api_tokens t JOIN principals p ON p.id = t.principal_id ORDER BY t.created_at`,
  );
  assert.deepEqual(rows, [
    { name: 'hana', principal: 'hana', kind: 'person' },
    { name: 'hana', principal: 'hana', kind: 'person' },
    { name: 'ivo', principal: 'ivo', kind: 'person' },
  ]);
  assert.equal((await db.pool.query('SELECT count(*)::int AS n FROM principals')).rows[0].n, 2, 'one principal per name');
  await assert.rejects(db.pool.query(`INSERT INTO api_tokens (name, role, token_hash) VALUES ('x', 'viewer', 'h4')`), /principal_id/);
});
