import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { encodeFunctionData, parseTransaction, serializeTransaction, type Address, type Hex, type TransactionSerializableEIP1559 } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import type { WorkerDeps } from '../src/actors/execution.ts';
import { deliverMovementEvent } from '../src/durable/transition.ts';
import { withTransaction } from '../src/persistence/db.ts';
import { observeBatch } from '../src/actors/observer.ts';
import { configuredRegistries } from '../src/actors/runtime.ts';
import { deriveExpectedEffect, pinExpectedEffect } from '../src/executors/evm/expected-effect.ts';
import { effectConfigOf } from '../src/executors/sign-request.ts';
import { movementEffect } from '../src/http/effect.ts';
import { payloadHash } from '../src/executors/payload-hash.ts';
import type { Executor, Signer } from '../src/executors/protocol.ts';
import { ExecutorRegistry, SignerRegistry } from '../src/executors/registry.ts';
import { addressToBytes32, decodeSend, oftAbi, USDT0_SEND_KEY } from '../src/executors/usdt0/index.ts';
import { listAuditEvents, promoteAuditBatch } from '../src/persistence/audit.ts';
import type { Pool } from '../src/persistence/db.ts';
import { log } from '../src/log.ts';
import type { TemplateDefinitionInput } from '../src/plan/template-schema.ts';
import { usdt0SendTemplate } from '../scripts/sandbox/templates.ts';
import { tokenBalance } from './helpers/contracts.ts';
import { scratchDatabase } from './helpers/db.ts';
import { approvedMovement, backdateNodes, drain, runtimeDeps, snapshot } from './helpers/runtime.ts';
import { DESTINATION_CHAIN_ID, DESTINATION_EID, FEE_CAP_WEI, oftEvents, SOURCE_CHAIN_ID, SOURCE_EID, startUsdt0World, usdt0ConfigFile, type Usdt0World } from './helpers/usdt0.ts';
import { waitFor } from './helpers/wait.ts';

/**
 * The USDT0 lane on two anvil chains (31337, eid 30101: an OFT adapter locking USDT0; 31338, eid
 * 30110: an OFT minting it) with the OFT v2 test contracts, the emulated relayer on loopback and real
 * PostgreSQL, through the real dispatcher, observer and signer: quoteSend, send with exactly the
 * quoted fee, and the credit found on the destination by the send's GUID.
 */

let w: Usdt0World;
before(async () => {
  w = await startUsdt0World();
});
after(async () => {
  await w?.stop();
});

const fresh = () => privateKeyToAccount(generatePrivateKey()).address.toLowerCase() as Address;

async function laneDeps(pool: Pool, opts: { wrap?: (r: ExecutorRegistry) => ExecutorRegistry; usdt0?: Record<string, unknown> } = {}): Promise<WorkerDeps & { signed: number[] }> {
  const env = { FERRY_SUBMITTING_GRACE_SECONDS_BY_LANE: 'usdt0=0.001', FERRY_CONFIG_FILE: usdt0ConfigFile(w, { usdt0: opts.usdt0 }), USDT0_HOT_KEY: w.hotKey };
  const base = runtimeDeps(pool, env);
  const { executors, signers } = await configuredRegistries(pool, base.config, { env, log });
  // Counts the requests that reach the signer.
  const signed: number[] = [];
  const counting = new SignerRegistry();
  for (const s of signers.all()) counting.register({ signerKey: s.signerKey, sign: (req) => (signed.push(1), s.sign(req)) } satisfies Signer);
  return { ...base, executors: opts.wrap ? opts.wrap(executors) : executors, signers: counting, signed };
}

const template = (key: string, config: Record<string, unknown> = {}) => {
  const t = usdt0SendTemplate({ templateKey: key, sourceChainId: SOURCE_CHAIN_ID, destinationChainId: DESTINATION_CHAIN_ID, signerKey: 'hot', maxNativeFeeWei: FEE_CAP_WEI }) as {
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

const feesCollected = () => w.source.chain.readContract({ address: w.source.endpoint.address, abi: w.source.endpoint.abi, functionName: 'feesCollected' }) as Promise<bigint>;

test('usdt0_send: quoteSend, send with exactly the quoted fee on 31337, the credit found by its GUID on 31338', async (t) => {
  const db = await scratchDatabase(t);
  const deps = await laneDeps(db.pool);
  const to = fresh();
  const before = await oftEvents(w);
  const hotBefore = await tokenBalance(w.source.chain, w.source.token, w.hot);
  const feesBefore = await feesCollected();
  const id = await approvedMovement(deps, template('usdt0-e2e'), { asset: 'USDT0', amount: '12.5', destination: { address: to } });

  const s = await runToEnd(deps, id);
  assert.equal(s.movement.request_state, 'COMPLETED', JSON.stringify(s.nodes.map((n) => [n.node_key, n.node_state, n.error_code, n.error_detail])));
  assert.equal(await tokenBalance(w.destination.chain, w.destination.token, to), 12_500_000n, 'credited on the destination');
  assert.equal(await tokenBalance(w.source.chain, w.source.token, w.hot), hotBefore - 12_500_000n, 'debited on the source');
  assert.equal(await tokenBalance(w.source.chain, w.source.token, w.source.oft.address), 12_500_000n, 'locked in the adapter');
  const events = await oftEvents(w);
  assert.equal(events.sent.length - before.sent.length, 1, 'one OFTSent');
  assert.equal(events.received.length - before.received.length, 1, 'one OFTReceived');
  const sent = events.sent.at(-1)! as unknown as { args: { guid: Hex }; transactionHash: Hex };
  const received = events.received.at(-1)! as unknown as { args: { guid: Hex }; transactionHash: Hex };
  assert.equal(sent.args.guid, received.args.guid, 'the same GUID on both chains');
  const { send, credit } = s.byKey;
  assert.equal(send.provider_refs.tx_hash, sent.transactionHash);
  assert.equal(send.provider_refs.guid, sent.args.guid.toLowerCase());
  assert.equal(credit.provider_refs.guid, sent.args.guid.toLowerCase());
  assert.equal(credit.provider_refs.credit_tx_hash, received.transactionHash);
  // The fee paid is the quoted one: the endpoint kept it all and refunded nothing.
  const tx = await w.source.chain.getTransaction({ hash: sent.transactionHash });
  assert.equal(tx.value, BigInt(String(send.provider_refs.native_fee_wei)));
  assert.equal((await feesCollected()) - feesBefore, tx.value);
  assert.ok(tx.value > 0n && tx.value <= BigInt(FEE_CAP_WEI));

  // The expected effect pinned at creation: the OFT, the eid, the recipient, the amount, the cap.
  const e = deriveExpectedEffect({ plan: s.movement.compiled_plan, nodeKey: 'send', intent: s.movement.intent, evm: deps.config.file.evm, usdt0: deps.config.file.usdt0 });
  assert.ok(e.ok, !e.ok ? e.reason : '');
  assert.equal(e.effect.to, w.source.oft.address.toLowerCase());
  assert.deepEqual(e.effect.oft_send, {
    dst_eid: DESTINATION_EID,
    to: addressToBytes32(to),
    amount_ld: '12500000',
    min_amount_ld: '12500000',
    extra_options: '0x',
    compose_msg: '0x',
    oft_cmd: '0x',
    max_native_fee_wei: FEE_CAP_WEI,
  });
  // What the movement service pins at creation, from the same configuration (effectConfigOf carries the usdt0 section).
  const pinned = pinExpectedEffect({ plan: s.movement.compiled_plan, nodeKey: 'send', intent: s.movement.intent, ...effectConfigOf(deps.config) });
  assert.ok('effect' in pinned);
  assert.deepEqual(pinned.effect.oft_send, e.effect.oft_send);
  // What approvers are shown: the token amount to the recipient, not the OFT call's native value.
  const view = movementEffect({ plan: s.movement.compiled_plan, intent: s.movement.intent, compiledPlanHash: 'sha256:x', nodes: [{ node_key: 'send', expected_effect: pinned }], policy: null }).nodes.find((n) => n.node_key === 'send')!;
  assert.equal(view.asset, 'USDT0');
  assert.equal(view.amount, '12.5');
  assert.equal(view.destination, to);
  assert.equal(view.destination_chain_id, DESTINATION_CHAIN_ID);
  assert.equal(view.contract, w.source.oft.address.toLowerCase());
  // Without the usdt0 section there is nothing to sign against.
  const none = deriveExpectedEffect({ plan: s.movement.compiled_plan, nodeKey: 'send', intent: s.movement.intent, evm: deps.config.file.evm });
  assert.ok(!none.ok && /no usdt0 section/.test(none.reason));
});

test('a fee above the approved cap fails closed before signing: USDT0_NATIVE_FEE_ABOVE_CAP, nothing signed, nothing sent', async (t) => {
  const db = await scratchDatabase(t);
  const deps = await laneDeps(db.pool);
  const nonce = await w.source.chain.getTransactionCount({ address: w.hot });
  const before = await oftEvents(w);
  const id = await approvedMovement(deps, template('usdt0-fee-cap', { max_native_fee_wei: '1000' }), { asset: 'USDT0', amount: '3', destination: { address: fresh() } });
  const s = await runToEnd(deps, id);
  assert.equal(s.byKey.send.node_state, 'FAILED');
  assert.equal(s.byKey.send.error_code, 'USDT0_NATIVE_FEE_ABOVE_CAP');
  assert.match(String(s.byKey.send.error_detail), /cap_wei=1000\]/);
  assert.equal(deps.signed.length, 0, 'the signer was never asked');
  assert.equal(await w.source.chain.getTransactionCount({ address: w.hot }), nonce, 'nothing sent');
  assert.equal((await oftEvents(w)).sent.length, before.sent.length);
});

test('a send to an eid with no peer is refused by the OFT as by the lane: NoPeer on the chain, USDT0_NO_PEER before signing', async (t) => {
  // The contract itself: quoteSend for an unknown eid reverts NoPeer.
  await assert.rejects(
    w.source.chain.readContract({
      address: w.source.oft.address,
      abi: oftAbi,
      functionName: 'quoteSend',
      args: [{ dstEid: 40_000, to: addressToBytes32(fresh()), amountLD: 1n, minAmountLD: 1n, extraOptions: '0x', composeMsg: '0x', oftCmd: '0x' }, false],
    }),
    /NoPeer/,
  );
  // The lane: the destination OFT loses its peer on the source; preflight sees it.
  const db = await scratchDatabase(t);
  const deps = await laneDeps(db.pool);
  const { writeOft } = await import('./helpers/usdt0.ts');
  await writeOft(w.source, w.source.oft, 'setPeer', [DESTINATION_EID, `0x${'0'.repeat(64)}`]);
  t.after(() => writeOft(w.source, w.source.oft, 'setPeer', [DESTINATION_EID, addressToBytes32(w.destination.oft.address)]));
  const id = await approvedMovement(deps, template('usdt0-no-peer'), { asset: 'USDT0', amount: '1', destination: { address: fresh() } });
  const s = await runToEnd(deps, id);
  assert.equal(s.byKey.send.error_code, 'USDT0_NO_PEER');
  assert.equal(deps.signed.length, 0);
});

test('the OFT wants the native fee exactly: more or less than fee.nativeFee reverts NotEnoughNative', async () => {
  const sp = { dstEid: DESTINATION_EID, to: addressToBytes32(fresh()), amountLD: 1_000_000n, minAmountLD: 1_000_000n, extraOptions: '0x' as Hex, composeMsg: '0x' as Hex, oftCmd: '0x' as Hex };
  const fee = (await w.source.chain.readContract({ address: w.source.oft.address, abi: oftAbi, functionName: 'quoteSend', args: [sp, false] })) as { nativeFee: bigint };
  const data = encodeFunctionData({ abi: oftAbi, functionName: 'send', args: [sp, { nativeFee: fee.nativeFee, lzTokenFee: 0n }, w.hot] });
  for (const value of [fee.nativeFee + 1n, fee.nativeFee - 1n]) {
    await assert.rejects(w.source.chain.call({ account: w.hot, to: w.source.oft.address, data, value }), /0x9f704120|NotEnoughNative/);
  }
  await w.source.chain.call({ account: w.hot, to: w.source.oft.address, data, value: fee.nativeFee });
  // Slippage: a minimum above what arrives reverts SlippageExceeded, in the quote as in the send.
  await assert.rejects(
    w.source.chain.readContract({ address: w.source.oft.address, abi: oftAbi, functionName: 'quoteSend', args: [{ ...sp, minAmountLD: sp.amountLD + 1n }, false] }),
    /SlippageExceeded/,
  );
});

// --- A hostile executor: the real send, with its prepared transaction rewritten.

type Rewrite = (tx: TransactionSerializableEIP1559, send: NonNullable<ReturnType<typeof decodeSend>>) => TransactionSerializableEIP1559;

function hostile(rewrite: Rewrite) {
  return (real: ExecutorRegistry): ExecutorRegistry => {
    const r = new ExecutorRegistry();
    for (const e of real.all()) {
      if (e.executorKey !== USDT0_SEND_KEY) {
        r.register(e);
        continue;
      }
      r.register({
        executorKey: e.executorKey,
        lane: e.lane,
        preflight: (ctx) => e.preflight(ctx),
        prepare: async (ctx) => {
          const res = await e.prepare(ctx);
          const pa = res.prepared_action!;
          const tx = parseTransaction(pa.payload as Hex) as TransactionSerializableEIP1559;
          const payload = serializeTransaction(rewrite(tx, decodeSend(tx.data!)!));
          return { ...res, prepared_action: { ...pa, payload, payload_hash: payloadHash(payload) } };
        },
        preSubmitCheck: (ctx) => e.preSubmitCheck!(ctx),
        submit: (ctx, p, o) => e.submit(ctx, p, o),
        observe: (ctx) => e.observe(ctx),
        recover: (ctx) => e.recover(ctx),
        inspect: (ctx) => e.inspect(ctx),
      } satisfies Executor);
    }
    return r;
  };
}

const resend = (tx: TransactionSerializableEIP1559, s: NonNullable<ReturnType<typeof decodeSend>>, change: { sp?: Partial<typeof s.sp>; nativeFee?: bigint; lzTokenFee?: bigint; refund?: Address; value?: bigint }) => ({
  ...tx,
  data: encodeFunctionData({
    abi: oftAbi,
    functionName: 'send',
    args: [{ ...s.sp, ...change.sp }, { nativeFee: change.nativeFee ?? s.nativeFee, lzTokenFee: change.lzTokenFee ?? 0n }, change.refund ?? (s.refundAddress as Address)],
  }),
  value: change.value ?? change.nativeFee ?? tx.value,
});

const thief = fresh();
const cases: Array<[string, string, Rewrite]> = [
  ['another recipient', 'oft_recipient', (tx, s) => resend(tx, s, { sp: { to: addressToBytes32(thief) } })],
  ['another destination eid', 'oft_dst_eid', (tx, s) => resend(tx, s, { sp: { dstEid: 30_184 } })],
  ['another amount', 'oft_amount', (tx, s) => resend(tx, s, { sp: { amountLD: s.sp.amountLD * 2n, minAmountLD: s.sp.amountLD * 2n } })],
  ['minAmountLD 0, which the plan did not approve', 'oft_min_amount', (tx, s) => resend(tx, s, { sp: { minAmountLD: 0n } })],
  ['a fee above the approved cap (value and declared fee both)', 'oft_native_fee_cap', (tx, s) => resend(tx, s, { nativeFee: BigInt(FEE_CAP_WEI) + 1n })],
  ['a value that is not the declared fee', 'oft_value', (tx, s) => resend(tx, s, { value: s.nativeFee + 1n })],
  ["the endpoint's refund to another address", 'oft_refund_address', (tx, s) => resend(tx, s, { refund: thief, nativeFee: BigInt(FEE_CAP_WEI) })],
  ['a fee paid in lz token', 'oft_lz_token_fee', (tx, s) => resend(tx, s, { lzTokenFee: 1n })],
  ['a compose message', 'oft_compose', (tx, s) => resend(tx, s, { sp: { composeMsg: '0x01' } })],
  ['another contract', 'to', (tx) => ({ ...tx, to: thief })],
];

for (const [what, rule, rewrite] of cases) {
  test(`a hostile send executor proposing ${what}: no signature (rule ${rule}), nothing broadcast`, async (t) => {
    const db = await scratchDatabase(t);
    const deps = await laneDeps(db.pool, { wrap: hostile(rewrite) });
    const nonce = await w.source.chain.getTransactionCount({ address: w.hot, blockTag: 'pending' });
    const before = await oftEvents(w);
    const id = await approvedMovement(deps, template(`usdt0-hostile-${rule}`), { asset: 'USDT0', amount: '2', destination: { address: fresh() } });
    const s = await runToEnd(deps, id);
    assert.equal(s.byKey.send.node_state, 'FAILED');
    assert.equal(s.byKey.send.error_code, 'SIGNER_POLICY_VIOLATION', String(s.byKey.send.error_detail));
    assert.equal(deps.signed.length, 1, 'the signer was asked once and refused');
    assert.equal(await w.source.chain.getTransactionCount({ address: w.hot, blockTag: 'pending' }), nonce, 'nothing broadcast');
    assert.equal((await oftEvents(w)).sent.length, before.sent.length, 'no OFTSent');
    while ((await promoteAuditBatch(db.pool)) > 0);
    const { events } = await listAuditEvents(db.pool, { entity_type: 'movement_node', entity_id: s.byKey.send.id });
    const refused = events.filter((e) => e.action === 'signer.refused');
    assert.equal(refused.length, 1);
    assert.equal(refused[0]!.details.rule, rule);
  });
}

test('a plan that approves min_amount 0 may send with minAmountLD 0: the rule is the approval, not a constant', async (t) => {
  const db = await scratchDatabase(t);
  const deps = await laneDeps(db.pool);
  const to = fresh();
  const id = await approvedMovement(deps, template('usdt0-min-zero', { min_amount: '0' }), { asset: 'USDT0', amount: '1', destination: { address: to } });
  const s = await runToEnd(deps, id);
  assert.equal(s.movement.request_state, 'COMPLETED');
  const tx = await w.source.chain.getTransaction({ hash: s.byKey.send.provider_refs.tx_hash as Hex });
  assert.equal(decodeSend(tx.input)!.sp.minAmountLD, 0n);
  assert.equal(await tokenBalance(w.destination.chain, w.destination.token, to), 1_000_000n);
});

test('a delivery delayed past the timeout: the credit node keeps OBSERVING (USDT0_DELIVERY_LATE, not failed) and completes once delivered', async (t) => {
  const db = await scratchDatabase(t);
  const deps = await laneDeps(db.pool, { usdt0: { delivery_timeout_seconds: 1 } });
  const to = fresh();
  w.relayer.hold();
  t.after(() => w.relayer.release());
  const id = await approvedMovement(deps, template('usdt0-late'), { asset: 'USDT0', amount: '4', destination: { address: to } });
  const watching = await waitFor('the credit watch to start', async () => {
    await drain(deps);
    const s = await snapshot(db.pool, id);
    return ['SUBMITTED', 'OBSERVING'].includes(s.byKey.credit.node_state) ? s : null;
  });
  assert.equal(watching.byKey.send.node_state, 'COMPLETED');
  const guid = String(watching.byKey.send.provider_refs.guid);
  // The send's block is more than the timeout old: one more block on the source, a second later.
  const sentAt = Number((await w.source.chain.getBlock({ blockNumber: BigInt(Number(watching.byKey.send.provider_refs.source_block_number)) })).timestamp);
  await waitFor('the delivery timeout to pass', async () => Math.floor(Date.now() / 1000) - sentAt > 1 || null, 5_000);
  await backdateNodes(db.pool, [id], 'next_observe_at', 60);
  await observeBatch(deps);
  const late = (await snapshot(db.pool, id)).byKey.credit;
  assert.equal(late.node_state, 'OBSERVING');
  assert.equal(late.error_code, 'USDT0_DELIVERY_LATE');
  assert.equal(late.provider_state, 'delivery_late');
  assert.equal((await snapshot(db.pool, id)).movement.request_state, 'EXECUTING', 'the movement waits; nothing failed');
  assert.equal(await tokenBalance(w.destination.chain, w.destination.token, to), 0n);

  w.relayer.release();
  await waitFor('the relayer to deliver', () => w.relayer.delivered.find((d) => d.guid.toLowerCase() === guid) ?? null);
  const s = await runToEnd(deps, id);
  assert.equal(s.movement.request_state, 'COMPLETED');
  assert.equal(s.byKey.credit.node_state, 'COMPLETED');
  assert.equal(s.byKey.credit.attempt_no, late.attempt_no, 'the same watch');
  assert.equal(await tokenBalance(w.destination.chain, w.destination.token, to), 4_000_000n);
});

test('a dropped packet is never credited: the credit node keeps observing and the movement never completes by itself', async (t) => {
  const db = await scratchDatabase(t);
  const deps = await laneDeps(db.pool);
  const to = fresh();
  w.relayer.hold();
  t.after(() => w.relayer.release());
  const id = await approvedMovement(deps, template('usdt0-dropped'), { asset: 'USDT0', amount: '1', destination: { address: to } });
  const watching = await waitFor('the credit watch to start', async () => {
    await drain(deps);
    const s = await snapshot(db.pool, id);
    return ['SUBMITTED', 'OBSERVING'].includes(s.byKey.credit.node_state) ? s : null;
  });
  w.relayer.drop(String(watching.byKey.send.provider_refs.guid) as Hex);
  w.relayer.release();
  for (let i = 0; i < 3; i++) {
    await new Promise((r) => setTimeout(r, 300));
    await backdateNodes(db.pool, [id], 'next_observe_at', 60);
    await observeBatch(deps);
  }
  const s = await snapshot(db.pool, id);
  assert.equal(s.byKey.credit.node_state, 'OBSERVING');
  assert.equal(s.byKey.credit.provider_state, 'in_flight');
  assert.equal(await tokenBalance(w.destination.chain, w.destination.token, to), 0n);
  assert.equal(SOURCE_EID, 30101);
});

test('the test OFT removes dust to 6 shared decimals and refuses a token with fewer decimals than shared (InvalidLocalDecimals)', async () => {
  const { compileContracts, deployToken } = await import('./helpers/contracts.ts');
  const { ANVIL_DEV_KEY } = await import('./helpers/anvil.ts');
  const { createWalletClient, http, pad } = await import('viem');
  const compiled = compileContracts('Oft.sol');
  const wallet = createWalletClient({ account: privateKeyToAccount(ANVIL_DEV_KEY), transport: http(w.source.rpcUrl, { retryCount: 0 }) });
  const deployOft = async (decimals: number) => {
    const token = await deployToken(w.source.chain, w.source.rpcUrl, ANVIL_DEV_KEY, { symbol: 'T18', decimals });
    const hash = await wallet.deployContract({ abi: compiled.TestOFT!.abi, bytecode: compiled.TestOFT!.bytecode, args: [token.address, w.source.endpoint.address, false], chain: null });
    return w.source.chain.waitForTransactionReceipt({ hash, pollingInterval: 50 });
  };
  const r = await deployOft(18);
  const oft = r.contractAddress!;
  assert.equal(await w.source.chain.readContract({ address: oft, abi: compiled.TestOFT!.abi, functionName: 'decimalConversionRate' }), 10n ** 12n);
  const h = await wallet.writeContract({ address: oft, abi: compiled.TestOFT!.abi, functionName: 'setPeer', args: [DESTINATION_EID, pad(w.destination.oft.address)], chain: null });
  await w.source.chain.waitForTransactionReceipt({ hash: h, pollingInterval: 50 });
  const amountLD = 1_234_567_890_123_456_789n; // 1.234567890123456789, dust below 1e12
  const sp = { dstEid: DESTINATION_EID, to: addressToBytes32(fresh()), amountLD, minAmountLD: 0n, extraOptions: '0x' as Hex, composeMsg: '0x' as Hex, oftCmd: '0x' as Hex };
  const [, , receipt] = (await w.source.chain.readContract({ address: oft, abi: compiled.TestOFT!.abi, functionName: 'quoteOFT', args: [sp] })) as [unknown, unknown, { amountSentLD: bigint; amountReceivedLD: bigint }];
  assert.equal(receipt.amountSentLD, 1_234_567_000_000_000_000n, 'the dust stays with the sender');
  assert.equal(receipt.amountReceivedLD, 1_234_567_000_000_000_000n);
  await assert.rejects(w.source.chain.readContract({ address: oft, abi: oftAbi, functionName: 'quoteSend', args: [{ ...sp, minAmountLD: amountLD }, false] }), /SlippageExceeded/);
  await w.source.chain.readContract({ address: oft, abi: oftAbi, functionName: 'quoteSend', args: [{ ...sp, minAmountLD: receipt.amountReceivedLD }, false] });
  // With enforced options set (an lzReceive gas option), the caller's options must be type 3 too, as OAppOptionsType3 combines them.
  const enforced = await wallet.writeContract({ address: oft, abi: compiled.TestOFT!.abi, functionName: 'setEnforcedOptions', args: [DESTINATION_EID, 1, '0x00030100110100000000000000000000000000030d40'], chain: null });
  await w.source.chain.waitForTransactionReceipt({ hash: enforced, pollingInterval: 50 });
  await assert.rejects(w.source.chain.readContract({ address: oft, abi: oftAbi, functionName: 'quoteSend', args: [{ ...sp, extraOptions: '0x0001' }, false] }), /InvalidOptions/);
  await assert.rejects(deployOft(4), /reverted|InvalidLocalDecimals/);
});

test("with the observer's own timeout enforced on the credit node: UNKNOWN and a person asked, never FAILED, nothing sent again; resumed once delivered, recovery reads the credit and completes", async (t) => {
  const db = await scratchDatabase(t);
  const deps = await laneDeps(db.pool);
  deps.config = { ...deps.config, observeTimeoutEnforcement: true };
  const to = fresh();
  w.relayer.hold();
  t.after(() => w.relayer.release());
  const tpl = template('usdt0-observe-timeout') as unknown as { nodes: Array<{ node_key: string; timeout_policy?: Record<string, unknown> }> };
  tpl.nodes.find((n) => n.node_key === 'credit')!.timeout_policy = { observe_seconds: 1 };
  const before = await oftEvents(w);
  const id = await approvedMovement(deps, tpl as unknown as TemplateDefinitionInput, { asset: 'USDT0', amount: '6', destination: { address: to } });
  await waitFor('the credit watch to start', async () => {
    await drain(deps);
    const s = await snapshot(db.pool, id);
    return ['SUBMITTED', 'OBSERVING'].includes(s.byKey.credit.node_state) ? s : null;
  });
  await backdateNodes(db.pool, [id], 'started_at', 60);
  await backdateNodes(db.pool, [id], 'next_observe_at', 60);
  await observeBatch(deps);
  await backdateNodes(db.pool, [id], 'updated_at', 3600);
  await drain(deps);
  const s1 = await snapshot(db.pool, id);
  // The observer's timeout is Ferry's generic one: the watch is undecided and a person is asked; the
  // lane has nothing to undo and nothing to send again.
  assert.equal(s1.byKey.credit.node_state, 'UNKNOWN');
  assert.equal(s1.byKey.credit.error_code, 'OBSERVATION_TIMEOUT');
  assert.equal(s1.movement.request_state, 'MANUAL_INTERVENTION');
  assert.equal(s1.byKey.send.node_state, 'COMPLETED');
  assert.equal(await tokenBalance(w.destination.chain, w.destination.token, to), 0n);

  w.relayer.release();
  const guid = String(s1.byKey.send.provider_refs.guid);
  await waitFor('the relayer to deliver', () => w.relayer.delivered.find((d) => d.guid.toLowerCase() === guid) ?? null);
  await withTransaction(db.pool, (c) => deliverMovementEvent(c, id, { type: 'RESUME', by: 'operator' }, { actor: 'operator', deps: deps.transitions }));
  const done = await waitFor('the credit to complete', async () => {
    await backdateNodes(db.pool, [id], 'updated_at', 3600);
    await drain(deps);
    const s = await snapshot(db.pool, id);
    return s.byKey.credit.node_state === 'COMPLETED' ? s : null;
  });
  assert.equal(done.movement.request_state, 'COMPLETED');
  assert.equal(done.byKey.credit.provider_refs.guid, guid);
  assert.equal(done.byKey.credit.attempt_no, s1.byKey.credit.attempt_no, 'recovery read the same watch');
  assert.equal((await oftEvents(w)).sent.length - before.sent.length, 1, 'one send, never a second');
  assert.equal(await tokenBalance(w.destination.chain, w.destination.token, to), 6_000_000n);
});
