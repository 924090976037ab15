import assert from 'node:assert/strict';
import { beforeEach, describe, test } from 'node:test';
import { recoverBatch, recoveryArms } from '../src/actors/recovery.ts';
import { LocalExecutorAdapter } from '../src/executors/local-adapter.ts';
import { scratchDatabase, type TestDb } from './helpers/db.ts';
import { approvedMovement, dispatchByHand, dispatchUntilIdle, plan, runtimeDeps, snapshot } from './helpers/runtime.ts';

/**
 * Recovery's lane arms (src/actors/recovery.ts): cctp, evm, cex, and the rest, each claiming up to
 * max(1, batch / arms) nodes per pass. For every arm: its UNKNOWN nodes and its nodes stuck in
 * SUBMITTING past the lane's grace are resolved by recover(), never by a second submit. And a
 * flood of old stuck nodes in one lane does not keep the other lanes' nodes waiting: one pass
 * recovers each of them. The lane of a node is its executor key's second segment, so a recording
 * executor per lane (exec.<lane>.arm_probe) stands in for the lane's real executors. Time is
 * moved by backdating rows, never by sleeping.
 */

const LANES = ['cctp', 'evm', 'cex', 'rest'] as const;
type Lane = (typeof LANES)[number];
const BATCH = 8; // 4 arms: 2 nodes each per pass
const GRACE = LANES.map((l) => `${l}=60`).join(',');

interface Calls {
  submits: Map<string, number>;
  recovers: Map<string, number>;
}

function probeDeps(db: TestDb) {
  const deps = runtimeDeps(db.pool, { FERRY_NODE_RECOVERY_BATCH_SIZE: String(BATCH), FERRY_SUBMITTING_GRACE_SECONDS_BY_LANE: GRACE });
  const calls: Calls = { submits: new Map(), recovers: new Map() };
  const bump = (m: Map<string, number>, id: string) => m.set(id, (m.get(id) ?? 0) + 1);
  for (const lane of LANES) {
    deps.executors.register(
      new LocalExecutorAdapter({
        executorKey: `exec.${lane}.arm_probe`,
        lane,
        handler: {
          prepare: (ctx) => ({
            next_state: 'SUBMITTING',
            prepared_action: { prepared_action_id: `p-${ctx.request_node_id}`, action_type: ctx.action_type, payload_format: 'json', payload: '{}', payload_hash: 'sha256:' + '3'.repeat(64), signing_required: false },
          }),
          // The answer is lost: the provider may or may not have acted.
          submit: (ctx) => (bump(calls.submits, ctx.request_node_id), { next_state: 'UNKNOWN', error_code: 'PROBE_TIMEOUT' }),
          recover: (ctx) => (bump(calls.recovers, ctx.request_node_id), { next_state: 'COMPLETED', provider_state: 'recovered' }),
        },
      }),
    );
  }
  return { deps, calls };
}

let n = 0;
const probePlan = (lane: Lane) => plan(`arm-${lane}-${n++}`, [{ node_key: 'a', node_kind: 'action', action_type: `${lane}_probe`, executor_binding: `exec.${lane}.arm_probe` }]);

/** A movement whose one node of `lane` is UNKNOWN after a submit whose answer was lost. */
async function unknownNode(d: ReturnType<typeof probeDeps>, lane: Lane): Promise<{ movementId: string; nodeId: string }> {
  const movementId = await approvedMovement(d.deps, probePlan(lane));
  await dispatchUntilIdle(d.deps);
  const node = (await snapshot(d.deps.pool, movementId)).byKey.a;
  assert.equal(node.node_state, 'UNKNOWN');
  return { movementId, nodeId: node.id };
}

/** A movement whose one node of `lane` was committed SUBMITTING by a dispatcher that then died. */
async function stuckNode(d: ReturnType<typeof probeDeps>, lane: Lane): Promise<{ movementId: string; nodeId: string }> {
  const movementId = await approvedMovement(d.deps, probePlan(lane));
  const nodeId = (await snapshot(d.deps.pool, movementId)).byKey.a.id;
  await dispatchByHand(d.deps, movementId, nodeId, ['DISPATCH_CLAIMED', 'PREPARED']);
  return { movementId, nodeId };
}

async function backdate(db: TestDb, nodeIds: string[], seconds: number): Promise<void> {
  await db.pool.query(`UPDATE request_nodes SET updated_at = updated_at - make_interval(secs => $2) WHERE id = ANY($1::uuid[])`, [nodeIds, seconds]);
}

async function recoveredFrom(db: TestDb, nodeId: string): Promise<string[]> {
  const { rows } = await db.pool.query(`SELECT from_state, to_state FROM transitions WHERE entity_id = $1 AND event_type = 'RECOVERED' ORDER BY id`, [nodeId]);
  return rows.map((r) => `${r.from_state}->${r.to_state}`);
}

test('the arms: cctp, evm, cex, then every other lane, each max(1, batch / arms)', () => {
  assert.deepEqual(recoveryArms(8).map((a) => [a.lanes, a.limit]), [[['cctp'], 2], [['evm'], 2], [['cex'], 2], [null, 2]]);
  assert.deepEqual(recoveryArms(10).map((a) => a.limit), [2, 2, 2, 2]);
  assert.deepEqual(recoveryArms(2).map((a) => a.limit), [1, 1, 1, 1], 'never zero');
});

describe('each arm recovers its lane through recover(), never a second submit', () => {
  let db: TestDb;
  beforeEach(async (t) => {
    db = await scratchDatabase(t as never);
  });

  for (const lane of LANES) {
    test(`${lane}: an UNKNOWN node and a node stuck in SUBMITTING past the grace are COMPLETED by recover()`, async () => {
      const d = probeDeps(db);
      const unknown = await unknownNode(d, lane);
      const stuck = await stuckNode(d, lane);

      // Within the lane's grace a submit may still be under way: the SUBMITTING node is left alone.
      await recoverBatch(d.deps);
      assert.equal((await snapshot(db.pool, unknown.movementId)).byKey.a.node_state, 'COMPLETED');
      assert.equal((await snapshot(db.pool, stuck.movementId)).byKey.a.node_state, 'SUBMITTING');
      assert.equal(d.calls.recovers.get(stuck.nodeId), undefined);

      await backdate(db, [stuck.nodeId], 120); // idle longer than the lane's 60 s grace
      await recoverBatch(d.deps);
      for (const m of [unknown, stuck]) {
        const s = await snapshot(db.pool, m.movementId);
        assert.equal(s.byKey.a.node_state, 'COMPLETED');
        assert.equal(s.byKey.a.attempt_no, 1);
        assert.equal(s.movement.request_state, 'COMPLETED');
        assert.equal(d.calls.recovers.get(m.nodeId), 1, 'recover() asked once');
      }
      assert.equal(d.calls.submits.get(unknown.nodeId), 1, 'the UNKNOWN node: only its original submit');
      assert.equal(d.calls.submits.get(stuck.nodeId), undefined, 'the stuck node: never submitted');
      assert.deepEqual(await recoveredFrom(db, unknown.nodeId), ['UNKNOWN->COMPLETED']);
      assert.deepEqual(await recoveredFrom(db, stuck.nodeId), ['SUBMITTING->COMPLETED']);
    });
  }
});

describe('a flood in one lane does not starve the others', () => {
  let db: TestDb;
  beforeEach(async (t) => {
    db = await scratchDatabase(t as never);
  });

  for (const flooded of LANES) {
    test(`12 old stuck ${flooded} nodes: one pass recovers each other lane's node and ${BATCH / 4} of the flood`, async () => {
      const d = probeDeps(db);
      const flood = [];
      for (let i = 0; i < 6; i++) flood.push(await unknownNode(d, flooded), await stuckNode(d, flooded));
      const others = [];
      for (const lane of LANES.filter((l) => l !== flooded)) others.push({ lane, ...(await unknownNode(d, lane)) });
      // The flood is older than everything else: by age alone it would fill the whole batch.
      await backdate(db, flood.map((f) => f.nodeId), 3600);

      await recoverBatch(d.deps);
      for (const o of others) {
        assert.equal((await snapshot(db.pool, o.movementId)).byKey.a.node_state, 'COMPLETED', `${o.lane} was not starved by ${flooded}`);
      }
      const floodDone = (await Promise.all(flood.map((f) => snapshot(db.pool, f.movementId)))).filter((s) => s.byKey.a.node_state === 'COMPLETED');
      assert.equal(floodDone.length, BATCH / 4, `the ${flooded} arm took its share, no more`);

      // Further passes drain the flood, a share at a time, still without a submit.
      for (let pass = 0; pass < 6; pass++) await recoverBatch(d.deps);
      for (const f of flood) assert.equal((await snapshot(db.pool, f.movementId)).byKey.a.node_state, 'COMPLETED');
      const submits = [...d.calls.submits.values()].reduce((a, b) => a + b, 0);
      assert.equal(submits, 6 + others.length, 'one submit per UNKNOWN node (its dispatch), none from recovery');
      for (const f of flood) assert.equal(d.calls.recovers.get(f.nodeId), 1);
    });
  }
});
