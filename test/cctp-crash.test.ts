import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { keccak256, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { deliverMovementEvent } from '../src/durable/transition.ts';
import { withTransaction } from '../src/persistence/db.ts';
import { cctpBridgeTemplate } from '../scripts/sandbox/templates.ts';
import { cctpConfigFile, cctpEvents, DESTINATION_CHAIN_ID, SOURCE_CHAIN_ID, startCctpWorld, type CctpWorld } from './helpers/cctp.ts';
import { tokenBalance } from './helpers/contracts.ts';
import { scratchDatabase } from './helpers/db.ts';
import { collectingDeps, seedMovement } from './helpers/fixtures.ts';
import { exited, spawnWorker } from './helpers/processes.ts';
import { startRpcProxy, type ProxyMode } from './helpers/rpc-proxy.ts';
import { finishInWorker, snapshot } from './helpers/runtime.ts';
import type { TemplateDefinitionInput } from '../src/plan/template-schema.ts';

/**
 * A worker process running a `cctp_bridge` movement is SIGKILLed in the broadcast window of the
 * burn (source chain) and of the mint (destination chain), before the transaction reached the
 * chain and after the chain took it but before the answer came back (an RPC proxy in front of the
 * chain holds eth_sendRawTransaction). A second worker recovers from the stored signed bytes: the
 * movement completes, the source chain shows exactly one burn and the destination exactly one mint.
 */

let w: CctpWorld;
before(async () => {
  // Attested at the first confirmation: nobody mines for the worker processes but their own transactions.
  w = await startCctpWorld({ confirmations: 1 });
});
after(async () => {
  await w?.stop();
});

const WORKER_ENV = {
  FERRY_SUBMITTING_GRACE_SECONDS_BY_LANE: 'cctp=1',
  FERRY_NODE_RECOVERY_INTERVAL_SECONDS: '0.5',
  FERRY_NODE_DISPATCH_INTERVAL_SECONDS: '0.2',
};

for (const [window, node] of [
  ['burn', 'burn'],
  ['mint', 'mint'],
] as const) {
  for (const [mode, label] of [
    ['hold_before', 'before'],
    ['hold_after', 'after'],
  ] as Array<[ProxyMode, string]>) {
    test(`SIGKILL ${label} the ${window} broadcast: recovered from the signed bytes, one burn, one mint, completed`, async (t) => {
      const db = await scratchDatabase(t);
      const target = window === 'burn' ? w.source : w.destination;
      const proxy = await startRpcProxy(target.rpcUrl, mode);
      t.after(() => proxy.stop());
      const config = cctpConfigFile(w, { rpc: window === 'burn' ? { source: proxy.url } : { destination: proxy.url } });
      const env = { ...WORKER_ENV, FERRY_CONFIG_FILE: config, CCTP_HOT_KEY: w.hotKey };
      const to = privateKeyToAccount(generatePrivateKey()).address.toLowerCase() as Address;
      const before = await cctpEvents(w);
      const template = cctpBridgeTemplate({
        templateKey: `cctp-kill-${window}-${label}`,
        sourceChainId: SOURCE_CHAIN_ID,
        destinationChainId: DESTINATION_CHAIN_ID,
        signerKey: 'hot',
      }) as unknown as TemplateDefinitionInput;
      const { movement } = await seedMovement(db.pool, template, { intent: { asset: 'USDC', amount: '7.25', destination: { address: to } } });
      await withTransaction(db.pool, (c) =>
        deliverMovementEvent(c, movement.id, { type: 'APPROVE', by: 'approver', at: new Date().toISOString() }, { actor: 'approver', deps: collectingDeps() }),
      );

      const first = spawnWorker(db.url, env);
      const heldRaw = (await Promise.race([proxy.held, exited(first).then(() => null)])) as Hex | null;
      assert.ok(heldRaw, `the worker reached the ${window} broadcast`);
      first.kill('SIGKILL');
      assert.equal((await exited(first)).signal, 'SIGKILL');

      const stuck = (await snapshot(db.pool, movement.id)).byKey[node];
      assert.equal(stuck.node_state, 'SUBMITTING', 'the kill left the attempt undecided');
      const hash = keccak256(heldRaw);
      if (mode === 'hold_before') {
        await assert.rejects(target.chain.getTransaction({ hash }), /could not be found/, 'nothing reached the chain');
      } else {
        assert.equal((await target.chain.getTransactionReceipt({ hash })).status, 'success', 'the chain took it');
      }

      proxy.mode = 'pass';
      const done = await finishInWorker(db.url, db.pool, movement.id, env);
      assert.equal(done.movement.request_state, 'COMPLETED', JSON.stringify(done.nodes.map((n) => [n.node_key, n.node_state, n.error_code])));
      assert.equal(done.byKey[node].attempt_no, stuck.attempt_no, 'no new attempt');
      assert.equal(done.byKey[node].provider_refs.tx_hash, hash, 'the very transaction that was signed');
      const events = await cctpEvents(w);
      assert.equal(events.burns.length - before.burns.length, 1, 'exactly one burn on the source chain');
      assert.equal(events.mints.length - before.mints.length, 1, 'exactly one mint on the destination chain');
      assert.equal(await tokenBalance(w.destination.chain, w.destination.token, to), 7_250_000n, 'the funds arrived');
      const recovered = await db.pool.query(`SELECT count(*)::int AS n FROM transitions WHERE entity_id = $1 AND event_type = 'RECOVERED'`, [stuck.id]);
      assert.ok(recovered.rows[0].n >= 1, 'recovery resolved the stuck attempt');
    });
  }
}
