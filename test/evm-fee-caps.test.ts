import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { serializeTransaction, type Address, type Hex, type TransactionSerializable } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { ConfigError, loadConfig } from '../src/config.ts';
import { ConfigFileSchema, parseConfigFile } from '../src/config-file.ts';
import { createEvmLane, registerEvmLane } from '../src/executors/evm/index.ts';
import { deriveExpectedEffect, ERC20_TRANSFER_EXECUTOR } from '../src/executors/evm/expected-effect.ts';
import { payloadHash } from '../src/executors/payload-hash.ts';
import type { SignRequest } from '../src/executors/protocol.ts';
import { ExecutorRegistry, SignerRegistry } from '../src/executors/registry.ts';
import { signerHostApp } from '../src/hosts/signer-host.ts';
import { log } from '../src/log.ts';
import { artifactsOfNodes } from '../src/persistence/artifacts.ts';
import { listAuditEvents, promoteAuditBatch } from '../src/persistence/audit.ts';
import { nodeView } from '../src/http/views.ts';
import { getNode } from '../src/persistence/movements.ts';
import { ANVIL_CHAIN_ID, ANVIL_DEV_ADDRESS, ANVIL_DEV_KEY, TEST_FEE_CAP_WEI } from './helpers/anvil.ts';
import { sendCall, tokenBalance, usdcChainForFile, type UsdcChain } from './helpers/contracts.ts';
import { scratchDatabase } from './helpers/db.ts';
import { nativeTransferPlan, writeConfigFile } from './helpers/evm.ts';
import { hostileDeps, hostileExecutor, usdcPlan } from './helpers/hostile-executor.ts';
import { approvedMovement, drain, runtimeDeps, snapshot } from './helpers/runtime.ts';
import { EVIDENCE, requestVerifier, signedHeaders } from './helpers/host-requests.ts';

/**
 * Fee caps are mandatory and pinned: a chain a signer signs for without a cap stops start naming
 * the setting; an expected effect without a cap is refused; the cap reaches the expected effect in
 * a setup whose EVM executor is remote (no RPC in Ferry's evm.chains: evm.fee_caps); the signer
 * host applies its own cap; the fee a transfer paid is recorded on its node.
 */

let local: UsdcChain;
usdcChainForFile(async (l) => {
  local = l;
  await sendCall(l.chain, l.anvil.url, ANVIL_DEV_KEY, l.usdc, 'mint', [ANVIL_DEV_ADDRESS, 10n ** 15n]);
});

const GWEI = 1_000_000_000n;
const fresh = () => privateKeyToAccount(generatePrivateKey()).address.toLowerCase() as Address;

test('a hostile /prepare offering 50,000,000 gwei per gas on a 100 USDC node is refused (fee_cap) with the cap from evm.fee_caps: FAILED, nothing mined', async (t) => {
  const db = await scratchDatabase(t);
  const recipient = fresh();
  // The review's attack: the approved transfer, with a fee per gas that would pay ~1,700 ETH.
  const hostile = await hostileExecutor(local, recipient, { prepare: (honest) => ({ ...honest, maxFeePerGas: 50_000_000n * GWEI, maxPriorityFeePerGas: 50_000_000n * GWEI }) });
  t.after(() => hostile.stop());
  // Ferry reaches no chain itself (its EVM executor is remote): the cap comes from evm.fee_caps.
  const deps = hostileDeps(db.pool, local, hostile.url, {
    env: { FERRY_EVM_MAX_FEE_PER_GAS_CAP_WEI: '' },
    evm: { fee_caps: [{ chain_id: ANVIL_CHAIN_ID, max_fee_per_gas_cap_wei: (500n * GWEI).toString() }], tokens: [{ chain_id: ANVIL_CHAIN_ID, symbol: 'USDC', address: local.usdc.address, decimals: 6 }] },
  });
  const nonce = await local.chain.getTransactionCount({ address: ANVIL_DEV_ADDRESS, blockTag: 'pending' });
  const balance = await local.chain.getBalance({ address: ANVIL_DEV_ADDRESS });
  const id = await approvedMovement(deps, usdcPlan(`fee-cap-${Date.now()}`), { asset: 'USDC', amount: '100', destination: { address: recipient } });
  await drain(deps);

  const s = await snapshot(db.pool, id);
  assert.equal(s.byKey.pay.node_state, 'FAILED');
  assert.equal(s.byKey.pay.error_code, 'SIGNER_POLICY_VIOLATION');
  assert.equal(deps.signRequests[0]!.expected_effect?.max_fee_per_gas_cap_wei, (500n * GWEI).toString(), 'the cap reached the expected effect');
  assert.equal(hostile.broadcasts.length, 0, 'nothing was sent');
  assert.equal(await local.chain.getTransactionCount({ address: ANVIL_DEV_ADDRESS, blockTag: 'pending' }), nonce, 'nothing mined');
  assert.equal(await local.chain.getBalance({ address: ANVIL_DEV_ADDRESS }), balance, 'no fee paid');
  assert.equal(await tokenBalance(local.chain, local.usdc, recipient), 0n);
  assert.deepEqual((await artifactsOfNodes(db.pool, [s.byKey.pay.id])).map((a) => a.artifact_type), ['prepared_action'], 'no signature');
  while ((await promoteAuditBatch(db.pool)) > 0);
  const refused = (await listAuditEvents(db.pool, { entity_type: 'movement_node', entity_id: s.byKey.pay.id })).events.filter((e) => e.action === 'signer.refused');
  assert.equal(refused.length, 1);
  assert.equal(refused[0]!.details.rule, 'fee_cap');
  assert.equal(refused[0]!.details.expected, (500n * GWEI).toString());
});

test('a node on a chain without a fee cap anywhere is refused (fee_cap_missing), nothing signed', async (t) => {
  const db = await scratchDatabase(t);
  const recipient = fresh();
  const hostile = await hostileExecutor(local, recipient);
  t.after(() => hostile.stop());
  const deps = hostileDeps(db.pool, local, hostile.url, {
    env: { FERRY_EVM_MAX_FEE_PER_GAS_CAP_WEI: '' },
    evm: {},
  });
  const plan = usdcPlan(`fee-cap-missing-${Date.now()}`);
  (plan.nodes[0] as { config: Record<string, unknown> }).config = { token: local.usdc.address, decimals: 6 };
  const id = await approvedMovement(deps, plan, { asset: 'USDC', amount: '100', destination: { address: recipient } });
  await drain(deps);
  const s = await snapshot(db.pool, id);
  assert.equal(s.byKey.pay.node_state, 'FAILED');
  assert.equal(s.byKey.pay.error_code, 'SIGNER_POLICY_VIOLATION');
  assert.match(s.byKey.pay.error_detail!, /no fee cap for chain 31337/);
  assert.equal(hostile.broadcasts.length, 0);
});

test('the fee a transfer paid (gasUsed x effectiveGasPrice) is recorded on its node as fee_paid_wei and shown in the node view', async (t) => {
  const db = await scratchDatabase(t);
  const base = runtimeDeps(db.pool);
  const executors = new ExecutorRegistry();
  const signers = new SignerRegistry();
  createEvmLane({ rpcUrl: local.anvil.url, signerPrivateKey: ANVIL_DEV_KEY, pollSeconds: 0 }, { executors, signers });
  const deps = { ...base, executors, signers };
  const to = fresh();
  const id = await approvedMovement(deps, nativeTransferPlan(`fee-paid-${Date.now()}`, { to, value_wei: '4242' }), {});
  await drain(deps);
  const node = (await snapshot(db.pool, id)).byKey.pay;
  assert.equal(node.node_state, 'COMPLETED', `${node.error_code}: ${node.error_detail}`);
  const receipt = await local.chain.getTransactionReceipt({ hash: node.provider_refs.tx_hash as Hex });
  const paid = receipt.gasUsed * receipt.effectiveGasPrice;
  assert.ok(paid > 0n);
  assert.equal(node.provider_refs.fee_paid_wei, paid.toString());
  assert.equal(nodeView((await getNode(db.pool, node.id))!).provider_refs.fee_paid_wei, paid.toString());
  assert.equal(await local.chain.getBalance({ address: to }), 4242n);
});

describe('a fee cap for every chain a signer signs for', () => {
  const chain = (over: Record<string, unknown> = {}) => ({ chain_id: 8453, rpc_url: 'http://127.0.0.1:1', ...over });
  const signer = { key: 'hot', kind: 'local_key', private_key_env: 'HOT_KEY', chains: [8453] };
  const parse = (evm: unknown, remote?: unknown) => parseConfigFile(JSON.stringify({ evm, ...(remote ? { remote } : {}) }));

  test('a chain a local signer signs for without a cap stops start, naming the setting', () => {
    const r = parse({ chains: [chain()], signers: [signer] });
    assert.equal(r.ok, false);
    assert.equal(!r.ok && r.reason, 'evm.chains[0].max_fee_per_gas_cap_wei: required: signer hot signs for chain 8453');
    const path = writeConfigFile({ chains: [{ chain_id: 8453, rpc_url: 'http://127.0.0.1:1', max_fee_per_gas_cap_wei: undefined }], signers: [signer] });
    assert.throws(
      () => loadConfig({ FERRY_CONFIG_FILE: path }),
      (e: unknown) => e instanceof ConfigError && e.variable === 'FERRY_CONFIG_FILE' && /evm\.chains\[0\]\.max_fee_per_gas_cap_wei: required/.test(e.message),
    );
    assert.ok(parse({ chains: [chain({ max_fee_per_gas_cap_wei: '100000000000' })], signers: [signer] }).ok);
    // A chain nobody signs for (watched, observed) may go without.
    assert.ok(parse({ chains: [chain()] }).ok);
  });

  test('a remote signer\'s chains need a cap, from evm.chains or evm.fee_caps; a fee_caps entry is validated', () => {
    const remote = { signers: [{ key: 'far', url: 'http://127.0.0.1:2', chains: [8453] }] };
    const r = parse({}, remote);
    assert.equal(!r.ok && r.reason, 'remote.signers[0].chains[0]: chain 8453 has no fee cap: set evm.chains[].max_fee_per_gas_cap_wei or an evm.fee_caps entry');
    assert.ok(parse({ fee_caps: [{ chain_id: 8453, max_fee_per_gas_cap_wei: '1000' }] }, remote).ok);
    assert.ok(parse({ chains: [chain({ max_fee_per_gas_cap_wei: '1000' })] }, remote).ok);
    const dup = parse({ chains: [chain({ max_fee_per_gas_cap_wei: '1000' })], fee_caps: [{ chain_id: 8453, max_fee_per_gas_cap_wei: '1000' }] });
    assert.match(!dup.ok ? dup.reason : '', /^evm\.fee_caps\[0\]\.chain_id: chain 8453 is listed in evm\.chains or twice here/);
    const bad = parse({ fee_caps: [{ chain_id: 8453, max_fee_per_gas_cap_wei: '1e9' }] });
    assert.match(!bad.ok ? bad.reason : '', /^evm\.fee_caps\[0\]\.max_fee_per_gas_cap_wei: a whole number of wei/);
    // Token decimals for a chain only listed for its cap (the remote executor's chain).
    assert.ok(parse({ fee_caps: [{ chain_id: 8453, max_fee_per_gas_cap_wei: '1000' }], tokens: [{ chain_id: 8453, symbol: 'USDC', address: '0x833589fcd6edb6e08f4c7c32d4f71b54bda02913', decimals: 6 }] }).ok);
  });

  test('the single chain of FERRY_EVM_RPC_URL needs FERRY_EVM_MAX_FEE_PER_GAS_CAP_WEI', () => {
    const env = { FERRY_EVM_RPC_URL: 'http://127.0.0.1:1', FERRY_EVM_SIGNER_KEY: ANVIL_DEV_KEY };
    assert.throws(() => loadConfig(env), (e: unknown) => e instanceof ConfigError && e.variable === 'FERRY_EVM_MAX_FEE_PER_GAS_CAP_WEI');
    assert.equal(loadConfig({ ...env, FERRY_EVM_MAX_FEE_PER_GAS_CAP_WEI: '30000000000' }).evmMaxFeePerGasCapWei, '30000000000');
    assert.throws(() => loadConfig({ ...env, FERRY_EVM_MAX_FEE_PER_GAS_CAP_WEI: '30 gwei' }), (e: unknown) => e instanceof ConfigError && e.variable === 'FERRY_EVM_MAX_FEE_PER_GAS_CAP_WEI');
  });

  test('the expected effect takes the chain\'s cap, else evm.fee_caps; FERRY_EVM_MAX_FEE_PER_GAS_CAP_WEI only for a chain the file does not list', () => {
    const node = { node_key: 'pay', executor_binding: { executor_key: ERC20_TRANSFER_EXECUTOR }, signer_binding: { signer_key: 'hot', chain_id: 8453 }, config: { token: '0x833589fcd6edb6e08f4c7c32d4f71b54bda02913', decimals: 6 } };
    const intent = { amount: '1', destination: { address: '0x1111111111111111111111111111111111111111' } };
    const capOf = (evm: unknown, fallbackFeeCapWei?: string) => {
      const r = deriveExpectedEffect({ plan: { nodes: [node] }, nodeKey: 'pay', intent, evm: ConfigFileSchema.parse({ evm }).evm, fallbackFeeCapWei });
      assert.ok(r.ok, !r.ok ? r.reason : '');
      return r.effect.max_fee_per_gas_cap_wei;
    };
    assert.equal(capOf({ chains: [chain({ max_fee_per_gas_cap_wei: '7' })] }, '9'), '7');
    assert.equal(capOf({ fee_caps: [{ chain_id: 8453, max_fee_per_gas_cap_wei: '8' }] }, '9'), '8');
    assert.equal(capOf({ chains: [chain()] }, '9'), undefined, 'a listed chain without a cap gets none (refused at signing), not the fallback');
    assert.equal(capOf({}, '9'), '9');
    assert.equal(capOf({}), undefined);
  });
});

test('the signer host applies its own configuration\'s cap: a request naming a higher cap is refused', async () => {
  // The signer host's signer, built as `ferry signer-host` builds it: from its own configuration.
  const path = writeConfigFile({
    chains: [{ chain_id: ANVIL_CHAIN_ID, rpc_url: 'http://127.0.0.1:1', max_fee_per_gas_cap_wei: (2n * GWEI).toString() }],
    signers: [{ key: 'hot', kind: 'local_key', private_key_env: 'HOT_KEY', chains: [ANVIL_CHAIN_ID] }],
  });
  const env = { FERRY_CONFIG_FILE: path, HOT_KEY: ANVIL_DEV_KEY };
  const registries = { executors: new ExecutorRegistry(), signers: new SignerRegistry() };
  await registerEvmLane(loadConfig(env), registries, { env, log, nonces: null });
  const token = 'signer-host-token-0123456789';
  const app = signerHostApp({ signer: registries.signers.get('hot'), token, verifier: requestVerifier(), log: log.child({ test: true }) });
  const to = '0x1111111111111111111111111111111111111111';
  const request = (maxFeePerGas: bigint): SignRequest => {
    const payload = serializeTransaction({ type: 'eip1559', chainId: ANVIL_CHAIN_ID, nonce: 0, to, value: 1000n, gas: 21_000n, maxFeePerGas, maxPriorityFeePerGas: 1n } as TransactionSerializable);
    return {
      protocol_version: '1.0',
      request_id: 'req-1',
      request_node_id: 'node-1',
      ...EVIDENCE,
      signing_intent: { action: 'evm_native_transfer', asset: 'ETH', amount: '1000', destination: to, max_fee_usd: null, chain_family: 'evm', allowed_payload_hash: payloadHash(payload) },
      payload_format: 'evm_raw_tx',
      payload,
      payload_hash: payloadHash(payload),
      metadata: {},
      executor_key: 'exec.evm.native_transfer',
      // The caller says the cap is 500 gwei; the host's own configuration says 2 gwei.
      expected_effect: { chain_id: ANVIL_CHAIN_ID, asset: 'native', to, amount_base_units: '1000', max_fee_per_gas_cap_wei: TEST_FEE_CAP_WEI },
    };
  };
  const post = (body: unknown) => {
    const text = JSON.stringify(body);
    return app.request('/sign', { method: 'POST', headers: signedHeaders('/sign', 'hot', text, token), body: text });
  };
  const refused = await post(request(3n * GWEI));
  assert.equal(refused.status, 422);
  const body = (await refused.json()) as { code: string; message: string };
  assert.equal(body.code, 'SIGNER_POLICY_VIOLATION');
  assert.match(body.message, /above the signer's own cap of 2000000000/);
  assert.equal((await post(request(2n * GWEI))).status, 200, 'within the host\'s cap it signs');
  // Without a cap in the request the host refuses too: its own cap never stands in for a missing one.
  const uncapped = request(1n * GWEI);
  delete (uncapped.expected_effect as { max_fee_per_gas_cap_wei?: string }).max_fee_per_gas_cap_wei;
  const missing = await post(uncapped);
  assert.match(((await missing.json()) as { message: string }).message, /names no fee cap/);
});
