/**
 * Seeded random runs against real processes (test/model/random-run.ts): ERC-20 transfers on anvil
 * through two worker processes while the schedule kills and stalls them, stalls the chain's RPC and
 * restarts PostgreSQL; then the chain is read and held against Ferry's tables and the model's rules
 * (S1, S3, S4, S5, L1). CI runs a short fixed set of seeds (two); `npm run verify -- --runs N`
 * runs more. A failing seed prints its schedule: run it again with FERRY_RANDOM_SEEDS=<seed>.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { PublicClient } from 'viem';
import type { Anvil } from './helpers/anvil.ts';
import { usdcChainForFile, type DeployedToken } from './helpers/contracts.ts';
import { formatRun, randomRun, schedule } from './model/random-run.ts';

let local: { anvil: Anvil; chain: PublicClient; usdc: DeployedToken };
usdcChainForFile((l) => void (local = l));

const SEEDS = (process.env.FERRY_RANDOM_SEEDS ?? '20261202,20261203').split(',').map(Number);
const FAULTS = { crashes: 2, stalls: 2, provider: 1, database: 1 };

test('a schedule depends on its seed alone', () => {
  const opts = { seed: 7, movements: 6, workers: 2, faults: FAULTS };
  assert.deepEqual(schedule(opts), schedule({ ...opts }));
  assert.notDeepEqual(schedule(opts), schedule({ ...opts, seed: 8 }));
  const kinds = schedule(opts).map((s) => s.kind);
  assert.equal(kinds.filter((k) => k === 'approve').length, 6);
  assert.equal(kinds.filter((k) => k === 'crash').length, 2);
  assert.equal(kinds.filter((k) => k === 'database').length, 1);
});

test('the check reports a movement paid twice (planted): S1 with both transactions', async () => {
  const report = await randomRun({ seed: 99, movements: 2, workers: 1, faults: { crashes: 0, stalls: 0, provider: 0, database: 0 }, plant: 'double_payment' }, local);
  const s1 = report.violations.filter((v) => v.startsWith('S1:'));
  assert.equal(s1.length, 1, formatRun(report));
  assert.match(s1[0], /movement 0 .* was paid 2 times: 0x[0-9a-f]{64}, 0x[0-9a-f]{64}/);
  assert.equal(report.transfers, 3);
});

for (const seed of SEEDS) {
  test(`seed ${seed}: kills, stalls, a stalled chain and a PostgreSQL restart; the chain pays each approved transfer once`, async () => {
    const report = await randomRun({ seed, movements: 6, workers: 2, faults: FAULTS }, local);
    console.log(formatRun(report));
    if (report.violations.length > 0) console.log(report.workerTail.split('\n').slice(-40).join('\n'));
    assert.deepEqual(report.violations, []);
    assert.equal(report.transfers, 6);
    assert.ok(report.faultsInjected >= 4, 'the faults happened');
  });
}
