import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import pino from 'pino';
import { createPublicClient, HttpRequestError, http, type Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { configuredRegistries } from '../src/actors/runtime.ts';
import { ConfigError, loadConfig } from '../src/config.ts';
import { createChainClient } from '../src/executors/evm/chains.ts';
import { EVM_ERC20_TRANSFER_KEY, EVM_NATIVE_TRANSFER_KEY, EvmNativeTransferExecutor } from '../src/executors/evm/index.ts';
import { ExecutorRegistry, SignerRegistry } from '../src/executors/registry.ts';
import { refreshRegistryHealth } from '../src/sweeps/executor-health.ts';
import { listExecutors } from '../src/persistence/registry.ts';
import { withTransaction } from '../src/persistence/db.ts';
import { createToken } from '../src/persistence/tokens.ts';
import { ANVIL_CHAIN_ID, startAnvil, type Anvil, TEST_FEE_CAP_WEI } from './helpers/anvil.ts';
import { scratchDatabase } from './helpers/db.ts';
import { configuredDeps, writeConfigFile } from './helpers/evm.ts';
import { api, listeningUrl, spawnFerry, stopChild } from './helpers/ferry-process.ts';
import { waitFor } from './helpers/wait.ts';
import { approvedMovement, drain, plan, snapshot } from './helpers/runtime.ts';
import { startKmsEmulator } from './emulators/kms.ts';
import { makeTemplateLive } from './helpers/templates.ts';

/**
 * Chains and wallets as configuration: the file's chains and signers become the lane's clients,
 * signers and executors; a node picks its chain by chain_id; a bad signer entry stops start
 * naming it; and an RPC URL (with an API key in it) never reaches a log line, an error, a health
 * row or an API answer.
 */

const SECOND_CHAIN_ID = 31338;
let one: Anvil;
let two: Anvil;

before(async () => {
  [one, two] = await Promise.all([startAnvil(), startAnvil({ chainId: SECOND_CHAIN_ID })]);
});
after(async () => {
  await Promise.all([one?.stop(), two?.stop()]);
});

const FAKE_KEY = 'sk_live_FAKEAPIKEY0123456789abcdef';
/** A dead loopback port (discard), with an API key in the path and another in the query. */
const LEAKY_URL = `http://127.0.0.1:9/v3/${FAKE_KEY}?apikey=QUERYKEY987654321`;
const SECRETS = [FAKE_KEY, 'QUERYKEY987654321'];

function quietLog() {
  const lines: string[] = [];
  return { log: pino({ level: 'info' }, { write: (s: string) => void lines.push(s) }), lines };
}

test('viem quotes the RPC URL in its errors; a chain client made by Ferry never does, and keeps the error class', async () => {
  const plain = createPublicClient({ transport: http(LEAKY_URL, { retryCount: 0, timeout: 2000 }) });
  const raw = await plain.getBlockNumber().catch((e: Error) => e);
  assert.ok(raw instanceof Error);
  assert.ok(`${raw.message}${raw.stack}`.includes(FAKE_KEY), 'without the wrapper the key leaks (the test can fail)');

  const ours = createChainClient(LEAKY_URL, { timeoutMs: 2000, label: 'chain 1 (main)' });
  const err = await ours.getBlockNumber().catch((e: Error) => e);
  assert.ok(err instanceof HttpRequestError, 'still an HttpRequestError: callers keep classifying it');
  const everything = JSON.stringify({ message: err.message, stack: err.stack, url: (err as HttpRequestError).url, details: (err as HttpRequestError).details, meta: (err as HttpRequestError).metaMessages, cause: String((err as Error).cause) });
  for (const s of SECRETS) assert.ok(!everything.includes(s), `no ${s} in the error`);
  assert.match(err.message, /\[rpc chain 1 \(main\)\]/);
});

test('the health sweep of an executor whose health() throws the RPC error stores it without the URL', async (t) => {
  const db = await scratchDatabase(t);
  const executors = new ExecutorRegistry();
  executors.register(new EvmNativeTransferExecutor({ rpcUrl: LEAKY_URL, rpcTimeoutMs: 1000, from: privateKeyToAccount(generatePrivateKey()).address }));
  await refreshRegistryHealth(db.pool, executors, new SignerRegistry());
  const [row] = await listExecutors(db.pool);
  assert.equal(row.health_state, 'down');
  const text = JSON.stringify(row.health_detail);
  assert.match(text, /HTTP request failed.*\[rpc endpoint\]/, 'viem\'s whole message, URL line included, but scrubbed');
  for (const s of SECRETS) assert.ok(!text.includes(s), `no ${s} in the health row`);
});

test('a local_key signer whose variable is missing or malformed stops start naming the signer and the variable, never the value', async (t) => {
  const db = await scratchDatabase(t);
  const file = writeConfigFile({
    chains: [{ chain_id: ANVIL_CHAIN_ID, rpc_url: one.url }],
    signers: [{ key: 'treasury_hot', kind: 'local_key', private_key_env: 'TREASURY_HOT_KEY', chains: [ANVIL_CHAIN_ID] }],
  });
  const build = (env: Record<string, string>) => {
    const full = { FERRY_CONFIG_FILE: file, ...env };
    return configuredRegistries(db.pool, loadConfig(full), { env: full, log: quietLog().log });
  };
  await assert.rejects(build({}), (e: Error) => e instanceof ConfigError && /evm\.signers\[0\] \(treasury_hot\).*TREASURY_HOT_KEY is not set/.test(e.message));
  const almost = `0x${'ab'.repeat(31)}zz`;
  await assert.rejects(build({ TREASURY_HOT_KEY: almost }), (e: Error) => {
    assert.ok(e instanceof ConfigError);
    assert.match(e.message, /treasury_hot.*TREASURY_HOT_KEY/);
    assert.ok(!e.message.includes('abab'), 'the value is never echoed');
    return true;
  });
  const ok = await build({ TREASURY_HOT_KEY: generatePrivateKey() });
  assert.ok(ok.signers.has('treasury_hot'));
  assert.ok(ok.executors.has(EVM_ERC20_TRANSFER_KEY));
});

test('aws_kms entries become signers with their KMS address; a KMS that cannot be read stops start; the legacy variables may not redefine a configured chain', async (t) => {
  const db = await scratchDatabase(t);
  const kms = await startKmsEmulator();
  t.after(() => kms.stop());
  const kmsEntry = (endpoint: string) => ({
    key: 'kms_hot',
    kind: 'aws_kms',
    kms: { key_id: kms.keyId, region: kms.region, endpoint, access_key_id_env: 'KMS_AK', secret_access_key_env: 'KMS_SK' },
    chains: [ANVIL_CHAIN_ID],
  });
  const file = writeConfigFile({ chains: [{ chain_id: ANVIL_CHAIN_ID, rpc_url: one.url }], signers: [kmsEntry(kms.url)] });
  const { log } = quietLog();
  const env = { FERRY_CONFIG_FILE: file, KMS_AK: kms.accessKeyId, KMS_SK: kms.secretAccessKey, AWS_EC2_METADATA_DISABLED: 'true' };
  const r = await configuredRegistries(db.pool, loadConfig(env), { env, log });
  assert.ok(r.signers.has('kms_hot'));
  assert.ok(r.executors.has(EVM_ERC20_TRANSFER_KEY));

  const deadFile = writeConfigFile({ chains: [{ chain_id: ANVIL_CHAIN_ID, rpc_url: one.url }], signers: [kmsEntry('http://127.0.0.1:9')] });
  const deadEnv = { ...env, FERRY_CONFIG_FILE: deadFile };
  await assert.rejects(configuredRegistries(db.pool, loadConfig(deadEnv), { env: deadEnv, log }), (e: Error) => {
    assert.match(e.message, /FERRY_CONFIG_FILE evm\.signers kms_hot: could not read the address of its KMS key/);
    assert.ok(!e.message.includes(kms.secretAccessKey));
    return true;
  });

  const legacy = { FERRY_CONFIG_FILE: file, FERRY_EVM_RPC_URL: one.url, FERRY_EVM_SIGNER_KEY: generatePrivateKey(), FERRY_EVM_MAX_FEE_PER_GAS_CAP_WEI: TEST_FEE_CAP_WEI };
  await assert.rejects(configuredRegistries(db.pool, loadConfig(legacy), { env: legacy, log }), /FERRY_EVM_RPC_URL.*31337.*FERRY_CONFIG_FILE/);
  const dead = { FERRY_EVM_RPC_URL: LEAKY_URL, FERRY_EVM_SIGNER_KEY: generatePrivateKey(), FERRY_EVM_MAX_FEE_PER_GAS_CAP_WEI: TEST_FEE_CAP_WEI };
  await assert.rejects(configuredRegistries(db.pool, loadConfig(dead), { env: dead, log }), (e: Error) => {
    assert.match(e.message, /FERRY_EVM_RPC_URL did not answer eth_chainId/);
    for (const s of SECRETS) assert.ok(!e.message.includes(s));
    return true;
  });
});

test('two chains at once: a node picks its chain by chain_id, a signer signs only for its chains, an ambiguous node is refused', async (t) => {
  const db = await scratchDatabase(t);
  const both = generatePrivateKey();
  const onlySecond = generatePrivateKey();
  const chainOne = createPublicClient({ transport: http(one.url) });
  const chainTwo = createPublicClient({ transport: http(two.url) });
  for (const k of [both, onlySecond]) {
    for (const a of [one, two]) await a.rpc('anvil_setBalance', [privateKeyToAccount(k).address, '0xde0b6b3a7640000']);
  }
  const deps = await configuredDeps(
    db.pool,
    {
      chains: [
        { chain_id: ANVIL_CHAIN_ID, name: 'one', rpc_url: one.url, poll_seconds: 0.001 },
        { chain_id: SECOND_CHAIN_ID, name: 'two', rpc_url: two.url, poll_seconds: 0.001 },
      ],
      signers: [
        { key: 'hot_both', kind: 'local_key', private_key_env: 'HOT_BOTH', chains: [ANVIL_CHAIN_ID, SECOND_CHAIN_ID] },
        { key: 'hot_two', kind: 'local_key', private_key_env: 'HOT_TWO', chains: [SECOND_CHAIN_ID] },
      ],
    },
    { HOT_BOTH: both, HOT_TWO: onlySecond },
  );
  const pay = (key: string, signer: string, config: Record<string, unknown>, binding: Record<string, unknown> = {}) =>
    plan(key, [
      { node_key: 'pay', node_kind: 'action', action_type: 'native', executor_binding: EVM_NATIVE_TRANSFER_KEY, signer_binding: { signer_key: signer, ...binding }, config },
    ]);
  const to: Address = privateKeyToAccount(generatePrivateKey()).address;
  const ids = {
    onTwo: await approvedMovement(deps, pay('on-two', 'hot_both', { to, value_wei: '222', chain_id: SECOND_CHAIN_ID }), {}),
    onOne: await approvedMovement(deps, pay('on-one', 'hot_both', { to, value_wei: '111' }, { chain_id: ANVIL_CHAIN_ID }), {}),
    secondOnly: await approvedMovement(deps, pay('two-only', 'hot_two', { to, value_wei: '1', chain_id: ANVIL_CHAIN_ID }), {}),
    ambiguous: await approvedMovement(deps, pay('ambiguous', 'hot_both', { to, value_wei: '1' }), {}),
    disagree: await approvedMovement(deps, pay('disagree', 'hot_both', { to, value_wei: '1', chain_id: SECOND_CHAIN_ID }, { chain_id: ANVIL_CHAIN_ID }), {}),
    nobody: await approvedMovement(deps, pay('nobody', 'hot_unknown', { to, value_wei: '1', chain_id: SECOND_CHAIN_ID }), {}),
  };
  await drain(deps);
  const node = async (id: string) => (await snapshot(db.pool, id)).byKey.pay;
  assert.equal((await node(ids.onTwo)).node_state, 'COMPLETED');
  assert.equal((await node(ids.onOne)).node_state, 'COMPLETED');
  assert.equal(await chainTwo.getBalance({ address: to }), 222n);
  assert.equal(await chainOne.getBalance({ address: to }), 111n);
  assert.equal((await node(ids.secondOnly)).error_code, 'EVM_SIGNER_CHAIN_NOT_ALLOWED');
  assert.equal((await node(ids.ambiguous)).error_code, 'EVM_CHAIN_REQUIRED');
  assert.equal((await node(ids.disagree)).error_code, 'EVM_CHAIN_MISMATCH');
  assert.equal((await node(ids.nobody)).error_code, 'EVM_SIGNER_NOT_CONFIGURED');
});

test('an RPC URL with an API key on a dead port: not in any log line, health row, error or API answer', async (t) => {
  const db = await scratchDatabase(t);
  const hot = generatePrivateKey();
  const file = writeConfigFile({
    chains: [
      { chain_id: 1, name: 'main', rpc_url: LEAKY_URL, rpc_timeout_ms: 1000 },
      { chain_id: ANVIL_CHAIN_ID, name: 'local', rpc_url: one.url },
    ],
    signers: [{ key: 'hot_1', kind: 'local_key', private_key_env: 'HOT_1_KEY', chains: [1, ANVIL_CHAIN_ID] }],
  });
  const ferry = spawnFerry({
    DATABASE_URL: db.url,
    FERRY_CONFIG_FILE: file,
    HOT_1_KEY: hot,
    FERRY_LOG_LEVEL: 'debug',
    FERRY_EXECUTOR_HEALTH_INTERVAL_SECONDS: '0.5',
    FERRY_NODE_DISPATCH_INTERVAL_SECONDS: '0.2',
    FERRY_NODE_RECOVERY_INTERVAL_SECONDS: '0.5',
  });
  t.after(() => stopChild(ferry, 'SIGKILL'));
  const base = await listeningUrl(ferry);
  const tokens = await withTransaction(db.pool, async (c) => ({
    requester: (await createToken(c, { name: 'req', role: 'requester' })).token,
    approver: (await createToken(c, { name: 'appr', role: 'approver' })).token,
    admin: (await createToken(c, { name: 'adm', role: 'admin' })).token,
  }));
  const template = {
    template_key: 'pay-main',
    nodes: [
      {
        node_key: 'pay',
        node_kind: 'action',
        action_type: 'erc20_transfer',
        executor_binding: EVM_ERC20_TRANSFER_KEY,
        signer_binding: 'hot_1',
        config: { chain_id: 1, token: '0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48', amount: '1' },
      },
    ],
    edges: [],
  };
  assert.equal(await makeTemplateLive(base, db.pool, template, { proposer: tokens.admin, approver: tokens.approver }), 1);
  const created = await api(base, tokens.requester, 'POST', '/v3/movements', {
    template_key: 'pay-main',
    intent: { asset: 'USDC', amount: '1', destination: { address: privateKeyToAccount(generatePrivateKey()).address } },
  });
  assert.equal(created.status, 201, created.text);
  const id = created.body.movement.id;
  const approved = await api(base, tokens.approver, 'POST', `/v3/movements/${id}/approve`, { compiled_plan_hash: created.body.movement.compiled_plan_hash });
  assert.equal(approved.status, 200, approved.text);

  // The dead chain's errors reach the places they are reported: the executor health rows and the node.
  const executors = await waitFor('a health row saying the dead chain is down', async () => {
    const r = await api(base, tokens.admin, 'GET', '/v3/executors');
    const row = r.body?.executors?.find((e: { executor_key: string }) => e.executor_key === EVM_ERC20_TRANSFER_KEY);
    return row?.health_state === 'down' ? r : null;
  });
  assert.match(executors.text, /"chain_id":1[^}]*|fetch failed/, 'the dead chain\'s error is in the health row');
  const movement = await waitFor('the node to report the RPC failure', async () => {
    const r = await api(base, tokens.admin, 'GET', `/v3/movements/${id}`);
    return r.text.includes('EVM_RPC_UNAVAILABLE') ? r : null;
  });
  const transitions = await api(base, tokens.admin, 'GET', `/v3/movements/${id}/transitions`);
  const signers = await api(base, tokens.admin, 'GET', '/v3/signers');
  const rows = await db.pool.query(
    `SELECT (SELECT coalesce(json_agg(e), '[]') FROM executor_registry e)::text AS executors,
            (SELECT coalesce(json_agg(t), '[]') FROM transitions t)::text AS transitions,
            (SELECT coalesce(json_agg(n), '[]') FROM request_nodes n)::text AS nodes,
            (SELECT coalesce(json_agg(h), '[]') FROM worker_heartbeats h)::text AS heartbeats,
            (SELECT coalesce(json_agg(a), '[]') FROM audit_outbox a)::text AS audit`,
  );
  await stopChild(ferry);
  const everything = [ferry.output(), executors.text, movement.text, transitions.text, signers.text, JSON.stringify(rows.rows)].join('\n');
  for (const s of SECRETS) assert.ok(!everything.includes(s), `${s} leaked`);
  assert.ok(!everything.includes('127.0.0.1:9/v3'), 'nor the URL\'s path');
  assert.ok(!everything.includes(hot.slice(2)), 'nor the key');
});

test('npm start with a signer whose key variable is unset exits 1 with one line naming the signer and the variable', async (t) => {
  const db = await scratchDatabase(t);
  const file = writeConfigFile({
    chains: [{ chain_id: ANVIL_CHAIN_ID, rpc_url: one.url }],
    signers: [{ key: 'ops_hot', kind: 'local_key', private_key_env: 'OPS_HOT_KEY', chains: [ANVIL_CHAIN_ID] }],
  });
  const ferry = spawnFerry({ DATABASE_URL: db.url, FERRY_CONFIG_FILE: file });
  t.after(() => stopChild(ferry, 'SIGKILL'));
  const { code } = await ferry.exit;
  assert.equal(code, 1);
  assert.match(ferry.output(), /ferry: Invalid configuration: FERRY_CONFIG_FILE evm\.signers\[0\] \(ops_hot\): environment variable OPS_HOT_KEY is not set/);
});
