import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { maxUint256, type Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { deliverMovementEvent } from '../src/durable/transition.ts';
import { withTransaction } from '../src/persistence/db.ts';
import type { TemplateDefinitionInput } from '../src/plan/template-schema.ts';
import { gatewayTransferTemplate } from '../scripts/sandbox/templates.ts';
import { tokenBalance } from './helpers/contracts.ts';
import { scratchDatabase } from './helpers/db.ts';
import { collectingDeps, seedMovement } from './helpers/fixtures.ts';
import { DESTINATION_CHAIN_ID, gatewayConfigFile, gatewayEvents, MAX_FEE, SOURCE_CHAIN_ID, startGatewayWorld, writeGateway, type GatewayWorld } from './helpers/gateway.ts';
import { exited, spawnWorker } from './helpers/processes.ts';
import { startRpcProxy, type RpcProxy } from './helpers/rpc-proxy.ts';
import { finishInWorker, snapshot } from './helpers/runtime.ts';

/**
 * A worker process running a `gateway_transfer` movement is SIGKILLed between SUBMITTING and the
 * submit's result at each of the lane's three side effects: after the source chain took the
 * deposit (an RPC proxy holds the answer of eth_sendRawTransaction), after Gateway burned for the
 * burn intent (the emulated API holds its answer), and after the destination chain took the mint.
 * A second worker recovers each from the attempt's durable facts (the signed transaction bytes,
 * the signed burn intent posted again): the movement completes, and the chains show exactly one
 * deposit, one burn and one mint, the recipient paid once.
 */

let w: GatewayWorld;
before(async () => {
  w = await startGatewayWorld();
  // The wallet's standing allowance: approve is SKIPPED, so the first broadcast on the source is the deposit.
  await writeGateway(w.source, w.source.token, 'approve', [w.source.wallet.address, maxUint256], w.hotKey);
});
after(async () => {
  await w?.stop();
});

const WORKER_ENV = {
  FERRY_SUBMITTING_GRACE_SECONDS_BY_LANE: 'gateway=1',
  FERRY_NODE_RECOVERY_INTERVAL_SECONDS: '0.5',
  FERRY_NODE_DISPATCH_INTERVAL_SECONDS: '0.2',
};

for (const at of ['deposit', 'intent', 'mint'] as const) {
  test(`SIGKILL after the ${at} reached its provider, before the answer: recovered, one deposit, one burn, one mint on chain, paid once`, async (t) => {
    const db = await scratchDatabase(t);
    const proxies: { source: RpcProxy; destination: RpcProxy } = {
      source: await startRpcProxy(w.source.rpcUrl, at === 'deposit' ? 'hold_after' : 'pass'),
      destination: await startRpcProxy(w.destination.rpcUrl, at === 'mint' ? 'hold_after' : 'pass'),
    };
    t.after(() => Promise.all([proxies.source.stop(), proxies.destination.stop()]));
    const env = { ...WORKER_ENV, FERRY_CONFIG_FILE: gatewayConfigFile(w, { rpc: { source: proxies.source.url, destination: proxies.destination.url } }), GATEWAY_HOT_KEY: w.hotKey };
    const to = privateKeyToAccount(generatePrivateKey()).address.toLowerCase() as Address;
    const before = await gatewayEvents(w);
    const template = gatewayTransferTemplate({ templateKey: `gateway-kill-${at}`, sourceChainId: SOURCE_CHAIN_ID, destinationChainId: DESTINATION_CHAIN_ID, signerKey: 'hot', maxFee: MAX_FEE }) as unknown as TemplateDefinitionInput;
    const { movement } = await seedMovement(db.pool, template, { intent: { asset: 'USDC', amount: '4.75', destination: { address: to } } });
    await withTransaction(db.pool, (c) => deliverMovementEvent(c, movement.id, { type: 'APPROVE', by: 'approver', at: new Date().toISOString() }, { actor: 'approver', deps: collectingDeps() }));

    const reached = at === 'deposit' ? proxies.source.held : at === 'mint' ? proxies.destination.held : w.api.holdAnswers();
    const first = spawnWorker(db.url, env);
    const held = await Promise.race([reached.then(() => true), exited(first).then(() => false)]);
    assert.ok(held, `the worker reached the ${at}`);
    first.kill('SIGKILL');
    assert.equal((await exited(first)).signal, 'SIGKILL');

    const stuck = (await snapshot(db.pool, movement.id)).byKey[at]!;
    assert.equal(stuck.node_state, 'SUBMITTING', 'the kill left the attempt undecided');
    const mid = await gatewayEvents(w);
    if (at === 'deposit') assert.equal(mid.deposited.length, before.deposited.length + 1, 'the chain took the deposit');
    if (at === 'intent') assert.equal(mid.burned.length, before.burned.length + 1, 'Gateway burned before its answer was lost');
    if (at === 'mint') assert.equal(mid.minted.length, before.minted.length + 1, 'the chain took the mint');

    proxies.source.mode = 'pass';
    proxies.destination.mode = 'pass';
    w.api.release();
    const done = await finishInWorker(db.url, db.pool, movement.id, env);
    assert.equal(done.movement.request_state, 'COMPLETED', JSON.stringify(done.nodes.map((n) => [n.node_key, n.node_state, n.error_code, n.error_detail])));
    assert.equal(done.byKey[at]!.attempt_no, stuck.attempt_no, 'no new attempt');
    // From the chains: exactly one of each, for this movement.
    const events = await gatewayEvents(w);
    const deposited = events.deposited.slice(before.deposited.length) as unknown as Array<{ args: { depositor: Address; value: bigint } }>;
    const burned = events.burned.slice(before.burned.length) as unknown as Array<{ args: { transferSpecHash: string; value: bigint } }>;
    const minted = events.minted.slice(before.minted.length) as unknown as Array<{ args: { transferSpecHash: string; recipient: Address; value: bigint } }>;
    assert.equal(deposited.length, 1, 'exactly one deposit');
    assert.equal(deposited[0]!.args.depositor.toLowerCase(), w.hot);
    assert.equal(deposited[0]!.args.value, 5_250_000n, 'the amount plus the fee reserve');
    assert.equal(burned.length, 1, 'exactly one burn');
    assert.equal(burned[0]!.args.value, 4_750_000n);
    assert.equal(minted.length, 1, 'exactly one mint');
    assert.equal(minted[0]!.args.transferSpecHash, burned[0]!.args.transferSpecHash);
    assert.equal(minted[0]!.args.recipient.toLowerCase(), to);
    assert.equal(done.byKey.intent!.provider_refs.transfer_spec_hash, burned[0]!.args.transferSpecHash);
    assert.equal(await tokenBalance(w.destination.chain, w.destination.token, to), 4_750_000n, 'paid once');
    const recovered = await db.pool.query(`SELECT count(*)::int AS n FROM transitions WHERE entity_id = $1 AND event_type = 'RECOVERED'`, [stuck.id]);
    assert.ok(recovered.rows[0].n >= 1, 'recovery resolved the stuck attempt');
  });
}
