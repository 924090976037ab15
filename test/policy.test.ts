/**
 * The treasury policy end to end (docs/policy.md): a real Ferry on its HTTP port, its runtime without
 * worker loops (nothing runs a movement past APPROVED), the address book and the rule set changed only
 * through reviewed proposals, and movements checked at creation and at each approval.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runCli } from '../src/cli/run.ts';
import { getPolicyProposal, lockVelocitySum } from '../src/persistence/policy.ts';
import { finalizePolicyProposal } from '../src/services/policy.ts';
import { loadConfig } from '../src/config.ts';
import { log } from '../src/log.ts';
import { registry } from '../src/metrics.ts';
import { findSweep } from '../src/sweeps/sweeps.ts';
import { ferryForFile } from './helpers/ferry.ts';
import { callApi, type Reply } from './helpers/http.ts';
import { makeTemplateLive } from './helpers/templates.ts';
import { createTokens } from './helpers/tokens.ts';
import { waitFor } from './helpers/wait.ts';

const { db, ferry } = await ferryForFile({}, { runtime: 'api' });
const tokens = await createTokens(db.pool, {
  operator: 'operator',
  requester: 'requester',
  approver: 'approver',
  approver2: { name: 'approver-2', role: 'approver' },
  approver3: { name: 'approver-3', role: 'approver' },
  approver4: { name: 'approver-4', role: 'approver' },
});
type Who = keyof typeof tokens;
const call = (method: string, path: string, who: Who, body?: unknown): Promise<Reply> => callApi(ferry.url, method, path, tokens[who].token, body);

await makeTemplateLive(
  ferry.url,
  db.pool,
  {
    template_key: 'policy.pay',
    nodes: [{ node_key: 'pay', node_kind: 'action', action_type: 'transfer', executor_binding: 'exec.sim.action' }],
    edges: [],
  },
  { proposer: tokens.operator.token, approver: tokens.approver.token },
);

const COLD = '0x00000000000000000000000000000000000000c0';
const STRANGER = '0x00000000000000000000000000000000000000e1';

/** Stands the clock at the end of a proposal's cool-down and finalizes it (what the next policy read does). */
async function finalizeAtCooldownEnd(id: string) {
  const row = (await getPolicyProposal(db.pool, id))!;
  return finalizePolicyProposal({ pool: db.pool, now: () => new Date(row.challenge_ends_at!) }, id);
}

/** Proposes (operator), approves (approver) and finalizes at the end of its cool-down: the rule set is live. */
async function liveRules(set: unknown): Promise<number> {
  const p = await call('POST', '/v3/policy/rules', 'operator', set);
  assert.equal(p.status, 202, p.text);
  const a = await call('POST', `/v3/policy/proposals/${p.body.id}/approve`, 'approver', {});
  assert.equal(a.status, 200, a.text);
  return (await finalizeAtCooldownEnd(p.body.id)).result_version!;
}

async function liveEntry(entry: Record<string, unknown>): Promise<void> {
  const p = await call('POST', '/v3/policy/address-book', 'operator', entry);
  assert.equal(p.status, 202, p.text);
  assert.equal((await call('POST', `/v3/policy/proposals/${p.body.id}/approve`, 'approver', {})).status, 200);
  await finalizeAtCooldownEnd(p.body.id);
}

const create = (intent: Record<string, unknown>) => call('POST', '/v3/movements', 'requester', { template_key: 'policy.pay', intent });
const approve = (m: { id: string; compiled_plan_hash: string }, who: Who) =>
  call('POST', `/v3/movements/${m.id}/approve`, who, { compiled_plan_hash: m.compiled_plan_hash });

const allowAll = { id: 'default', action: { type: 'allow' } };

test('a movement to an address outside the book is refused at creation when the policy requires the book', async () => {
  await liveEntry({ name: 'cold', network: 'ethereum', address: COLD.toUpperCase().replace('0X', '0x'), owner: 'treasury', kind: 'internal' });
  const version = await liveRules({
    rules: [{ id: 'book-only', match: { destination: { in_book: false } }, action: { type: 'block', reason: 'destinations must be in the address book' } }, allowAll],
  });

  const stranger = await create({ asset: 'USDC', amount: '10', destination: STRANGER });
  assert.equal(stranger.status, 422, stranger.text);
  assert.equal(stranger.body.error.code, 'POLICY_BLOCKED');
  assert.equal(stranger.body.error.details.rule_id, 'book-only');
  assert.equal(stranger.body.error.details.rule_set_version, version);
  const none = await db.pool.query(`SELECT count(*)::int AS n FROM movement_requests WHERE intent->>'destination' = $1`, [STRANGER]);
  assert.equal(none.rows[0].n, 0, 'nothing was created');

  // The book entry, written in another case: the same address.
  const cold = await create({ asset: 'USDC', amount: '10', destination: COLD });
  assert.equal(cold.status, 201, cold.text);
  assert.deepEqual(cold.body.movement.policy, {
    rule_set_version: version,
    rule_id: 'default',
    action: 'allow',
    asset: 'USDC',
    amount: '10',
    destination_entry: 'cold',
    // The plan's nodes name no signer key or account: no source to match.
    sources: [],
    approvers_from: null,
  });
  const audit = await db.pool.query(`SELECT details FROM audit_outbox WHERE action = 'movement.create' AND entity_id = $1`, [cold.body.movement.id]);
  assert.equal(audit.rows[0].details.policy.rule_id, 'default');
  assert.equal(audit.rows[0].details.policy.rule_set_version, version);

  // A rule set no rule of which matches refuses everything it does not allow.
  await liveRules({ rules: [{ id: 'cold-only', match: { destination: { entries: ['cold'] } }, action: { type: 'allow' } }] });
  const unmatched = await create({ asset: 'USDC', amount: '10' });
  assert.equal(unmatched.status, 422, unmatched.text);
  assert.equal(unmatched.body.error.code, 'POLICY_NO_MATCHING_RULE');
});

test('an amount tier requires three approvers and two are not enough; a rule naming its approvers counts no one else', async () => {
  const version = await liveRules({
    rules: [
      { id: 'large', match: { assets: ['USDC'], amount: { at_least: '10000' } }, action: { type: 'require_approvals', approvals: 3 } },
      { id: 'named', match: { assets: ['DAI'] }, action: { type: 'require_approvals', approvals: 1, from: ['approver-2'] } },
      allowAll,
    ],
  });
  const small = await create({ asset: 'USDC', amount: '9999.99' });
  assert.equal(small.status, 201, small.text);
  assert.equal(small.body.movement.approval_quorum, 1);

  const big = (await create({ asset: 'USDC', amount: '10000' })).body.movement;
  assert.equal(big.approval_quorum, 3);
  assert.equal(big.policy.rule_id, 'large');
  assert.equal(big.policy.rule_set_version, version);
  assert.equal((await approve(big, 'approver')).body.movement.state, 'PENDING_APPROVAL');
  const two = await approve(big, 'approver2');
  assert.equal(two.status, 200, two.text);
  assert.equal(two.body.movement.state, 'PENDING_APPROVAL', 'two approvals are not enough');
  assert.equal(two.body.movement.approvals.length, 2);
  const three = await approve(big, 'approver3');
  assert.equal(three.body.movement.state, 'APPROVED');
  const audit = await db.pool.query(`SELECT details FROM audit_outbox WHERE action = 'movement.approve' AND entity_id = $1 ORDER BY id`, [big.id]);
  assert.deepEqual(audit.rows.map((r) => r.details.policy.rule_id), ['large', 'large', 'large']);

  const dai = (await create({ asset: 'DAI', amount: '5' })).body.movement;
  assert.deepEqual(dai.policy.approvers_from, ['approver-2']);
  const wrong = await approve(dai, 'approver');
  assert.equal(wrong.status, 403, wrong.text);
  assert.equal(wrong.body.error.code, 'POLICY_APPROVER_NOT_ELIGIBLE');
  assert.equal(wrong.body.error.details.rule_id, 'named');
  assert.equal((await approve(dai, 'approver2')).body.movement.state, 'APPROVED');
});

test('two concurrent approvals that would each fit under a velocity limit but not together: exactly one succeeds', async () => {
  await liveRules({ rules: [allowAll], limits: [{ id: 'eurc-hourly', asset: 'EURC', window_seconds: 3600, max_amount: '1000' }] });
  const a = (await create({ asset: 'EURC', amount: '600', destination: COLD })).body.movement;
  const b = (await create({ asset: 'EURC', amount: '600', destination: STRANGER })).body.movement;
  assert.ok(a && b, 'each fits under the limit alone');

  // Hold the limit's lock, so both approvals are inside their transactions, at the lock, together.
  const holder = await db.pool.connect();
  try {
    await holder.query('BEGIN');
    await lockVelocitySum(holder, 'eurc-hourly:EURC:*');
    const both = Promise.all([approve(a, 'approver'), approve(b, 'approver2')]);
    await waitFor('both approvals to wait on the velocity lock', async () => {
      const { rows } = await holder.query(`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`);
      return rows[0].n === 2 ? true : null;
    });
    await holder.query('COMMIT');
    const replies = await both;
    const ok = replies.filter((r) => r.status === 200);
    const refused = replies.filter((r) => r.status !== 200);
    assert.equal(ok.length, 1, replies.map((r) => r.text).join('\n'));
    assert.equal(refused[0].status, 422, refused[0].text);
    assert.equal(refused[0].body.error.code, 'VELOCITY_LIMIT_EXCEEDED');
    assert.equal(refused[0].body.error.details.limit_id, 'eurc-hourly');
    assert.equal(refused[0].body.error.details.used, '600');
  } finally {
    holder.release();
  }
  const states = await db.pool.query(`SELECT request_state FROM movement_requests WHERE id = ANY($1::uuid[]) ORDER BY request_state`, [[a.id, b.id]]);
  assert.deepEqual(states.rows.map((r) => r.request_state), ['APPROVED', 'PENDING_APPROVAL']);

  // The window's sum also refuses a new movement that would pass it, at creation.
  const more = await create({ asset: 'EURC', amount: '400.000001' });
  assert.equal(more.status, 422, more.text);
  assert.equal(more.body.error.code, 'VELOCITY_LIMIT_EXCEEDED');
  assert.equal((await create({ asset: 'EURC', amount: '400' })).status, 201, 'up to the maximum fits');
});

test('a rule change waits for its second person and its cool-down; a challenge in the cool-down stops it', async () => {
  await liveRules({ rules: [allowAll] });
  const blockGbp = { rules: [{ id: 'no-gbp', match: { assets: ['GBP'] }, action: { type: 'block', reason: 'GBP is not a treasury asset' } }, allowAll] };
  const p = await call('POST', '/v3/policy/rules', 'operator', blockGbp);
  assert.equal(p.status, 202, p.text);
  assert.equal(p.body.state, 'PROPOSED');
  assert.equal((await create({ asset: 'GBP', amount: '1' })).status, 201, 'proposed is not live');

  const self = await call('POST', `/v3/policy/proposals/${p.body.id}/approve`, 'operator', {});
  assert.equal(self.status, 403, 'the operator may not approve at all');
  // The proposer's own principal with an approver token is still the proposer.
  const sameAsProposer = await createTokens(db.pool, { t: { name: 'operator-1.approver', role: 'approver', principal: 'operator-1' } });
  const four = await callApi(ferry.url, 'POST', `/v3/policy/proposals/${p.body.id}/approve`, sameAsProposer.t.token, {});
  assert.equal(four.status, 403, four.text);
  assert.equal(four.body.error.code, 'FOUR_EYES_VIOLATION');

  const approved = await call('POST', `/v3/policy/proposals/${p.body.id}/approve`, 'approver', {});
  assert.equal(approved.body.state, 'APPROVED');
  assert.equal((await create({ asset: 'GBP', amount: '1' })).status, 201, 'approved but in its cool-down is not live');
  const early = await call('POST', `/v3/policy/proposals/${p.body.id}/finalize`, 'operator', {});
  assert.equal(early.status, 409, early.text);
  assert.equal(early.body.error.code, 'CHALLENGE_WINDOW_OPEN');

  // Once the cool-down has passed (the row backdated), the next movement is checked under it.
  await db.pool.query(`UPDATE policy_proposals SET challenge_ends_at = now() - interval '1 second' WHERE id = $1`, [p.body.id]);
  const refused = await create({ asset: 'GBP', amount: '1' });
  assert.equal(refused.status, 422, refused.text);
  assert.equal(refused.body.error.code, 'POLICY_BLOCKED');
  assert.equal(refused.body.error.details.rule_id, 'no-gbp');
  assert.equal((await getPolicyProposal(db.pool, p.body.id))!.proposal_state, 'FINALIZED');

  // A challenge within the cool-down: the change never goes live.
  const q = await call('POST', '/v3/policy/rules', 'operator', { rules: [allowAll] });
  await call('POST', `/v3/policy/proposals/${q.body.id}/approve`, 'approver', {});
  const challenged = await call('POST', `/v3/policy/proposals/${q.body.id}/challenge`, 'approver2', { reason: 'reopens GBP' });
  assert.equal(challenged.body.state, 'CHALLENGED');
  await db.pool.query(`UPDATE policy_proposals SET challenge_ends_at = now() - interval '1 second' WHERE id = $1`, [q.body.id]);
  assert.equal((await create({ asset: 'GBP', amount: '1' })).body.error.code, 'POLICY_BLOCKED');
  const detail = await call('GET', `/v3/policy/proposals/${q.body.id}`, 'requester');
  assert.deepEqual(detail.body.history.map((t: any) => t.to), ['PROPOSED', 'APPROVED', 'CHALLENGED']);
  assert.equal(detail.body.replay.ok, true);
});

test('ferry policy test says what the live and the proposed rule set would do with a movement', async () => {
  await liveRules({ rules: [{ id: 'tier', match: { assets: ['USDT'], amount: { at_least: '100' } }, action: { type: 'require_approvals', approvals: 2 } }, allowAll] });
  const p = await call('POST', '/v3/policy/rules', 'operator', {
    rules: [{ id: 'no-usdt', match: { assets: ['USDT'] }, action: { type: 'block', reason: 'USDT is being retired' } }, allowAll],
  });
  assert.equal(p.status, 202, p.text);
  let out = '';
  const code = await runCli(['policy', 'test', '--template', 'policy.pay', '--intent', JSON.stringify({ asset: 'USDT', amount: '500', destination: COLD })], {
    env: { FERRY_URL: ferry.url, FERRY_TOKEN: tokens.requester.token },
    io: { out: (t) => (out += t + '\n'), err: (t) => (out += t + '\n') },
  });
  assert.equal(code, 0, out);
  assert.match(out, /book entry cold, internal/);
  assert.match(out, /^live \(version \d+\): ALLOWED by rule tier; needs 2 approvals$/m);
  assert.match(out, new RegExp(`^proposed ${p.body.id} \\(PROPOSED\\) \\(version \\d+\\): REFUSED by rule no-usdt$`, 'm'));
  assert.match(out, /POLICY_BLOCKED: policy rule no-usdt .*USDT is being retired/);
  assert.equal((await call('POST', `/v3/policy/proposals/${p.body.id}/withdraw`, 'operator', {})).body.state, 'WITHDRAWN');
});

test('the address book: entries are proposed, one destination has one name, removal is reviewed too', async () => {
  const p = await call('POST', '/v3/policy/address-book', 'operator', { name: 'cold-twin', network: 'base', address: COLD, owner: 'x', kind: 'external' });
  assert.equal(p.status, 422, p.text);
  assert.equal(p.body.error.code, 'POLICY_INVALID');
  const memo = await call('POST', '/v3/policy/address-book', 'operator', { name: 'exchange-memo', network: 'binance', address: 'bnb1deposit', tag: '12345', owner: 'Binance', kind: 'external' });
  assert.equal(memo.status, 202, memo.text);
  const twice = await call('POST', '/v3/policy/address-book', 'operator', { name: 'exchange-memo', network: 'binance', address: 'bnb1deposit', tag: '9', owner: 'Binance', kind: 'external' });
  assert.equal(twice.body.error.code, 'PROPOSAL_ALREADY_OPEN');
  const rejected = await call('POST', `/v3/policy/proposals/${memo.body.id}/reject`, 'approver', { reason: 'wrong memo' });
  assert.equal(rejected.body.state, 'REJECTED');
  const book = await call('GET', '/v3/policy/address-book', 'requester');
  assert.deepEqual(book.body.entries.map((e: any) => e.name), ['cold']);

  const removal = await call('POST', '/v3/policy/address-book/cold/remove', 'operator', {});
  assert.equal(removal.status, 202, removal.text);
  await call('POST', `/v3/policy/proposals/${removal.body.id}/approve`, 'approver', {});
  await finalizeAtCooldownEnd(removal.body.id);
  assert.deepEqual((await call('GET', '/v3/policy/address-book', 'requester')).body.entries, []);
});

test('a tier takes its approvals from a named group: three members are required, two are not enough, a non-member does not count', async () => {
  const unknownGroup = await call('POST', '/v3/policy/rules', 'operator', {
    rules: [{ id: 'leads', action: { type: 'require_approvals', approvals: 1, from_groups: ['nobody'] } }],
  });
  assert.equal(unknownGroup.status, 422, unknownGroup.text);
  assert.equal(unknownGroup.body.error.code, 'POLICY_INVALID');
  const tooSmall = await call('POST', '/v3/policy/rules', 'operator', {
    groups: [{ name: 'pair', members: ['approver-1', 'approver-2'] }],
    rules: [{ id: 'leads', action: { type: 'require_approvals', approvals: 3, from_groups: ['pair'] } }],
  });
  assert.equal(tooSmall.status, 422, 'a group of two cannot give three approvals');

  await liveRules({
    groups: [{ name: 'treasury-leads', members: ['approver-1', 'approver-2', 'approver-3'] }],
    rules: [
      { id: 'large-gbp', match: { assets: ['GBPT'], amount: { at_least: '1000' } }, action: { type: 'require_approvals', approvals: 3, from_groups: ['treasury-leads'] } },
      allowAll,
    ],
  });
  const m = (await create({ asset: 'GBPT', amount: '5000' })).body.movement;
  assert.equal(m.approval_quorum, 3);
  assert.deepEqual(m.policy.approvers_from, ['approver-1', 'approver-2', 'approver-3']);
  const outsider = await approve(m, 'approver4');
  assert.equal(outsider.status, 403, outsider.text);
  assert.equal(outsider.body.error.code, 'POLICY_APPROVER_NOT_ELIGIBLE');
  assert.equal((await approve(m, 'approver')).body.movement.state, 'PENDING_APPROVAL');
  const two = await approve(m, 'approver2');
  assert.equal(two.body.movement.state, 'PENDING_APPROVAL', 'two of the group are not enough');
  assert.equal((await approve(m, 'approver3')).body.movement.state, 'APPROVED');
});

test('the policy_proposals sweep makes an approved change live once its cool-down has passed, with no policy read, and counts it', async () => {
  const settled = async () => (await registry.getSingleMetric('ferry_policy_proposals_settled_total')!.get()).values.find((v) => v.labels.result === 'finalized')?.value ?? 0;
  const sweep = findSweep('policy_proposals');
  const config = loadConfig({});
  assert.deepEqual([sweep.settings(config).enabled, sweep.settings(config).intervalSeconds], [true, 60]);
  const run = () => sweep.run({ pool: db.pool, config, log } as never, sweep.settings(config));

  const p = await call('POST', '/v3/policy/address-book', 'operator', { name: 'sweep-cold', network: 'sim', address: 'sweep-cold', owner: 'treasury', kind: 'internal' });
  assert.equal(p.status, 202, p.text);
  assert.equal((await call('POST', `/v3/policy/proposals/${p.body.id}/approve`, 'approver', {})).status, 200);
  // In its cool-down: the sweep leaves it.
  assert.equal((await run()).items, 0);
  assert.equal((await getPolicyProposal(db.pool, p.body.id))!.proposal_state, 'APPROVED');

  const before = await settled();
  await db.pool.query(`UPDATE policy_proposals SET challenge_ends_at = now() - interval '1 second' WHERE id = $1`, [p.body.id]);
  const done = await run();
  assert.equal(done.items, 1);
  assert.equal((await getPolicyProposal(db.pool, p.body.id))!.proposal_state, 'FINALIZED');
  const { rows } = await db.pool.query(`SELECT name FROM address_book_entries WHERE name = 'sweep-cold'`);
  assert.equal(rows.length, 1, 'the entry is live');
  assert.equal((await settled()) - before, 1);
  assert.equal((await run()).items, 0, 'once');
});
