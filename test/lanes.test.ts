import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, existsSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { test, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { dispatchOne } from '../src/actors/dispatcher.ts';
import { recoveryArms } from '../src/actors/recovery.ts';
import { configuredRegistries } from '../src/actors/runtime.ts';
import { sweepDefinitionsOf, sweepDefinitions } from '../src/sweeps/sweeps.ts';
import { createBalanceFetchers, EvmChainClients } from '../src/balances/fetchers.ts';
import { ConfigError, configVariables, laneVariables, loadConfig } from '../src/config.ts';
import { configFileSchema, parseConfigFile } from '../src/config-file.ts';
import { FatalMovementError, TemporaryMovementError } from '../src/executors/errors.ts';
import type { LaneDefinition } from '../src/executors/lane.ts';
import { LANE_INDEX_MARKS, laneIndex, laneNamed, laneOfExecutor, lanes, withoutLanes } from '../src/executors/lanes.ts';
import { LocalExecutorAdapter } from '../src/executors/local-adapter.ts';
import type { ExecutionContext } from '../src/executors/protocol.ts';
import { demoTemplateWanted } from '../src/demo/template.ts';
import { executorView } from '../src/http/views.ts';
import { log } from '../src/log.ts';
import { createPool } from '../src/persistence/db.ts';
import { scratchDatabase } from './helpers/db.ts';
import { approvedMovement, plan, runtimeDeps, snapshot } from './helpers/runtime.ts';

/**
 * A lane is a plug-in (docs/lanes.md): the list in src/executors/lanes.ts is the only place Ferry
 * learns about lanes, so a list without a lane has none of its executors, variables, file sections,
 * sweeps, balance fetchers or docs links.
 */

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const names = (list: readonly LaneDefinition[]) => list.map((l) => l.name);

function configFile(text: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'ferry-lanes-'));
  const path = join(dir, 'ferry.yaml');
  writeFileSync(path, text);
  return path;
}

const CEX_FILE = `
cex:
  accounts:
    - key: main
      exchange: binance
      base_url: http://127.0.0.1:9
      api_key_env: LANES_TEST_CEX_KEY
      api_secret_env: LANES_TEST_CEX_SECRET
`;

test('the list names each lane folder once, in an order where a lane comes after those it requires', () => {
  const folders = readdirSync(join(root, 'src/executors'), { withFileTypes: true })
    .filter((e) => e.isDirectory() && existsSync(join(root, 'src/executors', e.name, 'lane.ts')))
    .map((e) => e.name)
    .sort();
  assert.deepEqual([...names(lanes)].sort(), folders, 'every folder with a lane.ts is in the list, and nothing else');
  assert.deepEqual(names(lanes), ['sim', 'evm', 'cex', 'cctp', 'hyperliquid', 'usdt0', 'ccip', 'gateway']);
  lanes.forEach((lane, i) => {
    for (const r of lane.requires ?? []) assert.ok(names(lanes.slice(0, i)).includes(r), `${lane.name} requires ${r}, listed before it`);
    assert.ok(existsSync(join(root, lane.docs.split('#')[0]!)), `${lane.name}'s docs page ${lane.docs} exists`);
  });
  // A lane whose requirement is removed goes with it.
  assert.deepEqual(names(withoutLanes(['evm'])), ['sim', 'cex']);
  assert.deepEqual(names(withoutLanes(['cex'])), ['sim', 'evm', 'cctp', 'hyperliquid', 'usdt0', 'ccip', 'gateway']);
  assert.deepEqual(names(withoutLanes(['hyperliquid'])), ['sim', 'evm', 'cex', 'cctp', 'usdt0', 'ccip', 'gateway']);
  assert.deepEqual(names(withoutLanes(['usdt0'])), ['sim', 'evm', 'cex', 'cctp', 'hyperliquid', 'ccip', 'gateway']);
  assert.deepEqual(names(withoutLanes(['ccip'])), ['sim', 'evm', 'cex', 'cctp', 'hyperliquid', 'usdt0', 'gateway']);
  assert.deepEqual(names(withoutLanes(['gateway'])), ['sim', 'evm', 'cex', 'cctp', 'hyperliquid', 'usdt0', 'ccip']);
});

test("removing cctp removes its section and the field it owns in the EVM lane's chain entries", () => {
  const text = `
evm:
  chains:
    - chain_id: 31337
      rpc_url: http://127.0.0.1:9
      cctp:
        domain: 0
        token_messenger: "0x0000000000000000000000000000000000000001"
        message_transmitter: "0x0000000000000000000000000000000000000002"
`;
  const list = withoutLanes(['cctp']);
  assert.equal(parseConfigFile(text).ok, true);
  const refused = parseConfigFile(text, configFileSchema(list));
  assert.equal(refused.ok, false);
  assert.match((refused as { reason: string }).reason, /^evm\.chains\[0\]\.cctp: belongs to the cctp lane/);
  assert.equal(parseConfigFile(text.replace(/\n      cctp:[\s\S]*$/, '\n'), configFileSchema(list)).ok, true);
  assert.equal(parseConfigFile('cctp:\n  attestation_url: http://127.0.0.1:9\n', configFileSchema(list)).ok, false, 'its section is unknown');
});

/**
 * What removing a lane that requires the EVM lane removes: its file section (an unknown entry
 * without it), its executors from the registries, its docs link and its template; and without the
 * EVM lane it is not listed at all. `text` is a configuration file whose last section is the lane's.
 * Returns the configuration with the lane, for a test's own checks.
 */
async function assertRemovable(t: TestContext, lane: string, text: string, template?: string): Promise<ReturnType<typeof loadConfig>> {
  assert.equal(parseConfigFile(text).ok, true);
  assert.equal(parseConfigFile(text, configFileSchema(withoutLanes([lane]))).ok, false, 'its section is an unknown entry without the lane');
  assert.ok(!names(withoutLanes(['evm'])).includes(lane));
  const db = await scratchDatabase(t as never);
  const providerPool = createPool((db.pool as unknown as { options: { connectionString: string } }).options.connectionString, 2, 'ferry-lanes-test', { allowExitOnIdle: true });
  t.after(() => providerPool.end());
  const config = loadConfig({ FERRY_CONFIG_FILE: configFile(text) });
  const full = await configuredRegistries(providerPool, config, { env: {}, log });
  for (const key of laneNamed(lane)!.executorKeys) {
    assert.ok(full.executors.has(key), `${key} with the ${lane} lane`);
    assert.equal(full.executors.get(key as never).lane, lane);
  }
  const list = withoutLanes([lane]);
  const section = text.lastIndexOf(`\n${lane}:`);
  assert.ok(section > 0, `the file's last section is ${lane}'s`);
  const without = await configuredRegistries(providerPool, loadConfig({ FERRY_CONFIG_FILE: configFile(text.slice(0, section + 1)) }, list), { env: {}, log, lanes: list });
  for (const key of laneNamed(lane)!.executorKeys) assert.ok(!without.executors.has(key), `no ${key} without the lane`);
  assert.ok(!laneIndex(list).includes(`docs/${lane}-lane.md`));
  if (template) assert.ok(!list.flatMap((l) => l.templates.map((x) => x.key)).includes(template), 'nor its template');
  return config;
}

test('removing hyperliquid removes its section and its executors; without the EVM lane it is not listed either', async (t) => {
  const text = `
evm:
  chains:
    - chain_id: 31337
      rpc_url: http://127.0.0.1:9
      max_fee_per_gas_cap_wei: "1000"
  tokens:
    - chain_id: 31337
      symbol: USDC
      address: "0x0000000000000000000000000000000000000001"
      decimals: 6
hyperliquid:
  chain_id: 31337
  bridge: "0x2df1c51e09aecf9cacb7bc98cb1742757f163df7"
  info_url: http://127.0.0.1:9/info
`;
  await assertRemovable(t, 'hyperliquid', text);
});

test('removing usdt0 removes its section and its executors; without the EVM lane it is not listed either', async (t) => {
  const text = `
evm:
  chains:
    - chain_id: 31337
      rpc_url: http://127.0.0.1:9
      max_fee_per_gas_cap_wei: "1000"
    - chain_id: 31338
      rpc_url: http://127.0.0.1:9
      max_fee_per_gas_cap_wei: "1000"
  tokens:
    - chain_id: 31337
      symbol: USDT0
      address: "0x0000000000000000000000000000000000000001"
      decimals: 6
    - chain_id: 31338
      symbol: USDT0
      address: "0x0000000000000000000000000000000000000002"
      decimals: 6
usdt0:
  deployments:
    - chain_id: 31337
      eid: 30101
      oft: "0x0000000000000000000000000000000000000003"
    - chain_id: 31338
      eid: 30110
      oft: "0x0000000000000000000000000000000000000004"
`;
  await assertRemovable(t, 'usdt0', text, 'usdt0_send');
});

test('removing ccip removes its section, its executors and its template; without the EVM lane it is not listed either', async (t) => {
  const text = `
evm:
  chains:
    - chain_id: 31337
      rpc_url: http://127.0.0.1:9
      max_fee_per_gas_cap_wei: "1000"
    - chain_id: 31338
      rpc_url: http://127.0.0.1:9
      max_fee_per_gas_cap_wei: "1000"
  tokens:
    - chain_id: 31337
      symbol: USDC
      address: "0x0000000000000000000000000000000000000001"
      decimals: 6
    - chain_id: 31338
      symbol: USDC
      address: "0x0000000000000000000000000000000000000002"
      decimals: 6
ccip:
  tokens: [USDC]
  chains:
    - chain_id: 31337
      selector: "5009297550715157269"
      router: "0x0000000000000000000000000000000000000003"
    - chain_id: 31338
      selector: "4949039107694359620"
      router: "0x0000000000000000000000000000000000000004"
      off_ramp: "0x0000000000000000000000000000000000000005"
`;
  await assertRemovable(t, 'ccip', text, 'ccip_send');
  assert.ok(!withoutLanes(['ccip']).flatMap((l) => l.templates.map((x) => x.key)).includes('ccip_send_link'), 'nor its LINK-fee template');
});

test('removing gateway removes its section, its executors, its baselines and its template; without the EVM lane it is not listed either', async (t) => {
  const text = `
evm:
  chains:
    - chain_id: 31337
      rpc_url: http://127.0.0.1:9
      max_fee_per_gas_cap_wei: "1000"
    - chain_id: 31338
      rpc_url: http://127.0.0.1:9
      max_fee_per_gas_cap_wei: "1000"
  tokens:
    - chain_id: 31337
      symbol: USDC
      address: "0x0000000000000000000000000000000000000001"
      decimals: 6
    - chain_id: 31338
      symbol: USDC
      address: "0x0000000000000000000000000000000000000002"
      decimals: 6
gateway:
  api_url: http://127.0.0.1:9
  chains:
    - chain_id: 31337
      domain: 0
      wallet: "0x0000000000000000000000000000000000000003"
      minter: "0x0000000000000000000000000000000000000004"
    - chain_id: 31338
      domain: 6
      wallet: "0x0000000000000000000000000000000000000003"
      minter: "0x0000000000000000000000000000000000000004"
`;
  assert.equal(parseConfigFile(text.replace('domain: 6', 'domain: 0')).ok, false, 'a domain listed twice is refused');
  const config = await assertRemovable(t, 'gateway', text, 'gateway_transfer');
  const baselines = laneNamed('gateway')!.registryBaselines!(config.file as never);
  assert.deepEqual(baselines.map((b) => b.subject), ['gateway.chains[31337].wallet', 'gateway.chains[31337].minter', 'gateway.chains[31338].wallet', 'gateway.chains[31338].minter']);
});

test('removing cex from the list removes its config section: a file with one is refused, and nothing reads it', () => {
  const list = withoutLanes(['cex']);
  const path = configFile(CEX_FILE);
  const all = loadConfig({ FERRY_CONFIG_FILE: path });
  assert.equal(all.file.cex.accounts[0]!.key, 'main');
  assert.throws(
    () => loadConfig({ FERRY_CONFIG_FILE: path }, list),
    (err: unknown) => err instanceof ConfigError && err.variable === 'FERRY_CONFIG_FILE' && /cex/.test(err.message),
    'a section of a lane not in the list is an unknown entry',
  );
  const without = loadConfig({}, list);
  assert.ok(!('cex' in without.file), 'no cex section in the config object');
  assert.ok('evm' in without.file && 'sim' in without.file);
  assert.deepEqual(Object.keys(configFileSchema(list).shape).sort(), ['ccip', 'cctp', 'evm', 'gateway', 'hyperliquid', 'price_feeds', 'remote', 'sim', 'usdt0']);
  assert.deepEqual(Object.keys(configFileSchema(lanes).shape).sort(), ['ccip', 'cctp', 'cex', 'evm', 'gateway', 'hyperliquid', 'price_feeds', 'remote', 'sim', 'usdt0']);
});

test("removing evm removes its variables and file section; the loader's own checks then read no evm section", () => {
  const list = withoutLanes(['evm']);
  const evmVariables = laneVariables([laneNamed('evm')!]);
  assert.ok(evmVariables.includes('FERRY_EVM_RPC_URL') && evmVariables.includes('FERRY_EVM_NONCE_REAPER_ENABLED'));
  for (const v of evmVariables) assert.ok(configVariables.includes(v), `${v} is part of the one config object`);
  // A bad value of an EVM variable stops start with the lane, and is not a variable without it.
  assert.throws(() => loadConfig({ FERRY_EVM_CONFIRMATIONS: 'many' }), (err: unknown) => err instanceof ConfigError && err.variable === 'FERRY_EVM_CONFIRMATIONS');
  const config = loadConfig({ FERRY_EVM_CONFIRMATIONS: 'many', FERRY_EVM_RPC_URL: 'http://127.0.0.1:9', FERRY_EVM_SIGNER_KEY: `0x${'1'.repeat(64)}` }, list);
  assert.equal((config as unknown as Record<string, unknown>).evmConfirmations, undefined);
  assert.ok(!('evm' in config.file) && !('cctp' in config.file));
  // A remote signer's chains need a fee cap from the evm section: without the lane there is none, and
  // the check says so instead of reading a section that is not there.
  const remote = 'remote:\n  signers:\n    - key: far\n      url: http://127.0.0.1:9\n      address: "0x000000000000000000000000000000000000dEaD"\n      chains: [1]\n';
  const refused = parseConfigFile(remote, configFileSchema(list));
  assert.equal(refused.ok, false);
  assert.match((refused as { reason: string }).reason, /^remote\.signers\[0\]\.chains\[0\]: chain 1 has no fee cap/);
  assert.equal(parseConfigFile('remote:\n  executors:\n    - key: exec.far\n      url: http://127.0.0.1:9\n', configFileSchema(list)).ok, true);
});

test('removing a lane removes its executors from the registries; its register() is never called', async (t) => {
  const db = await scratchDatabase(t as never);
  const providerPool = createPool((db.pool as unknown as { options: { connectionString: string } }).options.connectionString, 2, 'ferry-lanes-test', { allowExitOnIdle: true });
  t.after(() => providerPool.end());
  const config = loadConfig({ FERRY_CONFIG_FILE: configFile(CEX_FILE) });
  const env = { LANES_TEST_CEX_KEY: 'key', LANES_TEST_CEX_SECRET: 'secret' };
  const full = await configuredRegistries(providerPool, config, { env, log });
  for (const key of laneNamed('cex')!.executorKeys) assert.ok(full.executors.has(key), `${key} with the cex lane`);
  assert.ok('cex' in full.lanes);
  // Without the cex lane its accounts are never looked at: their key variables may be unset.
  const without = await configuredRegistries(providerPool, config, { env: {}, log, lanes: withoutLanes(['cex']) });
  for (const key of laneNamed('cex')!.executorKeys) assert.ok(!without.executors.has(key), `no ${key} without the cex lane`);
  assert.ok(!('cex' in without.lanes));
  assert.deepEqual(without.executors.keys(), full.executors.keys().filter((k) => laneOfExecutor(k)?.name !== 'cex'));
  // With the lane, the same unset variables stop start naming the variable.
  await assert.rejects(configuredRegistries(providerPool, config, { env: {}, log }), (err: unknown) => err instanceof ConfigError && /LANES_TEST_CEX_KEY/.test(err.message));
  // Each executor a lane registers is one of its declared keys, with the lane's name.
  for (const e of full.executors.all()) {
    const lane = laneOfExecutor(e.executorKey);
    assert.ok(lane, `${e.executorKey} belongs to a listed lane`);
    assert.equal(e.lane, lane.name);
  }
});

test("removing a lane removes its templates: the demo is the simulation lane's", () => {
  assert.equal(demoTemplateWanted({ demoTemplate: true }, 'external'), true);
  assert.equal(demoTemplateWanted({ demoTemplate: undefined }, 'embedded', withoutLanes(['cex'])), true);
  assert.equal(demoTemplateWanted({ demoTemplate: true }, 'embedded', withoutLanes(['sim'])), false);
  const keys = lanes.flatMap((l) => l.templates.map((t) => t.key));
  assert.equal(new Set(keys).size, keys.length, 'a template key is one lane\'s');
});

test('removing a lane removes its recovery arm', () => {
  assert.deepEqual(recoveryArms(8).map((a) => a.lanes), [['cctp'], ['evm'], ['cex'], null]);
  assert.deepEqual(recoveryArms(9, withoutLanes(['cex'])).map((a) => [a.lanes, a.limit]), [[['cctp'], 3], [['evm'], 3], [null, 3]]);
});

test('removing a lane removes its sweeps and balance fetchers', () => {
  const all = sweepDefinitions.map((d) => d.name);
  assert.ok(all.includes('evm_nonce_reaper'));
  assert.deepEqual(sweepDefinitionsOf(withoutLanes(['cex'])).map((d) => d.name), all, 'the cex lane has no sweep');
  const withoutEvm = sweepDefinitionsOf(withoutLanes(['evm'])).map((d) => d.name);
  // Without the EVM lane the CCIP lane goes too, and its drift sweep with it (its reaper is a core worker, test/ccip-core-worker.test.ts).
  assert.deepEqual(withoutEvm, all.filter((n) => n !== 'evm_nonce_reaper' && n !== 'ccip_drift'));
  assert.deepEqual(sweepDefinitionsOf(withoutLanes(['ccip'])).map((d) => d.name), all.filter((n) => n !== 'ccip_drift'));
  // The reaper's settings are its lane's variables.
  const reaper = sweepDefinitions.find((d) => d.name === 'evm_nonce_reaper')!;
  assert.deepEqual(reaper.settings(loadConfig({ FERRY_EVM_NONCE_REAPER_INTERVAL_SECONDS: '7', FERRY_EVM_NONCE_REAPER_ENABLED: 'false' })), { enabled: false, intervalSeconds: 7, batchSize: 20, maxRunMs: 20_000 });

  const clients = new EvmChainClients();
  assert.deepEqual(createBalanceFetchers(clients, lanes).kinds().sort(), ['erc20', 'evm_native', 'gateway', 'sim']);
  assert.deepEqual(createBalanceFetchers(clients, withoutLanes(['gateway'])).kinds().sort(), ['erc20', 'evm_native', 'sim']);
  assert.deepEqual(createBalanceFetchers(clients, withoutLanes(['evm'])).kinds(), ['sim']);
});

test('removing the evm lane removes cctp, hyperliquid and usdt0 too (they require it): sections, executors, sweeps, baselines, templates, docs links', async (t) => {
  const dependents = ['cctp', 'hyperliquid', 'usdt0'];
  // The dependency is the lanes' own declaration (`requires`), not a list kept elsewhere.
  for (const name of dependents) assert.deepEqual(laneNamed(name)!.requires, ['evm'], `${name} requires evm`);
  const list = withoutLanes(['evm']);
  assert.deepEqual(names(list), ['sim', 'cex']);
  const gone = ['evm', ...dependents];
  const text = `
evm:
  chains:
    - chain_id: 31337
      rpc_url: http://127.0.0.1:9
      max_fee_per_gas_cap_wei: "1000"
      cctp:
        domain: 0
        token_messenger: "0x0000000000000000000000000000000000000001"
        message_transmitter: "0x0000000000000000000000000000000000000002"
    - chain_id: 31338
      rpc_url: http://127.0.0.1:9
      max_fee_per_gas_cap_wei: "1000"
  tokens:
    - chain_id: 31337
      symbol: USDC
      address: "0x0000000000000000000000000000000000000003"
      decimals: 6
    - chain_id: 31337
      symbol: USDT0
      address: "0x0000000000000000000000000000000000000004"
      decimals: 6
    - chain_id: 31338
      symbol: USDT0
      address: "0x0000000000000000000000000000000000000005"
      decimals: 6
hyperliquid:
  chain_id: 31337
  bridge: "0x2df1c51e09aecf9cacb7bc98cb1742757f163df7"
  info_url: http://127.0.0.1:9/info
usdt0:
  deployments:
    - chain_id: 31337
      eid: 30101
      oft: "0x0000000000000000000000000000000000000006"
    - chain_id: 31338
      eid: 30110
      oft: "0x0000000000000000000000000000000000000007"
`;
  // Config: every one of their sections is an unknown entry without them.
  assert.equal(parseConfigFile(text).ok, true);
  for (const section of gone) assert.ok(!(section in configFileSchema(list).shape), `no ${section} section`);
  for (const section of ['hyperliquid', 'usdt0']) {
    const only = text.slice(text.indexOf(`${section}:`)).split(/\n(?=[a-z])/)[0]!;
    assert.equal(parseConfigFile(`${only}\n`, configFileSchema(list)).ok, false, `a ${section} section is refused`);
  }
  assert.equal(parseConfigFile(text, configFileSchema(list)).ok, false);
  // Executors: with the full list all four lanes register theirs; without evm, none of them.
  const db = await scratchDatabase(t as never);
  const providerPool = createPool((db.pool as unknown as { options: { connectionString: string } }).options.connectionString, 2, 'ferry-lanes-test', { allowExitOnIdle: true });
  t.after(() => providerPool.end());
  const full = await configuredRegistries(providerPool, loadConfig({ FERRY_CONFIG_FILE: configFile(text) }), { env: {}, log });
  const without = await configuredRegistries(providerPool, loadConfig({}, list), { env: {}, log, lanes: list });
  for (const name of gone) {
    const keys = laneNamed(name)!.executorKeys;
    if (name !== 'evm') assert.ok(keys.some((k) => full.executors.has(k)), `${name} registers executors with the full list`);
    for (const key of keys) assert.ok(!without.executors.has(key), `no ${key} without the evm lane`);
    assert.ok(!(name in without.lanes));
  }
  // Sweeps, registry baselines, templates, docs links.
  assert.ok(!sweepDefinitionsOf(list).some((d) => d.name === 'evm_nonce_reaper'));
  const file = loadConfig({ FERRY_CONFIG_FILE: configFile(text) }).file as unknown as Record<string, unknown>;
  const baselineLanes = (l: readonly LaneDefinition[]) => [...new Set(l.flatMap((lane) => (lane.registryBaselines?.(file).length ? [lane.name] : [])))];
  assert.deepEqual(baselineLanes(lanes), ['evm', 'cctp', 'hyperliquid', 'usdt0']);
  assert.deepEqual(baselineLanes(list), []);
  const templates = list.flatMap((l) => l.templates.map((x) => x.key));
  for (const key of ['usdc.transfer', 'cctp_bridge', 'hyperliquid_topup', 'usdt0_send']) assert.ok(!templates.includes(key), `no ${key} template`);
  const index = laneIndex(list);
  for (const name of gone) assert.ok(!index.includes(laneNamed(name)!.docs), `no ${name} docs link`);
});

test('removing a lane removes its docs link from the index; the README holds the index of the list', () => {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const [start, end] = LANE_INDEX_MARKS;
  const table = readme.slice(readme.indexOf(start) + start.length, readme.indexOf(end)).trim();
  assert.equal(table, laneIndex(lanes), 'README.md, "Lanes": render laneIndex() into it');
  for (const lane of lanes) assert.ok(table.includes(`](${lane.docs})`), `${lane.name}'s docs link`);
  assert.ok(!laneIndex(withoutLanes(['cex'])).includes('docs/cex-lane.md'));
  assert.ok(laneIndex(withoutLanes(['cex'])).includes('docs/evm-lane.md'));
  assert.ok(readme.includes('[docs/lanes.md](docs/lanes.md)'), 'the README links docs/lanes.md');
  // GET /v3/executors: each executor's docs page comes from the list.
  const row = { executor_key: 'exec.cex.withdrawal_action', lane: 'cex', status: 'active', health_state: 'ok', health_detail: {}, last_health_checked_at: null, created_at: new Date(), updated_at: new Date() };
  assert.equal(executorView(row as never).docs, 'docs/cex-lane.md');
  assert.equal(executorView({ ...row, lane: 'elsewhere' } as never).docs, null);
});

test("a lane module's static imports never reach the configuration (the config loader imports the list)", () => {
  const seen = new Set<string>();
  const walk = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    const src = readFileSync(file, 'utf8');
    for (const m of src.matchAll(/^(?:import|export)\s+(?!type\b)(?:[^'";]*?from\s+)?['"](\.[^'"]+)['"]/gm)) {
      const target = resolve(dirname(file), m[1]!);
      if (existsSync(target)) walk(target);
    }
  };
  walk(join(root, 'src/executors/lanes.ts'));
  const reached = [...seen].map((f) => relative(root, f));
  for (const f of ['src/config.ts', 'src/config-file.ts', 'src/log.ts']) assert.ok(!reached.includes(f), `the lane list reaches ${f}: ${reached.join(', ')}`);
});

// --- pre_submit_check (seed 003): a test lane plugged in through the list.

/** A test lane whose one executor's pre-submit check does what its node's config says, and records the node's state when called. */
function preSubmitLane(pool: import('../src/persistence/db.ts').Pool, seen: { states: string[]; submits: string[] }): LaneDefinition {
  const executorKey = 'exec.lanes_test.checked';
  return {
    name: 'lanes_test',
    summary: 'a test lane',
    docs: 'docs/lanes.md',
    env: {},
    fileSections: { lanes_test: z.object({ on: z.boolean().default(true) }).strict().default({ on: true }) },
    executorKeys: [executorKey],
    signerKeys: [],
    observeIntervals: [],
    sweeps: [],
    templates: [],
    register(ctx) {
      ctx.executors.register(
        new LocalExecutorAdapter({
          executorKey,
          lane: 'lanes_test',
          handler: {
            prepare: async (c: ExecutionContext) => ({
              next_state: 'SUBMITTING',
              prepared_action: { prepared_action_id: `p-${c.idempotency_key}`, action_type: 'test', payload_format: 'json', payload: '{}', payload_hash: `sha256:${'0'.repeat(64)}`, signing_required: false },
            }),
            preSubmitCheck: async (c: ExecutionContext) => {
              const { rows } = await pool.query('SELECT node_state FROM request_nodes WHERE id = $1', [c.request_node_id]);
              seen.states.push(rows[0].node_state);
              const check = (c.node_config as { check?: string }).check;
              if (check === 'temporary') throw new TemporaryMovementError('LANES_TEST_BUSY', 'the route is busy');
              if (check === 'fatal') throw new FatalMovementError('LANES_TEST_CLOSED', 'the route is closed');
              if (check === 'unexpected') throw new Error('the check broke');
            },
            submit: async (c: ExecutionContext) => {
              seen.submits.push(c.idempotency_key!);
              return { next_state: 'COMPLETED' };
            },
          },
        }),
      );
      return { registered: true };
    },
  };
}

test('pre_submit_check: awaited after the node is SUBMITTING, right before submit(); temporary retries the node, any other error fails it', async (t) => {
  const db = await scratchDatabase(t as never);
  const deps = runtimeDeps(db.pool);
  const seen = { states: [] as string[], submits: [] as string[] };
  const list = [...lanes, preSubmitLane(db.pool, seen)];
  const providerPool = createPool((db.pool as unknown as { options: { connectionString: string } }).options.connectionString, 2, 'ferry-lanes-test', { allowExitOnIdle: true });
  t.after(() => providerPool.end());
  const config = loadConfig({ FERRY_DATA_DIR: '.ferry/test-runtime' }, list);
  assert.deepEqual((config.file as unknown as Record<string, unknown>).lanes_test, { on: true }, "the test lane's section is part of the config");
  const registries = await configuredRegistries(providerPool, config, { env: {}, log, lanes: list });
  deps.executors = registries.executors;
  const node = (check: string) => ({ node_key: 'a', node_kind: 'action', action_type: 'test', executor_binding: 'exec.lanes_test.checked', config: { check } });

  const ids: Record<string, string> = {};
  for (const check of ['pass', 'temporary', 'fatal', 'unexpected']) {
    ids[check] = await approvedMovement(deps, plan(`lanes-psc-${check}`, [node(check)]));
    assert.equal(await dispatchOne(deps), true);
  }
  assert.deepEqual(seen.states, ['SUBMITTING', 'SUBMITTING', 'SUBMITTING', 'SUBMITTING'], 'the check runs with the node committed SUBMITTING');
  const state = async (check: string) => (await snapshot(db.pool, ids[check]!)).byKey.a;
  assert.equal((await state('pass')).node_state, 'COMPLETED');
  const temporary = await state('temporary');
  assert.equal(temporary.node_state, 'READY');
  assert.equal(temporary.error_code, 'PRE_SUBMIT_CHECK_TEMPORARY_ERROR');
  const fatal = await state('fatal');
  assert.equal(fatal.node_state, 'FAILED');
  assert.equal(fatal.error_code, 'PRE_SUBMIT_CHECK_FATAL_ERROR');
  const unexpected = await state('unexpected');
  assert.equal(unexpected.node_state, 'FAILED');
  assert.equal(unexpected.error_code, 'PRE_SUBMIT_CHECK_UNEXPECTED_ERROR');
  // Only the node whose check passed was submitted, once.
  assert.deepEqual(seen.submits, [`${(await state('pass')).id}:1`]);
});

test('outside the lane folders only the list registers or configures a lane: no other module imports a lane definition, its index or its config', () => {
  const laneFolders = lanes.map((l) => l.name);
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.ts')) files.push(p);
    }
  };
  walk(join(root, 'src'));
  const offending: string[] = [];
  const known: string[] = [];
  for (const file of files) {
    const rel = relative(root, file);
    if (laneFolders.some((l) => rel.startsWith(`src/executors/${l}/`)) || rel === 'src/executors/lanes.ts') continue;
    for (const m of readFileSync(file, 'utf8').matchAll(/^import\s+(?!type\b)[^;]*?from\s+['"](\.[^'"]+)['"]/gm)) {
      const target = relative(root, resolve(dirname(file), m[1]!));
      const lane = laneFolders.find((l) => target.startsWith(`src/executors/${l}/`));
      if (!lane) continue;
      if (/\/(lane|index|config)\.ts$/.test(target)) offending.push(`${rel} -> ${target}`);
      else known.push(`${rel} -> ${target}`);
    }
  }
  assert.deepEqual(offending, []);
  // What the rest of Ferry still takes from a lane's own modules: the signing effect every EVM signer
  // checks (docs/signing.md), the CCTP burn's ABI in that effect, and the nonce reaper's helpers (the
  // EVM lane's sweep, whose code writes through the machines and so lives in src/actors/).
  const allowed = new Set([
    'src/sweeps/evm-nonce-reaper.ts -> src/executors/evm/fee-bump.ts',
    'src/sweeps/evm-nonce-reaper.ts -> src/executors/evm/rpc-errors.ts',
    'src/sweeps/evm-nonce-reaper.ts -> src/executors/evm/signed-tx.ts',
    'src/sweeps/evm-nonce-reaper.ts -> src/executors/evm/tx-lifecycle.ts',
    // cex_transfer_ingest reads the exchange accounts' history through the CEX lane's client; it
    // writes Ferry's tables, so it lives in src/actors/ (executors/ may not), and runs only with
    // FERRY_CEX_TRANSFER_INGEST_VENUES naming accounts of the cex section.
    'src/sweeps/cex-transfer-ingest.ts -> src/executors/cex/client.ts',
    'src/services/movements.ts -> src/executors/evm/expected-effect.ts',
    'src/http/effect.ts -> src/executors/cctp/message.ts',
    'src/http/effect.ts -> src/executors/evm/expected-effect.ts',
    'src/executors/sign-request.ts -> src/executors/evm/expected-effect.ts',
    // The USDT0 lane's OFT send: the signer decodes it whole (its SendParam, fee and refund) against the effect.
    'src/executors/signers/evm-policy.ts -> src/executors/usdt0/oft.ts',
    // The CCIP lane's ccipSend: the signer decodes it whole (its message and the value it pays) against the effect.
    'src/executors/signers/evm-policy.ts -> src/executors/ccip/router.ts',
    // The Gateway lane's burn intent: the typed-data policy reads it whole (its TransferSpec and maxFee) against the effect.
    'src/executors/signers/typed-data-policy.ts -> src/executors/gateway/codec.ts',
  ]);
  assert.deepEqual(known.filter((k) => !allowed.has(k)), [], 'a new use of a lane module outside its folder');
});
