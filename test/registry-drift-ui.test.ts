import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { startFerry } from '../src/main.ts';
import { observeRegistryDrift, recordRegistryCheck } from '../src/persistence/registry-drifts.ts';
import { createToken } from '../src/persistence/tokens.ts';
import { browserAvailable, browserFixture, openBrowser, screenshot } from './helpers/browser.ts';
import { testDatabase } from './helpers/db.ts';

/**
 * The registry drift panel of /ui in a real browser: hidden while there is none; an open drift shows
 * what the configuration says beside what the chain answered (as text, even when the chain answered
 * markup), and a fact the last check could not verify is listed with its reason. The rows are
 * written straight into the tables (the sweep has its own tests in verify-drift.test.ts).
 */

if (browserAvailable('registry drift panel in a browser')) {
  const held = browserFixture();
  const db = await testDatabase();
  const ferry = await startFerry({
    DATABASE_URL: db.url,
    HOST: '127.0.0.1',
    PORT: '0',
    FERRY_DATA_DIR: mkdtempSync(join(tmpdir(), 'ferry-ui-drift-')),
    FERRY_LOG_LEVEL: 'silent',
  });
  held.ferry = ferry;
  const base = ferry.url;
  const viewer = (await createToken(db.pool, { name: 'ui-drift-viewer', role: 'viewer' })).token;

  test('the /ui page shows open registry drifts and unverified facts, as text', async () => {
    const browser = await openBrowser(base, { viewport: { width: 1280, height: 720 } });
    held.browser = browser;
    const { page, offsite, errors } = browser;
    await page.goto(`${base}/ui`);
    await page.locator('#token-input').fill(viewer);
    await page.locator('#login-form button').click();
    await page.locator('#movements li').first().waitFor();
    assert.equal(await page.locator('#drift-panel').isHidden(), true);

    const fact = { chain_id: 42161, address: '0x00000000000000000000000000000000000000aa' };
    await observeRegistryDrift(db.pool, { ...fact, lane: 'evm', subject: 'evm.tokens[USDC]', property: 'decimals()', expected: '6', observed: '18' });
    await observeRegistryDrift(db.pool, { ...fact, lane: 'evm', subject: 'evm.tokens[EVIL]', property: 'symbol()', expected: 'EVIL', observed: '<img src=x id=injected>' });
    await recordRegistryCheck(db.pool, { ...fact, lane: 'hyperliquid', subject: 'hyperliquid.bridge', property: 'code', expected: 'code', outcome: 'unverified', observed: null, error_code: 'RPC_TIMEOUT' });
    await page.reload();
    await page.locator('#drift tbody tr').nth(2).waitFor({ timeout: 30_000 });
    const rows = await page.locator('#drift tbody tr').allInnerTexts();
    assert.equal(rows.length, 3);
    assert.ok(rows.some((r) => /evm\.tokens\[USDC\] decimals\(\)\s+chain 42161\s+6\s+18/.test(r)), rows.join(' | '));
    assert.ok(rows.some((r) => r.includes('<img src=x id=injected>')), 'the answer shown as text');
    assert.equal(await page.locator('#injected').count(), 0, 'never as markup');
    assert.match(rows[2]!, /hyperliquid\.bridge code\s+chain 42161\s+code\s+unverified: RPC_TIMEOUT/);
    assert.match(await page.locator('#drift-note').innerText(), /2 open, 1 unverified/);
    await screenshot(page, 'registry-drift-panel.png');
    assert.deepEqual(offsite, []);
    assert.deepEqual(errors, []);
  });
}
