import assert from 'node:assert/strict';
import { test } from 'node:test';
import { keccak256, type Hex, type PublicClient } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { dispatchOne } from '../src/actors/dispatcher.ts';
import { configuredRegistries } from '../src/actors/runtime.ts';
import { log } from '../src/log.ts';
import { loadConfig } from '../src/config.ts';
import type { WorkerDeps } from '../src/actors/execution.ts';
import { createEvmLane, EVM_NATIVE_TRANSFER_KEY, EvmChainRouter, EvmNativeTransferExecutor, EvmNonceManager } from '../src/executors/evm/index.ts';
import { classifyBroadcastError } from '../src/executors/evm/rpc-errors.ts';
import type { ExecutionContext, Executor, PreparedAction } from '../src/executors/protocol.ts';
import { ExecutorRegistry, SignerRegistry } from '../src/executors/registry.ts';
import { artifactsOfNodes } from '../src/persistence/artifacts.ts';
import type { Pool } from '../src/persistence/db.ts';
import { transitionsOfEntity } from '../src/persistence/movements.ts';
import { ANVIL_CHAIN_ID, ANVIL_DEV_ADDRESS, ANVIL_DEV_KEY, freshAddress, localChainForFile, type Anvil, TEST_FEE_CAP_WEI } from './helpers/anvil.ts';
import { scratchDatabase } from './helpers/db.ts';
import { dyingInSubmit, nativeTransferPlan } from './helpers/evm.ts';
import { approvedMovement, drain, runtimeDeps, snapshot } from './helpers/runtime.ts';

/**
 * The EVM lane against a real chain (anvil on loopback, a block per transaction): a transfer runs
 * from prepare to confirmed receipt through the real dispatcher, observer and recovery; a process
 * that dies around the broadcast is resolved from the stored signed bytes alone, and the chain
 * ends up with exactly one transfer.
 */

let anvil: Anvil;
let chain: PublicClient;

localChainForFile((local) => {
  ({ anvil, chain } = local);
});

// Recovery may look at a SUBMITTING evm node at once; the observer may look again at once.
const ENV = { FERRY_SUBMITTING_GRACE_SECONDS_BY_LANE: 'evm=0.001' };

function evmDeps(pool: Pool, executorOverride?: (real: EvmNativeTransferExecutor) => Executor): WorkerDeps {
  const base = runtimeDeps(pool, ENV);
  const executors = new ExecutorRegistry();
  const signers = new SignerRegistry();
  const { executor, signer } = createEvmLane({ rpcUrl: anvil.url, signerPrivateKey: ANVIL_DEV_KEY, pollSeconds: 0, nonces: new EvmNonceManager(pool) });
  executors.register(executorOverride ? executorOverride(executor) : executor);
  signers.register(signer);
  return { ...base, executors, signers };
}

const senderNonce = () => chain.getTransactionCount({ address: ANVIL_DEV_ADDRESS, blockTag: 'pending' });

function signRequestFor(p: PreparedAction) {
  return {
    protocol_version: '1.0',
    request_id: 'r',
    request_node_id: 'n',
    signing_intent: { action: 'a', asset: 'ETH', amount: '1', destination: 'x', max_fee_usd: null, chain_family: 'evm', allowed_payload_hash: p.payload_hash },
    payload_format: p.payload_format,
    payload: p.payload!,
    payload_hash: p.payload_hash,
    metadata: {},
    // These tests are about the executor: the signer is told to expect exactly what was prepared.
    expected_effect: {
      chain_id: Number(p.provider_hints.chain_id),
      asset: 'native' as const,
      to: String(p.provider_hints.to),
      amount_base_units: String(p.provider_hints.value_wei),
      max_fee_per_gas_cap_wei: TEST_FEE_CAP_WEI,
    },
  };
}

async function attemptArtifacts(pool: Pool, nodeId: string, attemptNo: number) {
  return (await artifactsOfNodes(pool, [nodeId])).filter((a) => a.attempt_no === attemptNo);
}

test('a transfer runs to COMPLETED: the recipient gets exactly the value, the node carries the hash, the receipt is proof', async (t) => {
  const db = await scratchDatabase(t);
  const deps = evmDeps(db.pool);
  const to = freshAddress();
  const nonceBefore = await senderNonce();
  const id = await approvedMovement(deps, nativeTransferPlan('evm-ok'), { asset: 'ETH', amount: '1234567', destination: { address: to.toLowerCase() } });

  await drain(deps);

  const s = await snapshot(db.pool, id);
  assert.equal(s.movement.request_state, 'COMPLETED');
  const node = s.byKey.pay;
  assert.equal(node.node_state, 'COMPLETED');
  assert.equal(node.provider_state, 'confirmed');
  assert.equal(await chain.getBalance({ address: to }), 1_234_567n);
  assert.equal(await senderNonce(), nonceBefore + 1, 'one transaction sent');

  const hash = node.provider_refs.tx_hash as Hex;
  assert.match(hash, /^0x[0-9a-f]{64}$/);
  assert.equal(node.provider_refs.nonce, nonceBefore);
  assert.equal(node.provider_refs.from, ANVIL_DEV_ADDRESS);
  const receipt = await chain.getTransactionReceipt({ hash });
  assert.equal(receipt.status, 'success');
  assert.equal(receipt.to, to.toLowerCase());

  const artifacts = await attemptArtifacts(db.pool, node.id, node.attempt_no);
  const signature = artifacts.find((a) => a.artifact_type === 'signature');
  assert.equal(keccak256(signature!.content_inline as Hex), hash, 'the hash is the signed bytes\' hash');
  const proof = artifacts.find((a) => a.artifact_type === 'proof');
  assert.ok(proof, 'the receipt is recorded as proof');
  const p = JSON.parse(proof.content_inline!);
  assert.equal(p.block_hash, receipt.blockHash);
  assert.equal(p.block_number, Number(receipt.blockNumber));
  assert.equal(p.gas_used, '21000');
  assert.equal(p.effective_gas_price, receipt.effectiveGasPrice.toString());
});

test('with confirmations 3 the node observes until two more blocks are mined', async (t) => {
  const db = await scratchDatabase(t);
  const deps = evmDeps(db.pool);
  const to = freshAddress();
  const id = await approvedMovement(deps, nativeTransferPlan('evm-conf', { to, value_wei: '777', confirmations: 3 }), { asset: 'ETH', amount: '1' });

  await drain(deps);
  let node = (await snapshot(db.pool, id)).byKey.pay;
  assert.equal(node.node_state, 'OBSERVING', 'mined, one confirmation');
  assert.equal(node.provider_refs.confirmations, 1);
  assert.equal(await chain.getBalance({ address: to }), 777n, 'config value_wei wins over the intent amount');

  await anvil.mine(1);
  await drain(deps);
  node = (await snapshot(db.pool, id)).byKey.pay;
  assert.equal(node.node_state, 'OBSERVING', 'two confirmations are not three');
  assert.equal(node.provider_refs.confirmations, 2);

  await anvil.mine(1);
  await drain(deps);
  const s = await snapshot(db.pool, id);
  assert.equal(s.byKey.pay.node_state, 'COMPLETED');
  assert.equal(s.byKey.pay.provider_refs.confirmations, 3);
  assert.equal(s.movement.request_state, 'COMPLETED');
});

for (const when of ['after_broadcast', 'before_broadcast'] as const) {
  test(`a process dying in submit() ${when.replace('_', ' ')}: recovery resolves it from the signed bytes, one transfer on chain`, async (t) => {
    const db = await scratchDatabase(t);
    const dying = dyingInSubmit(when, { label: 'the broadcast', reason: 'the process died in submit()' });
    const crashing = evmDeps(db.pool, dying.wrap);
    const deps = evmDeps(db.pool);
    const to = freshAddress();
    const nonceBefore = await senderNonce();
    const id = await approvedMovement(deps, nativeTransferPlan(`evm-crash-${when}`, { to, value_wei: '5000' }), { asset: 'ETH', amount: '5000' });

    const inflight = dispatchOne(crashing);
    await dying.reached;
    const stuck = (await snapshot(db.pool, id)).byKey.pay;
    assert.equal(stuck.node_state, 'SUBMITTING', 'the attempt is undecided');
    const signed = (await attemptArtifacts(db.pool, stuck.id, stuck.attempt_no)).find((a) => a.artifact_type === 'signature');
    assert.ok(signed?.content_inline, 'the signed bytes were committed before submit()');
    const hash = keccak256(signed.content_inline as Hex);
    if (when === 'after_broadcast') {
      assert.equal(await senderNonce(), nonceBefore + 1, 'the transfer reached the chain');
    } else {
      assert.equal(await senderNonce(), nonceBefore, 'nothing reached the chain');
      await assert.rejects(chain.getTransaction({ hash }), /could not be found/);
    }

    // A new process: recovery (never submit) resolves the attempt, the observer finishes it.
    await drain(deps);
    const s = await snapshot(db.pool, id);
    assert.equal(s.movement.request_state, 'COMPLETED');
    assert.equal(s.byKey.pay.node_state, 'COMPLETED');
    assert.equal(s.byKey.pay.attempt_no, stuck.attempt_no, 'no new attempt');
    assert.equal(s.byKey.pay.provider_refs.tx_hash, hash, 'the very transaction that was signed');
    assert.equal(await senderNonce(), nonceBefore + 1, 'exactly one transaction from the sender');
    assert.equal(await chain.getBalance({ address: to }), 5000n, 'paid exactly once');
    const events = (await transitionsOfEntity(db.pool, stuck.id)).map((tr) => tr.event_type);
    assert.ok(events.includes('RECOVERED'), 'recovery resolved it');
    assert.ok(!events.includes('SUBMIT_RESULT'), 'no submit answered for the attempt');

    // The dead process's late answer is refused: the node moved on.
    dying.die();
    assert.equal(await inflight, true);
    assert.equal((await snapshot(db.pool, id)).byKey.pay.node_state, 'COMPLETED');
  });
}

test('preflight refuses a bad address, a zero value and a chain mismatch, with their codes', async (t) => {
  const db = await scratchDatabase(t);
  const deps = evmDeps(db.pool);
  const nonceBefore = await senderNonce();
  const cases = [
    { key: 'evm-bad-address', config: { to: '0x1234', value_wei: '1' }, binding: {}, code: 'EVM_INVALID_ADDRESS' },
    { key: 'evm-zero-address', config: { to: '0x0000000000000000000000000000000000000000', value_wei: '1' }, binding: {}, code: 'EVM_INVALID_ADDRESS' },
    // A mixed-case address whose checksum is wrong is a typo, not an address.
    { key: 'evm-bad-checksum', config: { to: '0xF39fd6e51aad88F6F4ce6aB8827279cffFb92266', value_wei: '1' }, binding: {}, code: 'EVM_INVALID_ADDRESS' },
    { key: 'evm-zero-value', config: { to: freshAddress(), value_wei: '0' }, binding: {}, code: 'EVM_INVALID_VALUE' },
    { key: 'evm-fraction', config: { to: freshAddress(), value_wei: '1.5' }, binding: {}, code: 'EVM_INVALID_VALUE' },
    { key: 'evm-other-chain', config: { to: freshAddress(), value_wei: '1' }, binding: { chain_id: 1 }, code: 'EVM_CHAIN_MISMATCH' },
  ];
  const ids = [];
  for (const c of cases) ids.push(await approvedMovement(deps, nativeTransferPlan(c.key, c.config, c.binding), { asset: 'ETH', amount: '1' }));
  await drain(deps);
  for (const [i, c] of cases.entries()) {
    const s = await snapshot(db.pool, ids[i]);
    assert.equal(s.byKey.pay.node_state, 'FAILED', c.key);
    assert.equal(s.byKey.pay.error_code, c.code, c.key);
  }
  assert.equal(await senderNonce(), nonceBefore, 'nothing was sent');
});

test('insufficient funds is refused at broadcast, a reverted transfer fails with its receipt', async (t) => {
  const db = await scratchDatabase(t);
  const deps = evmDeps(db.pool);
  const nonceBefore = await senderNonce();
  const poorId = await approvedMovement(deps, nativeTransferPlan('evm-poor', { to: freshAddress(), value_wei: (10n ** 30n).toString() }), { asset: 'ETH', amount: '1' });
  await drain(deps);
  const poor = (await snapshot(db.pool, poorId)).byKey.pay;
  assert.equal(poor.node_state, 'FAILED');
  assert.equal(poor.error_code, 'EVM_INSUFFICIENT_FUNDS');
  assert.equal(await senderNonce(), nonceBefore, 'the refused transaction took no nonce');

  // A recipient whose code reverts: the transaction is mined, and fails.
  const contract = freshAddress();
  await anvil.rpc('anvil_setCode', [contract, '0x60006000fd']);
  const revertId = await approvedMovement(deps, nativeTransferPlan('evm-revert', { to: contract, value_wei: '10' }), { asset: 'ETH', amount: '1' });
  await drain(deps);
  const reverted = (await snapshot(db.pool, revertId)).byKey.pay;
  assert.equal(reverted.node_state, 'FAILED');
  assert.equal(reverted.error_code, 'EVM_TX_REVERTED');
  assert.equal(reverted.provider_state, 'reverted');
  assert.equal(await chain.getBalance({ address: contract }), 0n);
  const receipt = await chain.getTransactionReceipt({ hash: reverted.provider_refs.tx_hash as Hex });
  assert.equal(receipt.status, 'reverted');
  const proof = (await attemptArtifacts(db.pool, reverted.id, reverted.attempt_no)).find((a) => a.artifact_type === 'proof');
  assert.equal(JSON.parse(proof!.content_inline!).status, 'reverted');
});

test('submit refuses signed bytes that are not the prepared transaction, before broadcasting', async () => {
  const { executor, signer } = createEvmLane({ rpcUrl: anvil.url, signerPrivateKey: ANVIL_DEV_KEY });
  const ctx = {
    protocol_version: '1.0',
    request_id: 'r',
    request_node_id: 'n',
    compiled_plan_hash: 'h',
    template_key: 't',
    template_version: 1,
    node_key: 'pay',
    node_kind: 'action',
    action_type: 'evm_native_transfer',
    attempt_no: 1,
    intent: {},
    input_params: {},
    resolved_bindings: { executor: { executor_key: EVM_NATIVE_TRANSFER_KEY }, signer: { signer_key: 'evm_local' } },
    risk_controls: {},
    prior_artifacts: [],
    node_config: { to: freshAddress(), value_wei: '1' },
    provider_context: {},
    timeout_policy: {},
  } satisfies ExecutionContext;
  const nonceBefore = await senderNonce();
  const one = (await executor.prepare(ctx)).prepared_action!;
  const other = (await executor.prepare({ ...ctx, node_config: { to: freshAddress(), value_wei: '2' } })).prepared_action!;
  const signOf = (p: PreparedAction) => signer.sign(signRequestFor(p));
  const swapped = await executor.submit(ctx, one, { signResult: await signOf(other) });
  assert.equal(swapped.next_state, 'FAILED');
  assert.equal(swapped.error_code, 'EVM_SIGNED_TX_MISMATCH');
  const unsigned = await executor.submit(ctx, one, {});
  assert.equal(unsigned.error_code, 'EVM_SIGNATURE_MISSING');
  assert.equal(await senderNonce(), nonceBefore, 'nothing was sent');

  // Signed by another key: a valid transaction, but not from the executor's sender.
  const stranger = createEvmLane({ rpcUrl: anvil.url, signerPrivateKey: generatePrivateKey() }).signer;
  const foreign = await stranger.sign(signRequestFor(one));
  const wrongSender = await executor.submit(ctx, one, { signResult: foreign });
  assert.equal(wrongSender.error_code, 'EVM_SIGNER_MISMATCH');

  const health = await executor.health();
  assert.equal(health.chain_id, ANVIL_CHAIN_ID);
  assert.equal(typeof health.block_number, 'number');

});

test('an unreachable RPC defers instead of failing; only named refusals are certain', async () => {
  const down = new EvmNativeTransferExecutor({ rpcUrl: 'http://127.0.0.1:9', from: ANVIL_DEV_ADDRESS, rpcTimeoutMs: 2000 });
  const ctx = { node_config: { to: freshAddress(), value_wei: '1' }, intent: {}, resolved_bindings: { executor: { executor_key: 'x' }, signer: null } } as unknown as ExecutionContext;
  await assert.rejects(down.preflight(ctx), (e: Error & { code?: string }) => e.name === 'TemporaryMovementError' && e.code === 'EVM_RPC_UNAVAILABLE');

  assert.deepEqual(classifyBroadcastError(new Error('nonce too low')), { kind: 'refused', code: 'EVM_NONCE_TOO_LOW', detail: 'nonce too low' });
  assert.equal(classifyBroadcastError(new Error('already known')).kind, 'already_known');
  assert.equal(classifyBroadcastError(new Error('socket hang up')).kind, 'uncertain');
});

test('the runtime registers the EVM lane only when both an RPC URL and a signer key are configured', async (t) => {
  const db = await scratchDatabase(t);
  const only = async (env: Record<string, string>) => {
    const r = await configuredRegistries(db.pool, loadConfig(env), { env, log });
    return { executor: r.executors.has(EVM_NATIVE_TRANSFER_KEY), signer: r.signers.has('evm_local') };
  };
  assert.deepEqual(await only({}), { executor: false, signer: false });
  assert.deepEqual(await only({ FERRY_EVM_RPC_URL: anvil.url }), { executor: false, signer: false });
  assert.deepEqual(await only({ FERRY_EVM_SIGNER_KEY: ANVIL_DEV_KEY }), { executor: false, signer: false });
  const env = { FERRY_EVM_RPC_URL: anvil.url, FERRY_EVM_SIGNER_KEY: ANVIL_DEV_KEY, FERRY_EVM_CONFIRMATIONS: '2', FERRY_EVM_MAX_FEE_PER_GAS_CAP_WEI: TEST_FEE_CAP_WEI };
  const both = await configuredRegistries(db.pool, loadConfig(env), { env, log });
  const router = both.executors.get(EVM_NATIVE_TRANSFER_KEY) as EvmChainRouter;
  assert.equal(router.lane, 'evm');
  const health = await router.health();
  assert.deepEqual(health.chains, [{ chain_id: ANVIL_CHAIN_ID, ok: true, block_number: (health.chains as Array<{ block_number: number }>)[0].block_number }], 'the chain id was read at start');
  assert.deepEqual(health.wallets, [{ signer_key: 'evm_local', address: ANVIL_DEV_ADDRESS, chains: [ANVIL_CHAIN_ID] }], 'it sends from the signer\'s address');
  const target = router.target({ node_config: {}, resolved_bindings: { executor: { executor_key: EVM_NATIVE_TRANSFER_KEY }, signer: { signer_key: 'evm_local' } } });
  assert.ok(target.ok);
  assert.equal((target.executor as EvmNativeTransferExecutor).from, ANVIL_DEV_ADDRESS);
  assert.throws(() => loadConfig({ FERRY_EVM_SIGNER_KEY: '0x1234' }), /FERRY_EVM_SIGNER_KEY/);
  // The key of the single chain signs only with a fee cap: no start without one.
  assert.throws(() => loadConfig({ FERRY_EVM_RPC_URL: anvil.url, FERRY_EVM_SIGNER_KEY: ANVIL_DEV_KEY }), /FERRY_EVM_MAX_FEE_PER_GAS_CAP_WEI is required/);
  assert.throws(() => loadConfig({ ...env, FERRY_EVM_MAX_FEE_PER_GAS_CAP_WEI: '1e9' }), /FERRY_EVM_MAX_FEE_PER_GAS_CAP_WEI/);
  assert.throws(() => loadConfig({ FERRY_EVM_CONFIRMATIONS: '0' }), /FERRY_EVM_CONFIRMATIONS/);
});

test('a transaction dropped from the mempool is sent again, same bytes; one whose nonce another transaction took fails', async (t) => {
  const db = await scratchDatabase(t);
  const deps = evmDeps(db.pool);
  await anvil.rpc('evm_setAutomine', [false]);
  t.after(() => anvil.rpc('evm_setAutomine', [true]));
  const dev = privateKeyToAccount(ANVIL_DEV_KEY);

  // Dropped, nonce still free: observe reports UNKNOWN, recovery re-broadcasts the stored bytes.
  const to = freshAddress();
  const nonceBefore = await senderNonce();
  const id = await approvedMovement(deps, nativeTransferPlan('evm-dropped', { to, value_wei: '42' }), { asset: 'ETH', amount: '1' });
  assert.equal(await dispatchOne(deps), true);
  let node = (await snapshot(db.pool, id)).byKey.pay;
  assert.equal(node.node_state, 'SUBMITTED');
  const hash = node.provider_refs.tx_hash as Hex;
  await anvil.rpc('anvil_dropTransaction', [hash]);
  await drain(deps, 1);
  node = (await snapshot(db.pool, id)).byKey.pay;
  assert.ok(['SUBMITTED', 'OBSERVING'].includes(node.node_state), `re-broadcast, now ${node.node_state}`);
  assert.equal((await chain.getTransaction({ hash })).hash, hash, 'the same transaction is pending again');
  await anvil.mine(1);
  await drain(deps);
  node = (await snapshot(db.pool, id)).byKey.pay;
  assert.equal(node.node_state, 'COMPLETED');
  assert.equal(node.provider_refs.tx_hash, hash);
  assert.equal(await chain.getBalance({ address: to }), 42n);
  assert.equal(await senderNonce(), nonceBefore + 1);

  // Dropped, and the nonce spent by another transaction: this one can never be mined.
  const victim = freshAddress();
  const lostId = await approvedMovement(deps, nativeTransferPlan('evm-replaced', { to: victim, value_wei: '43' }), { asset: 'ETH', amount: '1' });
  assert.equal(await dispatchOne(deps), true);
  const lost = (await snapshot(db.pool, lostId)).byKey.pay;
  await anvil.rpc('anvil_dropTransaction', [lost.provider_refs.tx_hash]);
  const fees = await chain.estimateFeesPerGas();
  const other = await dev.signTransaction({ type: 'eip1559', chainId: ANVIL_CHAIN_ID, nonce: lost.provider_refs.nonce as number, to: freshAddress(), value: 1n, gas: 21000n, ...fees });
  await chain.sendRawTransaction({ serializedTransaction: other });
  await anvil.mine(1);
  await drain(deps);
  const s = await snapshot(db.pool, lostId);
  assert.equal(s.byKey.pay.node_state, 'FAILED');
  assert.equal(s.byKey.pay.error_code, 'EVM_NONCE_CONSUMED');
  assert.equal(await chain.getBalance({ address: victim }), 0n);
});
