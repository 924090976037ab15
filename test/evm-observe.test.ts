import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type Address, type Hex, type PublicClient } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import type { WorkerDeps } from '../src/actors/execution.ts';
import { EVM_BALANCE_OBSERVE_KEY, EVM_ERC20_TRANSFER_KEY, EVM_FINALITY_OBSERVE_KEY } from '../src/executors/evm/index.ts';
import type { Pool } from '../src/persistence/db.ts';
import { ANVIL_CHAIN_ID, ANVIL_DEV_KEY, freshAddress, type Anvil } from './helpers/anvil.ts';
import { sendCall, usdcChainForFile, type DeployedToken } from './helpers/contracts.ts';
import { scratchDatabase } from './helpers/db.ts';
import { configuredDeps } from './helpers/evm.ts';
import { approvedMovement, drain, plan, snapshot } from './helpers/runtime.ts';

/**
 * The observe-only EVM executors against a real anvil: a deposit arriving (token and native
 * coin), a transaction reaching N confirmations or the finalized tag, and a reorg (evm_snapshot /
 * evm_revert) that takes the receipt away, which must send the node back to waiting.
 */

let anvil: Anvil;
let chain: PublicClient;
let usdc: DeployedToken;

usdcChainForFile(async (local) => {
  ({ anvil, chain, usdc } = local);
  // Balances are read a confirmation below the head: let that block already hold the token.
  await local.anvil.mine(1);
});

async function deps(pool: Pool, chainExtra: Record<string, unknown> = {}, walletKey?: Hex): Promise<WorkerDeps> {
  return configuredDeps(
    pool,
    {
      chains: [{ chain_id: ANVIL_CHAIN_ID, rpc_url: anvil.url, poll_seconds: 0.001, ...chainExtra }],
      signers: walletKey ? [{ key: 'hot_1', kind: 'local_key', private_key_env: 'HOT_1_KEY', chains: [ANVIL_CHAIN_ID] }] : [],
      tokens: [{ chain_id: ANVIL_CHAIN_ID, symbol: 'USDC', address: usdc.address, decimals: 6 }],
    },
    walletKey ? { HOT_1_KEY: walletKey } : {},
  );
}

function observePlan(key: string, executor: string, config: Record<string, unknown>) {
  return plan(key, [{ node_key: 'watch', node_kind: 'observe', action_type: 'chain_observe', executor_binding: executor, config }]);
}

/** Sends a plain transfer from anvil's first account; returns its hash once mined. */
async function sendEth(to: Address, value = 1n): Promise<Hex> {
  const hash = await chain.sendRawTransaction({
    serializedTransaction: await privateKeyToAccount(ANVIL_DEV_KEY).signTransaction({
      type: 'eip1559',
      chainId: ANVIL_CHAIN_ID,
      nonce: await chain.getTransactionCount({ address: privateKeyToAccount(ANVIL_DEV_KEY).address, blockTag: 'pending' }),
      to,
      value,
      gas: 21000n,
      ...(await chain.estimateFeesPerGas()),
    }),
  });
  await chain.waitForTransactionReceipt({ hash, pollingInterval: 50, timeout: 30_000 });
  return hash;
}

test('evm_balance waits for a token deposit, counted once it is deep enough', async (t) => {
  const db = await scratchDatabase(t);
  const d = await deps(db.pool);
  const holder = freshAddress();
  const id = await approvedMovement(d, observePlan('watch-usdc', EVM_BALANCE_OBSERVE_KEY, { address: holder, token: 'USDC', amount: '5', confirmations: 2 }), {
    asset: 'USDC',
    amount: '5',
  });
  await drain(d);
  let node = (await snapshot(db.pool, id)).byKey.watch;
  assert.equal(node.node_state, 'OBSERVING');
  assert.equal(node.provider_state, 'below');
  assert.equal(node.provider_refs.balance_base_units, '0');

  await sendCall(chain, anvil.url, ANVIL_DEV_KEY, usdc, 'mint', [holder, 4_000_000n]);
  await anvil.mine(1);
  await drain(d);
  node = (await snapshot(db.pool, id)).byKey.watch;
  assert.equal(node.node_state, 'OBSERVING', '4 is not 5');

  await sendCall(chain, anvil.url, ANVIL_DEV_KEY, usdc, 'mint', [holder, 1_000_000n]);
  await drain(d);
  node = (await snapshot(db.pool, id)).byKey.watch;
  assert.equal(node.node_state, 'OBSERVING', 'the deposit has one confirmation of two');

  await anvil.mine(1);
  await drain(d);
  const s = await snapshot(db.pool, id);
  assert.equal(s.byKey.watch.node_state, 'COMPLETED');
  assert.equal(s.movement.request_state, 'COMPLETED');
  assert.equal(s.byKey.watch.provider_refs.balance_base_units, '5000000');
});

test('evm_balance on the native coin, in "receives" mode: the balance must grow by the amount', async (t) => {
  const db = await scratchDatabase(t);
  const d = await deps(db.pool);
  const holder = freshAddress();
  await anvil.rpc('anvil_setBalance', [holder, '0xde0b6b3a7640000']); // 1 ETH already there
  const id = await approvedMovement(d, observePlan('watch-eth', EVM_BALANCE_OBSERVE_KEY, { address: holder, token: 'native', amount: '0.000000000000000002', mode: 'receives' }), {
    asset: 'ETH',
    amount: '1',
  });
  await drain(d);
  assert.equal((await snapshot(db.pool, id)).byKey.watch.node_state, 'OBSERVING', 'holding 1 ETH is not receiving 2 wei');
  await sendEth(holder, 1n);
  await drain(d);
  assert.equal((await snapshot(db.pool, id)).byKey.watch.node_state, 'OBSERVING', '1 wei of 2');
  await sendEth(holder, 1n);
  await drain(d);
  const node = (await snapshot(db.pool, id)).byKey.watch;
  assert.equal(node.node_state, 'COMPLETED');
  assert.equal(node.provider_refs.balance_base_units, (10n ** 18n + 2n).toString());
});

test('evm_finality follows a predecessor\'s transaction ($ref) to N confirmations', async (t) => {
  const db = await scratchDatabase(t);
  const key = generatePrivateKey();
  const wallet = privateKeyToAccount(key).address;
  await anvil.rpc('anvil_setBalance', [wallet, '0xde0b6b3a7640000']);
  await sendCall(chain, anvil.url, ANVIL_DEV_KEY, usdc, 'mint', [wallet, 10_000_000n]);
  const d = await deps(db.pool, {}, key);
  const to = freshAddress();
  const template = plan(
    'pay-then-final',
    [
      {
        node_key: 'pay',
        node_kind: 'action',
        action_type: 'erc20_transfer',
        executor_binding: EVM_ERC20_TRANSFER_KEY,
        signer_binding: 'hot_1',
        config: { token: 'USDC', to, amount: '3' },
      },
      { node_key: 'final', node_kind: 'observe', action_type: 'chain_finality', executor_binding: EVM_FINALITY_OBSERVE_KEY, config: { tx_hash: '$ref:pay.tx_hash', confirmations: 3 } },
    ],
    [{ from: 'pay', to: 'final' }],
  );
  const id = await approvedMovement(d, template, { asset: 'USDC', amount: '3' });
  await drain(d);
  let s = await snapshot(db.pool, id);
  assert.equal(s.byKey.pay.node_state, 'COMPLETED');
  assert.equal(s.byKey.final.node_state, 'OBSERVING');
  assert.equal(s.byKey.final.provider_refs.tx_hash, s.byKey.pay.provider_refs.tx_hash);
  assert.equal(s.byKey.final.provider_refs.confirmations, 1);
  await anvil.mine(2);
  await drain(d);
  s = await snapshot(db.pool, id);
  assert.equal(s.byKey.final.node_state, 'COMPLETED');
  assert.equal(s.byKey.final.provider_refs.confirmations, 3);
  assert.equal(s.movement.request_state, 'COMPLETED');
});

test('a receipt taken away by a reorg sends evm_finality back to waiting, never to COMPLETED; the re-mined transaction completes', async (t) => {
  const db = await scratchDatabase(t);
  const d = await deps(db.pool);
  const snap = await anvil.rpc<string>('evm_snapshot');
  const to = freshAddress();
  const hash = await sendEth(to, 7n);
  const raw = await anvil.rpc<Hex>('eth_getRawTransactionByHash', [hash]);
  const id = await approvedMovement(d, observePlan('final-reorg', EVM_FINALITY_OBSERVE_KEY, { tx_hash: hash, confirmations: 3 }), { asset: 'ETH', amount: '1' });
  await drain(d);
  await anvil.mine(1);
  await drain(d);
  let node = (await snapshot(db.pool, id)).byKey.watch;
  assert.equal(node.node_state, 'OBSERVING');
  assert.equal(node.provider_refs.confirmations, 2);

  // The blocks holding the transaction vanish; the chain grows past the old height without it.
  assert.equal(await anvil.rpc('evm_revert', [snap]), true);
  await anvil.mine(5);
  await drain(d);
  node = (await snapshot(db.pool, id)).byKey.watch;
  assert.equal(node.node_state, 'OBSERVING', 'waiting again, although the head is past 3 confirmations of the old block');
  assert.equal(node.provider_state, 'not_found');
  assert.equal(node.provider_refs.confirmations, 0);
  const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM transitions WHERE entity_id = $1 AND to_state = 'COMPLETED'`, [node.id]);
  assert.equal(rows[0].n, 0, 'never completed');

  // The same signed transaction lands again: it completes at its new depth.
  assert.equal(typeof raw, 'string');
  await chain.sendRawTransaction({ serializedTransaction: raw });
  await anvil.mine(2);
  await drain(d);
  node = (await snapshot(db.pool, id)).byKey.watch;
  assert.equal(node.node_state, 'COMPLETED');
  assert.equal(node.provider_refs.confirmations, 3);
});

test('with finality "finalized" the node waits for the finalized block tag; a reverted transaction fails; a bad hash is refused', async (t) => {
  const db = await scratchDatabase(t);
  const d = await deps(db.pool, { finality: 'finalized' });
  const hash = await sendEth(freshAddress(), 3n);
  const id = await approvedMovement(d, observePlan('final-tag', EVM_FINALITY_OBSERVE_KEY, { tx_hash: hash }), { asset: 'ETH', amount: '1' });
  await drain(d);
  await anvil.mine(10);
  await drain(d);
  assert.equal((await snapshot(db.pool, id)).byKey.watch.node_state, 'OBSERVING', '11 confirmations, not yet finalized');
  // anvil finalizes 64 blocks below the head.
  await anvil.mine(64);
  await drain(d);
  const node = (await snapshot(db.pool, id)).byKey.watch;
  assert.equal(node.node_state, 'COMPLETED');
  assert.equal(node.provider_state, 'finalized');

  const reverter = freshAddress();
  await anvil.rpc('anvil_setCode', [reverter, '0x60006000fd']);
  const key = generatePrivateKey();
  const from = privateKeyToAccount(key);
  await anvil.rpc('anvil_setBalance', [from.address, '0xde0b6b3a7640000']);
  const bad = await chain.sendRawTransaction({
    serializedTransaction: await from.signTransaction({ type: 'eip1559', chainId: ANVIL_CHAIN_ID, nonce: 0, to: reverter, value: 0n, gas: 50000n, ...(await chain.estimateFeesPerGas()) }),
  });
  await chain.waitForTransactionReceipt({ hash: bad, pollingInterval: 50 });
  const d2 = await deps(db.pool);
  const revertedId = await approvedMovement(d2, observePlan('final-reverted', EVM_FINALITY_OBSERVE_KEY, { tx_hash: bad, confirmations: 1 }), { asset: 'ETH', amount: '1' });
  const badHashId = await approvedMovement(d2, observePlan('final-bad-hash', EVM_FINALITY_OBSERVE_KEY, { tx_hash: '0x1234' }), { asset: 'ETH', amount: '1' });
  await drain(d2);
  const reverted = (await snapshot(db.pool, revertedId)).byKey.watch;
  assert.equal(reverted.node_state, 'FAILED');
  assert.equal(reverted.error_code, 'EVM_TX_REVERTED');
  const badHash = (await snapshot(db.pool, badHashId)).byKey.watch;
  assert.equal(badHash.error_code, 'EVM_INVALID_TX_HASH');
});
