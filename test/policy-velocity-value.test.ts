/**
 * Velocity limits in a reference currency (docs/policy.md, "Limits in a reference currency"): a
 * limit sums the values of several assets' amounts in USD, each at its Chainlink-style feed's price
 * (test/contracts/PriceFeed.sol on a real anvil, read with viem). The prices are read before the
 * creating, approving and dispatching transactions; the sum is checked inside them under the one
 * lock of the limit's sum, so two movements in different assets that each fit but not together
 * cannot both pass. A window that cannot be valued (a stale price, an asset without a feed) refuses.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { stringify as yaml } from 'yaml';
import { dispatchOne } from '../src/actors/dispatcher.ts';
import { getPolicyProposal, lockVelocitySum } from '../src/persistence/policy.ts';
import { finalizePolicyProposal } from '../src/services/policy.ts';
import { ANVIL_CHAIN_ID, ANVIL_DEV_KEY, TEST_FEE_CAP_WEI, startLocalChain } from './helpers/anvil.ts';
import { deployAggregator } from './helpers/contracts.ts';
import { ferryForFile } from './helpers/ferry.ts';
import { callApi, type Reply } from './helpers/http.ts';
import { runtimeDeps } from './helpers/runtime.ts';
import { makeTemplateLive } from './helpers/templates.ts';
import { createTokens } from './helpers/tokens.ts';
import { waitFor } from './helpers/wait.ts';

const local = await startLocalChain();
after(() => local.anvil.stop());
const HEARTBEAT = 3600;
const now = () => Math.floor(Date.now() / 1000);
// Two feeds with different decimals, as Chainlink's differ between pairs: the values are added exactly.
const eth = await deployAggregator(local.chain, local.anvil.url, ANVIL_DEV_KEY, 8, 'ETH / USD');
const btc = await deployAggregator(local.chain, local.anvil.url, ANVIL_DEV_KEY, 18, 'BTC / USD');
const freshPrices = async () => {
  await eth.setRound(2500n * 10n ** 8n, now() - 60);
  await btc.setRound(50000n * 10n ** 18n, now() - 60);
};
await freshPrices();

const file = {
  evm: { chains: [{ chain_id: ANVIL_CHAIN_ID, name: 'local', rpc_url: local.anvil.url, max_fee_per_gas_cap_wei: TEST_FEE_CAP_WEI }] },
  price_feeds: [
    { asset: 'ETH', currency: 'USD', chain_id: ANVIL_CHAIN_ID, address: eth.address, heartbeat_seconds: HEARTBEAT, decimals: 8 },
    { asset: 'BTC', currency: 'USD', chain_id: ANVIL_CHAIN_ID, address: btc.address, heartbeat_seconds: HEARTBEAT, decimals: 18 },
  ],
};
const dir = mkdtempSync(join(tmpdir(), 'ferry-velocity-value-'));
const path = join(dir, 'ferry.yaml');
writeFileSync(path, yaml(file));

const { db, ferry } = await ferryForFile({ FERRY_CONFIG_FILE: path }, { runtime: 'api' });
const tokens = await createTokens(db.pool, { operator: 'operator', requester: 'requester', approver: 'approver' });
type Who = keyof typeof tokens;
const call = (method: string, p: string, who: Who, body?: unknown): Promise<Reply> => callApi(ferry.url, method, p, tokens[who].token, body);
await makeTemplateLive(
  ferry.url,
  db.pool,
  { template_key: 'value.pay', nodes: [{ node_key: 'pay', node_kind: 'action', action_type: 'transfer', executor_binding: 'exec.sim.action' }], edges: [] },
  { proposer: tokens.operator.token, approver: tokens.approver.token },
);
const deps = runtimeDeps(db.pool, { FERRY_CONFIG_FILE: path });

async function liveRules(set: unknown): Promise<void> {
  const p = await call('POST', '/v3/policy/rules', 'operator', set);
  assert.equal(p.status, 202, p.text);
  assert.equal((await call('POST', `/v3/policy/proposals/${p.body.id}/approve`, 'approver', {})).status, 200);
  const row = (await getPolicyProposal(db.pool, p.body.id))!;
  await finalizePolicyProposal({ pool: db.pool, now: () => new Date(row.challenge_ends_at!) }, p.body.id);
}

const allowAll = { id: 'default', action: { type: 'allow' } };
const create = (intent: Record<string, unknown>) => call('POST', '/v3/movements', 'requester', { template_key: 'value.pay', intent });
const approve = (m: { id: string; compiled_plan_hash: string }) => call('POST', `/v3/movements/${m.id}/approve`, 'approver', { compiled_plan_hash: m.compiled_plan_hash });
async function created(intent: Record<string, unknown>) {
  const c = await create(intent);
  assert.equal(c.status, 201, c.text);
  return c.body.movement as { id: string; compiled_plan_hash: string };
}
async function approved(intent: Record<string, unknown>): Promise<string> {
  const m = await created(intent);
  const a = await approve(m);
  assert.equal(a.body.movement?.state, 'APPROVED', a.text);
  return m.id;
}
async function nodeOf(id: string) {
  const { rows } = await db.pool.query(`SELECT node_state, error_code FROM request_nodes WHERE request_id = $1`, [id]);
  return rows[0] as { node_state: string; error_code: string | null };
}
const waiters = async (holder: { query: (q: string) => Promise<{ rows: { n: number }[] }> }, n: number) =>
  waitFor(`${n} transactions to wait on the velocity lock`, async () => {
    const { rows } = await holder.query(`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`);
    return rows[0].n === n ? true : null;
  });

test('the rule set refuses a limit that names both or neither of an asset and a currency, or assets without a currency', async () => {
  for (const limit of [
    { id: 'both', asset: 'ETH', currency: 'USD', window_seconds: 3600, max_amount: '1' },
    { id: 'neither', window_seconds: 3600, max_amount: '1' },
    { id: 'assets-alone', asset: 'ETH', assets: ['ETH', 'BTC'], window_seconds: 3600, max_amount: '1' },
  ]) {
    const p = await call('POST', '/v3/policy/rules', 'operator', { rules: [allowAll], limits: [limit] });
    assert.equal(p.status, 422, p.text);
    assert.equal(p.body.error.code, 'POLICY_INVALID', p.text);
    assert.match(p.body.error.message, new RegExp(`limit "${limit.id}"`));
  }
});

test('two concurrent dispatches in different assets that each fit under a USD limit but not together: exactly one is submitted', async () => {
  await freshPrices();
  await liveRules({ rules: [allowAll] });
  // Approved before the limit exists: 24 ETH is 60000 USD, 1 BTC 50000 USD; together 110000.
  const a = await approved({ asset: 'ETH', amount: '24' });
  const b = await approved({ asset: 'BTC', amount: '1' });
  await liveRules({ rules: [allowAll], limits: [{ id: 'usd-hourly', currency: 'USD', window_seconds: 3600, max_amount: '100000' }] });

  // One lock for the limit's sum, whatever the asset: both dispatches wait on it, inside their SUBMITTING transactions.
  const holder = await db.pool.connect();
  try {
    await holder.query('BEGIN');
    await lockVelocitySum(holder, 'usd-hourly:=USD:*');
    const both = Promise.all([dispatchOne(deps), dispatchOne(deps)]);
    await waiters(holder, 2);
    await holder.query('COMMIT');
    assert.deepEqual(await both, [true, true]);
  } finally {
    holder.release();
  }
  const nodes = [await nodeOf(a), await nodeOf(b)];
  const failed = nodes.filter((n) => n.node_state === 'FAILED');
  assert.equal(failed.length, 1, JSON.stringify(nodes));
  assert.equal(failed[0].error_code, 'VELOCITY_LIMIT_EXCEEDED');
  const submitted = await db.pool.query(`SELECT count(DISTINCT request_id)::int AS n FROM transitions WHERE request_id = ANY($1::uuid[]) AND to_state = 'SUBMITTING'`, [[a, b]]);
  assert.equal(submitted.rows[0].n, 1, 'only one movement ever recorded SUBMITTING');
  const audit = await db.pool.query(`SELECT details FROM audit_outbox WHERE action = 'policy.dispatch_refused' AND entity_id = ANY($1::text[])`, [[a, b]]);
  assert.equal(audit.rows.length, 1);
  const d = audit.rows[0].details;
  assert.equal(d.limit_id, 'usd-hourly');
  assert.equal(d.currency, 'USD');
  assert.equal(d.checked_at, 'dispatch');
  // The second saw the first, in the other asset, valued at its price.
  assert.ok(
    (d.used === '60000' && d.amount === '50000') || (d.used === '50000' && d.amount === '60000'),
    JSON.stringify(d),
  );
  assert.equal(d.total, '110000');
});

test('two concurrent approvals in different assets under a USD limit: the one that waits counts the other and is refused', async () => {
  await freshPrices();
  // One sum per destination, so the movements of the test above do not count here.
  await liveRules({ rules: [allowAll], limits: [{ id: 'usd-per-dest', currency: 'USD', window_seconds: 3600, max_amount: '100000', per_destination: true }] });
  const to = `0x${'bb'.repeat(20)}`;
  const a = await created({ asset: 'ETH', amount: '24', destination: to });
  const b = await created({ asset: 'BTC', amount: '1', destination: to });
  const holder = await db.pool.connect();
  let replies: Reply[];
  try {
    await holder.query('BEGIN');
    await lockVelocitySum(holder, `usd-per-dest:=USD:${to}`);
    const both = Promise.all([approve(a), approve(b)]);
    await waiters(holder, 2);
    await holder.query('COMMIT');
    replies = await both;
  } finally {
    holder.release();
  }
  const ok = replies.filter((r) => r.status === 200);
  const refused = replies.filter((r) => r.status !== 200);
  assert.equal(ok.length, 1, replies.map((r) => r.text).join('\n'));
  assert.equal(refused[0].status, 422, refused[0].text);
  assert.equal(refused[0].body.error.code, 'VELOCITY_LIMIT_EXCEEDED');
  assert.equal(refused[0].body.error.details.currency, 'USD');
  assert.equal(refused[0].body.error.details.total, '110000');
  assert.equal(refused[0].body.error.details.destination, to);
  // The approval that passed records the valued sum.
  const audit = await db.pool.query(`SELECT details FROM audit_outbox WHERE action = 'movement.approve' AND entity_id = ANY($1::text[])`, [[a.id, b.id]]);
  const velocity = audit.rows.map((r) => r.details.policy?.velocity).find(Boolean);
  assert.equal(velocity[0].currency, 'USD');
  assert.equal(velocity[0].used, '0');
  // A movement that fits with what is approved: 4 ETH (10000 USD) after 60000 or 50000.
  const small = await created({ asset: 'ETH', amount: '4', destination: to });
  assert.equal((await approve(small)).status, 200);
});

test('a USD limit whose window cannot be valued refuses: a stale price of an asset in the window, an asset without a feed; at creation, approval and dispatch', async () => {
  await freshPrices();
  await liveRules({ rules: [allowAll] });
  // A BTC movement approved and dispatched in the window (the movements approved above go first).
  const inWindow = await approved({ asset: 'BTC', amount: '0.1' });
  for (let i = 0; i < 10 && (await nodeOf(inWindow)).node_state === 'READY'; i++) assert.equal(await dispatchOne(deps), true);
  assert.notEqual((await nodeOf(inWindow)).node_state, 'FAILED');
  const toDispatch = await approved({ asset: 'ETH', amount: '1' });
  const toApprove = await created({ asset: 'ETH', amount: '1' });
  await liveRules({
    rules: [allowAll],
    limits: [{ id: 'usd-daily', currency: 'USD', window_seconds: 86400, max_amount: '10000000' }],
  });
  // BTC's feed goes stale.
  await btc.setRound(50000n * 10n ** 18n, now() - 2 * HEARTBEAT);

  const c = await create({ asset: 'ETH', amount: '1' });
  assert.equal(c.status, 422, c.text);
  assert.equal(c.body.error.code, 'POLICY_PRICE_UNAVAILABLE');
  assert.equal(c.body.error.details.limit_id, 'usd-daily');
  assert.equal(c.body.error.details.asset, 'BTC');
  assert.equal(c.body.error.details.currency, 'USD');
  assert.equal(c.body.error.details.price_code, 'PRICE_STALE');

  const ap = await approve(toApprove);
  assert.equal(ap.status, 422, ap.text);
  assert.equal(ap.body.error.code, 'POLICY_PRICE_UNAVAILABLE');

  // A worker that saw this rule set before it reads its prices (one that saw an older set defers the
  // node for a round, test/policy-prices.test.ts), fails it.
  assert.equal(await dispatchOne(runtimeDeps(db.pool, { FERRY_CONFIG_FILE: path })), true);
  assert.deepEqual(await nodeOf(toDispatch), { node_state: 'FAILED', error_code: 'POLICY_PRICE_UNAVAILABLE' });

  // ferry policy test says so too.
  const t = await call('POST', '/v3/policy/test', 'requester', { template_key: 'value.pay', intent: { asset: 'ETH', amount: '1' } });
  assert.equal(t.status, 200, t.text);
  assert.equal(t.body.live.code, 'POLICY_PRICE_UNAVAILABLE');
  assert.equal(t.body.live.limits[0].price_code, 'PRICE_STALE');

  // A limit that values only ETH does not need BTC's price.
  await liveRules({ rules: [allowAll], limits: [{ id: 'usd-eth', currency: 'USD', assets: ['ETH'], window_seconds: 86400, max_amount: '10000000' }] });
  assert.equal((await create({ asset: 'ETH', amount: '1' })).status, 201);
  // Fresh again: the all-asset limit values the window and allows.
  await freshPrices();
  await liveRules({ rules: [allowAll], limits: [{ id: 'usd-daily', currency: 'USD', window_seconds: 86400, max_amount: '10000000' }] });
  // An asset without a feed cannot be valued: refused.
  const noFeed = await create({ asset: 'UNI', amount: '1' });
  assert.equal(noFeed.status, 422, noFeed.text);
  assert.equal(noFeed.body.error.code, 'POLICY_PRICE_UNAVAILABLE');
  assert.equal(noFeed.body.error.details.asset, 'UNI');
  assert.equal(noFeed.body.error.details.price_code, 'PRICE_FEED_NOT_CONFIGURED');
  const fine = await create({ asset: 'ETH', amount: '1' });
  assert.equal(fine.status, 201, fine.text);
  const audit = await db.pool.query(`SELECT details FROM audit_outbox WHERE action = 'movement.create' AND entity_id = $1`, [fine.body.movement.id]);
  const v = audit.rows[0].details.policy.velocity[0];
  assert.equal(v.currency, 'USD');
  assert.deepEqual(v.valued.map((x: { asset: string }) => x.asset).sort(), ['BTC', 'ETH']);
});
