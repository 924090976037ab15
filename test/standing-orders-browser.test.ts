/**
 * Standing orders in /ui, in a real browser (Debian's Chromium driven by playwright-core): the list
 * of orders with their state, one order's bounds, trigger and approvals, its run list (slot, amount,
 * destination, outcome, the run's movement) and its history; the approve button, refused to the
 * order's proposer (FOUR_EYES_VIOLATION shown with its code) and accepted from a second principal;
 * pause and resume; the form that proposes an order (template and destinations chosen from what
 * Ferry lists, a refusal shown with its code), reject and revoke with their reasons. The runs are made by the standing order service as the standing_orders sweep
 * runs it, over a balance snapshot written by the test. Ferry runs no worker loops, so nothing moves
 * but what the test does.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConfig } from '../src/config.ts';
import { getPolicyProposal } from '../src/persistence/policy.ts';
import { principalActor } from '../src/persistence/principals.ts';
import { finalizePolicyProposal } from '../src/services/policy.ts';
import { runStandingOrders } from '../src/services/standing-orders.ts';
import { browserAvailable, browserFixture, openBrowser, screenshot } from './helpers/browser.ts';
import { collectingDeps } from './helpers/fixtures.ts';
import { ferryForFile } from './helpers/ferry.ts';
import { callApi } from './helpers/http.ts';
import { makeTemplateLive } from './helpers/templates.ts';
import { createTokens } from './helpers/tokens.ts';

if (browserAvailable('standing orders in /ui')) await browserTests();

async function browserTests() {
  // Registered first: the browser closes before Ferry stops and the database is dropped.
  const held = browserFixture();
  const { db, ferry } = await ferryForFile({}, { runtime: 'api' });
  // The order's proposer is an admin, who may also approve orders: only four-eyes stops it approving its own.
  const tokens = await createTokens(db.pool, { admin: 'admin', second: { name: 'admin-2', role: 'admin' }, operator: 'operator', approver: 'approver', viewer: 'viewer' });
  const base = ferry.url;
  const call = async (method: string, path: string, who: keyof typeof tokens, body?: unknown) => {
    const r = await callApi(base, method, path, tokens[who].token, body);
    assert.ok(r.status < 300, `${method} ${path}: ${r.status} ${r.text}`);
    return r.body;
  };
  const finalize = async (id: string) => {
    const row = (await getPolicyProposal(db.pool, id))!;
    await finalizePolicyProposal({ pool: db.pool, now: () => new Date(row.challenge_ends_at!) }, id);
  };

  await makeTemplateLive(
    base,
    db.pool,
    { template_key: 'treasury.sweep', nodes: [{ node_key: 'pay', node_kind: 'action', action_type: 'transfer', executor_binding: 'exec.sim.action' }], edges: [] },
    { proposer: tokens.operator.token, approver: tokens.approver.token },
  );
  const cold = await call('POST', '/v3/policy/address-book', 'operator', { name: 'cold', network: 'sim', address: 'cold-vault', owner: 'treasury', kind: 'internal' });
  await call('POST', `/v3/policy/proposals/${cold.id}/approve`, 'approver', {});
  await finalize(cold.id);
  const rules = await call('POST', '/v3/policy/rules', 'operator', { rules: [{ id: 'sweeps', match: { destination: { entries: ['cold'] } }, action: { type: 'allow' } }] });
  await call('POST', `/v3/policy/proposals/${rules.id}/approve`, 'approver', {});
  await finalize(rules.id);

  const HOT = { chain: 'sim', wallet: 'hot', asset: 'USDC' };
  const order = await call('POST', '/v3/standing-orders', 'admin', {
    name: 'hot-sweep',
    template_key: 'treasury.sweep',
    asset: 'USDC',
    destinations: ['cold'],
    max_per_run: '500',
    max_per_window: '100000',
    window_seconds: 86400,
    trigger: { kind: 'ceiling', balance: HOT, ceiling: '1000' },
    expires_at: new Date(Date.now() + 30 * 86400_000).toISOString(),
  });
  const id: string = order.id;

  const browser = await openBrowser(base);
  held.browser = browser;
  const { page, offsite, errors } = browser;
  const textOf = async (selector: string) => (await page.locator(selector).textContent()) ?? '';

  /** Signs the page out (when signed in) and in again with `token`, at `hash`. */
  const signInAs = async (token: string, hash: string) => {
    if (await page.locator('#sign-out').isVisible()) {
      await page.locator('#sign-out').click();
      // Nothing the last token read stays on the page for the next one.
      assert.equal(await page.locator('#standing-order').isHidden(), true);
      assert.deepEqual(await page.locator('#standing-orders li, #standing-order-runs tbody tr').evaluateAll((els) => els.map((e) => e.outerHTML)), []);
    }
    await page.goto(`${base}/ui${hash}`);
    await page.locator('#token-input').fill(token);
    await page.locator('#login-form button').click();
    await page.locator('#app:not([hidden])').waitFor();
  };

  test('the list shows the order; its page shows its bounds and trigger; the approve button is refused to its proposer and accepted from a second person', async () => {
    await signInAs(tokens.admin.token, '#/standing-orders');
    const row = page.locator(`#standing-orders li[data-id="${id}"]`);
    await row.waitFor();
    assert.equal(await row.getAttribute('data-state'), 'PROPOSED');
    assert.match((await row.textContent()) ?? '', /hot-sweep.*PROPOSED.*treasury\.sweep - USDC to cold.*sweeps USDC of hot on sim above 1000 down to 1000, once per crossing/);
    assert.equal(await page.locator('#view-standing-orders').getAttribute('class'), 'current');
    await row.click();
    await page.locator('#standing-order:not([hidden])').waitFor();
    assert.match(page.url(), new RegExp(`#/standing-orders/${id}$`));
    assert.match(await textOf('#standing-order-bounds'), /^USDC to cold - at most 500 per run and 100000 per 86400 s$/);
    assert.match(await textOf('#standing-order-approvals'), /^approvals 0 of 1$/);
    assert.equal(await page.locator('#standing-order-runs tbody tr').count(), 0);
    assert.match(await textOf('#standing-order-runs-note'), /none yet/);
    assert.equal(await page.locator('#standing-order-history tbody tr').count(), 1);
    assert.equal(await page.locator('#standing-order-pause').isDisabled(), true, 'nothing to pause before it is active');

    // Its proposer presses Approve: Ferry refuses, and the page says so with the code.
    await page.locator('#standing-order-approve').click();
    await page.locator('#standing-order-error[data-code="FOUR_EYES_VIOLATION"]').waitFor();
    assert.equal(await page.locator('#standing-order-state').getAttribute('data-state'), 'PROPOSED');

    // An operator may pause and resume orders, not approve them; a viewer may only look.
    await signInAs(tokens.operator.token, `#/standing-orders/${id}`);
    await page.locator('#standing-order-state[data-state="PROPOSED"]').waitFor();
    await page.locator('#standing-order-approve').click();
    await page.locator('#standing-order-error[data-code="FORBIDDEN"]').waitFor();

    await signInAs(tokens.approver.token, `#/standing-orders/${id}`);
    await page.locator('#standing-order-state[data-state="PROPOSED"]').waitFor();
    assert.equal(await textOf('#standing-order-error'), '', 'the last session\'s refusal is gone');
    await page.locator('#standing-order-approve').click();
    await page.locator('#standing-order-state[data-state="ACTIVE"]').waitFor();
    assert.equal(await textOf('#standing-order-error'), '');
    assert.match(await textOf('#standing-order-approvals'), /^approvals 1 of 1 \(approver-1\)$/);
    assert.match(await textOf('#standing-order-history tbody tr:last-child'), /PROPOSED.*ACTIVE.*APPROVE/);
    await page.locator(`#standing-orders li[data-id="${id}"][data-state="ACTIVE"]`).waitFor();
    assert.equal((await call('GET', `/v3/standing-orders/${id}`, 'viewer')).standing_order.state, 'ACTIVE');
  });

  test('a run appears in the order\'s run list with its amount, destination, outcome and movement', async () => {
    await db.pool.query(`INSERT INTO balance_snapshots (chain, wallet, asset, amount, decimals) VALUES ($1, $2, $3, $4, 6)`, [HOT.chain, HOT.wallet, HOT.asset, String(1500n * 1_000_000n)]);
    const report = await runStandingOrders({ pool: db.pool, config: loadConfig({ FERRY_DATA_DIR: '.ferry/test-standing-ui' }), transitions: collectingDeps() });
    assert.ok(JSON.stringify(report).length > 0);
    const detail = await call('GET', `/v3/standing-orders/${id}`, 'viewer');
    assert.equal(detail.runs.length, 1, JSON.stringify(detail.runs));
    const run = detail.runs[0];
    assert.equal(run.outcome, 'approved');

    // The open order is read again on the page's poll: the run shows without a reload.
    const tr = page.locator(`#standing-order-runs tbody tr[data-id="${run.id}"]`);
    await tr.waitFor({ timeout: 15_000 });
    assert.equal(await tr.getAttribute('data-outcome'), 'approved');
    const cells = await tr.locator('td').allTextContents();
    assert.equal(cells[0], run.slot_key);
    assert.equal(cells[2], '500');
    assert.equal(cells[3], 'cold');
    assert.equal(cells[4], 'approved');
    assert.equal(cells[6], run.movement_id.slice(0, 8));
    await screenshot(page, 'standing-order.png');
    await tr.locator('a').click();
    await page.locator('#movement:not([hidden])').waitFor();
    assert.match(page.url(), new RegExp(`#/movements/${run.movement_id}$`));
  });

  test('pause and resume from the page', async () => {
    await signInAs(tokens.operator.token, `#/standing-orders/${id}`);
    await page.locator('#standing-order-state[data-state="ACTIVE"]').waitFor();
    await page.locator('#standing-order-pause').click();
    await page.locator('#standing-order-state[data-state="PAUSED"]').waitFor();
    assert.equal(await page.locator('#standing-order-resume').isDisabled(), false);
    await page.locator('#standing-order-resume').click();
    await page.locator('#standing-order-state[data-state="ACTIVE"]').waitFor();
    // The filter asks Ferry for one state.
    await page.locator('#standing-order-filter').selectOption('PAUSED');
    await page.locator('#standing-orders li.none').waitFor();
    await page.locator('#standing-order-filter').selectOption('ACTIVE');
    await page.locator(`#standing-orders li[data-id="${id}"]`).waitFor();
    assert.deepEqual(offsite, [], 'the page loaded nothing from elsewhere');
    assert.deepEqual(errors, [], 'no script error');
  });

  test('an order proposed from the form; its proposer cannot approve it; a second principal rejects one, approves another and revokes it', async () => {
    await signInAs(tokens.admin.token, '#/standing-orders');
    await page.locator('#standing-order-filter').selectOption('');
    await page.locator('#standing-order-propose').click();
    await page.locator('#standing-order-new:not([hidden])').waitFor();
    assert.match(page.url(), /#\/standing-orders\/new$/);
    // The template and the destinations are what Ferry lists.
    await page.locator('#so-destinations input[data-name="cold"]').waitFor();
    assert.deepEqual(await page.locator('#so-template option').evaluateAll((os) => os.map((o) => (o as HTMLOptionElement).value)), ['treasury.sweep']);
    assert.deepEqual(await page.locator('#so-destinations input').evaluateAll((bs) => bs.map((b) => (b as HTMLInputElement).value)), ['cold']);
    // A month ahead by default; this one a week ahead, in the browser's local time.
    const expiresLocal = await page.evaluate(() => {
      const d = new Date(Date.now() + 7 * 86400_000);
      d.setMinutes(d.getMinutes() - d.getTimezoneOffset(), 0, 0);
      return d.toISOString().slice(0, 16);
    });
    const expiresIso = await page.evaluate((v) => new Date(v).toISOString(), expiresLocal);

    const fillCeilingOrder = async () => {
      await page.locator('#so-name').fill('ui-sweep');
      await page.locator('#so-template').selectOption('treasury.sweep');
      await page.locator('#so-asset').fill('USDC');
      await page.locator('#so-destinations input[data-name="cold"]').check();
      await page.locator('#so-intent').fill('{"memo": "hourly sweep"}');
      await page.locator('#so-max-run').fill('200');
      await page.locator('#so-max-window').fill('100'); // below the maximum per run: Ferry refuses it
      await page.locator('#so-window').fill('3600');
      await page.locator('#so-trigger-kind').selectOption('ceiling');
      assert.equal(await page.locator('#so-balance-fields').isVisible(), true);
      assert.equal(await page.locator('#so-amount').isVisible(), false);
      await page.locator('#so-balance-chain').fill('sim');
      await page.locator('#so-balance-wallet').fill('hot');
      await page.locator('#so-balance-asset').fill('USDC');
      await page.locator('#so-threshold').fill('2000');
      await page.locator('#so-target').fill('1500');
      await page.locator('#so-cron').fill('0 * * * *');
      await page.locator('#so-time-zone').fill('Europe/Zurich');
      await page.locator('#so-expires').fill(expiresLocal);
    };
    await fillCeilingOrder();
    assert.equal(await textOf('#so-destination-order'), 'runs go to cold');
    await screenshot(page, 'standing-order-form.png');
    await page.locator('#so-submit').click();
    await page.locator('#standing-order-new-error[data-code="STANDING_ORDER_INVALID"]').waitFor();
    assert.match(await textOf('#standing-order-new-error'), /max_per_run is above max_per_window/);
    assert.match(page.url(), /#\/standing-orders\/new$/, 'a refused order keeps the form and what was typed');
    assert.equal(await page.locator('#so-name').inputValue(), 'ui-sweep');
    await page.locator('#so-max-window').fill('1000');
    await page.locator('#so-submit').click();
    await page.waitForURL(/#\/standing-orders\/[0-9a-f-]{36}$/);
    const sweepId = /#\/standing-orders\/([0-9a-f-]{36})$/.exec(page.url())![1];
    await page.locator('#standing-order-state[data-state="PROPOSED"]').waitFor();
    await page.locator(`#standing-orders li[data-id="${sweepId}"]`).waitFor();
    const sweep = (await call('GET', `/v3/standing-orders/${sweepId}`, 'viewer')).standing_order;
    assert.deepEqual(
      { name: sweep.name, template_key: sweep.template_key, intent: sweep.intent, asset: sweep.asset, destinations: sweep.destinations, max_per_run: sweep.max_per_run, max_per_window: sweep.max_per_window, window_seconds: sweep.window_seconds, trigger: sweep.trigger, expires_at: sweep.expires_at, proposed_by: sweep.proposed_by },
      {
        name: 'ui-sweep', template_key: 'treasury.sweep', intent: { memo: 'hourly sweep' }, asset: 'USDC', destinations: ['cold'], max_per_run: '200', max_per_window: '1000', window_seconds: 3600,
        trigger: { kind: 'ceiling', balance: { chain: 'sim', wallet: 'hot', asset: 'USDC' }, ceiling: '2000', target: '1500', schedule: { cron: '0 * * * *', time_zone: 'Europe/Zurich' } },
        expires_at: expiresIso, proposed_by: principalActor(tokens.admin.principal_id),
      },
    );

    // Its proposer presses Approve: refused with the code; nor is Reject or Revoke pressed without a reason.
    await page.locator('#standing-order-approve').click();
    await page.locator('#standing-order-error[data-code="FOUR_EYES_VIOLATION"]').waitFor();
    assert.equal(await page.locator('#standing-order-revoke').isDisabled(), true, 'a proposed order is rejected, not revoked');

    // A second order, on a schedule, from the form again (which starts empty).
    await page.locator('#standing-order-propose').click();
    await page.locator('#standing-order-new:not([hidden])').waitFor();
    assert.equal(await page.locator('#so-name').inputValue(), '');
    await page.locator('#so-destinations input[data-name="cold"]').check();
    await page.locator('#so-name').fill('ui-daily');
    await page.locator('#so-asset').fill('USDC');
    await page.locator('#so-max-run').fill('50');
    await page.locator('#so-max-window').fill('50');
    await page.locator('#so-trigger-kind').selectOption('schedule');
    await page.locator('#so-amount').fill('25');
    await page.locator('#so-cron').fill('30 6 * * *');
    await page.locator('#so-submit').click();
    await page.waitForURL(/#\/standing-orders\/[0-9a-f-]{36}$/);
    const dailyId = /#\/standing-orders\/([0-9a-f-]{36})$/.exec(page.url())![1];
    assert.notEqual(dailyId, sweepId);
    const daily = (await call('GET', `/v3/standing-orders/${dailyId}`, 'viewer')).standing_order;
    assert.deepEqual(daily.trigger, { kind: 'schedule', schedule: { cron: '30 6 * * *' }, amount: '25' });
    assert.equal(daily.window_seconds, 86400);

    // A second principal rejects the daily one: first without a reason (the page asks for one), then with one.
    await signInAs(tokens.second.token, `#/standing-orders/${dailyId}`);
    await page.locator('#standing-order-state[data-state="PROPOSED"]').waitFor();
    await page.locator('#standing-order-reject').click();
    assert.match(await textOf('#standing-order-error'), /write why it is rejected/);
    assert.equal((await call('GET', `/v3/standing-orders/${dailyId}`, 'viewer')).standing_order.state, 'PROPOSED');
    await page.locator('#standing-order-reason').fill('a daily run is not needed');
    await page.locator('#standing-order-reject').click();
    await page.locator('#standing-order-state[data-state="REJECTED"]').waitFor();
    assert.equal(await textOf('#standing-order-error'), '');
    assert.match(await textOf('#standing-order-approvals'), /reason: a daily run is not needed$/);
    assert.equal(await page.locator('#standing-order-approve').isDisabled(), true);
    assert.equal(await page.locator('#standing-order-revoke').isDisabled(), true);
    const rejected = (await call('GET', `/v3/standing-orders/${dailyId}`, 'viewer')).standing_order;
    assert.deepEqual([rejected.state, rejected.reason, rejected.decided_by], ['REJECTED', 'a daily run is not needed', principalActor(tokens.second.principal_id)]);

    // ...approves the sweep, then revokes it.
    await page.locator(`#standing-orders li[data-id="${sweepId}"]`).click();
    await page.locator('#standing-order-state[data-state="PROPOSED"]').waitFor();
    assert.equal(await page.locator('#standing-order-reason').inputValue(), '', 'the last order\'s reason is not carried over');
    await page.locator('#standing-order-approve').click();
    await page.locator('#standing-order-state[data-state="ACTIVE"]').waitFor();
    assert.equal(await page.locator('#standing-order-reject').isDisabled(), true);
    await page.locator('#standing-order-reason').fill('the hot wallet is retired');
    await page.locator('#standing-order-revoke').click();
    await page.locator('#standing-order-state[data-state="REVOKED"]').waitFor();
    assert.match(await textOf('#standing-order-history tbody tr:last-child'), /ACTIVE.*REVOKED.*REVOKE/);
    await page.locator(`#standing-orders li[data-id="${sweepId}"][data-state="REVOKED"]`).waitFor();
    const revoked = (await call('GET', `/v3/standing-orders/${sweepId}`, 'viewer')).standing_order;
    assert.deepEqual([revoked.state, revoked.reason, revoked.decided_by], ['REVOKED', 'the hot wallet is retired', principalActor(tokens.second.principal_id)]);
    assert.deepEqual(offsite, [], 'the page loaded nothing from elsewhere');
    assert.deepEqual(errors, [], 'no script error');
  });
}
