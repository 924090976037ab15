import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { erc20Abi, keccak256, type Address, type Hex, type PublicClient } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { deliverMovementEvent } from '../src/durable/transition.ts';
import { artifactsOfNodes } from '../src/persistence/artifacts.ts';
import { withTransaction } from '../src/persistence/db.ts';
import { ANVIL_CHAIN_ID, ANVIL_DEV_KEY, freshAddress, type Anvil } from './helpers/anvil.ts';
import { sendCall, tokenBalance, usdcChainForFile, type DeployedToken } from './helpers/contracts.ts';
import { scratchDatabase } from './helpers/db.ts';
import { topupPlan, writeHyperliquidConfig } from './helpers/hyperliquid.ts';
import { collectingDeps, seedMovement } from './helpers/fixtures.ts';
import { exited, spawnWorker } from './helpers/processes.ts';
import { startRpcProxy, type ProxyMode } from './helpers/rpc-proxy.ts';
import { finishInWorker, snapshot } from './helpers/runtime.ts';
import { startHyperliquidInfo, type HyperliquidInfoEmulator } from './emulators/hyperliquid-info.ts';

/**
 * A worker process is SIGKILLed while a top-up's signed deposit is stored and the node is
 * SUBMITTING: once before the broadcast reached the chain, once after the chain took it but before
 * the answer came back (an RPC proxy in front of anvil holds eth_sendRawTransaction). A second
 * worker recovers from the stored bytes: exactly one Transfer to the bridge lands, the emulated info
 * API credits it once, and the movement completes.
 */

let anvil: Anvil;
let chain: PublicClient;
let usdc: DeployedToken;
let info: HyperliquidInfoEmulator;
const bridge = freshAddress().toLowerCase() as Address;

usdcChainForFile(async (local) => {
  ({ anvil, chain, usdc } = local);
  info = await startHyperliquidInfo({ chain, token: usdc.address, bridge, creditDelayMs: 300 });
});
after(() => info?.stop());

const WORKER_ENV = {
  FERRY_SUBMITTING_GRACE_SECONDS_BY_LANE: 'hyperliquid=1',
  FERRY_NODE_RECOVERY_INTERVAL_SECONDS: '0.5',
  FERRY_NODE_DISPATCH_INTERVAL_SECONDS: '0.2',
};

for (const [mode, label] of [
  ['hold_before', 'before'],
  ['hold_after', 'after'],
] as Array<[ProxyMode, string]>) {
  test(`SIGKILL ${label} the broadcast of a top-up: recovered from the signed bytes, exactly one deposit, credited once, completed`, async (t) => {
    const db = await scratchDatabase(t);
    const key = generatePrivateKey();
    const wallet = privateKeyToAccount(key).address;
    await anvil.rpc('anvil_setBalance', [wallet, '0xde0b6b3a7640000']);
    await sendCall(chain, anvil.url, ANVIL_DEV_KEY, usdc, 'mint', [wallet, 100_000_000n]);
    const proxy = await startRpcProxy(anvil.url, mode);
    t.after(() => proxy.stop());
    const config = writeHyperliquidConfig(
      {
        chains: [{ chain_id: ANVIL_CHAIN_ID, rpc_url: proxy.url, poll_seconds: 0.2 }],
        signers: [{ key: 'hot_1', kind: 'local_key', private_key_env: 'HOT_1_KEY', chains: [ANVIL_CHAIN_ID] }],
        tokens: [{ chain_id: ANVIL_CHAIN_ID, symbol: 'USDC', address: usdc.address, decimals: 6 }],
      },
      { chain_id: ANVIL_CHAIN_ID, bridge, info_url: info.url, poll_seconds: 0.2 },
    );
    const env = { ...WORKER_ENV, FERRY_CONFIG_FILE: config, HOT_1_KEY: key };
    const { movement, nodes } = await seedMovement(db.pool, topupPlan(`hl-kill-${label}`, 'hot_1'), { intent: { asset: 'USDC', amount: '25' } });
    await withTransaction(db.pool, (c) =>
      deliverMovementEvent(c, movement.id, { type: 'APPROVE', by: 'approver', at: new Date().toISOString() }, { actor: 'approver', deps: collectingDeps() }),
    );
    const topup = nodes.find((n) => n.node_key === 'topup')!;

    const first = spawnWorker(db.url, env);
    const heldRaw = (await Promise.race([proxy.held, exited(first).then(() => null)])) as Hex | null;
    assert.ok(heldRaw, 'the worker reached the broadcast');
    first.kill('SIGKILL');
    assert.equal((await exited(first)).signal, 'SIGKILL');

    const stuck = (await snapshot(db.pool, movement.id)).byKey.topup;
    assert.equal(stuck.node_state, 'SUBMITTING', 'the kill left the attempt undecided');
    const signed = (await artifactsOfNodes(db.pool, [topup.id])).find((a) => a.artifact_type === 'signature' && a.attempt_no === stuck.attempt_no);
    assert.equal(signed?.content_inline, heldRaw, 'the bytes on the wire are the stored ones');
    const hash = keccak256(heldRaw);
    const deposits = () => chain.getContractEvents({ address: usdc.address, abi: erc20Abi, eventName: 'Transfer', args: { from: wallet }, fromBlock: 0n, toBlock: 'latest' });
    if (mode === 'hold_before') assert.equal((await deposits()).length, 0, 'nothing reached the chain');
    else assert.equal((await chain.getTransactionReceipt({ hash })).status, 'success', 'the chain took it');

    proxy.mode = 'pass';
    const done = await finishInWorker(db.url, db.pool, movement.id, env);
    assert.equal(done.movement.request_state, 'COMPLETED');
    assert.equal(done.byKey.topup.attempt_no, stuck.attempt_no, 'no new attempt');
    assert.equal(done.byKey.topup.provider_refs.tx_hash, hash, 'the very transaction that was signed');
    assert.equal(done.byKey.credit.node_state, 'COMPLETED');
    const logs = await deposits();
    assert.equal(logs.length, 1, 'exactly one Transfer from the wallet');
    assert.equal(logs[0].transactionHash, hash);
    assert.equal(logs[0].args.to?.toLowerCase(), bridge);
    assert.equal(logs[0].args.value, 25_000_000n);
    assert.equal(await chain.getTransactionCount({ address: wallet }), 1, 'one transaction from the wallet');
    assert.equal(await tokenBalance(chain, usdc, wallet), 75_000_000n);
    assert.equal(info.credits.filter((c) => c.user === wallet.toLowerCase()).length, 1, 'credited once');
    assert.equal(info.withdrawable(wallet), 25_000_000n);
  });
}
