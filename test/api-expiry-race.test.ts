/**
 * Approve vs expiry at the expiry boundary: 100 movements, each approved through the API while the
 * expiry sweep runs, both aimed at the movement's expires_at. Whatever the interleaving, each
 * movement ends with exactly one outcome, the approver's answer says which, and the transition log,
 * callbacks and audit rows agree with it.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { expirePendingMovements } from '../src/sweeps/expiry.ts';
import { createToken } from '../src/persistence/tokens.ts';
import { appForFile } from './helpers/app.ts';
import { LOOPBACK_NETWORKS } from './helpers/destinations.ts';
import { callApi } from './helpers/http.ts';
import { makeTemplateLive } from './helpers/templates.ts';

const RACES = 100;

// Workers off: the test itself plays the expiry sweep, aimed at each boundary.
const { db, runtime, app } = await appForFile({ FERRY_DATA_DIR: '.ferry/test-api-race', FERRY_APPROVAL_TTL_SECONDS: '6', FERRY_CALLBACK_ALLOWED_NETWORKS: LOOPBACK_NETWORKS }, { workers: false });
const requester = await createToken(db.pool, { name: 'requester', role: 'requester' });
const approver = await createToken(db.pool, { name: 'approver', role: 'approver' });

const call = (method: string, path: string, token: string, body?: unknown) => callApi(app, method, path, token, body);

// Not a wait for something to happen: it aims each call at a moment on the clock, around the
// boundary the race is about.
const sleepUntil = (at: number) => new Promise<void>((r) => setTimeout(r, Math.max(0, at - Date.now())));
const jitter = (lo: number, hi: number) => lo + Math.random() * (hi - lo);

test(`${RACES} races of approve vs expiry end with exactly one outcome each, and the transitions table agrees`, async (t) => {
  const version = await makeTemplateLive(
    app,
    db.pool,
    {
      template_key: 'race',
      nodes: [{ node_key: 'pay', node_kind: 'action', action_type: 'sim_action', executor_binding: 'exec.sim.action' }],
      edges: [],
    },
    {
      proposer: (await createToken(db.pool, { name: 'op', role: 'operator' })).token,
      approver: (await createToken(db.pool, { name: 'template-approver', role: 'approver' })).token,
    },
  );
  assert.equal(version, 1);

  const movements: Array<{ id: string; hash: string; expiresAt: number }> = [];
  for (let batch = 0; batch < RACES; batch += 10) {
    const created = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        call('POST', '/v3/movements', requester.token, {
          template_key: 'race',
          intent: { i: batch + i },
          callback_url: 'http://127.0.0.1:9/never-delivered',
        }),
      ),
    );
    for (const c of created) {
      assert.equal(c.status, 201, JSON.stringify(c.body));
      movements.push({ id: c.body.movement.id, hash: c.body.movement.compiled_plan_hash, expiresAt: Date.parse(c.body.movement.expires_at) });
    }
  }
  assert.ok(Date.now() < Math.min(...movements.map((m) => m.expiresAt)), 'every race starts before its boundary');

  // Each approval and a sweep are fired around that movement's expires_at. The approval is sent up to
  // 60 ms early because it reads the clock only after authentication, validation and the row lock
  // (slower with a hundred in flight); the spread puts that reading on both sides of the boundary.
  const sweeps: Promise<unknown>[] = [];
  const approvals = await Promise.all(
    movements.map(async (m) => {
      sweeps.push(sleepUntil(m.expiresAt + jitter(0, 4)).then(() => expirePendingMovements(runtime.deps)));
      await sleepUntil(m.expiresAt + jitter(-60, 5));
      return call('POST', `/v3/movements/${m.id}/approve`, approver.token, { compiled_plan_hash: m.hash });
    }),
  );
  await Promise.all(sweeps);
  // An approver that lost after the sweep passed its row by leaves it for the next sweep round.
  for (let round = 0; round < 10; round++) {
    const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM movement_requests WHERE request_state = 'PENDING_APPROVAL'`);
    if (rows[0].n === 0) break;
    await expirePendingMovements(runtime.deps);
  }

  const ids = movements.map((m) => m.id);
  const { rows: states } = await db.pool.query<{ id: string; request_state: string; approval_status: string }>(
    'SELECT id, request_state, approval_status FROM movement_requests WHERE id = ANY($1::uuid[])',
    [ids],
  );
  const stateOf = new Map(states.map((r) => [r.id, r]));
  const { rows: decisive } = await db.pool.query<{ request_id: string; event_type: string; to_state: string; n: number }>(
    `SELECT request_id, event_type, to_state, count(*) OVER (PARTITION BY request_id)::int AS n
       FROM transitions
      WHERE entity_type = 'request' AND from_state = 'PENDING_APPROVAL' AND request_id = ANY($1::uuid[])`,
    [ids],
  );
  const decisiveOf = new Map(decisive.map((r) => [r.request_id, r]));
  const { rows: callbacks } = await db.pool.query<{ request_id: string; event_type: string }>(
    `SELECT request_id, event_type FROM callback_outbox WHERE request_id = ANY($1::uuid[])`,
    [ids],
  );
  const { rows: audits } = await db.pool.query<{ entity_id: string }>(
    `SELECT entity_id FROM audit_outbox WHERE action = 'movement.approve' AND entity_id = ANY($1::text[])`,
    [ids],
  );
  const audited = new Set(audits.map((a) => a.entity_id));

  let approved = 0;
  let expired = 0;
  movements.forEach((m, i) => {
    const reply = approvals[i];
    const row = stateOf.get(m.id)!;
    const log = decisiveOf.get(m.id);
    const events = callbacks.filter((c) => c.request_id === m.id).map((c) => c.event_type).sort();
    assert.ok(log, `movement ${i} left PENDING_APPROVAL exactly once`);
    assert.equal(log.n, 1, `movement ${i}: one accepted event from PENDING_APPROVAL`);
    if (reply.status === 200) {
      approved++;
      assert.equal(row.request_state, 'APPROVED', `movement ${i}`);
      assert.equal(row.approval_status, 'approved');
      assert.equal(log.event_type, 'APPROVE');
      assert.deepEqual(events, ['request_approved']);
      assert.ok(audited.has(m.id), `movement ${i}: the approval is audited`);
    } else {
      expired++;
      assert.equal(reply.status, 409, JSON.stringify(reply.body));
      // The sweep committed first (the movement is EXPIRED), or the approver came after the deadline.
      assert.ok(['INVALID_TRANSITION', 'APPROVAL_EXPIRED'].includes(reply.body.error.code), reply.body.error.code);
      assert.match(reply.body.error.message, /approv|EXPIRED/);
      assert.equal(row.request_state, 'EXPIRED', `movement ${i}`);
      assert.equal(row.approval_status, 'rejected');
      assert.equal(log.event_type, 'EXPIRE');
      assert.equal(log.to_state, 'EXPIRED');
      assert.deepEqual(events, ['request_expired']);
      assert.ok(!audited.has(m.id), `movement ${i}: a refused approval leaves no audit row`);
    }
  });
  assert.equal(approved + expired, RACES);
  t.diagnostic(`approved ${approved}, expired ${expired}`);
});
