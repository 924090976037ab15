import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConfig } from '../src/config.ts';
import { createApp } from '../src/http/app.ts';
import { testDatabase } from './helpers/db.ts';

/** The visualizer page is served by Ferry and loads nothing from anywhere else. */

const db = await testDatabase();
const app = createApp({ pool: db.pool, config: loadConfig({ FERRY_DATA_DIR: '.ferry/test-ui' }) });

test('/ui serves a self-contained page: every asset from Ferry, nothing from the network', async () => {
  const page = await app.request('/ui');
  assert.equal(page.status, 200);
  assert.match(page.headers.get('content-type') ?? '', /^text\/html/);
  const csp = page.headers.get('content-security-policy') ?? '';
  assert.match(csp, /default-src 'none'/);
  assert.match(csp, /script-src 'self'/);
  assert.match(csp, /connect-src 'self'/);
  const html = await page.text();
  assert.equal((await app.request('/ui/')).status, 200);

  const refs = [...html.matchAll(/(?:src|href)="([^"#]+)"/g)].map((m) => m[1]);
  assert.deepEqual(refs.sort(), ['/ui/app.css', '/ui/app.js']);
  for (const ref of refs) {
    const res = await app.request(ref);
    assert.equal(res.status, 200, ref);
    const body = await res.text();
    assert.ok(body.length > 100, ref);
    // No URL to another host: the page must work with no internet.
    const external = body.match(/(?:https?:)?\/\/[a-z0-9.-]+\.[a-z]{2,}/gi)?.filter((u) => !u.endsWith('www.w3.org')) ?? [];
    assert.deepEqual(external, [], `${ref} refers to no other host`);
  }
  // app.js imports its diagram layouts, from Ferry too.
  assert.match(await (await app.request('/ui/app.js')).text(), /^import \{[^}]+\} from '\/ui\/layout\.js';$/m);
  const layout = await app.request('/ui/layout.js');
  assert.equal(layout.status, 200);
  assert.match(layout.headers.get('content-type') ?? '', /^text\/javascript/);
  assert.doesNotMatch(await layout.text(), /(?:https?:)?\/\/[a-z0-9.-]+\.[a-z]{2,}|\bimport\b|fetch\(|document\./, 'the layouts are pure: no other module, no request, no page');
  assert.match((await app.request('/ui/app.js')).headers.get('content-type') ?? '', /^text\/javascript/);
  assert.match((await app.request('/ui/app.css')).headers.get('content-type') ?? '', /^text\/css/);
  assert.equal((await app.request('/ui/secret.txt')).status, 404);
  assert.equal((await app.request('/ui/../package.json')).status, 404);
});

test('the page reads data only through the inspection API, with the token in a header', async () => {
  const js = await (await app.request('/ui/app.js')).text();
  const paths = new Set([...js.matchAll(/[`'](\/inspect\/[a-z/]*)/g)].map((m) => m[1]));
  assert.deepEqual([...paths].sort(), ['/inspect/machines', '/inspect/movements', '/inspect/movements/']);
  assert.match(js, /Authorization: `Bearer \$\{ui\.token\}`/);
  assert.doesNotMatch(js, /[?&]token=/, 'the token never goes into a URL');
  assert.doesNotMatch(js, /new EventSource/, 'EventSource cannot send the header; the stream is read with fetch');
});

test('beside the inspection API the page calls only the /v3 routes of its views', async () => {
  const js = await (await app.request('/ui/app.js')).text();
  const paths = new Set([...js.matchAll(/[`'](\/v3\/[^`'?]*)/g)].map((m) => m[1].replace(/\$\{[^}]+\}/g, '{}')));
  assert.deepEqual([...paths].sort(), [
    // The movements waiting too long (capital_transfer_followup).
    '/v3/attention/waiting-too-long',
    '/v3/balances',
    '/v3/balances/history',
    '/v3/cex-transfers',
    // A manual gate's confirm and skip.
    '/v3/movements/{}/gates/{}/{}',
    '/v3/movements/{}/resolutions',
    '/v3/movements/{}/resolutions/{}/confirm',
    // A pending movement's approve (with the plan hash on screen) and reject.
    '/v3/movements/{}/{}',
    // The address book (also for a proposed standing order's destinations), a proposed entry, a
    // proposed removal; the live rules and a proposed rule set; the policy proposals, one with its
    // history, and its approve, reject, challenge, withdraw and finalize; try a movement.
    '/v3/policy/address-book',
    '/v3/policy/address-book/{}/remove',
    '/v3/policy/proposals',
    '/v3/policy/proposals/{}',
    '/v3/policy/proposals/{}/{}',
    '/v3/policy/rules',
    '/v3/policy/test',
    // Registry drift (verify_drift).
    '/v3/registry-drift',
    // Standing orders: the list and a proposed one, one order with its runs and history, and its
    // approve, reject, pause, resume and revoke.
    '/v3/standing-orders',
    '/v3/standing-orders/{}',
    '/v3/standing-orders/{}/{}',
    '/v3/template-proposals',
    '/v3/template-proposals/{}',
    '/v3/template-proposals/{}/{}',
    // The templates, for a proposed standing order's template.
    '/v3/templates',
    // The workers view: processes, their groups, actors and leases, and the sweeps.
    '/v3/workers',
  ]);
  // Its actions are POSTs with the same header: no token in a body or a URL.
  assert.match(js, /init\.method = 'POST'/);
  assert.doesNotMatch(js, /token:\s*ui\.token/);
});

test('the page works under its Content-Security-Policy: no inline script, style or handler', async () => {
  const html = await (await app.request('/ui')).text();
  const scripts = [...html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/g)];
  assert.equal(scripts.length, 1);
  for (const [, attrs, body] of scripts) {
    assert.match(attrs, /src="\/ui\/app\.js"/);
    assert.equal(body.trim(), '', 'no inline script');
  }
  assert.doesNotMatch(html, /<style\b/i, 'no inline stylesheet');
  assert.doesNotMatch(html, /\sstyle=/i, 'no style attribute');
  assert.doesNotMatch(html, /\son[a-z]+=/i, 'no inline event handler');
  for (const id of ['views', 'proposals', 'proposal', 'proposal-diff', 'proposal-history', 'attention', 'resolution-form', 'resolutions', 'standing-orders', 'standing-order', 'standing-order-runs', 'standing-order-history', 'standing-order-approve', 'view-workers', 'workers', 'worker-processes', 'sweeps', 'book', 'book-form', 'rules', 'limits', 'rules-json', 'policy-proposals', 'policy-proposal', 'policy-diff', 'try-form', 'try-result']) {
    assert.match(html, new RegExp(`id="${id}"`), id);
  }
  const js = await (await app.request('/ui/app.js')).text();
  assert.doesNotMatch(js, /\.innerHTML\s*=|setAttribute\('style'|\beval\(|new Function\(/, 'no markup or code from strings, no inline style');
});
