/**
 * Seeded random runs of the CEX lane against real worker processes (test/model/cex-run.ts):
 * withdrawals through ccxt from the Binance emulator, while the schedule kills workers (one right
 * after the exchange accepted its withdraw/apply, before it heard), stalls them, takes the exchange
 * down, makes it slow, answers 503 and 429, and restarts PostgreSQL. Then the exchange's ledger is
 * held against Ferry's rows (S1, S3, S4, S5, L1). A planted bug (recovery resubmitting without
 * asking the exchange) must be reported as S1 with its seed and trace.
 * FERRY_RANDOM_SEEDS=<seed> replays a seed; `npm run verify -- --lane cex` runs more.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { localChainForFile, type LocalChain } from './helpers/anvil.ts';
import { CEX_RUN, cexLane } from './model/cex-run.ts';
import { formatLaneRun, laneRun, laneSchedule } from './model/lane-run.ts';

let local: LocalChain;
localChainForFile((l) => void (local = l));

const SEEDS = (process.env.FERRY_RANDOM_SEEDS ?? '20261207').split(',').map(Number);
const FAULTS = CEX_RUN.faults;

test('a CEX schedule depends on its seed alone and holds every fault asked for', () => {
  const lane = cexLane(undefined as never);
  const opts = { seed: 7, movements: 4, workers: 2, faults: FAULTS };
  assert.deepEqual(laneSchedule(lane, opts), laneSchedule(lane, { ...opts, faults: Object.fromEntries(Object.entries(FAULTS).reverse()) }));
  assert.notDeepEqual(laneSchedule(lane, opts), laneSchedule(lane, { ...opts, seed: 8 }));
  const kinds = laneSchedule(lane, opts).map((s) => s.kind);
  assert.equal(kinds.filter((k) => k === 'approve').length, 4);
  for (const k of Object.keys(FAULTS)) assert.equal(kinds.filter((x) => x === k).length, 1, k);
});

test('planted: recovery answers READY without asking the exchange; a kill after the exchange accepted gives the node a second withdrawal, reported as S1 with seed and trace', async () => {
  // Two workers: the one still up recovers (as planted) while the killed one comes back.
  const report = await laneRun(cexLane(local), { seed: 42, movements: 1, workers: 2, faults: { kill_after_accept: 1 }, horizonMs: 2000, plant: 'recovery_resubmits' });
  const text = formatLaneRun(report);
  const s1 = report.violations.filter((v) => v.startsWith('S1:'));
  assert.equal(s1.length, 1, text);
  assert.match(s1[0]!, /movement 0 .*: node withdraw has 2 withdrawals on the exchange's ledger: [0-9a-f-]+:1 \(0\.01042\), [0-9a-f-]+:2 \(0\.01042\)/);
  assert.equal(report.faults.kill_after_accept, 1, 'the kill fired');
  assert.match(text, /^cex seed 42: /);
  assert.match(text, /replay: seed 42 with \{"movements":1,"workers":2,"faults":\{"kill_after_accept":1\},"horizonMs":2000,"plant":"recovery_resubmits"\}/);
  assert.match(text, /trace:\n(.*\n)*.*approved movement 0\n.*SIGKILL worker [01] \(the exchange accepted its withdraw\/apply/);
});

for (const seed of SEEDS) {
  test(`CEX seed ${seed}: kills (one after the exchange accepted), stalls, 5xx, 429, an outage, slow answers and a PostgreSQL restart; one withdrawal per approved node`, async () => {
    const report = await laneRun(cexLane(local), { ...CEX_RUN, seed });
    console.log(formatLaneRun(report));
    if (report.violations.length > 0) console.log(report.workerTail.split('\n').slice(-40).join('\n'));
    assert.deepEqual(report.violations, []);
    assert.equal(report.effects.withdrawals, 3, 'three withdrawals; the fourth amount is refused for its precision');
    assert.ok(Object.values(report.faults).reduce((a, b) => a + b, 0) >= 6, 'the faults happened');
  });
}
