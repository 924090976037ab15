import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { after, test } from 'node:test';
import { deliverCallbackOnce } from '../src/actors/callback-delivery.ts';
import { enqueueCallback } from '../src/callbacks/outbox.ts';
import { loadConfig } from '../src/config.ts';
import { createApp } from '../src/http/app.ts';
import { wholeUnits } from '../src/http/metrics.ts';
import { recordFetchError, recordSnapshot, syncWatchEntries } from '../src/persistence/balances.ts';
import { nodeStates } from '../src/machines/node-machine.ts';
import { movementStates } from '../src/machines/movement-machine.ts';
import { withTransaction } from '../src/persistence/db.ts';
import { getMovement } from '../src/persistence/movements.ts';
import { createToken } from '../src/persistence/tokens.ts';
import { testDatabase } from './helpers/db.ts';
import { loopbackDestinations } from './helpers/destinations.ts';
import { seedMovement, singleNodeTemplate, threeNodeTemplate } from './helpers/fixtures.ts';
import { deadUrl } from './helpers/net.ts';
import { CallbackReceiver } from './helpers/receiver.ts';
import { approvedMovement, drain, runtimeDeps } from './helpers/runtime.ts';

const db = await testDatabase();
const app = createApp({ pool: db.pool, config: loadConfig({ FERRY_DATA_DIR: '.ferry/test-metrics' }) });
const viewer = (await createToken(db.pool, { name: 'metrics-viewer', role: 'viewer' })).token;

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/**
 * A parser for the Prometheus text format (0.0.4) strict enough to fail on anything malformed:
 * every line is a HELP, a TYPE or a sample, and every sample belongs to a family with a TYPE.
 */
function parse(text: string): Sample[] {
  const types = new Map<string, string>();
  const samples: Sample[] = [];
  const lines = text.split('\n');
  assert.equal(lines.pop(), '', 'the text ends with a newline');
  for (const line of lines) {
    if (line === '') continue; // the format ignores empty lines (prom-client puts one between families)
    let m = /^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.+)$/.exec(line);
    if (m) {
      if (m[1] === 'TYPE') {
        assert.match(m[3], /^(counter|gauge|histogram|summary|untyped)$/, line);
        types.set(m[2], m[3]);
      }
      continue;
    }
    m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    assert.ok(m, `not a sample line: ${JSON.stringify(line)}`);
    const labels: Record<string, string> = {};
    if (m[2]) {
      const rest = m[2].replace(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?/g, (_all, k: string, v: string) => {
        labels[k] = v.replace(/\\(.)/g, (_x, ch: string) => (ch === 'n' ? '\n' : ch));
        return '';
      });
      assert.equal(rest, '', `bad labels in ${line}`);
    }
    const value = Number(m[3] === '+Inf' ? Infinity : m[3] === '-Inf' ? -Infinity : m[3]);
    // Prometheus parses values with Go's ParseFloat, which takes NaN in any letter case (prom-client writes "Nan").
    assert.ok(!Number.isNaN(value) || /^nan$/i.test(m[3]), `bad value in ${line}`);
    const family = [...types.keys()].find((f) => m![1] === f || m![1].startsWith(`${f}_`));
    assert.ok(family, `sample ${m[1]} has no TYPE line`);
    samples.push({ name: m[1], labels, value });
  }
  return samples;
}

/** Debian's promtool (package prometheus), or one on PATH; null when there is none. */
function findPromtool(): string | null {
  if (existsSync('/usr/bin/promtool')) return '/usr/bin/promtool';
  const which = spawnSync('sh', ['-c', 'command -v promtool'], { encoding: 'utf8' });
  return which.status === 0 && which.stdout.trim() ? which.stdout.trim() : null;
}

async function scrape(): Promise<Sample[]> {
  const res = await app.request('/metrics', { headers: { Authorization: `Bearer ${viewer}` } });
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
  return parse(await res.text());
}

function sum(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  return samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((a, s) => a + s.value, 0);
}

function one(samples: Sample[], name: string, labels: Record<string, string>): number {
  const found = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  assert.equal(found.length, 1, `${name} ${JSON.stringify(labels)}`);
  return found[0].value;
}

test('/metrics needs a token', async () => {
  const res = await app.request('/metrics');
  assert.equal(res.status, 401);
  assert.equal(((await res.json()) as any).error.code, 'UNAUTHENTICATED');
});

test('/metrics is Prometheus text: Ferry families under ferry_, the standard process_* and nodejs_* ones as they are', async () => {
  const samples = await scrape();
  const res = await app.request('/metrics', { headers: { Authorization: `Bearer ${viewer}` } });
  const text = await res.text();
  for (const family of [
    'ferry_transitions_total counter',
    'ferry_claims_total counter',
    'ferry_worker_runs_total counter',
    'ferry_worker_run_seconds histogram',
    'ferry_worker_items_total counter',
    'ferry_commit_seconds histogram',
    'ferry_movement_duration_seconds histogram',
    'ferry_approval_expiry_total counter',
    'ferry_callback_deliveries_total counter',
    'ferry_nodes gauge',
    'ferry_movements gauge',
  ]) {
    assert.ok(text.includes(`# TYPE ${family}\n`), family);
  }
  const stray = samples.filter((s) => !/^(ferry|process|nodejs)_/.test(s.name)).map((s) => s.name);
  assert.deepEqual(stray, [], 'every sample is under ferry_, process_ or nodejs_');
  // The standard names, unprefixed, for stock dashboards and alerts.
  for (const family of ['process_cpu_seconds_total counter', 'process_resident_memory_bytes gauge', 'nodejs_heap_size_used_bytes gauge', 'nodejs_eventloop_lag_seconds gauge']) {
    assert.ok(text.includes(`# TYPE ${family}\n`), family);
  }
  assert.ok(!text.includes('ferry_process_'), 'no prefixed copies of the default metrics');
  // Every state has a series, zero or not, so a state emptying never makes its series vanish.
  for (const state of nodeStates) assert.equal(samples.filter((s) => s.name === 'ferry_nodes' && s.labels.state === state).length, 1, state);
  for (const state of movementStates) assert.equal(samples.filter((s) => s.name === 'ferry_movements' && s.labels.state === state).length, 1, state);
});

test('promtool check metrics accepts /metrics', async (t) => {
  const promtool = findPromtool();
  if (!promtool) {
    // .ci/run installs Debian's prometheus package, so CI always runs this.
    t.skip('promtool is not installed (apt-get install prometheus): the Prometheus lint of /metrics did not run');
    return;
  }
  const res = await app.request('/metrics', { headers: { Authorization: `Bearer ${viewer}` } });
  const text = await res.text();
  const run = spawnSync(promtool, ['check', 'metrics'], { input: text, encoding: 'utf8', timeout: 30_000 });
  assert.equal(run.error, undefined, String(run.error));
  assert.equal(`${run.stdout}${run.stderr}`.trim(), '', 'promtool found nothing to say');
  assert.equal(run.status, 0);
});

test('counters and gauges match a movement run to completion', async () => {
  const before = await scrape();
  const deps = runtimeDeps(db.pool);
  const id = await approvedMovement(deps, threeNodeTemplate('metrics-three'));
  await drain(deps);
  const after = await scrape();
  const delta = (name: string, labels: Record<string, string>) => sum(after, name, labels) - sum(before, name, labels);

  assert.equal((await getMovement(db.pool, id))!.request_state, 'COMPLETED');
  assert.equal(delta('ferry_transitions_total', { machine: 'ferry.node', to: 'COMPLETED' }), 3, 'three nodes completed');
  assert.equal(delta('ferry_transitions_total', { machine: 'ferry.request', to: 'COMPLETED' }), 1);
  assert.equal(delta('ferry_transitions_total', { machine: 'ferry.request', from: 'PENDING_APPROVAL', to: 'APPROVED' }), 1);
  assert.equal(delta('ferry_transitions_total', { machine: 'ferry.request', from: 'APPROVED', to: 'EXECUTING' }), 1);

  // Every logged transition after creation was counted, once.
  const { rows } = await db.pool.query(
    `SELECT entity_type, count(*)::int AS n FROM transitions WHERE request_id = $1 AND seq > 0 GROUP BY entity_type`,
    [id],
  );
  const logged = Object.fromEntries(rows.map((r) => [r.entity_type, r.n]));
  assert.equal(delta('ferry_transitions_total', { machine: 'ferry.node' }), logged.node);
  assert.equal(delta('ferry_transitions_total', { machine: 'ferry.request' }), logged.request);

  assert.equal(delta('ferry_claims_total', { worker: 'dispatcher', result: 'hit' }), 3, 'one dispatch claim per node');
  assert.equal(delta('ferry_claims_total', { worker: 'observer', result: 'hit' }), 1, 'the observe node was observed once');
  assert.ok(delta('ferry_commit_seconds_count', {}) >= logged.node, 'commits were timed');
  // The movement's run, once, under its template and the state that ended it.
  assert.equal(delta('ferry_movement_duration_seconds_count', { template: 'metrics-three', state: 'COMPLETED' }), 1);
  assert.ok(delta('ferry_movement_duration_seconds_sum', { template: 'metrics-three', state: 'COMPLETED' }) > 0);

  // Gauges are read from the database at scrape time.
  const counts = await db.pool.query(`SELECT node_state, count(*)::int AS n FROM request_nodes GROUP BY node_state`);
  for (const state of nodeStates) {
    const n = counts.rows.find((r) => r.node_state === state)?.n ?? 0;
    assert.equal(one(after, 'ferry_nodes', { state }), n, `ferry_nodes{state="${state}"}`);
  }
  const completed = await db.pool.query(`SELECT count(*)::int AS n FROM movement_requests WHERE request_state = 'COMPLETED'`);
  assert.equal(one(after, 'ferry_movements', { state: 'COMPLETED' }), completed.rows[0].n);
  assert.ok(!after.some((s) => s.name === 'ferry_requests'), 'movements, not requests');

  // A new pending movement moves the gauges at the next scrape, with no counter involved.
  await seedMovement(db.pool, singleNodeTemplate('metrics-pending'));
  const later = await scrape();
  assert.equal(one(later, 'ferry_movements', { state: 'PENDING_APPROVAL' }), one(after, 'ferry_movements', { state: 'PENDING_APPROVAL' }) + 1);
  assert.equal(one(later, 'ferry_nodes', { state: 'BLOCKED' }), one(after, 'ferry_nodes', { state: 'BLOCKED' }) + 1);
});

test('callback deliveries are counted by outcome', async () => {
  const receiver = await new CallbackReceiver().listen();
  after(() => receiver.close());

  const { movement } = await seedMovement(db.pool, singleNodeTemplate('metrics-callbacks'), { callbackUrl: receiver.url('/cb') });
  const row = (await getMovement(db.pool, movement.id))!;
  const write = (url: string) =>
    withTransaction(db.pool, (c) =>
      enqueueCallback(c, { movement: { ...row, callback_url: url }, eventType: 'request_pending_approval', occurredAt: new Date().toISOString(), maxAttempts: 5 }),
    );
  const deps = { pool: db.pool, secret: 'metrics-test-secret-0123456789', timeoutMs: 5000, destinations: loopbackDestinations() };

  const before = await scrape();
  const sent = await write(receiver.url('/cb'));
  assert.equal(await deliverCallbackOnce(deps, sent), 'sent');
  assert.equal(await deliverCallbackOnce(deps, sent), 'skipped');
  // A closed port: the attempt fails and a retry is scheduled.
  const failing = await write(await deadUrl('/cb'));
  assert.equal(await deliverCallbackOnce(deps, failing), 'retry');
  const later = await scrape();

  const delta = (outcome: string) => sum(later, 'ferry_callback_deliveries_total', { outcome }) - sum(before, 'ferry_callback_deliveries_total', { outcome });
  assert.equal(delta('sent'), 1);
  assert.equal(delta('skipped'), 1);
  assert.equal(delta('retry'), 1);
  assert.equal(delta('dlq'), 0);
  assert.deepEqual(receiver.received.map((r) => r.url), ['/cb']);
});

test('watched balances are gauges read at scrape time: amount in whole units, age, errors in a row; never fetched means absent', async () => {
  const usdc = { chain: 'gauge-chain', wallet: '0x00000000000000000000000000000000000000aa', asset: '0x00000000000000000000000000000000000000bb' };
  const eth = { chain: 'gauge-chain', wallet: usdc.wallet, asset: 'native' };
  const fresh = { chain: 'gauge-chain', wallet: '0x00000000000000000000000000000000000000cc', asset: 'native' };
  await syncWatchEntries(db.pool, [
    { ...usdc, lane: 'evm', fetcher: 'erc20', symbol: 'USDC', label: null },
    { ...eth, lane: 'evm', fetcher: 'native', symbol: 'ETH', label: null },
    { ...fresh, lane: 'evm', fetcher: 'native', symbol: 'ETH', label: null },
  ]);
  await recordSnapshot(db.pool, usdc, 1_234_567_890n, 6);
  await recordSnapshot(db.pool, eth, 123_456_789_012_345_678_901_234n, 18);
  await recordFetchError(db.pool, eth, 'RPC_UNAVAILABLE');
  await recordFetchError(db.pool, eth, 'RPC_UNAVAILABLE');
  // The ETH balance was last fetched ten minutes ago (backdated, no sleep).
  await db.pool.query(`UPDATE balance_watch SET as_of = now() - interval '600 seconds' WHERE (chain, asset) = ($1, 'native') AND wallet = $2`, [eth.chain, eth.wallet]);

  const samples = (await scrape()).filter((s) => s.labels.chain === 'gauge-chain');
  const one = (name: string, key: { wallet: string; asset: string }) =>
    samples.filter((s) => s.name === name && s.labels.wallet === key.wallet && s.labels.asset === key.asset);
  assert.deepEqual(one('ferry_balance', usdc).map((s) => [s.labels.symbol, s.value]), [['USDC', 1234.56789]]);
  assert.equal(one('ferry_balance', eth)[0].value, 123456.789012345678901234);
  assert.ok(one('ferry_balance_age_seconds', usdc)[0].value < 60);
  const ethAge = one('ferry_balance_age_seconds', eth)[0].value;
  assert.ok(ethAge >= 600 && ethAge < 660, `age ${ethAge}`);
  assert.equal(one('ferry_balance_consecutive_errors', eth)[0].value, 2);
  assert.equal(one('ferry_balance_consecutive_errors', usdc)[0].value, 0);
  assert.deepEqual(one('ferry_balance', fresh), [], 'a balance never fetched has no amount series');
  assert.deepEqual(one('ferry_balance_age_seconds', fresh), []);
  assert.equal(one('ferry_balance_consecutive_errors', fresh)[0].value, 0);
});

test('wholeUnits places the decimal point in the string before the float', () => {
  assert.equal(wholeUnits('0', 6), 0);
  assert.equal(wholeUnits('5', 6), 0.000005);
  assert.equal(wholeUnits('1000000', 6), 1);
  assert.equal(wholeUnits('42', 0), 42);
  assert.equal(wholeUnits('-2500000', 6), -2.5);
  assert.equal(wholeUnits('1' + '0'.repeat(77), 18), 1e59);
});
