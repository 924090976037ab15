import assert from 'node:assert/strict';
import { beforeEach, describe, test } from 'node:test';
import { generatePrivateKey } from 'viem/accounts';
import { dispatchOne } from '../src/actors/dispatcher.ts';
import { observeBatch } from '../src/actors/observer.ts';
import { recoverBatch } from '../src/actors/recovery.ts';
import { LocalExecutorAdapter } from '../src/executors/local-adapter.ts';
import { LocalPrivateKeySignerEvm } from '../src/executors/signers/local-private-key-evm.ts';
import { artifactsOfMovement } from '../src/persistence/artifacts.ts';
import { scratchDatabase, type TestDb } from './helpers/db.ts';
import { approvedMovement, backdateNodes, dispatchByHand, drain, plan, runtimeDeps, simNode, snapshot } from './helpers/runtime.ts';

/**
 * Every branch of the dispatch, observe and recovery pipelines of the reference runtime, on the
 * simulation lane and real Postgres. The dispatch, observation and recovery steps are driven one by one.
 */

let db: TestDb;
let deps: ReturnType<typeof runtimeDeps>;
beforeEach(async (t) => {
  db = await scratchDatabase(t as never);
  deps = runtimeDeps(db.pool);
});
let n = 0;

const key = (name: string) => `${name.toLowerCase()}-${n++}`;

async function submits(attemptKey: string): Promise<number> {
  const { rows } = await db.pool.query(
    `SELECT count(*)::int AS c FROM sim_side_effects WHERE idempotency_key = $1 AND call = 'submit'`,
    [attemptKey],
  );
  return rows[0].c;
}

describe('dispatch', () => {
  test('first dispatch moves the request APPROVED -> EXECUTING and a COMPLETED submit finishes it', async () => {
    const id = await approvedMovement(deps, plan(key('ok'), [simNode('a', {})]));
    assert.equal((await snapshot(db.pool, id)).movement.request_state, 'APPROVED');
    assert.equal(await dispatchOne(deps), true);
    const s = await snapshot(db.pool, id);
    assert.equal(s.byKey.a.node_state, 'COMPLETED');
    assert.equal(s.byKey.a.attempt_no, 1);
    assert.equal(s.byKey.a.idempotency_key, `${s.byKey.a.id}:1`);
    assert.equal(s.movement.request_state, 'COMPLETED');
    assert.equal(await submits(s.byKey.a.idempotency_key!), 1);
    const log = await db.pool.query(`SELECT to_state FROM transitions WHERE entity_id = $1 ORDER BY seq`, [id]);
    assert.deepEqual(log.rows.map((r) => r.to_state), ['PENDING_APPROVAL', 'APPROVED', 'EXECUTING', 'COMPLETED']);
    const arts = await artifactsOfMovement(db.pool, id);
    const prepared = arts.find((a) => a.artifact_type === 'prepared_action')!;
    assert.ok(prepared.artifact_digest?.startsWith('sha256:'), 'prepared action persisted with payload_hash as digest');
  });

  test('preflight refusal fails the node before any side effect', async () => {
    const id = await approvedMovement(deps, plan(key('pre'), [simNode('a', { preflight: 'FAILED' })]));
    await dispatchOne(deps);
    const s = await snapshot(db.pool, id);
    assert.equal(s.byKey.a.node_state, 'FAILED');
    assert.equal(s.byKey.a.attempt_no, 0);
    assert.equal(s.movement.request_state, 'FAILED');
  });

  test('preflight SKIPPED skips the node and the plan goes on', async () => {
    const id = await approvedMovement(deps, plan(key('skip'), [simNode('a', { preflight: 'SKIPPED' }), simNode('b', {})], [{ from: 'a', to: 'b' }]));
    await drain(deps);
    const s = await snapshot(db.pool, id);
    assert.equal(s.byKey.a.node_state, 'SKIPPED');
    assert.equal(s.byKey.b.node_state, 'COMPLETED');
    assert.equal(s.movement.request_state, 'COMPLETED');
  });

  test('prepare without an action fails the node', async () => {
    const id = await approvedMovement(deps, plan(key('noaction'), [simNode('a', { prepare: 'none' })]));
    await dispatchOne(deps);
    const s = await snapshot(db.pool, id);
    assert.equal(s.byKey.a.node_state, 'FAILED');
    assert.equal(s.byKey.a.attempt_no, 0, 'never reached SUBMITTING');
    assert.ok(s.byKey.a.error_code);
  });

  test('a temporary prepare error defers the node instead of failing it', async () => {
    const id = await approvedMovement(deps, plan(key('tmp'), [simNode('a', { prepare: 'throw_temporary' })]));
    await dispatchOne(deps);
    const s = await snapshot(db.pool, id);
    assert.equal(s.byKey.a.node_state, 'READY');
    assert.ok(s.byKey.a.dispatch_after! > new Date(), 'not dispatched again before dispatch_after');
    assert.equal(await dispatchOne(deps), false);
  });

  test('an unknown executor binding fails the node with a clear code, the worker goes on', async () => {
    const id = await approvedMovement(deps, plan(key('unbound'), [{ ...simNode('a', {}), executor_binding: 'exec.nowhere.x' }]));
    // Saved without a registry check, as a plan looks after its executor was removed from a deploy.
    await dispatchOne(deps);
    const s = await snapshot(db.pool, id);
    assert.equal(s.byKey.a.node_state, 'FAILED');
    assert.equal(s.byKey.a.error_code, 'EXECUTOR_NOT_REGISTERED');
  });

  test('signing required with a signer binding signs, records the signature, then submits', async () => {
    const id = await approvedMovement(deps, plan(key('signed'), [simNode('a', { signing_required: true }, { signer_binding: 'noop' })]));
    await dispatchOne(deps);
    const s = await snapshot(db.pool, id);
    assert.equal(s.byKey.a.node_state, 'COMPLETED');
    const arts = await artifactsOfMovement(db.pool, id);
    assert.ok(arts.some((a) => a.artifact_type === 'signature'));
    const states = await db.pool.query(`SELECT to_state FROM transitions WHERE entity_id = $1 ORDER BY seq`, [s.byKey.a.id]);
    assert.deepEqual(states.rows.map((r) => r.to_state), ['BLOCKED', 'READY', 'PREPARING', 'AWAITING_SIGNATURE', 'SUBMITTING', 'COMPLETED']);
  });

  test('signing required without a signer binding fails: missing signer binding', async () => {
    const id = await approvedMovement(deps, plan(key('nosigner'), [simNode('a', { signing_required: true })]));
    await dispatchOne(deps);
    const s = await snapshot(db.pool, id);
    assert.equal(s.byKey.a.node_state, 'FAILED');
    assert.equal(s.byKey.a.error_detail, 'missing signer binding');
    assert.equal(await submits(`${s.byKey.a.id}:1`), 0);
  });

  test('a signer refuses a payload whose hash does not match the allowed hash', async () => {
    const local = runtimeDeps(db.pool);
    local.signers.register(new LocalPrivateKeySignerEvm({ signerKey: 'hot_wallet', privateKey: generatePrivateKey() }));
    local.executors.register(
      new LocalExecutorAdapter({ executorKey: 'exec.test.tampered', lane: 'test', handler: {
        prepare: async () => ({
          next_state: 'SUBMITTING',
          prepared_action: {
            prepared_action_id: 'p1',
            action_type: 'evm_transfer',
            payload_format: 'json',
            payload: '{"to":"0xabc"}',
            payload_hash: `sha256:${'0'.repeat(64)}`,
            signing_required: true,
          },
        }),
        submit: async () => ({ next_state: 'COMPLETED' }),
      } }),
    );
    const id = await approvedMovement(
      local,
      plan(key('tamper'), [{ node_key: 'a', node_kind: 'action', action_type: 'evm_transfer', executor_binding: 'exec.test.tampered', signer_binding: 'hot_wallet' }]),
    );
    await dispatchOne(local);
    const s = await snapshot(db.pool, id);
    assert.equal(s.byKey.a.node_state, 'FAILED');
    assert.equal(s.byKey.a.error_code, 'SIGNER_PAYLOAD_HASH_MISMATCH');
  });

  test('pre_submit_check: temporary defers the node, fatal fails it, neither submits', async () => {
    const t = await approvedMovement(deps, plan(key('psc-t'), [simNode('a', { pre_submit_check: 'throw_temporary' })]));
    const f = await approvedMovement(deps, plan(key('psc-f'), [simNode('a', { pre_submit_check: 'throw_fatal' })]));
    await dispatchOne(deps);
    await dispatchOne(deps);
    const st = await snapshot(db.pool, t);
    const sf = await snapshot(db.pool, f);
    assert.equal(st.byKey.a.node_state, 'READY');
    assert.equal(st.byKey.a.error_code, 'PRE_SUBMIT_CHECK_TEMPORARY_ERROR');
    assert.equal(sf.byKey.a.node_state, 'FAILED');
    assert.equal(sf.byKey.a.error_code, 'PRE_SUBMIT_CHECK_FATAL_ERROR');
    assert.equal(await submits(`${st.byKey.a.id}:1`), 0);
    assert.equal(await submits(`${sf.byKey.a.id}:1`), 0);
  });

  for (const outcome of ['SUBMITTED', 'FAILED', 'UNKNOWN'] as const) {
    test(`submit ${outcome}`, async () => {
      const id = await approvedMovement(deps, plan(key(`sub-${outcome}`), [simNode('a', { submit: [outcome] })]));
      await dispatchOne(deps);
      const s = await snapshot(db.pool, id);
      assert.equal(s.byKey.a.node_state, outcome);
      assert.equal(await submits(s.byKey.a.idempotency_key!), 1);
      const expected = { SUBMITTED: 'EXECUTING', FAILED: 'FAILED', UNKNOWN: 'EXECUTING' }[outcome];
      assert.equal(s.movement.request_state, expected);
    });
  }

  test('a submit that throws a temporary error leaves the node UNKNOWN, never retried blindly', async () => {
    const id = await approvedMovement(deps, plan(key('sub-throw'), [simNode('a', { submit: ['throw_temporary'], recover: ['UNKNOWN'] })]));
    await dispatchOne(deps);
    const s = await snapshot(db.pool, id);
    assert.equal(s.byKey.a.node_state, 'UNKNOWN');
    assert.equal(await dispatchOne(deps), false);
  });

  test('an UNKNOWN after a completed side effect puts the request in MANUAL_INTERVENTION', async () => {
    const id = await approvedMovement(deps, plan(key('mi'), [simNode('a', {}), simNode('b', { submit: ['FAILED'] })], [{ from: 'a', to: 'b' }]));
    await drain(deps);
    const s = await snapshot(db.pool, id);
    assert.equal(s.byKey.a.node_state, 'COMPLETED');
    assert.equal(s.byKey.b.node_state, 'FAILED');
    assert.equal(s.movement.request_state, 'MANUAL_INTERVENTION');
    assert.ok(deps.seen.some((c) => c.movement.id === id && c.eventType === 'request_attention'));
  });
});

describe('context', () => {
  test('$ref to a predecessor provider ref resolves into node_config; provider_context is flat', async () => {
    const local = runtimeDeps(db.pool);
    let seen: any = null;
    local.executors.register(
      new LocalExecutorAdapter({ executorKey: 'exec.test.capture', lane: 'test', handler: {
        prepare: async (ctx) => {
          seen = ctx;
          return {
            next_state: 'SUBMITTING',
            prepared_action: { prepared_action_id: 'x', action_type: 't', payload_format: 'json', payload: '{}', payload_hash: 'sha256:' + '1'.repeat(64), signing_required: false },
          };
        },
        submit: async () => ({ next_state: 'COMPLETED' }),
      } }),
    );
    const id = await approvedMovement(
      local,
      plan(
        key('ref'),
        [
          simNode('withdraw', { submit: [{ next_state: 'COMPLETED', provider_refs: { withdrawal_id: 'w-42' } }] }),
          { node_key: 'use', node_kind: 'action', action_type: 't', executor_binding: 'exec.test.capture', config: { wid: '$ref:withdraw.withdrawal_id', fixed: 1 } },
        ],
        [{ from: 'withdraw', to: 'use' }],
      ),
    );
    await drain(local);
    assert.equal((await snapshot(db.pool, id)).movement.request_state, 'COMPLETED');
    assert.equal(seen.node_config.wid, 'w-42');
    assert.equal(seen.node_config.fixed, 1);
    assert.equal(seen.provider_context.withdrawal_id, 'w-42');
    assert.equal(seen.attempt_no, 1);
    assert.equal(seen.idempotency_key, `${seen.request_node_id}:1`);
  });

  test('an unresolvable $ref fails the node with CONFIG_REF_UNRESOLVED', async () => {
    const id = await approvedMovement(
      deps,
      plan(key('badref'), [simNode('a', {}), { ...simNode('b', {}), config: { sim: {}, x: '$ref:a.missing_field' } }], [{ from: 'a', to: 'b' }]),
    );
    await drain(deps);
    const s = await snapshot(db.pool, id);
    assert.equal(s.byKey.b.node_state, 'FAILED');
    assert.equal(s.byKey.b.error_code, 'CONFIG_REF_UNRESOLVED');
  });
});

describe('observe', () => {
  const observed = (observe: unknown[], extra: Record<string, unknown> = {}) =>
    simNode('a', { submit: ['SUBMITTED'], observe }, extra);

  for (const outcome of ['COMPLETED', 'FAILED', 'UNKNOWN'] as const) {
    test(`observe ${outcome}`, async () => {
      const id = await approvedMovement(deps, plan(key(`obs-${outcome}`), [observed([outcome])]));
      await dispatchOne(deps);
      assert.equal(await observeBatch(deps), 1);
      const s = await snapshot(db.pool, id);
      assert.equal(s.byKey.a.node_state, outcome);
      assert.equal(s.byKey.a.observe_count, 1);
      assert.ok(s.byKey.a.last_observed_at);
    });
  }

  test('OBSERVING uses retry_after_seconds when given, the action_type default otherwise', async () => {
    const hinted = await approvedMovement(deps, plan(key('obs-hint'), [observed([{ next_state: 'OBSERVING', retry_after_seconds: 42 }])]));
    const fallback = await approvedMovement(
      deps,
      plan(key('obs-default'), [observed(['OBSERVING'], { action_type: 'cex_withdrawal_status' })]),
    );
    await dispatchOne(deps);
    await dispatchOne(deps);
    await observeBatch(deps);
    const h = (await snapshot(db.pool, hinted)).byKey.a;
    const f = (await snapshot(db.pool, fallback)).byKey.a;
    assert.equal(h.node_state, 'OBSERVING');
    assert.equal((h.next_observe_at!.getTime() - h.last_observed_at!.getTime()) / 1000, 42);
    assert.equal((f.next_observe_at!.getTime() - f.last_observed_at!.getTime()) / 1000, 5);
    // Not due yet: nothing to observe.
    assert.equal(await observeBatch(deps), 0);
  });

  test('observation timeout: enforced only when the flag is on, and then without calling the executor', async () => {
    const template = (k: string) =>
      plan(k, [observed(['OBSERVING'], { timeout_policy: { observe_seconds: 60 } })]);
    const off = await approvedMovement(deps, template(key('to-off')));
    await dispatchOne(deps);
    const on = runtimeDeps(db.pool, { FERRY_OBSERVE_TIMEOUT_ENFORCEMENT_ENABLED: 'true' });
    const onId = await approvedMovement(on, template(key('to-on')));
    await dispatchOne(on);
    // Both have been observed for longer than observe_seconds: their observation started 2 min ago.
    await backdateNodes(db.pool, [off, onId], 'started_at', 120);
    await observeBatch(deps); // flag off: observes both (the other too), neither times out
    let so = (await snapshot(db.pool, off)).byKey.a;
    assert.equal(so.node_state, 'OBSERVING');
    // Make the flag-on node due again, then observe with the flag on.
    await db.pool.query(`UPDATE request_nodes SET next_observe_at = now() - interval '1 second' WHERE request_id = $1`, [onId]);
    const before = (await snapshot(db.pool, onId)).byKey.a.observe_count;
    await observeBatch(on);
    const sn = (await snapshot(db.pool, onId)).byKey.a;
    assert.equal(sn.node_state, 'UNKNOWN');
    assert.equal(sn.error_code, 'OBSERVATION_TIMEOUT');
    assert.equal(sn.observe_count, before, 'no executor call when the timeout fires');
    so = (await snapshot(db.pool, off)).byKey.a;
    assert.equal(so.node_state, 'OBSERVING');
  });
});

describe('recovery', () => {
  for (const [script, expected] of [
    ['SUBMITTED', 'SUBMITTED'],
    ['COMPLETED', 'COMPLETED'],
    ['FAILED', 'FAILED'],
  ] as const) {
    test(`recover() -> ${expected}, without a second submit`, async () => {
      const id = await approvedMovement(deps, plan(key(`rec-${script}`), [simNode('a', { submit: ['UNKNOWN'], recover: [script] })]));
      await dispatchOne(deps);
      await recoverBatch(deps);
      const s = await snapshot(db.pool, id);
      assert.equal(s.byKey.a.node_state, expected);
      assert.equal(await submits(s.byKey.a.idempotency_key!), 1);
    });
  }

  test('observe and recover see the attempt\'s own artifacts, with content', async () => {
    const local = runtimeDeps(db.pool);
    let seen: any = null;
    local.executors.register(
      new LocalExecutorAdapter({ executorKey: 'exec.test.own', lane: 'test', handler: {
        prepare: async () => ({
          next_state: 'SUBMITTING',
          prepared_action: { prepared_action_id: 'p', action_type: 't', payload_format: 'json', payload: '{"x":1}', payload_hash: 'sha256:' + '2'.repeat(64), signing_required: false },
        }),
        submit: async () => ({ next_state: 'UNKNOWN' }),
        recover: async (ctx) => {
          seen = ctx;
          return { next_state: 'COMPLETED' };
        },
      } }),
    );
    const id = await approvedMovement(local, plan(key('own-artifacts'), [{ node_key: 'a', node_kind: 'action', action_type: 't', executor_binding: 'exec.test.own' }]));
    await drain(local);
    assert.equal((await snapshot(db.pool, id)).movement.request_state, 'COMPLETED');
    const prepared = seen.attempt_artifacts.find((a: any) => a.artifact_type === 'prepared_action');
    assert.equal(JSON.parse(prepared.content_inline).payload, '{"x":1}');
    assert.deepEqual(seen.prior_artifacts, []);
  });

  test('recovery leaves movements outside EXECUTING alone', async () => {
    const id = await approvedMovement(deps, plan(key('rec-mi'), [simNode('a', {}), simNode('b', { submit: ['UNKNOWN'] })], [{ from: 'a', to: 'b' }]));
    await drain(deps);
    const s = await snapshot(db.pool, id);
    assert.equal(s.movement.request_state, 'MANUAL_INTERVENTION');
    assert.equal(s.byKey.b.node_state, 'UNKNOWN');
    const calls = await db.pool.query(`SELECT count(*)::int AS c FROM sim_side_effects WHERE request_node_id = $1 AND call = 'recover'`, [s.byKey.b.id]);
    assert.equal(calls.rows[0].c, 0);
  });

  test('a dispatch abandoned in PREPARING goes back to READY after the grace, and then completes', async () => {
    const fast = runtimeDeps(db.pool, { FERRY_SUBMITTING_GRACE_SECONDS: '60' });
    const id = await approvedMovement(fast, plan(key('abandoned'), [simNode('a', {})]));
    const node = (await snapshot(db.pool, id)).byKey.a;
    // Simulate a process that died right after claiming the node: drive it there by hand.
    await dispatchByHand(fast, id, node.id, ['DISPATCH_CLAIMED']);
    await recoverBatch(fast);
    assert.equal((await snapshot(db.pool, id)).byKey.a.node_state, 'PREPARING', 'within grace the dispatch may still be running');
    await backdateNodes(db.pool, [id], 'updated_at', 120); // idle longer than the 60 s grace
    await recoverBatch(fast);
    const released = (await snapshot(db.pool, id)).byKey.a;
    assert.equal(released.node_state, 'READY');
    assert.equal(released.error_code, 'DISPATCH_ABANDONED');
    await drain(fast);
    const done = await snapshot(db.pool, id);
    assert.equal(done.movement.request_state, 'COMPLETED');
    assert.equal(await submits(`${node.id}:1`), 1);
  });

  test('a node stuck in SUBMITTING past the lane grace is recovered; within grace it is left alone', async () => {
    const fast = runtimeDeps(db.pool, { FERRY_SUBMITTING_GRACE_SECONDS_BY_LANE: 'sim=60' });
    const id = await approvedMovement(fast, plan(key('stuck'), [simNode('a', {})]));
    // Simulate a process that died right after committing SUBMITTING: drive the node there by hand.
    const node = (await snapshot(db.pool, id)).byKey.a;
    await dispatchByHand(fast, id, node.id, ['DISPATCH_CLAIMED', 'PREPARED']);
    const recoverCalls = async () =>
      (await db.pool.query(`SELECT count(*)::int AS c FROM sim_side_effects WHERE request_node_id = $1 AND call = 'recover'`, [node.id])).rows[0].c;
    await recoverBatch(fast);
    assert.equal(await recoverCalls(), 0, 'within grace: a submit may be in progress');
    assert.equal((await snapshot(db.pool, id)).byKey.a.node_state, 'SUBMITTING');
    await backdateNodes(db.pool, [id], 'updated_at', 120); // stuck longer than the lane's 60 s grace
    await recoverBatch(fast);
    assert.equal(await recoverCalls(), 1);
    const s = await snapshot(db.pool, id);
    // Nothing was submitted under that attempt: the provider says so, and a new attempt is safe.
    assert.equal(s.byKey.a.node_state, 'READY');
    assert.equal(s.byKey.a.error_code, 'RECOVERY_NO_SUBMISSION');
    assert.equal(await submits(`${node.id}:1`), 0);
    // The next attempt runs under a new idempotency key and completes; attempt 1 never submitted.
    await drain(fast);
    const done = await snapshot(db.pool, id);
    assert.equal(done.movement.request_state, 'COMPLETED');
    assert.equal(done.byKey.a.attempt_no, 2);
    assert.equal(await submits(`${node.id}:2`), 1);
  });
});
