import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, test } from 'node:test';
import { parseTransaction, recoverTransactionAddress, type Hex } from 'viem';
import { generatePrivateKey } from 'viem/accounts';
import { buildExecutionContext } from '../src/executors/context.ts';
import { FatalMovementError, TemporaryMovementError } from '../src/executors/errors.ts';
import { payloadHash } from '../src/executors/payload-hash.ts';
import type { ExecutionContext, Executor, PreparedAction, SignRequest } from '../src/executors/protocol.ts';
import { ExecutorRegistry } from '../src/executors/registry.ts';
import { LocalPrivateKeySignerEvm } from '../src/executors/signers/local-private-key-evm.ts';
import { createSimExecutors, SIM_ACTION_KEY, SIM_OBSERVE_KEY } from '../src/executors/sim/index.ts';
import { callsFor, countCalls, duplicateSubmits, recordCall, submitsFor } from '../src/persistence/sim-ledger.ts';
import { testDatabase } from './helpers/db.ts';

const { pool } = await testDatabase();
const registry = new ExecutorRegistry();
createSimExecutors(pool, registry);
const action: Executor = registry.get(SIM_ACTION_KEY);
const observe: Executor = registry.get({ executor_key: SIM_OBSERVE_KEY });

/** A context for a fresh node (its own id, so ledger counts start at zero) with a sim script. */
function context(sim: unknown, opts: { nodeId?: string; attemptNo?: number; nodeKind?: string; intent?: Record<string, unknown> } = {}): ExecutionContext {
  return buildExecutionContext({
    movement: {
      id: randomUUID(),
      compiled_plan_hash: 'sha256:plan',
      template_key: 'sim_demo',
      template_version: 1,
      intent: opts.intent ?? { asset: 'USDC', amount: '25' },
      input_params: { chain_id: 8453 },
    },
    node: {
      id: opts.nodeId ?? randomUUID(),
      node_key: 'step',
      node_kind: opts.nodeKind ?? 'action',
      action_type: 'sim_transfer',
      config: sim === undefined ? {} : { sim },
      timeout_policy: {},
      executor_binding: SIM_ACTION_KEY,
      signer_binding: null,
      predecessor_keys: [],
    },
    attemptNo: opts.attemptNo ?? 1,
    nodes: [],
    priorArtifacts: [],
    riskControls: {},
  });
}

async function preparedFor(ctx: ExecutionContext, executor: Executor = action): Promise<PreparedAction> {
  const r = await executor.prepare(ctx);
  assert.ok(r.prepared_action, 'prepare returned an action');
  return r.prepared_action;
}

function signRequestFor(ctx: ExecutionContext, p: PreparedAction): SignRequest {
  return {
    protocol_version: ctx.protocol_version,
    request_id: ctx.request_id,
    request_node_id: ctx.request_node_id,
    signing_intent: {
      action: p.action_type,
      asset: String(ctx.intent.asset ?? ''),
      amount: String(ctx.intent.amount ?? ''),
      destination: '',
      max_fee_usd: null,
      chain_family: 'evm',
      allowed_payload_hash: p.payload_hash,
    },
    payload_format: p.payload_format,
    payload: p.payload ?? '',
    payload_hash: p.payload_hash,
    metadata: ctx.input_params,
  };
}

describe('sim action executor, unscripted', () => {
  test('passes preflight, prepares a hashed json action, completes on submit, records every call', async () => {
    const ctx = context(undefined);
    assert.equal(await action.preflight(ctx), null);
    const prep = await action.prepare(ctx);
    assert.equal(prep.next_state, 'SUBMITTING');
    const p = prep.prepared_action!;
    assert.equal(p.signing_required, false);
    assert.equal(p.payload_format, 'json');
    assert.equal(p.payload_hash, payloadHash(p.payload!));
    assert.equal(JSON.parse(p.payload!).idempotency_key, `${ctx.request_node_id}:1`);
    const submitted = await action.submit(ctx, p, {});
    assert.equal(submitted.next_state, 'COMPLETED');
    assert.deepEqual(submitted.provider_refs, { sim_ref: `sim-${ctx.request_node_id}:1` });
    assert.equal(submitted.provider_state, 'SIM_COMPLETED');
    const calls = await callsFor(pool, ctx.request_node_id);
    // preflight and prepare only read: the provider's record holds the submit alone.
    assert.deepEqual(calls.map((c) => c.call), ['submit']);
    assert.ok(calls.every((c) => c.executor_key === SIM_ACTION_KEY && c.attempt_no === 1 && c.idempotency_key === `${ctx.request_node_id}:1`));
  });

  test('observe completes by default; health is up', async () => {
    const ctx = context(undefined);
    assert.equal((await action.observe(ctx)).next_state, 'COMPLETED');
    assert.deepEqual(await action.health!(), { ok: true, executor_key: SIM_ACTION_KEY, lane: 'sim' });
    assert.equal(action.lane, 'sim');
  });
});

describe('sim observe executor', () => {
  test('submit reports SUBMITTED so the observer polls; observe follows its script', async () => {
    const ctx = context({ observe: ['OBSERVING', { next_state: 'OBSERVING', retry_after_seconds: 2, provider_state: 'CONFIRMING' }, 'COMPLETED'] }, { nodeKind: 'observe' });
    const submitted = await observe.submit(ctx, await preparedFor(ctx, observe), {});
    assert.equal(submitted.next_state, 'SUBMITTED');
    const seen = [];
    for (let i = 0; i < 4; i++) {
      const r = await observe.observe(ctx);
      seen.push([r.next_state, r.retry_after_seconds, r.provider_state]);
    }
    assert.deepEqual(seen, [
      ['OBSERVING', null, 'SIM_OBSERVING'],
      ['OBSERVING', 2, 'CONFIRMING'],
      ['COMPLETED', null, 'SIM_COMPLETED'],
      ['COMPLETED', null, 'SIM_COMPLETED'],
    ]);
    assert.equal(await countCalls(pool, ctx.request_node_id, 'observe'), 4);
  });
});

describe('scripted sequences', () => {
  test('the n-th submit takes the n-th outcome, the last repeats; refs and errors come through', async () => {
    const nodeId = randomUUID();
    const sim = {
      submit: ['UNKNOWN', { next_state: 'FAILED', error_code: 'INSUFFICIENT_FUNDS', error_detail: 'balance 0' }, { next_state: 'COMPLETED', provider_refs: { txid: '0xabc' } }],
    };
    const results = [];
    for (let attempt = 1; attempt <= 4; attempt++) {
      const ctx = context(sim, { nodeId, attemptNo: attempt });
      results.push(await action.submit(ctx, await preparedFor(ctx), {}));
    }
    assert.deepEqual(results.map((r) => [r.next_state, r.error_code]), [
      ['UNKNOWN', 'SIM_OUTCOME_UNKNOWN'],
      ['FAILED', 'INSUFFICIENT_FUNDS'],
      ['COMPLETED', null],
      ['COMPLETED', null],
    ]);
    assert.equal(results[1].error_detail, 'balance 0');
    assert.deepEqual(results[3].provider_refs, { sim_ref: `sim-${nodeId}:4`, txid: '0xabc' });
  });

  test('the position comes from the ledger, so another process (a new executor instance) continues the script', async () => {
    const nodeId = randomUUID();
    const sim = { observe: ['OBSERVING', 'FAILED', 'COMPLETED'] };
    const ctx = context(sim, { nodeId });
    assert.equal((await observe.observe(ctx)).next_state, 'OBSERVING');
    const [, otherProcessObserve] = createSimExecutors(pool);
    assert.equal((await otherProcessObserve.observe(ctx)).next_state, 'FAILED');
    assert.equal((await observe.observe(ctx)).next_state, 'COMPLETED');
  });

  test('scripted throws raise typed errors, after the call is recorded', async () => {
    const ctx = context({ submit: ['throw_temporary', 'throw_fatal'], observe: ['throw_fatal'] });
    const p = await preparedFor(ctx);
    await assert.rejects(action.submit(ctx, p, {}), (e: unknown) => e instanceof TemporaryMovementError && e.code === 'SIM_TEMPORARY_ERROR');
    await assert.rejects(action.submit(ctx, p, {}), (e: unknown) => e instanceof FatalMovementError && e.code === 'SIM_FATAL_ERROR');
    await assert.rejects(action.observe(ctx), FatalMovementError);
    assert.equal(await countCalls(pool, ctx.request_node_id, 'submit'), 2);
  });

  test('preflight: FAILED and SKIPPED are results, throws are typed errors', async () => {
    const failed = await action.preflight(context({ preflight: 'FAILED' }));
    assert.equal(failed?.next_state, 'FAILED');
    assert.equal(failed?.error_code, 'SIM_PREFLIGHT_REFUSED');
    assert.equal((await action.preflight(context({ preflight: 'SKIPPED' })))?.next_state, 'SKIPPED');
    await assert.rejects(action.preflight(context({ preflight: 'throw_temporary' })), TemporaryMovementError);
    await assert.rejects(action.preflight(context({ preflight: 'throw_fatal' })), FatalMovementError);
  });

  test("prepare: 'none' returns no action; throws are typed errors", async () => {
    const none = await action.prepare(context({ prepare: 'none' }));
    assert.equal(none.prepared_action, null);
    assert.equal(none.next_state, 'FAILED');
    await assert.rejects(action.prepare(context({ prepare: 'throw_temporary' })), TemporaryMovementError);
    await assert.rejects(action.prepare(context({ prepare: 'throw_fatal' })), FatalMovementError);
  });

  test('pre_submit_check follows its script', async () => {
    await action.preSubmitCheck!(context({}));
    await assert.rejects(action.preSubmitCheck!(context({ pre_submit_check: 'throw_temporary' })), TemporaryMovementError);
    await assert.rejects(action.preSubmitCheck!(context({ pre_submit_check: 'throw_fatal' })), FatalMovementError);
  });

  test('an invalid script fails the call with SIM_CONFIG_INVALID', async () => {
    for (const sim of [{ submit: ['DONE'] }, { latency_ms: -1 }, { preflight: 'maybe' }, 'fast']) {
      await assert.rejects(action.preflight(context(sim)), (e: unknown) => e instanceof FatalMovementError && e.code === 'SIM_CONFIG_INVALID', JSON.stringify(sim));
    }
  });
});

describe('recover', () => {
  test('COMPLETED when the ledger holds a submit for this attempt, READY (RECOVERY_NO_SUBMISSION) when not', async () => {
    const nodeId = randomUUID();
    const first = context({}, { nodeId, attemptNo: 1 });
    await action.submit(first, await preparedFor(first), {});
    assert.equal((await action.recover(first)).next_state, 'COMPLETED');
    // Attempt 2 was committed SUBMITTING but the process died before its submit.
    const second = context({}, { nodeId, attemptNo: 2 });
    const r = await action.recover(second);
    assert.equal(r.next_state, 'READY');
    assert.equal(r.error_code, 'RECOVERY_NO_SUBMISSION');
    assert.deepEqual((await submitsFor(pool, `${nodeId}:2`)).length, 0);
  });

  test('a scripted recover overrides the ledger rule', async () => {
    const ctx = context({ recover: ['UNKNOWN', 'SUBMITTED'] });
    assert.equal((await action.recover(ctx)).next_state, 'UNKNOWN');
    assert.equal((await action.recover(ctx)).next_state, 'SUBMITTED');
    assert.equal(await countCalls(pool, ctx.request_node_id, 'submit'), 0);
  });
});

describe('signing', () => {
  test('signing_required: prepare asks for a signature, submit refuses without one and records nothing', async () => {
    const ctx = context({ signing_required: true });
    const prep = await action.prepare(ctx);
    assert.equal(prep.next_state, 'AWAITING_SIGNATURE');
    assert.equal(prep.prepared_action?.signing_required, true);
    await assert.rejects(action.submit(ctx, prep.prepared_action!, {}), (e: unknown) => e instanceof FatalMovementError && e.code === 'SIM_SIGNATURE_MISSING');
    assert.equal(await countCalls(pool, ctx.request_node_id, 'submit'), 0);
  });

  test('an evm_raw_tx action is a real unsigned transaction the local signer signs; submit sees the signature', async () => {
    const signer = new LocalPrivateKeySignerEvm({ signerKey: 'dev', privateKey: generatePrivateKey() });
    const dest = '0x4444444444444444444444444444444444444444';
    const ctx = context({ signing_required: true, payload_format: 'evm_raw_tx' }, { intent: { asset: 'USDC', amount: '1', destination: { address: dest } } });
    const p = await preparedFor(ctx);
    const tx = parseTransaction(p.payload as Hex);
    assert.equal(tx.chainId, 8453);
    assert.equal(tx.to, dest);
    // The sim's calldata is not an ERC-20 call: the plan would have to name that call.
    const expected_effect = {
      chain_id: 8453,
      asset: 'native' as const,
      to: dest,
      amount_base_units: '0',
      call: { method: 'sim', selector: tx.data!.slice(0, 10) },
      // Every EVM signature needs the chain's fee cap in its expected effect.
      max_fee_per_gas_cap_wei: (tx.maxFeePerGas ?? tx.gasPrice ?? 0n).toString(),
    };
    const signResult = await signer.sign({ ...signRequestFor(ctx, p), expected_effect });
    assert.equal((await recoverTransactionAddress({ serializedTransaction: signResult.signature as never })).toLowerCase(), signer.address);
    const r = await action.submit(ctx, p, { signResult });
    assert.equal(r.next_state, 'COMPLETED');
    assert.equal(r.provider_refs.sim_signer_ref, signResult.signer_ref);
  });

  test('an eip712 action is typed data, which the local signer refuses by policy', async () => {
    const signer = new LocalPrivateKeySignerEvm({ signerKey: 'dev', privateKey: generatePrivateKey() });
    const ctx = context({ signing_required: true, payload_format: 'eip712' });
    const p = await preparedFor(ctx);
    assert.ok(JSON.parse(p.payload!).primaryType);
    await assert.rejects(signer.sign(signRequestFor(ctx, p)), (e: unknown) => e instanceof FatalMovementError && e.code === 'SIGNER_POLICY_VIOLATION');
  });
});

describe('side-effect ledger', () => {
  test('recordCall returns how many calls of that kind the node made before', async () => {
    const nodeId = randomUUID();
    const entry = { request_node_id: nodeId, attempt_no: 1, idempotency_key: `${nodeId}:1`, executor_key: 'x', call: 'observe' as const };
    assert.deepEqual(await recordCall(pool, entry), { priorCalls: 0 });
    assert.deepEqual(await recordCall(pool, entry), { priorCalls: 1 });
    assert.deepEqual(await recordCall(pool, { ...entry, call: 'submit' }), { priorCalls: 0 });
    assert.deepEqual(await recordCall(pool, { ...entry, attempt_no: 2 }), { priorCalls: 2 });
  });

  test('the double-submit query finds a key submitted twice, and only such keys', async () => {
    const before = new Set((await duplicateSubmits(pool)).map((d) => d.idempotency_key));
    const once = context({});
    await action.submit(once, await preparedFor(once), {});
    const twice = context({});
    const p = await preparedFor(twice);
    await action.submit(twice, p, {});
    await action.submit(twice, p, {});
    const found = (await duplicateSubmits(pool)).filter((d) => !before.has(d.idempotency_key));
    assert.deepEqual(found, [{ idempotency_key: twice.idempotency_key, submits: 2 }]);
    assert.equal((await submitsFor(pool, twice.idempotency_key!)).length, 2);
    assert.equal((await submitsFor(pool, once.idempotency_key!)).length, 1);
  });
});
