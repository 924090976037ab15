import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DEMO_TEMPLATE_KEY } from '../src/demo/template.ts';
import { createToken } from '../src/persistence/tokens.ts';
import { browserAvailable, browserFixture, openBrowser, screenshot } from './helpers/browser.ts';
import { testDatabase } from './helpers/db.ts';
import { startFerryWithWorkers } from './helpers/ferry.ts';
import { callApi } from './helpers/http.ts';

/**
 * The visualizer in a real browser (Debian's Chromium driven by playwright-core): Ferry runs with its
 * workers on a test database, a demo movement is created, then approved while the page watches;
 * every step reaches COMPLETED live, the slider travels back to earlier states, and a screenshot of
 * the finished movement is kept in test-artifacts/.
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
    assert.equal(await page.locator('#request-state').getAttribute('data-state'), 'PENDING_APPROVAL');
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
    await page.locator('#request-state[data-state="COMPLETED"]').waitFor();
    const seen = (await page.evaluate('window.seen')) as Record<string, string[]>;
    for (const key of STEPS) {
      assert.equal(seen[key][seen[key].length - 1], 'COMPLETED', key);
      assert.ok(seen[key].length >= 3, `${key} was drawn in several states on its way: ${seen[key].join(' -> ')}`);
    }
    assert.ok(seen.observe_deposit.includes('SUBMITTED'), `the deposit check waited on the provider: ${seen.observe_deposit.join(' -> ')}`);

    // The page holds the whole log: the slider has one position per transition.
    const detail = await call('GET', `/inspect/movements/${id}`, viewer);
    const total = detail.transitions.length;
    assert.equal(await page.locator('#timeline').getAttribute('max'), String(total));
    assert.equal(await page.locator('#step-count').textContent(), `${total} / ${total}`);

    // People by name: the approval row of the log and the header name the tokens, not their ids.
    const logText = (await page.locator('#log').textContent()) ?? '';
    assert.match(logText, /APPROVEui-approver/);
    assert.doesNotMatch(logText, /token:/);
    assert.match((await page.locator('#movement-meta').textContent()) ?? '', /by ui-requester/);

    // Back to the approval: the request is APPROVED and no step has moved yet.
    const approveStep = detail.transitions.findIndex((t: any) => t.event_type === 'APPROVE') + 1;
    await page.locator('#timeline').fill(String(approveStep));
    await page.locator(`#step-info[data-step="${approveStep}"]`).waitFor();
    assert.equal(await page.locator('#step-info').getAttribute('data-event'), 'APPROVE');
    assert.equal(await page.locator('#request-state').getAttribute('data-state'), 'APPROVED');
    for (const key of STEPS) assert.equal(await stateOf(key), 'BLOCKED', key);
    assert.equal(await page.locator('#machine').getAttribute('data-current'), 'APPROVED', 'the request machine highlights APPROVED');
    assert.equal(await page.locator('#stream-status').getAttribute('data-status'), 'paused');

    // One step on: the first step became READY, and its machine shows it.
    await page.locator('#timeline').fill(String(approveStep + 1));
    await page.locator(`#step-info[data-step="${approveStep + 1}"]`).waitFor();
    assert.equal(await page.locator('#step-info').getAttribute('data-event'), 'UNBLOCKED');
    assert.equal(await stateOf('withdraw'), 'READY');
    await page.locator('#dag g.dag-node[data-key="withdraw"]').click();
    assert.equal(await page.locator('#machine').getAttribute('data-machine'), 'ferry.node');
    assert.equal(await page.locator('#machine').getAttribute('data-current'), 'READY');
    assert.equal(await page.locator('#machine g.m-state.current').getAttribute('data-state'), 'READY');

    // The first moment the sweep was in flight: the deposit is done, the sweep is not.
    const sweepBusy = detail.transitions.findIndex((t: any) => t.node_key === 'sweep' && t.to_state === 'PREPARING') + 1;
    await page.locator('#timeline').fill(String(sweepBusy));
    await page.locator(`#step-info[data-step="${sweepBusy}"]`).waitFor();
    assert.deepEqual([await stateOf('withdraw'), await stateOf('observe_deposit'), await stateOf('sweep')], ['COMPLETED', 'COMPLETED', 'PREPARING']);
    assert.equal(await page.locator('#request-state').getAttribute('data-state'), 'EXECUTING');

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
    await page.locator('#request-state[data-state="COMPLETED"]').waitFor({ timeout: 60_000 });
    // Read both in one go: whatever the detail shows, the row shows too, with every step counted.
    const shown = (await page.evaluate(`(() => {
      const row = document.querySelector('#movements li[data-id="${id}"]');
      return {
        detail: document.getElementById('request-state').dataset.state,
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
    const { movements } = (await (await answered).json()) as { movements: Array<{ id: string; request_state: string; node_states: Record<string, number> }> };
    const overview = movements.find((m) => m.id === id)!;
    assert.equal(overview.request_state, 'COMPLETED');
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

  test('a refused token sends the page back to sign-in', async () => {
    await page.evaluate(() => sessionStorage.setItem('ferry.token', 'fy_' + 'x'.repeat(43)));
    await page.reload();
    await page.locator('#login:not([hidden])').waitFor();
    assert.match((await page.locator('#login-error').textContent()) ?? '', /refused/);
  });
}
