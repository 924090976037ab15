/**
 * Seeded random runs of the CCTP lane against real worker processes (test/model/cctp-run.ts):
 * `cctp_bridge` movements on two anvil chains with the CCTP test contracts and the attestation
 * emulator, while the schedule kills workers around the burn's and the mint's broadcast and at the
 * attestation, kills and stalls them at random, stalls both chains' RPC, takes the attestation
 * service down or makes it slow, and restarts PostgreSQL. Then the chains are held against Ferry's
 * rows: one burn per approved burn node, one mint per burn, no mint without an approved burn, the
 * approved amounts (S1-S5, L1). FERRY_RANDOM_SEEDS=<seed> replays a seed; `npm run verify --
 * --lane cctp` runs more.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startCctpWorld, type CctpWorld } from './helpers/cctp.ts';
import { CCTP_RUN, cctpLane } from './model/cctp-run.ts';
import { formatLaneRun, laneRun, laneSchedule } from './model/lane-run.ts';

let w: CctpWorld;
before(async () => {
  // Attested at the first confirmation: nobody mines for the workers but their own transactions.
  w = await startCctpWorld({ confirmations: 1 });
});
after(async () => {
  await w?.stop();
});

const SEEDS = (process.env.FERRY_RANDOM_SEEDS ?? '20261204').split(',').map(Number);
const FAULTS = CCTP_RUN.faults;

test('a CCTP schedule depends on its seed alone and holds every fault asked for', () => {
  const lane = cctpLane(undefined as never);
  const opts = { seed: 11, movements: 3, workers: 2, faults: FAULTS };
  assert.deepEqual(laneSchedule(lane, opts), laneSchedule(lane, { ...opts }));
  assert.notDeepEqual(laneSchedule(lane, opts), laneSchedule(lane, { ...opts, seed: 12 }));
  const kinds = laneSchedule(lane, opts).map((s) => s.kind);
  assert.equal(kinds.filter((k) => k === 'approve').length, 3);
  for (const k of Object.keys(FAULTS)) assert.equal(kinds.filter((x) => x === k).length, 1, k);
});

for (const seed of SEEDS) {
  test(`CCTP seed ${seed}: kills at the burn, the attestation and the mint, stalls, a stalled RPC, the attestation service down and slow, a PostgreSQL restart; one burn and one mint per approved movement`, async () => {
    // Once the run is checked, a second burn for movement 0 and a mint of another wallet's burn are
    // planted on the chains, and the check must report them (it can fail).
    const report = await laneRun(cctpLane(w), { ...CCTP_RUN, seed, plant: 'double_burn_and_stray_mint' });
    console.log(formatLaneRun(report));
    if (report.violations.length > 0) console.log(report.workerTail.split('\n').slice(-40).join('\n'));
    assert.deepEqual(report.violations, []);
    assert.deepEqual(report.effects, { burns: 3, mints: 3 });
    assert.ok(Object.values(report.faults).reduce((a, b) => a + b, 0) >= 7, 'the faults happened');

    const planted = report.planted ?? [];
    assert.equal(planted.length, 2, planted.join('\n'));
    assert.match(planted[0]!, /^S1: movement 0 .*: 2 burns on chain 31337: 0x[0-9a-f]{64}, 0x[0-9a-f]{64}$/);
    assert.match(planted[1]!, /^S2: message 0x[0-9a-f]{64} was received \(minted\) on chain 31338 by 0x[0-9a-f]{64} without an approved burn of this run$/);
  });
}
