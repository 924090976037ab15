/**
 * /docs under its Content-Security-Policy: the header allows only this server's own assets, the
 * served page references nothing else, and in a real browser Swagger UI renders the document with no
 * policy violation (while an injected inline script is blocked, so the policy is in force).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConfig } from '../src/config.ts';
import { createApp } from '../src/http/app.ts';
import { browserAvailable, browserFixture, openBrowser } from './helpers/browser.ts';
import { testDatabase } from './helpers/db.ts';
import { serveApp } from './helpers/http.ts';

const held = browserFixture();
const db = await testDatabase();
const app = createApp({ pool: db.pool, config: loadConfig({ FERRY_DATA_DIR: '.ferry/test-docs-csp', FERRY_LOG_LEVEL: 'silent' }) });

function directives(header: string): Map<string, string[]> {
  return new Map(
    header
      .split(';')
      .map((d) => d.trim().split(/\s+/))
      .filter((d) => d[0])
      .map(([name, ...values]) => [name, values]),
  );
}

test('/docs carries a policy of self-hosted assets only, and the page references only its own', async () => {
  const res = await app.request('/docs');
  assert.equal(res.status, 200);
  const csp = directives(res.headers.get('content-security-policy') ?? '');
  assert.deepEqual(csp.get('default-src'), ["'none'"]);
  assert.deepEqual(csp.get('script-src'), ["'self'"], 'scripts from this server only, none inline, no eval');
  assert.deepEqual(csp.get('connect-src'), ["'self'"]);
  assert.deepEqual(csp.get('frame-ancestors'), ["'none'"]);
  for (const [name, values] of csp) {
    for (const v of values) assert.ok(["'self'", "'none'", "'unsafe-inline'", 'data:'].includes(v), `${name} allows only this server (${v})`);
  }
  assert.ok(!csp.get('script-src')!.includes("'unsafe-inline'"));

  const html = await res.text();
  assert.doesNotMatch(html, /<script>(?!<\/script>)|<script [^>]*>[^<]/, 'no inline script');
  const refs = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]);
  assert.ok(refs.length >= 5);
  for (const ref of refs) {
    assert.match(ref, /^\/docs\/assets\/[\w.-]+$/, `${ref} is one of this server's docs assets`);
    assert.equal((await app.request(ref)).status, 200, `${ref} is served`);
  }
});

if (browserAvailable('/docs in a browser under its policy')) {
  const { url: base } = await serveApp(app);

  test('in a browser, Swagger UI renders the document without a policy violation', async () => {
    const browser = await openBrowser(base);
    held.browser = browser;
    const { page, offsite, errors } = browser;
    await page.addInitScript(() => {
      const seen: string[] = [];
      (window as any).__violations = seen;
      document.addEventListener('securitypolicyviolation', (e) => seen.push(`${e.violatedDirective} ${e.blockedURI}`));
    });
    await page.goto(`${base}/docs`);
    await page.locator('.swagger-ui .info .title').waitFor({ timeout: 30_000 });
    // An operation from the document is listed.
    await page.locator('.opblock-summary-path').first().waitFor({ timeout: 30_000 });
    assert.deepEqual(await page.evaluate(() => (window as any).__violations), [], 'the page\'s own scripts and styles are allowed');
    assert.deepEqual(errors, []);
    assert.deepEqual(offsite, []);

    // The policy is in force: a script injected inline does not run, and the listener saw it.
    // (An allowed inline script would have run synchronously inside appendChild.)
    const ran = await page.evaluate(() => {
      const s = document.createElement('script');
      s.textContent = '(window).__inline = true';
      document.body.appendChild(s);
      return (window as any).__inline === true;
    });
    assert.equal(ran, false);
    await page.waitForFunction(() => (window as any).__violations.some((v: string) => v.startsWith('script-src')), null, { timeout: 10_000 });
  });
}
