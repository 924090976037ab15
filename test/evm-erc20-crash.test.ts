import assert from 'node:assert/strict';
import { test } from 'node:test';
import { erc20Abi, keccak256, type Address, type Hex, type PublicClient } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { deliverMovementEvent } from '../src/durable/transition.ts';
import { EVM_ERC20_TRANSFER_KEY } from '../src/executors/evm/index.ts';
import { artifactsOfNodes } from '../src/persistence/artifacts.ts';
import { withTransaction } from '../src/persistence/db.ts';
import { ANVIL_CHAIN_ID, ANVIL_DEV_KEY, freshAddress, type Anvil } from './helpers/anvil.ts';
import { sendCall, tokenBalance, usdcChainForFile, type DeployedToken } from './helpers/contracts.ts';
import { scratchDatabase } from './helpers/db.ts';
import { writeConfigFile } from './helpers/evm.ts';
import { collectingDeps, seedMovement } from './helpers/fixtures.ts';
import { exited, spawnWorker } from './helpers/processes.ts';
import { startRpcProxy, type ProxyMode } from './helpers/rpc-proxy.ts';
import { finishInWorker, plan, snapshot } from './helpers/runtime.ts';

/**
 * A worker process is SIGKILLed while an ERC-20 transfer's signed bytes are stored and the node is
 * SUBMITTING: once before the broadcast reached the chain, once after the chain took it but before
 * the answer came back (an RPC proxy in front of anvil holds eth_sendRawTransaction). A second
 * worker recovers from the stored bytes: exactly one Transfer lands and the movement completes.
 */

let anvil: Anvil;
let chain: PublicClient;
let usdc: DeployedToken;

usdcChainForFile((local) => void ({ anvil, chain, usdc } = local));

const WORKER_ENV = {
  FERRY_SUBMITTING_GRACE_SECONDS_BY_LANE: 'evm=1',
  FERRY_NODE_RECOVERY_INTERVAL_SECONDS: '0.5',
  FERRY_NODE_DISPATCH_INTERVAL_SECONDS: '0.2',
};

async function transfersFrom(from: Address) {
  return chain.getContractEvents({ address: usdc.address, abi: erc20Abi, eventName: 'Transfer', args: { from }, fromBlock: 0n, toBlock: 'latest' });
}

for (const [mode, label] of [
  ['hold_before', 'before'],
  ['hold_after', 'after'],
] as Array<[ProxyMode, string]>) {
  test(`SIGKILL ${label} the broadcast of an ERC-20 transfer: recovered from the signed bytes, exactly one Transfer, completed`, async (t) => {
    const db = await scratchDatabase(t);
    const key = generatePrivateKey();
    const wallet = privateKeyToAccount(key).address;
    await anvil.rpc('anvil_setBalance', [wallet, '0xde0b6b3a7640000']);
    await sendCall(chain, anvil.url, ANVIL_DEV_KEY, usdc, 'mint', [wallet, 100_000_000n]);
    const proxy = await startRpcProxy(anvil.url, mode);
    t.after(() => proxy.stop());
    const config = writeConfigFile({
      chains: [{ chain_id: ANVIL_CHAIN_ID, rpc_url: proxy.url, poll_seconds: 0.2 }],
      signers: [{ key: 'hot_1', kind: 'local_key', private_key_env: 'HOT_1_KEY', chains: [ANVIL_CHAIN_ID] }],
      tokens: [{ chain_id: ANVIL_CHAIN_ID, symbol: 'USDC', address: usdc.address, decimals: 6 }],
    });
    const env = { ...WORKER_ENV, FERRY_CONFIG_FILE: config, HOT_1_KEY: key };
    const to = freshAddress();
    const template = plan(`erc20-kill-${label}`, [
      { node_key: 'pay', node_kind: 'action', action_type: 'erc20_transfer', executor_binding: EVM_ERC20_TRANSFER_KEY, signer_binding: 'hot_1', config: { token: 'USDC', to } },
    ]);
    const { movement, nodes } = await seedMovement(db.pool, template, { intent: { asset: 'USDC', amount: '12.5' } });
    await withTransaction(db.pool, (c) =>
      deliverMovementEvent(c, movement.id, { type: 'APPROVE', by: 'approver', at: new Date().toISOString() }, { actor: 'approver', deps: collectingDeps() }),
    );

    const first = spawnWorker(db.url, env);
    const heldRaw = (await Promise.race([proxy.held, exited(first).then(() => null)])) as Hex | null;
    assert.ok(heldRaw, 'the worker reached the broadcast');
    first.kill('SIGKILL');
    assert.equal((await exited(first)).signal, 'SIGKILL');

    const stuck = (await snapshot(db.pool, movement.id)).byKey.pay;
    assert.equal(stuck.node_state, 'SUBMITTING', 'the kill left the attempt undecided');
    const signed = (await artifactsOfNodes(db.pool, [nodes[0].id])).find((a) => a.artifact_type === 'signature' && a.attempt_no === stuck.attempt_no);
    assert.equal(signed?.content_inline, heldRaw, 'the bytes on the wire are the stored ones');
    const hash = keccak256(heldRaw);
    if (mode === 'hold_before') {
      assert.equal((await transfersFrom(wallet)).length, 0, 'nothing reached the chain');
    } else {
      assert.equal((await chain.getTransactionReceipt({ hash })).status, 'success', 'the chain took it');
    }

    proxy.mode = 'pass';
    // A second worker recovers the attempt and carries the movement to its end.
    const done = await finishInWorker(db.url, db.pool, movement.id, env);
    assert.equal(done.movement.request_state, 'COMPLETED');
    assert.equal(done.byKey.pay.attempt_no, stuck.attempt_no, 'no new attempt');
    assert.equal(done.byKey.pay.provider_refs.tx_hash, hash, 'the very transaction that was signed');
    const logs = await transfersFrom(wallet);
    assert.equal(logs.length, 1, 'exactly one Transfer');
    assert.equal(logs[0].transactionHash, hash);
    assert.equal(await tokenBalance(chain, usdc, to), 12_500_000n);
    assert.equal(await tokenBalance(chain, usdc, wallet), 87_500_000n);
    assert.equal(await chain.getTransactionCount({ address: wallet }), 1, 'one transaction from the wallet');
    const recovered = await db.pool.query(`SELECT count(*)::int AS n FROM transitions WHERE entity_id = $1 AND event_type = 'RECOVERED'`, [stuck.id]);
    assert.ok(recovered.rows[0].n >= 1, 'recovery resolved the stuck attempt');
  });
}
