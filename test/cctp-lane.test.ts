import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { parseTransaction, serializeTransaction, type Address, type Hex, type TransactionSerializableEIP1559 } from 'viem';
import { dispatchOne } from '../src/actors/dispatcher.ts';
import type { WorkerDeps } from '../src/actors/execution.ts';
import { observeBatch } from '../src/actors/observer.ts';
import { recoverBatch } from '../src/actors/recovery.ts';
import { configuredRegistries } from '../src/actors/runtime.ts';
import { deliverMovementEvent } from '../src/durable/transition.ts';
import { withTransaction, type Pool } from '../src/persistence/db.ts';
import { CCTP_BURN_KEY, CCTP_MINT_KEY, encodeDepositForBurn } from '../src/executors/cctp/index.ts';
import { payloadHash } from '../src/executors/payload-hash.ts';
import { listAuditEvents, promoteAuditBatch } from '../src/persistence/audit.ts';
import { parseExecutionResult, type Executor } from '../src/executors/protocol.ts';
import { ExecutorRegistry } from '../src/executors/registry.ts';
import { log } from '../src/log.ts';
import { cctpBridgeTemplate } from '../scripts/sandbox/templates.ts';
import { ANVIL_DEV_KEY } from './helpers/anvil.ts';
import { cctpConfigFile, cctpEvents, DESTINATION_CHAIN_ID, SOURCE_CHAIN_ID, startCctpWorld, write, type CctpWorld } from './helpers/cctp.ts';
import { tokenBalance } from './helpers/contracts.ts';
import { scratchDatabase } from './helpers/db.ts';
import { approvedMovement, backdateNodes, drain, plan, runtimeDeps, simNode, snapshot } from './helpers/runtime.ts';
import { waitFor } from './helpers/wait.ts';
import type { TemplateDefinitionInput } from '../src/plan/template-schema.ts';

/**
 * The CCTP lane on two anvil chains (chain ids 31337 and 31338, CCTP domains 0 and 6) with the
 * CCTP v2 test contracts, the attestation emulator on loopback and real PostgreSQL, through the
 * real dispatcher, observer and recovery: the `cctp_bridge` template burns, waits for the
 * attestation, mints and sees the funds on the destination chain.
 */

let w: CctpWorld;
before(async () => {
  w = await startCctpWorld();
});
after(async () => {
  await w?.stop();
});

const ENV = { FERRY_SUBMITTING_GRACE_SECONDS_BY_LANE: 'cctp=0.001' };

async function cctpDeps(pool: Pool, wrap?: (registry: ExecutorRegistry) => ExecutorRegistry): Promise<WorkerDeps> {
  const env = { ...ENV, FERRY_CONFIG_FILE: cctpConfigFile(w), CCTP_HOT_KEY: w.hotKey };
  const base = runtimeDeps(pool, env);
  const { executors, signers } = await configuredRegistries(pool, base.config, { env, log });
  return { ...base, executors: wrap ? wrap(executors) : executors, signers };
}

function fresh(): Address {
  return privateKeyToAccount(generatePrivateKey()).address.toLowerCase() as Address;
}

const bridge = (key: string) =>
  cctpBridgeTemplate({ templateKey: key, sourceChainId: SOURCE_CHAIN_ID, destinationChainId: DESTINATION_CHAIN_ID, signerKey: 'hot' }) as unknown as TemplateDefinitionInput;

/** Runs the workers (and mines a block on each chain between rounds) until the movement ends. */
async function runToEnd(deps: WorkerDeps, id: string) {
  return waitFor('the movement to finish', async () => {
    await drain(deps);
    const s = await snapshot(deps.pool, id);
    if (['COMPLETED', 'FAILED', 'MANUAL_INTERVENTION'].includes(s.movement.request_state)) return s;
    await Promise.all([w.source.anvil.mine(1), w.destination.anvil.mine(1)]);
    return null;
  });
}

test('cctp_bridge: burn on chain 31337, attestation, mint on chain 31338, the funds arrive', async (t) => {
  const db = await scratchDatabase(t);
  const deps = await cctpDeps(db.pool);
  const to = fresh();
  const before = await cctpEvents(w);
  const hotBefore = await tokenBalance(w.source.chain, w.source.token, w.hot);
  const id = await approvedMovement(deps, bridge('cctp-e2e'), { asset: 'USDC', amount: '12.5', destination: { address: to } });

  const s = await runToEnd(deps, id);
  assert.equal(s.movement.request_state, 'COMPLETED', JSON.stringify(s.nodes.map((n) => [n.node_key, n.node_state, n.error_code, n.error_detail])));
  assert.equal(await tokenBalance(w.destination.chain, w.destination.token, to), 12_500_000n, 'minted to the recipient on the destination');
  assert.equal(await tokenBalance(w.source.chain, w.source.token, w.hot), hotBefore - 12_500_000n, 'burned from the hot wallet on the source');
  const events = await cctpEvents(w);
  assert.equal(events.burns.length - before.burns.length, 1, 'one burn');
  assert.equal(events.mints.length - before.mints.length, 1, 'one mint');
  const { burn, attestation, mint, arrived } = s.byKey;
  assert.equal(burn.provider_refs.tx_hash, events.burns.at(-1)!.transactionHash);
  assert.equal(burn.provider_refs.source_domain, 0);
  assert.equal(attestation.provider_refs.destination_domain, 6);
  assert.match(String(attestation.provider_refs.attestation), /^0x[0-9a-f]{130}$/);
  assert.equal(mint.provider_refs.tx_hash, events.mints.at(-1)!.transactionHash);
  assert.equal(arrived.node_state, 'COMPLETED');
  // The attestation service was asked while the burn had too few confirmations.
  assert.ok(w.iris.requests.some((r) => r.includes(String(burn.provider_refs.tx_hash))));
});

test('the signer signs the burn only as the approved plan fixes it (whole calldata), and the mint only as receiveMessage', async (t) => {
  const db = await scratchDatabase(t);
  const deps = await cctpDeps(db.pool);
  const to = fresh();
  const id = await approvedMovement(deps, bridge('cctp-effects'), { asset: 'USDC', amount: '1', destination: { address: to } });
  const s = await runToEnd(deps, id);
  assert.equal(s.movement.request_state, 'COMPLETED');
  const { deriveExpectedEffect } = await import('../src/executors/evm/expected-effect.ts');
  const compiled = s.movement.compiled_plan;
  const burn = deriveExpectedEffect({ plan: compiled, nodeKey: 'burn', intent: s.movement.intent, evm: deps.config.file.evm });
  assert.ok(burn.ok);
  assert.equal(burn.effect.to, w.source.messenger.address.toLowerCase());
  assert.equal(burn.effect.call?.selector, '0x8e0250ee');
  assert.ok(burn.effect.call?.data?.includes(to.slice(2)), 'the mint recipient is in the bound calldata');
  const mint = deriveExpectedEffect({ plan: compiled, nodeKey: 'mint', intent: s.movement.intent, evm: deps.config.file.evm });
  assert.ok(mint.ok);
  assert.equal(mint.effect.to, w.destination.transmitter.address.toLowerCase());
  assert.equal(mint.effect.call?.selector, '0x57ecfd28');
});

test('a burn executor that swaps the mint recipient in its transaction: the signer refuses (SIGNER_POLICY_VIOLATION), nothing burned', async (t) => {
  const db = await scratchDatabase(t);
  const thief = fresh();
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
        const data = encodeDepositForBurn({
          amount: BigInt(h.amount_base_units!),
          destinationDomain: Number(h.destination_domain),
          mintRecipient: thief,
          burnToken: h.token as Address,
          destinationCaller: h.destination_caller as Address,
          maxFee: BigInt(h.max_fee_base_units!),
          minFinalityThreshold: Number(h.min_finality_threshold),
        });
        const payload = serializeTransaction({ ...(tx as TransactionSerializableEIP1559), data });
        return { ...r, prepared_action: { ...pa, payload, payload_hash: payloadHash(payload), provider_hints: { ...h, mint_recipient: thief } } };
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
  const id = await approvedMovement(deps, bridge('cctp-hostile'), { asset: 'USDC', amount: '5', destination: { address: fresh() } });
  const s = await runToEnd(deps, id);
  assert.equal(s.byKey.burn.node_state, 'FAILED');
  assert.equal(s.byKey.burn.error_code, 'SIGNER_POLICY_VIOLATION');
  assert.match(String(s.byKey.burn.error_detail), /calldata of depositForBurn/);
  assert.equal((await cctpEvents(w)).burns.length, before.burns.length, 'nothing burned');
  assert.equal(await w.source.chain.getTransactionCount({ address: w.hot }), nonce, 'nothing sent');
  while ((await promoteAuditBatch(db.pool)) > 0);
  const { events } = await listAuditEvents(db.pool, { entity_type: 'movement_node', entity_id: s.byKey.burn.id });
  const refused = events.filter((e) => e.action === 'signer.refused');
  assert.equal(refused.length, 1);
  assert.equal(refused[0]!.details.rule, 'call_data');
});

test('an attestation signed by a key that is not an attester: the mint FAILS with CCTP_ATTESTATION_SIGNER_MISMATCH, nothing minted', async (t) => {
  const db = await scratchDatabase(t);
  const deps = await cctpDeps(db.pool);
  const to = fresh();
  const before = await cctpEvents(w);
  const destNonce = await w.destination.chain.getTransactionCount({ address: w.hot });
  w.iris.signerKey = generatePrivateKey();
  t.after(() => void (w.iris.signerKey = null));
  const id = await approvedMovement(deps, bridge('cctp-bad-signer'), { asset: 'USDC', amount: '3', destination: { address: to } });
  const s = await runToEnd(deps, id);
  // Burned and not minted: the movement waits for an operator (the funds are in flight).
  assert.equal(s.movement.request_state, 'MANUAL_INTERVENTION');
  assert.equal(s.byKey.burn.node_state, 'COMPLETED');
  assert.equal(s.byKey.attestation.node_state, 'COMPLETED');
  assert.equal(s.byKey.mint.node_state, 'FAILED');
  assert.equal(s.byKey.mint.error_code, 'CCTP_ATTESTATION_SIGNER_MISMATCH');
  assert.match(String(s.byKey.mint.error_detail), /not an attester/);
  assert.equal(await tokenBalance(w.destination.chain, w.destination.token, to), 0n, 'nothing minted');
  assert.equal((await cctpEvents(w)).mints.length, before.mints.length, 'no receiveMessage reached the chain');
  assert.equal(await w.destination.chain.getTransactionCount({ address: w.hot }), destNonce, 'the hot wallet sent nothing on the destination');
});

test('the attestation service answering 429 with Retry-After and then 5xx: the observer waits as told and completes', async (t) => {
  const db = await scratchDatabase(t);
  const deps = await cctpDeps(db.pool);
  const to = fresh();
  const id = await approvedMovement(deps, bridge('cctp-429'), { asset: 'USDC', amount: '2', destination: { address: to } });
  // Burn to completion, then the attestation watch starts.
  await waitFor('the attestation watch to start', async () => {
    await drain(deps);
    await w.source.anvil.mine(1);
    const a = (await snapshot(db.pool, id)).byKey.attestation;
    return a.node_state === 'SUBMITTED' || a.node_state === 'OBSERVING' ? a : null;
  });
  w.iris.fault = { status: 429, retryAfter: 42, times: 1 };
  await backdateNodes(db.pool, [id], 'next_observe_at', 60);
  await observeBatch(deps);
  const limited = (await snapshot(db.pool, id)).byKey.attestation;
  assert.equal(limited.node_state, 'OBSERVING');
  assert.equal(limited.error_code, 'CCTP_ATTESTATION_RATE_LIMITED');
  const wait = (Date.parse(String(limited.next_observe_at)) - Date.now()) / 1000;
  assert.ok(wait > 30 && wait <= 42, `next look in ${wait} s, as Retry-After said`);
  assert.equal(await observeBatch(deps), 0, 'nothing is asked before Retry-After has passed');

  w.iris.fault = { status: 503, times: 1 };
  await backdateNodes(db.pool, [id], 'next_observe_at', 60);
  await observeBatch(deps);
  assert.equal((await snapshot(db.pool, id)).byKey.attestation.error_code, 'CCTP_ATTESTATION_UNAVAILABLE');
  const s = await runToEnd(deps, id);
  assert.equal(s.movement.request_state, 'COMPLETED');
  assert.equal(await tokenBalance(w.destination.chain, w.destination.token, to), 2_000_000n);
});

test('a burn whose destination_caller is not the mint signer is refused before preflight (CCTP_BURN_CALLER_MISALIGNED), nothing burned', async (t) => {
  const db = await scratchDatabase(t);
  const deps = await cctpDeps(db.pool);
  const template = bridge('cctp-misaligned') as unknown as { nodes: Array<{ node_key: string; config: Record<string, unknown> }> };
  template.nodes.find((n) => n.node_key === 'burn')!.config.destination_caller = fresh();
  const before = await cctpEvents(w);
  const id = await approvedMovement(deps, template as never, { asset: 'USDC', amount: '1', destination: { address: fresh() } });
  const s = await runToEnd(deps, id);
  assert.equal(s.byKey.burn.node_state, 'FAILED');
  assert.equal(s.byKey.burn.error_code, 'CCTP_BURN_CALLER_MISALIGNED');
  assert.equal((await cctpEvents(w)).burns.length, before.burns.length, 'nothing burned');

  // Aligned: the mint signer's own address as destination_caller goes through.
  const aligned = bridge('cctp-aligned') as unknown as typeof template;
  aligned.nodes.find((n) => n.node_key === 'burn')!.config.destination_caller = w.hot;
  const to = fresh();
  const ok = await runToEnd(deps, await approvedMovement(deps, aligned as never, { asset: 'USDC', amount: '1', destination: { address: to } }));
  assert.equal(ok.movement.request_state, 'COMPLETED');
  assert.equal(await tokenBalance(w.destination.chain, w.destination.token, to), 1_000_000n);
});

test('a burn the wallet has not approved fails at preflight (CCTP_ALLOWANCE_INSUFFICIENT), nothing signed or sent', async (t) => {
  const db = await scratchDatabase(t);
  const deps = await cctpDeps(db.pool);
  await write(w.source, w.hotKey, { address: w.source.token.address, abi: w.source.token.abi }, 'approve', [w.source.messenger.address, 0n]);
  t.after(() => write(w.source, w.hotKey, { address: w.source.token.address, abi: w.source.token.abi }, 'approve', [w.source.messenger.address, 2n ** 256n - 1n]));
  const nonce = await w.source.chain.getTransactionCount({ address: w.hot });
  const id = await approvedMovement(deps, bridge('cctp-no-allowance'), { asset: 'USDC', amount: '1', destination: { address: fresh() } });
  const s = await runToEnd(deps, id);
  assert.equal(s.byKey.burn.error_code, 'CCTP_ALLOWANCE_INSUFFICIENT');
  assert.equal(await w.source.chain.getTransactionCount({ address: w.hot }), nonce, 'nothing sent');
});

test('an UNKNOWN mint whose message nonce is used: the cctp recovery arm takes it ahead of a backlog, recover() completes it without a second receiveMessage', async (t) => {
  const db = await scratchDatabase(t);
  const honest = await cctpDeps(db.pool);
  // A mint whose broadcast answer is lost before the transaction reached the node: UNKNOWN, signed bytes stored.
  const lost = (real: Executor): Executor =>
    ({
      executorKey: real.executorKey,
      lane: real.lane,
      preflight: (ctx) => real.preflight(ctx),
      prepare: (ctx) => real.prepare(ctx),
      preSubmitCheck: (ctx) => real.preSubmitCheck!(ctx),
      observe: (ctx) => real.observe(ctx),
      recover: (ctx) => real.recover(ctx),
      inspect: (ctx) => real.inspect(ctx),
      submit: async () =>
        parseExecutionResult({ next_state: 'UNKNOWN', provider_state: 'broadcast_uncertain', error_code: 'EVM_BROADCAST_UNCERTAIN', error_detail: 'the answer was lost' }, 'test'),
    }) satisfies Executor;
  const crashing = await cctpDeps(db.pool, (real) => {
    const r = new ExecutorRegistry();
    for (const e of real.all()) r.register(e.executorKey === CCTP_MINT_KEY ? lost(e) : e);
    return r;
  });
  const to = fresh();
  const id = await approvedMovement(honest, bridge('cctp-recover-used'), { asset: 'USDC', amount: '4', destination: { address: to } });
  const stuck = await waitFor('the mint to be UNKNOWN', async () => {
    const m = (await snapshot(db.pool, id)).byKey.mint;
    if (m.node_state === 'UNKNOWN') return m;
    await dispatchOne(crashing);
    await backdateNodes(db.pool, [id], 'next_observe_at', 5);
    await observeBatch(crashing);
    await w.source.anvil.mine(1);
    return null;
  });
  assert.equal(stuck.error_code, 'EVM_BROADCAST_UNCERTAIN');
  // An UNKNOWN node after a completed side effect (the burn) asks for an operator; they resume it.
  assert.equal((await snapshot(db.pool, id)).movement.request_state, 'MANUAL_INTERVENTION');
  await withTransaction(db.pool, (c) => deliverMovementEvent(c, id, { type: 'RESUME', by: 'operator' }, { actor: 'operator', deps: honest.transitions }));
  const destNonce = await w.destination.chain.getTransactionCount({ address: w.hot });

  // Someone else relays the attested message meanwhile.
  const { message, attestation } = (await snapshot(db.pool, id)).byKey.attestation.provider_refs as { message: Hex; attestation: Hex };
  const beforeMints = (await cctpEvents(w)).mints.length;
  await write(w.destination, ANVIL_DEV_KEY, w.destination.transmitter, 'receiveMessage', [message, attestation]);

  // A backlog of older stuck nodes of another lane, more than a whole recovery batch.
  const small = await runtimeDeps(db.pool, { FERRY_NODE_RECOVERY_BATCH_SIZE: '4' });
  const backlog: string[] = [];
  for (let i = 0; i < 6; i++) backlog.push(await approvedMovement(small, plan(`sim-stuck-${i}`, [simNode('a', { submit: ['UNKNOWN'], recover: ['UNKNOWN'] })])));
  for (let i = 0; i < 6; i++) await dispatchOne(small);
  await backdateNodes(db.pool, backlog, 'updated_at', 3600);
  const limited = { ...honest, config: { ...honest.config, recoveryBatchSize: 4 } };
  await recoverBatch(limited);
  const stuckSims = await db.pool.query(`SELECT count(*)::int AS n FROM request_nodes WHERE request_id = ANY($1::uuid[]) AND node_state = 'UNKNOWN'`, [backlog]);
  assert.ok(stuckSims.rows[0].n >= 5, `older UNKNOWN nodes of other lanes are still waiting (${stuckSims.rows[0].n}): the cctp arm had its own share`);

  const after = (await snapshot(db.pool, id)).byKey.mint;
  assert.equal(after.node_state, 'COMPLETED', `${after.node_state} ${after.error_code} ${after.error_detail} request ${(await snapshot(db.pool, id)).movement.request_state}`);
  assert.equal(after.provider_state, 'already_received');
  assert.equal(after.attempt_no, stuck.attempt_no, 'no new attempt');
  assert.equal((await cctpEvents(w)).mints.length, beforeMints + 1, 'exactly one receiveMessage: the relayer\'s');
  assert.equal(await w.destination.chain.getTransactionCount({ address: w.hot }), destNonce, 'the hot wallet sent no receiveMessage');
  assert.equal(await tokenBalance(w.destination.chain, w.destination.token, to), 4_000_000n);
  const s = await runToEnd(honest, id);
  assert.equal(s.movement.request_state, 'COMPLETED');
});
