import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { after, before, test } from 'node:test';
import pino from 'pino';
import { maxUint256 } from 'viem';
import { EvmChainClients } from '../src/balances/fetchers.ts';
import { createBalanceSnapshotDeps, runBalanceSnapshotSweep } from '../src/balances/sweep.ts';
import { buildWatchPlan } from '../src/balances/watch.ts';
import { parseConfigFile } from '../src/config-file.ts';
import { loadConfig } from '../src/config.ts';
import { GatewayBalanceFetcher, gatewayBalanceTargets, gatewayChainKey } from '../src/executors/gateway/balances.ts';
import { lanes } from '../src/executors/lanes.ts';
import { testDatabase } from './helpers/db.ts';
import { gatewayConfigFile, startGatewayWorld, writeGateway, type GatewayWorld } from './helpers/gateway.ts';
import { freePort, listenOnLoopback } from './helpers/net.ts';

/**
 * Gateway balances in the balance snapshots, end to end on loopback: two anvil chains with the
 * test GatewayWallets, the emulated API answering `POST /v1/balances` as Circle documents it (and
 * refusing what it documents as invalid), and the sweep recording each `gateway.watch`
 * depositor's available balance per domain, through the API, at the token's decimals confirmed by
 * the chain's token contract.
 */

const DEPOSIT = 12_345_678n; // 12.345678 USDC
const db = await testDatabase();
const log = pino({ level: 'silent' });
let w: GatewayWorld;

before(async () => {
  w = await startGatewayWorld();
  await writeGateway(w.source, w.source.token, 'approve', [w.source.wallet.address, maxUint256], w.hotKey);
  await writeGateway(w.source, w.source.wallet, 'deposit', [w.source.token.address, DEPOSIT], w.hotKey);
});
after(async () => {
  await w?.stop();
});

async function post(body: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(`${w.api.url}/v1/balances`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

function fileOf(opts: Parameters<typeof gatewayConfigFile>[1] = {}) {
  const parsed = parseConfigFile(readFileSync(gatewayConfigFile(w, { ...opts, gateway: { watch: [{ depositor: w.hot, label: 'gw-hot' }], ...opts.gateway } }), 'utf8'));
  assert.ok(parsed.ok, parsed.ok ? '' : parsed.reason);
  return parsed.file;
}

async function watchRow(chain: string, wallet: string, asset: string) {
  const { rows } = await db.pool.query('SELECT * FROM balance_watch WHERE (chain, wallet, asset) = ($1, $2, $3)', [chain, wallet, asset]);
  return rows[0];
}

test('the emulated /v1/balances: the documented shape, every domain when none is named, and refusals', async () => {
  const one = await post({ token: 'USDC', sources: [{ depositor: w.hot, domain: w.source.domain }] });
  assert.equal(one.status, 200);
  assert.deepEqual(one.json, { token: 'USDC', balances: [{ domain: w.source.domain, depositor: w.hot, balance: '12.345678' }] });
  const all = await post({ token: 'USDC', sources: [{ depositor: w.hot }] });
  assert.deepEqual(all.json, {
    token: 'USDC',
    balances: [
      { domain: w.source.domain, depositor: w.hot, balance: '12.345678' },
      { domain: w.destination.domain, depositor: w.hot, balance: '0' },
    ],
  });
  const refused: Array<[string, unknown, RegExp]> = [
    ['no token', { sources: [{ depositor: w.hot }] }, /token is required/],
    ['another token', { token: 'EURC', sources: [{ depositor: w.hot }] }, /unsupported token/],
    ['no sources', { token: 'USDC' }, /sources is required/],
    ['a domain Gateway does not serve here', { token: 'USDC', sources: [{ depositor: w.hot, domain: 5 }] }, /unsupported domain 5/],
    ['a domain as a string', { token: 'USDC', sources: [{ depositor: w.hot, domain: String(w.source.domain) }] }, /must be an integer/],
    ['no depositor', { token: 'USDC', sources: [{ domain: w.source.domain }] }, /depositor is required/],
    ['a depositor that is not an address', { token: 'USDC', sources: [{ depositor: 'alice', domain: w.source.domain }] }, /not a valid address/],
    ['an array body', [{ depositor: w.hot }], /is an object/],
  ];
  for (const [what, body, message] of refused) {
    const r = await post(body);
    assert.equal(r.status, 400, what);
    assert.equal(r.json.success, false, what);
    assert.match(String(r.json.message), message, what);
  }
});

test('the watch plan holds each gateway.watch depositor on each domain; no watch, no entries', () => {
  const file = fileOf();
  const plan = buildWatchPlan({ file, env: { GATEWAY_HOT_KEY: w.hotKey }, lanes });
  const gateway = plan.targets.filter((t) => t.fetcher === 'gateway').map((t) => `${t.chain} ${t.wallet} ${t.asset} ${t.symbol} ${t.label}`);
  assert.deepEqual(gateway, [
    `${gatewayChainKey(w.source.domain)} ${w.hot} ${w.source.token.address.toLowerCase()} USDC gw-hot`,
    `${gatewayChainKey(w.destination.domain)} ${w.hot} ${w.destination.token.address.toLowerCase()} USDC gw-hot`,
  ]);
  assert.deepEqual(gatewayBalanceTargets({ ...file, gateway: { ...file.gateway!, watch: [] } }), []);
});

test('the sweep records the Gateway balance of each domain through the API; an API that does not answer marks only Gateway balances', async () => {
  const config = { ...loadConfig({ FERRY_DATA_DIR: '.ferry/test-gateway-balances' }), file: fileOf() };
  const deps = createBalanceSnapshotDeps({ pool: db.pool, config, log, env: { GATEWAY_HOT_KEY: w.hotKey } });
  const calls = w.api.balanceCalls;
  const r = await runBalanceSnapshotSweep(deps, { batchSize: 100, maxRunMs: 0 });
  assert.equal(r.errors, 0);
  assert.equal(w.api.balanceCalls - calls, 2, 'one API call per domain');
  const src = await watchRow(gatewayChainKey(w.source.domain), w.hot, w.source.token.address.toLowerCase());
  assert.equal(src.amount, DEPOSIT.toString());
  assert.equal(src.decimals, 6);
  assert.equal(src.lane, 'gateway');
  assert.equal(src.label, 'gw-hot');
  assert.equal((await watchRow(gatewayChainKey(w.destination.domain), w.hot, w.destination.token.address.toLowerCase())).amount, '0');
  // The hot wallet's own USDC on the chain is another row: what it holds besides the deposit.
  const onChain = await watchRow(`eip155:${w.source.chainId}`, w.hot, w.source.token.address.toLowerCase());
  assert.equal(BigInt(onChain.amount), 1_000_000_000n - DEPOSIT);

  await db.pool.query(`UPDATE balance_watch SET last_attempt_at = last_attempt_at - interval '1 hour'`);
  const dead = { ...config, file: fileOf({ apiUrl: `http://127.0.0.1:${await freePort()}` }) };
  const down = await runBalanceSnapshotSweep(createBalanceSnapshotDeps({ pool: db.pool, config: dead, log, env: { GATEWAY_HOT_KEY: w.hotKey } }), { batchSize: 100, maxRunMs: 0 });
  assert.equal(down.errors, 2, 'the two Gateway balances, and nothing else');
  const stale = await watchRow(gatewayChainKey(w.source.domain), w.hot, w.source.token.address.toLowerCase());
  assert.equal(stale.error_code, 'GATEWAY_API_UNAVAILABLE');
  assert.equal(stale.amount, DEPOSIT.toString(), 'the last amount stays');
  assert.equal((await watchRow(`eip155:${w.source.chainId}`, w.hot, w.source.token.address.toLowerCase())).error_code, null);
});

test('the fetcher refuses a scale the token contract does not confirm, and an answer that is not one readable balance', async () => {
  const file = fileOf();
  const [target] = gatewayBalanceTargets(file);
  assert.ok(target);
  const clients = new EvmChainClients(new Map([[w.source.chainId, { chain_id: w.source.chainId, rpc_url: w.source.rpcUrl }]]));
  const fetcher = new GatewayBalanceFetcher(clients);
  assert.deepEqual(await fetcher.fetch(target), { amount: DEPOSIT, decimals: 6 });
  await assert.rejects(new GatewayBalanceFetcher(clients).fetch({ ...target, token: { ...target.token!, decimals: 18 } }), (e: { code?: string }) => e.code === 'TOKEN_DECIMALS_MISMATCH');
  // A domain the API does not serve: refused, never read as a zero balance.
  await assert.rejects(fetcher.fetch({ ...target, gateway: { ...target.gateway!, domain: 5 } }), (e: { code?: string }) => e.code === 'GATEWAY_API_REFUSED');
  // An API whose answers are off: too many fractional digits, no entry of the domain, two entries, a balance as a number.
  const bad = [
    { token: 'USDC', balances: [{ domain: target.gateway!.domain, depositor: target.wallet, balance: '1.0000001' }] },
    { token: 'USDC', balances: [{ domain: 99, depositor: target.wallet, balance: '1' }] },
    { token: 'USDC', balances: [1, 2].map(() => ({ domain: target.gateway!.domain, depositor: target.wallet, balance: '1' })) },
    { token: 'USDC', balances: [{ domain: target.gateway!.domain, depositor: target.wallet, balance: 1 }] },
    { balances: [{ domain: target.gateway!.domain, depositor: target.wallet, balance: '1' }] },
  ];
  let next = 0;
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(bad[next++]));
  });
  const off = await listenOnLoopback(server);
  try {
    for (const answer of bad) {
      await assert.rejects(fetcher.fetch({ ...target, gateway: { ...target.gateway!, apiUrl: off.url } }), (e: { code?: string }) => e.code === 'GATEWAY_ANSWER_INVALID', JSON.stringify(answer));
    }
  } finally {
    await off.stop();
  }
});
