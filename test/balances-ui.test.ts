import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { startFerry } from '../src/main.ts';
import { createToken } from '../src/persistence/tokens.ts';
import { browserAvailable, browserFixture, openBrowser, screenshot } from './helpers/browser.ts';
import { testDatabase } from './helpers/db.ts';

/**
 * The balances panel of /ui in a real browser (Debian's Chromium via playwright-core): watched
 * balances appear under the movement list, a stale one marked with the class of its last error.
 * The rows are written straight into the table (the sweep has its own tests in balances.test.ts).
 */

if (browserAvailable('balances panel in a browser')) {
  const held = browserFixture();
  const db = await testDatabase();
  const ferry = await startFerry({
    DATABASE_URL: db.url,
    HOST: '127.0.0.1',
    PORT: '0',
    FERRY_DATA_DIR: mkdtempSync(join(tmpdir(), 'ferry-ui-balances-')),
    FERRY_LOG_LEVEL: 'silent',
  });
  held.ferry = ferry;
  const base = ferry.url;
  const viewer = (await createToken(db.pool, { name: 'ui-balances-viewer', role: 'viewer' })).token;

  test('the /ui page shows the watched balances, stale ones marked', async () => {
    const browser = await openBrowser(base, { viewport: { width: 1280, height: 720 } });
    held.browser = browser;
    const { page, offsite, errors } = browser;

    // No balances: no panel.
    await page.goto(`${base}/ui`);
    await page.locator('#token-input').fill(viewer);
    await page.locator('#login-form button').click();
    await page.locator('#movements li').first().waitFor();
    assert.equal(await page.locator('#balances-panel').isHidden(), true);

    await db.pool.query(
      `INSERT INTO balance_watch (chain, wallet, asset, lane, fetcher, symbol, label, amount, decimals, as_of, last_attempt_at, error_code, error_at, consecutive_errors)
       VALUES ('eip155:1', '0x00000000000000000000000000000000000000aa', '0x00000000000000000000000000000000000000cc', 'evm', 'erc20', 'USDC', 'hot_1', 1250500000, 6, now(), now(), NULL, NULL, 0),
              ('eip155:10', '0x00000000000000000000000000000000000000bb', 'native', 'evm', 'evm_native', NULL, NULL, 2000000000000000000, 18, now() - interval '1 hour', now(), 'RPC_UNREACHABLE', now(), 4)`,
    );
    await page.reload();
    await page.locator('#balances tbody tr').nth(1).waitFor({ timeout: 30_000 });
    const rows = await page.locator('#balances tbody tr').allInnerTexts();
    assert.equal(rows.length, 2);
    assert.match(rows[0], /hot_1\s+USDC\s+chain 1\s+1250\.5/);
    assert.doesNotMatch(rows[0], /stale/);
    assert.match(rows[1], /0x0000\.\.\.00bb\s+native\s+chain 10\s+2\s*stale: RPC_UNREACHABLE/);
    assert.equal(await page.locator('#balances tbody tr.stale').count(), 1);
    assert.match(await page.locator('#balances-note').innerText(), /2, 1 stale/);
    await screenshot(page, 'balances-panel.png');
    assert.deepEqual(offsite, []);
    assert.deepEqual(errors, []);
  });

  test("clicking a balance draws its hourly history as an inline chart", async () => {
    const { page, offsite, errors } = held.browser!;
    // Three hourly buckets (what balance_history_rollup writes; its own test is balances-history.test.ts).
    await db.pool.query(
      `INSERT INTO balance_rollups (chain, wallet, asset, bucket, bucket_start, decimals, min_amount, max_amount, last_amount, last_at, samples)
       SELECT 'eip155:1', '0x00000000000000000000000000000000000000aa', '0x00000000000000000000000000000000000000cc', 'hour',
              date_trunc('hour', now()) - make_interval(hours => h), 6, 1000000000 + h, 1300000000 + h, 1250000000 + h,
              date_trunc('hour', now()) - make_interval(hours => h) + interval '30 minutes', 4
         FROM generate_series(1, 3) AS h`,
    );
    assert.equal(await page.locator('#balance-chart').isHidden(), true);
    await page.locator('#balances tbody tr').first().click();
    await page.locator('#balance-chart svg.balance-chart').waitFor({ timeout: 30_000 });
    assert.match(await page.locator('#balance-chart .chart-title').innerText(), /hot_1 USDC: hourly, last 3 hours/);
    assert.equal(await page.locator('#balance-chart circle.dot').count(), 3);
    const line = await page.locator('#balance-chart polyline.line').getAttribute('points');
    assert.equal(line!.trim().split(/\s+/).length, 3);
    assert.match((await page.locator('#balance-chart circle.dot title').first().textContent()) ?? '', /last 1250\.000003 \(min 1000\.000003, max 1300\.000003, 4 snapshots\)/);
    // A balance without history says so.
    await page.locator('#balances tbody tr').nth(1).click();
    await page.locator('#balance-chart .hint').waitFor({ timeout: 30_000 });
    assert.match(await page.locator('#balance-chart').innerText(), /No history yet/);
    await screenshot(page, 'balances-history.png');
    assert.deepEqual(offsite, []);
    assert.deepEqual(errors, []);
  });
}
