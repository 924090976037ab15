/**
 * The treasury policy in /ui, in a real browser (Debian's Chromium driven by playwright-core): the
 * address book with the form that proposes an entry and the button that proposes a removal; a
 * policy proposal's page with what it changes, its history and its buttons (the proposer's approve
 * refused with FOUR_EYES_VIOLATION shown, an operator's with FORBIDDEN, a second principal's
 * accepted; finalize refused during the cool-down, accepted once the row's challenge window is
 * backdated past, and the page then says the row and its append-only log disagree; a rule set
 * finalized as the sweep would, at the cool-down's end, replays); the live rules and limits in words; a rule set proposed from the JSON textarea
 * (a refused one shows Ferry's status, code and message); and "try a movement" (POST
 * /v3/policy/test) naming the rule that matched. Ferry runs no worker loops: nothing moves but what
 * the test does.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { getPolicyProposal } from '../src/persistence/policy.ts';
import { finalizePolicyProposal } from '../src/services/policy.ts';
import { browserAvailable, browserFixture, openBrowser, screenshot } from './helpers/browser.ts';
import { ferryForFile } from './helpers/ferry.ts';
import { callApi } from './helpers/http.ts';
import { makeTemplateLive } from './helpers/templates.ts';
import { createTokens } from './helpers/tokens.ts';

if (browserAvailable('the policy view in /ui')) await browserTests();

async function browserTests() {
  // Registered first: the browser closes before Ferry stops and the database is dropped.
  const held = browserFixture();
  const { db, ferry } = await ferryForFile({}, { runtime: 'api' });
  // The proposer is an admin, who may also approve policy: only four-eyes stops it approving its own.
  const tokens = await createTokens(db.pool, { admin: 'admin', operator: 'operator', approver: 'approver', viewer: 'viewer' });
  const base = ferry.url;
  const call = async (method: string, path: string, who: keyof typeof tokens, body?: unknown) => {
    const r = await callApi(base, method, path, tokens[who].token, body);
    assert.ok(r.status < 300, `${method} ${path}: ${r.status} ${r.text}`);
    return r.body;
  };
  /** The cool-down is over: the row's challenge window ended a second ago (no sleep). */
  const coolDownPassed = async (id: string) => {
    const r = await db.pool.query(`UPDATE policy_proposals SET challenge_ends_at = now() - interval '1 second' WHERE id = $1 AND proposal_state = 'APPROVED'`, [id]);
    assert.equal(r.rowCount, 1);
  };

  await makeTemplateLive(
    base,
    db.pool,
    { template_key: 'treasury.pay', nodes: [{ node_key: 'pay', node_kind: 'action', action_type: 'transfer', executor_binding: 'exec.sim.action' }], edges: [] },
    { proposer: tokens.operator.token, approver: tokens.approver.token },
  );

  const browser = await openBrowser(base);
  held.browser = browser;
  const { page, offsite, errors } = browser;
  const textOf = async (selector: string) => (await page.locator(selector).textContent()) ?? '';
  const proposalIdOfUrl = async () => {
    await page.waitForURL(/#\/policy\/[0-9a-f-]{36}$/);
    return /#\/policy\/([0-9a-f-]{36})$/.exec(page.url())![1];
  };

  /** Signs the page out (when signed in) and in again with `token`, at `hash`. */
  const signInAs = async (token: string, hash: string) => {
    if (await page.locator('#sign-out').isVisible()) {
      await page.locator('#sign-out').click();
      // Nothing the last token read stays on the page for the next one.
      assert.equal(await page.locator('#policy').isHidden(), true);
      assert.equal(await page.locator('#policy-proposal').isHidden(), true);
      assert.deepEqual(await page.locator('#policy-proposals li, #book tbody tr, #rules li, #policy-diff *').evaluateAll((els) => els.map((e) => e.outerHTML)), []);
    }
    await page.goto(`${base}/ui${hash}`);
    await page.locator('#token-input').fill(token);
    await page.locator('#login-form button').click();
    await page.locator('#app:not([hidden])').waitFor();
  };

  const NOTES = '<b>vault</b> & <img src=x> "cold"';
  let entryProposal = '';

  test('an entry proposed from the form; its proposer and an operator are refused with their codes; a second principal approves; finalize waits for the cool-down; the entry is in the book', async () => {
    await signInAs(tokens.admin.token, '#/policy');
    await page.locator('#policy:not([hidden])').waitFor();
    assert.equal(await page.locator('#view-policy').getAttribute('class'), 'current');
    await page.locator('#book-note').filter({ hasText: 'empty' }).waitFor();
    assert.equal(await page.locator('#book tbody tr').count(), 0);
    await page.locator('#rules-note').filter({ hasText: 'no rule set is live' }).waitFor();

    await page.locator('#book-name').fill('cold');
    await page.locator('#book-network').fill('sim');
    await page.locator('#book-kind').selectOption('internal');
    await page.locator('#book-address').fill('cold-vault');
    await page.locator('#book-tag').fill('memo-7');
    await page.locator('#book-owner').fill('treasury');
    await page.locator('#book-notes').fill(NOTES);
    await page.locator('#book-submit').click();
    entryProposal = await proposalIdOfUrl();
    await page.locator('#policy-proposal-state[data-state="PROPOSED"]').waitFor();
    assert.equal(await textOf('#policy-proposal-title'), 'address book - cold');
    // What it changes: the book has no such entry, so every field is added.
    const added = page.locator('#policy-diff [data-kind="entry-added"] li');
    assert.deepEqual(await added.allTextContents(), ['+ network: sim', '+ address: cold-vault', '+ tag: memo-7', '+ owner: treasury', '+ kind: internal', `+ notes: ${NOTES}`]);
    assert.equal(await page.locator('#policy-diff b, #policy-diff img').count(), 0, 'what Ferry answers is text, never markup');
    const row = page.locator(`#policy-proposals li[data-id="${entryProposal}"]`);
    await row.waitFor();
    assert.deepEqual([await row.getAttribute('data-state'), await row.getAttribute('data-kind')], ['PROPOSED', 'address_book']);
    assert.match((await row.textContent()) ?? '', /address book - cold.*PROPOSED.*proposed by admin-1 - put cold: internal sim cold-vault/);
    assert.equal(await page.locator('#policy-challenge').isDisabled(), true, 'nothing to challenge before an approval');
    assert.equal(await page.locator('#policy-finalize').isDisabled(), true);

    // Its proposer presses Approve: Ferry refuses, and the page says so with the code.
    await page.locator('#policy-approve').click();
    await page.locator('#policy-proposal-error[data-code="FOUR_EYES_VIOLATION"]').waitFor();
    assert.match(await textOf('#policy-proposal-error'), /^FOUR_EYES_VIOLATION: .*second person/);
    assert.equal(await page.locator('#policy-proposal-state').getAttribute('data-state'), 'PROPOSED');

    // An operator may propose policy, not approve it.
    await signInAs(tokens.operator.token, `#/policy/${entryProposal}`);
    await page.locator('#policy-proposal-state[data-state="PROPOSED"]').waitFor();
    await page.locator('#policy-approve').click();
    await page.locator('#policy-proposal-error[data-code="FORBIDDEN"]').waitFor();

    await signInAs(tokens.approver.token, `#/policy/${entryProposal}`);
    await page.locator('#policy-proposal-state[data-state="PROPOSED"]').waitFor();
    assert.equal(await textOf('#policy-proposal-error'), '', "the last session's refusal is gone");
    await page.locator('#policy-approve').click();
    await page.locator('#policy-proposal-state[data-state="APPROVED"]').waitFor();
    assert.equal(await textOf('#policy-proposal-error'), '');
    assert.match(await textOf('#policy-proposal-windows'), /^approved by approver-1; live from .+ unless challenged$/);
    assert.match(await textOf('#policy-proposal-meta'), /approver: approver-1 - challenge window ends (?!-)/);
    assert.match(await textOf('#policy-proposal-history tbody tr:last-child'), /PROPOSED.*APPROVED.*APPROVE.*approver-1/);

    // Finalize during the cool-down: refused with its code. Once it is over: live.
    await signInAs(tokens.admin.token, `#/policy/${entryProposal}`);
    await page.locator('#policy-proposal-state[data-state="APPROVED"]').waitFor();
    await page.locator('#policy-finalize').click();
    await page.locator('#policy-proposal-error[data-code="CHALLENGE_WINDOW_OPEN"]').waitFor();
    await coolDownPassed(entryProposal);
    await page.locator('#policy-finalize').click();
    await page.locator('#policy-proposal-state[data-state="FINALIZED"]').waitFor();
    assert.equal(await textOf('#policy-proposal-error'), '');
    assert.match(await textOf('#policy-proposal-windows'), /^live as version 1 since /);
    // The row was backdated behind Ferry's back, its append-only log was not: the page says the two disagree.
    assert.match(await textOf('#policy-replay-note'), /does not replay: APPROVED does not accept FINALIZE/);
    await screenshot(page, 'policy-proposal.png');

    await page.locator('#policy-overview-link').click();
    const entry = page.locator('#book tbody tr[data-name="cold"]');
    await entry.waitFor();
    const cells = await entry.locator('td').allTextContents();
    assert.deepEqual(cells.slice(0, 8), ['cold', 'sim', 'cold-vault', 'memo-7', 'treasury', 'internal', NOTES, '1']);
    assert.equal(await entry.locator('b, img').count(), 0, 'the notes are text, never markup');
    assert.match(await textOf('#book-note'), /1 entry/);
    assert.deepEqual((await call('GET', '/v3/policy/address-book', 'viewer')).entries.map((e: { name: string }) => e.name), ['cold']);
  });

  test('a removal proposed from the book shows the entry removed; reject asks for a reason; its proposer withdraws it', async () => {
    await page.locator('#book tbody tr[data-name="cold"] button.book-remove').click();
    const id = await proposalIdOfUrl();
    await page.locator('#policy-proposal-state[data-state="PROPOSED"]').waitFor();
    assert.deepEqual((await page.locator('#policy-diff [data-kind="entry-removed"] li').allTextContents()).slice(0, 2), ['- network: sim', '- address: cold-vault']);
    await page.locator('#policy-reject').click();
    assert.match(await textOf('#policy-proposal-error'), /write why it is rejected/);
    await page.locator('#policy-withdraw').click();
    await page.locator('#policy-proposal-state[data-state="WITHDRAWN"]').waitFor();
    assert.equal((await call('GET', `/v3/policy/proposals/${id}`, 'viewer')).proposal.state, 'WITHDRAWN');
    for (const b of ['approve', 'reject', 'withdraw', 'challenge', 'finalize']) assert.equal(await page.locator(`#policy-${b}`).isDisabled(), true, b);

    // A change of the entry, from the form the row fills: only what changes is shown as changed.
    await page.locator('#policy-overview-link').click();
    await page.locator('#book tbody tr[data-name="cold"] button.book-edit').click();
    assert.equal(await page.locator('#book-address').inputValue(), 'cold-vault');
    await page.locator('#book-owner').fill('treasury ops');
    await page.locator('#book-submit').click();
    const change = await proposalIdOfUrl();
    await page.locator('#policy-proposal-state[data-state="PROPOSED"]').waitFor();
    assert.deepEqual(await page.locator('#policy-diff [data-kind="entry-changed"] > ul > li').allTextContents(), ['~ owner: treasury -> treasury ops']);
    await page.locator('#policy-withdraw').click();
    await page.locator('#policy-proposal-state[data-state="WITHDRAWN"]').waitFor();
    assert.notEqual(change, id);
  });

  const RULES = {
    rules: [
      { id: 'to-cold', match: { destination: { entries: ['cold'] } }, action: { type: 'require_approvals', approvals: 2, from_groups: ['treasurers'] } },
      { id: 'big-usdc', match: { assets: ['USDC'], amount: { at_least: '1000000' } }, action: { type: 'block', reason: 'too big for one movement' } },
      { id: 'rest', action: { type: 'allow' } },
    ],
    limits: [{ id: 'daily-usdc', asset: 'USDC', window_seconds: 86400, max_amount: '5000', per_destination: true }],
    groups: [{ name: 'treasurers', members: ['admin-1', 'approver-1'] }],
  };

  test('a rule set from the textarea: not JSON is said; a rule Ferry refuses shows its status, code and message; a good one shows what it adds, goes live and reads in words', async () => {
    await page.locator('#policy-overview-link').click();
    await page.locator('#rules-json').fill('{"rules": [');
    await page.locator('#rules-submit').click();
    assert.match(await textOf('#rules-error'), /^the rule set is not JSON/);

    const twice = { rules: [RULES.rules[2], { id: 'rest', action: { type: 'block', reason: 'no' } }] };
    await page.locator('#rules-json').fill(JSON.stringify(twice));
    await page.locator('#rules-submit').click();
    await page.locator('#rules-error[data-code="POLICY_INVALID"]').waitFor();
    assert.match(await textOf('#rules-error'), /^HTTP 422 POLICY_INVALID: rule set refused: rule id "rest" is used twice/);
    assert.match(page.url(), /#\/policy$/, 'a refused rule set keeps the form and what was typed');
    assert.equal(await page.locator('#rules-json').inputValue(), JSON.stringify(twice));

    await page.locator('#rules-json').fill(JSON.stringify(RULES));
    await page.locator('#rules-submit').click();
    const id = await proposalIdOfUrl();
    await page.locator('#policy-proposal-state[data-state="PROPOSED"]').waitFor();
    assert.match(await textOf('#policy-diff-note'), /no rule set is live: every rule is new/);
    assert.deepEqual(await page.locator('#policy-diff [data-kind="rules-added"] li').allTextContents(), [
      '+ to-cold: if destination book entry cold -> require 2 approvals by distinct principals from admin-1, approver-1 (group treasurers)',
      '+ big-usdc: if asset USDC, amount at least 1000000 -> block: too big for one movement',
      '+ rest: any movement -> allow',
    ]);
    assert.deepEqual(await page.locator('#policy-diff [data-kind="limits-added"] li').allTextContents(), ['+ daily-usdc: at most 5000 USDC per 1 d, per destination']);

    // Approved by a second principal and made live as Ferry's sweep would at the cool-down's end
    // (its clock standing there): the page, reading it on its poll, shows a history that replays.
    await call('POST', `/v3/policy/proposals/${id}/approve`, 'approver', {});
    const approved = (await getPolicyProposal(db.pool, id))!;
    await finalizePolicyProposal({ pool: db.pool, now: () => new Date(approved.challenge_ends_at!) }, id);
    await page.locator('#policy-proposal-state[data-state="FINALIZED"]').waitFor({ timeout: 15_000 });
    assert.match(await textOf('#policy-replay-note'), /the history replays to FINALIZED/);

    await page.locator('#policy-overview-link').click();
    await page.locator('#rules-note').filter({ hasText: 'version 1' }).waitFor();
    assert.deepEqual(await page.locator('#rules li').evaluateAll((ls) => ls.map((l) => [l.getAttribute('data-rule-id'), l.getAttribute('data-action'), l.textContent])), [
      ['to-cold', 'require_approvals', 'to-cold if destination book entry cold -> require 2 approvals by distinct principals from admin-1, approver-1 (group treasurers)'],
      ['big-usdc', 'block', 'big-usdc if asset USDC, amount at least 1000000 -> block: too big for one movement'],
      ['rest', 'allow', 'rest any movement -> allow'],
    ]);
    assert.deepEqual(await page.locator('#limits tbody tr[data-limit-id="daily-usdc"] td').allTextContents(), ['daily-usdc', '5000', 'USDC', '1 d (86400 s)', 'per destination', 'every movement']);

    // The next version starts from the live one (whose tier already holds its group's members, so
    // the group's name is not left dangling): an added rule shows as added, a changed one old -> new.
    await page.locator('#rules-copy').click();
    const next = JSON.parse(await page.locator('#rules-json').inputValue());
    assert.deepEqual(next.rules.map((r: { id: string }) => r.id), ['to-cold', 'big-usdc', 'rest']);
    next.rules[1].action.reason = 'too big';
    next.rules.splice(2, 0, { id: 'elsewhere', match: { destination: { in_book: false } }, action: { type: 'block', reason: 'only the book' } });
    await page.locator('#rules-json').fill(JSON.stringify(next));
    await page.locator('#rules-submit').click();
    await proposalIdOfUrl();
    await page.locator('#policy-proposal-state[data-state="PROPOSED"]').waitFor();
    assert.match(await textOf('#policy-diff-note'), /against live version 1/);
    assert.deepEqual(await page.locator('#policy-diff [data-kind="rules-added"] li').allTextContents(), ['+ elsewhere: if destination not in the address book -> block: only the book']);
    assert.deepEqual(await page.locator('#policy-diff [data-kind="rules-changed"] > ul > li').allTextContents(), [
      // The same principals; only the group's name is no longer beside them.
      '~ to-cold: to-cold: if destination book entry cold -> require 2 approvals by distinct principals from admin-1, approver-1 (group treasurers)' +
        ' -> to-cold: if destination book entry cold -> require 2 approvals by distinct principals from admin-1, approver-1',
      '~ big-usdc: big-usdc: if asset USDC, amount at least 1000000 -> block: too big for one movement -> big-usdc: if asset USDC, amount at least 1000000 -> block: too big',
    ]);
    assert.equal(await page.locator('#policy-diff [data-kind="rules-removed"]').count(), 0);
    assert.equal(await page.locator('#policy-diff [data-kind="order-changed"]').count(), 0);

    // The list asks Ferry for one kind and one state.
    await page.locator('#policy-kind-filter').selectOption('rule_set');
    await page.locator('#policy-proposals li[data-kind="address_book"]').first().waitFor({ state: 'detached' });
    assert.deepEqual(await page.locator('#policy-proposals li').evaluateAll((ls) => ls.map((l) => [l.getAttribute('data-kind'), l.getAttribute('data-state')])), [
      ['rule_set', 'PROPOSED'],
      ['rule_set', 'FINALIZED'],
    ]);
    await page.locator('#policy-filter').selectOption('WITHDRAWN');
    await page.locator('#policy-proposals li.none').waitFor();
    await page.locator('#policy-kind-filter').selectOption('');
    await page.locator('#policy-proposals li[data-kind="address_book"][data-state="WITHDRAWN"]').first().waitFor();
    assert.equal(await page.locator('#policy-proposals li').count(), 2);
    await page.locator('#policy-filter').selectOption('');
  });

  test('try a movement: the rule that matched, the approvals it needs and the limits it uses, live and proposed', async () => {
    await page.locator('#policy-overview-link').click();
    await page.locator('#try-template option[value="treasury.pay"]').waitFor({ state: 'attached' });
    await page.locator('#try-intent').fill('{"asset": "USDC"');
    await page.locator('#try-submit').click();
    assert.match(await textOf('#try-error'), /^the intent is not JSON/);

    await page.locator('#try-intent').fill(JSON.stringify({ asset: 'USDC', amount: '100', destination: { address: 'cold-vault', tag: 'memo-7' } }));
    await page.locator('#try-submit').click();
    const out = page.locator('#try-result:not([hidden])');
    await out.waitFor();
    assert.equal(await out.getAttribute('data-live-rule'), 'to-cold');
    const text = (await out.textContent()) ?? '';
    assert.match(text, /^movement: template treasury\.pay, lanes sim, .*100 USDC to cold-vault tag memo-7 \(book entry cold, internal\), requested by admin-1$/m);
    assert.match(text, /^live \(version 1\): ALLOWED by rule to-cold - action require_approvals$/m);
    assert.match(text, /^ {2}approvals needed: 2 from admin-1, approver-1$/m);
    assert.match(text, /^ {2}limit daily-usdc: 0 used of 5000 per 86400 s to cold-vault#memo-7; with this movement 100$/m);
    assert.match(text, /^proposed [0-9a-f-]{36} \(PROPOSED\) \(version 2\): ALLOWED by rule to-cold/m);

    // Elsewhere: the live set's last rule allows it, the proposed one blocks it.
    await page.locator('#try-intent').fill(JSON.stringify({ asset: 'USDC', amount: '100', destination: '0xabc' }));
    await page.locator('#try-submit').click();
    await page.locator('#try-result[data-live-rule="rest"]').waitFor();
    const elsewhere = await textOf('#try-result');
    assert.match(elsewhere, /^live \(version 1\): ALLOWED by rule rest - action allow$/m);
    assert.match(elsewhere, /^proposed .*: REFUSED by rule elsewhere - action block\n {2}POLICY_BLOCKED: .*only the book/m);
    assert.equal(await page.locator('#try-result').getAttribute('data-live-outcome'), 'allowed');
    await screenshot(page, 'policy.png');
    assert.deepEqual(offsite, [], 'the page loaded nothing from elsewhere');
    assert.deepEqual(errors, [], 'no script error');
  });
}
