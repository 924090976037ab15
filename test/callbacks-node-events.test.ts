/**
 * Node callbacks: a destination registered with node_events gets a callback on every node state
 * change (node_<state>), in the order the changes were made and interleaved with the movement's own
 * callbacks in that order; a destination without it gets the movement callbacks only. Each node
 * callback row is written by the transition it reports.
 */
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { runCli } from '../src/cli/run.ts';
import { callbacksForMovement } from '../src/persistence/callbacks.ts';
import { getMovement, transitionsOfMovement } from '../src/persistence/movements.ts';
import { appForFile, FAST_WORKERS } from './helpers/app.ts';
import { callerFor, expectStatus, serveApp } from './helpers/http.ts';
import { CallbackReceiver } from './helpers/receiver.ts';
import { makeTemplateLive } from './helpers/templates.ts';
import { createTokens } from './helpers/tokens.ts';
import { waitFor } from './helpers/wait.ts';

const env = { FERRY_DATA_DIR: '.ferry/test-node-events', FERRY_CALLBACK_SECRET: 'node-events-test-instance-secret-0123', FERRY_LOG_LEVEL: 'silent', ...FAST_WORKERS };
const { db, app } = await appForFile(env, { workers: true });
const rxNodes = await new CallbackReceiver().listen();
const rxPlain = await new CallbackReceiver().listen();
after(async () => {
  await rxNodes.close();
  await rxPlain.close();
});

const tokens = await createTokens(db.pool, { requester: 'requester', approver: 'approver', operator: 'operator' });
const call = callerFor(app, tokens);

const template = {
  template_key: 'node-events-two-steps',
  nodes: [
    { node_key: 'a', node_kind: 'action', action_type: 'sim_action', executor_binding: 'exec.sim.action' },
    { node_key: 'b', node_kind: 'action', action_type: 'sim_action', executor_binding: 'exec.sim.action' },
  ],
  edges: [{ from: 'a', to: 'b' }],
};
await makeTemplateLive(app, db.pool, template, { proposer: tokens.operator.token, approver: tokens.approver.token });

async function runToCompletion(destination: string): Promise<string> {
  const r = await call('POST', '/v3/movements', 'requester', { template_key: template.template_key, intent: { amount: '1' }, callback_destination: destination });
  expectStatus(r, 201);
  const m = r.body.movement;
  expectStatus(await call('POST', `/v3/movements/${m.id}/approve`, 'approver', { compiled_plan_hash: m.compiled_plan_hash }), 200);
  await waitFor('the movement to complete and every callback to be sent', async () => {
    const cbs = await callbacksForMovement(db.pool, m.id);
    return (await getMovement(db.pool, m.id))?.request_state === 'COMPLETED' && cbs.length > 0 && cbs.every((c) => c.status === 'sent');
  });
  return m.id;
}

const bodiesFor = (rx: CallbackReceiver, id: string) => rx.received.map((r) => JSON.parse(r.body.toString())).filter((b) => b.request_id === id);

describe('node callbacks', () => {
  test('a destination that opted in gets every node state change in order; one that did not gets none', async () => {
    const opted = await call('POST', '/v3/callback-destinations', 'operator', { name: 'with-nodes', url: rxNodes.url(), node_events: true });
    expectStatus(opted, 201);
    assert.equal(opted.body.destination.node_events, true);
    const plain = await call('POST', '/v3/callback-destinations', 'operator', { name: 'without-nodes', url: rxPlain.url() });
    expectStatus(plain, 201);
    assert.equal(plain.body.destination.node_events, false);

    const withNodes = await runToCompletion('with-nodes');
    const withoutNodes = await runToCompletion('without-nodes');

    // The node changes the log recorded, in order, are exactly the node callbacks, in the same order.
    const nodeChanges = (await transitionsOfMovement(db.pool, withNodes))
      // Creation (from no state to BLOCKED) is reported by request_created's own callback, not per node.
      .filter((t) => t.entity_type === 'node' && t.from_state && t.from_state !== t.to_state)
      .map((t) => `${t.node_key}:${t.from_state}->${t.to_state}`);
    assert.ok(nodeChanges.length >= 8, `both nodes went through their states: ${nodeChanges.join(' ')}`);
    const got = bodiesFor(rxNodes, withNodes);
    const nodeBodies = got.filter((b) => b.event_type.startsWith('node_'));
    assert.deepEqual(nodeBodies.map((b) => `${b.node.node_key}:${b.node.from_state}->${b.node.node_state}`), nodeChanges);
    for (const b of nodeBodies) {
      assert.equal(b.event_type, `node_${b.node.node_state.toLowerCase()}`);
      assert.equal(b.node_key, b.node.node_key);
    }
    // Delivered in creation order (the outbox order), node and movement callbacks interleaved.
    const rows = await callbacksForMovement(db.pool, withNodes);
    assert.deepEqual(got.map((b) => b.callback_id), rows.map((r) => r.id));
    const events = got.map((b) => b.event_type);
    assert.ok(events.indexOf('node_completed') < events.indexOf('frontier_advanced'), 'a completed node is reported before the frontier it moves');
    assert.ok(events.lastIndexOf('node_completed') < events.indexOf('request_completed'), 'the last node before the movement it completes');
    // Each node callback's time is its transition's.
    const times = new Map((await transitionsOfMovement(db.pool, withNodes)).map((t) => [`${t.node_key}:${t.to_state}:${t.at.toISOString()}`, true]));
    for (const b of nodeBodies) assert.ok(times.has(`${b.node.node_key}:${b.node.node_state}:${b.occurred_at}`), `occurred_at of ${b.event_type}`);

    const plainBodies = bodiesFor(rxPlain, withoutNodes);
    assert.ok(plainBodies.length >= 2, 'the movement callbacks still arrive');
    assert.deepEqual(plainBodies.filter((b) => b.event_type.startsWith('node_')), [], 'no node callback without the opt-in');
    assert.equal(rxPlain.received.filter((r) => JSON.parse(r.body.toString()).request_id === withNodes).length, 0);
  });

  test('node_events must be a boolean (422 with a code); the CLI sets it with --node-events and shows it', async () => {
    const bad = await call('POST', '/v3/callback-destinations', 'operator', { name: 'bad-nodes', url: rxPlain.url(), node_events: 'yes' });
    assert.ok(bad.status >= 400 && bad.status < 500, `status ${bad.status}`);
    assert.equal(typeof bad.body.error?.code, 'string');
    const { url, stop } = await serveApp(app);
    try {
      const ferry = async (args: string[]) => {
        const out: string[] = [];
        const err: string[] = [];
        const code = await runCli(args, { env: { FERRY_URL: url, FERRY_TOKEN: tokens.operator.token }, io: { out: (t) => void out.push(t), err: (t) => void err.push(t) } });
        return { code, out: out.join('\n'), err: err.join('\n') };
      };
      const made = await ferry(['callbacks', 'destinations', 'create', '--name', 'cli-nodes', '--callback-url', rxNodes.url('/cli'), '--node-events']);
      assert.equal(made.code, 0, made.err);
      const shown = await ferry(['callbacks', 'destinations', 'show', 'cli-nodes']);
      assert.match(shown.out, /node events\s+yes/);
      const other = await ferry(['callbacks', 'destinations', 'create', '--name', 'cli-no-nodes', '--callback-url', rxNodes.url('/cli')]);
      assert.equal(other.code, 0, other.err);
      assert.match((await ferry(['callbacks', 'destinations', 'show', 'cli-no-nodes'])).out, /node events\s+no/);
    } finally {
      await stop();
    }
  });
});
