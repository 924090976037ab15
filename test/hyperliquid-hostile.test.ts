import assert from 'node:assert/strict';
import { test } from 'node:test';
import { erc20Abi } from 'viem';
import { HYPERLIQUID_TOPUP_KEY } from '../src/executors/hyperliquid/index.ts';
import { ANVIL_CHAIN_ID, ANVIL_DEV_ADDRESS, freshAddress } from './helpers/anvil.ts';
import { usdcChainForFile, type UsdcChain } from './helpers/contracts.ts';
import { scratchDatabase } from './helpers/db.ts';
import { hostileDeps, hostileExecutor, transferData } from './helpers/hostile-executor.ts';
import { topupPlan } from './helpers/hyperliquid.ts';
import { approvedMovement, drain, snapshot } from './helpers/runtime.ts';

/**
 * A hostile executor serving exec.hyperliquid.topup: its prepared transfer pays another address
 * than the configured bridge. The signer checks the transaction against the top-up's expected
 * effect (the token's transfer to the bridge of the hyperliquid section), not against what the
 * executor says: it refuses, and nothing reaches the chain.
 */

let local: UsdcChain;
usdcChainForFile((l) => void (local = l));

test('a top-up executor that prepares a transfer to another address than the bridge gets no signature', async (t) => {
  const db = await scratchDatabase(t);
  const bridge = freshAddress();
  const thief = freshAddress();
  const hostile = await hostileExecutor(local, bridge, { amount: 10_000_000n, prepare: (honest) => ({ ...honest, data: transferData(thief, 10_000_000n) }) });
  t.after(() => hostile.stop());
  const deps = hostileDeps(db.pool, local, hostile.url, {
    executorKey: HYPERLIQUID_TOPUP_KEY,
    lane: 'hyperliquid',
    file: { hyperliquid: { chain_id: ANVIL_CHAIN_ID, bridge, info_url: 'http://127.0.0.1:9/info', token: 'USDC' } },
  });
  const nonce = await local.chain.getTransactionCount({ address: ANVIL_DEV_ADDRESS, blockTag: 'pending' });
  const plan = topupPlan(`hl-hostile-${Date.now()}`, 'evm_local');
  plan.nodes = plan.nodes.slice(0, 1);
  plan.edges = [];
  const id = await approvedMovement(deps, plan, { asset: 'USDC', amount: '10' });
  await drain(deps);
  const node = (await snapshot(db.pool, id)).byKey.topup;
  assert.equal(node.node_state, 'FAILED');
  assert.equal(node.error_code, 'SIGNER_POLICY_VIOLATION');
  assert.equal(deps.signRequests.length, 1, 'the signer was asked once and refused');
  assert.deepEqual(hostile.broadcasts, [], 'nothing was broadcast');
  assert.equal(await local.chain.getTransactionCount({ address: ANVIL_DEV_ADDRESS, blockTag: 'pending' }), nonce);
  const paid = await local.chain.getContractEvents({ address: local.usdc.address, abi: erc20Abi, eventName: 'Transfer', args: { to: thief }, fromBlock: 0n, toBlock: 'latest' });
  assert.equal(paid.length, 0);
});
