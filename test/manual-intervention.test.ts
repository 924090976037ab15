/**
 * Manual intervention end to end: a simulated executor scripted to answer manual_intervention_required
 * puts the movement in MANUAL_INTERVENTION with a request_attention callback; operators settle the
 * node through the API and the CLI, each resolution proposed by one principal and confirmed by
 * another, applied through the machines and audited. Real Ferry (HTTP on loopback, workers), real
 * Postgres, the CLI as a separate process.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { reconcileWithProviders } from '../src/sweeps/provider-reconciliation.ts';
import { callbacksForMovement } from '../src/persistence/callbacks.ts';
import { transitionsOfEntity } from '../src/persistence/movements.ts';
import { FAST_WORKERS } from './helpers/app.ts';
import { runCliProcess } from './helpers/cli.ts';
import { ferryForFile } from './helpers/ferry.ts';
import { callerFor, expectStatus } from './helpers/http.ts';
import { makeTemplateLive } from './helpers/templates.ts';
import { createTokens } from './helpers/tokens.ts';
import { waitFor } from './helpers/wait.ts';

const { db, ferry, runtime } = await ferryForFile({ ...FAST_WORKERS, FERRY_NODE_RECOVERY_INTERVAL_SECONDS: '0.2' }, { runtime: 'workers' });
const tokens = await createTokens(db.pool, {
  operator: { name: 'ops-alice', role: 'operator' },
  operator2: { name: 'ops-bob', role: 'operator' },
  requester: { name: 'req', role: 'requester' },
  approver: { name: 'appr', role: 'approver' },
  viewer: { name: 'view', role: 'viewer' },
});
type Who = keyof typeof tokens;
const call = callerFor(ferry.url, tokens);
const cli = (args: string[], who: Who) => runCliProcess(args, { FERRY_URL: ferry.url, FERRY_TOKEN: tokens[who].token });

const NEEDS_PERSON = { next_state: 'UNKNOWN', error_code: 'SIM_NEEDS_PERSON', error_detail: 'the provider lost track', manual_intervention_required: true };

async function template(key: string, submit: unknown[]) {
  const tpl = {
    template_key: key,
    nodes: [
      { node_key: 'pay', node_kind: 'action', action_type: 'sim_action', executor_binding: 'exec.sim.action', config: { sim: { submit } } },
      { node_key: 'after', node_kind: 'action', action_type: 'sim_action', executor_binding: 'exec.sim.action' },
    ],
    edges: [{ from: 'pay', to: 'after' }],
  };
  await makeTemplateLive(ferry.url, db.pool, tpl, { proposer: tokens.operator.token, approver: tokens.approver.token });
}

async function stuckMovement(key: string) {
  const created = await call('POST', '/v3/movements', 'requester', { template_key: key, intent: { amount: '5' }, callback_url: 'http://127.0.0.1:9/callbacks' });
  expectStatus(created, 201);
  const id = created.body.movement.id as string;
  expectStatus(await call('POST', `/v3/movements/${id}/approve`, 'approver', { compiled_plan_hash: created.body.movement.compiled_plan_hash }), 200);
  return { id, detail: await waitForState(id, ['MANUAL_INTERVENTION']) };
}

async function waitForState(id: string, states: string[]) {
  return waitFor(`movement ${id} in ${states.join('/')}`, async () => {
    const r = await call('GET', `/v3/movements/${id}`, 'viewer');
    return states.includes(r.body?.movement?.state) ? r.body : null;
  });
}

const nodeOf = (detail: any, key: string) => detail.nodes.find((n: any) => n.node_key === key);

test('manual_intervention_required stops the movement for a person, with a request_attention callback', async () => {
  await template('needs-person', [NEEDS_PERSON]);
  const { id, detail } = await stuckMovement('needs-person');
  const pay = nodeOf(detail, 'pay');
  assert.equal(pay.state, 'UNKNOWN');
  assert.equal(pay.error_code, 'SIM_NEEDS_PERSON');
  assert.equal(pay.manual_intervention_required, true);
  const events = (await callbacksForMovement(db.pool, id)).map((c: any) => c.event_type);
  assert.ok(events.includes('request_attention'), `callbacks: ${events.join(', ')}`);
  assert.ok(events.includes('request_manual_intervention'));
  // Recovery leaves it alone: it is a person's decision now.
  const listed = await call('GET', '/v3/movements?state=MANUAL_INTERVENTION', 'viewer');
  expectStatus(listed, 200);
  assert.ok(listed.body.movements.some((m: any) => m.id === id), 'listed among the movements waiting for a person');
});

test('complete with a provider reference: proposed by one operator, refused to the same one, applied by another', async () => {
  await template('resolve-complete', [NEEDS_PERSON]);
  const { id } = await stuckMovement('resolve-complete');

  expectStatus(await call('POST', `/v3/movements/${id}/resolutions`, 'operator', { node_key: 'pay', resolution: 'complete', reason: 'seen on statement' }), 400, 'VALIDATION_FAILED');
  expectStatus(await call('POST', `/v3/movements/${id}/resolutions`, 'viewer', { node_key: 'pay', resolution: 'fail', reason: 'x' }), 403, 'FORBIDDEN');
  const proposed = await call('POST', `/v3/movements/${id}/resolutions`, 'operator', {
    node_key: 'pay',
    resolution: 'complete',
    provider_ref: 'stmt-2026-001',
    reason: 'the bank statement shows the transfer',
    evidence: { statement_line: 42 },
  });
  expectStatus(proposed, 201);
  assert.equal(proposed.body.status, 'proposed');
  assert.equal(proposed.body.proposed_by, `principal:${tokens.operator.principal_id}`);
  const second = await call('POST', `/v3/movements/${id}/resolutions`, 'operator2', { node_key: 'pay', resolution: 'fail', reason: 'other view' });
  expectStatus(second, 409, 'INVALID_TRANSITION');
  assert.equal(second.body.error.details.reason, 'RESOLUTION_PENDING');

  const rid = proposed.body.id;
  const self = await call('POST', `/v3/movements/${id}/resolutions/${rid}/confirm`, 'operator');
  expectStatus(self, 403, 'FOUR_EYES_VIOLATION');
  assert.equal((await call('GET', `/v3/movements/${id}`, 'viewer')).body.movement.state, 'MANUAL_INTERVENTION', 'nothing applied by the proposer');

  const confirmed = await call('POST', `/v3/movements/${id}/resolutions/${rid}/confirm`, 'operator2');
  expectStatus(confirmed, 200);
  assert.equal(confirmed.body.resolution.status, 'applied');
  assert.equal(confirmed.body.resolution.confirmed_by, `principal:${tokens.operator2.principal_id}`);
  expectStatus(await call('POST', `/v3/movements/${id}/resolutions/${rid}/confirm`, 'operator2'), 409, 'INVALID_TRANSITION');

  const done = await waitForState(id, ['COMPLETED']);
  const pay = nodeOf(done, 'pay');
  assert.equal(pay.state, 'COMPLETED');
  const log = await transitionsOfEntity(db.pool, pay.id);
  const resolved = log.find((t) => t.event_type === 'RESOLVED_COMPLETED')!;
  assert.equal(resolved.from_state, 'UNKNOWN');
  assert.equal(resolved.actor, `principal:${tokens.operator2.principal_id}`);
  assert.equal((resolved.event_payload as { providerRef: string }).providerRef, 'stmt-2026-001');
  const { rows } = await db.pool.query(`SELECT action, actor FROM (SELECT id, action, actor, details FROM audit_outbox UNION ALL SELECT id, action, actor, details FROM audit_events) a
      WHERE action LIKE 'movement.resolution.%' AND details->>'request_id' = $1 ORDER BY action DESC`, [id]);
  assert.deepEqual(rows, [
    { action: 'movement.resolution.propose', actor: `principal:${tokens.operator.principal_id}` },
    { action: 'movement.resolution.confirm', actor: `principal:${tokens.operator2.principal_id}` },
  ]);
});

test('retry and fail through the CLI: a retry runs a new attempt; a fail without a side effect fails the movement', async () => {
  // The first submit needs a person, the second (the retry's new attempt) completes.
  await template('resolve-retry', [NEEDS_PERSON, 'COMPLETED']);
  const retry = await stuckMovement('resolve-retry');
  const proposed = await cli(['resolutions', 'propose', retry.id, '--node', 'pay', '--resolution', 'retry', '--reason', 'provider confirms nothing arrived', '--json'], 'operator');
  assert.equal(proposed.code, 0, proposed.stderr);
  const rid = JSON.parse(proposed.stdout).id;
  const own = await cli(['resolutions', 'confirm', retry.id, rid], 'operator');
  assert.equal(own.code, 1);
  assert.match(own.stderr, /FOUR_EYES_VIOLATION/);
  const confirmed = await cli(['resolutions', 'confirm', retry.id, rid], 'operator2');
  assert.equal(confirmed.code, 0, confirmed.stderr);
  assert.match(confirmed.stdout, /Applied resolution .* \(retry node pay\)/);
  const done = await waitForState(retry.id, ['COMPLETED']);
  assert.equal(nodeOf(done, 'pay').attempt_no, 2, 'the retry ran under a new attempt');
  const listed = await cli(['resolutions', 'list', retry.id], 'viewer');
  assert.equal(listed.code, 0, listed.stderr);
  assert.match(listed.stdout, /retry\s+applied/);

  await template('resolve-fail', [NEEDS_PERSON]);
  const fail = await stuckMovement('resolve-fail');
  const p = await call('POST', `/v3/movements/${fail.id}/resolutions`, 'operator2', { node_key: 'pay', resolution: 'fail', reason: 'provider refunded' });
  expectStatus(p, 201);
  const c = await call('POST', `/v3/movements/${fail.id}/resolutions/${p.body.id}/confirm`, 'operator');
  expectStatus(c, 200);
  assert.equal(c.body.movement.state, 'FAILED');
  const failed = (await call('GET', `/v3/movements/${fail.id}`, 'viewer')).body;
  assert.equal(nodeOf(failed, 'pay').state, 'FAILED');
  assert.equal(nodeOf(failed, 'pay').error_code, 'RESOLVED_FAILED');
  assert.equal(nodeOf(failed, 'after').state, 'BLOCKED');
});

test('the reconciliation drift report is visible through GET /v3/reconciliation and `ferry reconcile`', async () => {
  await template('drift-report', ['COMPLETED']);
  const created = await call('POST', '/v3/movements', 'requester', { template_key: 'drift-report', intent: { amount: '1' } });
  const id = created.body.movement.id;
  await call('POST', `/v3/movements/${id}/approve`, 'approver', { compiled_plan_hash: created.body.movement.compiled_plan_hash });
  const done = await waitForState(id, ['COMPLETED']);
  await db.pool.query(`UPDATE request_nodes SET node_state = 'FAILED', updated_at = now() WHERE id = $1`, [nodeOf(done, 'pay').id]);
  const report = await reconcileWithProviders(runtime!.deps);
  // The earlier test's operator-failed node counts too: the simulated ledger has its submit.
  assert.ok((report.byClass.failed_but_provider_completed ?? 0) >= 1);

  const api = await call('GET', '/v3/reconciliation', 'viewer');
  expectStatus(api, 200);
  assert.equal(api.body.auto_repair, false);
  const mine = api.body.drifts.filter((d: any) => d.movement_id === id);
  assert.equal(mine.length, 1);
  assert.equal(mine[0].drift_class, 'failed_but_provider_completed');
  const out = await cli(['reconcile'], 'viewer');
  assert.equal(out.code, 0, out.stderr);
  assert.match(out.stdout, /Auto-repair: off/);
  assert.match(out.stdout, new RegExp(`failed_but_provider_completed\\s+${id}\\s+pay`));
});
