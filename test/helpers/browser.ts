/**
 * Browser tests: Debian's Chromium driven by playwright-core, in a fresh profile, allowed to load
 * nothing but the Ferry under test.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

/** Debian's Chromium; FERRY_TEST_CHROMIUM points elsewhere (e.g. at nothing, to see the CI rule at work). */
export const CHROMIUM = process.env.FERRY_TEST_CHROMIUM || '/usr/bin/chromium';

/** Whether this runs in CI: CI set to anything but empty, 0 or false (CI=true, CI=1). */
export const IN_CI = !['', '0', 'false'].includes((process.env.CI ?? '').toLowerCase());

/** Where tests keep screenshots (not committed). */
export const ARTIFACTS = new URL('../../test-artifacts/', import.meta.url);

/**
 * Whether this file's browser tests can run. Without Chromium it registers one test named `name`
 * instead: skipped on a developer's machine, failed in CI (CI must not pass a browser test it never
 * ran). Call at the top of the file and register the real tests only when it says true.
 */
export function browserAvailable(name: string): boolean {
  if (existsSync(CHROMIUM)) return true;
  const missing = `no Chromium at ${CHROMIUM}; install Debian's chromium package (apt-get install -y chromium) to run it`;
  if (IN_CI) test(name, () => assert.fail(`CI=${process.env.CI}: a browser test must run in CI, and ${missing}`));
  else test(name, { skip: missing }, () => {});
  return false;
}

export interface TestBrowser {
  context: BrowserContext;
  page: Page;
  /** Every request the page tried to send anywhere but `base` (each was aborted). */
  offsite: string[];
  /** Uncaught errors of the page's scripts. */
  errors: string[];
  /** What the page logged as an error on its console (a React hydration error, a CSP refusal). */
  consoleErrors: string[];
  close(): Promise<void>;
}

/** Headless Chromium with one page; requests to anything but `base` (or data: URLs) are aborted and recorded. */
export async function openBrowser(base: string, opts: { viewport?: { width: number; height: number } } = {}): Promise<TestBrowser> {
  const userDataDir = mkdtempSync(join(tmpdir(), 'ferry-chromium-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: opts.viewport ?? { width: 1440, height: 960 },
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
  const consoleErrors: string[] = [];
  page.on('console', (msg) => {
    if (msg.type() === 'error') consoleErrors.push(`${msg.text()}${msg.location().url ? ` (${msg.location().url})` : ''}`);
  });
  return {
    context,
    page,
    offsite,
    errors,
    consoleErrors,
    close: async () => {
      await context.close().catch(() => {});
      rmSync(userDataDir, { recursive: true, force: true });
    },
  };
}

/** What a browser test file starts, closed when the file ends. */
export interface BrowserFixture {
  browser?: TestBrowser;
  ferry?: { stop(): Promise<void> };
}

/**
 * Registers the file's clean-up and returns the holder to put its browser and Ferry in: the browser
 * closes, then Ferry stops. Call it before testDatabase(), whose drop must come after Ferry stopped.
 */
export function browserFixture(): BrowserFixture {
  const held: BrowserFixture = {};
  after(async () => {
    await held.browser?.close();
    await held.ferry?.stop();
  });
  return held;
}

/** Saves a screenshot of the page under test-artifacts/. */
export async function screenshot(page: Page, file: string, fullPage = false): Promise<void> {
  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: new URL(file, ARTIFACTS).pathname, fullPage });
}
