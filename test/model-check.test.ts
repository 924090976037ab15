import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { check, formatResult, type CheckResult } from './model/checker.ts';
import { config, type ModelConfig } from './model/system.ts';

/**
 * The exhaustive check of S1-S5 and L1 over the composed system (test/model), at the small bounds
 * CI can afford in a few seconds: 2 worker processes, plans of 1-2 nodes in a chain, 2 attempts,
 * at most one crash, one stall and one provider fault, people acting at any time. `npm run verify`
 * runs the larger bounds. Each planted bug (the fence off, recovery resubmitting blind, the
 * nonce-reclaim fix off, no recovery, a lost log row) must be found, with its shortest trace.
 */

function run(name: string, cfg: ModelConfig, ignore?: string[]): CheckResult {
  const r = check(cfg, { ignore });
  // The figures (and a trace, if any) go to the test log.
  console.log(formatResult(name, r));
  return r;
}

function assertFinds(r: CheckResult, rule: string, lastStep: RegExp) {
  assert.ok(r.violation, 'the check must find the planted bug');
  assert.equal(r.violation.rule, rule, r.violation.message);
  assert.match(r.violation.trace.join('\n'), lastStep);
}

describe('the composed system holds S1-S5 and L1 in every reachable state (small bounds)', () => {
  test('sim lane, action style: 2 processes, 2-node chain, 2 attempts, people at any time, 1 crash, 1 stall, 1 provider fault', () => {
    const r = run('sim/action n2', config({ nodes: 2 }));
    assert.equal(r.violation, null, r.violation ? formatResult('sim/action n2', r) : '');
    assert.ok(r.states > 1000 && r.faultTransitions > 0, 'the exploration covers faults');
  });

  test('sim lane, observe style: submit answers SUBMITTED and the observer polls', () => {
    const r = run('sim/observe n1', config({ nodes: 1, style: 'observe' }));
    assert.equal(r.violation, null, r.violation ? formatResult('sim/observe n1', r) : '');
  });

  test('quorum of two, approvals and the requester trying to approve at any time', () => {
    const r = run('sim/action n1 quorum 2', config({ nodes: 1, quorum: 2 }));
    assert.equal(r.violation, null, r.violation ? formatResult('quorum 2', r) : '');
  });

  test('EVM lane with the nonce reaper: 1 crash, 1 provider fault, no stall', () => {
    const r = run('evm n1', config({ nodes: 1, lane: 'evm', faults: { stalls: 0 } }));
    assert.equal(r.violation, null, r.violation ? formatResult('evm n1', r) : '');
  });

  test('EVM lane: a stall before the broadcast cannot pay twice (the nonce fences a late broadcast)', () => {
    // Without the SUBMITTING grace as a timing assumption: the nonce, not the clock, keeps S1, and
    // a broadcast refused at the nonce comes back READY (R1).
    const r = run('evm n1 no grace assumption', config({ nodes: 1, lane: 'evm', submitWithinGrace: false, faults: { stalls: 1 } }));
    assert.equal(r.violation, null, r.violation ? formatResult('evm no grace', r) : '');
  });
});

describe('planted bugs are found, with the shortest trace', () => {
  test('the lease fence switched off: a stale dispatcher submits an attempt a second time (S1)', () => {
    const r = run('fence off', config({ nodes: 1, bugs: { fenceWrites: false } }));
    assertFinds(r, 'S1', /submits node 0 attempt 1\n.*sub2/);
  });

  test('recovery resubmits without asking the provider (S1)', () => {
    const r = run('recovery resubmits blind', config({ nodes: 1, bugs: { recoveryResubmitsBlind: true } }));
    assertFinds(r, 'S1', /resubmits blind/);
  });

  test('issue 24: the nonce reaper reclaims a reserved nonce, a filler is mined, and recovery answers FAILED (fix off), READY (fix on)', () => {
    const off = run('nonce-reclaim fix off', config({ nodes: 1, lane: 'evm', faults: { stalls: 0 }, bugs: { nonceReclaimFix: false } }));
    assertFinds(off, 'R1', /reaper reclaims nonce[\s\S]*filler mined[\s\S]*FAILED EVM_NONCE_CONSUMED/);
    const on = run('nonce-reclaim fix on', config({ nodes: 1, lane: 'evm', faults: { stalls: 0 } }));
    assert.equal(on.violation, null, on.violation ? formatResult('fix on', on) : '');
  });

  test('a nonce reclaimed after the pre-submit check, before clearForBroadcast: FAILED with the fix off (R1), READY with it on', () => {
    const off = run('send reclaim fix off', config({ nodes: 1, lane: 'evm', faults: { stalls: 1 }, bugs: { sendReclaimFix: false } }));
    assertFinds(off, 'R1', /clearForBroadcast[^\n]*refused: FAILED EVM_NONCE_RECLAIMED/);
    const on = run('send reclaim fix on', config({ nodes: 1, lane: 'evm', faults: { stalls: 1 } }));
    assert.equal(on.violation, null, on.violation ? formatResult('fix on', on) : '');
  });

  test('the SUBMITTING grace is a timing assumption on the sim lane: without it a stalled submit pays twice (S1)', () => {
    const r = run('sim, no grace assumption', config({ nodes: 1, persons: false, startApproved: true, submitWithinGrace: false }));
    assertFinds(r, 'S1', /paid twice|submits node 0 attempt 2/);
  });

  test('no recovery: a dispatch whose process died never settles (L1)', () => {
    const r = run('no recovery', config({ nodes: 1, bugs: { noRecovery: true } }));
    assertFinds(r, 'L1', /dies/);
  });

  test('a commit that loses a log row (S5)', () => {
    const r = run('log row lost', config({ nodes: 1, bugs: { dropLastLogRow: true } }));
    assertFinds(r, 'S5', /violates S5/);
  });
});
