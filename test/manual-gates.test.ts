/**
 * Manual gates end to end: a movement whose plan reaches a manual_gate waits in
 * WAITING_MANUAL_ACTION; a person other than its requester (and, when the gate says so, other than
 * its approvers) confirms the gate with a note or skips it with a reason, through the API and the
 * CLI; the plan goes on, the operation is audited and a callback is queued. Real Ferry (HTTP on
 * loopback, workers), real Postgres, the CLI as a separate process.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { callbacksForMovement } from '../src/persistence/callbacks.ts';
import { transitionsOfEntity } from '../src/persistence/movements.ts';
import { FAST_WORKERS } from './helpers/app.ts';
import { runCliProcess } from './helpers/cli.ts';
import { ferryForFile } from './helpers/ferry.ts';
import { callerFor, expectStatus } from './helpers/http.ts';
import { makeTemplateLive } from './helpers/templates.ts';
import { createTokens } from './helpers/tokens.ts';
import { waitFor } from './helpers/wait.ts';

const { db, ferry } = await ferryForFile(FAST_WORKERS, { runtime: 'workers' });
const tokens = await createTokens(db.pool, {
  operator: { name: 'ops-alice', role: 'operator' },
  requester: { name: 'req', role: 'requester' },
  // The requester's own operator token: still the requester.
  requesterOps: { name: 'req.ops', role: 'operator', principal: 'req' },
  approver: { name: 'appr', role: 'approver' },
  // The approver's operator token: an approver, for a gate that excludes approvers.
  approverOps: { name: 'appr.ops', role: 'operator', principal: 'appr' },
  viewer: { name: 'view', role: 'viewer' },
});
type Who = keyof typeof tokens;
const call = callerFor(ferry.url, tokens);
const cli = (args: string[], who: Who) => runCliProcess(args, { FERRY_URL: ferry.url, FERRY_TOKEN: tokens[who].token });
const principal = (who: Who) => `principal:${tokens[who].principal_id}`;

async function template(key: string, gateConfig: Record<string, unknown>) {
  const tpl = {
    template_key: key,
    nodes: [
      { node_key: 'pay', node_kind: 'action', action_type: 'sim_action', executor_binding: 'exec.sim.action' },
      { node_key: 'check', node_kind: 'manual_gate', action_type: 'manual_review', executor_binding: 'exec.sim.action', config: gateConfig },
      { node_key: 'after', node_kind: 'action', action_type: 'sim_action', executor_binding: 'exec.sim.action' },
    ],
    edges: [
      { from: 'pay', to: 'check' },
      { from: 'check', to: 'after' },
    ],
  };
  await makeTemplateLive(ferry.url, db.pool, tpl, { proposer: tokens.operator.token, approver: tokens.approver.token });
}

async function waitForState(id: string, states: string[]) {
  return waitFor(`movement ${id} in ${states.join('/')}`, async () => {
    const r = await call('GET', `/v3/movements/${id}`, 'viewer');
    return states.includes(r.body?.movement?.state) ? r.body : null;
  });
}

/** A movement of `key`, created by the requester and approved, waiting at its gate. */
async function atTheGate(key: string) {
  const created = await call('POST', '/v3/movements', 'requester', { template_key: key, intent: { amount: '5' }, callback_url: 'http://127.0.0.1:9/callbacks' });
  expectStatus(created, 201);
  const id = created.body.movement.id as string;
  expectStatus(await call('POST', `/v3/movements/${id}/approve`, 'approver', { compiled_plan_hash: created.body.movement.compiled_plan_hash }), 200);
  const detail = await waitForState(id, ['WAITING_MANUAL_ACTION']);
  assert.equal(nodeOf(detail, 'check').state, 'READY');
  assert.equal(nodeOf(detail, 'after').state, 'BLOCKED');
  return id;
}

const nodeOf = (detail: any, key: string) => detail.nodes.find((n: any) => n.node_key === key);

async function audits(id: string, action: string) {
  const { rows } = await db.pool.query(
    `SELECT actor, details FROM (SELECT id, action, actor, details FROM audit_outbox UNION ALL SELECT id, action, actor, details FROM audit_events) a
      WHERE action = $1 AND details->>'request_id' = $2 ORDER BY id`,
    [action, id],
  );
  return rows as { actor: string; details: Record<string, unknown> }[];
}

test('confirm through the API: never by the requester, nor by an approver when the gate excludes them; with a note, audited, a callback, and the plan goes on', async () => {
  await template('gate-confirm', { exclude_approvers: true });
  const id = await atTheGate('gate-confirm');
  const confirm = (who: Who, body: unknown, node = 'check') => call('POST', `/v3/movements/${id}/gates/${node}/confirm`, who, body);

  expectStatus(await confirm('viewer', { note: 'x' }), 403, 'FORBIDDEN');
  const byRequester = await confirm('requesterOps', { note: 'looks fine to me' });
  expectStatus(byRequester, 403, 'FOUR_EYES_VIOLATION');
  assert.equal(byRequester.body.error.details.reason, 'GATE_BY_REQUESTER');
  const byApprover = await confirm('approverOps', { note: 'I approved it, I confirm it' });
  expectStatus(byApprover, 403, 'FOUR_EYES_VIOLATION');
  assert.equal(byApprover.body.error.details.reason, 'GATE_BY_APPROVER');
  expectStatus(await confirm('operator', {}), 400, 'VALIDATION_FAILED');
  const notAGate = await confirm('operator', { note: 'x' }, 'pay');
  expectStatus(notAGate, 409, 'INVALID_TRANSITION');
  assert.equal(notAGate.body.error.details.reason, 'NOT_A_MANUAL_GATE');
  assert.equal((await call('GET', `/v3/movements/${id}`, 'viewer')).body.movement.state, 'WAITING_MANUAL_ACTION', 'nothing changed by the refusals');

  const confirmed = await confirm('operator', { note: 'beneficiary confirmed by phone' });
  expectStatus(confirmed, 200);
  assert.equal(nodeOf(confirmed.body, 'check').state, 'COMPLETED');
  expectStatus(await confirm('operator', { note: 'again' }), 409, 'INVALID_TRANSITION');

  const done = await waitForState(id, ['COMPLETED']);
  assert.equal(nodeOf(done, 'after').state, 'COMPLETED', 'the plan went on past the gate');
  const gate = nodeOf(done, 'check');
  const t = (await transitionsOfEntity(db.pool, gate.id)).find((x) => x.event_type === 'MANUAL_CONFIRMED')!;
  assert.equal(t.actor, principal('operator'));
  assert.equal((t.event_payload as { note: string }).note, 'beneficiary confirmed by phone');
  const [audit] = await audits(id, 'movement.gate.confirm');
  assert.equal(audit.actor, principal('operator'));
  assert.equal(audit.details.node_key, 'check');
  assert.equal(audit.details.note, 'beneficiary confirmed by phone');
  const callbacks = await callbacksForMovement(db.pool, id);
  const gateCallback = callbacks.find((c: any) => c.event_type === 'manual_gate_confirmed') as any;
  assert.ok(gateCallback, `callbacks: ${callbacks.map((c: any) => c.event_type).join(', ')}`);
  assert.equal(gateCallback.node_key, 'check');
  assert.ok(callbacks.some((c: any) => c.event_type === 'request_attention'), 'reaching the gate asked for attention');
});

test('skip and confirm through the CLI: the requester is refused, an approver may when the gate allows it, and a skip lets the plan go on', async () => {
  await template('gate-skip', {});
  const id = await atTheGate('gate-skip');
  const own = await cli(['gates', 'confirm', id, '--node', 'check', '--note', 'mine'], 'requesterOps');
  assert.equal(own.code, 1);
  assert.match(own.stderr, /FOUR_EYES_VIOLATION/);
  const missing = await cli(['gates', 'skip', id, '--node', 'check'], 'approverOps');
  assert.notEqual(missing.code, 0);
  assert.match(missing.stderr, /--reason/);

  const skipped = await cli(['gates', 'skip', id, '--node', 'check', '--reason', 'the counterparty waived the review'], 'approverOps');
  assert.equal(skipped.code, 0, skipped.stderr);
  assert.match(skipped.stdout, /Skipped gate check \(SKIPPED\)/);
  const done = await waitForState(id, ['COMPLETED']);
  assert.equal(nodeOf(done, 'check').state, 'SKIPPED');
  assert.equal(nodeOf(done, 'after').state, 'COMPLETED');
  const [audit] = await audits(id, 'movement.gate.skip');
  assert.equal(audit.actor, principal('approverOps'));
  assert.equal(audit.details.reason, 'the counterparty waived the review');
  const callbacks = await callbacksForMovement(db.pool, id);
  assert.ok(callbacks.some((c: any) => c.event_type === 'manual_gate_skipped' && c.node_key === 'check'));

  // A second movement, confirmed through the CLI with --json.
  const second = await atTheGate('gate-skip');
  const confirmed = await cli(['gates', 'confirm', second, '--node', 'check', '--note', 'documents checked', '--json'], 'operator');
  assert.equal(confirmed.code, 0, confirmed.stderr);
  assert.equal(nodeOf(JSON.parse(confirmed.stdout), 'check').state, 'COMPLETED');
  await waitForState(second, ['COMPLETED']);
});
