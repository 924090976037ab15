import assert from 'node:assert/strict';
import { test } from 'node:test';
import pg from 'pg';
import { dispatchBatch } from '../src/actors/dispatcher.ts';
import type { WorkerDeps } from '../src/actors/execution.ts';
import { recoverBatch } from '../src/actors/recovery.ts';
import { deliverBatch, deliverMovementEvent } from '../src/durable/transition.ts';
import { InvalidTransitionError, LeaseLostError } from '../src/errors.ts';
import type { Executor } from '../src/executors/protocol.ts';
import { ExecutorRegistry } from '../src/executors/registry.ts';
import { SIM_ACTION_KEY, SimExecutor } from '../src/executors/sim/index.ts';
import { registry as metrics } from '../src/metrics.ts';
import { exactlyOnceReport } from '../scripts/lib/bench-queries.ts';
import { recordCalls } from '../src/persistence/sim-ledger.ts';
import { createPool, withTransaction, type Pool } from '../src/persistence/db.ts';
import { getNode, transitionsOfEntity } from '../src/persistence/movements.ts';
import { scratchDatabase } from './helpers/db.ts';
import { collectingDeps, seedMovement, singleNodeTemplate } from './helpers/fixtures.ts';
import { waitFor } from './helpers/wait.ts';
import { drain, runtimeDeps, snapshot } from './helpers/runtime.ts';

/**
 * The batched durable transition function and the batch workers built on it: per-event results
 * inside one commit, claims that never hand one node to two claimers, lease fencing of a stalled
 * dispatcher, and Ferry's own database trouble deferring a node instead of failing it.
 */

const approver = { actor: 'approver', deps: collectingDeps() };

async function approvedSingleNodes(pool: Pool, count: number, key = 'batch-single'): Promise<{ movementId: string; nodeId: string }[]> {
  const out = [];
  for (let i = 0; i < count; i++) {
    const { movement, nodes } = await seedMovement(pool, singleNodeTemplate(key));
    await withTransaction(pool, (c) => deliverMovementEvent(c, movement.id, { type: 'APPROVE', by: 'approver', at: new Date().toISOString() }, approver));
    out.push({ movementId: movement.id, nodeId: nodes[0].id });
  }
  return out;
}

test('a batch with invalid events commits the valid ones and refuses each invalid one with INVALID_TRANSITION', async (t) => {
  const db = await scratchDatabase(t);
  const [a, b, c] = await approvedSingleNodes(db.pool, 3);
  const before = await transitionsOfEntity(db.pool, b.nodeId);
  const artifact = {
    request_id: b.movementId,
    request_node_id: b.nodeId,
    attempt_no: 1,
    artifact_type: 'proof',
    artifact_digest: null,
    content_format: 'json',
    content_inline: '{}',
    content_uri: null,
    artifact_metadata: {},
  };
  const at = new Date().toISOString();
  const result = await withTransaction(db.pool, (client) =>
    deliverBatch(
      client,
      {
        movements: [{ movementId: a.movementId, event: { type: 'APPROVE', by: 'someone-else', at } }],
        nodes: [
          { nodeId: a.nodeId, event: { type: 'DISPATCH_CLAIMED', at } },
          // READY does not accept a submit result: refused, and its artifact is not written.
          { nodeId: b.nodeId, event: { type: 'SUBMIT_RESULT', outcome: { nextState: 'COMPLETED' }, at, nextObserveAt: null }, artifacts: [artifact] },
          { nodeId: c.nodeId, event: { type: 'DISPATCH_CLAIMED', at } },
        ],
      },
      { actor: 'test', deps: collectingDeps() },
    ),
  );
  assert.ok(result.movements[0] instanceof InvalidTransitionError, 'an APPROVED movement does not accept APPROVE');
  assert.equal((result.movements[0] as InvalidTransitionError).code, 'INVALID_TRANSITION');
  assert.ok(!(result.nodes[0] instanceof Error));
  assert.ok(result.nodes[1] instanceof InvalidTransitionError);
  assert.equal((result.nodes[1] as InvalidTransitionError).code, 'INVALID_TRANSITION');
  assert.deepEqual((result.nodes[1] as InvalidTransitionError).details, { machine: 'ferry.node', entity_id: b.nodeId, state: 'READY', event: 'SUBMIT_RESULT' });
  assert.ok(!(result.nodes[2] instanceof Error));

  for (const ok of [a, c]) {
    const node = (await getNode(db.pool, ok.nodeId))!;
    assert.equal(node.node_state, 'PREPARING');
    const log = await transitionsOfEntity(db.pool, ok.nodeId);
    assert.deepEqual(log.map((l) => l.seq), log.map((_, i) => i), 'gap-free log');
    assert.deepEqual(
      log.slice(-1).map((l) => [l.from_state, l.to_state, l.event_type, l.actor]),
      [['READY', 'PREPARING', 'DISPATCH_CLAIMED', 'test']],
    );
  }
  assert.equal((await getNode(db.pool, b.nodeId))!.node_state, 'READY');
  assert.deepEqual(await transitionsOfEntity(db.pool, b.nodeId), before, 'the refused event left no log row');
  const { rows } = await db.pool.query('SELECT count(*)::int AS n FROM artifacts WHERE request_node_id = $1', [b.nodeId]);
  assert.equal(rows[0].n, 0, 'the refused event wrote no artifact');
});

test('a write fenced by a lease the node no longer holds is refused with LEASE_LOST, the rest of the batch commits', async (t) => {
  const db = await scratchDatabase(t);
  const [a, b] = await approvedSingleNodes(db.pool, 2);
  const at = new Date().toISOString();
  const lease = '00000000-0000-4000-8000-000000000001';
  await withTransaction(db.pool, (client) =>
    deliverBatch(client, { nodes: [a, b].map((x) => ({ nodeId: x.nodeId, event: { type: 'DISPATCH_CLAIMED', at }, lease })) }, { actor: 'test', deps: collectingDeps() }),
  );
  assert.equal((await getNode(db.pool, a.nodeId))!.claim_token, lease);
  const result = await withTransaction(db.pool, (client) =>
    deliverBatch(
      client,
      {
        nodes: [
          { nodeId: a.nodeId, event: { type: 'PREPARED', signingRequired: false, at }, fence: '00000000-0000-4000-8000-000000000002' },
          { nodeId: b.nodeId, event: { type: 'PREPARED', signingRequired: false, at }, fence: lease },
        ],
      },
      { actor: 'test', deps: collectingDeps() },
    ),
  );
  assert.ok(result.nodes[0] instanceof LeaseLostError);
  assert.equal((result.nodes[0] as LeaseLostError).code, 'LEASE_LOST');
  assert.equal((await getNode(db.pool, a.nodeId))!.node_state, 'PREPARING');
  assert.equal((await getNode(db.pool, b.nodeId))!.node_state, 'SUBMITTING');
});

test('two claimers draining one batch-sized backlog never claim a node twice', async (t) => {
  const db = await scratchDatabase(t);
  const movements = await approvedSingleNodes(db.pool, 48, 'batch-claimers');
  // Two independent pools and runtimes, as two processes would have.
  const pools = [createPool(db.url, 4, 'claimer-1'), createPool(db.url, 4, 'claimer-2')];
  t.after(() => Promise.all(pools.map((p) => p.end())));
  const claimers = pools.map((p) => runtimeDeps(p));
  let claimed = 0;
  for (let round = 0; round < 40; round++) {
    const counts = await Promise.all(claimers.flatMap((d) => [dispatchBatch(d, { limit: 16 }), dispatchBatch(d, { limit: 16 })]));
    claimed += counts.reduce((a, b) => a + b, 0);
    if (counts.every((n) => n === 0)) break;
  }
  assert.equal(claimed, 48, 'every node claimed, none twice');
  const report = await exactlyOnceReport(db.pool, movements.map((m) => m.movementId));
  assert.deepEqual(report, { nodes: 48, submits: 48, keysSubmittedTwice: 0, nodesClaimedTwice: 0, nodesWithRetries: 0 });
});

/** The sim lane with a prepare() that waits on a gate and marks what it prepared. */
function gatedSim(pool: Pool, mark: string) {
  const sim = new SimExecutor(SIM_ACTION_KEY, 'action', pool);
  let reached!: () => void;
  const reachedPrepare = new Promise<void>((r) => (reached = r));
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const state = { submits: 0 };
  const executor: Executor = {
    executorKey: sim.executorKey,
    lane: sim.lane,
    preflight: (c) => sim.preflight(c),
    prepare: async (c) => {
      const result = await sim.prepare(c);
      reached();
      await gate;
      return { ...result, prepared_action: { ...result.prepared_action!, prepared_action_id: mark } };
    },
    preSubmitCheck: (c) => sim.preSubmitCheck(c),
    submit: (c, p, o) => {
      state.submits++;
      return sim.submit(c, p, o);
    },
    observe: (c) => sim.observe(c),
    recover: (c) => sim.recover(c),
    inspect: (c) => sim.inspect(c),
  };
  const executors = new ExecutorRegistry();
  executors.register(executor);
  return { executors, reachedPrepare, release, state };
}

test('a dispatcher paused after prepare, whose node recovery released and another dispatcher completed, has its writes refused', async (t) => {
  const db = await scratchDatabase(t);
  const normal = runtimeDeps(db.pool, { FERRY_SUBMITTING_GRACE_SECONDS: '30' });
  // The first dispatcher's executor: the sim lane, but prepare() waits on a gate before answering,
  // and marks the action it prepared so the record shows whose it is.
  const providerPool = createPool(db.url, 2, 'ferry-sim-provider', { allowExitOnIdle: true });
  t.after(() => providerPool.end());
  const gated = gatedSim(providerPool, 'stalled-dispatcher');
  const stalled: WorkerDeps = { ...normal, executors: gated.executors };

  const [m] = await approvedSingleNodes(db.pool, 1, 'batch-fencing');
  const first = dispatchBatch(stalled, { limit: 1 });
  await gated.reachedPrepare;
  const claimedByFirst = (await getNode(db.pool, m.nodeId))!;
  assert.equal(claimedByFirst.node_state, 'PREPARING');
  assert.ok(claimedByFirst.claim_token);

  // The first dispatcher is idle past the grace (backdated, not waited for): recovery releases it.
  await db.pool.query(`UPDATE request_nodes SET updated_at = now() - interval '1 hour' WHERE id = $1`, [m.nodeId]);
  await recoverBatch(normal);
  const released = (await getNode(db.pool, m.nodeId))!;
  assert.equal(released.node_state, 'READY');
  assert.equal(released.error_code, 'DISPATCH_ABANDONED');
  assert.equal(released.claim_token, null);

  // A second dispatcher claims it under a new lease and completes it.
  await drain(normal);
  const done = await snapshot(db.pool, m.movementId);
  assert.equal(done.movement.request_state, 'COMPLETED');
  assert.equal(done.byKey.only.node_state, 'COMPLETED');
  const logBefore = await transitionsOfEntity(db.pool, m.nodeId);

  // The first dispatcher resumes: its PREPARED is refused, it never submits.
  gated.release();
  assert.equal(await first, 1);
  assert.equal(gated.state.submits, 0, 'the stalled dispatcher never called submit()');
  assert.deepEqual(await transitionsOfEntity(db.pool, m.nodeId), logBefore, 'nothing of the stalled dispatch was written');
  const { rows: submits } = await db.pool.query(`SELECT idempotency_key FROM sim_side_effects WHERE request_node_id = $1 AND call = 'submit'`, [m.nodeId]);
  assert.equal(submits.length, 1, 'submitted once');
  const { rows: actions } = await db.pool.query(
    `SELECT attempt_no, content_inline FROM artifacts WHERE request_node_id = $1 AND artifact_type = 'prepared_action'`,
    [m.nodeId],
  );
  assert.equal(actions.length, 1, 'one prepared action on record');
  const action = JSON.parse(actions[0].content_inline);
  assert.notEqual(action.prepared_action_id, 'stalled-dispatcher', 'the prepared action on record is the one the second dispatcher submitted');
  assert.equal(`${m.nodeId}:${actions[0].attempt_no}`, submits[0].idempotency_key);
});

test('a stalled dispatcher that resumes while another dispatch holds the node cannot land its PREPARED', async (t) => {
  const db = await scratchDatabase(t);
  const normal = runtimeDeps(db.pool, { FERRY_SUBMITTING_GRACE_SECONDS: '30' });
  const providerPool = createPool(db.url, 2, 'ferry-sim-provider', { allowExitOnIdle: true });
  t.after(() => providerPool.end());
  const a = gatedSim(providerPool, 'dispatcher-a');
  const b = gatedSim(providerPool, 'dispatcher-b');
  const [m] = await approvedSingleNodes(db.pool, 1, 'batch-fencing-2');

  const first = dispatchBatch({ ...normal, executors: a.executors }, { limit: 1 });
  await a.reachedPrepare;
  await db.pool.query(`UPDATE request_nodes SET updated_at = now() - interval '1 hour' WHERE id = $1`, [m.nodeId]);
  await recoverBatch(normal);
  const second = dispatchBatch({ ...normal, executors: b.executors }, { limit: 1 });
  await b.reachedPrepare;
  const heldByB = (await getNode(db.pool, m.nodeId))!;
  assert.equal(heldByB.node_state, 'PREPARING');

  // A resumes first: the node is PREPARING again, so the machine alone would accept its PREPARED;
  // the lease refuses it.
  a.release();
  await first;
  const afterA = (await getNode(db.pool, m.nodeId))!;
  assert.equal(afterA.node_state, 'PREPARING', "A's PREPARED was refused");
  assert.equal(afterA.claim_token, heldByB.claim_token);
  assert.equal(a.state.submits, 0);

  b.release();
  await second;
  assert.equal((await snapshot(db.pool, m.movementId)).movement.request_state, 'COMPLETED');
  assert.equal(b.state.submits, 1);
  const { rows: actions } = await db.pool.query(
    `SELECT content_inline FROM artifacts WHERE request_node_id = $1 AND artifact_type = 'prepared_action'`,
    [m.nodeId],
  );
  assert.deepEqual(actions.map((r) => JSON.parse(r.content_inline).prepared_action_id), ['dispatcher-b']);
  const { rows: submits } = await db.pool.query(`SELECT count(*)::int AS n FROM sim_side_effects WHERE request_node_id = $1 AND call = 'submit'`, [m.nodeId]);
  assert.equal(submits[0].n, 1);
});

async function deferralCount(cause: string): Promise<number> {
  const metric = await metrics.getSingleMetric('ferry_infra_deferrals_total')!.get();
  return metric.values.filter((v) => v.labels.cause === cause).reduce((a, v) => a + v.value, 0);
}

test("the sim provider's pool failing its checkout at submit leaves the node SUBMITTING for recovery, never FAILED or UNKNOWN, and the movement completes", async (t) => {
  const db = await scratchDatabase(t);
  // The simulated provider's pool: one connection, and a checkout that gives up after a second.
  const providerPool = new pg.Pool({ connectionString: db.url, max: 1, connectionTimeoutMillis: 1000, application_name: 'ferry-sim-provider' });
  providerPool.on('error', () => {});
  // The test takes the pool's only connection (a slow machine may need more than one try to open it).
  let hog: pg.PoolClient | null = null;
  // Released before the pool ends, whatever an assertion did: end() waits for every client.
  t.after(async () => {
    hog?.release();
    await providerPool.end();
  });
  const deps = runtimeDeps(db.pool);
  const executors = new ExecutorRegistry();
  executors.register(new SimExecutor(SIM_ACTION_KEY, 'action', providerPool));
  const lane: WorkerDeps = { ...deps, executors };

  const [m] = await approvedSingleNodes(db.pool, 1, 'batch-infra');
  const before = await deferralCount('checkout_timeout');
  for (let i = 0; i < 10 && !hog; i++) hog = await providerPool.connect().catch(() => null);
  assert.ok(hog, "the test holds the provider pool's only connection");
  // preflight and prepare do not reach the provider; the submit's record does, and cannot be written.
  await dispatchBatch(lane);
  const stuck = (await getNode(db.pool, m.nodeId))!;
  assert.equal(stuck.node_state, 'SUBMITTING', 'whether it was submitted is for recovery to find out');
  assert.equal(await deferralCount('checkout_timeout'), before + 1, 'the deferral is counted by cause');

  hog!.release();
  hog = null;
  // Past the SUBMITTING grace: recovery asks the provider, which has no record, so a new attempt.
  await db.pool.query("UPDATE request_nodes SET updated_at = now() - interval '1 hour' WHERE id = $1", [m.nodeId]);
  await recoverBatch(lane);
  const released = (await getNode(db.pool, m.nodeId))!;
  assert.equal(released.node_state, 'READY');
  assert.equal(released.error_code, 'RECOVERY_NO_SUBMISSION');
  await waitFor('the node to complete', async () => {
    await dispatchBatch(lane);
    return (await snapshot(db.pool, m.movementId)).movement.request_state === 'COMPLETED';
  });
  const log = await transitionsOfEntity(db.pool, m.nodeId);
  assert.ok(!log.some((l) => ['FAILED', 'UNKNOWN'].includes(l.to_state)), 'the node was never FAILED or UNKNOWN');
  const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM sim_side_effects WHERE request_node_id = $1 AND call = 'submit'`, [m.nodeId]);
  assert.equal(rows[0].n, 1, 'one submit reached the provider');
});

test('the sim ledger numbers calls written in one batch as one-at-a-time recording would', async (t) => {
  const db = await scratchDatabase(t);
  const [m] = await approvedSingleNodes(db.pool, 1, 'batch-ledger');
  const entry = { request_node_id: m.nodeId, attempt_no: 1, idempotency_key: `${m.nodeId}:1`, executor_key: SIM_ACTION_KEY, call: 'observe' as const };
  assert.deepEqual(await recordCalls(db.pool, [entry]), [{ priorCalls: 0 }]);
  assert.deepEqual(await recordCalls(db.pool, [entry, { ...entry, call: 'submit' }, entry]), [{ priorCalls: 1 }, { priorCalls: 0 }, { priorCalls: 2 }]);
  const { rows } = await db.pool.query('SELECT call FROM sim_side_effects WHERE request_node_id = $1 ORDER BY id', [m.nodeId]);
  assert.deepEqual(rows.map((r) => r.call), ['observe', 'observe', 'submit', 'observe']);
});
