/**
 * Credentials under four-eyes (issue 20, finding 3): one admin alone cannot get a movement (or a
 * template proposal) approved by minting identities. A token on an existing principal, a new
 * principal, a token of a role that approves or administers: each is a proposal that a second
 * principal must confirm, and only then exists. The two-admin flow works; the CLI (database access)
 * may be the second person.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { FerryError } from '../src/errors.ts';
import { promoteAuditBatch } from '../src/persistence/audit.ts';
import { credentialProposalTransitions, getCredentialProposal } from '../src/persistence/credential-proposals.ts';
import { authenticateToken, createToken } from '../src/persistence/tokens.ts';
import { confirmCredentialProposal, replayCredentialProposal } from '../src/services/credential-proposals.ts';
import { createApiToken } from '../src/services/principals.ts';
import { appForFile } from './helpers/app.ts';
import { callApi, expectStatus, type Reply } from './helpers/http.ts';
import { makeTemplateLive } from './helpers/templates.ts';

// A quorum of two: the attack needs more than one identity besides the requester.
const { db, app, config } = await appForFile({ FERRY_DATA_DIR: '.ferry/test-credential-proposals', FERRY_APPROVAL_QUORUM: '2' }, { workers: false });

// What the database (the root of trust) made: two admins, a person bob with an approver token.
const mallory = await createToken(db.pool, { name: 'mallory', role: 'admin' });
const trent = await createToken(db.pool, { name: 'trent', role: 'admin' });
const bob = await createToken(db.pool, { name: 'bob', role: 'approver' });
const carol = await createToken(db.pool, { name: 'carol', role: 'approver' });
const operator = await createToken(db.pool, { name: 'ops', role: 'operator' });
await makeTemplateLive(app, db.pool, {
  template_key: 'pay',
  nodes: [{ node_key: 'a', node_kind: 'action', action_type: 'sim_action', executor_binding: 'exec.sim.action' }],
}, { proposer: operator.token, approver: bob.token });

const call = (method: string, path: string, token: string, body?: unknown): Promise<Reply> => callApi(app, method, path, token, body);
const count = async (sql: string, params: unknown[] = []) => (await db.pool.query(sql, params)).rows[0].n as number;
const tokensOf = (principal: string) =>
  count('SELECT count(*)::int AS n FROM api_tokens t JOIN principals p ON p.id = t.principal_id WHERE p.name = $1', [principal]);

describe('one admin alone', () => {
  test('cannot get its movement approved: every identity it tries to mint is only a proposal it cannot confirm', async () => {
    // A requester token of its own principal decides nothing: made at once.
    const own = await call('POST', '/v3/tokens', mallory.token, { principal: 'mallory', role: 'requester' });
    expectStatus(own, 201);
    const m = await call('POST', '/v3/movements', own.body.secret, { template_key: 'pay', intent: { n: 1 } });
    expectStatus(m, 201);
    const movement = m.body.movement;

    // A token on bob, an existing principal: proposed, not made.
    const bobBefore = await tokensOf('bob');
    const shadow = await call('POST', '/v3/tokens', mallory.token, { name: 'bob.shadow', role: 'approver', principal: 'bob' });
    expectStatus(shadow, 202);
    assert.equal(shadow.body.proposal.state, 'PROPOSED');
    assert.equal(shadow.body.proposal.subject, 'bob');
    assert.ok(!('secret' in shadow.body), 'no secret before a second admin confirms');
    assert.equal(await tokensOf('bob'), bobBefore);
    // Even a token of a role that decides nothing, for someone else, waits for a second admin.
    expectStatus(await call('POST', '/v3/tokens', mallory.token, { name: 'bob.view', role: 'viewer', principal: 'bob' }), 202);

    // New principals for a quorum, and an approver or admin token for itself: proposals too.
    const sock1 = await call('POST', '/v3/principals', mallory.token, { name: 'sock1' });
    const sock2 = await call('POST', '/v3/principals', mallory.token, { name: 'sock2' });
    expectStatus(sock1, 202);
    expectStatus(sock2, 202);
    assert.equal(await count(`SELECT count(*)::int AS n FROM principals WHERE name LIKE 'sock%'`), 0);
    const selfApprover = await call('POST', '/v3/tokens', mallory.token, { principal: 'mallory', role: 'approver' });
    const selfAdmin = await call('POST', '/v3/tokens', mallory.token, { principal: 'mallory', role: 'admin', name: 'mallory-2' });
    expectStatus(selfApprover, 202);
    expectStatus(selfAdmin, 202);

    // It cannot confirm any of them itself.
    for (const p of [shadow, sock1, sock2, selfApprover, selfAdmin]) {
      expectStatus(await call('POST', `/v3/credential-proposals/${p.body.proposal.id}/confirm`, mallory.token), 403, 'FOUR_EYES_VIOLATION');
      assert.equal((await getCredentialProposal(db.pool, p.body.proposal.id))!.proposal_state, 'PROPOSED');
    }
    // Nor approve with what it has: admin does not approve movements, its own requester is four-eyes.
    expectStatus(await call('POST', `/v3/movements/${movement.id}/approve`, mallory.token, { compiled_plan_hash: movement.compiled_plan_hash }), 403, 'FORBIDDEN');
    assert.equal((await call('GET', `/v3/movements/${movement.id}`, bob.token)).body.movement.state, 'PENDING_APPROVAL');
    assert.equal(await tokensOf('mallory'), 2, 'its admin token and the requester token, nothing else');
  });

  test('a bare token name that is a principal never lands on it', async () => {
    await assert.rejects(
      createApiToken(db.pool, { name: 'bob', role: 'approver' }, 'cli:mallory'),
      (e: unknown) => e instanceof FerryError && e.code === 'VALIDATION_FAILED' && e.details.field === 'principal',
    );
    await assert.rejects(createToken(db.pool, { name: 'carol', role: 'approver' }), (e: unknown) => e instanceof FerryError && e.code === 'VALIDATION_FAILED');
    assert.equal(await tokensOf('bob'), 1);
    assert.equal(await tokensOf('carol'), 1);
  });

  test('cannot approve its own template proposal through a minted identity', async () => {
    const posted = await call('POST', '/v3/templates', mallory.token, {
      template_key: 'pay',
      nodes: [{ node_key: 'b', node_kind: 'action', action_type: 'sim_action', executor_binding: 'exec.sim.action' }],
    });
    expectStatus(posted, 202);
    const pid = posted.body.proposal.id;
    expectStatus(await call('POST', `/v3/template-proposals/${pid}/approve`, mallory.token, {}), 403, 'FOUR_EYES_VIOLATION');
    const minted = await call('POST', '/v3/tokens', mallory.token, { name: 'carol.shadow', role: 'approver', principal: 'carol' });
    expectStatus(minted, 202);
    expectStatus(await call('POST', `/v3/credential-proposals/${minted.body.proposal.id}/confirm`, mallory.token), 403, 'FOUR_EYES_VIOLATION');
    const row = (await call('GET', `/v3/template-proposals/${pid}`, mallory.token)).body.proposal;
    assert.equal(row.state, 'PROPOSED');
    expectStatus(await call('POST', `/v3/template-proposals/${pid}/withdraw`, mallory.token, {}), 200);
  });
});

describe('two admins', () => {
  test('one proposes, another confirms: the token exists, its secret goes to the confirmer only, and it approves', async () => {
    const m = (await call('POST', '/v3/movements', (await call('POST', '/v3/tokens', trent.token, { principal: 'trent', role: 'requester' })).body.secret, { template_key: 'pay', intent: { n: 2 } })).body.movement;
    await call('POST', '/v3/principals', mallory.token, { name: 'dave' }).then(async (p) => {
      expectStatus(p, 202);
      const ok = await call('POST', `/v3/credential-proposals/${p.body.proposal.id}/confirm`, trent.token);
      expectStatus(ok, 200);
      assert.equal(ok.body.principal.name, 'dave');
      assert.equal(ok.body.proposal.state, 'CONFIRMED');
      assert.equal(ok.body.proposal.result_id, ok.body.principal.id);
    });
    const proposed = await call('POST', '/v3/tokens', mallory.token, { principal: 'dave', role: 'approver' });
    expectStatus(proposed, 202);
    const shown = await call('GET', `/v3/credential-proposals/${proposed.body.proposal.id}`, trent.token);
    assert.equal(shown.body.proposal.proposed_by_name, 'mallory');
    const confirmed = await call('POST', `/v3/credential-proposals/${proposed.body.proposal.id}/confirm`, trent.token);
    expectStatus(confirmed, 200);
    assert.equal(confirmed.body.token.principal_name, 'dave');
    assert.equal(confirmed.body.proposal.decided_by_name, 'trent');
    const secret = confirmed.body.secret as string;
    assert.match(secret, /^fy_/);
    // Decided once: a second confirmation is a conflict, and nothing shows the secret again.
    expectStatus(await call('POST', `/v3/credential-proposals/${proposed.body.proposal.id}/confirm`, trent.token), 409, 'PROPOSAL_STATE_CONFLICT');
    const listed = await call('GET', '/v3/credential-proposals?state=CONFIRMED', trent.token);
    assert.ok(listed.body.proposals.some((p: any) => p.id === proposed.body.proposal.id));
    assert.ok(!listed.text.includes(secret) && !(await call('GET', `/v3/credential-proposals/${proposed.body.proposal.id}`, trent.token)).text.includes(secret));

    // Dave and bob make the quorum of two.
    expectStatus(await call('POST', `/v3/movements/${m.id}/approve`, secret, { compiled_plan_hash: m.compiled_plan_hash }), 200);
    const done = await call('POST', `/v3/movements/${m.id}/approve`, bob.token, { compiled_plan_hash: m.compiled_plan_hash });
    expectStatus(done, 200);
    assert.equal(done.body.movement.state, 'APPROVED');

    // Audited: the proposal, its confirmation, and the token as made by the confirmer on mallory's proposal.
    while ((await promoteAuditBatch(db.pool)) > 0);
    const { rows } = await db.pool.query(`SELECT action, actor, details FROM audit_events WHERE entity_id = $1 OR entity_id = $2 ORDER BY id`, [
      proposed.body.proposal.id,
      confirmed.body.token.id,
    ]);
    assert.deepEqual(rows.map((r) => r.action), ['credential_proposal.propose', 'token.create', 'credential_proposal.confirm']);
    assert.equal(rows[1].actor, `principal:${trent.principal_id}`);
    assert.equal(rows[1].details.proposed_by, `principal:${mallory.principal_id}`);
    assert.ok(!JSON.stringify(rows).includes(secret), 'no secret in the audit trail');

    // Its transitions replay through the machine.
    const log = await credentialProposalTransitions(db.pool, proposed.body.proposal.id);
    assert.deepEqual(log.map((t) => `${t.from_state}>${t.to_state}`), ['>PROPOSED', 'PROPOSED>CONFIRMED']);
    const replay = replayCredentialProposal(log);
    assert.ok(replay.ok && replay.value === 'CONFIRMED', JSON.stringify(replay));
  });

  test('a rejected proposal creates nothing; a late confirmation expires it', async () => {
    const p = await call('POST', '/v3/principals', mallory.token, { name: 'erin' });
    const rejected = await call('POST', `/v3/credential-proposals/${p.body.proposal.id}/reject`, trent.token, { reason: 'who is erin?' });
    expectStatus(rejected, 200);
    assert.equal(rejected.body.proposal.state, 'REJECTED');
    expectStatus(await call('POST', `/v3/credential-proposals/${p.body.proposal.id}/confirm`, trent.token), 409, 'PROPOSAL_STATE_CONFLICT');
    assert.equal(await count(`SELECT count(*)::int AS n FROM principals WHERE name = 'erin'`), 0);

    const late = await call('POST', '/v3/principals', mallory.token, { name: 'frank' });
    const id = late.body.proposal.id;
    const after = new Date(Date.parse(late.body.proposal.review_expires_at) + 1000);
    await assert.rejects(
      confirmCredentialProposal({ pool: db.pool, config, now: () => after }, id, `principal:${trent.principal_id}`),
      (e: unknown) => e instanceof FerryError && e.code === 'REVIEW_WINDOW_CLOSED',
    );
    assert.equal((await getCredentialProposal(db.pool, id))!.proposal_state, 'EXPIRED');
    assert.equal(await count(`SELECT count(*)::int AS n FROM principals WHERE name = 'frank'`), 0);
  });

  test('with a single admin, the CLI (database access) confirms as the second person', async () => {
    const p = await call('POST', '/v3/tokens', mallory.token, { principal: 'carol', role: 'viewer', name: 'carol-ro' });
    expectStatus(p, 202);
    const r = await confirmCredentialProposal({ pool: db.pool, config }, p.body.proposal.id, 'cli:root');
    assert.equal(r.proposal.decided_by, 'cli:root');
    assert.equal((await authenticateToken(db.pool, r.token!.token))?.principalName, 'carol');
  });
});
