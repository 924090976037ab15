import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { keccak256, parseTransaction, serializeTransaction, type Hex, type PublicClient } from 'viem';
import { FatalMovementError } from '../src/executors/errors.ts';
import { payloadHash } from '../src/executors/payload-hash.ts';
import { LocalPrivateKeySignerEvm } from '../src/executors/signers/local-private-key-evm.ts';
import { dispatchOne } from '../src/actors/dispatcher.ts';
import type { WorkerDeps } from '../src/actors/execution.ts';
import { observeBatch } from '../src/actors/observer.ts';
import { createEvmLane, EvmNativeTransferExecutor, EvmNonceManager } from '../src/executors/evm/index.ts';
import type { ExecutionContext, Executor, PreparedAction, SignRequest, SubmitOptions } from '../src/executors/protocol.ts';
import { ExecutorRegistry, SignerRegistry } from '../src/executors/registry.ts';
import { createApp } from '../src/http/app.ts';
import type { ApiRuntime } from '../src/http/v3/context.ts';
import { artifactsOfNodes } from '../src/persistence/artifacts.ts';
import type { Pool } from '../src/persistence/db.ts';
import { submitsFor } from '../src/persistence/sim-ledger.ts';
import { ANVIL_DEV_ADDRESS, ANVIL_DEV_KEY, freshAddress, localChainForFile, type Anvil } from './helpers/anvil.ts';
import { scratchDatabase } from './helpers/db.ts';
import { nativeTransferPlan } from './helpers/evm.ts';
import { callerFor, expectStatus } from './helpers/http.ts';
import { approvedMovement, dispatchByHand, plan, runtimeDeps, snapshot } from './helpers/runtime.ts';
import { createTokens } from './helpers/tokens.ts';

/**
 * An operator's cancel of a movement whose node is with its provider, through the API: the lane is
 * asked, its answer recorded on the node and in the audit log, and only then the node settles.
 * On anvil, the EVM cancel is a zero-value self-transfer at the attempt's nonce; whichever of it and
 * the transfer is mined decides, and the recipient is never paid twice.
 */

let anvil: Anvil;
let chain: PublicClient;
localChainForFile(async (local) => {
  ({ anvil, chain } = local);
  // Nothing is mined unless a test says so: a transfer must be able to sit in the mempool.
  await local.anvil.rpc('evm_setAutomine', [false]);
});

async function apiFor(pool: Pool, deps: WorkerDeps) {
  const tokens = await createTokens(pool, { operator: 'operator', requester: 'requester' });
  const runtime = { deps, boss: null } as unknown as ApiRuntime;
  const app = createApp({ pool, config: deps.config, runtime });
  return callerFor(app, tokens);
}

function evmDeps(pool: Pool, wrap?: (real: EvmNativeTransferExecutor) => Executor): WorkerDeps {
  const base = runtimeDeps(pool);
  const executors = new ExecutorRegistry();
  const signers = new SignerRegistry();
  const { executor, signer } = createEvmLane({ rpcUrl: anvil.url, signerPrivateKey: ANVIL_DEV_KEY, pollSeconds: 0, nonces: new EvmNonceManager(pool) });
  executors.register(wrap ? wrap(executor) : executor);
  signers.register(signer);
  return { ...base, executors, signers };
}

const observeNode = (sim: Record<string, unknown>) => ({ node_key: 'pay', node_kind: 'action', action_type: 'sim_observe', executor_binding: 'exec.sim.observe', config: { sim } });

async function signedVersions(pool: Pool, nodeId: string) {
  return (await artifactsOfNodes(pool, [nodeId])).filter((a) => a.artifact_type === 'signature').map((a) => ({ raw: a.content_inline as Hex, cancel: a.artifact_metadata?.cancel === true }));
}

async function auditOf(pool: Pool, movementId: string) {
  const { rows } = await pool.query(
    `SELECT details FROM (SELECT action, entity_id, details, id FROM audit_outbox UNION ALL SELECT action, entity_id, details, id FROM audit_events) a
      WHERE action = 'movement.cancel' AND entity_id = $1 ORDER BY id`,
    [movementId],
  );
  return rows.map((r) => r.details as Record<string, unknown>);
}

const balance = (address: Hex) => chain.getBalance({ address, blockTag: 'latest' });

test('sim: a submitted node is cancelled at its provider, then the movement; the answer is on the node and in the audit log', async (t) => {
  const db = await scratchDatabase(t);
  const deps = runtimeDeps(db.pool);
  const call = await apiFor(db.pool, deps);
  const id = await approvedMovement(deps, plan('sim-cancel', [observeNode({ observe: ['OBSERVING'] }), { ...observeNode({}), node_key: 'after' }], [{ from: 'pay', to: 'after' }]));
  assert.equal(await dispatchOne(deps), true);
  const pay = (await snapshot(db.pool, id)).byKey.pay;
  assert.equal(pay.node_state, 'SUBMITTED');

  expectStatus(await call('POST', `/v3/movements/${id}/cancel`, 'operator', {}), 200);
  const after = await snapshot(db.pool, id);
  assert.equal(after.movement.request_state, 'CANCELLED');
  assert.equal(after.byKey.pay.node_state, 'CANCELLED');
  assert.equal(after.byKey.after.node_state, 'CANCELLED', 'the node that had not started is cancelled with the movement');
  const record = after.byKey.pay.provider_refs.cancel as Record<string, unknown>;
  assert.equal(record.answer, 'CANCELLED');
  assert.equal(record.provider_state, 'SIM_CANCELLED');
  const audits = await auditOf(db.pool, id);
  assert.equal(audits.length, 1);
  assert.equal(audits[0]!.answer, 'CANCELLED');
  assert.equal(audits[0]!.node_key, 'pay');
  const calls = await db.pool.query(`SELECT call FROM sim_side_effects WHERE request_node_id = $1 ORDER BY id`, [pay.id]);
  assert.deepEqual(
    calls.rows.map((r) => r.call).filter((c) => c === 'submit' || c === 'cancel'),
    ['submit', 'cancel'],
  );
  assert.equal((await submitsFor(db.pool, pay.idempotency_key!)).length, 1);
  // Final: a second cancel changes nothing.
  expectStatus(await call('POST', `/v3/movements/${id}/cancel`, 'operator', {}), 409, 'INVALID_TRANSITION');
});

test('sim: a provider that says no is recorded, the cancel is refused with 409 CANCEL_REFUSED, and the movement goes on to complete', async (t) => {
  const db = await scratchDatabase(t);
  const deps = runtimeDeps(db.pool);
  const call = await apiFor(db.pool, deps);
  const id = await approvedMovement(
    deps,
    plan('sim-cancel-refused', [observeNode({ observe: ['OBSERVING', 'COMPLETED'], cancel: [{ next_state: 'OBSERVING', error_code: 'SIM_ALREADY_PROCESSED', error_detail: 'paid out' }] })]),
  );
  assert.equal(await dispatchOne(deps), true);
  await observeBatch(deps);
  assert.equal((await snapshot(db.pool, id)).byKey.pay.node_state, 'OBSERVING');

  const r = await call('POST', `/v3/movements/${id}/cancel`, 'operator', { reason: 'wrong address' });
  expectStatus(r, 409, 'CANCEL_REFUSED');
  assert.equal(r.body.error.details.answers[0].error_code, 'SIM_ALREADY_PROCESSED');
  const s = await snapshot(db.pool, id);
  assert.equal(s.movement.request_state, 'EXECUTING');
  assert.equal(s.byKey.pay.node_state, 'OBSERVING');
  assert.equal((s.byKey.pay.provider_refs.cancel as Record<string, unknown>).error_code, 'SIM_ALREADY_PROCESSED');
  assert.equal((await auditOf(db.pool, id))[0]!.reason, 'wrong address');
  await db.pool.query(`UPDATE request_nodes SET next_observe_at = now() WHERE request_id = $1`, [id]);
  await observeBatch(deps);
  assert.equal((await snapshot(db.pool, id)).movement.request_state, 'COMPLETED');
});

test('a node between claim and provider refuses the cancel (409 CANCEL_NODE_IN_DISPATCH) and nothing changes', async (t) => {
  const db = await scratchDatabase(t);
  const deps = runtimeDeps(db.pool);
  const call = await apiFor(db.pool, deps);
  const id = await approvedMovement(deps, plan('sim-cancel-dispatch', [observeNode({})]));
  const node = (await snapshot(db.pool, id)).byKey.pay;
  await dispatchByHand(deps, id, node.id, ['DISPATCH_CLAIMED', 'PREPARED']);
  assert.equal((await snapshot(db.pool, id)).byKey.pay.node_state, 'SUBMITTING');
  expectStatus(await call('POST', `/v3/movements/${id}/cancel`, 'operator', {}), 409, 'CANCEL_NODE_IN_DISPATCH');
  assert.equal((await snapshot(db.pool, id)).movement.request_state, 'EXECUTING');
  assert.equal((await auditOf(db.pool, id)).length, 0, 'a refused cancel writes nothing');
});

test('evm: a transfer still in the mempool is replaced by a zero-value self-transfer at its nonce; once mined the node and the movement are CANCELLED and nothing was paid', async (t) => {
  const db = await scratchDatabase(t);
  const deps = evmDeps(db.pool);
  const call = await apiFor(db.pool, deps);
  const to = freshAddress();
  const nonceBefore = await chain.getTransactionCount({ address: ANVIL_DEV_ADDRESS, blockTag: 'latest' });
  const id = await approvedMovement(deps, nativeTransferPlan('evm-cancel', { to, value_wei: '4242', confirmations: 2 }), { asset: 'ETH', amount: '1' });
  assert.equal(await dispatchOne(deps), true);
  const node = (await snapshot(db.pool, id)).byKey.pay;
  assert.equal(node.node_state, 'SUBMITTED');
  const [original] = await signedVersions(db.pool, node.id);

  const r = await call('POST', `/v3/movements/${id}/cancel`, 'operator', { reason: 'wrong amount' });
  expectStatus(r, 200);
  assert.equal(r.body.movement.state, 'EXECUTING', 'pending until the chain settles it');
  const versions = await signedVersions(db.pool, node.id);
  assert.equal(versions.length, 2);
  const cancel = versions.find((v) => v.cancel)!;
  const tx = parseTransaction(cancel.raw);
  const first = parseTransaction(original!.raw);
  assert.equal(tx.nonce, first.nonce, 'the same nonce');
  assert.equal(tx.to?.toLowerCase(), ANVIL_DEV_ADDRESS, 'to the sender itself');
  assert.equal(tx.value ?? 0n, 0n);
  assert.ok(tx.maxFeePerGas! > first.maxFeePerGas!, 'outbids the transfer');
  const recorded = (await snapshot(db.pool, id)).byKey.pay.provider_refs.cancel as Record<string, unknown>;
  assert.equal(recorded.provider_state, 'cancel_broadcast');
  assert.deepEqual((await auditOf(db.pool, id)).map((a) => a.provider_state), ['cancel_signed', 'cancel_broadcast']);

  // A second cancel asks again and signs nothing new.
  expectStatus(await call('POST', `/v3/movements/${id}/cancel`, 'operator', {}), 200);
  assert.equal((await signedVersions(db.pool, node.id)).length, 2);

  await anvil.mine(1);
  await db.pool.query(`UPDATE request_nodes SET next_observe_at = now() WHERE id = $1`, [node.id]);
  await observeBatch(deps);
  assert.equal((await snapshot(db.pool, id)).byKey.pay.node_state, 'OBSERVING', 'mined, not yet at the depth the transfer needs');
  await anvil.mine(2);
  await db.pool.query(`UPDATE request_nodes SET next_observe_at = now() WHERE id = $1`, [node.id]);
  await observeBatch(deps);
  const s = await snapshot(db.pool, id);
  assert.equal(s.byKey.pay.node_state, 'CANCELLED');
  assert.equal(s.byKey.pay.provider_state, 'cancelled');
  assert.equal(s.movement.request_state, 'CANCELLED');
  assert.equal(await balance(to), 0n, 'the recipient was never paid');
  assert.equal(await chain.getTransactionCount({ address: ANVIL_DEV_ADDRESS, blockTag: 'latest' }), nonceBefore + 1, 'one nonce used, by the cancel');
  assert.ok(await chain.getTransactionReceipt({ hash: keccak256(cancel.raw) }));
  await assert.rejects(chain.getTransactionReceipt({ hash: keccak256(original!.raw) }));
});

test('evm: a transfer already mined cannot be cancelled (409 CANCEL_REFUSED, EVM_CANCEL_TOO_LATE) and completes, paid once', async (t) => {
  const db = await scratchDatabase(t);
  const deps = evmDeps(db.pool);
  const call = await apiFor(db.pool, deps);
  const to = freshAddress();
  const id = await approvedMovement(deps, nativeTransferPlan('evm-cancel-late', { to, value_wei: '777', confirmations: 2 }), { asset: 'ETH', amount: '1' });
  assert.equal(await dispatchOne(deps), true);
  await anvil.mine(1);
  const r = await call('POST', `/v3/movements/${id}/cancel`, 'operator', {});
  expectStatus(r, 409, 'CANCEL_REFUSED');
  assert.equal(r.body.error.details.answers[0].error_code, 'EVM_CANCEL_TOO_LATE');
  const node = (await snapshot(db.pool, id)).byKey.pay;
  assert.equal((await signedVersions(db.pool, node.id)).length, 1, 'nothing was signed for the cancel');
  await anvil.mine(2);
  await db.pool.query(`UPDATE request_nodes SET next_observe_at = now() WHERE id = $1`, [node.id]);
  await observeBatch(deps);
  assert.equal((await snapshot(db.pool, id)).movement.request_state, 'COMPLETED');
  assert.equal(await balance(to), 777n, 'paid exactly once');
});

test('evm: the transfer mined while its cancel was being signed wins; the cancel is refused by the chain, recorded, and the transfer completes once', async (t) => {
  const db = await scratchDatabase(t);
  // The block comes between the lane's proposal and the broadcast of the signed cancel.
  const deps = evmDeps(db.pool, (real) =>
    ({
      executorKey: real.executorKey,
      lane: real.lane,
      preflight: (ctx: ExecutionContext) => real.preflight(ctx),
      prepare: (ctx: ExecutionContext) => real.prepare(ctx),
      preSubmitCheck: (ctx: ExecutionContext) => real.preSubmitCheck(ctx),
      submit: (ctx: ExecutionContext, prepared: PreparedAction, opts: SubmitOptions) => real.submit(ctx, prepared, opts),
      observe: (ctx: ExecutionContext) => real.observe(ctx),
      recover: (ctx: ExecutionContext) => real.recover(ctx),
      inspect: (ctx: ExecutionContext) => real.inspect(ctx),
      cancel: async (ctx: ExecutionContext) => {
        const proposal = await real.cancel(ctx);
        await anvil.mine(1);
        return proposal;
      },
    }) satisfies Executor,
  );
  const call = await apiFor(db.pool, deps);
  const to = freshAddress();
  const id = await approvedMovement(deps, nativeTransferPlan('evm-cancel-race', { to, value_wei: '555', confirmations: 1 }), { asset: 'ETH', amount: '1' });
  assert.equal(await dispatchOne(deps), true);
  const r = await call('POST', `/v3/movements/${id}/cancel`, 'operator', {});
  expectStatus(r, 409, 'CANCEL_REFUSED');
  const node = (await snapshot(db.pool, id)).byKey.pay;
  assert.equal((node.provider_refs.cancel as Record<string, unknown>).provider_state, 'cancel_not_broadcast');
  await db.pool.query(`UPDATE request_nodes SET next_observe_at = now() WHERE id = $1`, [node.id]);
  await observeBatch(deps);
  const s = await snapshot(db.pool, id);
  assert.equal(s.byKey.pay.node_state, 'COMPLETED');
  assert.equal(s.movement.request_state, 'COMPLETED');
  assert.equal(await balance(to), 555n, 'paid exactly once');
});

describe('the signer signs a cancel only in its one shape, and only as the cancel of the approved original', () => {
  const payee = '0x1111111111111111111111111111111111111111';
  const original = serializeTransaction({ type: 'eip1559', chainId: 8453, nonce: 7, to: payee, value: 1_000_000n, gas: 60_000n, maxFeePerGas: 2_000_000_000n, maxPriorityFeePerGas: 1_000_000n });
  const effect = { chain_id: 8453, asset: 'native' as const, to: payee, amount_base_units: '1000000', max_fee_per_gas_cap_wei: '500000000000' };
  const cancelTx = (over: Record<string, unknown> = {}) =>
    serializeTransaction({ type: 'eip1559', chainId: 8453, nonce: 7, to: ANVIL_DEV_ADDRESS, value: 0n, gas: 21_000n, maxFeePerGas: 3_000_000_000n, maxPriorityFeePerGas: 2_000_000n, ...over } as never);
  const req = (payload: string, cancelled: string | null = original): SignRequest => ({
    protocol_version: '1.0',
    request_id: 'req-1',
    request_node_id: 'node-1',
    signing_intent: { action: 'evm_cancel', asset: 'ETH', amount: '1', destination: payee, max_fee_usd: null, chain_family: 'evm', allowed_payload_hash: payloadHash(payload) },
    payload_format: 'evm_raw_tx',
    payload,
    payload_hash: payloadHash(payload),
    metadata: {},
    expected_effect: effect,
    ...(cancelled ? { cancels: { payload: cancelled, payload_hash: payloadHash(cancelled), replacement_no: 1 } } : {}),
  });
  const signer = new LocalPrivateKeySignerEvm({ signerKey: 'k', privateKey: ANVIL_DEV_KEY });
  const refusedFor = (rule: string) => (err: unknown) => err instanceof FatalMovementError && err.code === 'SIGNER_POLICY_VIOLATION' && err.details.rule === rule;

  test('the zero-value self-transfer at the original nonce, fees raised, is signed', async () => {
    const signed = await signer.sign(req(cancelTx()));
    assert.equal(signed.signature_format, 'evm_signed_tx');
  });
  for (const [name, over, rule] of [
    ['another nonce', { nonce: 8 }, 'cancel_nonce'],
    ['a value', { value: 1n }, 'cancel_value'],
    ['another recipient', { to: payee }, 'cancel_to'],
    ['calldata', { data: '0x12345678' }, 'cancel_data'],
    ['more gas', { gas: 60_000n }, 'cancel_gas'],
    ['lower fees', { maxFeePerGas: 1_000_000_000n }, 'cancel_fee_decrease'],
    ['another chain', { chainId: 1 }, 'cancel_chain_id'],
  ] as const) {
    test(`refused: ${name}`, async () => {
      await assert.rejects(signer.sign(req(cancelTx(over))), refusedFor(rule));
    });
  }
  test('refused without `cancels` (a zero-value transfer is no approved effect), and for an original the plan did not approve', async () => {
    await assert.rejects(signer.sign(req(cancelTx(), null)), (e: unknown) => e instanceof FatalMovementError && e.code === 'SIGNER_POLICY_VIOLATION');
    const other = serializeTransaction({ type: 'eip1559', chainId: 8453, nonce: 7, to: ANVIL_DEV_ADDRESS, value: 5n, gas: 21_000n, maxFeePerGas: 2_000_000_000n, maxPriorityFeePerGas: 1_000_000n });
    await assert.rejects(signer.sign(req(cancelTx(), other)), refusedFor('to'));
  });
});
