import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { keccak256, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { deliverMovementEvent } from '../src/durable/transition.ts';
import { withTransaction } from '../src/persistence/db.ts';
import type { TemplateDefinitionInput } from '../src/plan/template-schema.ts';
import { usdt0SendTemplate } from '../scripts/sandbox/templates.ts';
import { tokenBalance } from './helpers/contracts.ts';
import { scratchDatabase } from './helpers/db.ts';
import { collectingDeps, seedMovement } from './helpers/fixtures.ts';
import { exited, spawnWorker } from './helpers/processes.ts';
import { startRpcProxy, type ProxyMode } from './helpers/rpc-proxy.ts';
import { finishInWorker, snapshot } from './helpers/runtime.ts';
import { DESTINATION_CHAIN_ID, FEE_CAP_WEI, oftEvents, SOURCE_CHAIN_ID, startUsdt0World, usdt0ConfigFile, type Usdt0World } from './helpers/usdt0.ts';

/**
 * A worker process running a `usdt0_send` movement is SIGKILLed in the broadcast window of the OFT
 * send: before the transaction reached the chain, and after the chain took it but before the answer
 * came back (an RPC proxy in front of the source chain holds eth_sendRawTransaction). A second
 * worker recovers from the stored signed bytes: the movement completes, the source chain shows
 * exactly one OFTSent and the destination exactly one OFTReceived, with the same GUID, and the
 * recipient is paid once.
 */

let w: Usdt0World;
before(async () => {
  w = await startUsdt0World();
});
after(async () => {
  await w?.stop();
});

const WORKER_ENV = {
  FERRY_SUBMITTING_GRACE_SECONDS_BY_LANE: 'usdt0=1',
  FERRY_NODE_RECOVERY_INTERVAL_SECONDS: '0.5',
  FERRY_NODE_DISPATCH_INTERVAL_SECONDS: '0.2',
};

for (const [mode, label] of [
  ['hold_before', 'before'],
  ['hold_after', 'after'],
] as Array<[ProxyMode, string]>) {
  test(`SIGKILL ${label} the send's broadcast: recovered from the signed bytes, one OFTSent, one OFTReceived, paid once`, async (t) => {
    const db = await scratchDatabase(t);
    const proxy = await startRpcProxy(w.source.rpcUrl, mode);
    t.after(() => proxy.stop());
    const env = { ...WORKER_ENV, FERRY_CONFIG_FILE: usdt0ConfigFile(w, { rpc: { source: proxy.url } }), USDT0_HOT_KEY: w.hotKey };
    const to = privateKeyToAccount(generatePrivateKey()).address.toLowerCase() as Address;
    const before = await oftEvents(w);
    const template = usdt0SendTemplate({
      templateKey: `usdt0-kill-${label}`,
      sourceChainId: SOURCE_CHAIN_ID,
      destinationChainId: DESTINATION_CHAIN_ID,
      signerKey: 'hot',
      maxNativeFeeWei: FEE_CAP_WEI,
    }) as unknown as TemplateDefinitionInput;
    const { movement } = await seedMovement(db.pool, template, { intent: { asset: 'USDT0', amount: '7.25', destination: { address: to } } });
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
    const events = await oftEvents(w);
    const sent = events.sent.slice(before.sent.length) as unknown as Array<{ args: { guid: Hex } }>;
    const received = events.received.slice(before.received.length) as unknown as Array<{ args: { guid: Hex } }>;
    assert.equal(sent.length, 1, 'exactly one OFTSent on the source chain');
    assert.equal(received.length, 1, 'exactly one OFTReceived on the destination chain');
    assert.equal(sent[0]!.args.guid, received[0]!.args.guid);
    assert.equal(done.byKey.credit.provider_refs.guid, sent[0]!.args.guid.toLowerCase());
    assert.equal(await tokenBalance(w.destination.chain, w.destination.token, to), 7_250_000n, 'paid once');
    const recovered = await db.pool.query(`SELECT count(*)::int AS n FROM transitions WHERE entity_id = $1 AND event_type = 'RECOVERED'`, [stuck.id]);
    assert.ok(recovered.rows[0].n >= 1, 'recovery resolved the stuck attempt');
  });
}
