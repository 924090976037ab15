import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { parseTransaction, serializeTransaction, type Address, type Hex, type TransactionSerializableEIP1559 } from 'viem';
import { configuredRegistries } from '../src/actors/runtime.ts';
import type { WorkerDeps } from '../src/actors/execution.ts';
import type { Pool } from '../src/persistence/db.ts';
import { CCTP_BURN_KEY, encodeDepositForBurn } from '../src/executors/cctp/index.ts';
import { feeOfMilliBps, maxFeeOf, milliBps, quotedMilliBps } from '../src/executors/cctp/fees.ts';
import { deriveExpectedEffect } from '../src/executors/evm/expected-effect.ts';
import { payloadHash } from '../src/executors/payload-hash.ts';
import type { Executor } from '../src/executors/protocol.ts';
import { ExecutorRegistry } from '../src/executors/registry.ts';
import { listAuditEvents, promoteAuditBatch } from '../src/persistence/audit.ts';
import { log } from '../src/log.ts';
import { cctpBridgeTemplate } from '../scripts/sandbox/templates.ts';
import type { TemplateDefinitionInput } from '../src/plan/template-schema.ts';
import { ANVIL_DEV_KEY } from './helpers/anvil.ts';
import { cctpConfigFile, cctpEvents, DESTINATION_CHAIN_ID, SOURCE_CHAIN_ID, startCctpWorld, write, type CctpWorld } from './helpers/cctp.ts';
import { tokenBalance } from './helpers/contracts.ts';
import { scratchDatabase } from './helpers/db.ts';
import { approvedMovement, drain, runtimeDeps, snapshot } from './helpers/runtime.ts';
import { waitFor } from './helpers/wait.ts';

/**
 * CCTP v2 fees as Circle's contracts and attestation service apply them: the test TokenMessengerV2
 * enforces `minFee` (1/1000 bps) exactly as Circle's does, the attestation emulator quotes fees on
 * `/v2/burn/USDC/fees` and attests fast transfers with the fee executed. Ferry's burn carries the
 * max fee the approved plan fixes, fails before signing when the chain or Circle require more
 * (CCTP_MAX_FEE_TOO_LOW), and the destination mints amount - fee to the recipient, the fee to the
 * fee recipient.
 */

let w: CctpWorld;
before(async () => {
  w = await startCctpWorld();
});
after(async () => {
  await w?.stop();
});

const ENV = { FERRY_SUBMITTING_GRACE_SECONDS_BY_LANE: 'cctp=0.001' };
const DEFAULT_FEES = [
  { finalityThreshold: 1000, minimumFee: 1 },
  { finalityThreshold: 2000, minimumFee: 0 },
];

async function cctpDeps(pool: Pool, wrap?: (registry: ExecutorRegistry) => ExecutorRegistry): Promise<WorkerDeps> {
  const env = { ...ENV, FERRY_CONFIG_FILE: cctpConfigFile(w), CCTP_HOT_KEY: w.hotKey };
  const base = runtimeDeps(pool, env);
  const { executors, signers } = await configuredRegistries(pool, base.config, { env, log });
  return { ...base, executors: wrap ? wrap(executors) : executors, signers };
}

const fresh = (): Address => privateKeyToAccount(generatePrivateKey()).address.toLowerCase() as Address;

const bridge = (key: string, fee: { maxFee?: string; maxFeeBps?: string; minFinalityThreshold?: number } = {}) =>
  cctpBridgeTemplate({ templateKey: key, sourceChainId: SOURCE_CHAIN_ID, destinationChainId: DESTINATION_CHAIN_ID, signerKey: 'hot', ...fee }) as unknown as TemplateDefinitionInput;

async function runToEnd(deps: WorkerDeps, id: string) {
  return waitFor('the movement to finish', async () => {
    await drain(deps);
    const s = await snapshot(deps.pool, id);
    if (['COMPLETED', 'FAILED', 'MANUAL_INTERVENTION'].includes(s.movement.request_state)) return s;
    await Promise.all([w.source.anvil.mine(1), w.destination.anvil.mine(1)]);
    return null;
  });
}

/** Sets the source messenger's minFee (1/1000 bps) for one test, back to 0 after it. */
async function withMinFee(t: { after(fn: () => Promise<unknown>): void }, minFee: bigint): Promise<void> {
  await write(w.source, ANVIL_DEV_KEY, w.source.messenger, 'setMinFee', [minFee]);
  t.after(() => write(w.source, ANVIL_DEV_KEY, w.source.messenger, 'setMinFee', [0n]));
}

async function read(d: CctpWorld['source'], functionName: string, args: readonly unknown[] = []): Promise<unknown> {
  return d.chain.readContract({ address: d.messenger.address, abi: d.messenger.abi, functionName, args } as never);
}

async function burnStates(pool: Pool, id: string): Promise<string[]> {
  const r = await pool.query(`SELECT to_state FROM transitions WHERE request_id = $1 AND node_key = 'burn' ORDER BY seq`, [id]);
  return r.rows.map((x: { to_state: string }) => x.to_state);
}

test("the test TokenMessengerV2 applies Circle's minimum fee: 1/1000 bps, getMinFeeAmount, Insufficient max fee", async (t) => {
  const m = w.source.messenger;
  assert.equal(await read(w.source, 'MIN_FEE_MULTIPLIER'), 10_000_000n);
  assert.equal(await read(w.source, 'minFee'), 0n);
  assert.equal(await read(w.source, 'getMinFeeAmount', [1n]), 0n, 'no minimum: 0 for any amount, even 1');
  await assert.rejects(write(w.source, ANVIL_DEV_KEY, m, 'setMinFee', [10_000_000n]), 'minFee must be below MIN_FEE_MULTIPLIER');
  await assert.rejects(write(w.source, w.hotKey, m, 'setMinFee', [1n]), 'only the min fee controller');
  await withMinFee(t, 1_000n); // 1 bps
  assert.equal(await read(w.source, 'getMinFeeAmount', [12_500_000n]), 1_250n, 'floor(12.5 USDC * 1000 / 1e7)');
  assert.equal(await read(w.source, 'getMinFeeAmount', [5n]), 1n, 'a minimum that rounds to 0 is 1');
  await assert.rejects(read(w.source, 'getMinFeeAmount', [1n]), /Amount too low/);
  const burn = (maxFee: bigint) =>
    w.source.chain.simulateContract({
      account: w.hot,
      address: m.address,
      abi: m.abi,
      functionName: 'depositForBurn',
      args: [12_500_000n, w.destination.domain, `0x${fresh().slice(2).padStart(64, '0')}`, w.source.token.address, `0x${'00'.repeat(32)}`, maxFee, 2000],
    } as never);
  await assert.rejects(burn(1_249n), /Insufficient max fee/);
  await assert.rejects(burn(12_500_000n), /Max fee must be less than amount/);
  await burn(1_250n);
});

test('minFee > 0 and a plan whose max fee is below it: the burn FAILS with CCTP_MAX_FEE_TOO_LOW before anything is signed, nothing burned', async (t) => {
  const db = await scratchDatabase(t);
  const deps = await cctpDeps(db.pool);
  await withMinFee(t, 1_000n);
  const before = await cctpEvents(w);
  const nonce = await w.source.chain.getTransactionCount({ address: w.hot });
  // 0.5 bps of 10 USDC = 500 base units; the chain requires 1 bps = 1000.
  const id = await approvedMovement(deps, bridge('fee-too-low', { maxFeeBps: '0.5' }), { asset: 'USDC', amount: '10', destination: { address: fresh() } });
  const s = await runToEnd(deps, id);
  const burn = s.byKey.burn;
  assert.equal(burn.node_state, 'FAILED');
  assert.equal(burn.error_code, 'CCTP_MAX_FEE_TOO_LOW');
  assert.match(String(burn.error_detail), /approved max fee 0\.0005 .* below the 0\.001 .*getMinFeeAmount/);
  assert.match(String(burn.error_detail), /\[required_base_units=1000 approved_base_units=500 min_fee_amount_base_units=1000\]$/);
  assert.ok(!(await burnStates(db.pool, id)).includes('AWAITING_SIGNATURE'), 'never offered to the signer');
  assert.equal((await cctpEvents(w)).burns.length, before.burns.length, 'nothing burned');
  assert.equal(await w.source.chain.getTransactionCount({ address: w.hot }), nonce, 'nothing sent');

  // The default plan (max_fee "0", standard) against the same chain: the same clear refusal.
  const zero = await runToEnd(deps, await approvedMovement(deps, bridge('fee-default'), { asset: 'USDC', amount: '10', destination: { address: fresh() } }));
  assert.equal(zero.byKey.burn.error_code, 'CCTP_MAX_FEE_TOO_LOW');
  assert.match(String(zero.byKey.burn.error_detail), /required_base_units=1000 approved_base_units=0 /);
});

test('minFee > 0 and a plan whose max fee covers it: the burn carries exactly the approved max fee and the movement completes', async (t) => {
  const db = await scratchDatabase(t);
  const deps = await cctpDeps(db.pool);
  await withMinFee(t, 1_000n);
  const to = fresh();
  const id = await approvedMovement(deps, bridge('fee-enough', { maxFee: '0.002' }), { asset: 'USDC', amount: '10', destination: { address: to } });
  const s = await runToEnd(deps, id);
  assert.equal(s.movement.request_state, 'COMPLETED', JSON.stringify(s.nodes.map((n) => [n.node_key, n.node_state, n.error_code, n.error_detail])));
  const burned = (await cctpEvents(w)).burns.at(-1)! as unknown as { args: { maxFee: bigint; minFinalityThreshold: number } };
  assert.equal(burned.args.maxFee, 2_000n, 'the max fee of the plan, not the chain minimum');
  assert.equal(burned.args.minFinalityThreshold, 2000);
  assert.equal(s.byKey.attestation.provider_refs.finality_threshold_executed, 2000, 'standard transfer');
  assert.equal(s.byKey.attestation.provider_refs.fee_executed_base_units, '0');
  assert.equal(await tokenBalance(w.destination.chain, w.destination.token, to), 10_000_000n);
});

test('a fast transfer (finality 1000) with a non-zero fee quote: the recipient gets amount - fee, the fee recipient the fee', async (t) => {
  const db = await scratchDatabase(t);
  const deps = await cctpDeps(db.pool);
  const feeRecipient = fresh();
  await write(w.destination, ANVIL_DEV_KEY, w.destination.messenger, 'setFeeRecipient', [feeRecipient]);
  w.iris.fees = [
    { finalityThreshold: 1000, minimumFee: 1.3 },
    { finalityThreshold: 2000, minimumFee: 0 },
  ];
  t.after(() => void (w.iris.fees = DEFAULT_FEES));
  const to = fresh();
  const seen = w.iris.requests.length;
  const id = await approvedMovement(deps, bridge('fee-fast', { maxFeeBps: '2', minFinalityThreshold: 1000 }), { asset: 'USDC', amount: '100', destination: { address: to } });
  const s = await runToEnd(deps, id);
  assert.equal(s.movement.request_state, 'COMPLETED', JSON.stringify(s.nodes.map((n) => [n.node_key, n.node_state, n.error_code, n.error_detail])));
  assert.ok(w.iris.requests.slice(seen).includes('/v2/burn/USDC/fees/0/6'), 'the fee quote was asked for the route');
  // 1.3 bps of 100 USDC = 0.013 USDC; the plan allowed 2 bps = 0.02.
  const burned = (await cctpEvents(w)).burns.at(-1)! as unknown as { args: { maxFee: bigint; minFinalityThreshold: number } };
  assert.equal(burned.args.maxFee, 20_000n);
  assert.equal(burned.args.minFinalityThreshold, 1000);
  const a = s.byKey.attestation.provider_refs;
  assert.equal(a.finality_threshold_executed, 1000, 'attested as a fast transfer');
  assert.equal(a.fee_executed_base_units, '13000');
  assert.equal(a.amount_received, '99.987');
  assert.equal(s.byKey.mint.provider_refs.amount_received_base_units, '99987000');
  assert.equal(s.byKey.mint.provider_refs.fee_executed_base_units, '13000');
  assert.equal(await tokenBalance(w.destination.chain, w.destination.token, to), 99_987_000n, 'amount - fee to the recipient');
  assert.equal(await tokenBalance(w.destination.chain, w.destination.token, feeRecipient), 13_000n, 'the fee to the fee recipient');
  assert.equal(s.byKey.arrived.node_state, 'COMPLETED');
  assert.equal(s.byKey.arrived.provider_refs.min_base_units, '99987000', 'the balance check waits for what the message mints');
});

test("a fast transfer whose approved max fee is below Circle's quote: CCTP_MAX_FEE_TOO_LOW before signing, nothing burned", async (t) => {
  const db = await scratchDatabase(t);
  const deps = await cctpDeps(db.pool);
  w.iris.fees = [
    { finalityThreshold: 1000, minimumFee: 1.3 },
    { finalityThreshold: 2000, minimumFee: 0 },
  ];
  t.after(() => void (w.iris.fees = DEFAULT_FEES));
  const before = await cctpEvents(w);
  const nonce = await w.source.chain.getTransactionCount({ address: w.hot });
  const id = await approvedMovement(deps, bridge('fee-fast-low', { maxFeeBps: '1', minFinalityThreshold: 1000 }), { asset: 'USDC', amount: '100', destination: { address: fresh() } });
  const s = await runToEnd(deps, id);
  assert.equal(s.byKey.burn.error_code, 'CCTP_MAX_FEE_TOO_LOW');
  assert.match(String(s.byKey.burn.error_detail), /fast-transfer fee of 1\.3 bps/);
  assert.match(String(s.byKey.burn.error_detail), /\[required_base_units=13000 approved_base_units=10000 min_fee_amount_base_units=0 fee_quote_bps=1\.3 fee_quote_base_units=13000\]$/);
  assert.ok(!(await burnStates(db.pool, id)).includes('AWAITING_SIGNATURE'));
  assert.equal((await cctpEvents(w)).burns.length, before.burns.length, 'nothing burned');
  assert.equal(await w.source.chain.getTransactionCount({ address: w.hot }), nonce, 'nothing sent');
});

test('a burn executor raising the max fee above the approved one in its transaction: the signer refuses (call_data), nothing burned', async (t) => {
  const db = await scratchDatabase(t);
  const hostile = (real: Executor): Executor =>
    ({
      executorKey: real.executorKey,
      lane: real.lane,
      checkPlan: (ctx, p) => real.checkPlan!(ctx, p),
      preflight: (ctx) => real.preflight(ctx),
      prepare: async (ctx) => {
        const r = await real.prepare(ctx);
        const pa = r.prepared_action!;
        const tx = parseTransaction(pa.payload as Hex);
        const h = pa.provider_hints as Record<string, string | number>;
        // A fee of 10 % of the amount, kept at the destination's fee recipient.
        const maxFee = BigInt(h.amount_base_units!) / 10n;
        const data = encodeDepositForBurn({
          amount: BigInt(h.amount_base_units!),
          destinationDomain: Number(h.destination_domain),
          mintRecipient: h.mint_recipient as Address,
          burnToken: h.token as Address,
          destinationCaller: h.destination_caller as Address,
          maxFee,
          minFinalityThreshold: 1000,
        });
        const payload = serializeTransaction({ ...(tx as TransactionSerializableEIP1559), data });
        return { ...r, prepared_action: { ...pa, payload, payload_hash: payloadHash(payload), provider_hints: { ...h, max_fee_base_units: maxFee.toString() } } };
      },
      preSubmitCheck: (ctx) => real.preSubmitCheck!(ctx),
      submit: (ctx, p, o) => real.submit(ctx, p, o),
      observe: (ctx) => real.observe(ctx),
      recover: (ctx) => real.recover(ctx),
      inspect: (ctx) => real.inspect(ctx),
    }) satisfies Executor;
  const deps = await cctpDeps(db.pool, (real) => {
    const r = new ExecutorRegistry();
    for (const e of real.all()) r.register(e.executorKey === CCTP_BURN_KEY ? hostile(e) : e);
    return r;
  });
  const before = await cctpEvents(w);
  const nonce = await w.source.chain.getTransactionCount({ address: w.hot });
  const id = await approvedMovement(deps, bridge('fee-hostile', { maxFee: '0.001' }), { asset: 'USDC', amount: '5', destination: { address: fresh() } });
  const s = await runToEnd(deps, id);
  assert.equal(s.byKey.burn.node_state, 'FAILED');
  assert.equal(s.byKey.burn.error_code, 'SIGNER_POLICY_VIOLATION');
  assert.match(String(s.byKey.burn.error_detail), /calldata of depositForBurn/);
  assert.equal((await cctpEvents(w)).burns.length, before.burns.length, 'nothing burned');
  assert.equal(await w.source.chain.getTransactionCount({ address: w.hot }), nonce, 'nothing sent');
  while ((await promoteAuditBatch(db.pool)) > 0);
  const { events } = await listAuditEvents(db.pool, { entity_type: 'movement_node', entity_id: s.byKey.burn.id });
  assert.equal(events.filter((e) => e.action === 'signer.refused' && e.details.rule === 'call_data').length, 1);
});

test('the chain minimum rising between preflight and prepare: the gas estimate\'s "Insufficient max fee" fails the burn with CCTP_MAX_FEE_TOO_LOW, nothing signed', async (t) => {
  const db = await scratchDatabase(t);
  t.after(() => write(w.source, ANVIL_DEV_KEY, w.source.messenger, 'setMinFee', [0n]));
  // Preflight passes at minFee 0; the minimum is raised before prepare runs.
  const raising = (real: Executor): Executor =>
    ({
      executorKey: real.executorKey,
      lane: real.lane,
      checkPlan: (ctx, p) => real.checkPlan!(ctx, p),
      preflight: async (ctx) => {
        const r = await real.preflight(ctx);
        await write(w.source, ANVIL_DEV_KEY, w.source.messenger, 'setMinFee', [1_000n]);
        return r;
      },
      prepare: (ctx) => real.prepare(ctx),
      preSubmitCheck: (ctx) => real.preSubmitCheck!(ctx),
      submit: (ctx, p, o) => real.submit(ctx, p, o),
      observe: (ctx) => real.observe(ctx),
      recover: (ctx) => real.recover(ctx),
      inspect: (ctx) => real.inspect(ctx),
    }) satisfies Executor;
  const deps = await cctpDeps(db.pool, (real) => {
    const r = new ExecutorRegistry();
    for (const e of real.all()) r.register(e.executorKey === CCTP_BURN_KEY ? raising(e) : e);
    return r;
  });
  const before = await cctpEvents(w);
  const id = await approvedMovement(deps, bridge('fee-raised'), { asset: 'USDC', amount: '10', destination: { address: fresh() } });
  const s = await runToEnd(deps, id);
  assert.equal(s.byKey.burn.error_code, 'CCTP_MAX_FEE_TOO_LOW');
  assert.match(String(s.byKey.burn.error_detail), /Insufficient max fee/);
  assert.ok(!(await burnStates(db.pool, id)).includes('AWAITING_SIGNATURE'));
  assert.equal((await cctpEvents(w)).burns.length, before.burns.length, 'nothing burned');
});

test("an attested message whose fee exceeds the burn's max fee, or whose cap is not the burn's: the attestation node FAILS (CCTP_MESSAGE_MISMATCH), nothing minted", async (t) => {
  const db = await scratchDatabase(t);
  const deps = await cctpDeps(db.pool);
  w.iris.feeExecutedOverride = 2_001n;
  t.after(() => void (w.iris.feeExecutedOverride = null));
  const to = fresh();
  const before = await cctpEvents(w);
  const id = await approvedMovement(deps, bridge('fee-rogue', { maxFee: '0.002' }), { asset: 'USDC', amount: '10', destination: { address: to } });
  const s = await runToEnd(deps, id);
  assert.equal(s.byKey.burn.node_state, 'COMPLETED');
  assert.equal(s.byKey.attestation.node_state, 'FAILED');
  assert.equal(s.byKey.attestation.error_code, 'CCTP_MESSAGE_MISMATCH');
  assert.match(String(s.byKey.attestation.error_detail), /attested fee 2001 exceeds the burn's max fee 2000/);
  assert.equal(s.movement.request_state, 'MANUAL_INTERVENTION', 'burned, not minted: an operator decides');
  assert.equal((await cctpEvents(w)).mints.length, before.mints.length, 'nothing received');
  assert.equal(await tokenBalance(w.destination.chain, w.destination.token, to), 0n);

  // A message whose cap is not the burn's (a fee of 0.5 USDC would then pass the contract's check).
  w.iris.feeExecutedOverride = null;
  w.iris.maxFeeOverride = 500_000n;
  t.after(() => void (w.iris.maxFeeOverride = null));
  const capped = await runToEnd(deps, await approvedMovement(deps, bridge('fee-rogue-cap', { maxFee: '0.002' }), { asset: 'USDC', amount: '10', destination: { address: fresh() } }));
  assert.equal(capped.byKey.attestation.error_code, 'CCTP_MESSAGE_MISMATCH');
  assert.match(String(capped.byKey.attestation.error_detail), /caps the fee at 500000, the burn at 2000/);
  assert.equal((await cctpEvents(w)).mints.length, before.mints.length, 'nothing received');
});

test('max fee arithmetic: max_fee in token units, max_fee_bps rounded up, quotes in both shapes; the expected effect binds the same fee', () => {
  assert.deepEqual(maxFeeOf({}, 10_000_000n, 6), { ok: true, value: { maxFee: 0n, basis: 'default' } });
  assert.deepEqual(maxFeeOf({ max_fee: '0.05' }, 10_000_000n, 6), { ok: true, value: { maxFee: 50_000n, basis: 'max_fee' } });
  // 1.5 bps of 3.333333 USDC = 499.99995 base units -> 500.
  assert.deepEqual(maxFeeOf({ max_fee_bps: '1.5' }, 3_333_333n, 6), { ok: true, value: { maxFee: 500n, basis: 'max_fee_bps' } });
  assert.equal(maxFeeOf({ max_fee: '1', max_fee_bps: '1' }, 10_000_000n, 6).ok, false, 'not both');
  assert.equal((maxFeeOf({ max_fee_bps: '1.2345' }, 10_000_000n, 6) as { code: string }).code, 'CCTP_INVALID_CONFIG');
  assert.equal((maxFeeOf({ max_fee: '10' }, 10_000_000n, 6) as { code: string }).code, 'CCTP_MAX_FEE_INVALID', 'below the amount');
  assert.equal(milliBps('0.001'), 1n);
  assert.equal(feeOfMilliBps(1_000_000_000n, 1_000n), 100_000n, '1000 USDC at 1 bps');
  assert.equal(quotedMilliBps(DEFAULT_FEES, 1000), 1_000n);
  assert.equal(quotedMilliBps(DEFAULT_FEES, 2000), 0n);
  assert.equal(quotedMilliBps({ data: [{ finalityThreshold: 1000, minimumFee: 1.3 }] }, 1000), 1_300n);
  assert.equal(quotedMilliBps([{ finalityThreshold: 1000, minimumFee: 1.00001 }], 500), 1_001n, 'rounded up; below every level: the fastest');
  assert.equal(quotedMilliBps({ messages: [] }, 1000), null);

  const evm = {
    chains: [
      { chain_id: 1, rpc_url: 'http://127.0.0.1:1', cctp: { domain: 0, token_messenger: '0x1111111111111111111111111111111111111111', message_transmitter: '0x2222222222222222222222222222222222222222' } },
      { chain_id: 8453, rpc_url: 'http://127.0.0.1:2', cctp: { domain: 6, token_messenger: '0x3333333333333333333333333333333333333333', message_transmitter: '0x4444444444444444444444444444444444444444' } },
    ],
    signers: [],
    tokens: [{ chain_id: 1, symbol: 'USDC', address: '0x5555555555555555555555555555555555555555', decimals: 6 }],
  } as never;
  const recipient = '0x6666666666666666666666666666666666666666';
  const planWith = (config: Record<string, unknown>) => ({
    nodes: [{ node_key: 'burn', executor_binding: 'exec.cctp.burn', signer_binding: { signer_key: 'hot', chain_id: 1 }, config: { chain_id: 1, destination_chain_id: 8453, token: 'USDC', ...config } }],
  });
  const effect = deriveExpectedEffect({ plan: planWith({ max_fee_bps: '1.5', min_finality_threshold: 1000 }), nodeKey: 'burn', intent: { asset: 'USDC', amount: '3.333333', destination: { address: recipient } }, evm });
  assert.ok(effect.ok, effect.ok ? '' : effect.reason);
  const expected = encodeDepositForBurn({
    amount: 3_333_333n,
    destinationDomain: 6,
    mintRecipient: recipient,
    burnToken: '0x5555555555555555555555555555555555555555',
    destinationCaller: '0x0000000000000000000000000000000000000000',
    maxFee: 500n,
    minFinalityThreshold: 1000,
  });
  assert.equal(effect.effect.call?.data, expected.toLowerCase());
  const both = deriveExpectedEffect({ plan: planWith({ max_fee: '1', max_fee_bps: '1' }), nodeKey: 'burn', intent: { asset: 'USDC', amount: '10', destination: { address: recipient } }, evm });
  assert.equal(both.ok, false);
});
