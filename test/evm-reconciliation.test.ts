import assert from 'node:assert/strict';
import { test } from 'node:test';
import { keccak256, type Hex, type PublicClient } from 'viem';
import { dispatchOne } from '../src/actors/dispatcher.ts';
import type { WorkerDeps } from '../src/actors/execution.ts';
import { reconcileWithProviders } from '../src/sweeps/provider-reconciliation.ts';
import { recoverBatch } from '../src/actors/recovery.ts';
import { createEvmLane, EvmNativeTransferExecutor, EvmNonceManager } from '../src/executors/evm/index.ts';
import type { ExecutionContext, Executor } from '../src/executors/protocol.ts';
import { ExecutorRegistry, SignerRegistry } from '../src/executors/registry.ts';
import { artifactsOfNodes } from '../src/persistence/artifacts.ts';
import type { Pool } from '../src/persistence/db.ts';
import { reservationsOfWallet } from '../src/persistence/evm-nonces.ts';
import { listDrifts } from '../src/persistence/reconciliation-drifts.ts';
import { transitionsOfEntity } from '../src/persistence/movements.ts';
import { ANVIL_CHAIN_ID, ANVIL_DEV_ADDRESS, ANVIL_DEV_KEY, freshAddress, localChainForFile, type Anvil, TEST_FEE_CAP_WEI } from './helpers/anvil.ts';
import { scratchDatabase } from './helpers/db.ts';
import { dyingInSubmit, nativeTransferPlan } from './helpers/evm.ts';
import { approvedMovement, runtimeDeps, snapshot } from './helpers/runtime.ts';

/**
 * Reconciliation with provider evidence on the EVM lane (anvil on loopback): a node a person owns
 * (UNKNOWN, its movement in MANUAL_INTERVENTION) whose transaction was signed and never sent is
 * looked up on the chain through inspect(), and nothing is broadcast: the stored bytes stay
 * unsent, the mempool empty, the nonce reservation untouched. Only when the chain itself shows
 * the transaction (someone sent it) does reconciliation see the provider's answer.
 */

let anvil: Anvil;
let chain: PublicClient;

localChainForFile((local) => {
  ({ anvil, chain } = local);
});

const WALLET = { chainId: ANVIL_CHAIN_ID, sender: ANVIL_DEV_ADDRESS };
const senderNonce = (blockTag: 'pending' | 'latest' = 'pending') => chain.getTransactionCount({ address: ANVIL_DEV_ADDRESS, blockTag });

function evmDeps(pool: Pool, env: Record<string, string> = {}, wrap?: (real: EvmNativeTransferExecutor) => Executor): WorkerDeps {
  const base = runtimeDeps(pool, { FERRY_SUBMITTING_GRACE_SECONDS_BY_LANE: 'evm=0.001', ...env });
  const executors = new ExecutorRegistry();
  const signers = new SignerRegistry();
  const { executor, signer } = createEvmLane({ rpcUrl: anvil.url, signerPrivateKey: ANVIL_DEV_KEY, pollSeconds: 0, nonces: new EvmNonceManager(pool), feeBump: { capWei: BigInt(TEST_FEE_CAP_WEI) } });
  executors.register(wrap ? wrap(executor) : executor);
  signers.register(signer);
  return { ...base, executors, signers };
}

/** Recovery whose provider answer is "only a person can tell": the node goes UNKNOWN, the movement to MANUAL_INTERVENTION. */
const personNeeded = (real: EvmNativeTransferExecutor): Executor =>
  Object.assign(Object.create(real) as Executor, {
    executorKey: real.executorKey,
    lane: real.lane,
    recover: async (_ctx: ExecutionContext) => ({
      ...(await real.inspect(_ctx)),
      next_state: 'UNKNOWN' as const,
      error_code: 'TEST_OPERATOR_NEEDED',
      manual_intervention_required: true,
    }),
  });

async function pendingInPool(): Promise<number> {
  const status = await anvil.rpc<{ pending: Hex }>('txpool_status');
  return Number(status.pending);
}

test('a MANUAL_INTERVENTION movement whose transaction is signed but unsent is reconciled without a broadcast; the chain\'s own answer is still seen', async (t) => {
  const db = await scratchDatabase(t);
  const dying = dyingInSubmit('before_broadcast', { label: 'the broadcast', reason: 'the process died in submit()' });
  const to = freshAddress();
  const nonceBefore = await senderNonce();
  const deps = evmDeps(db.pool);
  const id = await approvedMovement(deps, nativeTransferPlan('evm-reconcile-manual', { to, value_wei: '7000' }), { asset: 'ETH', amount: '7000' });

  // Signed and committed SUBMITTING; the process dies before a byte reaches the chain.
  const inflight = dispatchOne(evmDeps(db.pool, {}, dying.wrap));
  await dying.reached;
  // Recovery's answer needs a person: UNKNOWN, MANUAL_INTERVENTION, the bytes still unsent.
  assert.ok((await recoverBatch(evmDeps(db.pool, {}, personNeeded))) >= 1);
  const stuck = await snapshot(db.pool, id);
  assert.equal(stuck.movement.request_state, 'MANUAL_INTERVENTION');
  assert.equal(stuck.byKey.pay.node_state, 'UNKNOWN');
  const node = stuck.byKey.pay;
  const signed = (await artifactsOfNodes(db.pool, [node.id])).find((a) => a.attempt_no === node.attempt_no && a.artifact_type === 'signature');
  assert.ok(signed?.content_inline, 'the signed bytes are stored');
  const raw = signed.content_inline as Hex;
  const hash = keccak256(raw);
  const reservationBefore = (await reservationsOfWallet(db.pool, WALLET)).find((r) => r.request_node_id === node.id);
  assert.ok(reservationBefore, 'the attempt holds a nonce');

  // Mining off: a broadcast would sit in the mempool, where it is looked for.
  await anvil.rpc('evm_setAutomine', [false]);
  t.after(() => anvil.rpc('evm_setAutomine', [true]));
  const repairing = evmDeps(db.pool, { FERRY_RECONCILIATION_AUTO_REPAIR: 'true' });
  const report = await reconcileWithProviders(repairing);
  assert.deepEqual({ checked: report.checked, drifted: report.drifted, repaired: report.repaired, unanswered: report.unanswered }, { checked: 1, drifted: 0, repaired: 0, unanswered: 0 });

  // Nothing was broadcast: not in the mempool, unknown to the node, the nonce unused.
  assert.equal(await pendingInPool(), 0, 'the mempool is empty');
  await assert.rejects(chain.getTransaction({ hash }), /could not be found/);
  assert.equal(await senderNonce(), nonceBefore, 'the sender sent nothing');
  const reservationAfter = (await reservationsOfWallet(db.pool, WALLET)).find((r) => r.request_node_id === node.id);
  assert.deepEqual(reservationAfter, reservationBefore, 'the nonce reservation is untouched (never cleared for broadcast)');
  const after = await snapshot(db.pool, id);
  assert.equal(after.movement.request_state, 'MANUAL_INTERVENTION', 'still the person\'s');
  assert.equal(after.byKey.pay.node_state, 'UNKNOWN');
  assert.equal((await listDrifts(db.pool, { open: false, limit: 10 })).length, 0);

  // Someone sends the bytes (an operator, by hand) and they are mined: inspect reads the chain,
  // so the next run sees the transfer and settles the node from that evidence.
  await anvil.rpc('eth_sendRawTransaction', [raw]);
  await anvil.mine(1);
  await db.pool.query(`UPDATE request_nodes SET provider_checked_at = NULL WHERE id = $1`, [node.id]);
  const seen = await reconcileWithProviders(repairing);
  assert.deepEqual({ checked: seen.checked, drifted: seen.drifted, repaired: seen.repaired, byClass: seen.byClass }, { checked: 1, drifted: 1, repaired: 1, byClass: { unknown_but_provider_knows: 1 } });
  const settled = (await snapshot(db.pool, id)).byKey.pay;
  assert.equal(settled.node_state, 'COMPLETED');
  assert.equal(settled.provider_refs.tx_hash, hash);
  assert.equal((await transitionsOfEntity(db.pool, node.id)).at(-1)!.event_type, 'RECONCILED');
  assert.equal(await senderNonce('latest'), nonceBefore + 1, 'one transaction, the one sent by hand');
  assert.equal(await chain.getBalance({ address: to }), 7000n);

  dying.die();
  await inflight;
});
