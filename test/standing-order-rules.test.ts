/**
 * What a standing order's run would do (src/policy/standing-orders.ts) and its machine
 * (src/machines/standing-order-machine.ts), as pure functions.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { transition } from 'xstate';
import { standingOrderMachine, standingOrderRefusalOf, type StandingOrderContext } from '../src/machines/standing-order-machine.ts';
import { lastSlot, planRun, unitsOf, withinBounds } from '../src/policy/standing-orders.ts';

test('a schedule slot is read in its time zone; slots before the order was active never run', () => {
  const now = new Date('2026-07-01T07:30:00Z'); // 09:30 in Paris (UTC+2)
  const nine = lastSlot({ cron: '0 9 * * *', time_zone: 'Europe/Paris' }, 'UTC', now);
  assert.equal(nine.toISOString(), '2026-07-01T07:00:00.000Z');
  assert.equal(lastSlot({ cron: '0 9 * * *' }, 'UTC', now).toISOString(), '2026-06-30T09:00:00.000Z', 'the operator time zone otherwise');
  const trigger = { kind: 'schedule' as const, schedule: { cron: '0 9 * * *', time_zone: 'Europe/Paris' }, amount: '5' };
  assert.deepEqual(planRun(trigger, { slot: nine, balance: null, crossingSnapshotId: null }, new Date('2026-07-01T06:00:00Z')), { slotKey: 'slot:2026-07-01T07:00:00.000Z', amount: '5' });
  assert.equal(planRun(trigger, { slot: nine, balance: null, crossingSnapshotId: null }, new Date('2026-07-01T07:10:00Z')), null);
});

test('a ceiling sweeps the excess once per crossing, or once per slot with a schedule; a floor tops up', () => {
  const ceiling = { kind: 'ceiling' as const, balance: { chain: 'sim', wallet: 'hot', asset: 'USDC' }, ceiling: '1000', target: '800' };
  const since = new Date(0);
  assert.deepEqual(planRun(ceiling, { slot: null, balance: '1250.5', crossingSnapshotId: '41' }, since), { slotKey: 'crossing:41', amount: '450.5' });
  assert.equal(planRun(ceiling, { slot: null, balance: '1000', crossingSnapshotId: null }, since), null, 'at the ceiling: nothing');
  const hourly = { ...ceiling, schedule: { cron: '0 * * * *' } };
  const slot = new Date('2026-07-01T07:00:00Z');
  assert.deepEqual(planRun(hourly, { slot, balance: '900', crossingSnapshotId: null }, since), { slotKey: 'slot:2026-07-01T07:00:00.000Z', amount: null });
  assert.deepEqual(planRun(hourly, { slot, balance: '1001', crossingSnapshotId: '7' }, since), { slotKey: 'slot:2026-07-01T07:00:00.000Z', amount: '201' });
  const floor = { kind: 'floor' as const, balance: ceiling.balance, floor: '100', target: '500' };
  assert.deepEqual(planRun(floor, { slot: null, balance: '20', crossingSnapshotId: '9' }, since), { slotKey: 'crossing:9', amount: '480' });
  assert.equal(unitsOf('1250500000', 6), '1250.5');
  assert.equal(unitsOf('5', 6), '0.000005');
  assert.deepEqual(withinBounds({ max_per_run: '500', max_per_window: '1000' }, '500.000001', '0'), { ok: false, bound: 'max_per_run' });
  assert.deepEqual(withinBounds({ max_per_run: '500', max_per_window: '1000' }, '500', '600'), { ok: false, bound: 'max_per_window' });
  assert.deepEqual(withinBounds({ max_per_run: '500', max_per_window: '1000' }, '400', '600'), { ok: true });
});

test('the standing order machine: ACTIVE with the last approval it requires, never its proposer, paused and resumed', () => {
  const context: StandingOrderContext = { proposedBy: 'p:alice', requiredApprovals: 2, expiresAt: '2027-01-01T00:00:00Z', approvals: [], decidedBy: null, reason: null };
  const at = '2026-07-01T00:00:00Z';
  let s = standingOrderMachine.resolveState({ value: 'PROPOSED', context });
  assert.equal(standingOrderRefusalOf('PROPOSED', context, { type: 'APPROVE', by: 'p:alice', at }), 'approverIsNotProposer');
  [s] = transition(standingOrderMachine, s, { type: 'APPROVE', by: 'p:bob', at });
  assert.equal(s.value, 'PROPOSED');
  assert.equal(standingOrderRefusalOf('PROPOSED', s.context, { type: 'APPROVE', by: 'p:bob', at }), 'approverHasNotApprovedYet');
  [s] = transition(standingOrderMachine, s, { type: 'APPROVE', by: 'p:carol', at });
  assert.equal(s.value, 'ACTIVE');
  [s] = transition(standingOrderMachine, s, { type: 'PAUSE', by: 'p:bob', at });
  assert.equal(s.value, 'PAUSED');
  assert.equal(standingOrderRefusalOf('PAUSED', s.context, { type: 'RESUME', by: 'p:bob', at: '2027-02-01T00:00:00Z' }), 'notExpired');
  [s] = transition(standingOrderMachine, s, { type: 'RESUME', by: 'p:bob', at });
  assert.equal(s.value, 'ACTIVE');
  [s] = transition(standingOrderMachine, s, { type: 'EXPIRE', at: '2027-01-01T00:00:00Z' });
  assert.equal(s.value, 'EXPIRED');
});
