import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { chromium, type BrowserContext } from 'playwright-core';
import { startFerry, type RunningFerry } from '../src/main.ts';
import { createToken } from '../src/persistence/tokens.ts';
import { testDatabase } from './helpers/db.ts';

/**
 * The balances panel of /ui in a real browser (Debian's Chromium via playwright-core): watched
 * balances appear under the movement list, a stale one marked with the class of its last error.
 * The rows are written straight into the table (the sweep has its own tests in balances.test.ts).
 */

const CHROMIUM = '/usr/bin/chromium';
const ARTIFACTS = new URL('../test-artifacts/', import.meta.url);

if (!existsSync(CHROMIUM)) {
  test('balances panel in a browser', { skip: `no Chromium at ${CHROMIUM}; install Debian's chromium package to run it` }, () => {});
} else {
  let ferry: RunningFerry | undefined;
  let context: BrowserContext | undefined;
  const userDataDir = mkdtempSync(join(tmpdir(), 'ferry-chromium-'));
  after(async () => {
    await context?.close().catch(() => {});
    await ferry?.stop();
    rmSync(userDataDir, { recursive: true, force: true });
  });
  const db = await testDatabase();
  ferry = await startFerry({
    DATABASE_URL: db.url,
    HOST: '127.0.0.1',
    PORT: '0',
    FERRY_DATA_DIR: mkdtempSync(join(tmpdir(), 'ferry-ui-balances-')),
    FERRY_LOG_LEVEL: 'silent',
  });
  const base = ferry.url;
  const viewer = (await createToken(db.pool, { name: 'ui-balances-viewer', role: 'viewer' })).token;

  test('the /ui page shows the watched balances, stale ones marked', async () => {
    context = await chromium.launchPersistentContext(userDataDir, {
      executablePath: CHROMIUM,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    const offsite: string[] = [];
    await context.route('**/*', (route) => {
      const url = route.request().url();
      if (url.startsWith(base) || url.startsWith('data:')) return route.continue();
      offsite.push(url);
      return route.abort();
    });
    const page = context.pages()[0] ?? (await context.newPage());
    const errors: string[] = [];
    page.on('pageerror', (err) => errors.push(String(err)));

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
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: new URL('balances-panel.png', ARTIFACTS).pathname });
    assert.deepEqual(offsite, []);
    assert.deepEqual(errors, []);
  });
}
