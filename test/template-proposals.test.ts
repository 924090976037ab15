/**
 * Template proposals end to end on real Postgres: posting a changed template proposes it, a second
 * principal approves it, the challenge window decides between finalization and a challenge, stale
 * proposals expire, the proposer withdraws, and movements compile only from finalized versions.
 * Times come from injected clocks standing at the windows' edges: nothing sleeps.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  approveProposal,
  challengeProposal,
  expireDueProposals,
  finalizeDueProposals,
  finalizeProposal,
  proposeTemplate,
  replayProposal,
  type ProposalDeps,
} from '../src/services/template-proposals.ts';
import { installDemoTemplate, DEMO_TEMPLATE_KEY } from '../src/demo/template.ts';
import { FerryError } from '../src/errors.ts';
import { getProposal, proposalTransitions } from '../src/persistence/template-proposals.ts';
import { getTemplate } from '../src/persistence/templates.ts';
import { parseTemplateDefinition, type TemplateDefinition } from '../src/plan/template-schema.ts';
import { appForFile } from './helpers/app.ts';
import { callerFor, expectStatus } from './helpers/http.ts';
import { makeTemplateLive } from './helpers/templates.ts';
import { createTokens } from './helpers/tokens.ts';

const { db, config, app } = await appForFile({ FERRY_DATA_DIR: '.ferry/test-proposals' }, { workers: false });

const tokens = await createTokens(db.pool, {
  operator: 'operator',
  operator2: { name: 'operator-2', role: 'operator' },
  approver: 'approver',
  admin: 'admin',
  requester: 'requester',
  viewer: 'viewer',
});
type Who = keyof typeof tokens;
const actor = (who: Who) => `token:${tokens[who].id}`;
const call = callerFor(app, tokens);

const template = (key: string, actionType = 'sweep') => ({
  template_key: key,
  description: 'withdraw then sweep',
  nodes: [
    { node_key: 'withdraw', node_kind: 'action', action_type: 'cex_withdrawal', executor_binding: 'exec.sim.action' },
    { node_key: 'sweep', node_kind: 'action', action_type: actionType, executor_binding: 'exec.sim.action' },
  ],
  edges: [{ from: 'withdraw', to: 'sweep' }],
});
const def = (key: string, actionType?: string): TemplateDefinition => parseTemplateDefinition(template(key, actionType));

const HOUR = 3600_000;
const at = (ms: number) => () => new Date(ms);
const deps = (now?: () => Date): ProposalDeps => ({ pool: db.pool, config, now });

async function auditCount(entityId: string, actions: string[]): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(
    `SELECT ((SELECT count(*) FROM audit_outbox WHERE entity_id = $1 AND action = ANY($2))
           + (SELECT count(*) FROM audit_events WHERE entity_id = $1 AND action = ANY($2)))::int AS n`,
    [entityId, actions],
  );
  return rows[0].n;
}

async function proposedAndApproved(key: string, approvedAt: number) {
  const r = await proposeTemplate(deps(at(approvedAt - 1000)), def(key), actor('operator'));
  assert.equal(r.outcome, 'proposed');
  const p = (r as { proposal: { id: string } }).proposal;
  const approved = await approveProposal(deps(at(approvedAt)), p.id, actor('approver'));
  return { id: p.id, end: new Date(approved.challenge_ends_at!).getTime() };
}

describe('proposing over HTTP', () => {
  test('a changed template is a proposal, not a live version; movements cannot use it until it is finalized', async () => {
    const r = await call('POST', '/v3/templates', 'operator', template('prop.live'));
    expectStatus(r, 202);
    assert.equal(r.body.created, true);
    assert.equal(r.body.proposal.state, 'PROPOSED');
    assert.equal(r.body.proposal.base_version, 0);
    assert.equal(r.body.proposal.proposed_by_name, 'operator-1');
    const id = r.body.proposal.id;
    expectStatus(await call('GET', '/v3/templates/prop.live', 'viewer'), 404, 'NOT_FOUND');
    const proposed = await call('POST', '/v3/movements', 'requester', { template_key: 'prop.live', intent: { n: 1 } });
    expectStatus(proposed, 404, 'NOT_FOUND');
    // Not a bare "not found": which proposal, and that it waits for its approval.
    assert.match(proposed.body.error.message, new RegExp(`no live version yet: proposal ${id} is proposed, waiting for its approval`));
    assert.deepEqual([proposed.body.error.details.proposal_id, proposed.body.error.details.proposal_state], [id, 'PROPOSED']);

    // The same graph again returns the open proposal; another graph waits for it to be decided.
    const again = await call('POST', '/v3/templates', 'operator', template('prop.live'));
    expectStatus(again, 202);
    assert.equal(again.body.created, false);
    assert.equal(again.body.proposal.id, id);
    expectStatus(await call('POST', '/v3/templates', 'operator', template('prop.live', 'other')), 409, 'PROPOSAL_ALREADY_OPEN');

    // Four-eyes: the proposer cannot approve, even an admin who proposed; a second principal can.
    expectStatus(await call('POST', `/v3/template-proposals/${id}/approve`, 'operator', {}), 403, 'FORBIDDEN');
    const approved = await call('POST', `/v3/template-proposals/${id}/approve`, 'approver', {});
    expectStatus(approved, 200);
    assert.equal(approved.body.state, 'APPROVED');
    assert.equal(approved.body.approved_by_name, 'approver-1');
    // Still not live: the challenge window is open, and an early finalization is refused.
    const early = await call('POST', '/v3/movements', 'requester', { template_key: 'prop.live', intent: { n: 1 } });
    expectStatus(early, 404, 'NOT_FOUND');
    assert.equal(early.body.error.details.live_at, new Date(approved.body.challenge_ends_at).toISOString(), 'says when it goes live');
    assert.match(early.body.error.message, /approved, and live once its challenge window ends at/);
    await assert.rejects(finalizeProposal(deps(), id), (e: FerryError) => e.code === 'CHALLENGE_WINDOW_OPEN' && e.httpStatus === 409);

    const end = new Date(approved.body.challenge_ends_at).getTime();
    const report = await finalizeDueProposals(deps(at(end)), { batchSize: 10, maxRunMs: 0 });
    assert.equal(report.done, 1);
    const shown = await call('GET', `/v3/template-proposals/${id}`, 'viewer');
    expectStatus(shown, 200);
    assert.equal(shown.body.proposal.state, 'FINALIZED');
    assert.equal(shown.body.proposal.finalized_version, 1);
    assert.deepEqual(shown.body.history.map((t: any) => `${t.from}>${t.to}:${t.event}`), [
      '>PROPOSED:xstate.init',
      'PROPOSED>APPROVED:APPROVE',
      'APPROVED>FINALIZED:FINALIZE',
    ]);
    assert.deepEqual(shown.body.replay, { ok: true, state: 'FINALIZED', reason: null });
    const created = await call('POST', '/v3/movements', 'requester', { template_key: 'prop.live', intent: { n: 1 } });
    expectStatus(created, 201);
    assert.equal(created.body.movement.template_version, 1);

    // Too late to challenge: a 409 with a code, and nothing changes.
    expectStatus(await call('POST', `/v3/template-proposals/${id}/challenge`, 'approver', { reason: 'late' }), 409, 'PROPOSAL_STATE_CONFLICT');
  });

  test('the proposer cannot approve their own proposal (FOUR_EYES_VIOLATION) even with the permission', async () => {
    const r = await call('POST', '/v3/templates', 'admin', template('prop.self'));
    expectStatus(r, 202);
    const own = await call('POST', `/v3/template-proposals/${r.body.proposal.id}/approve`, 'admin', {});
    expectStatus(own, 403, 'FOUR_EYES_VIOLATION');
    assert.equal((await getProposal(db.pool, r.body.proposal.id))!.proposal_state, 'PROPOSED');
    assert.equal((await proposalTransitions(db.pool, r.body.proposal.id)).length, 1, 'a refusal logs nothing');
  });

  test('show diffs against the live version; a second version is proposed against version 1', async () => {
    await makeTemplateLive(app, db.pool, template('prop.diff'), { proposer: tokens.operator.token, approver: tokens.approver.token });
    const r = await call('POST', '/v3/templates', 'operator2', {
      ...template('prop.diff', 'sweep_to_cold'),
      nodes: [...template('prop.diff', 'sweep_to_cold').nodes, { node_key: 'notify', node_kind: 'post_action', action_type: 'notify', executor_binding: 'exec.sim.action' }],
      edges: [...template('prop.diff').edges, { from: 'sweep', to: 'notify' }],
    });
    expectStatus(r, 202);
    assert.equal(r.body.proposal.base_version, 1);
    const shown = await call('GET', `/v3/template-proposals/${r.body.proposal.id}`, 'viewer');
    expectStatus(shown, 200);
    assert.equal(shown.body.live_version, 1);
    assert.deepEqual(shown.body.diff.nodes.added, ['notify']);
    assert.deepEqual(shown.body.diff.nodes.removed, []);
    assert.deepEqual(shown.body.diff.nodes.changed, [{ node_key: 'sweep', fields: [{ field: 'action_type', from: 'sweep', to: 'sweep_to_cold' }] }]);
    assert.deepEqual(shown.body.diff.edges, { added: [{ from: 'sweep', to: 'notify' }], removed: [] });
    const list = await call('GET', '/v3/template-proposals?template_key=prop.diff', 'viewer');
    expectStatus(list, 200);
    assert.deepEqual(list.body.proposals.map((p: any) => p.state), ['PROPOSED', 'FINALIZED']);
    expectStatus(await call('GET', '/v3/template-proposals?state=NOPE', 'viewer'), 400, 'VALIDATION_FAILED');
    expectStatus(await call('GET', '/v3/template-proposals/00000000-0000-4000-8000-000000000000', 'viewer'), 404, 'NOT_FOUND');
  });

  test('withdraw: only the proposer, only while open', async () => {
    const r = await call('POST', '/v3/templates', 'operator', template('prop.withdraw'));
    const id = r.body.proposal.id;
    expectStatus(await call('POST', `/v3/template-proposals/${id}/withdraw`, 'operator2', {}), 403, 'NOT_PROPOSER');
    const w = await call('POST', `/v3/template-proposals/${id}/withdraw`, 'operator', {});
    expectStatus(w, 200);
    assert.equal(w.body.state, 'WITHDRAWN');
    expectStatus(await call('POST', `/v3/template-proposals/${id}/approve`, 'approver', {}), 409, 'PROPOSAL_STATE_CONFLICT');
    expectStatus(await call('POST', `/v3/template-proposals/${id}/withdraw`, 'operator', {}), 409, 'PROPOSAL_STATE_CONFLICT');
    // Withdrawn frees the key for the next proposal.
    expectStatus(await call('POST', '/v3/templates', 'operator', template('prop.withdraw', 'other')), 202);
    assert.equal(await auditCount(id, ['template_proposal.withdraw']), 1);
  });

  test('a challenge needs a reason and an open window; a challenged proposal never becomes live', async () => {
    const { id, end } = await proposedAndApproved('prop.challenge', Date.now());
    expectStatus(await call('POST', `/v3/template-proposals/${id}/challenge`, 'approver', {}), 400, 'VALIDATION_FAILED');
    expectStatus(await call('POST', `/v3/template-proposals/${id}/challenge`, 'approver', { reason: '   ' }), 400, 'VALIDATION_FAILED');
    expectStatus(await call('POST', `/v3/template-proposals/${id}/challenge`, 'operator', { reason: 'x' }), 403, 'FORBIDDEN');
    const c = await call('POST', `/v3/template-proposals/${id}/challenge`, 'admin', { reason: 'sweeps to the wrong wallet' });
    expectStatus(c, 200);
    assert.equal(c.body.state, 'CHALLENGED');
    assert.equal(c.body.reason, 'sweeps to the wrong wallet');
    const report = await finalizeDueProposals(deps(at(end + HOUR)), { batchSize: 10, maxRunMs: 0 });
    assert.equal(report.done, 0);
    assert.equal(await getTemplate(db.pool, 'prop.challenge'), null);
  });
});

describe('windows', () => {
  test('a challenge at the window end is refused (CHALLENGE_WINDOW_CLOSED); one just before it wins', async () => {
    const a = await proposedAndApproved('win.closed', Date.parse('2031-01-01T00:00:00Z'));
    await assert.rejects(challengeProposal(deps(at(a.end)), a.id, actor('approver'), 'late'), (e: FerryError) => e.code === 'CHALLENGE_WINDOW_CLOSED' && e.httpStatus === 409);
    const b = await proposedAndApproved('win.open', Date.parse('2031-01-01T00:00:00Z'));
    assert.equal((await challengeProposal(deps(at(b.end - 1)), b.id, actor('approver'), 'just in time')).proposal_state, 'CHALLENGED');
  });

  test('expiry: a PROPOSED proposal past its review window becomes EXPIRED and can no longer be approved', async () => {
    const t0 = Date.parse('2032-01-01T00:00:00Z');
    const r = await proposeTemplate(deps(at(t0)), def('win.expire'), actor('operator'));
    const id = (r as any).proposal.id as string;
    const expiresAt = t0 + config.templateReviewWindowSeconds * 1000;
    // (Proposals of the tests above, made on the real clock, expire in this run; this one not yet.)
    await expireDueProposals(deps(at(expiresAt - 1)), { batchSize: 50, maxRunMs: 0 });
    assert.equal((await getProposal(db.pool, id))!.proposal_state, 'PROPOSED', 'not yet');
    await assert.rejects(approveProposal(deps(at(expiresAt)), id, actor('approver')), (e: FerryError) => e.code === 'REVIEW_WINDOW_CLOSED');
    const report = await expireDueProposals(deps(at(expiresAt)), { batchSize: 10, maxRunMs: 0 });
    assert.deepEqual(report, { done: 1, skipped: 0, budgetExhausted: false });
    const row = (await getProposal(db.pool, id))!;
    assert.equal(row.proposal_state, 'EXPIRED');
    assert.equal(row.decided_by, 'system:expiry');
    assert.equal(await auditCount(id, ['template_proposal.expire']), 1);
    const log = await proposalTransitions(db.pool, id);
    assert.deepEqual(replayProposal(log).ok, true);
    assert.equal(log.at(-1)!.actor, 'worker:template_proposal_expiration');
  });
});

describe('finalize vs challenge at the window boundary', () => {
  test('100 races: exactly one winner each, the loser gets a 409 with a code, one matching audit event', async () => {
    const base = Date.parse('2033-01-01T00:00:00Z');
    const wins = { finalize: 0, challenge: 0 };
    for (let i = 0; i < 100; i++) {
      const { id, end } = await proposedAndApproved(`race.${i}`, base + i * 1000);
      // Both are within their rules at these clocks (the window is open 1 ms before its end and
      // over at its end), so only the row lock decides.
      const finalize = () => finalizeProposal(deps(at(end)), id);
      const challenge = () => challengeProposal(deps(at(end - 1)), id, actor('approver'), `race ${i}`);
      const [first, second] = i % 2 === 0 ? [finalize, challenge] : [challenge, finalize];
      const results = await Promise.allSettled([first(), second()]);
      const won = results.filter((r) => r.status === 'fulfilled');
      const lost = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
      assert.equal(won.length, 1, `race ${i}: exactly one winner`);
      assert.equal(lost.length, 1);
      const err = lost[0].reason as FerryError;
      assert.ok(err instanceof FerryError, `race ${i}: ${String(err)}`);
      assert.equal(err.code, 'PROPOSAL_STATE_CONFLICT');
      assert.equal(err.httpStatus, 409);
      const row = (await getProposal(db.pool, id))!;
      assert.ok(row.proposal_state === 'FINALIZED' || row.proposal_state === 'CHALLENGED');
      wins[row.proposal_state === 'FINALIZED' ? 'finalize' : 'challenge']++;
      assert.equal(await auditCount(id, ['template_proposal.finalize', 'template_proposal.challenge']), 1, `race ${i}: one audit event`);
      const log = await proposalTransitions(db.pool, id);
      assert.equal(log.length, 3, 'created, approved, decided once');
      assert.equal(log[2].to_state, row.proposal_state);
      const versions = await db.pool.query(
        'SELECT count(*)::int AS n FROM template_versions tv JOIN plan_templates pt ON pt.id = tv.template_id WHERE pt.template_key = $1',
        [`race.${i}`],
      );
      assert.equal(versions.rows[0].n, row.proposal_state === 'FINALIZED' ? 1 : 0, 'a version exists only for the finalized one');
    }
    assert.equal(wins.finalize + wins.challenge, 100);
    // Which writer wins is up to the lock; both must be able to (started in alternating order).
    assert.ok(wins.finalize > 0 && wins.challenge > 0, JSON.stringify(wins));
  });
});

describe('templates Ferry installs itself', () => {
  test('the demo template is a system proposal finalized at once, with an audit event that says so', async () => {
    assert.equal(await installDemoTemplate(db.pool), 'installed');
    assert.equal(await installDemoTemplate(db.pool), 'present');
    const list = await call('GET', `/v3/template-proposals?template_key=${DEMO_TEMPLATE_KEY}`, 'viewer');
    assert.equal(list.body.proposals.length, 1);
    const p = list.body.proposals[0];
    assert.equal(p.state, 'FINALIZED');
    assert.equal(p.system, true);
    assert.equal(p.finalized_version, 1);
    const { rows } = await db.pool.query(`SELECT details FROM audit_outbox WHERE entity_id = $1 AND action = 'template_proposal.system_install'`, [p.id]);
    assert.equal(rows.length, 1);
    assert.equal(rows[0].details.system, true);
    assert.match(rows[0].details.note, /installed by Ferry itself/);
    const log = await proposalTransitions(db.pool, p.id);
    assert.deepEqual(log.map((t) => t.event_type), ['xstate.init', 'INSTALL']);
    assert.equal(replayProposal(log).ok, true);
  });
});
