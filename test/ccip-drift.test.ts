import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import pino from 'pino';
import { type Address } from 'viem';
import { loadConfig } from '../src/config.ts';
import { laneNamed } from '../src/executors/lanes.ts';
import { listAttention } from '../src/persistence/notifications.ts';
import { listRegistryChecks, listRegistryDrifts } from '../src/persistence/registry-drifts.ts';
import { findSweep } from '../src/sweeps/sweeps.ts';
import { registryFacts } from '../src/sweeps/verify-drift.ts';
import { freshAddress } from './helpers/anvil.ts';
import { ccipConfigFile, DESTINATION_SELECTOR, SOURCE_CHAIN_ID, startCcipWorld, writeCcip, type CcipWorld } from './helpers/ccip.ts';
import { testDatabase } from './helpers/db.ts';
import { startFaultProxy, type FaultProxy } from './helpers/fault-proxy.ts';
import { within } from './helpers/wait.ts';

/**
 * ccip_drift on the CCIP test contracts (two anvil chains, wired both ways): the Routers' lanes and
 * the token pools read on chain and compared with the ccip section. A Router whose lane to the other
 * chain was taken down is drift; a token pool re-pointed in the TokenAdminRegistry is drift; each is
 * resolved when the chain is fixed; a hanging RPC is unverified, never drift, and leaves an open
 * episode as it was. The episodes are verify_drift's (registry_drifts, a registry_drift attention
 * event each); ccip_drift never resolves another lane's.
 */

const db = await testDatabase();
const silent = pino({ level: 'silent' });
let w: CcipWorld;
let hold: FaultProxy;
before(async () => {
  w = await startCcipWorld();
  hold = await startFaultProxy(w.source.rpcUrl);
});
after(async () => {
  await hold?.stop();
  await w?.stop();
});

const sweep = () => findSweep('ccip_drift');
function configOf(opts: Parameters<typeof ccipConfigFile>[1] = {}) {
  return loadConfig({ FERRY_CONFIG_FILE: ccipConfigFile(w, opts), CCIP_HOT_KEY: w.hotKey, FERRY_CCIP_DRIFT_TIMEOUT_MS: '600' });
}
async function run(config = configOf()) {
  const s = sweep().settings(config);
  return within('ccip_drift', sweep().run({ pool: db.pool, config, log: silent } as never, s), 15_000);
}
const open = async () => (await listRegistryDrifts(db.pool, { state: 'open', limit: 50 })).map((d) => [d.lane, d.chain_id, d.subject, d.property, d.observed]);

test('the ccip section asserts the Routers lanes, the OffRamps and the token pools; on the wired chains all of it matches', async () => {
  const config = configOf();
  const facts = registryFacts(config, [laneNamed('ccip')!]);
  const src = facts.filter((f) => f.chainId === SOURCE_CHAIN_ID).map((f) => `${f.subject} ${typeof f.property === 'string' ? f.property : f.property.name}`);
  assert.deepEqual(src, [
    'ccip.chains[31337].router code',
    `ccip.chains[31337].router isChainSupported(${DESTINATION_SELECTOR})`,
    'ccip.chains[31337].off_ramp code',
    'ccip.chains[31337].token_admin_registry getPool(USDC)',
    'ccip.chains[31337].token_pools[USDC] getToken()',
    `ccip.chains[31337].token_pools[USDC] isSupportedChain(${DESTINATION_SELECTOR})`,
  ]);
  assert.deepEqual(sweep().settings(config), { enabled: true, intervalSeconds: 900, batchSize: null, maxRunMs: 600 });
  const r = (await run(config)) as any;
  assert.equal(r.checked, 12);
  assert.equal(r.match, 12, JSON.stringify(r));
  assert.equal(r.drift, 0);
  assert.deepEqual(await open(), []);
});

test('a Router whose lane was taken down is drift, once per episode with an attention event; resolved when the lane is back', async () => {
  await writeCcip(w.source, w.source.router, 'setOnRamp', [DESTINATION_SELECTOR, '0x0000000000000000000000000000000000000000']);
  try {
    const r = (await run()) as any;
    assert.equal(r.drift, 1);
    assert.equal(r.detected, 1);
    assert.deepEqual(await open(), [['ccip', SOURCE_CHAIN_ID, 'ccip.chains[31337].router', `isChainSupported(${DESTINATION_SELECTOR})`, 'false']]);
    const events = (await listAttention(db.pool, { kind: 'registry_drift' })).filter((e) => e.details.lane === 'ccip');
    assert.equal(events.length, 1);
    assert.match(events[0].summary, /isChainSupported/);
    // Seen again: the same episode, no new event.
    assert.equal(((await run()) as any).detected, 0);
    assert.equal((await listAttention(db.pool, { kind: 'registry_drift' })).filter((e) => e.details.lane === 'ccip').length, 1);
  } finally {
    await writeCcip(w.source, w.source.router, 'setOnRamp', [DESTINATION_SELECTOR, w.source.onRamp.address]);
  }
  const fixed = (await run()) as any;
  assert.equal(fixed.resolved, 1);
  assert.equal(fixed.drift, 0);
  assert.deepEqual(await open(), []);
});

test('a token pool re-pointed in the TokenAdminRegistry is drift (the Router would pay into it); resolved when pointed back', async () => {
  const other = freshAddress().toLowerCase() as Address;
  await writeCcip(w.source, w.source.registry, 'setPool', [w.source.token.address, other]);
  try {
    // The OnRamp follows the registry: the re-pointed pool is where a send would go.
    const used = await w.source.chain.readContract({ address: w.source.onRamp.address, abi: w.source.onRamp.abi, functionName: 'getPoolBySourceToken', args: [DESTINATION_SELECTOR, w.source.token.address] });
    assert.equal(String(used).toLowerCase(), other);
    const r = (await run()) as any;
    assert.equal(r.drift, 1);
    assert.deepEqual(await open(), [['ccip', SOURCE_CHAIN_ID, 'ccip.chains[31337].token_admin_registry', 'getPool(USDC)', other]]);
    const drift = (await listRegistryDrifts(db.pool, { state: 'open', limit: 5 }))[0];
    assert.equal(drift.expected, w.source.pool.address);
  } finally {
    await writeCcip(w.source, w.source.registry, 'setPool', [w.source.token.address, w.source.pool.address]);
  }
  assert.equal(((await run()) as any).resolved, 1);
  assert.deepEqual(await open(), []);
  // A pool that stopped supporting the other chain is drift too.
  await writeCcip(w.source, w.source.pool, 'setSupportedChain', [DESTINATION_SELECTOR, false]);
  try {
    assert.equal(((await run()) as any).drift, 1);
    assert.deepEqual((await open()).map((d) => d[3]), [`isSupportedChain(${DESTINATION_SELECTOR})`]);
  } finally {
    await writeCcip(w.source, w.source.pool, 'setSupportedChain', [DESTINATION_SELECTOR, true]);
  }
  assert.equal(((await run()) as any).resolved, 1);
});

test('a hanging RPC is unverified within the timeout, never drift; an open episode stays open; another lane\'s drift is never touched', async () => {
  // An open episode of the ccip lane from an earlier run, and one of another lane the ccip section does not assert.
  await db.pool.query(
    `INSERT INTO registry_drifts (lane, chain_id, subject, property, address, expected, observed) VALUES
       ('ccip', $1, 'ccip.chains[31337].router', $2, $3, 'true', 'false'),
       ('evm', $1, 'evm.tokens[USDC]', 'decimals()', $4, '6', '18')`,
    [SOURCE_CHAIN_ID, `isChainSupported(${DESTINATION_SELECTOR})`, w.source.router.address, w.source.token.address],
  );
  hold.onRequest = () => 'hold';
  try {
    const started = Date.now();
    const r = (await run(configOf({ rpc: { source: hold.url } }))) as any;
    assert.ok(Date.now() - started < 5_000, 'bounded by the timeout');
    assert.equal(r.drift, 0);
    assert.deepEqual(r.unverified_by_chain, { [String(SOURCE_CHAIN_ID)]: { RPC_TIMEOUT: 6 } });
    assert.equal(r.match, 6, 'the other chain is still checked');
    const checks = await listRegistryChecks(db.pool, { lane: 'ccip', outcome: 'unverified', limit: 20 });
    assert.equal(checks.length, 6);
    assert.ok(checks.every((c) => c.chain_id === SOURCE_CHAIN_ID && c.error_code === 'RPC_TIMEOUT'));
    assert.deepEqual((await open()).map((d) => d[0]).sort(), ['ccip', 'evm'], 'unverified is no evidence either way; the evm episode is not ccip_drift\'s to resolve');
  } finally {
    hold.onRequest = null;
  }
  // The chain answers again: the ccip episode resolves; the other lane's stays open.
  assert.equal(((await run()) as any).resolved, 1);
  assert.deepEqual((await open()).map((d) => d[0]), ['evm']);
});

test('without a ccip section the sweep reads nothing', async () => {
  const r = await sweep().run({ pool: db.pool, config: loadConfig({}), log: silent } as never, sweep().settings(loadConfig({})));
  assert.equal(r.skipped, 'no ccip section');
});
