/** The rule model as data (src/policy/rules.ts): pure, no database. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { addDecimals, applicableLimits, compareWithBound, decide, formatValue, intentFacts, ruleSetProblems, ruleSetSchema, valueOfAmounts, type MovementFacts } from '../src/policy/rules.ts';

const facts = (over: Partial<MovementFacts> = {}): MovementFacts => ({
  templateKey: 't.pay',
  lanes: ['evm'],
  asset: 'USDC',
  amount: '100',
  destination: { address: '0xabc', tag: null },
  entry: null,
  sources: ['hot'],
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
  assert.deepEqual(f, { lanes: ['cex', 'sim'], asset: 'USDC', amount: '12.50', destination: { address: 'bnb1x', tag: '42' }, sources: [] });
});

test('a rule matches on the sources of its nodes: one source and not another, and a movement of two sources only where both are listed', () => {
  const s = set([
    { id: 'from-hot', match: { sources: ['hot'] }, action: { type: 'allow' } },
    { id: 'from-exchange', match: { sources: ['binance_main', 'hot'] }, action: { type: 'require_approvals', approvals: 2 } },
    { id: 'else', action: { type: 'block', reason: 'only the hot wallet and the exchange account' } },
  ]);
  assert.equal(decide(s, facts({ sources: ['hot'] })).ruleId, 'from-hot');
  assert.equal(decide(s, facts({ sources: ['cold'] })).ruleId, 'else', 'another source does not match');
  assert.equal(decide(s, facts({ sources: ['binance_main', 'hot'] })).ruleId, 'from-exchange', 'both sources must be listed');
  assert.equal(decide(s, facts({ sources: [] })).ruleId, 'else', 'a movement without a source never matches a source rule');
  // The sources come from the plan: a signing node's signer key, an exchange node's account; never the intent.
  const f = intentFacts({ asset: 'USDC', amount: '1', source: 'cold' }, [
    { executor_binding: 'exec.evm.erc20_transfer', signer_binding: { signer_key: 'hot', chain_id: 1 } },
    { executor_binding: { executor_key: 'exec.cex.withdrawal_action', account: 'binance_main' } },
    { executor_binding: 'exec.cex.withdrawal_action', config: { account: 'okx_main' } },
    { executor_binding: 'exec.sim.observe' },
  ]);
  assert.deepEqual(f.sources, ['binance_main', 'hot', 'okx_main']);
});

test('limits per source and per requester: one sum each, named in the lock key', () => {
  const limits = ruleSetSchema.parse({
    rules: [],
    limits: [
      { id: 'per-source', asset: 'USDC', window_seconds: 60, max_amount: '10', per_source: true },
      { id: 'per-requester', asset: 'USDC', window_seconds: 60, max_amount: '10', per_requester: true },
    ],
  }).limits;
  const got = applicableLimits(limits, facts({ sources: ['cold', 'hot'] }));
  assert.deepEqual(got.map((l) => l.key), ['per-requester:USDC:*:requester=principal:x', 'per-source:USDC:*:source=cold', 'per-source:USDC:*:source=hot']);
  assert.deepEqual(got.map((l) => [l.source, l.requester]), [[null, 'principal:x'], ['cold', null], ['hot', null]]);
  // No source: counted against the sum over every source (never against none).
  assert.deepEqual(applicableLimits(limits, facts({ sources: [] })).map((l) => l.key), ['per-requester:USDC:*:requester=principal:x', 'per-source:USDC:*:source=*']);
});

test('an amount in a reference currency: compared exactly through the price; an unreadable price refuses, never falls through to a later rule', () => {
  const s = set([
    { id: 'big', match: { amount: { at_least: '100000', currency: 'USD' } }, action: { type: 'require_approvals', approvals: 3 } },
    { id: 'rest', action: { type: 'allow' } },
  ]);
  assert.deepEqual(ruleSetProblems(ruleSetSchema.parse({ rules: [{ id: 'usd', match: { amount: { at_least: '1', currency: 'USD' } }, action: { type: 'allow' } }] })), [], 'a currency amount needs no assets');
  const price = (answer: string) => ({
    'ETH/USD': { ok: true as const, asset: 'ETH', currency: 'USD', answer, decimals: 8, round_id: '1', updated_at: '2026-01-01T00:00:00.000Z', feed: '1:0xfeed' },
  });
  // 40 ETH at 2500.00000000 USD is exactly 100000 USD: at_least is inclusive.
  assert.equal(decide(s, { ...facts({ asset: 'ETH', amount: '40' }), prices: price('250000000000') }).ruleId, 'big');
  assert.equal(decide(s, { ...facts({ asset: 'ETH', amount: '40' }), prices: price('249999999999') }).ruleId, 'rest', 'one unit of the answer below');
  assert.equal(decide(s, { ...facts({ asset: 'ETH', amount: '39.999999' }), prices: price('250000000000') }).ruleId, 'rest');
  for (const prices of [undefined, { 'ETH/USD': { ok: false as const, asset: 'ETH', currency: 'USD', code: 'PRICE_STALE', message: 'stale', feed: '1:0xfeed' } }]) {
    const d = decide(s, { ...facts({ asset: 'ETH', amount: '1' }), prices });
    assert.equal(d.action, 'price_unavailable');
    assert.equal(d.ruleId, 'big');
  }
  // Without an amount the rule cannot match, price or not.
  assert.equal(decide(s, facts({ asset: 'ETH', amount: null })).ruleId, 'rest');
});

test('a limit in a currency: values of assets with different feed decimals add up exactly; one sum (one key) whatever the asset', () => {
  const v = valueOfAmounts([
    { amount: '24', price: { answer: String(2500n * 10n ** 8n), decimals: 8 } },
    { amount: '0.5', price: { answer: String(50000n * 10n ** 18n), decimals: 18 } },
    { amount: '0.000001', price: { answer: '100000000', decimals: 8 } },
  ]);
  assert.equal(formatValue(v), '85000.000001');
  assert.equal(compareWithBound(v, '85000.000001'), 0);
  assert.equal(compareWithBound(v, '85000'), 1);
  assert.equal(compareWithBound(v, '85000.0000011'), -1);
  const limits = ruleSetSchema.parse({ rules: [], limits: [{ id: 'usd', currency: 'USD', window_seconds: 60, max_amount: '10' }, { id: 'eth-only', currency: 'USD', assets: ['eth'], window_seconds: 60, max_amount: '10' }] }).limits;
  assert.deepEqual(applicableLimits(limits, facts({ asset: 'ETH' })).map((a) => a.key), ['eth-only:=USD:*', 'usd:=USD:*']);
  assert.deepEqual(applicableLimits(limits, facts({ asset: 'BTC' })).map((a) => a.key), ['usd:=USD:*']);
});
