import assert from 'node:assert/strict';
import { test } from 'node:test';
import { nodeMachine } from '../src/machines/node-machine.ts';
import { movementMachine } from '../src/machines/movement-machine.ts';
import { callbackMachine } from '../src/machines/callback-delivery-machine.ts';
import { credentialProposalMachine } from '../src/machines/credential-proposal-machine.ts';
import { policyProposalMachine } from '../src/machines/policy-proposal-machine.ts';
import { proposalMachine as templateProposalMachine } from '../src/machines/template-proposal-machine.ts';
import { definedTransitions, stateKeys, transitionKey, type DefinedTransition } from '../src/machines/introspect.ts';
import { createApp } from '../src/http/app.ts';
import type { MachineView } from '../src/http/inspect.ts';
import { loadConfig } from '../src/config.ts';
import { createToken } from '../src/persistence/tokens.ts';
import { testDatabase } from './helpers/db.ts';
import { seedMovement, threeNodeTemplate } from './helpers/fixtures.ts';
import { approvedMovement, drain, runtimeDeps } from './helpers/runtime.ts';

const db = await testDatabase();
const app = createApp({ pool: db.pool, config: loadConfig({ FERRY_DATA_DIR: '.ferry/test-inspect' }) });
const viewer = (await createToken(db.pool, { name: 'inspect-viewer', role: 'viewer' })).token;

async function get(path: string, token: string | null = viewer) {
  const res = await app.request(path, { headers: token ? { Authorization: `Bearer ${token}` } : {} });
  return { status: res.status, body: (await res.json()) as any };
}

test('every inspection route needs a token', async () => {
  for (const path of ['/inspect/machines', '/inspect/movements', '/inspect/movements/00000000-0000-0000-0000-000000000000']) {
    const r = await get(path, null);
    assert.equal(r.status, 401, path);
    assert.equal(r.body.error.code, 'UNAUTHENTICATED');
  }
  assert.equal((await get('/inspect/machines', 'fy_not-a-token')).status, 401);
});

test('/inspect/machines round-trips: the transitions rebuilt from its graph are the machines\' own', async () => {
  const { status, body } = await get('/inspect/machines');
  assert.equal(status, 200);
  const views = body.machines as MachineView[];
  const all = [movementMachine, nodeMachine, callbackMachine, templateProposalMachine, credentialProposalMachine, policyProposalMachine];
  assert.deepEqual(views.map((m) => m.id), all.map((m) => m.id), 'every machine Ferry persists through');
  assert.deepEqual(views.slice(0, 2).map((m) => m.id), ['ferry.request', 'ferry.node']);
  for (const machine of all) {
    const view = views.find((m) => m.id === machine.id)!;
    assert.equal(view.version, machine.version);
    assert.equal(view.initial, machine.root.initial!.target![0].key);

    const rebuilt: DefinedTransition[] = view.graph.edges.map((e) => ({ from: e.source, event: e.event, to: e.target, guard: e.guard, actions: e.actions }));
    const sort = (ts: DefinedTransition[]) => [...ts].sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));
    assert.deepEqual(sort(rebuilt), sort(definedTransitions(machine)), `${machine.id} transitions`);
    // And the plain (from, event, to) set, which is what a diagram draws.
    assert.deepEqual(new Set(rebuilt.map(transitionKey)), new Set(definedTransitions(machine).map(transitionKey)));

    assert.deepEqual(
      view.states.map((s) => ({ key: s.key, final: s.final })),
      stateKeys(machine),
      `${machine.id} states`,
    );
    assert.deepEqual(view.states.filter((s) => s.initial).map((s) => s.key), [view.initial]);
    assert.deepEqual(new Set(view.events), new Set(definedTransitions(machine).map((t) => t.event)));
    assert.deepEqual(view.graph.nodes, view.states);
  }
});

test('a movement: the movement, nodes, plan DAG and a history that replays to the current states', async () => {
  const deps = runtimeDeps(db.pool);
  const id = await approvedMovement(deps, threeNodeTemplate('inspect-three'));
  await drain(deps);

  const { status, body } = await get(`/inspect/movements/${id}`);
  assert.equal(status, 200);
  assert.equal(body.movement.id, id);
  assert.equal(body.movement.state, 'COMPLETED');
  assert.equal(body.movement.machine_id, 'ferry.request');
  assert.equal(body.movement.callback_configured, true);
  assert.equal(body.movement.callback_url, null, 'the callback URL (it may hold credentials) is not shown to a viewer');
  assert.match(body.movement.compiled_plan_hash, /^sha256:/);

  assert.deepEqual(
    body.nodes.map((n: any) => [n.node_key, n.state]).sort(),
    [['observe_deposit', 'COMPLETED'], ['sweep', 'COMPLETED'], ['withdraw', 'COMPLETED']],
  );
  assert.deepEqual(body.plan.nodes.map((n: any) => [n.key, n.layer, n.executor_key]), [
    ['withdraw', 0, 'exec.sim.action'],
    ['observe_deposit', 1, 'exec.sim.observe'],
    ['sweep', 2, 'exec.sim.action'],
  ]);
  assert.deepEqual(body.plan.edges, [{ from: 'withdraw', to: 'observe_deposit' }, { from: 'observe_deposit', to: 'sweep' }]);
  assert.deepEqual(body.plan.initial_frontier, ['withdraw']);

  const history = body.transitions as any[];
  const { rows } = await db.pool.query('SELECT id FROM transitions WHERE request_id = $1 ORDER BY id', [id]);
  assert.deepEqual(history.map((t) => t.id), rows.map((r) => Number(r.id)), 'the whole log, in order');
  assert.equal(body.transitions_complete, true);
  assert.equal(history[0].event_type, 'xstate.init');
  assert.equal(history[0].from_state, null);
  const approve = history.find((t) => t.event_type === 'APPROVE');
  assert.equal(approve.actor, 'approver');
  assert.equal(approve.event_payload.by, 'approver');

  // Replaying the log gives every entity its stored state, and each step starts where the last ended.
  const at = new Map<string, string>();
  for (const t of history) {
    assert.equal(t.from_state, at.get(t.entity_id) ?? null, `transition ${t.id} starts where the entity was`);
    at.set(t.entity_id, t.to_state);
  }
  assert.equal(at.get(id), 'COMPLETED');
  for (const n of body.nodes) assert.equal(at.get(n.id), n.state);
});

test('/v3 and /inspect show a movement\'s transitions, nodes and movement in the same views', async () => {
  const deps = runtimeDeps(db.pool);
  const id = await approvedMovement(deps, threeNodeTemplate('inspect-same'));
  await drain(deps);
  const inspected = (await get(`/inspect/movements/${id}`)).body;

  // The whole /v3 log, page by page (small pages, so the cursor is exercised too).
  const v3: any[] = [];
  let cursor: string | null = null;
  do {
    const page: { status: number; body: any } = await get(`/v3/movements/${id}/transitions?limit=4${cursor ? `&cursor=${cursor}` : ''}`);
    assert.equal(page.status, 200);
    v3.push(...page.body.transitions);
    cursor = page.body.next_cursor;
  } while (cursor);
  assert.deepEqual(inspected.transitions, v3, 'the same transitions, field for field');
  assert.equal(v3[0].from_state, null, 'an entity\'s creation has no from_state in either');

  // Nodes and the movement: /inspect adds fields to the /v3 views and changes none of them.
  const detail = (await get(`/v3/movements/${id}`)).body;
  for (const node of detail.nodes) {
    const shown = inspected.nodes.find((n: any) => n.id === node.id);
    assert.deepEqual(Object.fromEntries(Object.keys(node).map((k) => [k, shown[k]])), node, node.node_key);
  }
  assert.deepEqual(Object.fromEntries(Object.keys(detail.movement).map((k) => [k, inspected.movement[k]])), detail.movement);
  const listed = (await get('/inspect/movements?limit=200')).body.movements.find((m: any) => m.id === id);
  const v3Listed = (await get('/v3/movements?limit=200')).body.movements.find((m: any) => m.id === id);
  assert.deepEqual(Object.fromEntries(Object.keys(v3Listed).map((k) => [k, listed[k]])), v3Listed);
});

test('the movement list filters by state and counts node states', async () => {
  const pending = (await seedMovement(db.pool, threeNodeTemplate('inspect-list'))).movement.id;
  const all = await get('/inspect/movements');
  assert.equal(all.status, 200);
  const listed = all.body.movements.find((m: any) => m.id === pending);
  assert.equal(listed.state, 'PENDING_APPROVAL');
  assert.deepEqual(listed.node_states, { BLOCKED: 3 });
  assert.equal(listed.nodes_total, 3);

  const onlyPending = await get('/inspect/movements?state=PENDING_APPROVAL');
  assert.ok(onlyPending.body.movements.length >= 1);
  assert.ok(onlyPending.body.movements.every((m: any) => m.state === 'PENDING_APPROVAL'));
  const two = await get('/inspect/movements?state=COMPLETED,PENDING_APPROVAL');
  assert.deepEqual(new Set(two.body.movements.map((m: any) => m.state)), new Set(['COMPLETED', 'PENDING_APPROVAL']));

});

test('/inspect/movements pages with an opaque cursor: each movement once, newest first, as /v3 does', async () => {
  for (let i = 0; i < 5; i++) await seedMovement(db.pool, threeNodeTemplate(`inspect-page-${i}`));
  const { rows } = await db.pool.query<{ id: string }>('SELECT id FROM movement_requests ORDER BY created_at DESC, id DESC');
  assert.ok(rows.length > 6, 'more than two pages of 3');

  const seen: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const page: { status: number; body: any } = await get(`/inspect/movements?limit=3${cursor ? `&cursor=${cursor}` : ''}`);
    assert.equal(page.status, 200);
    assert.ok(page.body.movements.length <= 3);
    assert.ok(!('next_before' in page.body));
    seen.push(...page.body.movements.map((m: any) => m.id));
    cursor = page.body.next_cursor;
    pages++;
  } while (cursor);
  assert.deepEqual(seen, rows.map((r) => r.id), 'every movement once, in order');
  assert.equal(pages, Math.ceil(rows.length / 3));

  // One paging scheme: a /v3 cursor continues an /inspect list at the same place, and back.
  const v3First = (await get('/v3/movements?limit=2')).body;
  const continued = (await get(`/inspect/movements?limit=2&cursor=${v3First.next_cursor}`)).body;
  assert.deepEqual(continued.movements.map((m: any) => m.id), seen.slice(2, 4));
  const back = (await get(`/v3/movements?limit=2&cursor=${continued.next_cursor}`)).body;
  assert.deepEqual(back.movements.map((m: any) => m.id), seen.slice(4, 6));

  // Filtered pages carry on within the filter.
  const pending: string[] = [];
  cursor = null;
  do {
    const page: { status: number; body: any } = await get(`/inspect/movements?state=PENDING_APPROVAL&limit=2${cursor ? `&cursor=${cursor}` : ''}`);
    assert.ok(page.body.movements.every((m: any) => m.state === 'PENDING_APPROVAL'));
    pending.push(...page.body.movements.map((m: any) => m.id));
    cursor = page.body.next_cursor;
  } while (cursor);
  assert.equal(new Set(pending).size, pending.length);
  assert.ok(pending.length >= 5);
});

test('a cursor no list handed out is a 400 naming the field, on /inspect and on every /v3 list', async () => {
  const id = (await seedMovement(db.pool, threeNodeTemplate('inspect-forged'))).movement.id;
  const forged = [
    'not-base64-json',
    Buffer.from(JSON.stringify(['2026-01-01T00:00:00.000000Z', 'x'])).toString('base64url'),
    Buffer.from(JSON.stringify(['2026-02-30T00:00:00.000000Z', id])).toString('base64url'),
    Buffer.from(JSON.stringify([5])).toString('base64url'),
    '12',
  ];
  const lists = ['/inspect/movements', '/v3/movements', `/v3/movements/${id}/transitions`, '/v3/audit-events', '/v3/callbacks', '/v3/template-proposals'];
  for (const list of lists) {
    for (const cursor of forged) {
      // A list's own kind of cursor is fine ([5] is an id cursor, a transition or audit position).
      if (cursor === forged[3] && (list.endsWith('/transitions') || list === '/v3/audit-events')) continue;
      const r = await get(`${list}?cursor=${encodeURIComponent(cursor)}`);
      assert.equal(r.status, 400, `${list} ${cursor}`);
      assert.equal(r.body.error.code, 'VALIDATION_FAILED', `${list} ${cursor}`);
      assert.equal(r.body.error.details.field, 'cursor', `${list} ${cursor}`);
    }
  }
  // The old parameter is refused rather than ignored.
  assert.equal((await get(`/inspect/movements?before=${id}`)).status, 400);
});

test('bad input is a 4xx with a code, never a 500', async () => {
  const cases: Array<[string, number, string]> = [
    ['/inspect/movements/00000000-0000-0000-0000-000000000000', 404, 'NOT_FOUND'],
    ['/inspect/movements/not-a-uuid', 404, 'NOT_FOUND'],
    ["/inspect/movements/1'%3B%20DROP%20TABLE%20transitions", 404, 'NOT_FOUND'],
    ['/inspect/movements/00000000-0000-0000-0000-000000000000/events', 404, 'NOT_FOUND'],
    ['/inspect/movements?state=NOPE', 400, 'VALIDATION_FAILED'],
    ['/inspect/movements?limit=0', 400, 'VALIDATION_FAILED'],
    ['/inspect/movements?limit=201', 400, 'VALIDATION_FAILED'],
    ['/inspect/movements?cursor=x', 400, 'VALIDATION_FAILED'],
    ['/inspect/movements?token=abc', 400, 'VALIDATION_FAILED'],
  ];
  for (const [path, status, code] of cases) {
    const r = await get(path);
    assert.equal(r.status, status, path);
    assert.equal(r.body.error.code, code, path);
  }
  const { movement } = await seedMovement(db.pool, threeNodeTemplate('inspect-bad'));
  const r = await app.request(`/inspect/movements/${movement.id}/events?after=-1`, { headers: { Authorization: `Bearer ${viewer}` } });
  assert.equal(r.status, 400);
  const h = await app.request(`/inspect/movements/${movement.id}/events`, { headers: { Authorization: `Bearer ${viewer}`, 'Last-Event-ID': 'abc' } });
  assert.equal(h.status, 400);
  assert.equal(((await h.json()) as any).error.code, 'VALIDATION_FAILED');
});
