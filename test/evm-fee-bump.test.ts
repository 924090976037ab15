import assert from 'node:assert/strict';
import { test } from 'node:test';
import { keccak256, parseTransaction, type Address, type Hex, type PublicClient } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { dispatchOne } from '../src/actors/dispatcher.ts';
import type { WorkerDeps } from '../src/actors/execution.ts';
import { observeBatch } from '../src/actors/observer.ts';
import { createEvmLane, EvmNativeTransferExecutor, EvmNonceManager } from '../src/executors/evm/index.ts';
import { capFees, nextVersion } from '../src/executors/evm/fee-bump.ts';
import { decodeSignedTx } from '../src/executors/evm/signed-tx.ts';
import type { Executor } from '../src/executors/protocol.ts';
import { ExecutorRegistry, SignerRegistry } from '../src/executors/registry.ts';
import { artifactsOfNodes } from '../src/persistence/artifacts.ts';
import type { Pool } from '../src/persistence/db.ts';
import { transitionsOfEntity } from '../src/persistence/movements.ts';
import { ANVIL_CHAIN_ID, ANVIL_DEV_ADDRESS, ANVIL_DEV_KEY, freshAddress, localChainForFile, type Anvil } from './helpers/anvil.ts';
import { scratchDatabase } from './helpers/db.ts';
import { dyingInSubmit, nativeTransferPlan, writeConfigFile } from './helpers/evm.ts';
import { exited, spawnWorker } from './helpers/processes.ts';
import { waitFor } from './helpers/wait.ts';
import { approvedMovement, drain, runtimeDeps, snapshot } from './helpers/runtime.ts';

/**
 * Fee bumping against a real chain: a transfer whose fee cap fell under the base fee (raised on
 * anvil) is replaced with the same nonce and higher fees; every version is stored on the same
 * attempt before it is broadcast, observe watches all of them, and exactly one is ever mined. At
 * the policy cap the bumping stops and the node says so. A process dying after a version is stored,
 * before or after its broadcast, still ends with exactly one transfer.
 */

let anvil: Anvil;
let chain: PublicClient;

localChainForFile(async (local) => {
  ({ anvil, chain } = local);
  // Nothing is mined unless a test says so: the first version must be able to sit pending.
  await local.anvil.rpc('evm_setAutomine', [false]);
});

const BUMP_AFTER_SECONDS = 30;
const latestNonce = () => chain.getTransactionCount({ address: ANVIL_DEV_ADDRESS, blockTag: 'latest' });

function evmDeps(pool: Pool, opts: { capWei?: bigint | null; wrap?: (real: EvmNativeTransferExecutor) => Executor } = {}): WorkerDeps {
  const base = runtimeDeps(pool);
  const executors = new ExecutorRegistry();
  const signers = new SignerRegistry();
  const { executor, signer } = createEvmLane({
    rpcUrl: anvil.url,
    signerPrivateKey: ANVIL_DEV_KEY,
    pollSeconds: 0,
    nonces: new EvmNonceManager(pool),
    feeBump: { afterSeconds: BUMP_AFTER_SECONDS, percent: 20, capWei: opts.capWei ?? null },
  });
  executors.register(opts.wrap ? opts.wrap(executor) : executor);
  signers.register(signer);
  return { ...base, executors, signers };
}

async function versionsOf(pool: Pool, nodeId: string, attemptNo: number): Promise<Hex[]> {
  return (await artifactsOfNodes(pool, [nodeId]))
    .filter((a) => a.attempt_no === attemptNo && a.artifact_type === 'signature')
    .map((a) => a.content_inline as Hex);
}

async function isPending(hash: Hex): Promise<boolean> {
  return chain.getTransaction({ hash }).then(
    () => true,
    () => false,
  );
}

async function hasReceipt(hash: Hex): Promise<boolean> {
  return chain.getTransactionReceipt({ hash }).then(
    () => true,
    () => false,
  );
}

const setNextBaseFee = (wei: bigint) => anvil.rpc('anvil_setNextBlockBaseFeePerGas', [`0x${wei.toString(16)}`]);

/**
 * Sends a transfer and leaves its first version pending (nothing is mined); its broadcast time is
 * then aged past the bump threshold. With `evicted`, a block is first mined with a base fee twice
 * the version's fee cap: anvil drops a transaction that can no longer pay the base fee (and the
 * replacement that can stays within FERRY_EVM_MAX_FEE_BUMP_FACTOR of it).
 */
async function stuckTransfer(deps: WorkerDeps, pool: Pool, key: string, to: Address, value: string, opts: { evicted?: boolean } = {}) {
  const id = await approvedMovement(deps, nativeTransferPlan(key, { to, value_wei: value }), { asset: 'ETH', amount: '1' });
  assert.equal(await dispatchOne(deps), true);
  const node = (await snapshot(pool, id)).byKey.pay;
  assert.equal(node.node_state, 'SUBMITTED');
  const [v1] = await versionsOf(pool, node.id, node.attempt_no);
  const maxFee = parseTransaction(v1!).maxFeePerGas!;
  if (opts.evicted) {
    await setNextBaseFee(maxFee * 2n);
    await anvil.mine(1);
    assert.equal(await hasReceipt(keccak256(v1!)), false, 'the base fee is above the first version\'s cap');
    assert.equal(await isPending(keccak256(v1!)), false, 'the node dropped it');
  } else {
    assert.equal(await isPending(keccak256(v1!)), true, 'it waits on the node');
  }

  // Not yet due: one look changes nothing.
  await observeBatch(deps);
  assert.equal((await versionsOf(pool, node.id, node.attempt_no)).length, 1, 'no replacement before fee_bump_after_seconds');
  await pool.query(`UPDATE evm_nonce_reservations SET broadcast_at = now() - interval '1 hour' WHERE request_node_id = $1`, [node.id]);
  return { id, node, v1: v1!, maxFee };
}

test('a transfer stuck under the base fee is replaced with the same nonce and higher fees; the replacement is mined, exactly once', async (t) => {
  const db = await scratchDatabase(t);
  const deps = evmDeps(db.pool);
  const to = freshAddress();
  const first = await latestNonce();
  const { id, node, v1, maxFee } = await stuckTransfer(deps, db.pool, 'evm-bump', to, '31337', { evicted: true });

  await observeBatch(deps);
  const versions = await versionsOf(db.pool, node.id, node.attempt_no);
  assert.equal(versions.length, 2, 'the new version is stored on the same attempt');
  const v2 = parseTransaction(versions[1]!);
  const old = parseTransaction(v1);
  assert.equal(v2.nonce, old.nonce, 'same nonce');
  assert.equal(v2.to, old.to);
  assert.equal(v2.value, old.value);
  assert.ok(v2.maxFeePerGas! >= (maxFee * 120n) / 100n, 'fee cap raised by at least fee_bump_percent');
  assert.ok(v2.maxPriorityFeePerGas! >= (old.maxPriorityFeePerGas! * 120n) / 100n, 'tip raised by at least fee_bump_percent');
  const events = (await transitionsOfEntity(db.pool, node.id)).map((tr) => tr.event_type);
  assert.ok(events.includes('REPLACEMENT_SIGNED'), 'the replacement is in the node\'s transition log');
  const v2hash = keccak256(versions[1]!);
  assert.equal(await isPending(v2hash), true, 'the replacement was broadcast');

  await anvil.mine(1);
  await drain(deps);
  const s = await snapshot(db.pool, id);
  assert.equal(s.movement.request_state, 'COMPLETED');
  assert.equal(s.byKey.pay.provider_refs.tx_hash, v2hash, 'completed by the replacement');
  assert.equal(s.byKey.pay.attempt_no, node.attempt_no, 'one attempt');
  assert.equal(await hasReceipt(keccak256(v1)), false, 'the first version can never be mined');
  assert.equal(await chain.getBalance({ address: to }), 31337n, 'paid exactly once');
  assert.equal(await latestNonce(), first + 1);
});

test('at the policy cap no further version is signed and the node reports EVM_FEE_CAP_REACHED; it completes once fees fall', async (t) => {
  const db = await scratchDatabase(t);
  const estimate = await chain.estimateFeesPerGas();
  // Room for the first version, not for a 20% bump of it.
  const cap = estimate.maxFeePerGas + 1n;
  const deps = evmDeps(db.pool, { capWei: cap });
  const to = freshAddress();
  const { id, node, v1, maxFee } = await stuckTransfer(deps, db.pool, 'evm-cap', to, '99');
  assert.ok(maxFee <= cap, 'the first version respects the cap');

  await observeBatch(deps);
  assert.equal((await versionsOf(db.pool, node.id, node.attempt_no)).length, 1, 'nothing signed beyond the cap');
  const capped = (await snapshot(db.pool, id)).byKey.pay;
  assert.equal(capped.provider_state, 'fee_cap_reached');
  assert.equal(capped.error_code, 'EVM_FEE_CAP_REACHED');
  assert.match(capped.error_detail!, /cap/);
  assert.ok(['SUBMITTED', 'OBSERVING'].includes(capped.node_state), 'still watching the pending version');

  await anvil.mine(1);
  await drain(deps);
  const s = await snapshot(db.pool, id);
  assert.equal(s.movement.request_state, 'COMPLETED');
  assert.equal(s.byKey.pay.provider_refs.tx_hash, keccak256(v1));
  assert.equal(await chain.getBalance({ address: to }), 99n);
});

for (const when of ['before_broadcast', 'after_broadcast'] as const) {
  test(`a process dying ${when.replace('_', ' ')} of a stored fee-bumped version: exactly one transfer, the movement completes`, async (t) => {
    const db = await scratchDatabase(t);
    const dying = dyingInSubmit(when, {
      dies: (prepared) => Boolean(prepared.provider_hints.replaces),
      label: 'the replacement',
      reason: 'the process died broadcasting the replacement',
    });
    const crashing = evmDeps(db.pool, { wrap: dying.wrap });
    const deps = evmDeps(db.pool);
    const to = freshAddress();
    const first = await latestNonce();
    const { id, node, v1 } = await stuckTransfer(crashing, db.pool, `evm-bump-crash-${when}`, to, '2024');

    const inflight = observeBatch(crashing);
    await dying.reached;
    const stored = await versionsOf(db.pool, node.id, node.attempt_no);
    assert.equal(stored.length, 2, 'the fee-bumped version was stored before its broadcast');
    const v2hash = keccak256(stored[1]!);
    assert.equal(await isPending(v2hash), when === 'after_broadcast');

    // Another process carries on: it watches every stored version.
    await observeBatch(deps);
    const versions = await versionsOf(db.pool, node.id, node.attempt_no);
    if (when === 'before_broadcast') {
      // The stored version never left; the first is still stuck and overdue: a third is proposed.
      assert.equal(versions.length, 3);
      assert.ok(parseTransaction(versions[2]!).maxFeePerGas! > parseTransaction(stored[1]!).maxFeePerGas!, 'above every earlier version');
    } else {
      assert.equal(versions.length, 2, 'the sent replacement is pending and not yet due');
    }
    // A base fee the first version cannot pay, the newest can.
    await setNextBaseFee(parseTransaction(v1).maxFeePerGas! + 1n);
    await anvil.mine(1);
    await drain(deps);

    const s = await snapshot(db.pool, id);
    assert.equal(s.movement.request_state, 'COMPLETED');
    const hashes = versions.map((v) => keccak256(v));
    const mined = [];
    for (const h of hashes) if (await hasReceipt(h)) mined.push(h);
    assert.equal(mined.length, 1, 'exactly one version was mined');
    assert.equal(s.byKey.pay.provider_refs.tx_hash, mined[0]);
    assert.notEqual(mined[0], keccak256(v1));
    assert.equal(await chain.getBalance({ address: to }), 2024n, 'paid exactly once');
    assert.equal(await latestNonce(), first + 1, 'one transaction from the sender');

    dying.die();
    await inflight;
    assert.equal((await snapshot(db.pool, id)).byKey.pay.node_state, 'COMPLETED');
  });
}

test('SIGKILL of a worker process right after it stored a fee-bumped version: exactly one transfer lands, another process completes the movement', async (t) => {
  const db = await scratchDatabase(t);
  // The chain and its signer from the configuration file: its fee policy applies to the lane.
  const configFile = writeConfigFile({
    chains: [{ chain_id: ANVIL_CHAIN_ID, rpc_url: anvil.url, fee_bump_after_seconds: 1, fee_bump_percent: 20 }],
    signers: [{ key: 'evm_local', kind: 'local_key', private_key_env: 'FERRY_TEST_EVM_KEY', chains: [ANVIL_CHAIN_ID] }],
  });
  const env = {
    FERRY_TEST_EVM_KEY: ANVIL_DEV_KEY,
    FERRY_CONFIG_FILE: configFile,
    FERRY_NODE_DISPATCH_INTERVAL_SECONDS: '0.5',
    FERRY_DB_POOL_MAX: '4',
  };
  const to = freshAddress();
  const first = await latestNonce();
  const deps = runtimeDeps(db.pool);
  const id = await approvedMovement(deps, nativeTransferPlan('evm-bump-sigkill', { to, value_wei: '8080' }), { asset: 'ETH', amount: '1' });
  const nodeId = (await snapshot(db.pool, id)).byKey.pay.id;

  // Nothing is mined: the first version stays pending and the worker replaces it after a second.
  const worker = spawnWorker(db.url, env);
  let killed = false;
  t.after(async () => {
    if (!killed) worker.kill('SIGKILL');
    await exited(worker);
  });
  await waitFor('a fee-bumped version to be stored', async () => (await versionsOf(db.pool, nodeId, 1)).length >= 2, 60_000, 10);
  worker.kill('SIGKILL');
  killed = true;
  await exited(worker);
  const stored = await versionsOf(db.pool, nodeId, 1);
  assert.ok(stored.length >= 2);

  // Whichever version the node holds is mined; another process finishes the movement.
  await anvil.mine(1);
  const successor = spawnWorker(db.url, env);
  try {
    await waitFor('the movement to complete', async () => (await snapshot(db.pool, id)).movement.request_state === 'COMPLETED', 60_000, 100);
  } finally {
    successor.kill('SIGTERM');
    await exited(successor);
  }
  const versions = await versionsOf(db.pool, nodeId, 1);
  const mined = [];
  for (const v of versions) if (await hasReceipt(keccak256(v))) mined.push(keccak256(v));
  assert.equal(mined.length, 1, 'exactly one version was mined');
  assert.equal((await snapshot(db.pool, id)).byKey.pay.provider_refs.tx_hash, mined[0]);
  assert.equal(await chain.getBalance({ address: to }), 8080n, 'paid exactly once');
  assert.equal(await latestNonce(), first + 1, 'one transaction from the sender');
});

test('the next version keeps every field but the fees, beats every earlier version, follows the estimate and stops at the cap', async () => {
  const dev = privateKeyToAccount(ANVIL_DEV_KEY);
  const gwei = 1_000_000_000n;
  const base = { type: 'eip1559' as const, chainId: ANVIL_CHAIN_ID, nonce: 7, to: freshAddress(), value: 5n, gas: 60_000n, data: '0xa9059cbb' as Hex };
  const signedWith = async (maxFeePerGas: bigint, maxPriorityFeePerGas: bigint) => {
    const d = await decodeSignedTx(await dev.signTransaction({ ...base, maxFeePerGas, maxPriorityFeePerGas }));
    assert.ok(d.ok);
    return d.tx;
  };
  const v1 = await signedWith(10n * gwei, 1n * gwei);
  const v2 = await signedWith(30n * gwei, 2n * gwei);
  const low = { maxFeePerGas: 1n * gwei, maxPriorityFeePerGas: 1n };
  const policy = { afterSeconds: 1, percent: 20, capWei: null };

  const next = nextVersion([v1, v2], low, policy);
  assert.equal(next?.kind, 'replace');
  if (next?.kind !== 'replace') return;
  const parsed = parseTransaction(next.payload);
  assert.equal(parsed.maxFeePerGas, 36n * gwei, '+20% over the highest version');
  assert.equal(parsed.maxPriorityFeePerGas, (2n * gwei * 120n) / 100n);
  assert.deepEqual([parsed.nonce, parsed.to, parsed.value, parsed.gas, parsed.data, parsed.chainId], [base.nonce, base.to.toLowerCase(), base.value, base.gas, base.data, base.chainId]);
  assert.equal(next.replaces, v2.hash);
  assert.equal(next.version, 3);

  const wide = { ...policy, limits: { maxReplacements: 5, maxFeeBumpFactor: 10 } };
  const chasing = nextVersion([v1], { maxFeePerGas: 50n * gwei, maxPriorityFeePerGas: 3n * gwei }, wide);
  assert.equal(chasing?.kind === 'replace' && chasing.maxFeePerGas, 50n * gwei, 'the chain\'s estimate when it is higher');
  const bounded = nextVersion([v1], { maxFeePerGas: 50n * gwei, maxPriorityFeePerGas: 3n * gwei }, policy);
  assert.equal(bounded?.kind === 'replace' && bounded.maxFeePerGas, 40n * gwei, 'at most FERRY_EVM_MAX_FEE_BUMP_FACTOR (default 4) times the first version');
  const many = nextVersion([v1, v2, v2, v2, v2, v2], low, policy);
  assert.equal(many?.kind, 'cap_reached', 'no more than FERRY_EVM_MAX_REPLACEMENTS (default 5) replacements are proposed');

  const capped = nextVersion([v1], { maxFeePerGas: 50n * gwei, maxPriorityFeePerGas: 3n * gwei }, { ...wide, capWei: 20n * gwei });
  assert.equal(capped?.kind === 'replace' && capped.maxFeePerGas, 20n * gwei, 'up to the cap');
  const stuck = nextVersion([v1, v2], low, { ...policy, capWei: 35n * gwei });
  assert.equal(stuck?.kind, 'cap_reached', 'a step smaller than the bump percentage would be refused: stop');

  assert.deepEqual(capFees({ maxFeePerGas: 9n, maxPriorityFeePerGas: 8n }, 5n), { maxFeePerGas: 5n, maxPriorityFeePerGas: 5n });
  assert.deepEqual(capFees({ maxFeePerGas: 4n, maxPriorityFeePerGas: 1n }, 5n), { maxFeePerGas: 4n, maxPriorityFeePerGas: 1n });
});
