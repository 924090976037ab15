/**
 * The /v3 API end to end: real app, real Postgres, the runtime's workers on the simulation lane, and
 * a loopback receiver for the signed callbacks.
 */
import assert from 'node:assert/strict';
import { createHash, createHmac } from 'node:crypto';
import { after, describe, test } from 'node:test';
import { refreshRegistryHealth } from '../src/sweeps/executor-health.ts';
import { readCallbackHeaders, verifyCallback } from '../src/callbacks/signing.ts';
import { loadConfig } from '../src/config.ts';
import { createApp } from '../src/http/app.ts';
import { promoteAuditBatch, verifyAuditChain } from '../src/persistence/audit.ts';
import { callbacksForMovement } from '../src/persistence/callbacks.ts';
import { appForFile, FAST_WORKERS } from './helpers/app.ts';
import { callApi, expectStatus, type Reply } from './helpers/http.ts';
import { deadUrl } from './helpers/net.ts';
import { CallbackReceiver } from './helpers/receiver.ts';
import { collectPages } from './helpers/pages.ts';
import { makeTemplateLive } from './helpers/templates.ts';
import { createTokens } from './helpers/tokens.ts';
import { waitFor } from './helpers/wait.ts';

const SECRET = 'api-test-callback-secret-0123456789';

// ---------------------------------------------------------------------------------------------
// Runtime, app and tokens.

const env = { FERRY_DATA_DIR: '.ferry/test-api', FERRY_CALLBACK_SECRET: SECRET, ...FAST_WORKERS };
const { db, config, runtime, app } = await appForFile(env, { workers: true });
const receiver = await new CallbackReceiver().listen();
after(() => receiver.close());
const quorum2App = createApp({ pool: db.pool, config: loadConfig({ ...env, FERRY_LOG_LEVEL: 'silent', FERRY_APPROVAL_QUORUM: '2' }), runtime });

const tokens = await createTokens(db.pool, {
  requester: 'requester',
  requester2: { name: 'requester-2', role: 'requester' },
  approver: 'approver',
  approver2: { name: 'approver-2', role: 'approver' },
  operator: 'operator',
  admin: 'admin',
  viewer: 'viewer',
  // A second token of approver-1's principal: a second credential, not a second person.
  approverAgain: { name: 'approver-1.again', role: 'approver', principal: 'approver-1' },
  // requester-1 also holds an approver token: it may approve others' movements, never its own.
  requesterAsApprover: { name: 'requester-1.approver', role: 'approver', principal: 'requester-1' },
});
type Who = keyof typeof tokens;

const call = (method: string, path: string, who: Who, body?: unknown, headers: Record<string, string> = {}, target = app): Promise<Reply> =>
  callApi(target, method, path, tokens[who].token, body, headers);

/** Proposes, approves (a second token) and finalizes a template; its live version. */
const live = (def: unknown) => makeTemplateLive(app, db.pool, def, { proposer: tokens.operator.token, approver: tokens.approver.token });

const transfer = {
  template_key: 'usdc-transfer',
  description: 'withdraw, confirm, sweep',
  nodes: [
    { node_key: 'withdraw', node_kind: 'action', action_type: 'cex_withdrawal', executor_binding: 'exec.sim.action' },
    {
      node_key: 'confirm',
      node_kind: 'observe',
      action_type: 'cex_deposit_status',
      executor_binding: 'exec.sim.observe',
      config: { sim: { submit: [{ next_state: 'SUBMITTED', retry_after_seconds: 0 }] } },
    },
    { node_key: 'sweep', node_kind: 'action', action_type: 'sweep', executor_binding: 'exec.sim.action' },
  ],
  edges: [
    { from: 'withdraw', to: 'confirm' },
    { from: 'confirm', to: 'sweep' },
  ],
};

function waitForState(id: string, states: string[]): Promise<any> {
  return waitFor(`movement ${id} to reach ${states.join(' or ')}`, async () => {
    const r = await call('GET', `/v3/movements/${id}`, 'viewer');
    expectStatus(r, 200);
    return states.includes(r.body.movement.state) ? r.body : null;
  });
}

async function create(body: Record<string, unknown>, headers: Record<string, string> = {}, target = app): Promise<any> {
  const r = await call('POST', '/v3/movements', 'requester', body, headers, target);
  expectStatus(r, 201);
  return r.body;
}

describe('templates', () => {
  test('a finalized proposal is version 1; the same graph again returns it; a changed graph finalized is version 2', async () => {
    // A changed graph is a proposal (202), live once approved by a second token and finalized.
    let r = await call('POST', '/v3/templates', 'operator', transfer);
    expectStatus(r, 202);
    assert.equal(r.body.created, true);
    assert.equal(r.body.proposal.state, 'PROPOSED');
    assert.equal(await live(transfer), 1);
    r = await call('GET', '/v3/templates/usdc-transfer', 'viewer');
    expectStatus(r, 200);
    assert.equal(r.body.template.template_key, 'usdc-transfer');

    r = await call('POST', '/v3/templates', 'operator', { ...transfer, description: 'reworded' });
    expectStatus(r, 200);
    assert.equal(r.body.created, false);
    assert.equal(r.body.version.version, 1);

    const changed = { ...transfer, template_key: 'usdc-transfer-v', nodes: transfer.nodes.map((n) => ({ ...n })) };
    assert.equal(await live(changed), 1);
    changed.nodes[2] = { ...changed.nodes[2], action_type: 'sweep_to_cold' };
    assert.equal(await live(changed), 2);

    r = await call('GET', '/v3/templates/usdc-transfer-v', 'viewer');
    expectStatus(r, 200);
    assert.deepEqual(r.body.versions.map((v: { version: number }) => v.version), [2, 1]);
    r = await call('GET', '/v3/templates/usdc-transfer-v/versions/1', 'viewer');
    expectStatus(r, 200);
    assert.equal(r.body.nodes.find((n: { node_key: string }) => n.node_key === 'sweep').action_type, 'sweep');
    r = await call('GET', '/v3/templates', 'viewer');
    assert.deepEqual(r.body.templates.map((t: { template_key: string }) => t.template_key), ['usdc-transfer', 'usdc-transfer-v']);
    expectStatus(await call('GET', '/v3/templates/usdc-transfer-v/versions/3', 'viewer'), 404, 'NOT_FOUND');
    expectStatus(await call('GET', '/v3/templates/nope', 'viewer'), 404, 'NOT_FOUND');
  });

  test('an unregistered executor binding is refused with 422 naming the node and the rule', async () => {
    const bad = { ...transfer, template_key: 'bad-binding', nodes: [{ ...transfer.nodes[0], executor_binding: 'exec.nowhere' }], edges: [] };
    const r = await call('POST', '/v3/templates', 'operator', bad);
    expectStatus(r, 422, 'INVALID_TEMPLATE');
    assert.equal(r.body.error.details.rule, 'UNKNOWN_EXECUTOR_BINDING');
    assert.deepEqual(r.body.error.details.node_keys, ['withdraw']);
    assert.match(r.body.error.message, /withdraw/);
    expectStatus(await call('GET', '/v3/templates/bad-binding', 'viewer'), 404);
  });

  test('compile previews the plan and hash a movement would get, writing nothing', async () => {
    const before = await db.pool.query('SELECT count(*)::int AS n FROM movement_requests');
    const intent = { asset: 'USDC', amount: '10' };
    const r = await call('POST', '/v3/templates/usdc-transfer/compile', 'viewer', { intent });
    expectStatus(r, 200);
    assert.match(r.body.compiled_plan_hash, /^sha256:[0-9a-f]{64}$/);
    assert.deepEqual(r.body.compiled_plan.initial_frontier, ['withdraw']);
    const after = await db.pool.query('SELECT count(*)::int AS n FROM movement_requests');
    assert.equal(after.rows[0].n, before.rows[0].n);
    const m = await create({ template_key: 'usdc-transfer', intent });
    assert.equal(m.movement.compiled_plan_hash, r.body.compiled_plan_hash);
  });
});

describe('a movement from creation to completion', () => {
  test('created, approved by a second token, run on the sim lane to COMPLETED, every callback delivered in order and signed', async () => {
    const created = await create({ template_key: 'usdc-transfer', intent: { asset: 'USDC', amount: '250' }, callback_url: receiver.url() });
    const id = created.movement.id;
    assert.equal(created.movement.state, 'PENDING_APPROVAL');
    assert.equal(created.movement.created_by, `principal:${tokens.requester.principal_id}`);
    assert.equal(created.movement.created_by_name, 'requester-1', 'beside the stable id, the name a person reads');
    assert.deepEqual(created.nodes.map((n: { state: string }) => n.state), ['BLOCKED', 'BLOCKED', 'BLOCKED']);
    const ttl = Date.parse(created.movement.expires_at) - Date.parse(created.movement.created_at);
    assert.ok(Math.abs(ttl - config.approvalTtlSeconds * 1000) < 5000, `expires_at is created_at + TTL (${ttl} ms)`);

    const approved = await call('POST', `/v3/movements/${id}/approve`, 'approver', { compiled_plan_hash: created.movement.compiled_plan_hash });
    expectStatus(approved, 200);
    assert.ok(['APPROVED', 'EXECUTING', 'COMPLETED'].includes(approved.body.movement.state));
    assert.equal(approved.body.movement.approvals[0].by, `principal:${tokens.approver.principal_id}`);
    assert.equal(approved.body.movement.approvals[0].by_name, 'approver-1');
    assert.equal(approved.body.movement.decided_by_name, approved.body.movement.decided_by === null ? null : 'approver-1');
    const history = await call('GET', `/v3/movements/${id}/transitions`, 'viewer');
    const approval = history.body.transitions.find((t: { event_type: string }) => t.event_type === 'APPROVE');
    assert.deepEqual([approval.actor, approval.actor_name], [`principal:${tokens.approver.principal_id}`, 'approver-1']);
    // Actors that are not API callers (the workers) are shown as they are.
    const worker = history.body.transitions.find((t: { actor: string }) => !t.actor.startsWith('principal:'));
    if (worker) assert.equal(worker.actor_name, worker.actor);
    const listed = await call('GET', `/v3/movements?limit=200`, 'viewer');
    assert.equal(listed.body.movements.find((m: { id: string }) => m.id === id).created_by_name, 'requester-1');
    const inspected = await call('GET', `/inspect/movements/${id}`, 'viewer');
    assert.equal(inspected.body.movement.created_by_name, 'requester-1');
    assert.equal(inspected.body.movement.approvals[0].by_name, 'approver-1');
    assert.equal(inspected.body.transitions.find((t: { event_type: string }) => t.event_type === 'APPROVE').actor_name, 'approver-1');
    const overview = await call('GET', '/inspect/movements?limit=200', 'viewer');
    assert.equal(overview.body.movements.find((m: { id: string }) => m.id === id).created_by_name, 'requester-1');

    const done = await waitForState(id, ['COMPLETED', 'FAILED', 'MANUAL_INTERVENTION']);
    assert.equal(done.movement.state, 'COMPLETED');
    assert.deepEqual(done.nodes.map((n: { state: string }) => n.state), ['COMPLETED', 'COMPLETED', 'COMPLETED']);

    // Every callback the transitions wrote reaches the receiver, in the order written, once.
    const rows = await callbacksForMovement(db.pool, id);
    const events = rows.map((r) => r.event_type);
    assert.equal(events[0], 'request_approved');
    assert.ok(events.includes('request_executing'));
    assert.equal(events.filter((e) => e === 'frontier_advanced').length, 2);
    assert.equal(events[events.length - 1], 'request_completed');
    await receiver.waitFor(rows.length);
    const mine = receiver.received.filter((r) => JSON.parse(r.body.toString('utf8')).request_id === id);
    assert.equal(mine.length, rows.length);
    mine.forEach((got, i) => {
      const row = rows[i];
      const parts = readCallbackHeaders(got.headers);
      assert.ok(parts);
      assert.equal(parts.version, 'v3');
      assert.equal(parts.nonce, row.callback_nonce);
      assert.equal(parts.timestamp, String(row.callback_timestamp));
      assert.equal(got.body.toString('utf8'), row.payload_body);
      assert.equal(verifyCallback(SECRET, parts, got.body), true, `callback ${i} (${row.event_type}) verifies`);
      // The same signature computed by hand from the documented recipe.
      const bodyHash = createHash('sha256').update(got.body).digest('hex');
      const expected = createHmac('sha256', SECRET).update(`${parts.timestamp}\n${parts.nonce}\n${bodyHash}`).digest('hex');
      assert.equal(parts.signature, expected);
      assert.equal(verifyCallback('another-secret-0123456789', parts, got.body), false);
      const payload = JSON.parse(got.body.toString('utf8'));
      assert.equal(payload.event_type, row.event_type);
      assert.equal(payload.movement.id, id);
    });

    // A callback is marked sent just after the receiver answered; wait for the last one to be recorded.
    await waitFor('every callback to be recorded as sent', async () => {
      const sent = await call('GET', `/v3/callbacks?status=sent&movement_id=${id}`, 'viewer');
      expectStatus(sent, 200);
      return sent.body.callbacks.length >= rows.length;
    });

    const log = await call('GET', `/v3/movements/${id}/transitions?limit=3`, 'viewer');
    expectStatus(log, 200);
    assert.equal(log.body.transitions.length, 3);
    assert.ok(log.body.next_cursor);
    const { items: all } = await collectPages(async (cursor) => {
      const page = await call('GET', `/v3/movements/${id}/transitions?limit=3${cursor ? `&cursor=${cursor}` : ''}`, 'viewer');
      expectStatus(page, 200);
      return { items: page.body.transitions as any[], next: page.body.next_cursor };
    });
    assert.equal(new Set(all.map((t) => t.id)).size, all.length, 'each transition on one page only');
    // The creation has no state before it: from_state is null (as /inspect shows it).
    const movementLog = all.filter((t) => t.entity_type === 'request').map((t) => `${t.from_state ?? '(none)'}>${t.to_state}`);
    assert.deepEqual(movementLog, ['(none)>PENDING_APPROVAL', 'PENDING_APPROVAL>APPROVED', 'APPROVED>EXECUTING', 'EXECUTING>COMPLETED']);
  });
});

describe('approval rules', () => {
  test('the creator cannot approve: not by role, not with a second (approver) token of its principal (403 FOUR_EYES_VIOLATION)', async () => {
    const m = await create({ template_key: 'usdc-transfer', intent: { n: 1 } });
    const r = await call('POST', `/v3/movements/${m.movement.id}/approve`, 'requester', { compiled_plan_hash: m.movement.compiled_plan_hash });
    expectStatus(r, 403, 'FORBIDDEN');

    const self = await call('POST', `/v3/movements/${m.movement.id}/approve`, 'requesterAsApprover', { compiled_plan_hash: m.movement.compiled_plan_hash });
    expectStatus(self, 403, 'FOUR_EYES_VIOLATION');
    assert.match(self.body.error.message, /cannot approve/);
    const still = await call('GET', `/v3/movements/${m.movement.id}`, 'viewer');
    assert.equal(still.body.movement.state, 'PENDING_APPROVAL');
    assert.deepEqual(still.body.movement.approvals, []);

    // The same approver token is fine on someone else's movement.
    const other = await call('POST', '/v3/movements', 'requester2', { template_key: 'usdc-transfer', intent: { n: 1.5 } });
    expectStatus(other, 201);
    const ok = await call('POST', `/v3/movements/${other.body.movement.id}/approve`, 'requesterAsApprover', { compiled_plan_hash: other.body.movement.compiled_plan_hash });
    expectStatus(ok, 200);
    assert.equal(ok.body.movement.approvals[0].by, `principal:${tokens.requester.principal_id}`);
    assert.equal(ok.body.movement.approvals[0].by_name, 'requester-1');
  });

  test('admin creates but cannot approve: approving is its own grant (403 FORBIDDEN)', async () => {
    const a = await call('POST', '/v3/movements', 'admin', { template_key: 'usdc-transfer', intent: { n: 2 } });
    expectStatus(a, 201);
    const other = await create({ template_key: 'usdc-transfer', intent: { n: 2.5 } });
    for (const id of [a.body.movement.id, other.movement.id]) {
      const hash = id === other.movement.id ? other.movement.compiled_plan_hash : a.body.movement.compiled_plan_hash;
      const r = await call('POST', `/v3/movements/${id}/approve`, 'admin', { compiled_plan_hash: hash });
      expectStatus(r, 403, 'FORBIDDEN');
      assert.deepEqual(r.body.error.details, { permission: 'movement.approve', role: 'admin' });
    }
    const still = await call('GET', `/v3/movements/${other.movement.id}`, 'viewer');
    assert.deepEqual(still.body.movement.approvals, []);
  });

  test('a stale plan hash is refused (409 STALE_PLAN_HASH) and nothing changes', async () => {
    const m = await create({ template_key: 'usdc-transfer', intent: { n: 3 } });
    const r = await call('POST', `/v3/movements/${m.movement.id}/approve`, 'approver', { compiled_plan_hash: `sha256:${'ab'.repeat(32)}` });
    expectStatus(r, 409, 'STALE_PLAN_HASH');
    assert.equal(r.body.error.details.expected, m.movement.compiled_plan_hash);
    const still = await call('GET', `/v3/movements/${m.movement.id}`, 'viewer');
    assert.equal(still.body.movement.state, 'PENDING_APPROVAL');
  });

  test('a stored plan changed behind Ferry\'s back cannot be approved', async () => {
    const m = await create({ template_key: 'usdc-transfer', intent: { n: 4 } });
    await db.pool.query(
      `UPDATE movement_requests SET compiled_plan = jsonb_set(compiled_plan, '{nodes,0,config}', '{"to":"attacker"}') WHERE id = $1`,
      [m.movement.id],
    );
    const r = await call('POST', `/v3/movements/${m.movement.id}/approve`, 'approver', { compiled_plan_hash: m.movement.compiled_plan_hash });
    expectStatus(r, 409, 'STALE_PLAN_HASH');
    assert.equal(r.body.error.details.reason, 'STORED_PLAN_DRIFT');
  });

  test('quorum 2 needs two distinct approvers; the same approver twice is ALREADY_APPROVED', async () => {
    const m = await create({ template_key: 'usdc-transfer', intent: { n: 5 } }, {}, quorum2App);
    assert.equal(m.movement.approval_quorum, 2);
    const id = m.movement.id;
    const hash = m.movement.compiled_plan_hash;

    const first = await call('POST', `/v3/movements/${id}/approve`, 'approver', { compiled_plan_hash: hash }, {}, quorum2App);
    expectStatus(first, 200);
    assert.equal(first.body.movement.state, 'PENDING_APPROVAL');
    assert.equal(first.body.movement.approvals.length, 1);
    assert.ok(first.body.nodes.every((n: { state: string }) => n.state === 'BLOCKED'));

    const again = await call('POST', `/v3/movements/${id}/approve`, 'approver', { compiled_plan_hash: hash }, {}, quorum2App);
    expectStatus(again, 409, 'ALREADY_APPROVED');
    // Another token of the same principal is the same approver: it cannot make the quorum.
    const sameOne = await call('POST', `/v3/movements/${id}/approve`, 'approverAgain', { compiled_plan_hash: hash }, {}, quorum2App);
    expectStatus(sameOne, 409, 'ALREADY_APPROVED');
    assert.equal((await call('GET', `/v3/movements/${id}`, 'viewer')).body.movement.state, 'PENDING_APPROVAL');

    const second = await call('POST', `/v3/movements/${id}/approve`, 'approver2', { compiled_plan_hash: hash }, {}, quorum2App);
    expectStatus(second, 200);
    assert.notEqual(second.body.movement.state, 'PENDING_APPROVAL');
    assert.deepEqual(
      second.body.movement.approvals.map((a: { by: string }) => a.by),
      [`principal:${tokens.approver.principal_id}`, `principal:${tokens.approver2.principal_id}`],
    );
    const withdraw = second.body.nodes.find((n: { node_key: string }) => n.node_key === 'withdraw');
    assert.notEqual(withdraw.state, 'BLOCKED', 'the frontier is readied on approval');
    await waitForState(id, ['COMPLETED']);
  });

  test('one rejection ends a movement; it cannot be approved afterwards', async () => {
    const m = await create({ template_key: 'usdc-transfer', intent: { n: 6 } });
    const r = await call('POST', `/v3/movements/${m.movement.id}/reject`, 'approver', { reason: 'amount looks wrong' });
    expectStatus(r, 200);
    assert.equal(r.body.movement.state, 'REJECTED');
    assert.equal(r.body.movement.approval_status, 'rejected');
    const late = await call('POST', `/v3/movements/${m.movement.id}/approve`, 'approver2', { compiled_plan_hash: m.movement.compiled_plan_hash });
    expectStatus(late, 409, 'INVALID_TRANSITION');
  });
});

describe('what each role sees', () => {
  test('the callback URL is shown to operators and admins only; others see that one is configured', async () => {
    const url = `${receiver.url()}/hooks/path-secret-4711`;
    const created = await create({ template_key: 'usdc-transfer', intent: { n: 9 }, callback_url: url });
    const id = created.movement.id;
    assert.equal(created.movement.callback_configured, true);
    assert.equal(created.movement.callback_url, null, 'not even echoed to its requester');
    for (const who of ['viewer', 'requester', 'approver'] as const) {
      const detail = await call('GET', `/v3/movements/${id}`, who);
      expectStatus(detail, 200);
      assert.equal(detail.body.movement.callback_configured, true);
      assert.equal(detail.body.movement.callback_url, null, who);
      const list = await call('GET', '/v3/movements?limit=200', who);
      assert.ok(!JSON.stringify(list.body).includes('path-secret-4711'), `${who} list`);
      const callbacks = await call('GET', `/v3/callbacks?movement_id=${id}`, who);
      assert.ok(!JSON.stringify(callbacks.body).includes('path-secret-4711'), `${who} callbacks`);
    }
    for (const who of ['operator', 'admin'] as const) {
      assert.equal((await call('GET', `/v3/movements/${id}`, who)).body.movement.callback_url, url, who);
    }
    const plain = await create({ template_key: 'usdc-transfer', intent: { n: 10 } });
    assert.equal(plain.movement.callback_configured, false);
  });

  test("a delivery's error and HTTP status are shown to operators and admins only; others see the coarse status", async () => {
    // A port nothing listens on: each attempt records connection_refused, which says the port is closed.
    const created = await create({ template_key: 'usdc-transfer', intent: { n: 11 }, callback_url: await deadUrl('/cb') });
    const id = created.movement.id;
    expectStatus(await call('POST', `/v3/movements/${id}/approve`, 'approver', { compiled_plan_hash: created.movement.compiled_plan_hash }), 200);
    await waitFor('a failed callback attempt', async () => (await callbacksForMovement(db.pool, id)).some((r) => r.last_error !== null));
    for (const who of ['viewer', 'requester', 'approver'] as const) {
      const r = await call('GET', `/v3/callbacks?movement_id=${id}`, who);
      expectStatus(r, 200);
      const failed = r.body.callbacks.filter((c: { attempts: number }) => c.attempts > 0);
      assert.ok(failed.length > 0, who);
      for (const c of failed) {
        assert.equal(c.last_error, null, who);
        assert.equal(c.last_status_code, null, who);
        assert.ok(['pending', 'dlq'].includes(c.status), who);
      }
      assert.ok(!JSON.stringify(r.body).includes('connection_refused'), who);
    }
    for (const who of ['operator', 'admin'] as const) {
      const r = await call('GET', `/v3/callbacks?movement_id=${id}`, who);
      assert.ok(r.body.callbacks.some((c: { last_error: string | null }) => c.last_error === 'connection_refused'), who);
    }
  });

  test('a raw callback_url whose literal address a delivery would refuse is a 422 at creation', async () => {
    for (const url of ['http://10.1.2.3/cb', 'http://169.254.169.254/latest/meta-data/', 'http://[64:ff9b::a9fe:a9fe]/x', 'http://[fd00::1]/cb']) {
      const r = await call('POST', '/v3/movements', 'requester', { template_key: 'usdc-transfer', intent: { n: 12 }, callback_url: url });
      expectStatus(r, 422, 'CALLBACK_ADDRESS_NOT_ALLOWED');
      assert.equal(r.body.error.details.rule, 'FERRY_CALLBACK_ALLOWED_NETWORKS');
    }
    // Loopback is in this file's FERRY_CALLBACK_ALLOWED_NETWORKS: accepted, as at delivery.
    expectStatus(await call('POST', '/v3/movements', 'requester', { template_key: 'usdc-transfer', intent: { n: 13 }, callback_url: 'http://127.0.0.1:9/cb' }), 201);
  });
});

describe('operator controls', () => {
  test('cancel a pending movement: its nodes are cancelled', async () => {
    const m = await create({ template_key: 'usdc-transfer', intent: { n: 7 } });
    const r = await call('POST', `/v3/movements/${m.movement.id}/cancel`, 'requester', { reason: 'duplicate' });
    expectStatus(r, 200);
    assert.equal(r.body.movement.state, 'CANCELLED');
    assert.ok(r.body.nodes.every((n: { state: string }) => n.state === 'CANCELLED'));
    expectStatus(await call('POST', `/v3/movements/${m.movement.id}/cancel`, 'requester'), 409, 'INVALID_TRANSITION');
  });

  test("a requester cancels only its own movements (403 NOT_MOVEMENT_OWNER); an operator cancels any", async () => {
    const m = await create({ template_key: 'usdc-transfer', intent: { n: 8 } });
    const before = await db.pool.query('SELECT ((SELECT count(*) FROM audit_outbox) + (SELECT count(*) FROM audit_events))::int AS n');
    const other = await call('POST', `/v3/movements/${m.movement.id}/cancel`, 'requester2', { reason: 'not mine' });
    expectStatus(other, 403, 'NOT_MOVEMENT_OWNER');
    assert.equal((await call('GET', `/v3/movements/${m.movement.id}`, 'viewer')).body.movement.state, 'PENDING_APPROVAL');
    assert.equal((await db.pool.query('SELECT ((SELECT count(*) FROM audit_outbox) + (SELECT count(*) FROM audit_events))::int AS n')).rows[0].n, before.rows[0].n, 'a refused cancel writes nothing');
    const byOperator = await call('POST', `/v3/movements/${m.movement.id}/cancel`, 'operator', { reason: 'duplicate' });
    expectStatus(byOperator, 200);
    assert.equal(byOperator.body.movement.state, 'CANCELLED');
  });

  test('retry re-readies a failed node on a lane that allows it and the movement completes', async () => {
    const tpl = {
      template_key: 'flaky-once',
      nodes: [{ node_key: 'pay', node_kind: 'action', action_type: 'sim_action', executor_binding: 'exec.sim.action', retryable: true, config: { sim: { submit: ['FAILED', 'COMPLETED'] } } }],
      edges: [],
    };
    assert.equal(await live(tpl), 1);
    const m = await create({ template_key: 'flaky-once', intent: { n: 8 } });
    expectStatus(await call('POST', `/v3/movements/${m.movement.id}/approve`, 'approver', { compiled_plan_hash: m.movement.compiled_plan_hash }), 200);
    const failed = await waitForState(m.movement.id, ['FAILED', 'COMPLETED']);
    assert.equal(failed.movement.state, 'FAILED');

    expectStatus(await call('POST', `/v3/movements/${m.movement.id}/retry`, 'operator', { node_key: 'nope' }), 404, 'NOT_FOUND');
    const r = await call('POST', `/v3/movements/${m.movement.id}/retry`, 'operator', { node_key: 'pay' });
    expectStatus(r, 200);
    assert.ok(['EXECUTING', 'COMPLETED'].includes(r.body.movement.state));
    const done = await waitForState(m.movement.id, ['COMPLETED']);
    assert.equal(done.nodes[0].attempt_no, 2);
  });

  test('retry of a node whose lane does not allow it is refused and nothing changes', async () => {
    const tpl = {
      template_key: 'fails-hard',
      nodes: [{ node_key: 'pay', node_kind: 'action', action_type: 'sim_action', executor_binding: 'exec.sim.action', config: { sim: { submit: ['FAILED', 'COMPLETED'] } } }],
      edges: [],
    };
    assert.equal(await live(tpl), 1);
    const m = await create({ template_key: 'fails-hard', intent: { n: 9 } });
    expectStatus(await call('POST', `/v3/movements/${m.movement.id}/approve`, 'approver', { compiled_plan_hash: m.movement.compiled_plan_hash }), 200);
    await waitForState(m.movement.id, ['FAILED']);
    const r = await call('POST', `/v3/movements/${m.movement.id}/retry`, 'operator', { node_key: 'pay' });
    expectStatus(r, 409, 'INVALID_TRANSITION');
    assert.equal(r.body.error.details.reason, 'RETRY_NOT_ALLOWED');
    const still = await call('GET', `/v3/movements/${m.movement.id}`, 'viewer');
    assert.equal(still.body.movement.state, 'FAILED');
    assert.equal(still.body.nodes[0].state, 'FAILED');
  });

  test('resume returns a MANUAL_INTERVENTION movement to EXECUTING', async () => {
    const tpl = {
      template_key: 'half-done',
      nodes: [
        { node_key: 'a', node_kind: 'action', action_type: 'sim_action', executor_binding: 'exec.sim.action' },
        { node_key: 'b', node_kind: 'action', action_type: 'sim_action', executor_binding: 'exec.sim.action', config: { sim: { submit: ['FAILED'] } } },
      ],
      edges: [{ from: 'a', to: 'b' }],
    };
    assert.equal(await live(tpl), 1);
    const m = await create({ template_key: 'half-done', intent: { n: 10 } });
    expectStatus(await call('POST', `/v3/movements/${m.movement.id}/resume`, 'operator'), 409, 'INVALID_TRANSITION');
    expectStatus(await call('POST', `/v3/movements/${m.movement.id}/approve`, 'approver', { compiled_plan_hash: m.movement.compiled_plan_hash }), 200);
    const stuck = await waitForState(m.movement.id, ['MANUAL_INTERVENTION', 'COMPLETED', 'FAILED']);
    assert.equal(stuck.movement.state, 'MANUAL_INTERVENTION');
    const r = await call('POST', `/v3/movements/${m.movement.id}/resume`, 'operator');
    expectStatus(r, 200);
    assert.equal(r.body.movement.state, 'EXECUTING');
  });
});

describe('idempotency', () => {
  test('the same key and body return the original movement; a different body is 409 IDEMPOTENCY_KEY_REUSED', async () => {
    const body = { template_key: 'usdc-transfer', intent: { asset: 'USDC', amount: '77' }, input_params: { memo: 'x' } };
    const first = await call('POST', '/v3/movements', 'requester', body, { 'Idempotency-Key': 'order-77' });
    expectStatus(first, 201);
    // Same content, keys in another order: the same request.
    const reordered = { input_params: { memo: 'x' }, intent: { amount: '77', asset: 'USDC' }, template_key: 'usdc-transfer' };
    const again = await call('POST', '/v3/movements', 'requester', reordered, { 'Idempotency-Key': 'order-77' });
    expectStatus(again, 200);
    assert.equal(again.body.movement.id, first.body.movement.id);

    const other = await call('POST', '/v3/movements', 'requester', { ...body, intent: { asset: 'USDC', amount: '78' } }, { 'Idempotency-Key': 'order-77' });
    expectStatus(other, 409, 'IDEMPOTENCY_KEY_REUSED');
    assert.equal(other.body.error.details.movement_id, first.body.movement.id);

    const { rows } = await db.pool.query('SELECT count(*)::int AS n FROM movement_requests WHERE idempotency_key = $1', ['order-77']);
    assert.equal(rows[0].n, 1);
  });

  test('concurrent creates with one key make one movement', async () => {
    const body = { template_key: 'usdc-transfer', intent: { asset: 'USDC', amount: '91' } };
    const replies = await Promise.all(
      Array.from({ length: 8 }, () => call('POST', '/v3/movements', 'requester', body, { 'Idempotency-Key': 'burst-91' })),
    );
    const ids = new Set(replies.map((r) => r.body.movement.id));
    assert.equal(ids.size, 1);
    assert.equal(replies.filter((r) => r.status === 201).length, 1);
    assert.equal(replies.filter((r) => r.status === 200).length, 7);
  });
});

describe('listing, registry, callbacks and audit', () => {
  test('movements list with filters and cursor pagination visits each movement once', async () => {
    const all = await call('GET', '/v3/movements?limit=200', 'viewer');
    expectStatus(all, 200);
    const total = all.body.movements.length;
    assert.ok(total >= 10);
    const { items: seen } = await collectPages(async (cursor) => {
      const page = await call('GET', `/v3/movements?limit=3${cursor ? `&cursor=${cursor}` : ''}`, 'viewer');
      expectStatus(page, 200);
      assert.ok(page.body.movements.length <= 3);
      return { items: page.body.movements.map((m: { id: string }) => m.id as string), next: page.body.next_cursor };
    });
    assert.equal(seen.length, total);
    assert.equal(new Set(seen).size, total);
    assert.deepEqual(seen, all.body.movements.map((m: { id: string }) => m.id));

    const rejected = await call('GET', '/v3/movements?state=REJECTED', 'viewer');
    assert.ok(rejected.body.movements.length >= 1);
    assert.ok(rejected.body.movements.every((m: { state: string }) => m.state === 'REJECTED'));
    const flaky = await call('GET', '/v3/movements?template_key=flaky-once', 'viewer');
    assert.equal(flaky.body.movements.length, 1);
  });

  test('registry roster, and the expected signer identity set through the API', async () => {
    await refreshRegistryHealth(db.pool, runtime.deps.executors, runtime.deps.signers);
    const executors = await call('GET', '/v3/executors', 'viewer');
    expectStatus(executors, 200);
    assert.ok(executors.body.executors.some((e: { executor_key: string }) => e.executor_key === 'exec.sim.action'));
    const signers = await call('GET', '/v3/signers', 'viewer');
    expectStatus(signers, 200);
    const noop = signers.body.signers.find((s: { signer_key: string }) => s.signer_key === 'noop');
    assert.ok(noop);
    assert.equal(noop.identity_posture, 'unenrolled');

    const address = '0x' + 'AbC1'.repeat(10);
    expectStatus(await call('PUT', '/v3/signers/noop/expected-identity', 'operator', { address }), 403, 'FORBIDDEN');
    const set = await call('PUT', '/v3/signers/noop/expected-identity', 'admin', { address });
    expectStatus(set, 200);
    assert.equal(set.body.signer.expected_signer_address, address.toLowerCase());
    assert.equal(set.body.signer.expected_set_by, `principal:${tokens.admin.principal_id}`);
    assert.equal(set.body.signer.expected_set_by_name, 'admin-1');
    assert.notEqual(set.body.signer.identity_posture, 'unenrolled');
    expectStatus(await call('PUT', '/v3/signers/ghost/expected-identity', 'admin', { address }), 404, 'NOT_FOUND');
  });

  test('redrive puts a callback back to pending; a sent one cannot be redriven', async () => {
    const sent = await call('GET', '/v3/callbacks?status=sent&limit=1', 'viewer');
    expectStatus(sent, 200);
    const one = sent.body.callbacks[0];
    expectStatus(await call('POST', `/v3/callbacks/${one.id}/redrive`, 'operator'), 409, 'CALLBACK_NOT_REDRIVABLE');

    await db.pool.query(`UPDATE callback_outbox SET status = 'dlq', attempts = max_attempts WHERE id = $1`, [one.id]);
    const dlq = await call('GET', '/v3/callbacks?status=dlq', 'viewer');
    assert.deepEqual(dlq.body.callbacks.map((c: { id: string }) => c.id), [one.id]);
    const count = receiver.received.length;
    const r = await call('POST', `/v3/callbacks/${one.id}/redrive`, 'operator');
    expectStatus(r, 200);
    assert.equal(r.body.callback.redrive_count, 1);
    await receiver.waitFor(count + 1);
    const again = receiver.received[count];
    assert.equal(readCallbackHeaders(again.headers)!.nonce, one.callback_nonce, 'a redrive sends the same nonce');
    expectStatus(await call('POST', '/v3/callbacks/00000000-0000-4000-8000-000000000000/redrive', 'operator'), 404, 'NOT_FOUND');
  });

  test('every mutating call left an audit row; the chain verifies', async () => {
    while ((await promoteAuditBatch(db.pool)) > 0);
    const actions = new Set<string>();
    const approvers = new Set<string>();
    const { items: events } = await collectPages(async (cursor) => {
      const page = await call('GET', `/v3/audit-events?limit=50${cursor ? `&cursor=${cursor}` : ''}`, 'viewer');
      expectStatus(page, 200);
      return { items: page.body.events as any[], next: page.body.next_cursor };
    });
    for (const e of events) {
      actions.add(e.action);
      if (e.action === 'movement.approve') approvers.add(`${e.actor} ${e.actor_name}`);
      if (!e.actor.startsWith('principal:')) assert.equal(e.actor_name, e.actor);
    }
    for (const action of [
      'template.save',
      'movement.create',
      'movement.approve',
      'movement.reject',
      'movement.cancel',
      'movement.retry',
      'movement.resume',
      'signer.expected_identity.set',
      'callback.redrive',
    ]) {
      assert.ok(actions.has(action), `audit has ${action}`);
    }
    const { rows } = await db.pool.query(
      `SELECT count(*)::int AS n FROM audit_events WHERE action = 'movement.approve' AND actor = $1`,
      [`principal:${tokens.approver2.principal_id}`],
    );
    assert.ok(rows[0].n >= 1);
    // The audit listing names who acted; the stable id stays beside the name.
    assert.ok(approvers.has(`principal:${tokens.approver.principal_id} approver-1`), [...approvers].join(', '));
    assert.ok(approvers.has(`principal:${tokens.approver2.principal_id} approver-2`), [...approvers].join(', '));
    assert.deepEqual(await verifyAuditChain(db.pool), { ok: true, checked: (await db.pool.query('SELECT count(*)::int AS n FROM audit_events')).rows[0].n });
  });
});
