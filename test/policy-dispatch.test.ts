/**
 * The treasury policy checked again at dispatch (docs/policy.md, "Checked again at dispatch"): the
 * velocity limits inside the transaction that records SUBMITTING, under the lock of the window's
 * sum, and the live rule set against what the approvals were given under. The API runs in a real
 * Ferry without worker loops; the test dispatches the nodes itself, two dispatchers at once.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { dispatchOne } from '../src/actors/dispatcher.ts';
import { getPolicyProposal, lockVelocitySum } from '../src/persistence/policy.ts';
import { finalizePolicyProposal } from '../src/services/policy.ts';
import { ferryForFile } from './helpers/ferry.ts';
import { callApi, type Reply } from './helpers/http.ts';
import { runtimeDeps } from './helpers/runtime.ts';
import { makeTemplateLive } from './helpers/templates.ts';
import { createTokens } from './helpers/tokens.ts';
import { waitFor } from './helpers/wait.ts';

const { db, ferry } = await ferryForFile({}, { runtime: 'api' });
const tokens = await createTokens(db.pool, {
  operator: 'operator',
  requester: 'requester',
  approver: 'approver',
  approver2: { name: 'approver-2', role: 'approver' },
  requester2: { name: 'requester-2', role: 'requester' },
});
type Who = keyof typeof tokens;
const call = (method: string, path: string, who: Who, body?: unknown): Promise<Reply> => callApi(ferry.url, method, path, tokens[who].token, body);

await makeTemplateLive(
  ferry.url,
  db.pool,
  {
    template_key: 'policy.dispatch',
    nodes: [{ node_key: 'pay', node_kind: 'action', action_type: 'transfer', executor_binding: 'exec.sim.action' }],
    edges: [],
  },
  { proposer: tokens.operator.token, approver: tokens.approver.token },
);

async function liveRules(set: unknown): Promise<number> {
  const p = await call('POST', '/v3/policy/rules', 'operator', set);
  assert.equal(p.status, 202, p.text);
  assert.equal((await call('POST', `/v3/policy/proposals/${p.body.id}/approve`, 'approver', {})).status, 200);
  const row = (await getPolicyProposal(db.pool, p.body.id))!;
  return (await finalizePolicyProposal({ pool: db.pool, now: () => new Date(row.challenge_ends_at!) }, p.body.id)).result_version!;
}

for (const source of ['hot', 'cold']) {
  // The node's account is its source, as the exchange lane reads it (executor_binding.account).
  await makeTemplateLive(
    ferry.url,
    db.pool,
    {
      template_key: `policy.from-${source}`,
      nodes: [{ node_key: 'pay', node_kind: 'action', action_type: 'transfer', executor_binding: { executor_key: 'exec.sim.action', account: source } }],
      edges: [],
    },
    { proposer: tokens.operator.token, approver: tokens.approver.token },
  );
}

async function approvedMovement(intent: Record<string, unknown>, who: Who = 'requester'): Promise<string> {
  const c = await call('POST', '/v3/movements', who, { template_key: 'policy.dispatch', intent });
  assert.equal(c.status, 201, c.text);
  const m = c.body.movement;
  const a = await call('POST', `/v3/movements/${m.id}/approve`, 'approver', { compiled_plan_hash: m.compiled_plan_hash });
  assert.equal(a.body.movement.state, 'APPROVED', a.text);
  return m.id;
}

async function nodeOf(id: string) {
  const { rows } = await db.pool.query(`SELECT node_state, error_code FROM request_nodes WHERE request_id = $1`, [id]);
  return rows[0] as { node_state: string; error_code: string | null };
}

const allowAll = { id: 'default', action: { type: 'allow' } };
const deps = runtimeDeps(db.pool);

test('two concurrent dispatches that would each fit under a velocity limit but not together: exactly one is submitted', async () => {
  await liveRules({ rules: [allowAll] });
  // Approved before the limit exists: the approvals cannot have counted each other.
  const a = await approvedMovement({ asset: 'USDT', amount: '600' });
  const b = await approvedMovement({ asset: 'USDT', amount: '600' });
  await liveRules({ rules: [allowAll], limits: [{ id: 'usdt-hourly', asset: 'USDT', window_seconds: 3600, max_amount: '1000' }] });

  // Hold the sum's lock, so both dispatches are inside their SUBMITTING transactions, at the lock, together.
  const holder = await db.pool.connect();
  try {
    await holder.query('BEGIN');
    await lockVelocitySum(holder, 'usdt-hourly:USDT:*');
    const both = Promise.all([dispatchOne(deps), dispatchOne(deps)]);
    await waitFor('both dispatches to wait on the velocity lock', async () => {
      const { rows } = await holder.query(`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`);
      return rows[0].n === 2 ? true : null;
    });
    await holder.query('COMMIT');
    assert.deepEqual(await both, [true, true]);
  } finally {
    holder.release();
  }

  const nodes = [await nodeOf(a), await nodeOf(b)];
  const failed = nodes.filter((n) => n.node_state === 'FAILED');
  const went = nodes.filter((n) => n.node_state !== 'FAILED');
  assert.equal(failed.length, 1, JSON.stringify(nodes));
  assert.equal(failed[0].error_code, 'VELOCITY_LIMIT_EXCEEDED');
  assert.equal(went.length, 1);
  assert.notEqual(went[0].node_state, 'PREPARING');
  const submitted = await db.pool.query(
    `SELECT count(DISTINCT request_id)::int AS n FROM transitions WHERE request_id = ANY($1::uuid[]) AND to_state = 'SUBMITTING'`,
    [[a, b]],
  );
  assert.equal(submitted.rows[0].n, 1, 'only one movement ever recorded SUBMITTING');
  const counted = await db.pool.query(`SELECT movement_id, amount::text FROM policy_velocity_dispatches WHERE movement_id = ANY($1::uuid[])`, [[a, b]]);
  assert.equal(counted.rows.length, 1);
  const audit = await db.pool.query(`SELECT details FROM audit_outbox WHERE action = 'policy.dispatch_refused' AND entity_id = ANY($1::text[])`, [[a, b]]);
  assert.equal(audit.rows.length, 1);
  assert.equal(audit.rows[0].details.limit_id, 'usdt-hourly');
  assert.equal(audit.rows[0].details.used, '600');
});

test('a rule set that no longer allows the movement, or wants more approvers, stops it at dispatch', async () => {
  await liveRules({ rules: [allowAll] });
  const blocked = await approvedMovement({ asset: 'DAI', amount: '5' });
  const raised = await approvedMovement({ asset: 'EURC', amount: '5' });
  const fine = await approvedMovement({ asset: 'USDC', amount: '5' });
  await liveRules({
    rules: [
      { id: 'no-dai', match: { assets: ['DAI'] }, action: { type: 'block', reason: 'DAI is off the list' } },
      { id: 'eurc-two', match: { assets: ['EURC'] }, action: { type: 'require_approvals', approvals: 2 } },
      allowAll,
    ],
  });
  for (let i = 0; i < 3; i++) assert.equal(await dispatchOne(deps), true);
  assert.deepEqual(await nodeOf(blocked), { node_state: 'FAILED', error_code: 'POLICY_BLOCKED' });
  assert.deepEqual(await nodeOf(raised), { node_state: 'FAILED', error_code: 'POLICY_QUORUM_RAISED' });
  assert.notEqual((await nodeOf(fine)).node_state, 'FAILED');
});

test('a rule matches one source and not another: the account a node moves from decides', async () => {
  await liveRules({
    rules: [
      { id: 'hot-only', match: { sources: ['hot'] }, action: { type: 'allow' } },
      { id: 'sim-no-source', match: { templates: ['policy.dispatch'] }, action: { type: 'allow' } },
      { id: 'others', action: { type: 'block', reason: 'only the hot account may send' } },
    ],
  });
  const hot = await call('POST', '/v3/movements', 'requester', { template_key: 'policy.from-hot', intent: { asset: 'USDC', amount: '5' } });
  assert.equal(hot.status, 201, hot.text);
  assert.equal(hot.body.movement.policy.rule_id, 'hot-only');
  assert.deepEqual(hot.body.movement.policy.sources, ['hot'], '/v3 shows the sources the rules read');
  const { rows } = await db.pool.query(`SELECT policy_sources FROM movement_requests WHERE id = $1`, [hot.body.movement.id]);
  assert.deepEqual(rows[0].policy_sources, ['hot'], 'the movement records its sources');
  const cold = await call('POST', '/v3/movements', 'requester', { template_key: 'policy.from-cold', intent: { asset: 'USDC', amount: '5' } });
  assert.equal(cold.status, 422, cold.text);
  assert.equal(cold.body.error.code, 'POLICY_BLOCKED');
  assert.equal(cold.body.error.details.rule_id, 'others');
  // An intent cannot name a source of its own: the plan's is what counts.
  const claimed = await call('POST', '/v3/movements', 'requester', { template_key: 'policy.from-cold', intent: { asset: 'USDC', amount: '5', source: 'hot' } });
  assert.equal(claimed.status, 422, claimed.text);
});

test('two movements of one requester racing under a per-requester velocity limit: exactly one is submitted; another requester has a sum of its own', async () => {
  await liveRules({ rules: [allowAll] });
  const a = await approvedMovement({ asset: 'EURT', amount: '600' });
  const b = await approvedMovement({ asset: 'EURT', amount: '600' });
  const other = await approvedMovement({ asset: 'EURT', amount: '600' }, 'requester2');
  await liveRules({ rules: [allowAll], limits: [{ id: 'eurt-per-requester', asset: 'EURT', window_seconds: 3600, max_amount: '1000', per_requester: true }] });
  const { rows } = await db.pool.query(`SELECT created_by FROM movement_requests WHERE id = $1`, [a]);
  const key = `eurt-per-requester:EURT:*:requester=${rows[0].created_by}`;

  const holder = await db.pool.connect();
  try {
    await holder.query('BEGIN');
    await lockVelocitySum(holder, key);
    const all = Promise.all([dispatchOne(deps), dispatchOne(deps), dispatchOne(deps)]);
    // The first requester's two wait on its sum's lock, inside their SUBMITTING transactions; the other requester's does not.
    await waitFor('both of one requester\'s dispatches to wait on its velocity lock', async () => {
      const { rows } = await holder.query(`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`);
      return rows[0].n === 2 ? true : null;
    });
    await waitFor('the other requester\'s movement to record SUBMITTING meanwhile', async () => {
      const { rows } = await db.pool.query(`SELECT 1 FROM transitions WHERE request_id = $1 AND to_state = 'SUBMITTING'`, [other]);
      return rows.length > 0 ? true : null;
    });
    await holder.query('COMMIT');
    assert.deepEqual(await all, [true, true, true]);
  } finally {
    holder.release();
  }
  const nodes = [await nodeOf(a), await nodeOf(b)];
  const failed = nodes.filter((n) => n.node_state === 'FAILED');
  assert.equal(failed.length, 1, JSON.stringify(nodes));
  assert.equal(failed[0].error_code, 'VELOCITY_LIMIT_EXCEEDED');
  assert.notEqual((await nodeOf(other)).node_state, 'FAILED', 'the other requester counts in a sum of its own');
  const submitted = await db.pool.query(
    `SELECT count(DISTINCT request_id)::int AS n FROM transitions WHERE request_id = ANY($1::uuid[]) AND to_state = 'SUBMITTING'`,
    [[a, b, other]],
  );
  assert.equal(submitted.rows[0].n, 2, 'one of the first requester\'s, and the other requester\'s');
  const audit = await db.pool.query(`SELECT details FROM audit_outbox WHERE action = 'policy.dispatch_refused' AND entity_id = ANY($1::text[])`, [[a, b]]);
  assert.equal(audit.rows.length, 1);
  assert.equal(audit.rows[0].details.requester, rows[0].created_by);
  assert.equal(audit.rows[0].details.used, '600');
});

test('a per-source velocity limit at approval: the second movement from one source is refused, another source has a sum of its own', async () => {
  await liveRules({ rules: [allowAll], limits: [{ id: 'gbpt-per-source', asset: 'GBPT', window_seconds: 3600, max_amount: '1000', per_source: true }] });
  const create = async (template: string) => {
    const c = await call('POST', '/v3/movements', 'requester', { template_key: template, intent: { asset: 'GBPT', amount: '600' } });
    assert.equal(c.status, 201, c.text);
    return c.body.movement;
  };
  const approve = (m: { id: string; compiled_plan_hash: string }) => call('POST', `/v3/movements/${m.id}/approve`, 'approver', { compiled_plan_hash: m.compiled_plan_hash });
  const first = await create('policy.from-hot');
  const second = await create('policy.from-hot');
  const cold = await create('policy.from-cold');
  assert.equal((await approve(first)).status, 200);
  const refused = await approve(second);
  assert.equal(refused.status, 422, refused.text);
  assert.equal(refused.body.error.code, 'VELOCITY_LIMIT_EXCEEDED');
  assert.equal(refused.body.error.details.source, 'hot');
  assert.equal(refused.body.error.details.used, '600');
  assert.equal((await approve(cold)).status, 200, 'the cold account counts in a sum of its own');
});
