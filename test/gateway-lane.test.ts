import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { encodeFunctionData, parseTransaction, serializeTransaction, zeroAddress, type Address, type Hex, type TransactionSerializableEIP1559 } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import type { WorkerDeps } from '../src/actors/execution.ts';
import { contextFor } from '../src/actors/execution.ts';
import { configuredRegistries } from '../src/actors/runtime.ts';
import { deriveExpectedEffect, pinExpectedEffect } from '../src/executors/evm/expected-effect.ts';
import { effectConfigOf } from '../src/executors/sign-request.ts';
import { movementEffect } from '../src/http/effect.ts';
import { GATEWAY_DEPOSIT_KEY, GATEWAY_INTENT_KEY, gatewayWalletAbi, word } from '../src/executors/gateway/index.ts';
import { payloadHash } from '../src/executors/payload-hash.ts';
import type { Executor, Signer } from '../src/executors/protocol.ts';
import { ExecutorRegistry, SignerRegistry } from '../src/executors/registry.ts';
import { log } from '../src/log.ts';
import { listAuditEvents, promoteAuditBatch } from '../src/persistence/audit.ts';
import type { Pool } from '../src/persistence/db.ts';
import type { TemplateDefinitionInput } from '../src/plan/template-schema.ts';
import { gatewayTransferTemplate } from '../scripts/sandbox/templates.ts';
import { gatewayTransferFee } from './emulators/gateway-api.ts';
import { tokenBalance } from './helpers/contracts.ts';
import { scratchDatabase } from './helpers/db.ts';
import { BASE_FEE, DESTINATION_CHAIN_ID, gatewayConfigFile, gatewayEvents, MAX_FEE, SOURCE_CHAIN_ID, startGatewayWorld, type GatewayWorld } from './helpers/gateway.ts';
import { approvedMovement, backdateNodes, drain, runtimeDeps, snapshot } from './helpers/runtime.ts';
import { waitFor } from './helpers/wait.ts';

/**
 * The Gateway lane on two anvil chains (31337 as domain 0, 31338 as domain 6) with the Gateway
 * test contracts and the emulated Gateway API on loopback, through the real dispatcher, observer
 * and signer: approve and deposit into the GatewayWallet, the credit counted by the API, a burn
 * intent signed as EIP-712 typed data against the approved effect, attested and burned by the API,
 * minted on the destination, and the burn read on the source.
 */

let w: GatewayWorld;
before(async () => {
  w = await startGatewayWorld();
});
after(async () => {
  await w?.stop();
});

const fresh = () => privateKeyToAccount(generatePrivateKey()).address.toLowerCase() as Address;

async function laneDeps(pool: Pool, opts: { wrap?: (r: ExecutorRegistry) => ExecutorRegistry; apiUrl?: string } = {}): Promise<WorkerDeps & { signed: string[] }> {
  const env = { FERRY_SUBMITTING_GRACE_SECONDS_BY_LANE: 'gateway=0.001', FERRY_CONFIG_FILE: gatewayConfigFile(w, { apiUrl: opts.apiUrl }), GATEWAY_HOT_KEY: w.hotKey };
  const base = runtimeDeps(pool, env);
  const { executors, signers } = await configuredRegistries(pool, base.config, { env, log });
  const signed: string[] = [];
  const counting = new SignerRegistry();
  for (const s of signers.all()) counting.register({ signerKey: s.signerKey, sign: (req) => (signed.push(req.executor_key ?? ''), s.sign(req)) } satisfies Signer);
  return { ...base, executors: opts.wrap ? opts.wrap(executors) : executors, signers: counting, signed };
}

const template = (key: string, maxFee = MAX_FEE) =>
  gatewayTransferTemplate({ templateKey: key, sourceChainId: SOURCE_CHAIN_ID, destinationChainId: DESTINATION_CHAIN_ID, signerKey: 'hot', maxFee }) as unknown as TemplateDefinitionInput;

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
const available = (who: Address) => w.source.chain.readContract({ address: w.source.wallet.address, abi: w.source.wallet.abi, functionName: 'availableBalance', args: [w.source.token.address, who] }) as Promise<bigint>;

test('gateway_transfer: approve, deposit, credit, a signed burn intent attested and burned on 31337, minted on 31338; the chains agree', async (t) => {
  const db = await scratchDatabase(t);
  const deps = await laneDeps(db.pool);
  const to = fresh();
  const before = await gatewayEvents(w);
  const hotBefore = await tokenBalance(w.source.chain, w.source.token, w.hot);
  const availableBefore = await available(w.hot);
  const id = await approvedMovement(deps, template('gateway-e2e'), { asset: 'USDC', amount: '12.5', destination: { address: to } });

  const s = await runToEnd(deps, id);
  assert.equal(s.movement.request_state, 'COMPLETED', shown(s));
  const fee = BASE_FEE + gatewayTransferFee(12_500_000n);
  // From the chains: the deposit of amount plus the fee reserve, one burn of the amount, one mint of it.
  assert.equal(await tokenBalance(w.destination.chain, w.destination.token, to), 12_500_000n, 'minted on the destination');
  assert.equal(await tokenBalance(w.source.chain, w.source.token, w.hot), hotBefore - 13_000_000n, 'deposited 12.5 + 0.5 from the hot wallet');
  assert.equal((await available(w.hot)) - availableBefore, 13_000_000n - 12_500_000n - fee, 'the unified balance keeps the unused reserve');
  const events = await gatewayEvents(w);
  const deposited = events.deposited.slice(before.deposited.length) as unknown as Array<{ args: { depositor: Address; value: bigint }; transactionHash: string }>;
  const burned = events.burned.slice(before.burned.length) as unknown as Array<{ args: { depositor: Address; value: bigint; fee: bigint; transferSpecHash: string; destinationRecipient: string } }>;
  const minted = events.minted.slice(before.minted.length) as unknown as Array<{ args: { recipient: Address; value: bigint; transferSpecHash: string }; transactionHash: string }>;
  assert.equal(deposited.length, 1);
  assert.equal(deposited[0]!.args.depositor.toLowerCase(), w.hot);
  assert.equal(deposited[0]!.args.value, 13_000_000n);
  assert.equal(burned.length, 1);
  assert.equal(burned[0]!.args.value, 12_500_000n);
  assert.equal(burned[0]!.args.fee, fee);
  assert.equal(burned[0]!.args.destinationRecipient, word(to));
  assert.equal(minted.length, 1);
  assert.equal(minted[0]!.args.recipient.toLowerCase(), to);
  assert.equal(minted[0]!.args.transferSpecHash, burned[0]!.args.transferSpecHash, 'the same transfer spec on both chains');
  const { deposit, credit, intent, mint, burn } = s.byKey;
  assert.equal(deposit.provider_refs.tx_hash, deposited[0]!.transactionHash);
  assert.equal(credit.provider_state, 'credited');
  assert.equal(intent.provider_refs.transfer_spec_hash, burned[0]!.args.transferSpecHash);
  assert.equal(intent.provider_refs.fee_total_base_units, fee.toString());
  assert.equal(mint.provider_refs.tx_hash, minted[0]!.transactionHash);
  assert.equal(burn.provider_refs.fee_base_units, fee.toString());
  // Signed: the approve, the deposit and the mint as transactions, the intent as typed data.
  assert.deepEqual(deps.signed.sort(), ['exec.gateway.approve', 'exec.gateway.deposit', 'exec.gateway.intent', 'exec.gateway.mint']);

  // The approved effect of the intent: a BurnIntent under the GatewayWallet domain, every field fixed.
  const e = deriveExpectedEffect({ plan: s.movement.compiled_plan, nodeKey: 'intent', intent: s.movement.intent, evm: deps.config.file.evm, gateway: deps.config.file.gateway });
  assert.ok(e.ok, !e.ok ? e.reason : '');
  assert.deepEqual(e.effect.typed_data, { primary_type: 'BurnIntent', domain: { name: 'GatewayWallet', version: '1' } });
  assert.deepEqual(e.effect.gateway_burn, {
    source_domain: 0,
    destination_domain: 6,
    destination_chain_id: DESTINATION_CHAIN_ID,
    source_contract: w.source.wallet.address,
    destination_contract: w.destination.minter.address,
    source_token: w.source.token.address,
    destination_token: w.destination.token.address,
    destination_recipient: to,
    destination_caller: zeroAddress,
    value: '12500000',
    max_fee: '500000',
    max_blocks_ahead: 50_400,
  });
  // What approvers are shown: the asset, the amount, the recipient and the destination chain of the intent.
  const pinned = pinExpectedEffect({ plan: s.movement.compiled_plan, nodeKey: 'intent', intent: s.movement.intent, ...effectConfigOf(deps.config) });
  assert.ok('effect' in pinned);
  const view = movementEffect({ plan: s.movement.compiled_plan, intent: s.movement.intent, compiledPlanHash: 'sha256:x', nodes: [{ node_key: 'intent', expected_effect: pinned }], policy: null }).nodes.find((n) => n.node_key === 'intent')!;
  assert.equal(view.asset, 'USDC');
  assert.equal(view.amount, '12.5');
  assert.equal(view.destination, to);
  assert.equal(view.destination_chain_id, DESTINATION_CHAIN_ID);
  // Asked about the settled intent, inspect reads the source wallet's GatewayBurned and posts nothing;
  // recover posts the attempt's very signed intent again and gets the same transfer, burning nothing more.
  const ctx = await contextFor(db.pool, s.movement, intent, intent.attempt_no);
  const executor = deps.executors.get(GATEWAY_INTENT_KEY as never);
  const calls = w.api.transferCalls;
  const inspected = await executor.inspect(ctx);
  assert.equal(inspected.provider_state, 'burned');
  assert.equal(w.api.transferCalls, calls, 'inspect posts nothing');
  const recovered = await executor.recover(ctx);
  assert.equal(recovered.next_state, 'COMPLETED');
  assert.equal(recovered.provider_refs.transfer_id, intent.provider_refs.transfer_id, 'the same transfer');
  assert.equal(recovered.provider_refs.attestation, intent.provider_refs.attestation);
  assert.equal((await gatewayEvents(w)).burned.length, events.burned.length, 'no second burn');
  const none = deriveExpectedEffect({ plan: s.movement.compiled_plan, nodeKey: 'intent', intent: s.movement.intent, evm: deps.config.file.evm });
  assert.ok(!none.ok && /no gateway section/.test(none.reason));
});

test('a max fee below the fee Gateway publishes: the API refuses the intent (GATEWAY_FEE_TOO_LOW), nothing burned or minted', async (t) => {
  const db = await scratchDatabase(t);
  const deps = await laneDeps(db.pool);
  const before = await gatewayEvents(w);
  const id = await approvedMovement(deps, template('gateway-low-fee', '0.001'), { asset: 'USDC', amount: '3', destination: { address: fresh() } });
  const s = await runToEnd(deps, id);
  assert.equal(s.byKey.intent.node_state, 'FAILED', shown(s));
  assert.equal(s.byKey.intent.error_code, 'GATEWAY_FEE_TOO_LOW');
  assert.match(String(s.byKey.intent.error_detail), /maxFee 1000 is too low/);
  const after = await gatewayEvents(w);
  assert.equal(after.deposited.length, before.deposited.length + 1, 'the deposit went through');
  assert.equal(after.burned.length, before.burned.length, 'nothing burned');
  assert.equal(after.minted.length, before.minted.length, 'nothing minted');
});

// --- A hostile intent executor: the real one, with its typed data rewritten before signing.

type Typed = { types: Record<string, Array<{ name: string; type: string }>>; primaryType: string; domain: Record<string, unknown>; message: { maxBlockHeight: string; maxFee: string; spec: Record<string, unknown> } };

function wrapped(rewrite: (t: Typed) => Typed) {
  return (real: ExecutorRegistry): ExecutorRegistry => {
    const r = new ExecutorRegistry();
    for (const e of real.all()) {
      if (e.executorKey !== GATEWAY_INTENT_KEY) {
        r.register(e);
        continue;
      }
      r.register({
        executorKey: e.executorKey,
        lane: e.lane,
        preflight: (ctx) => e.preflight(ctx),
        prepare: async (ctx) => {
          const res = await e.prepare(ctx);
          if (!res.prepared_action?.payload) return res;
          const pa = res.prepared_action;
          const payload = JSON.stringify(rewrite(JSON.parse(pa.payload!) as Typed));
          return { ...res, prepared_action: { ...pa, payload, payload_hash: payloadHash(payload) } };
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

const thief = fresh();
const spec = (t: Typed, change: Record<string, unknown>): Typed => ({ ...t, message: { ...t.message, spec: { ...t.message.spec, ...change } } });
const cases: Array<[string, string, (t: Typed) => Typed]> = [
  ['another value', 'amount', (t) => spec(t, { value: (BigInt(t.message.spec.value as string) * 2n).toString() })],
  ['another destination domain', 'gateway_destination_domain', (t) => spec(t, { destinationDomain: 3 })],
  ['another recipient', 'gateway_recipient', (t) => spec(t, { destinationRecipient: word(thief) })],
  ['a max fee above the approved cap', 'gateway_max_fee', (t) => ({ ...t, message: { ...t.message, maxFee: '500001' } })],
  ['another source token', 'gateway_source_token', (t) => spec(t, { sourceToken: word(thief) })],
  ['another source wallet', 'gateway_source_contract', (t) => spec(t, { sourceContract: word(thief) })],
  ['another destination minter', 'gateway_destination_contract', (t) => spec(t, { destinationContract: word(thief) })],
  ['another destination token', 'gateway_destination_token', (t) => spec(t, { destinationToken: word(thief) })],
  ['a destination caller the plan did not name', 'gateway_destination_caller', (t) => spec(t, { destinationCaller: word(thief) })],
  ['another source domain', 'gateway_source_domain', (t) => spec(t, { sourceDomain: 6 })],
  ['another depositor and signer (a delegated balance)', 'gateway_depositor', (t) => spec(t, { sourceDepositor: word(thief), sourceSigner: word(thief) })],
  ['a signer other than the depositor', 'gateway_signer', (t) => spec(t, { sourceSigner: word(thief) })],
  ['hook data', 'gateway_hook_data', (t) => spec(t, { hookData: '0x01' })],
  ['spec version 2', 'gateway_version', (t) => spec(t, { version: 2 })],
  ['a domain with a chain id', 'domain_fields', (t) => ({ ...t, domain: { ...t.domain, chainId: SOURCE_CHAIN_ID }, types: { ...t.types, EIP712Domain: [...t.types.EIP712Domain!, { name: 'chainId', type: 'uint256' }] } })],
  ['another domain name', 'domain_name', (t) => ({ ...t, domain: { ...t.domain, name: 'GatewayMinter' } })],
  ['an extra TransferSpec field', 'typed_data_types', (t) => ({ ...t, types: { ...t.types, TransferSpec: [...t.types.TransferSpec!, { name: 'extra', type: 'uint256' }] } })],
  ['a max block height that keeps the signed intent valid for ever', 'gateway_max_block_height', (t) => ({ ...t, message: { ...t.message, maxBlockHeight: (2n ** 256n - 1n).toString() } })],
  ['a max block height already passed', 'gateway_max_block_height', (t) => ({ ...t, message: { ...t.message, maxBlockHeight: '1' } })],
  ['another primary type (not allowed by the signer for the executor)', 'typed_data_not_allowed', (t) => ({ ...t, primaryType: 'TransferSpec' })],
];

for (const [what, rule, rewrite] of cases) {
  test(`a hostile intent executor proposing ${what}: no signature (rule ${rule}), nothing posted`, async (t) => {
    const db = await scratchDatabase(t);
    const deps = await laneDeps(db.pool, { wrap: wrapped(rewrite) });
    const calls = w.api.transferCalls;
    const before = await gatewayEvents(w);
    const id = await approvedMovement(deps, template(`gateway-hostile-${rule}`), { asset: 'USDC', amount: '2', destination: { address: fresh() } });
    const s = await runToEnd(deps, id);
    assert.equal(s.byKey.intent.node_state, 'FAILED', shown(s));
    assert.equal(s.byKey.intent.error_code, 'SIGNER_POLICY_VIOLATION', String(s.byKey.intent.error_detail));
    assert.equal(w.api.transferCalls, calls, 'nothing posted to Gateway');
    assert.equal((await gatewayEvents(w)).burned.length, before.burned.length, 'nothing burned');
    while ((await promoteAuditBatch(db.pool)) > 0);
    const { events } = await listAuditEvents(db.pool, { entity_type: 'movement_node', entity_id: s.byKey.intent.id });
    const refused = events.filter((e) => e.action === 'signer.refused');
    assert.equal(refused.length, 1);
    assert.equal(refused[0]!.details.rule, rule);
  });
}

test('the unchanged intent through the same wrapper is signed and completes (the hostile cases fail for their rewrite only)', async (t) => {
  const db = await scratchDatabase(t);
  const deps = await laneDeps(db.pool, { wrap: wrapped((x) => x) });
  const to = fresh();
  const id = await approvedMovement(deps, template('gateway-wrapped-honest'), { asset: 'USDC', amount: '1', destination: { address: to } });
  const s = await runToEnd(deps, id);
  assert.equal(s.movement.request_state, 'COMPLETED', shown(s));
  assert.equal(await tokenBalance(w.destination.chain, w.destination.token, to), 1_000_000n);
});

test('a deposit without the allowance fails before signing (GATEWAY_ALLOWANCE_INSUFFICIENT: approve first), nothing deposited', async (t) => {
  const db = await scratchDatabase(t);
  const deps = await laneDeps(db.pool);
  const allowance = (await w.source.chain.readContract({ address: w.source.token.address, abi: w.source.token.abi, functionName: 'allowance', args: [w.hot, w.source.wallet.address] })) as bigint;
  assert.equal(allowance, 0n, 'each approve was spent by its deposit');
  const full = template('gateway-no-approve') as unknown as { nodes: Array<{ node_key: string }>; edges: Array<{ from: string; to: string }> };
  const without = { ...full, nodes: full.nodes.filter((n) => n.node_key !== 'approve'), edges: full.edges.filter((e) => e.from !== 'approve') } as unknown as TemplateDefinitionInput;
  const before = await gatewayEvents(w);
  const id = await approvedMovement(deps, without, { asset: 'USDC', amount: '2', destination: { address: fresh() } });
  const s = await runToEnd(deps, id);
  assert.equal(s.byKey.deposit.node_state, 'FAILED', shown(s));
  assert.equal(s.byKey.deposit.error_code, 'GATEWAY_ALLOWANCE_INSUFFICIENT');
  assert.deepEqual(deps.signed, [], 'nothing signed');
  assert.equal((await gatewayEvents(w)).deposited.length, before.deposited.length, 'nothing deposited');
});

test('a hostile deposit executor depositing more than approved: no signature (rule call_data), nothing broadcast', async (t) => {
  const db = await scratchDatabase(t);
  const wrap = (real: ExecutorRegistry): ExecutorRegistry => {
    const r = new ExecutorRegistry();
    for (const e of real.all()) {
      if (e.executorKey !== GATEWAY_DEPOSIT_KEY) {
        r.register(e);
        continue;
      }
      r.register({
        ...({ executorKey: e.executorKey, lane: e.lane } as const),
        preflight: (ctx) => e.preflight(ctx),
        prepare: async (ctx) => {
          const res = await e.prepare(ctx);
          const pa = res.prepared_action;
          if (!pa?.payload) return res;
          const tx = parseTransaction(pa.payload as Hex) as TransactionSerializableEIP1559;
          const data = encodeFunctionData({ abi: gatewayWalletAbi, functionName: 'deposit', args: [w.source.token.address, 900_000_000n] });
          const payload = serializeTransaction({ ...tx, data });
          return { ...res, prepared_action: { ...pa, payload, payload_hash: payloadHash(payload) } };
        },
        preSubmitCheck: (ctx, p) => e.preSubmitCheck!(ctx, p),
        submit: (ctx, p, o) => e.submit(ctx, p, o),
        observe: (ctx) => e.observe(ctx),
        recover: (ctx) => e.recover(ctx),
        inspect: (ctx) => e.inspect(ctx),
      } satisfies Executor);
    }
    return r;
  };
  const deps = await laneDeps(db.pool, { wrap });
  const before = await gatewayEvents(w);
  const id = await approvedMovement(deps, template('gateway-hostile-deposit'), { asset: 'USDC', amount: '2', destination: { address: fresh() } });
  const s = await runToEnd(deps, id);
  assert.equal(s.byKey.deposit.node_state, 'FAILED', shown(s));
  assert.equal(s.byKey.deposit.error_code, 'SIGNER_POLICY_VIOLATION');
  assert.equal((await gatewayEvents(w)).deposited.length, before.deposited.length, 'nothing deposited');
  while ((await promoteAuditBatch(db.pool)) > 0);
  const { events } = await listAuditEvents(db.pool, { entity_type: 'movement_node', entity_id: s.byKey.deposit.id });
  assert.equal(events.filter((e) => e.action === 'signer.refused')[0]?.details.rule, 'call_data');
});
