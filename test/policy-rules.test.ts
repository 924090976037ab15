/** The rule model as data (src/policy/rules.ts): pure, no database. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { addDecimals, applicableLimits, decide, intentFacts, ruleSetProblems, ruleSetSchema, type MovementFacts } from '../src/policy/rules.ts';

const facts = (over: Partial<MovementFacts> = {}): MovementFacts => ({
  templateKey: 't.pay',
  lanes: ['evm'],
  asset: 'USDC',
  amount: '100',
  destination: { address: '0xabc', tag: null },
  entry: null,
  requester: { actor: 'principal:x', name: 'alice' },
  ...over,
});

const set = (rules: unknown, limits: unknown = []) => ({ version: 7, ...ruleSetSchema.parse({ rules, limits }) });

test('first match wins; no match refuses; no rule set is no policy', () => {
  const s = set([
    { id: 'block-cex', match: { lanes: ['cex'] }, action: { type: 'block', reason: 'no exchanges' } },
    { id: 'tier', match: { assets: ['usdc'], amount: { at_least: '100', below: '1000' } }, action: { type: 'require_approvals', approvals: 2 } },
    { id: 'alice', match: { requesters: ['alice'] }, action: { type: 'allow' } },
  ]);
  assert.equal(decide(s, facts()).ruleId, 'tier');
  assert.equal(decide(s, facts({ amount: '1000' })).ruleId, 'alice', 'below is exclusive');
  assert.equal(decide(s, facts({ amount: '99.999999' })).ruleId, 'alice', 'at_least is inclusive');
  assert.equal(decide(s, facts({ amount: null })).ruleId, 'alice', 'no amount never matches an amount');
  assert.equal(decide(s, facts({ lanes: ['cex'] })).action, 'block');
  // A movement on two lanes matches a lane rule only when both are listed.
  assert.equal(decide(s, facts({ lanes: ['cex', 'evm'] })).ruleId, 'tier');
  assert.equal(decide(s, facts({ amount: '5', requester: { actor: 'principal:y', name: 'bob' } })).action, 'none');
  assert.equal(decide(null, facts()).action, 'no_policy');
});

test('destination matches read the book entry', () => {
  const s = set([
    { id: 'outside', match: { destination: { in_book: false } }, action: { type: 'block', reason: 'book only' } },
    { id: 'internal', match: { destination: { kinds: ['internal'] } }, action: { type: 'allow' } },
    { id: 'named', match: { destination: { entries: ['ops'] } }, action: { type: 'require_approvals', approvals: 2 } },
  ]);
  assert.equal(decide(s, facts()).ruleId, 'outside');
  assert.equal(decide(s, facts({ destination: null })).ruleId, 'outside', 'no destination is not in the book');
  assert.equal(decide(s, facts({ entry: { name: 'cold', kind: 'internal' } })).ruleId, 'internal');
  assert.equal(decide(s, facts({ entry: { name: 'ops', kind: 'external' } })).ruleId, 'named');
});

test('rule sets that contradict themselves are refused with every problem', () => {
  const problems = ruleSetProblems(
    ruleSetSchema.parse({
      rules: [
        { id: 'a', match: { amount: { at_least: '5' } }, action: { type: 'allow' } },
        { id: 'a', match: { assets: ['X'], amount: { at_least: '5', below: '5' } }, action: { type: 'require_approvals', approvals: 3, from: ['p', 'q'] } },
        { id: 'b', match: { destination: { in_book: false, kinds: ['internal'] } }, action: { type: 'allow' } },
      ],
      limits: [{ id: 'l', asset: 'X', window_seconds: 60, max_amount: '0' }],
    }),
  );
  assert.equal(problems.length, 6, problems.join('\n'));
  assert.throws(() => ruleSetSchema.parse({ rules: [{ id: 'x', action: { type: 'block' } }] }), 'a block names its reason');
});

test('limits apply per asset, per destination when asked, in one lock order; decimals add exactly', () => {
  const limits = ruleSetSchema.parse({
    rules: [],
    limits: [
      { id: 'z-per-dest', asset: 'USDC', window_seconds: 60, max_amount: '10', per_destination: true },
      { id: 'a-all', asset: 'usdc', window_seconds: 60, max_amount: '10' },
      { id: 'external', asset: 'USDC', window_seconds: 60, max_amount: '10', destination: { kinds: ['external'] } },
      { id: 'other', asset: 'DAI', window_seconds: 60, max_amount: '10' },
    ],
  }).limits;
  const got = applicableLimits(limits, facts({ destination: { address: '0xABC', tag: null } }));
  assert.deepEqual(got.map((l) => l.key), ['a-all:USDC:*', 'z-per-dest:USDC:0xabc']);
  assert.equal(applicableLimits(limits, facts({ entry: { name: 'x', kind: 'external' } })).length, 3);
  assert.equal(addDecimals('0.1', '0.2'), '0.3');
  assert.equal(addDecimals('999.999999', '0.000001'), '1000');
});

test('intent facts: the asset upper case, the amount as given, the destination with its tag, the lanes of the executors', () => {
  const f = intentFacts({ asset: 'usdc', amount: '12.50', destination: { address: 'bnb1x', tag: '42' } }, [
    { executor_binding: 'exec.cex.withdrawal' },
    { executor_binding: { executor_key: 'exec.sim.observe' } },
    { executor_binding: 'exec.cex.observe' },
  ]);
  assert.deepEqual(f, { lanes: ['cex', 'sim'], asset: 'USDC', amount: '12.50', destination: { address: 'bnb1x', tag: '42' } });
});
