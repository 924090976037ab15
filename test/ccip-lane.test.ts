import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { encodeFunctionData, parseTransaction, serializeTransaction, zeroAddress, type Address, type Hex, type TransactionSerializableEIP1559 } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import type { WorkerDeps } from '../src/actors/execution.ts';
import { configuredRegistries } from '../src/actors/runtime.ts';
import { CCIP_SEND_KEY, decodeCcipSend, encodeExtraArgsV2, encodeReceiver, routerAbi } from '../src/executors/ccip/index.ts';
import { deriveExpectedEffect, pinExpectedEffect } from '../src/executors/evm/expected-effect.ts';
import { payloadHash } from '../src/executors/payload-hash.ts';
import type { Executor, Signer } from '../src/executors/protocol.ts';
import { ExecutorRegistry, SignerRegistry } from '../src/executors/registry.ts';
import { effectConfigOf } from '../src/executors/sign-request.ts';
import { movementEffect } from '../src/http/effect.ts';
import { log } from '../src/log.ts';
import { listAuditEvents, promoteAuditBatch } from '../src/persistence/audit.ts';
import type { Pool } from '../src/persistence/db.ts';
import type { TemplateDefinitionInput } from '../src/plan/template-schema.ts';
import { ccipSendTemplate } from '../scripts/sandbox/templates.ts';
import {
  BASE_FEE_WEI,
  ccipConfigFile,
  ccipEvents,
  deployCcipContract,
  DESTINATION_CHAIN_ID,
  DESTINATION_SELECTOR,
  FEE_CAP_WEI,
  FEE_PER_BYTE_WEI,
  FEE_PER_GAS_WEI,
  FEE_PER_TOKEN_WEI,
  SOURCE_CHAIN_ID,
  startCcipWorld,
  writeCcip,
  type CcipWorld,
} from './helpers/ccip.ts';
import { tokenBalance } from './helpers/contracts.ts';
import { scratchDatabase } from './helpers/db.ts';
import { startRpcProxy, type RpcProxy } from './helpers/rpc-proxy.ts';
import { approvedMovement, backdateNodes, drain, runtimeDeps, snapshot } from './helpers/runtime.ts';
import { waitFor } from './helpers/wait.ts';

/**
 * The CCIP lane on two anvil chains (31337, selector of Ethereum: a Router, OnRamp and lock pool;
 * 31338, selector of Arbitrum: an OffRamp and a minting pool) with the CCIP 1.6 test contracts, the
 * emulated execution on loopback and real PostgreSQL, through the real dispatcher, observer and
 * signer: getFee, ccipSend with exactly the quoted fee, re-quoted right before the broadcast, and the
 * execution state read on the destination by the messageId.
 */

let w: CcipWorld;
before(async () => {
  w = await startCcipWorld();
});
after(async () => {
  await w?.stop();
});

const fresh = () => privateKeyToAccount(generatePrivateKey()).address.toLowerCase() as Address;
const setFee = (base: bigint) => writeCcip(w.source, w.source.onRamp, 'setDestConfig', [DESTINATION_SELECTOR, true, false, 3_000_000, base, FEE_PER_BYTE_WEI, FEE_PER_TOKEN_WEI, FEE_PER_GAS_WEI]);

async function laneDeps(pool: Pool, opts: { wrap?: (r: ExecutorRegistry) => ExecutorRegistry; ccip?: Record<string, unknown>; rpc?: { source?: string } } = {}): Promise<WorkerDeps & { signed: number[] }> {
  const env = { FERRY_SUBMITTING_GRACE_SECONDS_BY_LANE: 'ccip=0.001', FERRY_CONFIG_FILE: ccipConfigFile(w, { ccip: opts.ccip, rpc: opts.rpc }), CCIP_HOT_KEY: w.hotKey };
  const base = runtimeDeps(pool, env);
  const { executors, signers } = await configuredRegistries(pool, base.config, { env, log });
  const signed: number[] = [];
  const counting = new SignerRegistry();
  for (const s of signers.all()) counting.register({ signerKey: s.signerKey, sign: (req) => (signed.push(1), s.sign(req)) } satisfies Signer);
  return { ...base, executors: opts.wrap ? opts.wrap(executors) : executors, signers: counting, signed };
}

const template = (key: string, config: Record<string, unknown> = {}) => {
  const t = ccipSendTemplate({ templateKey: key, sourceChainId: SOURCE_CHAIN_ID, destinationChainId: DESTINATION_CHAIN_ID, signerKey: 'hot', maxFeeWei: FEE_CAP_WEI }) as {
    nodes: Array<{ node_key: string; config: Record<string, unknown> }>;
  };
  Object.assign(t.nodes[0]!.config, config);
  return t as unknown as TemplateDefinitionInput;
};

async function runToEnd(deps: WorkerDeps, id: string) {
  return waitFor('the movement to finish', async () => {
    await drain(deps);
    const s = await snapshot(deps.pool, id);
    if (['COMPLETED', 'FAILED', 'MANUAL_INTERVENTION'].includes(s.movement.request_state)) return s;
    await backdateNodes(deps.pool, [id], 'next_observe_at', 60);
    return null;
  });
}

const shown = (s: Awaited<ReturnType<typeof snapshot>>) => JSON.stringify(s.nodes.map((n) => [n.node_key, n.node_state, n.error_code, n.error_detail]));
const onRampFees = () => w.source.chain.getBalance({ address: w.source.onRamp.address });
const QUOTED = BASE_FEE_WEI + FEE_PER_TOKEN_WEI;

test('ccip_send: getFee, ccipSend with exactly the quoted fee on 31337, the execution read on 31338 by the messageId', async (t) => {
  const db = await scratchDatabase(t);
  const deps = await laneDeps(db.pool);
  const to = fresh();
  const before = await ccipEvents(w);
  const hotBefore = await tokenBalance(w.source.chain, w.source.token, w.hot);
  const poolBefore = await tokenBalance(w.source.chain, w.source.token, w.source.pool.address);
  const feesBefore = await onRampFees();
  const id = await approvedMovement(deps, template('ccip-e2e'), { asset: 'USDC', amount: '12.5', destination: { address: to } });

  const s = await runToEnd(deps, id);
  assert.equal(s.movement.request_state, 'COMPLETED', shown(s));
  assert.equal(await tokenBalance(w.destination.chain, w.destination.token, to), 12_500_000n, 'minted on the destination');
  assert.equal(await tokenBalance(w.source.chain, w.source.token, w.hot), hotBefore - 12_500_000n, 'debited on the source');
  assert.equal((await tokenBalance(w.source.chain, w.source.token, w.source.pool.address)) - poolBefore, 12_500_000n, 'locked in the pool');
  const events = await ccipEvents(w);
  assert.equal(events.sent.length - before.sent.length, 1, 'one CCIPMessageSent');
  assert.equal(events.executed.length - before.executed.length, 1, 'one ExecutionStateChanged');
  const sent = events.sent.at(-1)! as unknown as { args: { message: { header: { messageId: Hex; sequenceNumber: bigint } } }; transactionHash: Hex };
  const executed = events.executed.at(-1)! as unknown as { args: { messageId: Hex; state: number }; transactionHash: Hex };
  const messageId = sent.args.message.header.messageId.toLowerCase();
  assert.equal(executed.args.messageId.toLowerCase(), messageId, 'the same messageId on both chains');
  assert.equal(executed.args.state, 2, 'SUCCESS');
  const { send, delivery } = s.byKey;
  assert.equal(send.provider_refs.tx_hash, sent.transactionHash);
  assert.equal(send.provider_refs.message_id, messageId);
  assert.equal(send.provider_refs.sequence_number, sent.args.message.header.sequenceNumber.toString());
  assert.equal(delivery.provider_refs.message_id, messageId);
  assert.equal(delivery.provider_refs.execution_tx_hash, executed.transactionHash);
  assert.equal(delivery.provider_refs.execution_state, 'SUCCESS');
  // The fee paid is the quoted one: the OnRamp holds it all.
  const tx = await w.source.chain.getTransaction({ hash: sent.transactionHash });
  assert.equal(tx.value, QUOTED);
  assert.equal(BigInt(String(send.provider_refs.fee_wei)), QUOTED);
  assert.equal((await onRampFees()) - feesBefore, tx.value);
  const call = decodeCcipSend(tx.input)!;
  assert.equal(call.destinationChainSelector, DESTINATION_SELECTOR);
  assert.equal(call.message.feeToken, zeroAddress);
  assert.equal(call.message.extraArgs, encodeExtraArgsV2(0n, true));

  // The expected effect pinned at creation: the Router, the selector, the receiver, the token amount, the cap.
  const e = deriveExpectedEffect({ plan: s.movement.compiled_plan, nodeKey: 'send', intent: s.movement.intent, evm: deps.config.file.evm, ccip: deps.config.file.ccip });
  assert.ok(e.ok, !e.ok ? e.reason : '');
  assert.equal(e.effect.to, w.source.router.address.toLowerCase());
  assert.equal(e.effect.asset, w.source.token.address.toLowerCase());
  assert.deepEqual(e.effect.ccip_send, {
    dest_chain_selector: DESTINATION_SELECTOR.toString(),
    destination_chain_id: DESTINATION_CHAIN_ID,
    receiver: encodeReceiver(to),
    token: w.source.token.address.toLowerCase(),
    amount: '12500000',
    data: '0x',
    fee_token: zeroAddress,
    extra_args: encodeExtraArgsV2(0n, true),
    max_fee_wei: FEE_CAP_WEI,
  });
  const pinned = pinExpectedEffect({ plan: s.movement.compiled_plan, nodeKey: 'send', intent: s.movement.intent, ...effectConfigOf(deps.config) });
  assert.ok('effect' in pinned);
  assert.deepEqual(pinned.effect.ccip_send, e.effect.ccip_send);
  // What approvers are shown: the asset, the amount, the destination chain and the receiver.
  const view = movementEffect({ plan: s.movement.compiled_plan, intent: s.movement.intent, compiledPlanHash: 'sha256:x', nodes: [{ node_key: 'send', expected_effect: pinned }], policy: null }).nodes.find((n) => n.node_key === 'send')!;
  assert.equal(view.asset, 'USDC');
  assert.equal(view.amount, '12.5');
  assert.equal(view.destination, to);
  assert.equal(view.destination_chain_id, DESTINATION_CHAIN_ID);
  assert.equal(view.contract, w.source.router.address.toLowerCase());
  const none = deriveExpectedEffect({ plan: s.movement.compiled_plan, nodeKey: 'send', intent: s.movement.intent, evm: deps.config.file.evm });
  assert.ok(!none.ok && /no ccip section/.test(none.reason));
});

test('a fee above the approved cap fails closed before signing: CCIP_FEE_ABOVE_CAP, nothing signed, nothing sent', async (t) => {
  const db = await scratchDatabase(t);
  const deps = await laneDeps(db.pool);
  const nonce = await w.source.chain.getTransactionCount({ address: w.hot });
  const before = await ccipEvents(w);
  const id = await approvedMovement(deps, template('ccip-fee-cap', { max_fee_wei: '1000' }), { asset: 'USDC', amount: '3', destination: { address: fresh() } });
  const s = await runToEnd(deps, id);
  assert.equal(s.byKey.send.node_state, 'FAILED');
  assert.equal(s.byKey.send.error_code, 'CCIP_FEE_ABOVE_CAP');
  assert.match(String(s.byKey.send.error_detail), /cap_wei=1000\]/);
  assert.equal(deps.signed.length, 0, 'the signer was never asked');
  assert.equal(await w.source.chain.getTransactionCount({ address: w.hot }), nonce, 'nothing sent');
  assert.equal((await ccipEvents(w)).sent.length, before.sent.length);
});

test('a destination the Router does not support: UnsupportedDestinationChain on the chain, CCIP_LANE_NOT_SUPPORTED before signing', async (t) => {
  const message = { receiver: encodeReceiver(fresh()), data: '0x' as Hex, tokenAmounts: [{ token: w.source.token.address, amount: 1n }], feeToken: zeroAddress, extraArgs: encodeExtraArgsV2(0n, true) };
  await assert.rejects(w.source.chain.readContract({ address: w.source.router.address, abi: routerAbi, functionName: 'getFee', args: [1n, message] }), /UnsupportedDestinationChain/);
  const db = await scratchDatabase(t);
  const deps = await laneDeps(db.pool);
  await writeCcip(w.source, w.source.router, 'setOnRamp', [DESTINATION_SELECTOR, zeroAddress]);
  t.after(() => writeCcip(w.source, w.source.router, 'setOnRamp', [DESTINATION_SELECTOR, w.source.onRamp.address]));
  const id = await approvedMovement(deps, template('ccip-unsupported'), { asset: 'USDC', amount: '1', destination: { address: fresh() } });
  const s = await runToEnd(deps, id);
  assert.equal(s.byKey.send.error_code, 'CCIP_LANE_NOT_SUPPORTED');
  assert.equal(deps.signed.length, 0);
});

// --- A hostile executor: the real send, with its prepared transaction rewritten, or the chain changed after signing.

type Rewrite = (tx: TransactionSerializableEIP1559, send: NonNullable<ReturnType<typeof decodeCcipSend>>) => TransactionSerializableEIP1559;

function wrapped(opts: { rewrite?: Rewrite; beforeCheck?: () => Promise<void>; afterCheck?: () => void }) {
  return (real: ExecutorRegistry): ExecutorRegistry => {
    const r = new ExecutorRegistry();
    for (const e of real.all()) {
      if (e.executorKey !== CCIP_SEND_KEY) {
        r.register(e);
        continue;
      }
      r.register({
        executorKey: e.executorKey,
        lane: e.lane,
        preflight: (ctx) => e.preflight(ctx),
        prepare: async (ctx) => {
          const res = await e.prepare(ctx);
          if (!opts.rewrite || !res.prepared_action) return res;
          const pa = res.prepared_action;
          const tx = parseTransaction(pa.payload as Hex) as TransactionSerializableEIP1559;
          const payload = serializeTransaction(opts.rewrite(tx, decodeCcipSend(tx.data!)!));
          return { ...res, prepared_action: { ...pa, payload, payload_hash: payloadHash(payload) } };
        },
        preSubmitCheck: async (ctx, prepared) => {
          await opts.beforeCheck?.();
          try {
            await e.preSubmitCheck!(ctx, prepared);
          } finally {
            opts.afterCheck?.();
          }
        },
        submit: (ctx, p, o) => e.submit(ctx, p, o),
        observe: (ctx) => e.observe(ctx),
        recover: (ctx) => e.recover(ctx),
        inspect: (ctx) => e.inspect(ctx),
      } satisfies Executor);
    }
    return r;
  };
}

const resend = (tx: TransactionSerializableEIP1559, s: NonNullable<ReturnType<typeof decodeCcipSend>>, change: { selector?: bigint; message?: Partial<typeof s.message>; value?: bigint }) => ({
  ...tx,
  data: encodeFunctionData({ abi: routerAbi, functionName: 'ccipSend', args: [change.selector ?? s.destinationChainSelector, { ...s.message, ...change.message }] }),
  value: change.value ?? tx.value,
});

const thief = fresh();
const cases: Array<[string, string, Rewrite]> = [
  ['a value above the approved fee cap (the Router keeps it all)', 'ccip_fee_cap', (tx, s) => resend(tx, s, { value: BigInt(FEE_CAP_WEI) + 1n })],
  ['another receiver', 'ccip_receiver', (tx, s) => resend(tx, s, { message: { receiver: encodeReceiver(thief) } })],
  ['another destination selector', 'ccip_dest_selector', (tx, s) => resend(tx, s, { selector: 15971525489660198786n })],
  ['another amount', 'ccip_amount', (tx, s) => resend(tx, s, { message: { tokenAmounts: [{ token: s.message.tokenAmounts[0]!.token, amount: s.message.tokenAmounts[0]!.amount * 2n }] } })],
  ['a second token amount', 'ccip_token_amounts', (tx, s) => resend(tx, s, { message: { tokenAmounts: [...s.message.tokenAmounts, ...s.message.tokenAmounts] } })],
  ['the fee paid in another token', 'ccip_fee_token', (tx, s) => resend(tx, s, { message: { feeToken: w.source.link.address }, value: 0n })],
  ['a gas limit the plan did not approve', 'ccip_extra_args', (tx, s) => resend(tx, s, { message: { extraArgs: encodeExtraArgsV2(2_000_000n, true) } })],
  ['data for a receiver call', 'ccip_data', (tx, s) => resend(tx, s, { message: { data: '0x01' } })],
  ['another contract', 'to', (tx) => ({ ...tx, to: thief })],
];

for (const [what, rule, rewrite] of cases) {
  test(`a hostile send executor proposing ${what}: no signature (rule ${rule}), nothing broadcast`, async (t) => {
    const db = await scratchDatabase(t);
    const deps = await laneDeps(db.pool, { wrap: wrapped({ rewrite }) });
    const nonce = await w.source.chain.getTransactionCount({ address: w.hot, blockTag: 'pending' });
    const before = await ccipEvents(w);
    const id = await approvedMovement(deps, template(`ccip-hostile-${rule}`), { asset: 'USDC', amount: '2', destination: { address: fresh() } });
    const s = await runToEnd(deps, id);
    assert.equal(s.byKey.send.node_state, 'FAILED');
    assert.equal(s.byKey.send.error_code, 'SIGNER_POLICY_VIOLATION', String(s.byKey.send.error_detail));
    assert.equal(deps.signed.length, 1, 'the signer was asked once and refused');
    assert.equal(await w.source.chain.getTransactionCount({ address: w.hot, blockTag: 'pending' }), nonce, 'nothing broadcast');
    assert.equal((await ccipEvents(w)).sent.length, before.sent.length, 'no CCIPMessageSent');
    while ((await promoteAuditBatch(db.pool)) > 0);
    const { events } = await listAuditEvents(db.pool, { entity_type: 'movement_node', entity_id: s.byKey.send.id });
    const refused = events.filter((e) => e.action === 'signer.refused');
    assert.equal(refused.length, 1);
    assert.equal(refused[0]!.details.rule, rule);
  });
}

// --- pre_submit_check: the fee quoted again after the node is SUBMITTING, right before the broadcast.

test('pre_submit_check: the fee rose above the cap after signing: PRE_SUBMIT_CHECK_FATAL_ERROR (CCIP_FEE_ABOVE_CAP), nothing broadcast', async (t) => {
  const db = await scratchDatabase(t);
  t.after(() => setFee(BASE_FEE_WEI));
  const deps = await laneDeps(db.pool, { wrap: wrapped({ beforeCheck: () => setFee(BigInt(FEE_CAP_WEI)).then(() => undefined) }) });
  const nonce = await w.source.chain.getTransactionCount({ address: w.hot, blockTag: 'pending' });
  const before = await ccipEvents(w);
  const id = await approvedMovement(deps, template('ccip-presubmit-cap'), { asset: 'USDC', amount: '2', destination: { address: fresh() } });
  const s = await runToEnd(deps, id);
  assert.equal(s.byKey.send.node_state, 'FAILED', shown(s));
  assert.equal(s.byKey.send.error_code, 'PRE_SUBMIT_CHECK_FATAL_ERROR');
  assert.match(String(s.byKey.send.error_detail), /^CCIP_FEE_ABOVE_CAP: .*cap_wei=1000000000000000\]/);
  assert.equal(deps.signed.length, 1, 'signed once, never broadcast');
  assert.equal(await w.source.chain.getTransactionCount({ address: w.hot, blockTag: 'pending' }), nonce, 'nothing broadcast');
  assert.equal((await ccipEvents(w)).sent.length, before.sent.length);
});

test('pre_submit_check: the lane taken down after signing: PRE_SUBMIT_CHECK_FATAL_ERROR (CCIP_LANE_NOT_SUPPORTED), nothing broadcast', async (t) => {
  const db = await scratchDatabase(t);
  t.after(() => writeCcip(w.source, w.source.router, 'setOnRamp', [DESTINATION_SELECTOR, w.source.onRamp.address]));
  const deps = await laneDeps(db.pool, { wrap: wrapped({ beforeCheck: () => writeCcip(w.source, w.source.router, 'setOnRamp', [DESTINATION_SELECTOR, zeroAddress]).then(() => undefined) }) });
  const before = await ccipEvents(w);
  const id = await approvedMovement(deps, template('ccip-presubmit-lane'), { asset: 'USDC', amount: '2', destination: { address: fresh() } });
  const s = await runToEnd(deps, id);
  assert.equal(s.byKey.send.node_state, 'FAILED', shown(s));
  assert.equal(s.byKey.send.error_code, 'PRE_SUBMIT_CHECK_FATAL_ERROR');
  assert.match(String(s.byKey.send.error_detail), /^CCIP_LANE_NOT_SUPPORTED/);
  assert.equal((await ccipEvents(w)).sent.length, before.sent.length);
});

test('pre_submit_check: the fee rose within the cap, then the RPC failed: both retry the node (PRE_SUBMIT_CHECK_TEMPORARY_ERROR); the send goes out once, at the new fee', async (t) => {
  const db = await scratchDatabase(t);
  const proxy: RpcProxy = await startRpcProxy(w.source.rpcUrl, 'pass');
  t.after(() => proxy.stop());
  t.after(() => setFee(BASE_FEE_WEI));
  const risen = BASE_FEE_WEI * 2n;
  let calls = 0;
  const deps = await laneDeps(db.pool, {
    rpc: { source: proxy.url },
    wrap: wrapped({
      beforeCheck: async () => {
        calls += 1;
        // First check: the fee doubled since the signature (still under the cap). Second: the RPC fails eth_call during the check. Third: all well.
        if (calls === 1) await setFee(risen);
        if (calls === 2) proxy.failing.add('eth_call');
      },
      afterCheck: () => void proxy.failing.delete('eth_call'),
    }),
  });
  const to = fresh();
  const before = await ccipEvents(w);
  const id = await approvedMovement(deps, template('ccip-presubmit-temporary'), { asset: 'USDC', amount: '2', destination: { address: to } });
  const deferred: string[] = [];
  const s = await waitFor('the movement to finish', async () => {
    await drain(deps);
    const snap = await snapshot(deps.pool, id);
    if (snap.byKey.send.error_code && !deferred.includes(String(snap.byKey.send.error_detail))) deferred.push(String(snap.byKey.send.error_detail));
    if (['COMPLETED', 'FAILED', 'MANUAL_INTERVENTION'].includes(snap.movement.request_state)) return snap;
    await backdateNodes(deps.pool, [id], 'next_observe_at', 60);
    await deps.pool.query(`UPDATE request_nodes SET dispatch_after = dispatch_after - interval '60 seconds' WHERE request_id = $1 AND dispatch_after IS NOT NULL`, [id]);
    return null;
  });
  proxy.failing.clear();
  assert.equal(s.movement.request_state, 'COMPLETED', shown(s));
  assert.ok(calls >= 3, `the check ran ${calls} times`);
  const transitions = await db.pool.query(`SELECT event_type, event_payload AS payload FROM transitions WHERE entity_id = $1 ORDER BY seq`, [s.byKey.send.id]);
  const deferrals = transitions.rows.filter((r) => r.event_type === 'PRE_SUBMIT_CHECK_DEFERRED').map((r) => JSON.stringify(r.payload));
  assert.equal(deferrals.length, 2, JSON.stringify(transitions.rows.map((r) => r.event_type)));
  assert.match(deferrals[0]!, /PRE_SUBMIT_CHECK_TEMPORARY_ERROR/);
  assert.match(deferrals[0]!, /CCIP_FEE_ROSE/);
  assert.match(deferrals[1]!, /CCIP_RPC_UNAVAILABLE/);
  assert.equal(s.byKey.send.attempt_no, 3, 'the third attempt went out');
  const events = await ccipEvents(w);
  assert.equal(events.sent.length - before.sent.length, 1, 'one send');
  const tx = await w.source.chain.getTransaction({ hash: s.byKey.send.provider_refs.tx_hash as Hex });
  assert.equal(tx.value, risen + FEE_PER_TOKEN_WEI, 'at the risen fee');
  assert.equal(await tokenBalance(w.destination.chain, w.destination.token, to), 2_000_000n);
});

// --- The destination: a failed execution delivers nothing.

test('a receiver that reverts: the OffRamp records FAILURE and delivers no tokens; the delivery node FAILS (CCIP_EXECUTION_FAILED), nothing is sent again', async (t) => {
  const receiver = await deployCcipContract(w.destination, w.compiled.TestCcipReceiver!, [true]);
  const db = await scratchDatabase(t);
  const deps = await laneDeps(db.pool);
  const before = await ccipEvents(w);
  const id = await approvedMovement(deps, template('ccip-receiver-reverts', { gas_limit: 200_000 }), { asset: 'USDC', amount: '5', destination: { address: receiver } });
  const s = await runToEnd(deps, id);
  assert.equal(s.byKey.send.node_state, 'COMPLETED');
  assert.equal(s.byKey.delivery.node_state, 'FAILED', shown(s));
  assert.equal(s.byKey.delivery.error_code, 'CCIP_EXECUTION_FAILED');
  assert.equal(s.byKey.delivery.provider_refs.execution_state, 'FAILURE');
  assert.equal(await tokenBalance(w.destination.chain, w.destination.token, receiver), 0n, 'no tokens delivered');
  const events = await ccipEvents(w);
  assert.equal(events.sent.length - before.sent.length, 1, 'one send, never a second');
  const state = await w.destination.chain.readContract({ address: w.destination.offRamp.address, abi: w.destination.offRamp.abi, functionName: 'executionStateOf', args: [s.byKey.send.provider_refs.message_id] });
  assert.equal(state, 3);
  // The fee of a 200k gas limit was quoted and paid.
  const tx = await w.source.chain.getTransaction({ hash: s.byKey.send.provider_refs.tx_hash as Hex });
  assert.equal(tx.value, QUOTED + 200_000n * FEE_PER_GAS_WEI);
});

test('a message not executed yet keeps the delivery node OBSERVING, late past the timeout (CCIP_DELIVERY_LATE), and completes once executed', async (t) => {
  const db = await scratchDatabase(t);
  const deps = await laneDeps(db.pool, { ccip: { delivery_timeout_seconds: 1 } });
  const to = fresh();
  w.executor.hold();
  t.after(() => w.executor.release());
  const id = await approvedMovement(deps, template('ccip-late'), { asset: 'USDC', amount: '4', destination: { address: to } });
  const watching = await waitFor('the delivery watch to start', async () => {
    await drain(deps);
    const s = await snapshot(db.pool, id);
    return ['SUBMITTED', 'OBSERVING'].includes(s.byKey.delivery.node_state) ? s : null;
  });
  const sentAt = Number((await w.source.chain.getBlock({ blockNumber: BigInt(Number(watching.byKey.send.provider_refs.source_block_number)) })).timestamp);
  await waitFor('the delivery timeout to pass', async () => Math.floor(Date.now() / 1000) - sentAt > 1 || null, 5_000);
  const { observeBatch } = await import('../src/actors/observer.ts');
  await backdateNodes(db.pool, [id], 'next_observe_at', 60);
  await observeBatch(deps);
  const late = (await snapshot(db.pool, id)).byKey.delivery;
  assert.equal(late.node_state, 'OBSERVING');
  assert.equal(late.error_code, 'CCIP_DELIVERY_LATE');
  assert.equal(late.provider_state, 'delivery_late');
  assert.equal(await tokenBalance(w.destination.chain, w.destination.token, to), 0n);
  w.executor.release();
  const s = await runToEnd(deps, id);
  assert.equal(s.movement.request_state, 'COMPLETED');
  assert.equal(s.byKey.delivery.attempt_no, late.attempt_no, 'the same watch');
  assert.equal(await tokenBalance(w.destination.chain, w.destination.token, to), 4_000_000n);
});

// --- The test Router is strict like the real one.

test('the test Router: unsupported selector, a fee short by 1 wei, no allowance, msg.value with a fee token and bad extraArgs revert; the whole msg.value is kept; LINK is pulled exactly', async () => {
  const { sendCall } = await import('./helpers/contracts.ts');
  const { maxUint256 } = await import('viem');
  const payer = generatePrivateKey();
  const from = privateKeyToAccount(payer).address;
  await w.source.anvil.rpc('anvil_setBalance', [from, '0xde0b6b3a7640000']);
  await sendCall(w.source.chain, w.source.rpcUrl, payer, w.source.token, 'mint', [from, 10_000_000n]);
  const message = { receiver: encodeReceiver(fresh()), data: '0x' as Hex, tokenAmounts: [{ token: w.source.token.address, amount: 1_000_000n }], feeToken: zeroAddress as Address, extraArgs: encodeExtraArgsV2(0n, true) };
  const router = w.source.router.address;
  const fee = (await w.source.chain.readContract({ address: router, abi: routerAbi, functionName: 'getFee', args: [DESTINATION_SELECTOR, message] })) as bigint;
  assert.equal(fee, QUOTED);
  const call = (m: typeof message, value: bigint, selector = DESTINATION_SELECTOR) => w.source.chain.call({ account: from, to: router, value, data: encodeFunctionData({ abi: routerAbi, functionName: 'ccipSend', args: [selector, m] }) });
  await assert.rejects(call(message, fee), /allowance/, 'the tokens are pulled with transferFrom: no allowance, no send');
  await sendCall(w.source.chain, w.source.rpcUrl, payer, w.source.token, 'approve', [router, maxUint256]);
  await assert.rejects(call(message, fee, 1n), /0xae236d9c|UnsupportedDestinationChain/);
  await assert.rejects(call(message, fee - 1n), /0x07da6ee6|InsufficientFeeTokenAmount/);
  await assert.rejects(call({ ...message, extraArgs: '0x12345678' }, fee), /InvalidExtraArgsTag|0x5247fdce/);
  await assert.rejects(call({ ...message, extraArgs: encodeExtraArgsV2(4_000_000n, true) }, 10n ** 17n), /MessageGasLimitTooHigh|0x4c4fc93a/);
  await assert.rejects(call({ ...message, receiver: `0x${'ff'.repeat(32)}` }, fee), /0x8d666f60|InvalidEVMAddress/);
  await call(message, fee);
  // Overpaid: the Router keeps the whole msg.value.
  const feesBefore = await onRampFees();
  await writeCcip(w.source, w.source.router, 'ccipSend', [DESTINATION_SELECTOR, message], payer, fee + 12_345n);
  assert.equal((await onRampFees()) - feesBefore, fee + 12_345n, 'no refund');
  // LINK: msg.value must be 0, and exactly getFee() is pulled with transferFrom.
  const inLink = { ...message, feeToken: w.source.link.address };
  const linkFee = (await w.source.chain.readContract({ address: router, abi: routerAbi, functionName: 'getFee', args: [DESTINATION_SELECTOR, inLink] })) as bigint;
  assert.equal(linkFee, QUOTED * 200n);
  await sendCall(w.source.chain, w.source.rpcUrl, payer, w.source.link, 'mint', [from, linkFee * 2n]);
  await assert.rejects(call(inLink, 0n), /allowance/);
  await sendCall(w.source.chain, w.source.rpcUrl, payer, w.source.link, 'approve', [router, maxUint256]);
  await assert.rejects(call(inLink, 1n), /0x1841b4e1|InvalidMsgValue/);
  await writeCcip(w.source, w.source.router, 'ccipSend', [DESTINATION_SELECTOR, inLink], payer);
  assert.equal(await tokenBalance(w.source.chain, w.source.link, from), linkFee, 'exactly the fee pulled');
  assert.equal(await tokenBalance(w.source.chain, w.source.link, w.source.onRamp.address), linkFee);
  await assert.rejects(call({ ...message, feeToken: w.source.token.address }, 0n), /FeeTokenNotSupported|0x2502348c/);
});
