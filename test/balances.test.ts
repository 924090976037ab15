import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import pino from 'pino';
import { getAddress, type Address, type Hex } from 'viem';
import { PGBOSS_SCHEMA } from '../src/persistence/pgboss-jobs.ts';
import { startRuntime } from '../src/actors/runtime.ts';
import { sweepQueue } from '../src/sweeps/sweeps.ts';
import { runsSince } from '../src/persistence/sweep-jobs.ts';
import { createBalanceSnapshotDeps, runBalanceSnapshotSweep, type BalanceSweepDeps } from '../src/balances/sweep.ts';
import { buildWatchPlan, evmChainKey } from '../src/balances/watch.ts';
import { runCli } from '../src/cli/run.ts';
import { parseConfigFile } from '../src/config-file.ts';
import { loadConfig, type FerryConfig } from '../src/config.ts';
import { createApp } from '../src/http/app.ts';
import { registry } from '../src/metrics.ts';
import { snapshotsOf } from '../src/persistence/balances.ts';
import { createToken } from '../src/persistence/tokens.ts';
import { ANVIL_DEV_ADDRESS, ANVIL_DEV_KEY, startAnvil, type Anvil, TEST_FEE_CAP_WEI } from './helpers/anvil.ts';
import { testDatabase } from './helpers/db.ts';
import { serveApp } from './helpers/http.ts';
import { freePort } from './helpers/net.ts';
import { collectPages } from './helpers/pages.ts';
import { waitFor } from './helpers/wait.ts';
import { deploySnapshotToken } from './helpers/snapshot-token.ts';

/**
 * Balance snapshots against two real anvil chains and a chain whose RPC (an URL with an API key in
 * its query string) does not answer: the sweep records every chain it can reach, marks what it
 * cannot as stale with a class of error, keeps to its budget, prunes old rows, and neither the API,
 * the CLI, the metrics nor the logs ever show an RPC URL.
 */

const CHAIN_A = 41001;
const CHAIN_B = 41002;
const CHAIN_DEAD = 41003;
const COLD = getAddress('0x00000000000000000000000000000000c01d0001');
const KMS_HOT = getAddress('0x00000000000000000000000000000000b0b00002');
const SECRET = 'sekret-api-key-7f3a';
const SUPPLY = 1_234_567_890_000n; // 1,234,567.89 at 6 decimals

const logLines: string[] = [];
const testLog = pino({ level: 'debug' }, { write: (line: string) => void logLines.push(line) });

let anvilA: Anvil;
let anvilB: Anvil;
let deadUrl: string;
let token: Address;
let config: FerryConfig;
let deps: BalanceSweepDeps;
const db = await testDatabase();

before(async () => {
  [anvilA, anvilB] = await Promise.all([startAnvil({ chainId: CHAIN_A }), startAnvil({ chainId: CHAIN_B })]);
  deadUrl = `http://127.0.0.1:${await freePort()}/rpc?apikey=${SECRET}`;
  token = await deploySnapshotToken(anvilA.url, ANVIL_DEV_KEY, 6, SUPPLY);
  await anvilB.rpc('anvil_setBalance', [COLD, '0x1234']);
  const file = parseConfigFile(`
evm:
  chains:
    - { chain_id: ${CHAIN_A}, rpc_url: "${anvilA.url}", rpc_timeout_ms: 5000, max_fee_per_gas_cap_wei: "${TEST_FEE_CAP_WEI}" }
    - { chain_id: ${CHAIN_B}, rpc_url: "${anvilB.url}", rpc_timeout_ms: 5000, max_fee_per_gas_cap_wei: "${TEST_FEE_CAP_WEI}" }
    - { chain_id: ${CHAIN_DEAD}, rpc_url: "${deadUrl}", rpc_timeout_ms: 2000 }
  signers:
    - { key: hot_a, kind: local_key, private_key_env: BALANCE_TEST_HOT_KEY, chains: [${CHAIN_A}, ${CHAIN_B}] }
    - key: kms_hot
      kind: aws_kms
      address: "${KMS_HOT}"
      chains: [${CHAIN_B}]
      kms: { key_id: k1, region: us-east-1, endpoint: "http://127.0.0.1:9", access_key_id_env: KMS_ID, secret_access_key_env: KMS_SECRET }
  tokens:
    - { chain_id: ${CHAIN_A}, symbol: TUSD, address: "${token}", decimals: 6 }
  watch:
    - { chain_id: ${CHAIN_B}, address: "${COLD}", label: cold }
    - { chain_id: ${CHAIN_DEAD}, address: "${COLD}", label: cold }
sim:
  balances:
    - { wallet: sim-treasury, asset: USDC, amount: "1250.5" }
    - { wallet: sim-broken, asset: USDC, amount: "1", fail: true }
`);
  assert.ok(file.ok, file.ok ? '' : file.reason);
  config = { ...loadConfig({ FERRY_DATA_DIR: '.ferry/test-balances' }), file: file.file };
  deps = createBalanceSnapshotDeps({ pool: db.pool, config, log: testLog, env: { BALANCE_TEST_HOT_KEY: ANVIL_DEV_KEY } });
});

after(async () => {
  await Promise.all([anvilA?.stop(), anvilB?.stop()]);
});

const hot = ANVIL_DEV_ADDRESS.toLowerCase();
const A = evmChainKey(CHAIN_A);
const B = evmChainKey(CHAIN_B);
const DEAD = evmChainKey(CHAIN_DEAD);
const ALL = 8; // hot@A native+TUSD, hot@B, kms_hot@B, cold@B, cold@dead, two sim entries

async function watchRow(chain: string, wallet: string, asset: string) {
  const { rows } = await db.pool.query('SELECT * FROM balance_watch WHERE (chain, wallet, asset) = ($1, $2, $3)', [chain, wallet, asset]);
  return rows[0];
}

async function backdateAttempts(where = 'true') {
  await db.pool.query(`UPDATE balance_watch SET last_attempt_at = last_attempt_at - interval '1 hour' WHERE ${where}`);
}

const viewer = (await createToken(db.pool, { name: 'balances-viewer', role: 'viewer' })).token;
const app = createApp({ pool: db.pool, config: loadConfig({ FERRY_DATA_DIR: '.ferry/test-balances' }) });
const answers: string[] = [];
async function getBalances(query = ''): Promise<{ status: number; body: any }> {
  const res = await app.request(`/v3/balances${query}`, { headers: { authorization: `Bearer ${viewer}` } });
  const text = await res.text();
  answers.push(text);
  return { status: res.status, body: JSON.parse(text) };
}

test('the watch list: signers on their chains, watch entries, tokens of each chain, the sim lane, and the legacy chain', () => {
  const plan = buildWatchPlan({ file: config.file, env: { BALANCE_TEST_HOT_KEY: ANVIL_DEV_KEY } });
  const keys = plan.targets.map((t) => `${t.chain} ${t.wallet} ${t.asset} ${t.label ?? '-'}`).sort();
  assert.deepEqual(keys, [
    `${A} ${hot} native hot_a`,
    `${A} ${hot} ${token.toLowerCase()} hot_a`,
    `${B} ${KMS_HOT.toLowerCase()} native kms_hot`,
    `${B} ${hot} native hot_a`,
    `${B} ${COLD.toLowerCase()} native cold`,
    `${DEAD} ${COLD.toLowerCase()} native cold`,
    'sim sim-broken USDC -',
    'sim sim-treasury USDC -',
  ].sort());
  // A local key whose variable is missing is skipped by name, never by value.
  const missing = buildWatchPlan({ file: config.file, env: {} });
  assert.deepEqual(missing.skipped, [{ signer: 'hot_a', reason: 'BALANCE_TEST_HOT_KEY does not hold a key' }]);
  // FERRY_EVM_RPC_URL + FERRY_EVM_SIGNER_KEY: one more chain, watched under evm_local.
  const otherKey = '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d' as Hex;
  const legacy = buildWatchPlan({ file: config.file, env: {}, legacy: { chainId: 777, rpcUrl: 'http://127.0.0.1:1', signerPrivateKey: otherKey } });
  assert.deepEqual(
    legacy.targets.filter((t) => t.chain === evmChainKey(777)).map((t) => [t.wallet, t.asset, t.label]),
    [['0x70997970c51812dc3a010c7d01b50e0d17dc79c8', 'native', 'evm_local']],
  );
});

test('the legacy single chain joins once its RPC tells its chain id', async () => {
  const legacyConfig = { ...loadConfig({ FERRY_DATA_DIR: '.ferry/test-balances', FERRY_EVM_RPC_URL: anvilA.url, FERRY_EVM_SIGNER_KEY: ANVIL_DEV_KEY, FERRY_EVM_MAX_FEE_PER_GAS_CAP_WEI: TEST_FEE_CAP_WEI }) };
  const legacyDeps = createBalanceSnapshotDeps({ pool: db.pool, config: legacyConfig, log: testLog, env: {} });
  assert.deepEqual((await legacyDeps.targets()).map((t) => [t.chain, t.wallet, t.asset, t.label]), [[A, hot, 'native', 'evm_local']]);
  // An RPC that does not answer: nothing to watch yet, and it is asked again on the next run.
  const downConfig = loadConfig({ FERRY_DATA_DIR: '.ferry/test-balances', FERRY_EVM_RPC_URL: deadUrl, FERRY_EVM_SIGNER_KEY: ANVIL_DEV_KEY, FERRY_EVM_MAX_FEE_PER_GAS_CAP_WEI: TEST_FEE_CAP_WEI });
  const downDeps = createBalanceSnapshotDeps({ pool: db.pool, config: downConfig, log: testLog, env: {} });
  assert.deepEqual(await downDeps.targets(), []);
  assert.ok(logLines.some((l) => l.includes('FERRY_EVM_RPC_URL chain did not tell its chain id') && l.includes('RPC_UNREACHABLE')));
});

test('one run records snapshots for both chains and the sim lane; the unreachable chain and a failing fetcher are recorded as errors', async () => {
  const first = await runBalanceSnapshotSweep(deps, { batchSize: 50, maxRunMs: 0 });
  assert.deepEqual({ claimed: first.claimed, snapshots: first.snapshots, errors: first.errors, budget: first.budgetExhausted }, {
    claimed: ALL,
    snapshots: 6,
    errors: 2,
    budget: false,
  });

  const nativeA = BigInt(await anvilA.rpc<string>('eth_getBalance', [ANVIL_DEV_ADDRESS, 'latest']));
  assert.equal((await watchRow(A, hot, 'native')).amount, nativeA.toString());
  assert.equal((await watchRow(A, hot, token.toLowerCase())).amount, SUPPLY.toString());
  assert.equal((await watchRow(A, hot, token.toLowerCase())).decimals, 6);
  assert.equal((await watchRow(B, COLD.toLowerCase(), 'native')).amount, String(0x1234));
  assert.equal((await watchRow('sim', 'sim-treasury', 'USDC')).amount, '1250500000');
  const dead = await watchRow(DEAD, COLD.toLowerCase(), 'native');
  assert.equal(dead.amount, null);
  assert.equal(dead.error_code, 'RPC_UNREACHABLE');
  assert.equal((await watchRow('sim', 'sim-broken', 'USDC')).error_code, 'SIM_SCRIPTED_FAILURE');
  const { rows } = await db.pool.query('SELECT chain, count(*)::int AS n FROM balance_snapshots GROUP BY chain ORDER BY chain');
  assert.deepEqual(rows, [
    { chain: A, n: 2 },
    { chain: B, n: 3 },
    { chain: 'sim', n: 1 },
  ]);

  // Nothing is due again before the interval.
  const idle = await runBalanceSnapshotSweep(deps, { batchSize: 50, maxRunMs: 0 });
  assert.equal(idle.claimed, 0);

  // Due again: the new amount is the latest, the old one stays in the history.
  await anvilB.rpc('anvil_setBalance', [COLD, '0x99999']);
  await backdateAttempts(`chain = '${B}' AND wallet = '${COLD.toLowerCase()}'`);
  const again = await runBalanceSnapshotSweep(deps, { batchSize: 50, maxRunMs: 0 });
  assert.equal(again.snapshots, 1);
  const history = await snapshotsOf(db.pool, { chain: B, wallet: COLD.toLowerCase(), asset: 'native' });
  assert.deepEqual(history.map((h) => h.amount), [String(0x99999), String(0x1234)]);
});

test('GET /v3/balances: latest per wallet, asset and chain, exact amounts, filters and cursor pages', async () => {
  const all = await getBalances();
  assert.equal(all.status, 200);
  assert.equal(all.body.balances.length, ALL);
  const tusd = all.body.balances.find((b: any) => b.asset === token.toLowerCase());
  assert.deepEqual(
    { chain: tusd.chain, chain_id: tusd.chain_id, symbol: tusd.symbol, label: tusd.label, amount: tusd.amount, base: tusd.amount_base_units, stale: tusd.stale, error: tusd.error },
    { chain: A, chain_id: CHAIN_A, symbol: 'TUSD', label: 'hot_a', amount: '1234567.89', base: SUPPLY.toString(), stale: false, error: null },
  );
  assert.ok(Date.now() - Date.parse(tusd.as_of) < 120_000);
  const broken = all.body.balances.find((b: any) => b.wallet === 'sim-broken');
  assert.equal(broken.stale, true, 'never fetched is stale');
  assert.equal(broken.error.code, 'SIM_SCRIPTED_FAILURE');

  assert.equal((await getBalances(`?chain=${CHAIN_A}`)).body.balances.length, 2);
  assert.equal((await getBalances(`?chain=${B}`)).body.balances.length, 3);
  assert.deepEqual((await getBalances(`?address=${COLD}`)).body.balances.map((b: any) => b.chain), [B, DEAD]);
  assert.deepEqual((await getBalances('?asset=tusd')).body.balances.map((b: any) => b.wallet), [hot]);
  assert.deepEqual((await getBalances('?chain=sim&asset=USDC')).body.balances.map((b: any) => b.wallet), ['sim-broken', 'sim-treasury']);

  const { items: seen, pages } = await collectPages(async (cursor) => {
    const page: any = (await getBalances(`?limit=3${cursor ? `&cursor=${cursor}` : ''}`)).body;
    return { items: page.balances.map((b: any) => `${b.chain} ${b.wallet} ${b.asset}`), next: page.next_cursor };
  }, 10);
  assert.equal(pages, 3);
  assert.deepEqual(seen, all.body.balances.map((b: any) => `${b.chain} ${b.wallet} ${b.asset}`));

  assert.equal((await getBalances('?cursor=bogus')).status, 400);
  assert.equal((await getBalances('?chain=Not%20A%20Chain')).status, 400);
  assert.equal((await getBalances('?colour=red')).status, 400);
  assert.equal((await app.request('/v3/balances')).status, 401);
});

test('the run budget stops a run part-way; the next run continues with what is left, and nothing is fetched twice', async () => {
  await backdateAttempts();
  const { rows: before } = await db.pool.query('SELECT max(id)::int AS id FROM balance_snapshots');
  // A clock that moves a second per look: the budget of 1.5 s runs out after a fetch or two.
  let now = 0;
  const clocked: BalanceSweepDeps = { ...deps, clock: () => (now += 1000) };
  const runs = [];
  for (let i = 0; i < 20; i++) {
    const r = await runBalanceSnapshotSweep(clocked, { batchSize: 50, maxRunMs: 1500 });
    if (r.claimed === 0) break;
    runs.push(r);
  }
  assert.ok(runs.length >= 2, 'more than one run was needed');
  assert.equal(runs[0].budgetExhausted, true);
  assert.ok(runs[0].snapshots + runs[0].errors >= 1 && runs[0].snapshots + runs[0].errors < ALL, 'the first run stopped part-way');
  assert.equal(runs[0].released, runs[0].claimed - runs[0].snapshots - runs[0].errors);
  assert.equal(runs.reduce((n, r) => n + r.snapshots + r.errors, 0), ALL, 'every balance was attempted exactly once over the runs');
  const { rows: fresh } = await db.pool.query(
    'SELECT chain, wallet, asset, count(*)::int AS n FROM balance_snapshots WHERE id > $1 GROUP BY 1, 2, 3 HAVING count(*) > 1',
    [before[0].id],
  );
  assert.deepEqual(fresh, []);
  const { rows: pending } = await db.pool.query("SELECT count(*)::int AS n FROM balance_watch WHERE last_attempt_at < now() - interval '30 minutes' OR leased_until IS NOT NULL");
  assert.equal(pending[0].n, 0);
});

test('a chain whose RPC is down: its balances keep their last amount and turn stale; the other chain goes on', async () => {
  const lastB = await watchRow(B, hot, 'native');
  await anvilB.stop();
  // Old enough to be stale, and due; chain A due as well.
  await db.pool.query(`UPDATE balance_watch SET as_of = as_of - interval '1 hour', last_attempt_at = last_attempt_at - interval '1 hour' WHERE chain = '${B}'`);
  await backdateAttempts(`chain = '${A}'`);
  const run = await runBalanceSnapshotSweep(deps, { batchSize: 50, maxRunMs: 0 });
  assert.equal(run.snapshots, 2, 'chain A was fetched');
  assert.equal(run.errors, 3, 'the three balances of chain B failed');

  const b = (await getBalances(`?chain=${CHAIN_B}`)).body.balances;
  assert.deepEqual(
    b.map((x: any) => [x.stale, x.error?.code]),
    [
      [true, 'RPC_UNREACHABLE'],
      [true, 'RPC_UNREACHABLE'],
      [true, 'RPC_UNREACHABLE'],
    ],
  );
  const hotB = b.find((x: any) => x.wallet === hot);
  assert.equal(hotB.amount_base_units, lastB.amount, 'the last known amount stays');
  assert.ok(Date.parse(hotB.last_attempt_at) > Date.parse(hotB.as_of));
  const a = (await getBalances(`?chain=${CHAIN_A}`)).body.balances;
  assert.deepEqual(a.map((x: any) => [x.stale, x.error]), [
    [false, null],
    [false, null],
  ]);
});

test('retention: the same sweep deletes snapshots and watch rows older than the retention period', async () => {
  const retention = config.balanceSnapshotRetentionSeconds;
  assert.equal(retention, 7 * 24 * 3600);
  const { rows: kept } = await db.pool.query('SELECT count(*)::int AS n FROM balance_snapshots');
  // Three old snapshots, one existing snapshot backdated, and an entry nobody watches any more.
  await db.pool.query(
    `INSERT INTO balance_snapshots (chain, wallet, asset, amount, decimals, taken_at)
     SELECT $1, $2, 'native', 1, 18, now() - interval '8 days' - g * interval '1 hour' FROM generate_series(1, 3) g`,
    [A, hot],
  );
  const { rows: victim } = await db.pool.query(
    `UPDATE balance_snapshots SET taken_at = now() - interval '7 days 1 minute'
      WHERE id = (SELECT min(id) FROM balance_snapshots WHERE taken_at > now() - interval '1 day') RETURNING id`,
  );
  await db.pool.query(
    `INSERT INTO balance_watch (chain, wallet, asset, lane, fetcher, last_attempt_at, created_at)
     VALUES ('eip155:999', '0x000000000000000000000000000000000000dead', 'native', 'evm', 'evm_native', now() - interval '8 days', now() - interval '9 days')`,
  );
  const run = await runBalanceSnapshotSweep(deps, { batchSize: 50, maxRunMs: 0 });
  assert.deepEqual(run.deleted, { snapshots: 4, entries: 1 });
  const { rows: left } = await db.pool.query('SELECT count(*)::int AS n FROM balance_snapshots');
  assert.equal(left[0].n, kept[0].n - 1 + run.snapshots);
  assert.equal((await db.pool.query('SELECT 1 FROM balance_snapshots WHERE id = $1', [victim[0].id])).rowCount, 0);
  assert.equal((await db.pool.query("SELECT 1 FROM balance_watch WHERE chain = 'eip155:999'")).rowCount, 0);
  assert.equal((await db.pool.query('SELECT count(*)::int AS n FROM balance_watch')).rows[0].n, ALL, 'watched entries stay');
});

test('ferry balances prints the table, stale balances marked with their error class', async () => {
  const { url, stop } = await serveApp(app);
  try {
    const out: string[] = [];
    const err: string[] = [];
    const io = { out: (t: string) => void out.push(t), err: (t: string) => void err.push(t) };
    const env = { FERRY_URL: url, FERRY_TOKEN: viewer };
    assert.equal(await runCli(['balances'], { env, io }), 0, err.join('\n'));
    const text = out.join('\n');
    answers.push(text);
    const lines = text.split('\n');
    assert.match(lines[0], /^CHAIN\s+WALLET\s+LABEL\s+ASSET\s+AMOUNT\s+AS OF\s+STATUS$/);
    assert.equal(lines.length, 1 + ALL);
    assert.match(text, new RegExp(`${A}\\s+${hot}\\s+hot_a\\s+TUSD\\s+1234567\\.89\\s+\\S+\\s+ok`));
    assert.match(text, new RegExp(`${B}\\s+${COLD.toLowerCase()}\\s+cold\\s+native\\s+0\\.000000000000629145\\s+\\S+\\s+STALE \\(RPC_UNREACHABLE\\)`));
    assert.match(text, /sim\s+sim-broken\s+-\s+USDC\s+-\s+never\s+STALE \(SIM_SCRIPTED_FAILURE\)/);

    out.length = 0;
    assert.equal(await runCli(['balances', '--chain', String(CHAIN_A), '--json'], { env, io }), 0, err.join('\n'));
    assert.deepEqual(JSON.parse(out.join('')).map((b: any) => b.symbol ?? b.asset), ['TUSD', 'native']);
    out.length = 0;
    assert.equal(await runCli(['balances', '--address', '0x0000000000000000000000000000000000000042'], { env, io }), 0);
    assert.deepEqual(out, ['No balance matches.']);
  } finally {
    await stop();
  }
});

test('no RPC URL, and no API key in one, appears in any answer, log line, stored row or metric', async () => {
  const stored = (await db.pool.query('SELECT row_to_json(w)::text AS t FROM balance_watch w')).rows.map((r) => r.t as string);
  const metrics = await registry.metrics();
  const haystacks = { answers: answers.join('\n'), logs: logLines.join('\n'), stored: stored.join('\n'), metrics };
  assert.ok(logLines.some((l) => l.includes('RPC_UNREACHABLE')), 'the failures were logged (by class)');
  assert.match(metrics, /ferry_balance_fetch_errors_total\{chain="eip155:41003",code="RPC_UNREACHABLE"\} \d/);
  assert.match(metrics, /ferry_balance_snapshots_total\{chain="eip155:41001"\} \d/);
  assert.match(metrics, /ferry_balance_sweep_budget_exhausted_total [1-9]/);
  for (const [where, text] of Object.entries(haystacks)) {
    for (const needle of [SECRET, deadUrl, new URL(deadUrl).host, anvilA.url, anvilB.url, 'apikey']) {
      assert.ok(!text.includes(needle), `${where} must not contain ${needle}`);
    }
  }
});

test('the runtime runs balance_snapshot as a sweep (a pg-boss job) when enabled', async () => {
  const since = new Date(Date.now() - 1000);
  const file = parseConfigFile('sim:\n  balances:\n    - { wallet: sim-runtime, asset: EURC, amount: "7.5", decimals: 2 }\n');
  assert.ok(file.ok);
  const runtimeConfig = {
    ...loadConfig({ FERRY_DATA_DIR: '.ferry/test-balances', FERRY_BALANCE_SNAPSHOT_ENABLED: 'true', FERRY_CALLBACK_SECRET: 'x'.repeat(32) }),
    file: file.file,
  };
  const runtime = await startRuntime({ pool: db.pool, config: runtimeConfig, databaseUrl: db.url, log: testLog, workers: true });
  try {
    const row = await waitFor('the sidecar to record the sim balance', async () => (await watchRow('sim', 'sim-runtime', 'EURC'))?.as_of && watchRow('sim', 'sim-runtime', 'EURC'));
    assert.equal(row.amount, '750');
    const run = await waitFor('a finished balance_snapshot run', async () =>
      (await runsSince(db.pool, PGBOSS_SCHEMA, sweepQueue('balance_snapshot'), since)).find((r) => r.state === 'completed'),
    );
    assert.ok((run.output as { snapshots: number }).snapshots >= 1, JSON.stringify(run.output));
  } finally {
    await runtime.stop();
  }
});

test('a token whose decimals differ from the configuration, and an RPC serving another chain, are refused by class', async () => {
  const watcher = getAddress('0x00000000000000000000000000000000000d0003');
  const file = parseConfigFile(`
evm:
  chains:
    - { chain_id: ${CHAIN_A}, rpc_url: "${anvilA.url}" }
    - { chain_id: 41009, rpc_url: "${anvilA.url}" }
  tokens:
    - { chain_id: ${CHAIN_A}, symbol: TUSD8, address: "${token}", decimals: 8 }
  watch:
    - { chain_id: ${CHAIN_A}, address: "${watcher}" }
    - { chain_id: 41009, address: "${watcher}" }
`);
  assert.ok(file.ok, file.ok ? '' : file.reason);
  const mismatched = createBalanceSnapshotDeps({ pool: db.pool, config: { ...config, file: file.file }, log: testLog, env: {} });
  const run = await runBalanceSnapshotSweep(mismatched, { batchSize: 50, maxRunMs: 0 });
  assert.deepEqual({ snapshots: run.snapshots, errors: run.errors }, { snapshots: 1, errors: 2 });
  const w = watcher.toLowerCase();
  assert.equal((await watchRow(A, w, 'native')).error_code, null);
  assert.equal((await watchRow(A, w, token.toLowerCase())).error_code, 'TOKEN_DECIMALS_MISMATCH');
  assert.equal((await watchRow(A, w, token.toLowerCase())).amount, null, 'no amount at the wrong scale');
  assert.equal((await watchRow(evmChainKey(41009), w, 'native')).error_code, 'CHAIN_MISMATCH');
});
