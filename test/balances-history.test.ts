import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import { findSweep } from '../src/sweeps/sweeps.ts';
import { BalanceFetcherRegistry, SimBalanceFetcher, type BalanceFetcher } from '../src/balances/fetchers.ts';
import { runBalanceHistoryRollup } from '../src/balances/rollup.ts';
import type { BalanceSweepDeps } from '../src/balances/sweep.ts';
import type { BalanceTarget } from '../src/balances/watch.ts';
import { runCli } from '../src/cli/run.ts';
import { loadConfig } from '../src/config.ts';
import { createApp } from '../src/http/app.ts';
import { createToken } from '../src/persistence/tokens.ts';
import { testDatabase } from './helpers/db.ts';
import { serveApp } from './helpers/http.ts';

/**
 * Fresh balances (GET /v3/balances?fresh=true, ferry balances --fresh) with one source that never
 * answers: it is reported per balance as timed out, the others are fetched, the answer is 200.
 * Then the balance_history_rollup sidecar over backdated snapshots: hourly and daily buckets with
 * min, max and last, each snapshot counted once across runs, buckets past retention deleted, and
 * GET /v3/balances/history serving them.
 */

const db = await testDatabase();
const config = loadConfig({ FERRY_DATA_DIR: '.ferry/test-balances-history', FERRY_BALANCE_FRESH_TIMEOUT_MS: '300', FERRY_BALANCE_FRESH_CONCURRENCY: '2' });
const silent = pino({ level: 'silent' });

const sim = (wallet: string, amount: bigint, extra: Partial<BalanceTarget> = {}): BalanceTarget => ({
  chain: 'sim',
  wallet,
  asset: 'USDC',
  lane: 'sim',
  fetcher: 'sim',
  symbol: 'USDC',
  label: null,
  sim: { amountBaseUnits: amount, decimals: 6, fail: false },
  ...extra,
});

// A source that never answers (an exchange API hanging): the request must not hang with it.
let slowCalls = 0;
const never: BalanceFetcher = {
  kind: 'never',
  fetch: () => {
    slowCalls++;
    return new Promise(() => {});
  },
};
const targets = [sim('fresh-a', 5_000_000n), sim('fresh-b', 7_250_000n), sim('fresh-slow', 1n, { fetcher: 'never' }), sim('fresh-broken', 1n, { sim: { amountBaseUnits: 1n, decimals: 6, fail: true } })];
const sources: BalanceSweepDeps = {
  pool: db.pool,
  log: silent,
  fetchers: new BalanceFetcherRegistry().register(new SimBalanceFetcher()).register(never),
  targets: async () => targets,
  intervalSeconds: 30,
  retentionSeconds: 3600,
};

const viewer = (await createToken(db.pool, { name: 'history-viewer', role: 'viewer' })).token;
const app = createApp({ pool: db.pool, config, balanceSources: sources });
async function get(path: string): Promise<{ status: number; body: any }> {
  const res = await app.request(path, { headers: { authorization: `Bearer ${viewer}` } });
  return { status: res.status, body: await res.json() };
}

test('fresh=true fetches now; a source past its timeout is reported as timed out, not a 500', async () => {
  const before = await get('/v3/balances?chain=sim');
  assert.equal(before.status, 200);
  assert.equal(before.body.balances.length, 0, 'nothing watched until fetched');

  const started = Date.now();
  const { status, body } = await get('/v3/balances?chain=sim&fresh=true');
  const took = Date.now() - started;
  assert.equal(status, 200, JSON.stringify(body));
  assert.ok(took < 5_000, `the request waits for the timeout only, not for the source (${took} ms)`);
  const by = Object.fromEntries(body.balances.map((b: any) => [b.wallet, b]));
  assert.deepEqual(Object.keys(by).sort(), ['fresh-a', 'fresh-b', 'fresh-broken', 'fresh-slow']);
  assert.deepEqual(by['fresh-a'].fresh, { status: 'fetched', code: null });
  assert.equal(by['fresh-a'].amount, '5');
  assert.equal(by['fresh-a'].stale, false);
  assert.equal(by['fresh-b'].amount, '7.25');
  assert.deepEqual(by['fresh-slow'].fresh, { status: 'timed_out', code: 'FRESH_TIMEOUT' });
  assert.equal(by['fresh-slow'].stale, true);
  assert.equal(by['fresh-slow'].amount, null);
  assert.equal(by['fresh-slow'].error.code, 'FRESH_TIMEOUT');
  assert.deepEqual(by['fresh-broken'].fresh, { status: 'failed', code: 'SIM_SCRIPTED_FAILURE' });
  assert.equal(slowCalls, 1);

  // Filters narrow what is fetched; without fresh the answer has no per-balance fetch status.
  const one = await get('/v3/balances?chain=sim&address=fresh-a&fresh=true');
  assert.deepEqual(one.body.balances.map((b: any) => [b.wallet, b.fresh.status]), [['fresh-a', 'fetched']]);
  assert.equal(slowCalls, 1, 'the slow source was not asked for another wallet');
  const plain = await get('/v3/balances?chain=sim');
  assert.equal(plain.body.balances[0].fresh, undefined);
  const snaps = await db.pool.query(`SELECT count(*)::int AS n FROM balance_snapshots WHERE wallet = 'fresh-a'`);
  assert.equal(snaps.rows[0].n, 2, 'each fresh fetch appends a snapshot');

  const bad = await get('/v3/balances?fresh=yes');
  assert.equal(bad.status, 400);
  assert.equal(bad.body.error.code, 'VALIDATION_FAILED');
});

test('ferry balances --fresh names the source that timed out', async () => {
  const { url, stop } = await serveApp(app);
  try {
    const out: string[] = [];
    const err: string[] = [];
    const io = { out: (t: string) => void out.push(t), err: (t: string) => void err.push(t) };
    assert.equal(await runCli(['balances', '--chain', 'sim', '--fresh'], { env: { FERRY_URL: url, FERRY_TOKEN: viewer }, io }), 0, err.join('\n'));
    const text = out.join('\n');
    assert.match(text, /sim\s+fresh-a\s+-\s+USDC\s+5\s+\S+\s+ok \(fresh\)/);
    assert.match(text, /sim\s+fresh-slow\s+-\s+USDC\s+-\s+never\s+STALE \(fresh fetch timed out\)/);
    assert.match(text, /fresh-broken.*STALE \(fresh fetch failed SIM_SCRIPTED_FAILURE\)/);
  } finally {
    await stop();
  }
});

test('balance_history_rollup: hourly and daily min/max/last from backdated snapshots, once each, with retention', async () => {
  const sweep = findSweep('balance_history_rollup');
  assert.equal(sweep.settings(loadConfig({ FERRY_DATA_DIR: '.ferry/x' })).enabled, true, 'on by default');
  // Fold what the fresh test wrote, then look at one balance with backdated snapshots only.
  await runBalanceHistoryRollup(db.pool, config, { batchSize: 1000, maxRunMs: 0, settleSeconds: 0 });
  const key = ['sim', 'rollup-w', 'USDC'];
  await db.pool.query(
    `INSERT INTO balance_watch (chain, wallet, asset, lane, fetcher, symbol) VALUES ($1, $2, $3, 'sim', 'sim', 'USDC')`,
    key,
  );
  const insert = (amount: number, at: string) =>
    db.pool.query(`INSERT INTO balance_snapshots (chain, wallet, asset, amount, decimals, taken_at) VALUES ($1, $2, $3, $4, 6, $5)`, [...key, amount, at]);
  // Two days ago, 10:00-10:59 (three snapshots) and 11:xx (one); yesterday one; 60 days ago one.
  const day = (n: number) => new Date(Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), new Date().getUTCDate() - n));
  const at = (n: number, h: number, m: number) => new Date(day(n).getTime() + (h * 60 + m) * 60_000).toISOString();
  await insert(3_000_000, at(2, 10, 5));
  await insert(1_000_000, at(2, 10, 30));
  await insert(2_000_000, at(2, 10, 55));
  await insert(9_000_000, at(2, 11, 1));
  await insert(4_000_000, at(1, 8, 0));
  await insert(6_000_000, at(60, 8, 0));

  // Small batches: several in one run; a second run folds nothing again.
  const first = await runBalanceHistoryRollup(db.pool, config, { batchSize: 2, maxRunMs: 0, settleSeconds: 0 });
  assert.equal(first.folded, 6);
  const again = await runBalanceHistoryRollup(db.pool, config, { batchSize: 2, maxRunMs: 0, settleSeconds: 0 });
  assert.equal(again.folded, 0, 'each snapshot is folded once');

  const hours = await get('/v3/balances/history?chain=sim&address=rollup-w&asset=usdc&bucket=hour');
  assert.equal(hours.status, 200, JSON.stringify(hours.body));
  assert.equal(hours.body.asset, 'USDC');
  // The 60-day-old hour is past FERRY_BALANCE_HISTORY_HOURLY_RETENTION_DAYS (30): deleted.
  assert.deepEqual(
    hours.body.points.map((p: any) => [p.bucket_start, p.min, p.max, p.last, p.samples]),
    [
      [at(2, 10, 0), '1', '3', '2', 3],
      [at(2, 11, 0), '9', '9', '9', 1],
      [at(1, 8, 0), '4', '4', '4', 1],
    ],
  );
  const days = await get('/v3/balances/history?chain=sim&address=rollup-w&asset=USDC&bucket=day');
  assert.deepEqual(
    days.body.points.map((p: any) => [p.bucket_start, p.min_base_units, p.max_base_units, p.last_base_units, p.samples]),
    [
      [at(60, 0, 0), '6000000', '6000000', '6000000', 1],
      [at(2, 0, 0), '1000000', '9000000', '9000000', 4],
      [at(1, 0, 0), '4000000', '4000000', '4000000', 1],
    ],
  );

  // A later snapshot in an existing bucket widens it rather than replacing it.
  await insert(500_000, at(2, 10, 58));
  assert.equal((await runBalanceHistoryRollup(db.pool, config, { batchSize: 100, maxRunMs: 0, settleSeconds: 0 })).folded, 1);
  const widened = await get('/v3/balances/history?chain=sim&address=rollup-w&asset=USDC&bucket=hour&limit=3');
  assert.deepEqual(widened.body.points[0].min, '0.5');
  assert.deepEqual(widened.body.points[0].last, '0.5');
  assert.equal(widened.body.points[0].samples, 4);

  // A snapshot younger than the settle time waits for a later run.
  await db.pool.query(`INSERT INTO balance_snapshots (chain, wallet, asset, amount, decimals) VALUES ($1, $2, $3, 1, 6)`, key);
  assert.equal((await runBalanceHistoryRollup(db.pool, config, { batchSize: 100, maxRunMs: 0, settleSeconds: 3600 })).folded, 0);
  assert.equal((await runBalanceHistoryRollup(db.pool, config, { batchSize: 100, maxRunMs: 0, settleSeconds: 0 })).folded, 1);

  // Daily retention: a shorter setting deletes the 60-day-old day.
  const short = loadConfig({ FERRY_DATA_DIR: '.ferry/x', FERRY_BALANCE_HISTORY_DAILY_RETENTION_DAYS: '30' });
  assert.equal((await runBalanceHistoryRollup(db.pool, short, { batchSize: 100, maxRunMs: 0 })).deleted, 1);
  const kept = await get('/v3/balances/history?chain=sim&address=rollup-w&asset=USDC&bucket=day');
  assert.equal(kept.body.points.length, 3, 'yesterday, two days ago, today');
  assert.ok(kept.body.points.every((p: any) => p.bucket_start >= at(2, 0, 0)));

  const missing = await get('/v3/balances/history?chain=sim&address=nobody&asset=USDC');
  assert.equal(missing.status, 404);
  assert.equal(missing.body.error.code, 'NOT_FOUND');
  const badBucket = await get('/v3/balances/history?chain=sim&address=rollup-w&asset=USDC&bucket=week');
  assert.equal(badBucket.status, 400);
});
