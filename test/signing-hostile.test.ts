import assert from 'node:assert/strict';
import { test } from 'node:test';
import { encodeFunctionData, erc20Abi, parseTransaction, serializeTransaction, type Address, type Hex, type PublicClient, type TransactionSerializable } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import type { WorkerDeps } from '../src/actors/execution.ts';
import { ConfigFileSchema } from '../src/config-file.ts';
import { createEvmLane, EVM_NATIVE_TRANSFER_KEY, type EvmNativeTransferExecutor } from '../src/executors/evm/index.ts';
import { ERC20_TRANSFER_EXECUTOR } from '../src/executors/evm/expected-effect.ts';
import { payloadHash } from '../src/executors/payload-hash.ts';
import type { ExecutionContext, Executor, PreparedAction } from '../src/executors/protocol.ts';
import { ExecutorRegistry, SignerRegistry } from '../src/executors/registry.ts';
import { artifactsOfNodes } from '../src/persistence/artifacts.ts';
import { listAuditEvents, promoteAuditBatch } from '../src/persistence/audit.ts';
import type { Pool } from '../src/persistence/db.ts';
import { ANVIL_CHAIN_ID, ANVIL_DEV_ADDRESS, ANVIL_DEV_KEY, localChainForFile, type Anvil } from './helpers/anvil.ts';
import { scratchDatabase } from './helpers/db.ts';
import { approvedMovement, drain, plan, runtimeDeps, snapshot } from './helpers/runtime.ts';

/**
 * A hostile executor against a real chain: it is registered in place of a real EVM executor and
 * prepares a transaction that pays someone else, or more, than the approved plan says (its payload
 * hash is consistent, so only the decoded transaction can give it away). The signer must refuse:
 * nothing signed, nothing broadcast (the sender's nonce and every balance unchanged), the node
 * FAILED with SIGNER_POLICY_VIOLATION, and an audit event recording the refusal.
 */

let anvil: Anvil;
let chain: PublicClient;

localChainForFile((local) => {
  ({ anvil, chain } = local);
});

const TOKEN = '0x5fbdb2315678afecb367f032d93f642f64180aa3' as Address;
const FEE_CAP_WEI = 500_000_000_000n;
const ATTACKER = privateKeyToAccount(generatePrivateKey()).address;
const fresh = () => privateKeyToAccount(generatePrivateKey()).address;

type Rewrite = (tx: TransactionSerializable) => TransactionSerializable;

/** Prepares what the real executor would, then rewrites the transaction and re-hashes the payload. */
function hostile(real: EvmNativeTransferExecutor, executorKey: string, rewrite: Rewrite): Executor {
  let prepares = 0;
  const executor: Executor & { prepares: () => number } = {
    executorKey,
    lane: real.lane,
    prepares: () => prepares,
    preflight: async () => null,
    prepare: async (ctx: ExecutionContext) => {
      prepares++;
      // The honest transaction the node asks for, as the real executor builds it (to, value from the plan).
      const cfg = ctx.node_config;
      const honest = await real.prepare({ ...ctx, node_config: { to: cfg.to ?? FILLER_RECIPIENT, value_wei: cfg.value_wei ?? ctx.intent.amount ?? '1' } });
      const prepared = honest.prepared_action!;
      const payload = serializeTransaction(rewrite(parseTransaction(prepared.payload as Hex)) as never);
      return { ...honest, prepared_action: { ...prepared, payload, payload_hash: payloadHash(payload) } };
    },
    submit: (ctx: ExecutionContext, prepared: PreparedAction, opts) => real.submit(ctx, prepared, opts),
    observe: (ctx) => real.observe(ctx),
    recover: (ctx) => real.recover(ctx),
    inspect: (ctx) => real.inspect(ctx),
  };
  return executor;
}
/** Where the base transaction of an ERC-20 node points before the rewrite replaces it. */
const FILLER_RECIPIENT = '0x1111111111111111111111111111111111111111';

function deps(pool: Pool, executor: (real: EvmNativeTransferExecutor) => Executor): WorkerDeps {
  const base = runtimeDeps(pool, { FERRY_SUBMITTING_GRACE_SECONDS_BY_LANE: 'evm=0.001' });
  const executors = new ExecutorRegistry();
  const signers = new SignerRegistry();
  const lane = createEvmLane({ rpcUrl: anvil.url, signerPrivateKey: ANVIL_DEV_KEY, pollSeconds: 0 });
  executors.register(executor(lane.executor));
  signers.register(lane.signer);
  const file = ConfigFileSchema.parse({
    evm: { chains: [{ chain_id: ANVIL_CHAIN_ID, rpc_url: anvil.url, max_fee_per_gas_cap_wei: FEE_CAP_WEI.toString() }] },
  });
  return { ...base, config: { ...base.config, file }, executors, signers };
}

function node(executorKey: string, config: Record<string, unknown>) {
  return {
    node_key: 'pay',
    node_kind: 'action',
    action_type: 'evm_transfer',
    executor_binding: { executor_key: executorKey },
    signer_binding: { signer_key: 'evm_local', chain_id: ANVIL_CHAIN_ID },
    config,
  };
}

async function chainState(...addresses: Address[]) {
  return {
    nonce: await chain.getTransactionCount({ address: ANVIL_DEV_ADDRESS, blockTag: 'pending' }),
    block: await chain.getBlockNumber(),
    balances: await Promise.all(addresses.map((a) => chain.getBalance({ address: a }))),
  };
}

interface Case {
  name: string;
  executorKey: string;
  config: (recipient: Address) => Record<string, unknown>;
  intent: (recipient: Address) => Record<string, unknown>;
  rewrite: (recipient: Address) => Rewrite;
  rule: string;
}

const erc20Data = (to: Address, amount: bigint) => encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [to, amount] });

const cases: Case[] = [
  {
    name: 'a native transfer whose recipient is swapped',
    executorKey: EVM_NATIVE_TRANSFER_KEY,
    config: (r) => ({ to: r, value_wei: '1000' }),
    intent: () => ({ asset: 'ETH', amount: '1000' }),
    rewrite: () => (tx) => ({ ...tx, to: ATTACKER }),
    rule: 'to',
  },
  {
    name: 'a native transfer whose amount is raised',
    executorKey: EVM_NATIVE_TRANSFER_KEY,
    config: (r) => ({ to: r }),
    intent: () => ({ asset: 'ETH', amount: '1000' }),
    rewrite: () => (tx) => ({ ...tx, value: 1000n * 10n ** 18n }),
    rule: 'amount',
  },
  {
    name: 'a native transfer that offers a fee above the chain cap',
    executorKey: EVM_NATIVE_TRANSFER_KEY,
    config: (r) => ({ to: r, value_wei: '1000' }),
    intent: () => ({}),
    rewrite: () => (tx) => ({ ...tx, maxFeePerGas: FEE_CAP_WEI + 1n, maxPriorityFeePerGas: 1n }) as TransactionSerializable,
    rule: 'fee_cap',
  },
  {
    name: 'an ERC-20 transfer whose recipient is swapped',
    executorKey: ERC20_TRANSFER_EXECUTOR,
    config: () => ({ token: TOKEN, decimals: 6 }),
    intent: (r) => ({ asset: 'USDC', amount: '100', destination: { address: r } }),
    rewrite: () => (tx) => ({ ...tx, to: TOKEN, value: 0n, gas: 80_000n, data: erc20Data(ATTACKER, 100_000_000n) }),
    rule: 'to',
  },
  {
    name: 'an ERC-20 transfer whose amount is raised',
    executorKey: ERC20_TRANSFER_EXECUTOR,
    config: () => ({ token: TOKEN, decimals: 6 }),
    intent: (r) => ({ asset: 'USDC', amount: '100', destination: { address: r } }),
    rewrite: (r) => (tx) => ({ ...tx, to: TOKEN, value: 0n, gas: 80_000n, data: erc20Data(r, 1_000_000_000_000n) }),
    rule: 'amount',
  },
  {
    name: 'a native transfer built for an ERC-20 node (the 1000 ETH for 100 USDC of the security review)',
    executorKey: ERC20_TRANSFER_EXECUTOR,
    config: () => ({ token: TOKEN, decimals: 6 }),
    intent: (r) => ({ asset: 'USDC', amount: '100', destination: { address: r } }),
    rewrite: () => (tx) => ({ ...tx, to: ATTACKER, value: 1000n * 10n ** 18n }),
    rule: 'asset',
  },
];

for (const c of cases) {
  test(`the signer refuses ${c.name}: nothing signed, nothing sent, FAILED, audited`, async (t) => {
    const db = await scratchDatabase(t);
    const recipient = fresh();
    let executor!: Executor & { prepares: () => number };
    const d = deps(db.pool, (real) => (executor = hostile(real, c.executorKey, c.rewrite(recipient)) as typeof executor));
    const before = await chainState(recipient, ATTACKER);

    const id = await approvedMovement(d, plan(`hostile-${c.rule}-${c.executorKey}-${Date.now()}`, [node(c.executorKey, c.config(recipient))]), c.intent(recipient));
    await drain(d);

    assert.ok(executor.prepares() >= 1, 'the hostile executor did prepare its transaction');
    const s = await snapshot(db.pool, id);
    const pay = s.byKey.pay;
    assert.equal(pay.node_state, 'FAILED');
    assert.equal(pay.error_code, 'SIGNER_POLICY_VIOLATION');
    assert.equal(s.movement.request_state, 'FAILED');
    assert.equal(executor.prepares(), 1, 'a refused signature is final: no second attempt');

    const artifacts = await artifactsOfNodes(db.pool, [pay.id]);
    assert.deepEqual(artifacts.map((a) => a.artifact_type), ['prepared_action'], 'no signature was stored');
    assert.deepEqual(await chainState(recipient, ATTACKER), before, 'no transaction reached the chain, no balance moved');

    while ((await promoteAuditBatch(db.pool)) > 0);
    const { events } = await listAuditEvents(db.pool, { entity_type: 'movement_node', entity_id: pay.id });
    const refused = events.filter((e) => e.action === 'signer.refused');
    assert.equal(refused.length, 1);
    assert.equal(refused[0].actor, 'worker:dispatcher');
    assert.equal(refused[0].details.error_code, 'SIGNER_POLICY_VIOLATION');
    assert.equal(refused[0].details.rule, c.rule);
    assert.equal(refused[0].details.executor_key, c.executorKey);
    assert.equal(refused[0].details.signer_key, 'evm_local');
    assert.equal(refused[0].details.request_id, id);
  });
}

test('control: the same chain, signer and plan with an honest executor transfers exactly the approved amount', async (t) => {
  const db = await scratchDatabase(t);
  const recipient = fresh();
  const d = deps(db.pool, (real) => real);
  const id = await approvedMovement(d, plan(`honest-${Date.now()}`, [node(EVM_NATIVE_TRANSFER_KEY, { to: recipient, value_wei: '1000' })]), {});
  await drain(d);
  const s = await snapshot(db.pool, id);
  assert.equal(s.byKey.pay.node_state, 'COMPLETED', `${s.byKey.pay.error_code}: ${s.byKey.pay.error_detail}`);
  assert.equal(await chain.getBalance({ address: recipient }), 1000n);
});
