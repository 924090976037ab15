/**
 * The pg-boss dashboard in a real browser, signed in as an operator: the Queues page lists every
 * sweep's queue and the Schedules page every sweep's schedule. Runs when Chromium is installed.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { chromium, type BrowserContext } from 'playwright-core';
import { startRuntime, type Runtime } from '../src/actors/runtime.ts';
import { sweepDefinitions, sweepQueue } from '../src/actors/sweeps.ts';
import { log } from '../src/log.ts';
import { startFerry, type RunningFerry } from '../src/main.ts';
import { createToken } from '../src/persistence/tokens.ts';
import { testDatabase } from './helpers/db.ts';

const CHROMIUM = '/usr/bin/chromium';

if (!existsSync(CHROMIUM)) {
  test('dashboard in a browser', { skip: `no Chromium at ${CHROMIUM}; install Debian's chromium package to run it` }, () => {});
} else {
  await browserTests();
}

async function browserTests() {
  let runtime: Runtime | undefined;
  let ferry: RunningFerry | undefined;
  let context: BrowserContext | undefined;
  const userDataDir = mkdtempSync(join(tmpdir(), 'ferry-chromium-'));
  after(async () => {
    await context?.close().catch(() => {});
    await ferry?.stop();
    rmSync(userDataDir, { recursive: true, force: true });
  });

  const db = await testDatabase();
  ferry = await startFerry(
    {
      DATABASE_URL: db.url,
      HOST: '127.0.0.1',
      PORT: '0',
      FERRY_DATA_DIR: mkdtempSync(join(tmpdir(), 'ferry-dash-')),
      FERRY_DEMO_TEMPLATE: 'false',
      // Off by default; on so that every sweep of the registry has its queue and schedule.
      FERRY_BALANCE_SNAPSHOT_ENABLED: 'true',
      FERRY_LOG_LEVEL: process.env.FERRY_LOG_LEVEL ?? 'silent',
    },
    {
      onStarted: async (r) => {
        runtime = await startRuntime({ pool: r.pool, config: r.config, databaseUrl: r.databaseUrl, log, workers: true });
        r.appDeps.runtime = runtime;
      },
      onStopping: async () => {
        await runtime?.stop();
      },
    },
  );
  const base = ferry.url;
  const operator = (await createToken(db.pool, { name: 'dash-browser-operator', role: 'operator' })).token;

  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: { width: 1440, height: 960 },
  });
  // The page may talk to this Ferry only: every other request is aborted and recorded.
  const offsite: string[] = [];
  await context.route('**/*', (route) => {
    const url = route.request().url();
    if (url.startsWith(base) || url.startsWith('data:')) return route.continue();
    offsite.push(url);
    return route.abort();
  });
  const page = context.pages()[0] ?? (await context.newPage());

  test('signed in, the dashboard shows every sweep queue and its schedule', async () => {
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
    for (const def of sweepDefinitions) {
      await page.getByText(sweepQueue(def.name), { exact: true }).first().waitFor({ timeout: 20_000 });
    }
    const text = await page.locator('body').innerText();
    assert.ok(text.includes('* * * * *'), 'the schedules show their cron expressions');
    // The dashboard bundle links a web font from a public font service; Ferry drops the links, so
    // the browser asks nothing of anyone but this Ferry.
    assert.deepEqual(offsite, [], 'nothing was requested from anywhere but this Ferry');
  });
}
