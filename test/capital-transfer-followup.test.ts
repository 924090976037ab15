/**
 * capital_transfer_followup: movements waiting in a non-terminal state past their template's age
 * (an approval not given, a manual gate nobody operated) are surfaced once per wait: an attention
 * event the notification dispatcher sends to a channel, an audit event, a request_attention
 * callback, and the "waiting too long" list (/v3 and /ui). Ages are reached by backdating rows.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { runNotificationDispatcher } from '../src/sweeps/notification-dispatcher.ts';
import { findSweep } from '../src/sweeps/sweeps.ts';
import { loadConfig } from '../src/config.ts';
import { callbacksForMovement } from '../src/persistence/callbacks.ts';
import { listAttention } from '../src/persistence/notifications.ts';
import { followUpWaitingMovements } from '../src/services/followups.ts';
import { log } from '../src/log.ts';
import { appForFile, FAST_WORKERS } from './helpers/app.ts';
import { loopbackDestinations, LOOPBACK_NETWORKS } from './helpers/destinations.ts';
import { callerFor, expectStatus } from './helpers/http.ts';
import { CallbackReceiver } from './helpers/receiver.ts';
import { makeTemplateLive } from './helpers/templates.ts';
import { createTokens } from './helpers/tokens.ts';
import { backdateNodes } from './helpers/runtime.ts';

const env = {
  FERRY_DATA_DIR: '.ferry/test-followup',
  FERRY_LOG_LEVEL: 'silent',
  ...FAST_WORKERS,
  FERRY_CAPITAL_TRANSFER_FOLLOWUP_AFTER_SECONDS: '3600',
  FERRY_CAPITAL_TRANSFER_FOLLOWUP_AFTER_SECONDS_BY_TEMPLATE: 'followup-gate=600',
};
const { db, app, config } = await appForFile(env, { workers: false });
const tokens = await createTokens(db.pool, { requester: 'requester', approver: 'approver', operator: 'operator', viewer: 'viewer' });
const call = callerFor(app, tokens);

const oneStep = { template_key: 'followup-step', nodes: [{ node_key: 'a', node_kind: 'action', action_type: 'sim_action', executor_binding: 'exec.sim.action' }] };
const gate = {
  template_key: 'followup-gate',
  nodes: [{ node_key: 'check', node_kind: 'manual_gate', action_type: 'manual_review', executor_binding: 'exec.sim.action' }],
};
for (const t of [oneStep, gate]) await makeTemplateLive(app, db.pool, t, { proposer: tokens.operator.token, approver: tokens.approver.token });

async function create(templateKey: string, extra: Record<string, unknown> = {}) {
  const r = await call('POST', '/v3/movements', 'requester', { template_key: templateKey, intent: { amount: '1' }, ...extra });
  expectStatus(r, 201);
  return r.body.movement;
}
const followUp = () => followUpWaitingMovements({ pool: db.pool, config }, { batchSize: 50 });
const backdateMovement = (id: string, column: 'created_at' | 'updated_at', seconds: number) =>
  db.pool.query(`UPDATE movement_requests SET ${column} = ${column} - make_interval(secs => $2) WHERE id = $1`, [id, seconds]);

describe('movements waiting too long', () => {
  test('an approval not given past the age is surfaced once: attention, audit, callback, the list', async () => {
    const rx = await new CallbackReceiver().listen();
    const m = await create('followup-step', { callback_url: rx.url() });
    const young = await create('followup-step');
    assert.equal((await followUp()).surfaced, 0, 'nothing has waited long enough');

    await backdateMovement(m.id, 'created_at', 3601);
    await backdateMovement(young.id, 'created_at', 3500);
    assert.equal((await followUp()).surfaced, 1);
    assert.equal((await followUp()).surfaced, 0, 'surfaced once');

    const events = (await listAttention(db.pool, { kind: 'waiting_too_long' })).filter((e) => e.movement_id === m.id);
    assert.equal(events.length, 1);
    assert.match(events[0].summary, /approval not given/);
    const cbs = (await callbacksForMovement(db.pool, m.id)).map((c) => c.event_type);
    assert.deepEqual(cbs.filter((e) => e === 'request_attention'), ['request_attention']);
    const audit = await db.pool.query(`SELECT count(*)::int AS n FROM audit_outbox WHERE action = 'movement.waiting_too_long' AND entity_id = $1`, [m.id]);
    const promoted = await db.pool.query(`SELECT count(*)::int AS n FROM audit_events WHERE action = 'movement.waiting_too_long' AND entity_id = $1`, [m.id]);
    assert.equal(audit.rows[0].n + promoted.rows[0].n, 1);

    const list = await call('GET', '/v3/attention/waiting-too-long', 'viewer');
    expectStatus(list, 200);
    const ids = list.body.movements.map((w: any) => w.movement_id);
    assert.ok(ids.includes(m.id));
    assert.ok(!ids.includes(young.id));
    const row = list.body.movements.find((w: any) => w.movement_id === m.id);
    assert.equal(row.reason, 'approval_not_given');
    assert.equal(row.age_seconds, 3600);

    // Approved, it no longer waits on approval: off the list.
    expectStatus(await call('POST', `/v3/movements/${m.id}/approve`, 'approver', { compiled_plan_hash: m.compiled_plan_hash }), 200);
    const after = await call('GET', '/v3/attention/waiting-too-long', 'viewer');
    assert.ok(!after.body.movements.some((w: any) => w.movement_id === m.id));
    await rx.close();
  });

  test("a manual gate untouched past its template's own age is surfaced, and notified to an operator channel", async () => {
    const slack = await new CallbackReceiver().listen();
    const notifyConfig = loadConfig({
      FERRY_CALLBACK_ALLOWED_NETWORKS: LOOPBACK_NETWORKS,
      FERRY_NOTIFY_CHANNELS: JSON.stringify([{ name: 'followup-slack', kind: 'slack', url: slack.url('/services/x') }]),
    });
    const notifyDeps = { pool: db.pool, config: notifyConfig, log, destinations: loopbackDestinations() };
    await runNotificationDispatcher(notifyDeps, { batchSize: 50, maxRunMs: 0 });

    const m = await create('followup-gate');
    expectStatus(await call('POST', `/v3/movements/${m.id}/approve`, 'approver', { compiled_plan_hash: m.compiled_plan_hash }), 200);
    // The gate is READY; 601 s untouched is past followup-gate's 600 s (the default is an hour).
    await backdateNodes(db.pool, [m.id], 'updated_at', 601);
    assert.equal((await followUp()).surfaced, 1);
    const list = await call('GET', '/v3/attention/waiting-too-long', 'viewer');
    const row = list.body.movements.find((w: any) => w.movement_id === m.id);
    assert.equal(row?.reason, 'manual_gate_untouched');
    assert.equal(row.node_key, 'check');
    assert.equal(row.age_seconds, 600);

    const r = await runNotificationDispatcher(notifyDeps, { batchSize: 50, maxRunMs: 0 });
    assert.ok(r.delivered >= 1);
    const texts = slack.received.map((x) => JSON.parse(x.body.toString()).text);
    assert.ok(texts.some((t) => t.includes('waiting_too_long') && t.includes(m.id) && t.includes('manual gate check untouched')), texts.join('\n'));
    const events = await call('GET', '/v3/attention?kind=waiting_too_long', 'viewer');
    expectStatus(events, 200);
    const ev = events.body.events.find((e: any) => e.movement_id === m.id);
    assert.equal(ev.deliveries[0].channel, 'followup-slack');
    assert.equal(ev.deliveries[0].status, 'delivered');
    await slack.close();
  });

  test('the transition log is a source: a movement entering MANUAL_INTERVENTION is recorded once, after it has settled', async () => {
    const deps = { pool: db.pool, config: loadConfig({}), log };
    await runNotificationDispatcher(deps, { batchSize: 50, maxRunMs: 0 }); // the cursor starts at the newest transition
    const m = await create('followup-step');
    // A log row as the movement machine writes it (the log only takes inserts), 11 s old: past the settling time.
    const logRow = (at: string) =>
      db.pool.query(
        `INSERT INTO transitions (machine_id, machine_version, entity_type, entity_id, request_id, seq, from_state, to_state, event_type, actor, at)
         VALUES ('ferry.movement', '1', 'request', $1, $1, (SELECT coalesce(max(seq), 0) + 1 FROM transitions WHERE entity_id = $1), 'EXECUTING', 'MANUAL_INTERVENTION', 'NODES_SETTLED', 'test', ${at})`,
        [m.id],
      );
    await logRow(`now() - interval '11 seconds'`);
    const r = await runNotificationDispatcher(deps, { batchSize: 50, maxRunMs: 0 });
    assert.equal(r.recorded, 1);
    assert.equal((await runNotificationDispatcher(deps, { batchSize: 50, maxRunMs: 0 })).recorded, 0, 'once');
    const events = (await listAttention(db.pool, { kind: 'manual_intervention' })).filter((e) => e.movement_id === m.id);
    assert.equal(events.length, 1);
    assert.equal(events[0].dedup_key, `manual_intervention:${m.id}`);
    // A row younger than the settling time waits for a later run.
    await logRow('now()');
    assert.equal((await runNotificationDispatcher(deps, { batchSize: 50, maxRunMs: 0 })).recorded, 0);
  });

  test('the sweep is registered, off by default', () => {
    const s = findSweep('capital_transfer_followup');
    assert.equal(s.settings(loadConfig({})).enabled, false);
    assert.equal(s.settings(loadConfig({ FERRY_CAPITAL_TRANSFER_FOLLOWUP_ENABLED: 'true' })).intervalSeconds, 60);
    assert.equal(findSweep('notification_dispatcher').settings(loadConfig({})).enabled, false);
  });
});
