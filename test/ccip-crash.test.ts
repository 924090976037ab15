import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { keccak256, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { deliverMovementEvent } from '../src/durable/transition.ts';
import { CCIP_SEND_SELECTOR } from '../src/executors/ccip/index.ts';
import { withTransaction } from '../src/persistence/db.ts';
import type { TemplateDefinitionInput } from '../src/plan/template-schema.ts';
import { ccipSendTemplate } from '../scripts/sandbox/templates.ts';
import { ccipConfigFile, ccipEvents, DESTINATION_CHAIN_ID, FEE_CAP_WEI, SOURCE_CHAIN_ID, startCcipWorld, type CcipWorld } from './helpers/ccip.ts';
import { tokenBalance } from './helpers/contracts.ts';
import { scratchDatabase } from './helpers/db.ts';
import { collectingDeps, seedMovement } from './helpers/fixtures.ts';
import { exited, spawnWorker } from './helpers/processes.ts';
import { startRpcProxy, type ProxyMode } from './helpers/rpc-proxy.ts';
import { finishInWorker, snapshot } from './helpers/runtime.ts';

/**
 * A worker process running a `ccip_send` movement is SIGKILLed in the broadcast window of the
 * ccipSend: before the transaction reached the chain, and after the chain took it but before the
 * answer came back (an RPC proxy in front of the source chain holds eth_sendRawTransaction), i.e.
 * between SUBMITTING and the submit's result. A second worker recovers from the stored signed bytes:
 * the movement completes, the source chain's logs show exactly one ccipSend transaction to the
 * Router from the hot wallet and one CCIPMessageSent, the destination exactly one execution of that
 * messageId, and the receiver is paid once.
 */

let w: CcipWorld;
before(async () => {
  w = await startCcipWorld();
});
after(async () => {
  await w?.stop();
});

const WORKER_ENV = {
  FERRY_SUBMITTING_GRACE_SECONDS_BY_LANE: 'ccip=1',
  FERRY_NODE_RECOVERY_INTERVAL_SECONDS: '0.5',
  FERRY_NODE_DISPATCH_INTERVAL_SECONDS: '0.2',
};

/** Every transaction of the hot wallet to the Router calling ccipSend, read block by block from the source chain. */
async function ccipSendsOnChain(from: Address): Promise<Hex[]> {
  const head = await w.source.chain.getBlockNumber();
  const hashes: Hex[] = [];
  for (let b = 0n; b <= head; b++) {
    const block = await w.source.chain.getBlock({ blockNumber: b, includeTransactions: true });
    for (const tx of block.transactions) {
      if (tx.from.toLowerCase() === from && tx.to?.toLowerCase() === w.source.router.address && tx.input.startsWith(CCIP_SEND_SELECTOR)) hashes.push(tx.hash);
    }
  }
  return hashes;
}

for (const [mode, label] of [
  ['hold_before', 'before'],
  ['hold_after', 'after'],
] as Array<[ProxyMode, string]>) {
  test(`SIGKILL ${label} the ccipSend broadcast: recovered from the signed bytes, one ccipSend on chain, one execution, paid once`, async (t) => {
    const db = await scratchDatabase(t);
    const proxy = await startRpcProxy(w.source.rpcUrl, mode);
    t.after(() => proxy.stop());
    const env = { ...WORKER_ENV, FERRY_CONFIG_FILE: ccipConfigFile(w, { rpc: { source: proxy.url } }), CCIP_HOT_KEY: w.hotKey };
    const to = privateKeyToAccount(generatePrivateKey()).address.toLowerCase() as Address;
    const before = await ccipEvents(w);
    const sendsBefore = await ccipSendsOnChain(w.hot);
    const template = ccipSendTemplate({ templateKey: `ccip-kill-${label}`, sourceChainId: SOURCE_CHAIN_ID, destinationChainId: DESTINATION_CHAIN_ID, signerKey: 'hot', maxFeeWei: FEE_CAP_WEI }) as unknown as TemplateDefinitionInput;
    const { movement } = await seedMovement(db.pool, template, { intent: { asset: 'USDC', amount: '7.25', destination: { address: to } } });
    await withTransaction(db.pool, (c) => deliverMovementEvent(c, movement.id, { type: 'APPROVE', by: 'approver', at: new Date().toISOString() }, { actor: 'approver', deps: collectingDeps() }));

    const first = spawnWorker(db.url, env);
    const heldRaw = (await Promise.race([proxy.held, exited(first).then(() => null)])) as Hex | null;
    assert.ok(heldRaw, 'the worker reached the broadcast');
    first.kill('SIGKILL');
    assert.equal((await exited(first)).signal, 'SIGKILL');

    const stuck = (await snapshot(db.pool, movement.id)).byKey.send;
    assert.equal(stuck.node_state, 'SUBMITTING', 'the kill left the attempt undecided');
    const hash = keccak256(heldRaw);
    if (mode === 'hold_before') {
      await assert.rejects(w.source.chain.getTransaction({ hash }), /could not be found/, 'nothing reached the chain');
    } else {
      assert.equal((await w.source.chain.getTransactionReceipt({ hash })).status, 'success', 'the chain took it');
    }

    proxy.mode = 'pass';
    const done = await finishInWorker(db.url, db.pool, movement.id, env);
    assert.equal(done.movement.request_state, 'COMPLETED', JSON.stringify(done.nodes.map((n) => [n.node_key, n.node_state, n.error_code, n.error_detail])));
    assert.equal(done.byKey.send.attempt_no, stuck.attempt_no, 'no new attempt');
    assert.equal(done.byKey.send.provider_refs.tx_hash, hash, 'the very transaction that was signed');
    // From the chain: one ccipSend transaction, one CCIPMessageSent, one execution of its messageId.
    const sends = (await ccipSendsOnChain(w.hot)).filter((h) => !sendsBefore.includes(h));
    assert.deepEqual(sends, [hash], 'exactly one ccipSend on the source chain');
    const events = await ccipEvents(w);
    const sent = events.sent.slice(before.sent.length) as unknown as Array<{ args: { message: { header: { messageId: Hex } } }; transactionHash: Hex }>;
    const executed = events.executed.slice(before.executed.length) as unknown as Array<{ args: { messageId: Hex; state: number } }>;
    assert.equal(sent.length, 1, 'exactly one CCIPMessageSent');
    assert.equal(sent[0]!.transactionHash, hash);
    assert.equal(executed.length, 1, 'exactly one execution on the destination');
    assert.equal(executed[0]!.args.messageId, sent[0]!.args.message.header.messageId);
    assert.equal(executed[0]!.args.state, 2);
    assert.equal(done.byKey.delivery.provider_refs.message_id, sent[0]!.args.message.header.messageId.toLowerCase());
    assert.equal(await tokenBalance(w.destination.chain, w.destination.token, to), 7_250_000n, 'paid once');
    const recovered = await db.pool.query(`SELECT count(*)::int AS n FROM transitions WHERE entity_id = $1 AND event_type = 'RECOVERED'`, [stuck.id]);
    assert.ok(recovered.rows[0].n >= 1, 'recovery resolved the stuck attempt');
  });
}
