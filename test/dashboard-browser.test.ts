/**
 * The pg-boss dashboard in a real browser, signed in as an operator: the Queues page lists every
 * sweep's queue and the Schedules page the schedule of every sweep this configuration enables (a
 * disabled sweep keeps its queue and has no schedule). Needs Chromium (see helpers/browser.ts).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sweepDefinitions, sweepQueue } from '../src/sweeps/sweeps.ts';
import { createToken } from '../src/persistence/tokens.ts';
import { browserAvailable, browserFixture, openBrowser } from './helpers/browser.ts';
import { testDatabase } from './helpers/db.ts';
import { startFerryWithWorkers } from './helpers/ferry.ts';

if (browserAvailable('dashboard in a browser')) await browserTests();

async function browserTests() {
  const held = browserFixture();

  const db = await testDatabase();
  // Balance snapshots are off by default; on so that every sweep of the registry has its queue and schedule.
  const ferry = await startFerryWithWorkers(db.url, { FERRY_DEMO_TEMPLATE: 'false', FERRY_BALANCE_SNAPSHOT_ENABLED: 'true' });
  held.ferry = ferry;
  const base = ferry.url;
  const operator = (await createToken(db.pool, { name: 'dash-browser-operator', role: 'operator' })).token;

  // The page may talk to this Ferry only: every other request is aborted and recorded.
  const browser = await openBrowser(base);
  held.browser = browser;
  const { page, offsite, errors, consoleErrors } = browser;

  const enabled = sweepDefinitions.filter((def) => def.settings(ferry.appDeps.config).enabled);
  assert.ok(enabled.length >= 10, 'most sweeps run in this configuration');

  test('signed in, the dashboard shows every sweep queue and the schedule of every enabled sweep', async () => {
    await page.goto(`${base}/dashboard/queues`);
    // Not signed in yet: the sign-in form.
    await page.locator('input[name="token"]').fill(operator);
    await page.locator('form button[type="submit"]').click();
    await page.waitForURL(`${base}/dashboard/`);

    await page.goto(`${base}/dashboard/queues`);
    for (const def of sweepDefinitions) {
      await page.getByText(sweepQueue(def.name), { exact: true }).first().waitFor({ timeout: 20_000 });
    }

    await page.goto(`${base}/dashboard/schedules`);
    for (const def of enabled) {
      await page.getByText(sweepQueue(def.name), { exact: true }).first().waitFor({ timeout: 20_000 });
    }
    const text = await page.locator('body').innerText();
    assert.ok(text.includes('* * * * *'), 'the schedules show their cron expressions');
    // The dashboard bundle links a web font from a public font service; Ferry drops the links, so
    // the browser asks nothing of anyone but this Ferry.
    assert.deepEqual(offsite, [], 'nothing was requested from anywhere but this Ferry');
    assert.deepEqual(errors, [], 'no script error');
    // React hydrates the page the server rendered: a page Ferry changed on the way (dropping its font
    // links) does not match and React logs error #418.
    assert.deepEqual(consoleErrors, [], 'nothing logged as an error');
  });
}
