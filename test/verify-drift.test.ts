import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import pino from 'pino';
import { createWalletClient, http, pad, type Address, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { stringify } from 'yaml';
import { findSweep, sweepDefinitionsOf, sweepSchedule } from '../src/sweeps/sweeps.ts';
import { registryFacts, runVerifyDrift } from '../src/sweeps/verify-drift.ts';
import { loadConfig, type FerryConfig } from '../src/config.ts';
import { lanes, withoutLanes } from '../src/executors/lanes.ts';
import { createApp } from '../src/http/app.ts';
import { registry } from '../src/metrics.ts';
import { listRegistryChecks, listRegistryDrifts } from '../src/persistence/registry-drifts.ts';
import { createToken } from '../src/persistence/tokens.ts';
import { ANVIL_DEV_KEY, freshAddress, startLocalChain, type LocalChain } from './helpers/anvil.ts';
import { deployCctp, type CctpDeployment } from './helpers/cctp.ts';
import { compileContracts, deployToken, type DeployedToken } from './helpers/contracts.ts';
import { testDatabase } from './helpers/db.ts';
import { startFaultProxy, type FaultProxy } from './helpers/fault-proxy.ts';
import { listenOnLoopback } from './helpers/net.ts';
import { within } from './helpers/wait.ts';

/**
 * verify_drift on real anvil chains: the lanes' registry baselines (token code, decimals and symbol,
 * CCTP transmitter domain and messenger link, OFT peers, bridge code) read on the chain and compared
 * with the configuration. A token whose decimals differ from the configured ones is drift, recorded
 * once per episode with one audit event; fixing the configuration resolves it. A chain whose RPC
 * hangs is unverified within the lane timeout while the other chains are checked; hostile answers
 * (an oversized or malformed RPC answer, a contract answering kilobytes of control characters) are
 * unverified or stored safely, and never fail the run.
 */

const db = await testDatabase();
const silent = pino({ level: 'silent' });
const A = 31337;
const B = 31338;
const C = 31339;
const D = 31340;
let a: LocalChain;
let b: LocalChain;
let usdcA: DeployedToken;
let usdcB: DeployedToken;
let cctpA: CctpDeployment;
let hostile: Address;
let hold: FaultProxy;
let hostileRpc: { url: string; stop(): Promise<void>; calls: string[] };

before(async () => {
  [a, b] = await Promise.all([startLocalChain({ chainId: A }), startLocalChain({ chainId: B })]);
  usdcA = await deployToken(a.chain, a.anvil.url, ANVIL_DEV_KEY, { symbol: 'USDC', decimals: 6 });
  usdcB = await deployToken(b.chain, b.anvil.url, ANVIL_DEV_KEY, { symbol: 'USDC', decimals: 6 });
  cctpA = await deployCctp(a.chain, a.anvil.url, ANVIL_DEV_KEY, { domain: 0, attester: freshAddress(), token: usdcA });
  const compiled = compileContracts('HostileToken.sol').HostileToken!;
  const wallet = createWalletClient({ account: privateKeyToAccount(ANVIL_DEV_KEY), transport: http(a.anvil.url, { retryCount: 0 }) });
  const hash = await wallet.deployContract({ abi: compiled.abi, bytecode: compiled.bytecode, args: [8_000n], chain: null });
  hostile = (await a.chain.waitForTransactionReceipt({ hash, pollingInterval: 50 })).contractAddress!.toLowerCase() as Address;
  // Chain B's RPC behind a proxy that can swallow every request (never forwarded, never answered).
  hold = await startFaultProxy(b.anvil.url);
  hostileRpc = await startHostileRpc();
});
after(async () => {
  await hold?.stop();
  await hostileRpc?.stop();
  await Promise.all([a?.anvil.stop(), b?.anvil.stop()]);
});

/** A JSON-RPC "node" whose every answer is hostile: garbage for eth_getCode, megabytes streamed for eth_call. */
async function startHostileRpc() {
  const calls: string[] = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      // A redirect to a real node: not followed (the configured URL is the one Ferry asks).
      if (req.url === '/redirect') {
        calls.push('redirect');
        res.writeHead(307, { location: a.anvil.url });
        return void res.end();
      }
      const method = (JSON.parse(body) as { method: string }).method;
      calls.push(method);
      if (method === 'eth_getCode') {
        res.writeHead(200, { 'content-type': 'application/json' });
        return void res.end('{"jsonrpc":"2.0","id":1,"result":{"not":"hex"}} <html>');
      }
      // No content-length: the answer streams, 2 MB and more, until the reader stops it.
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"jsonrpc":"2.0","id":1,"result":"0x');
      const chunk = 'ab'.repeat(32 * 1024);
      let sent = 0;
      const more = () => {
        while (sent < 40 && res.write(chunk)) sent++;
        if (sent < 40) res.once('drain', more);
        else res.end('"}');
      };
      res.on('error', () => {});
      more();
    });
  });
  const l = await listenOnLoopback(server);
  return { url: l.url, stop: l.stop, calls };
}

function configWith(file: Record<string, unknown>, env: Record<string, string> = {}): FerryConfig {
  const dir = mkdtempSync(join(tmpdir(), 'ferry-drift-'));
  const path = join(dir, 'ferry.yaml');
  writeFileSync(path, stringify(file));
  return loadConfig({ FERRY_DATA_DIR: '.ferry/test-drift', FERRY_CONFIG_FILE: path, ...env });
}

const chain = (chainId: number, rpc: string, extra: Record<string, unknown> = {}) => ({ chain_id: chainId, rpc_url: rpc, ...extra });
const token = (chainId: number, address: string, decimals: number, symbol = 'USDC') => ({ chain_id: chainId, symbol, address, decimals });
const settings = { concurrency: 2, laneTimeoutMs: 2_000 };

async function auditCount(action: string): Promise<number> {
  const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM audit_outbox WHERE action = $1`, [action]);
  return rows[0].n;
}

function counterValue(text: string, lane: string, outcome: string): number {
  const m = new RegExp(`^ferry_registry_checks_total\\{lane="${lane}",outcome="${outcome}"\\} (\\d+)$`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

test('the sweep: every 6 hours by default, a pg-boss cron schedule, its settings from the config object', () => {
  const def = findSweep('verify_drift');
  const s = def.settings(loadConfig({ FERRY_DATA_DIR: '.ferry/test-drift' }));
  assert.deepEqual(s, { enabled: true, intervalSeconds: 21_600, batchSize: null, maxRunMs: 15_000 });
  assert.deepEqual(sweepSchedule(s.intervalSeconds), { mode: 'cron', cron: '0 */6 * * *' });
  const tuned = def.settings(loadConfig({ FERRY_DATA_DIR: '.ferry/test-drift', FERRY_VERIFY_DRIFT_INTERVAL_SECONDS: '3600', FERRY_VERIFY_DRIFT_LANE_TIMEOUT_MS: '900', FERRY_VERIFY_DRIFT_ENABLED: 'false' }));
  assert.deepEqual(tuned, { enabled: false, intervalSeconds: 3600, batchSize: null, maxRunMs: 900 });
  assert.throws(() => loadConfig({ FERRY_VERIFY_DRIFT_RPC_CONCURRENCY: '0' }), /FERRY_VERIFY_DRIFT_RPC_CONCURRENCY/);
  // Each lane declares its own baselines; without a lane in the list, none of its facts are read.
  const config = configWith({
    evm: { chains: [chain(A, a.anvil.url, { cctp: { domain: 0, token_messenger: cctpA.messenger.address, message_transmitter: cctpA.transmitter.address } })], tokens: [token(A, usdcA.address, 6)] },
  });
  const facts = (list = lanes as never) => [...new Set(registryFacts(config, list).map((f) => f.lane))];
  assert.deepEqual(facts(), ['evm', 'cctp']);
  assert.deepEqual(facts(withoutLanes(['cctp']) as never), ['evm']);
  assert.deepEqual(facts(withoutLanes(['evm']) as never), []);
  assert.ok(sweepDefinitionsOf(withoutLanes(['evm'])).some((d) => d.name === 'verify_drift'), 'a core sweep: it reads whatever the listed lanes declare');
});

test('a token whose decimals differ from the configuration is drift, recorded once with one audit event; fixing the configuration resolves it', async () => {
  const before = counterValue(await registry.metrics(), 'evm', 'drift');
  const wrong = configWith({ evm: { chains: [chain(A, a.anvil.url)], tokens: [token(A, usdcA.address, 18)] } });
  const r1 = await runVerifyDrift({ pool: db.pool, config: wrong, log: silent }, settings);
  assert.deepEqual({ checked: r1.checked, match: r1.match, drift: r1.drift, unverified: r1.unverified, detected: r1.detected }, { checked: 4, match: 3, drift: 1, unverified: 0, detected: 1 }, "the chain's id and the token's code, decimals and symbol");
  const [drift] = await listRegistryDrifts(db.pool, { state: 'open', limit: 10 });
  assert.ok(drift);
  assert.deepEqual(
    { lane: drift.lane, chain_id: drift.chain_id, subject: drift.subject, property: drift.property, address: drift.address, expected: drift.expected, observed: drift.observed },
    { lane: 'evm', chain_id: A, subject: 'evm.tokens[USDC]', property: 'decimals()', address: usdcA.address, expected: '18', observed: '6' },
  );
  assert.equal(await auditCount('registry.drift_detected'), 1);
  assert.equal(counterValue(await registry.metrics(), 'evm', 'drift') - before, 1, 'one drifting check counted');
  // The operator channels hear of it: one attention event for the episode.
  const attention = async () =>
    (await db.pool.query(`SELECT source_key, summary, details FROM attention_events WHERE kind = 'registry_drift'`)).rows as {
      source_key: string;
      summary: string;
      details: { drift_id: number; expected: string; observed: string };
    }[];
  const raised = await attention();
  assert.equal(raised.length, 1);
  assert.equal(raised[0].source_key, `registry_drift:${drift.id}`);
  assert.deepEqual({ id: raised[0].details.drift_id, expected: raised[0].details.expected, observed: raised[0].details.observed }, { id: drift.id, expected: '18', observed: '6' });
  assert.match(raised[0].summary, /evm\.tokens\[USDC\] decimals\(\) is "6", the configuration says "18"/);

  // Seen again: the same episode, last_seen moved, no second audit event.
  await db.pool.query(`UPDATE registry_drifts SET first_seen = now() - interval '1 day', last_seen = now() - interval '1 day'`);
  const r2 = await runVerifyDrift({ pool: db.pool, config: wrong, log: silent }, settings);
  assert.equal(r2.detected, 0);
  const again = await listRegistryDrifts(db.pool, { state: 'all', limit: 10 });
  assert.equal(again.length, 1);
  assert.equal(again[0]!.id, drift.id);
  assert.ok(+again[0]!.last_seen > Date.now() - 60_000, 'last_seen moved to now');
  assert.ok(+again[0]!.first_seen < Date.now() - 3_600_000, 'first_seen kept');
  assert.equal(await auditCount('registry.drift_detected'), 1);
  assert.equal((await attention()).length, 1, 'seen again: no second attention event');

  // The gauge of open drifts per lane, at scrape time.
  const viewer = (await createToken(db.pool, { name: 'drift-viewer', role: 'viewer' })).token;
  const app = createApp({ pool: db.pool, config: wrong });
  const metrics = await (await app.request('/metrics', { headers: { authorization: `Bearer ${viewer}` } })).text();
  assert.match(metrics, /^ferry_registry_drifts_open\{lane="evm"\} 1$/m);
  assert.match(metrics, /^ferry_registry_drifts_open\{lane="usdt0"\} 0$/m);
  // And in /v3.
  const res = await app.request('/v3/registry-drift', { headers: { authorization: `Bearer ${viewer}` } });
  assert.equal(res.status, 200);
  const body = (await res.json()) as { drifts: Array<Record<string, unknown>>; unverified: unknown[] };
  assert.deepEqual(body.drifts.map((d) => [d.lane, d.subject, d.property, d.expected, d.observed, d.resolved_at]), [['evm', 'evm.tokens[USDC]', 'decimals()', '18', '6', null]]);
  assert.equal((await app.request('/v3/registry-drift?state=sideways', { headers: { authorization: `Bearer ${viewer}` } })).status, 400);

  // The configuration fixed: resolved (matched), one resolution event.
  const fixed = configWith({ evm: { chains: [chain(A, a.anvil.url)], tokens: [token(A, usdcA.address, 6)] } });
  const r3 = await runVerifyDrift({ pool: db.pool, config: fixed, log: silent }, settings);
  assert.deepEqual({ match: r3.match, drift: r3.drift, resolved: r3.resolved }, { match: 4, drift: 0, resolved: 1 });
  assert.deepEqual(await listRegistryDrifts(db.pool, { state: 'open', limit: 10 }), []);
  const [done] = await listRegistryDrifts(db.pool, { state: 'resolved', limit: 10 });
  assert.equal(done!.id, drift.id);
  assert.equal(done!.resolution, 'matched');
  assert.ok(done!.resolved_at);
  assert.equal(await auditCount('registry.drift_resolved'), 1);
  const checks = await listRegistryChecks(db.pool, { limit: 10 });
  assert.deepEqual(checks.map((c) => c.outcome), ['match', 'match', 'match', 'match']);
  await db.pool.query('DELETE FROM registry_checks; DELETE FROM registry_drifts');
});

test('CCTP: the transmitter of another domain is drift; a token the configuration drops resolves as unconfigured', async () => {
  const cctp = (domain: number) => ({ domain, token_messenger: cctpA.messenger.address, message_transmitter: cctpA.transmitter.address });
  const right = configWith({ evm: { chains: [chain(A, a.anvil.url, { cctp: cctp(0) })], tokens: [token(A, usdcA.address, 6)] } });
  const r1 = await runVerifyDrift({ pool: db.pool, config: right, log: silent }, settings);
  assert.deepEqual({ checked: r1.checked, match: r1.match }, { checked: 8, match: 8 }, "code x2, localDomain(), localMessageTransmitter(), the token's three and the chain's id");
  const wrong = configWith({ evm: { chains: [chain(A, a.anvil.url, { cctp: cctp(7) })], tokens: [token(A, usdcA.address, 18)] } });
  await runVerifyDrift({ pool: db.pool, config: wrong, log: silent }, settings);
  const open = await listRegistryDrifts(db.pool, { state: 'open', limit: 10 });
  assert.deepEqual(open.map((d) => [d.lane, d.property, d.expected, d.observed]).sort(), [
    ['cctp', 'localDomain()', '7', '0'],
    ['evm', 'decimals()', '18', '6'],
  ]);
  // The token and the CCTP entry leave the configuration: nothing asserts them, their drifts resolve.
  const bare = configWith({ evm: { chains: [chain(A, a.anvil.url)] } });
  const r3 = await runVerifyDrift({ pool: db.pool, config: bare, log: silent }, settings);
  assert.equal(r3.resolved, 2);
  const resolved = await listRegistryDrifts(db.pool, { state: 'resolved', limit: 10 });
  assert.deepEqual(resolved.map((d) => d.resolution), ['unconfigured', 'unconfigured']);
  assert.deepEqual(
    (await listRegistryChecks(db.pool, { limit: 10 })).map((c) => [c.subject, c.property]),
    [[`evm.chains[${A}]`, 'chain_id']],
    "their last answers are forgotten; the chain's own is kept (the chain is still configured)",
  );
  await db.pool.query('DELETE FROM registry_checks; DELETE FROM registry_drifts');
});

test('an RPC that hangs is unverified within the lane timeout, never drift; the other chains are still checked', async () => {
  hold.onRequest = () => 'hold';
  try {
    // An open drift on chain B from an earlier run: a hanging RPC must neither resolve nor repeat it.
    await db.pool.query(`INSERT INTO registry_drifts (lane, chain_id, subject, property, address, expected, observed) VALUES ('evm', $1, 'evm.tokens[USDC]', 'symbol()', $2, 'USDC', 'USDT')`, [B, usdcB.address]);
    const config = configWith({ evm: { chains: [chain(A, a.anvil.url), chain(B, hold.url)], tokens: [token(A, usdcA.address, 18), token(B, usdcB.address, 6)] } });
    const started = Date.now();
    const r = await within('verify_drift with a hanging chain', runVerifyDrift({ pool: db.pool, config, log: silent }, { concurrency: 1, laneTimeoutMs: 400 }), 10_000);
    const took = Date.now() - started;
    assert.ok(took < 5_000, `bounded by the lane timeout (${took} ms)`);
    assert.deepEqual(r.unverified_by_chain, { [String(B)]: { RPC_TIMEOUT: 4 } });
    assert.equal(r.drift, 1, "chain A's decimals are still checked and drift");
    const checks = await listRegistryChecks(db.pool, { limit: 20 });
    assert.deepEqual(checks.filter((c) => c.chain_id === B).map((c) => [c.outcome, c.error_code]), [['unverified', 'RPC_TIMEOUT'], ['unverified', 'RPC_TIMEOUT'], ['unverified', 'RPC_TIMEOUT'], ['unverified', 'RPC_TIMEOUT']]);
    const open = await listRegistryDrifts(db.pool, { state: 'open', limit: 10 });
    assert.deepEqual(open.map((d) => [d.chain_id, d.property]).sort(), [[A, 'decimals()'], [B, 'symbol()']], "B's old drift stays open: unverified is no evidence either way");
  } finally {
    hold.onRequest = null;
  }
  await db.pool.query('DELETE FROM registry_checks; DELETE FROM registry_drifts');
});

test('hostile answers: an oversized or malformed RPC answer is unverified; a contract answering kilobytes of control characters is stored safely', async () => {
  const config = configWith({
    evm: {
      // On chain A the hostile contract also stands as the CCTP transmitter: its localDomain() reverts.
      chains: [chain(A, a.anvil.url, { cctp: { domain: 0, token_messenger: cctpA.messenger.address, message_transmitter: hostile } }), chain(C, hostileRpc.url), chain(D, `${hostileRpc.url}/redirect`)],
      // Chain 99 has no rpc_url here (a chain reached through a remote host): not read.
      tokens: [token(A, hostile, 6, 'EVIL'), token(C, freshAddress(), 6), token(D, usdcA.address, 6), token(99, usdcA.address, 6)],
      fee_caps: [{ chain_id: 99, max_fee_per_gas_cap_wei: '1000' }],
    },
  });
  const r = await within('verify_drift with hostile answers', runVerifyDrift({ pool: db.pool, config, log: silent }, settings), 15_000);
  assert.deepEqual(r.unverified_by_chain, { [String(C)]: { RPC_ANSWER_MALFORMED: 1, RPC_ANSWER_TOO_LARGE: 3 }, [String(D)]: { RPC_UNREACHABLE: 4 } });
  assert.deepEqual(r.not_read, { '99': 3 });
  assert.ok(hostileRpc.calls.includes('redirect'));
  assert.equal((await listRegistryChecks(db.pool, { limit: 50 })).filter((c) => c.chain_id === 99).length, 0, 'nothing recorded for a chain not read');
  assert.ok(hostileRpc.calls.includes('eth_call'));
  const drifts = await listRegistryDrifts(db.pool, { state: 'open', limit: 10 });
  assert.deepEqual(drifts.map((d) => d.chain_id), [A, A, A, A], 'only the real chain drifts');
  const byProperty = Object.fromEntries(drifts.map((d) => [d.property, d.observed]));
  assert.equal(byProperty['localDomain()'], 'reverted', "a revert is the contract's own answer: drift");
  assert.equal(byProperty['localMessageTransmitter()'], cctpA.transmitter.address, 'the messenger names its own transmitter, not the configured one');
  const symbol = drifts.find((d) => d.property === 'symbol()')!;
  assert.ok(symbol.observed.length <= 210, `cut (${symbol.observed.length} characters)`);
  assert.match(symbol.observed, /^\\u0000\\u000a\\u007f\\u001bA\\u0000/, 'control characters escaped');
  assert.doesNotMatch(symbol.observed, /[\u0000-\u001f]/);
  const decimals = drifts.find((d) => d.property === 'decimals()')!;
  assert.notEqual(decimals.observed, '6');
  // The audit event carries the escaped text too, and the API answers it.
  const { rows } = await db.pool.query(`SELECT details FROM audit_outbox WHERE action = 'registry.drift_detected' AND entity_id = $1`, [String(symbol.id)]);
  assert.equal(rows[0].details.observed, symbol.observed);
  await db.pool.query('DELETE FROM registry_checks; DELETE FROM registry_drifts');
});

test('USDT0: an OFT whose peer for the other eid is not the configured deployment is drift', async () => {
  const compiled = compileContracts('Oft.sol');
  const wallet = createWalletClient({ account: privateKeyToAccount(ANVIL_DEV_KEY), transport: http(a.anvil.url, { retryCount: 0 }) });
  const deploy = async (c: { abi: never; bytecode: Hex }, args: unknown[]) =>
    (await a.chain.waitForTransactionReceipt({ hash: await wallet.deployContract({ abi: c.abi, bytecode: c.bytecode, args, chain: null } as never), pollingInterval: 50 })).contractAddress!.toLowerCase() as Address;
  const usdt0A = await deployToken(a.chain, a.anvil.url, ANVIL_DEV_KEY, { symbol: 'USDT0', decimals: 6 });
  const usdt0B = await deployToken(b.chain, b.anvil.url, ANVIL_DEV_KEY, { symbol: 'USDT0', decimals: 6 });
  const endpoint = await deploy(compiled.TestEndpointV2 as never, [30101, 1n, 1n]);
  const oftA = await deploy(compiled.TestOFT as never, [usdt0A.address, endpoint, false]);
  const oftB = freshAddress().toLowerCase();
  const setPeer = async (peer: string) => {
    const hash = await wallet.writeContract({ address: oftA, abi: compiled.TestOFT!.abi, functionName: 'setPeer', args: [30110, pad(peer as Hex)], chain: null } as never);
    await a.chain.waitForTransactionReceipt({ hash, pollingInterval: 50 });
  };
  await setPeer(oftB);
  const config = configWith({
    evm: { chains: [chain(A, a.anvil.url), chain(B, b.anvil.url)], tokens: [token(A, usdt0A.address, 6, 'USDT0'), token(B, usdt0B.address, 6, 'USDT0')] },
    usdt0: { deployments: [{ chain_id: A, eid: 30101, oft: oftA }, { chain_id: B, eid: 30110, oft: oftB }] },
  });
  const r1 = await runVerifyDrift({ pool: db.pool, config, log: silent }, settings);
  const usdt0 = (await listRegistryChecks(db.pool, { lane: 'usdt0', limit: 10 })).map((c) => [c.chain_id, c.property, c.outcome]).sort();
  // B's "OFT" is an address without code here (and so has no peers): drift on B, A agrees.
  assert.deepEqual(usdt0, [[A, 'code', 'match'], [A, 'peers(30110)', 'match'], [B, 'code', 'drift'], [B, 'peers(30101)', 'drift']]);
  assert.equal(r1.unverified, 0);
  const other = freshAddress().toLowerCase();
  await setPeer(other);
  await runVerifyDrift({ pool: db.pool, config, log: silent }, settings);
  const peer = (await listRegistryDrifts(db.pool, { lane: 'usdt0', state: 'open', limit: 10 })).find((d) => d.chain_id === A)!;
  assert.equal(peer.property, 'peers(30110)');
  assert.equal(peer.expected, pad(oftB as Hex));
  assert.equal(peer.observed, pad(other as Hex));
  await db.pool.query('DELETE FROM registry_checks; DELETE FROM registry_drifts');
});

test('Hyperliquid: a bridge address without code is drift; with code (a lone STOP byte is code) it agrees', async () => {
  const bridge = freshAddress().toLowerCase();
  const config = configWith({
    evm: { chains: [chain(A, a.anvil.url)], tokens: [token(A, usdcA.address, 6)] },
    hyperliquid: { chain_id: A, bridge, info_url: 'http://127.0.0.1:9/info' },
  });
  await runVerifyDrift({ pool: db.pool, config, log: silent }, settings);
  const [drift] = await listRegistryDrifts(db.pool, { lane: 'hyperliquid', state: 'open', limit: 10 });
  assert.deepEqual([drift?.subject, drift?.property, drift?.expected, drift?.observed], ['hyperliquid.bridge', 'code', 'code', 'none']);
  await a.anvil.rpc('anvil_setCode', [bridge, '0x00']);
  const r = await runVerifyDrift({ pool: db.pool, config, log: silent }, settings);
  assert.equal(r.resolved, 1);
  assert.deepEqual(await listRegistryDrifts(db.pool, { state: 'open', limit: 10 }), []);
  await db.pool.query('DELETE FROM registry_checks; DELETE FROM registry_drifts');
});

test("an RPC URL of another chain is drift of that chain's id (every fact read there is read on the other chain)", async () => {
  // Chain A's configured endpoint is chain B's node.
  const crossed = configWith({ evm: { chains: [chain(A, b.anvil.url)] } });
  const r = await runVerifyDrift({ pool: db.pool, config: crossed, log: silent }, settings);
  assert.equal(r.drift, 1);
  const [drift] = await listRegistryDrifts(db.pool, { state: 'open', limit: 10 });
  assert.deepEqual(
    { lane: drift!.lane, chain_id: drift!.chain_id, subject: drift!.subject, property: drift!.property, expected: drift!.expected, observed: drift!.observed },
    { lane: 'evm', chain_id: A, subject: `evm.chains[${A}]`, property: 'chain_id', expected: String(A), observed: String(B) },
  );
  const right = configWith({ evm: { chains: [chain(A, a.anvil.url)] } });
  const fixed = await runVerifyDrift({ pool: db.pool, config: right, log: silent }, settings);
  assert.deepEqual({ match: fixed.match, drift: fixed.drift, resolved: fixed.resolved }, { match: 1, drift: 0, resolved: 1 });
  await db.pool.query('DELETE FROM registry_checks; DELETE FROM registry_drifts; DELETE FROM attention_events');
});
