/**
 * Amounts in a reference currency (docs/policy.md, "Amounts in a reference currency"): a rule bounds
 * an amount in USD, read through a Chainlink-style AggregatorV3 feed (test/contracts/PriceFeed.sol)
 * on a real anvil with viem. Readings the feed's documentation tells consumers to refuse (stale past
 * the heartbeat, not positive, an incomplete or carried-over round) are refused, and a rule that
 * cannot be priced fails closed: the movement is refused at creation, at approval and at dispatch,
 * never allowed by a later rule.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { stringify as yaml } from 'yaml';
import { dispatchOne } from '../src/actors/dispatcher.ts';
import { runCli } from '../src/cli/run.ts';
import { parseConfigFile } from '../src/config-file.ts';
import { getPolicyProposal } from '../src/persistence/policy.ts';
import { priceSourceFromConfig } from '../src/prices/chainlink.ts';
import { approveMovement, createMovement } from '../src/services/movements.ts';
import { finalizePolicyProposal } from '../src/services/policy.ts';
import { proposeStandingOrder } from '../src/services/standing-orders.ts';
import { loadConfig } from '../src/config.ts';
import { collectingDeps } from './helpers/fixtures.ts';
import { ANVIL_CHAIN_ID, ANVIL_DEV_KEY, TEST_FEE_CAP_WEI, startLocalChain } from './helpers/anvil.ts';
import { deployAggregator } from './helpers/contracts.ts';
import { ferryForFile } from './helpers/ferry.ts';
import { callApi, type Reply } from './helpers/http.ts';
import { runtimeDeps } from './helpers/runtime.ts';
import { makeTemplateLive } from './helpers/templates.ts';
import { createTokens } from './helpers/tokens.ts';

const local = await startLocalChain();
after(() => local.anvil.stop());
const feed = await deployAggregator(local.chain, local.anvil.url, ANVIL_DEV_KEY, 8, 'ETH / USD');
const wrongDecimals = await deployAggregator(local.chain, local.anvil.url, ANVIL_DEV_KEY, 18, 'DAI / USD');
// A feed with no round yet: latestRoundData reverts ("No data present"), as a real aggregator's does.
const noRounds = await deployAggregator(local.chain, local.anvil.url, ANVIL_DEV_KEY, 8, 'LINK / USD');
const HEARTBEAT = 3600;
const now = () => Math.floor(Date.now() / 1000);
const fresh = (usd: bigint) => feed.setRound(usd * 10n ** 8n, now() - 60);
await fresh(2500n);

const file = {
  evm: { chains: [{ chain_id: ANVIL_CHAIN_ID, name: 'local', rpc_url: local.anvil.url, max_fee_per_gas_cap_wei: TEST_FEE_CAP_WEI }] },
  price_feeds: [
    { asset: 'ETH', currency: 'USD', chain_id: ANVIL_CHAIN_ID, address: feed.address, heartbeat_seconds: HEARTBEAT, decimals: 8 },
    // Configured as 8 decimals; the contract answers with 18.
    { asset: 'DAI', currency: 'USD', chain_id: ANVIL_CHAIN_ID, address: wrongDecimals.address, heartbeat_seconds: HEARTBEAT, decimals: 8 },
    { asset: 'LINK', currency: 'USD', chain_id: ANVIL_CHAIN_ID, address: noRounds.address, heartbeat_seconds: HEARTBEAT },
    // No contract at this address.
    { asset: 'WBTC', currency: 'USD', chain_id: ANVIL_CHAIN_ID, address: `0x${'ab'.repeat(20)}`, heartbeat_seconds: HEARTBEAT },
  ],
};
const dir = mkdtempSync(join(tmpdir(), 'ferry-prices-'));
const path = join(dir, 'ferry.yaml');
writeFileSync(path, yaml(file));

const { db, ferry } = await ferryForFile({ FERRY_CONFIG_FILE: path }, { runtime: 'api' });
const tokens = await createTokens(db.pool, {
  operator: 'operator',
  requester: 'requester',
  approver: 'approver',
  approver2: { name: 'approver-2', role: 'approver' },
});
type Who = keyof typeof tokens;
const call = (method: string, p: string, who: Who, body?: unknown): Promise<Reply> => callApi(ferry.url, method, p, tokens[who].token, body);
await makeTemplateLive(
  ferry.url,
  db.pool,
  { template_key: 'eth.pay', nodes: [{ node_key: 'pay', node_kind: 'action', action_type: 'transfer', executor_binding: 'exec.sim.action' }], edges: [] },
  { proposer: tokens.operator.token, approver: tokens.approver.token },
);

async function liveRules(set: unknown): Promise<void> {
  const p = await call('POST', '/v3/policy/rules', 'operator', set);
  assert.equal(p.status, 202, p.text);
  assert.equal((await call('POST', `/v3/policy/proposals/${p.body.id}/approve`, 'approver', {})).status, 200);
  const row = (await getPolicyProposal(db.pool, p.body.id))!;
  await finalizePolicyProposal({ pool: db.pool, now: () => new Date(row.challenge_ends_at!) }, p.body.id);
}

const create = (amount: string, asset = 'ETH') => call('POST', '/v3/movements', 'requester', { template_key: 'eth.pay', intent: { asset, amount } });

test('the Chainlink reader: a fresh answer is read with its decimals; stale, non-positive, incomplete and carried-over rounds, wrong decimals and missing feeds are refused', async () => {
  const parsed = parseConfigFile(yaml(file));
  assert.ok(parsed.ok, JSON.stringify(parsed));
  const source = priceSourceFromConfig(parsed.file)!;
  const at = () => new Date();

  await fresh(2500n);
  const ok = await source.read('ETH', 'USD', at());
  assert.equal(ok.ok, true, JSON.stringify(ok));
  assert.equal(ok.ok && ok.answer, '250000000000');
  assert.equal(ok.ok && ok.decimals, 8);
  assert.equal(ok.ok && ok.feed, `${ANVIL_CHAIN_ID}:${feed.address}`);

  const refused = async (write: () => Promise<void>, code: string) => {
    await write();
    const r = await source.read('eth', 'USD', at());
    assert.equal(r.ok, false, `${code}: ${JSON.stringify(r)}`);
    assert.equal(!r.ok && r.code, code, JSON.stringify(r));
  };
  await refused(() => feed.setRound(2500n * 10n ** 8n, now() - HEARTBEAT - 5), 'PRICE_STALE');
  await refused(() => feed.setRound(0n, now()), 'PRICE_NOT_POSITIVE');
  await refused(() => feed.setRound(-1n, now()), 'PRICE_NOT_POSITIVE');
  await refused(() => feed.setRound(2500n * 10n ** 8n, 0, { startedAt: now() }), 'PRICE_ROUND_INCOMPLETE');
  await refused(() => feed.setRound(2500n * 10n ** 8n, now(), { answeredInRound: 1n }), 'PRICE_ROUND_INCOMPLETE');
  await refused(() => feed.setRound(2500n * 10n ** 8n, now() + 3600), 'PRICE_UNREADABLE');
  // Just inside the heartbeat is fresh again.
  await feed.setRound(2500n * 10n ** 8n, now() - HEARTBEAT + 30);
  assert.equal((await source.read('ETH', 'USD', at())).ok, true);

  const dai = await source.read('DAI', 'USD', at());
  assert.equal(!dai.ok && dai.code, 'PRICE_UNREADABLE', JSON.stringify(dai));
  assert.match(!dai.ok ? dai.message : '', /18 decimals/);
  const wbtc = await source.read('WBTC', 'USD', at());
  assert.equal(!wbtc.ok && wbtc.code, 'PRICE_UNREADABLE', JSON.stringify(wbtc));
  const link = await source.read('LINK', 'USD', at());
  assert.equal(!link.ok && link.code, 'PRICE_UNREADABLE', JSON.stringify(link));
  const eur = await source.read('ETH', 'EUR', at());
  assert.equal(!eur.ok && eur.code, 'PRICE_FEED_NOT_CONFIGURED');

  // An endpoint that serves another chain than the feed's, and one that does not answer: no price.
  const elsewhere = parseConfigFile(
    yaml({
      evm: { chains: [{ chain_id: 1, rpc_url: local.anvil.url, max_fee_per_gas_cap_wei: TEST_FEE_CAP_WEI }, { chain_id: 10, rpc_url: 'http://127.0.0.1:9', max_fee_per_gas_cap_wei: TEST_FEE_CAP_WEI }] },
      price_feeds: [
        { asset: 'ETH', currency: 'USD', chain_id: 1, address: feed.address, heartbeat_seconds: HEARTBEAT },
        { asset: 'OP', currency: 'USD', chain_id: 10, address: feed.address, heartbeat_seconds: HEARTBEAT },
      ],
    }),
  );
  assert.ok(elsewhere.ok, JSON.stringify(elsewhere));
  const other = priceSourceFromConfig(elsewhere.file)!;
  const mismatch = await other.read('ETH', 'USD', at());
  assert.equal(!mismatch.ok && mismatch.code, 'PRICE_UNREADABLE', JSON.stringify(mismatch));
  assert.match(!mismatch.ok ? mismatch.message : '', /serves chain 31337/);
  const down = await other.read('OP', 'USD', at());
  assert.equal(!down.ok && down.code, 'PRICE_UNREADABLE', JSON.stringify(down));
});

test('a price feed must be on a configured chain, once per asset and currency', () => {
  const bad = parseConfigFile(yaml({ ...file, price_feeds: [{ ...file.price_feeds[0], chain_id: 1 }] }));
  assert.equal(bad.ok, false);
  assert.match(!bad.ok ? bad.reason : '', /^price_feeds\[0\]\.chain_id: chain 1 is not in evm.chains/);
  const twice = parseConfigFile(yaml({ ...file, price_feeds: [file.price_feeds[0], file.price_feeds[0]] }));
  assert.match(!twice.ok ? twice.reason : '', /^price_feeds\[1\]\.asset: a second feed of ETH\/USD/);
  const noHeartbeat = parseConfigFile(yaml({ ...file, price_feeds: [{ ...file.price_feeds[0], heartbeat_seconds: undefined }] }));
  assert.match(!noHeartbeat.ok ? noHeartbeat.reason : '', /^price_feeds\[0\]\.heartbeat_seconds/);
});

test('a rule bounds an amount in USD: the tier follows the price; a stale price refuses at creation, approval and dispatch', async () => {
  await fresh(2500n);
  await liveRules({
    rules: [
      { id: 'large-usd', match: { amount: { at_least: '100000', currency: 'USD' } }, action: { type: 'require_approvals', approvals: 2 } },
      { id: 'rest', action: { type: 'allow' } },
    ],
  });
  // 40 ETH at 2500 USD is 100000 USD: the large tier; 39 ETH is not.
  const large = await create('40');
  assert.equal(large.status, 201, large.text);
  assert.equal(large.body.movement.policy.rule_id, 'large-usd');
  assert.equal(large.body.movement.approval_quorum, 2);
  const small = await create('39');
  assert.equal(small.status, 201, small.text);
  assert.equal(small.body.movement.policy.rule_id, 'rest');
  const audit = await db.pool.query(`SELECT details FROM audit_outbox WHERE action = 'movement.create' AND entity_id = $1`, [large.body.movement.id]);
  assert.equal(audit.rows[0].details.policy.prices[0].answer, '250000000000', 'the creation records the price it used');
  // The price moves: the same 39 ETH is now above 100000 USD.
  await fresh(3000n);
  assert.equal((await create('39')).body.movement.policy.rule_id, 'large-usd');

  // Approved while the price is fresh, dispatched once it is stale.
  const toDispatch = small.body.movement;
  const approved = await call('POST', `/v3/movements/${toDispatch.id}/approve`, 'approver', { compiled_plan_hash: toDispatch.compiled_plan_hash });
  assert.equal(approved.body.movement.state, 'APPROVED', approved.text);

  await feed.setRound(2500n * 10n ** 8n, now() - 2 * HEARTBEAT);
  // Creation: refused with the price's code, although the next rule would allow the movement.
  const stale = await create('1');
  assert.equal(stale.status, 422, stale.text);
  assert.equal(stale.body.error.code, 'POLICY_PRICE_UNAVAILABLE');
  assert.equal(stale.body.error.details.price_code, 'PRICE_STALE');
  assert.equal(stale.body.error.details.rule_id, 'large-usd');
  // An asset without a feed: refused the same way (no feed, no price, no decision).
  const noFeed = await create('1', 'UNI');
  assert.equal(noFeed.body.error?.code, 'POLICY_PRICE_UNAVAILABLE', noFeed.text);
  assert.equal(noFeed.body.error.details.price_code, 'PRICE_FEED_NOT_CONFIGURED');
  // Approval: refused.
  const m = large.body.movement;
  const approve = await call('POST', `/v3/movements/${m.id}/approve`, 'approver', { compiled_plan_hash: m.compiled_plan_hash });
  assert.equal(approve.status, 422, approve.text);
  assert.equal(approve.body.error.code, 'POLICY_PRICE_UNAVAILABLE');
  // Dispatch: the node fails with the code instead of recording SUBMITTING.
  assert.equal(await dispatchOne(runtimeDeps(db.pool, { FERRY_CONFIG_FILE: path })), true);
  const { rows } = await db.pool.query(`SELECT node_state, error_code FROM request_nodes WHERE request_id = $1`, [toDispatch.id]);
  assert.deepEqual(rows[0], { node_state: 'FAILED', error_code: 'POLICY_PRICE_UNAVAILABLE' });
  const submitted = await db.pool.query(`SELECT 1 FROM transitions WHERE request_id = $1 AND to_state = 'SUBMITTING'`, [toDispatch.id]);
  assert.equal(submitted.rows.length, 0);

  // ferry policy test shows the price it read, or why none could be used.
  const cli = async (...args: string[]) => {
    let out = '';
    const code = await runCli(args, { env: { FERRY_URL: ferry.url, FERRY_TOKEN: tokens.requester.token }, io: { out: (t) => (out += t + '\n'), err: (t) => (out += t + '\n') } });
    return { code, out };
  };
  const staleTest = await cli('policy', 'test', '--template', 'eth.pay', '--intent', JSON.stringify({ asset: 'ETH', amount: '40' }));
  assert.equal(staleTest.code, 0, staleTest.out);
  assert.match(staleTest.out, /^live \(version \d+\): REFUSED by rule large-usd$/m);
  assert.match(staleTest.out, /^  price ETH\/USD: none \(PRICE_STALE\)$/m);
  assert.match((await cli('policy', 'rules')).out, /large-usd: amount >= 100000 USD -> require 2 approvals/);

  // Fresh again: the same movement is approvable.
  await fresh(2500n);
  const again = await call('POST', `/v3/movements/${m.id}/approve`, 'approver', { compiled_plan_hash: m.compiled_plan_hash });
  assert.equal(again.status, 200, again.text);
  const approval = await db.pool.query(`SELECT details FROM audit_outbox WHERE action = 'movement.approve' AND entity_id = $1`, [m.id]);
  assert.equal(approval.rows[0].details.policy.prices[0].answer, '250000000000', 'the approval records the price it was checked with');
  const freshTest = await cli('policy', 'test', '--template', 'eth.pay', '--intent', JSON.stringify({ asset: 'ETH', amount: '40' }));
  assert.match(freshTest.out, /^live \(version \d+\): ALLOWED by rule large-usd; needs 2 approvals$/m);
  assert.match(freshTest.out, new RegExp(`^  price ETH/USD: 250000000000 \\(8 decimals\\), round \\d+ of .*, feed ${ANVIL_CHAIN_ID}:${feed.address}$`, 'm'));
});

test('prices are read before the creating and approving transactions open: no RPC call while a movement row is locked', async () => {
  await fresh(2500n);
  await liveRules({ rules: [{ id: 'large-usd', match: { amount: { at_least: '100000', currency: 'USD' } }, action: { type: 'require_approvals', approvals: 1 } }, { id: 'rest', action: { type: 'allow' } }] });
  const deps = runtimeDeps(db.pool, { FERRY_CONFIG_FILE: path });
  const parsed = parseConfigFile(yaml(file));
  assert.ok(parsed.ok);
  const real = priceSourceFromConfig(parsed.file)!;
  // Each read first counts this pool's sessions that sit in an open transaction, as one waiting on
  // an RPC answer would.
  const open: number[] = [];
  const watching = {
    read: async (asset: string, currency: string, at: Date) => {
      const { rows } = await db.pool.query(
        `SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND application_name = current_setting('application_name') AND state LIKE 'idle in transaction%'`,
      );
      open.push(rows[0].n);
      return real.read(asset, currency, at);
    },
  };
  const created = await createMovement({ ...deps, prices: watching }, { actor: `principal:${tokens.requester.principal_id}`, templateKey: 'eth.pay', intent: { asset: 'ETH', amount: '40' } });
  assert.equal(created.movement.policy_rule_id, 'large-usd');
  await approveMovement({ ...deps, prices: watching }, created.movement.id, {
    actor: `principal:${tokens.approver.principal_id}`,
    compiledPlanHash: created.movement.compiled_plan_hash,
  });
  assert.ok(open.length >= 2, `the price was read at creation and at approval (${open.length} reads)`);
  assert.deepEqual(open, open.map(() => 0), 'no transaction of this pool was open during a price read');
});

test('a standing order\'s required approvals read the price of its maximum before the proposing transaction opens', async () => {
  await fresh(2500n);
  const vault = await call('POST', '/v3/policy/address-book', 'operator', { name: 'eth-vault', network: 'sim', address: 'eth-vault', owner: 'treasury', kind: 'internal' });
  assert.equal(vault.status, 202, vault.text);
  assert.equal((await call('POST', `/v3/policy/proposals/${vault.body.id}/approve`, 'approver', {})).status, 200);
  const row = (await getPolicyProposal(db.pool, vault.body.id))!;
  await finalizePolicyProposal({ pool: db.pool, now: () => new Date(row.challenge_ends_at!) }, vault.body.id);
  await liveRules({ rules: [{ id: 'large-usd', match: { amount: { at_least: '100000', currency: 'USD' } }, action: { type: 'require_approvals', approvals: 2 } }, { id: 'rest', action: { type: 'allow' } }] });
  const parsed = parseConfigFile(yaml(file));
  assert.ok(parsed.ok);
  const real = priceSourceFromConfig(parsed.file)!;
  const open: number[] = [];
  const watching = {
    read: async (asset: string, currency: string, at: Date) => {
      const { rows } = await db.pool.query(
        `SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND application_name = current_setting('application_name') AND state LIKE 'idle in transaction%'`,
      );
      open.push(rows[0].n);
      return real.read(asset, currency, at);
    },
  };
  const order = await proposeStandingOrder(
    { pool: db.pool, config: loadConfig({ FERRY_DATA_DIR: '.ferry/test-prices' }), transitions: collectingDeps(), prices: watching },
    {
      name: 'eth-sweep',
      template_key: 'eth.pay',
      asset: 'ETH',
      destinations: ['eth-vault'],
      max_per_run: '40',
      max_per_window: '80',
      window_seconds: 86400,
      trigger: { kind: 'schedule', schedule: { cron: '0 * * * *' }, amount: '40' },
      expires_at: new Date(Date.now() + 30 * 86400_000).toISOString(),
    },
    `principal:${tokens.operator.principal_id}`,
  );
  // 40 ETH at 2500 USD is 100000 USD: the large tier.
  assert.equal(order.required_approvals, 2);
  assert.ok(open.length >= 1, 'the price was read');
  assert.deepEqual(open, open.map(() => 0), 'no transaction of this pool was open during a price read');
});

test('a dispatcher reads the rule set once per round, inside its transaction; a price the new set needs that was not read ahead defers the node, never fails it', async () => {
  await fresh(2500n);
  await liveRules({ rules: [{ id: 'rest', action: { type: 'allow' } }] });
  // Earlier tests' movements wait elsewhere: these rounds dispatch this test's movements only.
  await db.pool.query(`UPDATE request_nodes SET dispatch_after = now() + interval '1 day' WHERE node_state = 'READY'`);
  // One worker's dispatcher over two rounds: what its gate saw in the first is what it reads prices for in the second.
  const deps = runtimeDeps(db.pool, { FERRY_CONFIG_FILE: path });
  const approved = async (amount: string) => {
    const made = await create(amount);
    assert.equal(made.status, 201, made.text);
    const m = made.body.movement;
    const ok = await call('POST', `/v3/movements/${m.id}/approve`, 'approver', { compiled_plan_hash: m.compiled_plan_hash });
    assert.equal(ok.body.movement.state, 'APPROVED', ok.text);
    return m.id as string;
  };
  // Statements the dispatcher sends through the pool itself, outside its transactions.
  const outside: string[] = [];
  const query = db.pool.query;
  db.pool.query = ((...args: unknown[]) => {
    outside.push(typeof args[0] === 'string' ? args[0] : String((args[0] as { text?: string }).text));
    return (query as (...a: unknown[]) => unknown).apply(db.pool, args);
  }) as typeof db.pool.query;
  const readsOutside = () => outside.filter((t) => /FROM policy_rule_sets/.test(t)).length;
  const nodeOf = async (id: string) => (await db.pool.query(`SELECT node_state, error_code FROM request_nodes WHERE request_id = $1`, [id])).rows[0];
  const submitting = async (id: string) => (await db.pool.query(`SELECT 1 FROM transitions WHERE request_id = $1 AND to_state = 'SUBMITTING'`, [id])).rows.length;
  try {
    const first = await approved('1');
    assert.equal(await dispatchOne(deps), true);
    assert.equal(await submitting(first), 1);
    assert.equal(readsOutside(), 1, 'the first round reads the set ahead once (nothing seen yet)');

    // The live set starts to bound amounts in USD after this worker's gate last looked.
    await liveRules({ rules: [{ id: 'large-usd', match: { amount: { at_least: '100000', currency: 'USD' } }, action: { type: 'require_approvals', approvals: 1 } }, { id: 'rest', action: { type: 'allow' } }] });
    const second = await approved('2');
    assert.equal(await dispatchOne(deps), true);
    assert.equal(readsOutside(), 1, 'no read of the rule set outside the transaction once one was seen');
    assert.deepEqual(await nodeOf(second), { node_state: 'READY', error_code: 'PRICE_NOT_READ_AHEAD' }, 'deferred, not failed');
    assert.equal(await submitting(second), 0);

    // The next round reads the price for the set it saw, and goes on.
    await db.pool.query(`UPDATE request_nodes SET dispatch_after = now() - interval '1 second' WHERE request_id = $1`, [second]);
    assert.equal(await dispatchOne(deps), true);
    assert.equal(await submitting(second), 1);
    assert.equal(readsOutside(), 1);
  } finally {
    db.pool.query = query;
  }
});
