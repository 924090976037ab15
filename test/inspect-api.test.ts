import assert from 'node:assert/strict';
import { test } from 'node:test';
import { nodeMachine } from '../src/machines/node-machine.ts';
import { movementMachine } from '../src/machines/movement-machine.ts';
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
  assert.deepEqual(views.map((m) => m.id), ['ferry.request', 'ferry.node']);
  for (const machine of [movementMachine, nodeMachine]) {
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

test('a movement: request, nodes, plan DAG and a history that replays to the current states', async () => {
  const deps = runtimeDeps(db.pool);
  const id = await approvedMovement(deps, threeNodeTemplate('inspect-three'));
  await drain(deps);

  const { status, body } = await get(`/inspect/movements/${id}`);
  assert.equal(status, 200);
  assert.equal(body.request.id, id);
  assert.equal(body.request.request_state, 'COMPLETED');
  assert.equal(body.request.callback_configured, true);
  assert.ok(!('callback_url' in body.request), 'the callback URL (it may hold credentials) is not shown');
  assert.match(body.request.compiled_plan_hash, /^sha256:/);

  assert.deepEqual(
    body.nodes.map((n: any) => [n.node_key, n.node_state]).sort(),
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
  for (const n of body.nodes) assert.equal(at.get(n.id), n.node_state);
});

test('the movement list filters by state and counts node states', async () => {
  const pending = (await seedMovement(db.pool, threeNodeTemplate('inspect-list'))).request.id;
  const all = await get('/inspect/movements');
  assert.equal(all.status, 200);
  const listed = all.body.movements.find((m: any) => m.id === pending);
  assert.equal(listed.request_state, 'PENDING_APPROVAL');
  assert.deepEqual(listed.node_states, { BLOCKED: 3 });
  assert.equal(listed.nodes_total, 3);

  const onlyPending = await get('/inspect/movements?state=PENDING_APPROVAL');
  assert.ok(onlyPending.body.movements.length >= 1);
  assert.ok(onlyPending.body.movements.every((m: any) => m.request_state === 'PENDING_APPROVAL'));
  const two = await get('/inspect/movements?state=COMPLETED,PENDING_APPROVAL');
  assert.deepEqual(new Set(two.body.movements.map((m: any) => m.request_state)), new Set(['COMPLETED', 'PENDING_APPROVAL']));

  const page = await get('/inspect/movements?limit=1');
  assert.equal(page.body.movements.length, 1);
  const next = await get(`/inspect/movements?limit=1&before=${page.body.next_before}`);
  assert.notEqual(next.body.movements[0].id, page.body.movements[0].id);
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
    ['/inspect/movements?before=x', 400, 'VALIDATION_FAILED'],
    ['/inspect/movements?token=abc', 400, 'VALIDATION_FAILED'],
  ];
  for (const [path, status, code] of cases) {
    const r = await get(path);
    assert.equal(r.status, status, path);
    assert.equal(r.body.error.code, code, path);
  }
  const { request } = await seedMovement(db.pool, threeNodeTemplate('inspect-bad'));
  const r = await app.request(`/inspect/movements/${request.id}/events?after=-1`, { headers: { Authorization: `Bearer ${viewer}` } });
  assert.equal(r.status, 400);
  const h = await app.request(`/inspect/movements/${request.id}/events`, { headers: { Authorization: `Bearer ${viewer}`, 'Last-Event-ID': 'abc' } });
  assert.equal(h.status, 400);
  assert.equal(((await h.json()) as any).error.code, 'VALIDATION_FAILED');
});
