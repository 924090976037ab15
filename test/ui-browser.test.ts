import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DEMO_TEMPLATE_KEY } from '../src/demo/template.ts';
import { seedMovement } from './helpers/fixtures.ts';
import { createToken } from '../src/persistence/tokens.ts';
import { browserAvailable, browserFixture, openBrowser, screenshot } from './helpers/browser.ts';
import { testDatabase } from './helpers/db.ts';
import { startFerryWithWorkers } from './helpers/ferry.ts';
import { callApi } from './helpers/http.ts';
import { makeTemplateLive } from './helpers/templates.ts';
import { waitFor } from './helpers/wait.ts';

/**
 * The visualizer in a real browser (Debian's Chromium driven by playwright-core): Ferry runs with its
 * workers on a test database, a demo movement is created, then approved while the page watches;
 * every step reaches COMPLETED live, the slider travels back to earlier states, and a screenshot of
 * the finished movement is kept in test-artifacts/. A template proposal is reviewed and decided in
 * the page, and a movement that needs a person is settled from it by two operators.
 */

const STEPS = ['withdraw', 'observe_deposit', 'sweep'];

if (browserAvailable('visualizer in a browser')) await browserTests();

async function browserTests() {
  // Registered before testDatabase()'s hook: Ferry and its workers stop before the database is dropped.
  const held = browserFixture();

  const db = await testDatabase();
  const ferry = await startFerryWithWorkers(db.url, { FERRY_DEMO_TEMPLATE: 'true' });
  held.ferry = ferry;
  const base = ferry.url;
  const requester = (await createToken(db.pool, { name: 'ui-requester', role: 'requester' })).token;
  const approver = (await createToken(db.pool, { name: 'ui-approver', role: 'approver' })).token;
  const viewer = (await createToken(db.pool, { name: 'ui-viewer', role: 'viewer' })).token;
  const admin = (await createToken(db.pool, { name: 'ui-admin', role: 'admin' })).token;
  const alice = (await createToken(db.pool, { name: 'ui-ops-alice', role: 'operator' })).token;
  const bob = (await createToken(db.pool, { name: 'ui-ops-bob', role: 'operator' })).token;

  const call = async (method: string, path: string, token: string, body?: unknown) => {
    const r = await callApi(base, method, path, token, body);
    assert.ok(r.status < 300, `${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body;
  };

  // The page may talk to this Ferry only: any other request fails the test.
  const browser = await openBrowser(base);
  held.browser = browser;
  const { page, offsite, errors } = browser;

  const stateOf = (key: string) => page.locator(`#dag g.dag-node[data-key="${key}"]`).getAttribute('data-state');

  test('a demo movement runs to COMPLETED in the page, live, and the slider travels back', async () => {
    const created = await call('POST', '/v3/movements', requester, { template_key: DEMO_TEMPLATE_KEY, intent: { asset: 'USDC', amount: '250' } });
    const id: string = created.movement.id;

    // Sign in with a viewer token and open the movement before it is approved.
    await page.goto(`${base}/ui#/movements/${id}`);
    await page.locator('#token-input').fill(viewer);
    await page.locator('#login-form button').click();
    await page.locator('#dag g.dag-node[data-key="sweep"]').waitFor();
    for (const key of STEPS) assert.equal(await stateOf(key), 'BLOCKED', key);
    assert.equal(await page.locator('#movement-state').getAttribute('data-state'), 'PENDING_APPROVAL');
    await page.locator('#stream-status[data-status="live"]').waitFor();

    // Record every state the page draws from now on, to prove the steps arrive one by one.
    // (A string: functions handed to evaluate() would carry the test compiler's helpers along.)
    await page.evaluate(`(() => {
      const seen = {};
      window.seen = seen;
      const record = () => {
        for (const g of document.querySelectorAll('#dag g.dag-node')) {
          const list = (seen[g.getAttribute('data-key')] ??= []);
          const state = g.getAttribute('data-state');
          if (list[list.length - 1] !== state) list.push(state);
        }
      };
      new MutationObserver(record).observe(document.getElementById('dag'), { childList: true, subtree: true, attributes: true });
    })()`);

    await call('POST', `/v3/movements/${id}/approve`, approver, { compiled_plan_hash: created.movement.compiled_plan_hash });

    for (const key of STEPS) {
      await page.locator(`#dag g.dag-node[data-key="${key}"][data-state="COMPLETED"]`).waitFor({ timeout: 60_000 });
    }
    await page.locator('#movement-state[data-state="COMPLETED"]').waitFor();
    const seen = (await page.evaluate('window.seen')) as Record<string, string[]>;
    for (const key of STEPS) {
      assert.equal(seen[key][seen[key].length - 1], 'COMPLETED', key);
      assert.ok(seen[key].length >= 3, `${key} was drawn in several states on its way: ${seen[key].join(' -> ')}`);
    }
    assert.ok(seen.observe_deposit.includes('OBSERVING'), `the deposit check waited on the provider: ${seen.observe_deposit.join(' -> ')}`);

    // The page holds the whole log: the slider has one position per transition.
    const detail = await call('GET', `/inspect/movements/${id}`, viewer);
    const total = detail.transitions.length;
    assert.equal(await page.locator('#timeline').getAttribute('max'), String(total));
    assert.equal(await page.locator('#position-count').textContent(), `${total} / ${total}`);

    // People by name: the approval row of the log and the header name the tokens, not their ids.
    const logText = (await page.locator('#log').textContent()) ?? '';
    assert.match(logText, /APPROVEui-approver/);
    assert.doesNotMatch(logText, /token:/);
    assert.match((await page.locator('#movement-meta').textContent()) ?? '', /by ui-requester/);

    // Back to the approval: the request is APPROVED and no step has moved yet.
    const approveStep = detail.transitions.findIndex((t: any) => t.event_type === 'APPROVE') + 1;
    await page.locator('#timeline').fill(String(approveStep));
    await page.locator(`#position-info[data-position="${approveStep}"]`).waitFor();
    assert.equal(await page.locator('#position-info').getAttribute('data-event'), 'APPROVE');
    assert.equal(await page.locator('#movement-state').getAttribute('data-state'), 'APPROVED');
    for (const key of STEPS) assert.equal(await stateOf(key), 'BLOCKED', key);
    assert.equal(await page.locator('#machine').getAttribute('data-current'), 'APPROVED', 'the request machine highlights APPROVED');
    assert.equal(await page.locator('#stream-status').getAttribute('data-status'), 'paused');

    // One step on: the first step became READY, and its machine shows it.
    await page.locator('#timeline').fill(String(approveStep + 1));
    await page.locator(`#position-info[data-position="${approveStep + 1}"]`).waitFor();
    assert.equal(await page.locator('#position-info').getAttribute('data-event'), 'UNBLOCKED');
    assert.equal(await stateOf('withdraw'), 'READY');
    await page.locator('#dag g.dag-node[data-key="withdraw"]').click();
    assert.equal(await page.locator('#machine').getAttribute('data-machine'), 'ferry.node');
    assert.equal(await page.locator('#machine').getAttribute('data-current'), 'READY');
    assert.equal(await page.locator('#machine g.m-state.current').getAttribute('data-state'), 'READY');

    // The first moment the sweep was in flight: the deposit is done, the sweep is not.
    const sweepBusy = detail.transitions.findIndex((t: any) => t.node_key === 'sweep' && t.to_state === 'PREPARING') + 1;
    await page.locator('#timeline').fill(String(sweepBusy));
    await page.locator(`#position-info[data-position="${sweepBusy}"]`).waitFor();
    assert.deepEqual([await stateOf('withdraw'), await stateOf('observe_deposit'), await stateOf('sweep')], ['COMPLETED', 'COMPLETED', 'PREPARING']);
    assert.equal(await page.locator('#movement-state').getAttribute('data-state'), 'EXECUTING');

    // Back to live, showing the finished movement, for the screenshot.
    await page.locator('#follow-live').click();
    await page.locator('#dag g.dag-node[data-key="sweep"]').click();
    await page.locator('#machine[data-current="COMPLETED"]').waitFor();
    await page.locator(`#movements li[data-id="${id}"] .badge.s-COMPLETED`).waitFor({ timeout: 30_000 });
    await screenshot(page, 'ui-browser.png', true);

    assert.deepEqual(offsite, [], 'the page loaded nothing from anywhere but Ferry');
    assert.deepEqual(errors, [], 'no script errors');
  });

  test('the list and the detail pane agree on a movement that finished, even while polls are paused', async () => {
    const created = await call('POST', '/v3/movements', requester, { template_key: DEMO_TEMPLATE_KEY, intent: { asset: 'USDC', amount: '75' } });
    const id: string = created.movement.id;
    await page.goto(`${base}/ui#/movements/${id}`);
    await page.locator(`#movements li[data-id="${id}"] .badge.s-PENDING_APPROVAL`).waitFor();
    await page.locator('#stream-status[data-status="live"]').waitFor();
    // As when another window covers the browser: the tab is hidden, so the list's poll skips it,
    // while the event stream keeps the detail pane moving.
    await page.evaluate(`(() => {
      Object.defineProperty(document, 'hidden', { configurable: true, get: () => true });
      document.dispatchEvent(new Event('visibilitychange'));
    })()`);

    await call('POST', `/v3/movements/${id}/approve`, approver, { compiled_plan_hash: created.movement.compiled_plan_hash });
    await page.locator('#movement-state[data-state="COMPLETED"]').waitFor({ timeout: 60_000 });
    // Read both in one go: whatever the detail shows, the row shows too, with every step counted.
    const shown = (await page.evaluate(`(() => {
      const row = document.querySelector('#movements li[data-id="${id}"]');
      return {
        detail: document.getElementById('movement-state').dataset.state,
        list: row.querySelector('.badge').textContent,
        steps_done: /^\\d+\\/\\d+/.exec(row.querySelector('.nodes').textContent)[0],
        steps: [...document.querySelectorAll('#dag g.dag-node')].map((g) => g.getAttribute('data-state')),
      };
    })()`)) as { detail: string; list: string; steps_done: string; steps: string[] };
    assert.deepEqual(shown, { detail: 'COMPLETED', list: 'COMPLETED', steps_done: '3/3', steps: ['COMPLETED', 'COMPLETED', 'COMPLETED'] });

    // Visible again: the list is read at once and the overview Ferry answers agrees as well.
    const answered = page.waitForResponse((r) => r.url().startsWith(`${base}/inspect/movements?`));
    await page.evaluate(`(() => {
      delete document.hidden;
      document.dispatchEvent(new Event('visibilitychange'));
    })()`);
    const { movements } = (await (await answered).json()) as { movements: Array<{ id: string; state: string; node_states: Record<string, number> }> };
    const overview = movements.find((m) => m.id === id)!;
    assert.equal(overview.state, 'COMPLETED');
    assert.deepEqual(overview.node_states, { COMPLETED: 3 });
    assert.deepEqual(errors, [], 'no script errors');
  });

  test('the list filters movements by state', async () => {
    const pending = (await call('POST', '/v3/movements', requester, { template_key: DEMO_TEMPLATE_KEY, intent: { asset: 'USDC', amount: '1' } })).movement.id;
    // Every listed movement carries the chosen state (and the list is not empty).
    const listShows = (state: string) =>
      page.waitForFunction(
        (s) => {
          const items = [...document.querySelectorAll('#movements li[data-id]')];
          return items.length > 0 && items.every((li) => li.querySelector('.badge')?.textContent === s);
        },
        state,
      );
    await page.locator('#state-filter').selectOption('PENDING_APPROVAL');
    await listShows('PENDING_APPROVAL');
    await page.locator(`#movements li[data-id="${pending}"]`).waitFor();
    await page.locator('#state-filter').selectOption('COMPLETED');
    await listShows('COMPLETED');
    assert.equal(await page.locator(`#movements li[data-id="${pending}"]`).count(), 0);
    await page.locator('#state-filter').selectOption('EXPIRED');
    await page.locator('#movements li.none').waitFor();
  });

  /** Signs the page out (when signed in) and in again with `token`, at `hash`. */
  const signInAs = async (token: string, hash: string) => {
    if (await page.locator('#sign-out').isVisible()) {
      await page.locator('#sign-out').click();
      // Nothing the last token read stays on the page for the next one.
      assert.equal(await page.locator('#movement').isHidden(), true);
      assert.equal(await page.locator('#proposal').isHidden(), true);
      assert.deepEqual(await page.locator('#resolutions tbody tr, #proposals li, #movements li').evaluateAll((els) => els.map((e) => e.outerHTML)), []);
    }
    await page.goto(`${base}/ui${hash}`);
    await page.locator('#token-input').fill(token);
    await page.locator('#login-form button').click();
    await page.locator('#app:not([hidden])').waitFor();
  };
  const textOf = async (selector: string) => (await page.locator(selector).textContent()) ?? '';

  test('a template proposal: listed, its diff and history shown, refused to its proposer, approved by a second person, then challenged', async () => {
    const step = (key: string, actionType: string) => ({ node_key: key, node_kind: 'action', action_type: actionType, executor_binding: 'exec.sim.action' });
    const v1 = { template_key: 'ui.review', description: 'withdraw then sweep', nodes: [step('withdraw', 'cex_withdrawal'), step('sweep', 'sweep')], edges: [{ from: 'withdraw', to: 'sweep' }] };
    assert.equal(await makeTemplateLive(base, db.pool, v1, { proposer: alice, approver }), 1);
    // The admin proposes a change: the sweep becomes a withdrawal, and a step is added after it.
    const v2 = { ...v1, nodes: [step('withdraw', 'cex_withdrawal'), step('sweep', 'cex_withdrawal'), step('settle', 'sweep')], edges: [...v1.edges, { from: 'sweep', to: 'settle' }] };
    const posted = await callApi(base, 'POST', '/v3/templates', admin, v2);
    assert.equal(posted.status, 202, posted.text);
    const pid: string = posted.body.proposal.id;

    await signInAs(admin, '#/proposals');
    const row = page.locator(`#proposals li[data-id="${pid}"]`);
    await row.locator('.badge[data-state="PROPOSED"]').waitFor();
    assert.match((await row.textContent()) ?? '', /ui\.review.*proposed by ui-admin.*waits for approval until/);
    await row.click();
    await page.locator('#proposal:not([hidden])').waitFor();
    assert.match(page.url(), new RegExp(`#/proposals/${pid}$`));
    assert.match(await textOf('#diff-note'), /against live version 1/);
    const diff = page.locator('#proposal-diff');
    await diff.locator('[data-kind="nodes-added"] li[data-key="settle"]').waitFor();
    assert.match(await diff.locator('[data-kind="nodes-changed"] li[data-key="sweep"] li[data-field="action_type"]').innerText(), /action_type\s+sweep -> cex_withdrawal/);
    assert.equal(await diff.locator('[data-kind="edges-added"] li').count(), 1);
    assert.equal(await diff.locator('[data-kind="edges-added"] li').getAttribute('data-edge'), 'sweep->settle');
    assert.equal(await diff.locator('[data-kind="nodes-removed"], [data-kind="edges-removed"]').count(), 0);
    assert.equal(await page.locator('#proposal-history tbody tr').count(), 1);
    assert.match(await textOf('#proposal-history tbody tr'), /-PROPOSEDcreatedui-admin/);
    assert.equal(await page.locator('#proposal-challenge').isDisabled(), true, 'nothing to challenge before approval');

    // Its proposer may not approve it: the page shows Ferry's refusal, and nothing changed.
    await page.locator('#proposal-approve').click();
    await page.locator('#proposal-error[data-code="FOUR_EYES_VIOLATION"]').waitFor();
    assert.match(await textOf('#proposal-error'), /^FOUR_EYES_VIOLATION: /);
    assert.equal(await page.locator('#proposal-state').getAttribute('data-state'), 'PROPOSED');

    // A second person approves it from the page: the state, the windows, the history and the list follow.
    await signInAs(approver, `#/proposals/${pid}`);
    await page.locator('#proposal-state[data-state="PROPOSED"]').waitFor();
    await page.locator('#proposal-approve').click();
    await page.locator('#proposal-state[data-state="APPROVED"]').waitFor();
    assert.equal(await textOf('#proposal-error'), '');
    assert.match(await textOf('#proposal-windows'), /approved by ui-approver; goes live .* unless challenged/);
    assert.match(await textOf('#proposal-history tbody tr:last-child'), /PROPOSED.*APPROVED.*APPROVE.*ui-approver/);
    await row.locator('.badge[data-state="APPROVED"]').waitFor();
    assert.equal((await callApi(base, 'GET', `/v3/template-proposals/${pid}`, viewer)).body.proposal.state, 'APPROVED');

    // A challenge needs a reason (Ferry says so); with one, the proposal never goes live.
    await page.locator('#proposal-challenge').click();
    await page.locator('#proposal-error[data-code="VALIDATION_FAILED"]').waitFor();
    await page.locator('#challenge-reason').fill('the new step is not reviewed');
    await page.locator('#proposal-challenge').click();
    await page.locator('#proposal-state[data-state="CHALLENGED"]').waitFor();
    assert.match(await textOf('#proposal-history tbody tr:last-child'), /CHALLENGE.*ui-approver.*the new step is not reviewed/);
    assert.equal(await page.locator('#proposal-approve').isDisabled(), true);
    assert.equal(await page.locator('#proposal-withdraw').isDisabled(), true);
    await row.locator('.badge[data-state="CHALLENGED"]').waitFor();
    await screenshot(page, 'ui-proposal.png', true);

    assert.deepEqual(offsite, [], 'the page loaded nothing from anywhere but Ferry');
    assert.deepEqual(errors, [], 'no script errors');
  });

  test('a movement in MANUAL_INTERVENTION: shown prominently, a retry proposed by one operator and confirmed by another, and it goes on', async () => {
    const needsPerson = { next_state: 'UNKNOWN', error_code: 'SIM_NEEDS_PERSON', error_detail: 'the provider lost track', manual_intervention_required: true };
    const tpl = {
      template_key: 'ui.needs-person',
      nodes: [
        // The first submit needs a person; the retry's new attempt completes.
        { node_key: 'pay', node_kind: 'action', action_type: 'sim_action', executor_binding: 'exec.sim.action', config: { sim: { submit: [needsPerson, 'COMPLETED'] } } },
        { node_key: 'after', node_kind: 'action', action_type: 'sim_action', executor_binding: 'exec.sim.action' },
      ],
      edges: [{ from: 'pay', to: 'after' }],
    };
    await makeTemplateLive(base, db.pool, tpl, { proposer: alice, approver });
    const created = await call('POST', '/v3/movements', requester, { template_key: 'ui.needs-person', intent: { amount: '5' } });
    const id: string = created.movement.id;
    await call('POST', `/v3/movements/${id}/approve`, approver, { compiled_plan_hash: created.movement.compiled_plan_hash });
    await waitFor(`movement ${id} in MANUAL_INTERVENTION`, async () => (await call('GET', `/v3/movements/${id}`, viewer)).movement.state === 'MANUAL_INTERVENTION');

    await signInAs(alice, `#/movements/${id}`);
    await page.locator('#attention:not([hidden])').waitFor();
    await page.locator('#movement-state[data-state="MANUAL_INTERVENTION"]').waitFor();
    const flagged = page.locator('#attention-nodes li[data-key="pay"]');
    assert.equal(await flagged.getAttribute('data-state'), 'UNKNOWN');
    assert.match((await flagged.textContent()) ?? '', /manual intervention required.*SIM_NEEDS_PERSON: the provider lost track/);
    assert.equal(await page.locator('#attention-nodes li').count(), 1, 'only the step that needs a person');
    assert.equal(await page.locator('#dag g.dag-node[data-key="pay"]').getAttribute('data-attention'), 'true');
    assert.equal(await page.locator('#resolutions-panel').isHidden(), true, 'nothing proposed yet');

    // Alice proposes a retry; nothing is applied yet, and she may not confirm it herself.
    await page.locator('#resolution-node').selectOption('pay');
    await page.locator('#resolution-kind').selectOption('retry');
    assert.equal(await page.locator('#resolution-ref-label').isHidden(), true, 'a retry needs no provider reference');
    await page.locator('#resolution-reason').fill('provider confirms nothing arrived');
    await page.locator('#resolution-propose').click();
    const open = page.locator('#resolutions tr[data-status="proposed"]');
    await open.waitFor();
    assert.match((await open.textContent()) ?? '', /pay \(attempt 1\)retryprovider confirms nothing arrivedproposedui-ops-alice/);
    assert.equal(await page.locator('#movement-state').getAttribute('data-state'), 'MANUAL_INTERVENTION');
    await open.locator('button.confirm').click();
    await page.locator('#resolution-error[data-code="FOUR_EYES_VIOLATION"]').waitFor();
    assert.equal(await open.getAttribute('data-status'), 'proposed');

    // Bob sees her open proposal, by name, and confirms it: the step runs again and the movement finishes.
    await signInAs(bob, `#/movements/${id}`);
    await open.waitFor();
    assert.match(await open.locator('td.proposer').innerText(), /ui-ops-alice/);
    await screenshot(page, 'ui-manual-intervention.png', true);
    await open.locator('button.confirm').click();
    const applied = page.locator('#resolutions tr[data-status="applied"]');
    await applied.waitFor();
    assert.match((await applied.textContent()) ?? '', /ui-ops-alice.*ui-ops-bob/);
    await page.locator('#movement-state[data-state="COMPLETED"]').waitFor({ timeout: 60_000 });
    for (const key of ['pay', 'after']) await page.locator(`#dag g.dag-node[data-key="${key}"][data-state="COMPLETED"]`).waitFor();
    assert.equal(await page.locator('#attention').isHidden(), true, 'nothing needs a person any more');
    assert.equal(await page.locator('#dag g.dag-node[data-key="pay"]').getAttribute('data-attention'), '');
    const logText = await textOf('#log');
    assert.match(logText, /RESOLVED_RETRY/);
    const done = await call('GET', `/v3/movements/${id}`, viewer);
    assert.equal(done.nodes.find((n: any) => n.node_key === 'pay').attempt_no, 2, 'the retry ran under a new attempt');

    assert.deepEqual(offsite, [], 'the page loaded nothing from anywhere but Ferry');
    assert.deepEqual(errors, [], 'no script errors');
  });

  test('a movement at a manual gate: the requester is refused in the page, another operator confirms it with a note, and it goes on', async () => {
    const tpl = {
      template_key: 'ui.gate',
      nodes: [
        { node_key: 'pay', node_kind: 'action', action_type: 'sim_action', executor_binding: 'exec.sim.action' },
        { node_key: 'check', node_kind: 'manual_gate', action_type: 'manual_review', executor_binding: 'exec.sim.action' },
        { node_key: 'after', node_kind: 'action', action_type: 'sim_action', executor_binding: 'exec.sim.action' },
      ],
      edges: [{ from: 'pay', to: 'check' }, { from: 'check', to: 'after' }],
    };
    await makeTemplateLive(base, db.pool, tpl, { proposer: alice, approver });
    // Created by the admin (who may operate gates, just not this movement's).
    const created = await call('POST', '/v3/movements', admin, { template_key: 'ui.gate', intent: { amount: '5' } });
    const id: string = created.movement.id;
    await call('POST', `/v3/movements/${id}/approve`, approver, { compiled_plan_hash: created.movement.compiled_plan_hash });
    await waitFor(`movement ${id} at its gate`, async () => (await call('GET', `/v3/movements/${id}`, viewer)).movement.state === 'WAITING_MANUAL_ACTION');

    await signInAs(admin, `#/movements/${id}`);
    await page.locator('#gates:not([hidden])').waitFor();
    assert.deepEqual(await page.locator('#gate-node option').allTextContents(), ['check'], 'the READY gate, nothing else');
    await page.locator('#gate-note').fill('I asked for it, I wave it through');
    await page.locator('#gate-confirm').click();
    await page.locator('#gate-error[data-code="FOUR_EYES_VIOLATION"]').waitFor();
    assert.equal(await page.locator('#movement-state').getAttribute('data-state'), 'WAITING_MANUAL_ACTION');

    await signInAs(alice, `#/movements/${id}`);
    await page.locator('#gates:not([hidden])').waitFor();
    await page.locator('#gate-note').fill('beneficiary confirmed by phone');
    await page.locator('#gate-confirm').click();
    await page.locator('#movement-state[data-state="COMPLETED"]').waitFor({ timeout: 60_000 });
    for (const key of ['check', 'after']) await page.locator(`#dag g.dag-node[data-key="${key}"][data-state="COMPLETED"]`).waitFor();
    assert.equal(await page.locator('#gates').isHidden(), true, 'no gate waits any more');
    assert.match(await textOf('#log'), /MANUAL_CONFIRMED/);

    assert.deepEqual(offsite, [], 'the page loaded nothing from anywhere but Ferry');
    assert.deepEqual(errors, [], 'no script errors');
  });

  test('the list shows its newest page and older pages on request, each movement once', async () => {
    // More movements than one page of the list (100 per page).
    const count = async () => (await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM movement_requests')).rows[0].n;
    while ((await count()) <= 105) {
      await Promise.all(Array.from({ length: 10 }, () => call('POST', '/v3/movements', requester, { template_key: DEMO_TEMPLATE_KEY, intent: { asset: 'USDC', amount: '1' } })));
    }
    const total = await count();
    await signInAs(viewer, '#/');
    await page.locator('#state-filter').selectOption('');
    const older = page.locator('#list-older');
    await older.waitFor();
    assert.equal(await page.locator('#movements li[data-id]').count(), 100);
    await older.click();
    await page.waitForFunction((n) => document.querySelectorAll('#movements li[data-id]').length === n, total);
    const ids = await page.locator('#movements li[data-id]').evaluateAll((els) => els.map((e) => e.getAttribute('data-id')));
    assert.equal(new Set(ids).size, total, 'every movement once');
    assert.equal(await older.count(), 0, 'nothing older to show');
    // The poll keeps the older page on show; a new filter starts from the newest page again.
    await page.waitForResponse((r) => r.url().includes('/inspect/movements?') && r.url().includes('cursor='));
    assert.equal(await page.locator('#movements li[data-id]').count(), total);
    await page.locator('#state-filter').selectOption('PENDING_APPROVAL');
    await page.waitForFunction(() => document.querySelectorAll('#movements li[data-id]').length === 100);
    await page.locator('#state-filter').selectOption('');
    assert.deepEqual(errors, [], 'no script errors');
  });

  test('a node keyed "request" or "movement" is a node: selecting it shows the node machine, the pill the movement\'s', async () => {
    // Node keys are free text within their pattern; the page's selection for the movement itself must be none of them.
    const { movement: m } = await seedMovement(db.pool, {
      template_key: 'ui-node-names',
      nodes: ['request', 'movement'].map((node_key) => ({ node_key, node_kind: 'action', action_type: 'sim_action', executor_binding: 'exec.sim.action' })),
      edges: [{ from: 'request', to: 'movement' }],
    } as never);
    await signInAs(viewer, `#/movements/${m.id}`);
    for (const key of ['request', 'movement']) {
      await page.locator(`#dag g.dag-node[data-key="${key}"]`).click();
      await page.locator('#machine[data-machine="ferry.node"]').waitFor();
      assert.match((await page.locator('#machine-title').textContent()) ?? '', new RegExp(`^Node ${key} `));
      assert.equal(await page.locator('#movement-pill.selected').count(), 0, 'the movement is not selected');
    }
    await page.locator('#movement-pill').click();
    await page.locator('#machine[data-machine="ferry.request"]').waitFor();
    assert.match((await page.locator('#machine-title').textContent()) ?? '', /^Movement /);
    assert.deepEqual(errors, [], 'no script errors');
  });

  test('a refused token sends the page back to sign-in', async () => {
    await page.evaluate(() => sessionStorage.setItem('ferry.token', 'fy_' + 'x'.repeat(43)));
    await page.reload();
    await page.locator('#login:not([hidden])').waitFor();
    assert.match((await page.locator('#login-error').textContent()) ?? '', /refused/);
  });
}
