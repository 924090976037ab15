import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createWalletClient, hexToSignature, http, type Abi, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import type { WorkerDeps } from '../src/actors/execution.ts';
import { ConfigFileSchema } from '../src/config-file.ts';
import { FatalMovementError } from '../src/executors/errors.ts';
import { chainFromConfig, EvmChains, tokenNonceReader } from '../src/executors/evm/index.ts';
import { payloadHash } from '../src/executors/payload-hash.ts';
import { ExecutionResultSchema, type ExecutionContext, type Executor, type ExpectedEffect, type Signer, type SignRequest } from '../src/executors/protocol.ts';
import { ExecutorRegistry, SignerRegistry } from '../src/executors/registry.ts';
import { AwsKmsEvmSigner } from '../src/executors/signers/aws-kms-evm.ts';
import { LocalPrivateKeySignerEvm } from '../src/executors/signers/local-private-key-evm.ts';
import { listAuditEvents, promoteAuditBatch } from '../src/persistence/audit.ts';
import type { Pool } from '../src/persistence/db.ts';
import { ANVIL_CHAIN_ID, ANVIL_DEV_KEY, localChainForFile, type LocalChain } from './helpers/anvil.ts';
import { compileContracts } from './helpers/contracts.ts';
import { scratchDatabase } from './helpers/db.ts';
import { EVIDENCE } from './helpers/host-requests.ts';
import { approvedMovement, drain, plan, runtimeDeps, snapshot } from './helpers/runtime.ts';
import { startKmsEmulator, type KmsEmulator } from './emulators/kms.ts';

/**
 * EIP-2612 permits signed by Ferry's signers and accepted on a real chain: a test USDC that checks
 * permits as USDC's FiatTokenV2 does (test/contracts/PermitToken.sol) on anvil, the nonce read by
 * the signer side from the token itself. A local key and a KMS key (the real SDK against the KMS
 * emulator) each sign a permit for the TokenMessengerV2 that a relayer submits; the allowance is
 * set. Through the dispatcher, a movement with a permit node completes, and a hostile executor's
 * permit for another spender FAILS with SIGNER_POLICY_VIOLATION, nothing signed, no allowance.
 */

process.env.AWS_EC2_METADATA_DISABLED = 'true';

const MESSENGER = '0x28b5a0e9c621a5badaa536219b3a228c8168cf5d' as Address;
const ATTACKER = privateKeyToAccount(generatePrivateKey()).address.toLowerCase() as Address;
const EXECUTOR = 'exec.evm.permit';
const AMOUNT = 100_000_000n;

let local: LocalChain;
let token: { address: Address; abi: Abi };
let kms: KmsEmulator;
let chains: EvmChains;

localChainForFile(async (l) => {
  local = l;
  const compiled = compileContracts('PermitToken.sol').PermitToken!;
  const deployer = createWalletClient({ account: privateKeyToAccount(ANVIL_DEV_KEY), transport: http(l.anvil.url, { retryCount: 0 }) });
  const hash = await deployer.deployContract({ abi: compiled.abi, bytecode: compiled.bytecode, args: ['USD Coin', 'USDC', 6], chain: null });
  const receipt = await l.chain.waitForTransactionReceipt({ hash, pollingInterval: 50, timeout: 30_000 });
  token = { address: receipt.contractAddress!.toLowerCase() as Address, abi: compiled.abi };
  chains = new EvmChains([chainFromConfig(configFile().evm.chains[0]!)]);
});
before(async () => {
  kms = await startKmsEmulator();
});
after(async () => kms?.stop());

function configFile() {
  return ConfigFileSchema.parse({
    evm: {
      chains: [
        {
          chain_id: ANVIL_CHAIN_ID,
          rpc_url: local.anvil.url,
          max_fee_per_gas_cap_wei: '500000000000',
          cctp: { domain: 0, token_messenger: MESSENGER, message_transmitter: '0x1111111111111111111111111111111111111111' },
        },
      ],
      tokens: [{ chain_id: ANVIL_CHAIN_ID, symbol: 'USDC', address: token.address, decimals: 6, eip712: { name: 'USD Coin', version: '2' } }],
    },
  });
}

const allowList = () => new Map([[EXECUTOR, new Set(['Permit'])]]);

const read = (functionName: string, args: readonly unknown[]) => local.chain.readContract({ address: token.address, abi: token.abi, functionName, args }) as Promise<bigint>;

type Permit = { owner: Address; spender: Address; value: bigint; deadline: bigint };

async function permitPayload(p: Permit): Promise<string> {
  const nonce = await read('nonces', [p.owner]);
  return JSON.stringify({
    types: {
      EIP712Domain: [
        { name: 'name', type: 'string' },
        { name: 'version', type: 'string' },
        { name: 'chainId', type: 'uint256' },
        { name: 'verifyingContract', type: 'address' },
      ],
      Permit: [
        { name: 'owner', type: 'address' },
        { name: 'spender', type: 'address' },
        { name: 'value', type: 'uint256' },
        { name: 'nonce', type: 'uint256' },
        { name: 'deadline', type: 'uint256' },
      ],
    },
    primaryType: 'Permit',
    domain: { name: 'USD Coin', version: '2', chainId: ANVIL_CHAIN_ID, verifyingContract: token.address },
    message: { owner: p.owner, spender: p.spender, value: p.value.toString(), nonce: nonce.toString(), deadline: p.deadline.toString() },
  });
}

/** Submits permit(owner, spender, value, deadline, v, r, s) from anvil's dev account (a relayer: the owner pays no gas). */
async function relay(p: Permit, signature: Hex): Promise<Hex> {
  const { r, s, v } = hexToSignature(signature);
  const relayer = createWalletClient({ account: privateKeyToAccount(ANVIL_DEV_KEY), transport: http(local.anvil.url, { retryCount: 0 }) });
  const hash = await relayer.writeContract({ address: token.address, abi: token.abi, functionName: 'permit', args: [p.owner, p.spender, p.value, p.deadline, Number(v), r, s], chain: null });
  const receipt = await local.chain.waitForTransactionReceipt({ hash, pollingInterval: 50, timeout: 30_000 });
  assert.equal(receipt.status, 'success');
  return hash;
}

const effect = (): ExpectedEffect => ({
  chain_id: ANVIL_CHAIN_ID,
  asset: token.address,
  to: MESSENGER,
  amount_base_units: AMOUNT.toString(),
  token_method: 'permit',
  typed_data: { primary_type: 'Permit', domain: { name: 'USD Coin', version: '2', chainId: ANVIL_CHAIN_ID, verifyingContract: token.address }, deadline_max_seconds: 3600 },
});

function signRequest(payload: string): SignRequest {
  return {
    protocol_version: '1.0',
    request_id: 'req-1',
    request_node_id: 'node-1',
    ...EVIDENCE,
    signing_intent: { action: 'evm_permit', asset: 'USDC', amount: '100', destination: MESSENGER, max_fee_usd: null, chain_family: 'evm', allowed_payload_hash: payloadHash(payload) },
    payload_format: 'eip712',
    payload,
    payload_hash: payloadHash(payload),
    metadata: {},
    executor_key: EXECUTOR,
    expected_effect: effect(),
  };
}

const deadline = () => BigInt(Math.floor(Date.now() / 1000) + 600);
const violation = (rule: string) => (e: unknown) => e instanceof FatalMovementError && e.code === 'SIGNER_POLICY_VIOLATION' && e.details.rule === rule;

describe('permits accepted on chain', () => {
  test('a local key signs a permit for the TokenMessengerV2 with the nonce it read from the token; the chain accepts it, and the used nonce is refused after', async () => {
    const key = generatePrivateKey();
    const signer = new LocalPrivateKeySignerEvm({ signerKey: 'hot', privateKey: key, chains: [ANVIL_CHAIN_ID], typedData: allowList(), tokenNonces: tokenNonceReader(chains) });
    const p: Permit = { owner: signer.address as Address, spender: MESSENGER, value: AMOUNT, deadline: deadline() };
    const payload = await permitPayload(p);
    const result = await signer.sign(signRequest(payload));
    await relay(p, result.signature as Hex);
    assert.equal(await read('allowance', [p.owner, MESSENGER]), AMOUNT);
    assert.equal(await read('nonces', [p.owner]), 1n);
    // The same permit again: its nonce is used up on chain, and the signer reads the token's.
    await assert.rejects(signer.sign(signRequest(payload)), violation('nonce'));
  });

  test('a KMS key signs a permit (DIGEST over the EIP-712 digest, low s, v recovered); the chain accepts it, a high-s KMS answer included', async () => {
    const signer = new AwsKmsEvmSigner({
      signerKey: 'kms_hot',
      keyId: kms.keyId,
      region: kms.region,
      endpoint: kms.url,
      credentials: { accessKeyId: kms.accessKeyId, secretAccessKey: kms.secretAccessKey },
      timeoutMs: 2_000,
      chains: [ANVIL_CHAIN_ID],
      typedData: allowList(),
      tokenNonces: tokenNonceReader(chains),
    });
    try {
      const owner = (await signer.getAddress()) as Address;
      for (const fault of [null, 'high_s'] as const) {
        if (fault) kms.script(fault);
        const p: Permit = { owner, spender: MESSENGER, value: AMOUNT - 1n, deadline: deadline() };
        const before = kms.requests.filter((r) => r.target.endsWith('.Sign')).length;
        const result = await signer.sign(signRequest(await permitPayload(p)));
        assert.equal(kms.requests.filter((r) => r.target.endsWith('.Sign')).length, before + 1);
        assert.equal(result.signature_format, 'eip712_signature');
        await relay(p, result.signature as Hex);
        assert.equal(await read('allowance', [owner, MESSENGER]), AMOUNT - 1n);
      }
      // A hostile permit never reaches KMS.
      const signs = kms.requests.filter((r) => r.target.endsWith('.Sign')).length;
      await assert.rejects(signer.sign(signRequest(await permitPayload({ owner, spender: ATTACKER, value: AMOUNT, deadline: deadline() }))), violation('spender'));
      assert.equal(kms.requests.filter((r) => r.target.endsWith('.Sign')).length, signs);
    } finally {
      await signer.close();
    }
  });
});

/**
 * A permit node's executor, for this test: prepare builds the typed data (the honest permit, or
 * what `rewrite` makes of it), submit relays the signed permit to the token. Ferry has no permit
 * node of its own yet (docs/signing.md); this is how one would use the signature.
 */
function permitExecutor(owner: Address, rewrite: (p: Permit) => Permit = (p) => p): Executor & { relays: Hex[] } {
  const relays: Hex[] = [];
  const done = (refs: Record<string, unknown> = {}) => ExecutionResultSchema.parse({ next_state: 'COMPLETED', provider_refs: refs });
  return {
    executorKey: EXECUTOR,
    lane: 'evm',
    relays,
    preflight: async () => null,
    prepare: async (ctx: ExecutionContext) => {
      const p = rewrite({ owner, spender: MESSENGER, value: AMOUNT, deadline: deadline() });
      const payload = await permitPayload(p);
      return ExecutionResultSchema.parse({
        next_state: 'SUBMITTING',
        prepared_action: { prepared_action_id: `permit-${ctx.attempt_no}`, action_type: ctx.action_type, payload_format: 'eip712', payload, payload_hash: payloadHash(payload), signing_required: true },
      });
    },
    submit: async (_ctx, prepared, opts) => {
      const m = (JSON.parse(prepared.payload!) as { message: Record<string, string> }).message;
      const hash = await relay({ owner: m.owner as Address, spender: m.spender as Address, value: BigInt(m.value!), deadline: BigInt(m.deadline!) }, opts.signResult!.signature as Hex);
      relays.push(hash);
      return done({ tx_hash: hash });
    },
    observe: async () => done(),
    recover: async () => done(),
    inspect: async () => done(),
  };
}

describe('a permit node through the dispatcher', () => {
  const key = generatePrivateKey();
  const owner = privateKeyToAccount(key).address.toLowerCase() as Address;

  function deps(pool: Pool, executor: Executor): WorkerDeps & { signRequests: SignRequest[] } {
    const base = runtimeDeps(pool);
    const executors = new ExecutorRegistry();
    executors.register(executor);
    const inner = new LocalPrivateKeySignerEvm({ signerKey: 'evm_local', privateKey: key, chains: [ANVIL_CHAIN_ID], typedData: allowList(), tokenNonces: tokenNonceReader(chains) });
    const signRequests: SignRequest[] = [];
    const counting: Signer = { signerKey: inner.signerKey, sign: (r) => (signRequests.push(r), inner.sign(r)) };
    const signers = new SignerRegistry();
    signers.register(counting);
    return { ...base, config: { ...base.config, file: configFile() }, executors, signers, signRequests };
  }

  const permitPlan = (k: string) =>
    plan(k, [
      {
        node_key: 'permit',
        node_kind: 'action',
        action_type: 'evm_permit',
        executor_binding: { executor_key: EXECUTOR },
        signer_binding: { signer_key: 'evm_local', chain_id: ANVIL_CHAIN_ID },
        config: { token_permit: { token: 'USDC', spender: 'cctp.token_messenger', amount: '100', deadline_seconds: 900 } },
      },
    ]);

  test('the approved permit is signed against the plan and accepted on chain', async (t) => {
    const db = await scratchDatabase(t);
    const executor = permitExecutor(owner);
    const d = deps(db.pool, executor);
    const id = await approvedMovement(d, permitPlan('permit-honest'), { asset: 'USDC', amount: '100' });
    await drain(d);
    const s = await snapshot(db.pool, id);
    assert.equal(s.byKey.permit!.node_state, 'COMPLETED', JSON.stringify(s.byKey.permit));
    assert.equal(d.signRequests.length, 1);
    assert.equal(d.signRequests[0]!.expected_effect?.typed_data?.primary_type, 'Permit');
    assert.equal(executor.relays.length, 1);
    assert.equal(await read('allowance', [owner, MESSENGER]), AMOUNT);
  });

  test('a hostile executor\'s permit for another spender FAILS the node with SIGNER_POLICY_VIOLATION, nothing relayed, no allowance, audited', async (t) => {
    const db = await scratchDatabase(t);
    const executor = permitExecutor(owner, (p) => ({ ...p, spender: ATTACKER, value: 2n ** 256n - 1n }));
    const d = deps(db.pool, executor);
    const id = await approvedMovement(d, permitPlan('permit-hostile'), { asset: 'USDC', amount: '100' });
    await drain(d);
    const s = await snapshot(db.pool, id);
    const node = s.byKey.permit!;
    assert.equal(node.node_state, 'FAILED');
    assert.equal(node.error_code, 'SIGNER_POLICY_VIOLATION');
    assert.equal(executor.relays.length, 0);
    assert.equal(await read('allowance', [owner, ATTACKER]), 0n);
    while ((await promoteAuditBatch(db.pool)) > 0);
    const { events } = await listAuditEvents(db.pool, { entity_type: 'movement_node', entity_id: node.id });
    const refused = events.filter((e) => e.action === 'signer.refused');
    assert.equal(refused.length, 1);
    assert.equal(refused[0]!.details.rule, 'spender');
    assert.equal(refused[0]!.details.executor_key, EXECUTOR);
  });
});

describe('signers from the configuration file', () => {
  test('a local_key and an aws_kms entry with typed_data sign permits, reading the nonce over the file\'s chain; the chain accepts both; an entry without typed_data refuses', async () => {
    const { loadConfig } = await import('../src/config.ts');
    const { registerEvmLane } = await import('../src/executors/evm/index.ts');
    const { writeConfigFile } = await import('./helpers/evm.ts');
    const pino = (await import('pino')).default;
    const key = generatePrivateKey();
    const typed_data = [{ executor: EXECUTOR, primary_types: ['Permit'] }];
    const file = writeConfigFile({
      chains: [{ chain_id: ANVIL_CHAIN_ID, rpc_url: local.anvil.url }],
      tokens: [{ chain_id: ANVIL_CHAIN_ID, symbol: 'USDC', address: token.address, decimals: 6, eip712: { name: 'USD Coin', version: '2' } }],
      signers: [
        { key: 'hot', kind: 'local_key', private_key_env: 'HOT_KEY', chains: [ANVIL_CHAIN_ID], typed_data },
        { key: 'plain', kind: 'local_key', private_key_env: 'HOT_KEY', chains: [ANVIL_CHAIN_ID] },
        {
          key: 'kms_hot',
          kind: 'aws_kms',
          kms: { key_id: kms.keyId, region: kms.region, endpoint: kms.url, access_key_id_env: 'KMS_AK', secret_access_key_env: 'KMS_SK' },
          chains: [ANVIL_CHAIN_ID],
          typed_data,
        },
      ],
    } as never);
    const env = { FERRY_CONFIG_FILE: file, HOT_KEY: key, KMS_AK: kms.accessKeyId, KMS_SK: kms.secretAccessKey, AWS_EC2_METADATA_DISABLED: 'true' };
    const registries = { executors: new ExecutorRegistry(), signers: new SignerRegistry() };
    const lane = await registerEvmLane(loadConfig(env), registries, { env, log: pino({ level: 'silent' }), nonces: null });
    assert.ok(lane);
    for (const signerKey of ['hot', 'kms_hot']) {
      const signer = registries.signers.get(signerKey);
      const owner: Address = lane.wallets.get(signerKey)!.address;
      const p: Permit = { owner, spender: MESSENGER, value: 7n, deadline: deadline() };
      const result = await signer.sign(signRequest(await permitPayload(p)));
      await relay(p, result.signature as Hex);
      assert.equal(await read('allowance', [owner, MESSENGER]), 7n, signerKey);
    }
    const owner: Address = lane.wallets.get('plain')!.address;
    const payload = await permitPayload({ owner, spender: MESSENGER, value: 7n, deadline: deadline() });
    await assert.rejects(registries.signers.get('plain').sign(signRequest(payload)), violation('typed_data_not_allowed'));
    await Promise.allSettled(registries.signers.keys().map((k) => registries.signers.get(k).close?.()));
  });
});
