/**
 * Issue 27, finding 7, in a real browser (Debian's Chromium via playwright-core): what /ui draws
 * with layout.js, at the fonts the browser really uses. In the plan and in the movement's and a
 * node's machine, every text stays inside its box; with every edge label shown at once, no label
 * covers a state or another label. A native balance of 18 decimals takes one line of the balances
 * panel. Ferry runs no worker loops: the movement stays PENDING_APPROVAL.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { LocalExecutorAdapter } from '../src/executors/local-adapter.ts';
import { ARTIFACTS, browserAvailable, browserFixture, openBrowser, screenshot } from './helpers/browser.ts';
import { ferryForFile } from './helpers/ferry.ts';
import { callApi } from './helpers/http.ts';
import { makeTemplateLive } from './helpers/templates.ts';
import { createTokens } from './helpers/tokens.ts';

/** Long enough that a box of the old fixed width (200 px) could not hold it. */
const LONG_EXECUTOR = 'exec.sim.sweep-to-the-cold-storage-vault';

if (browserAvailable('diagram layout in /ui')) await browserTests();

interface Problems {
  overflow: string[];
  overlaps: string[];
  boxes: number;
  labels: number;
}

async function browserTests() {
  const held = browserFixture();
  const { db, ferry, runtime } = await ferryForFile({}, { runtime: 'api' });
  const idle = { prepare: () => ({ next_state: 'FAILED' }), submit: () => ({ next_state: 'FAILED' }), observe: () => ({ next_state: 'FAILED' }), recover: () => ({ next_state: 'FAILED' }) };
  runtime!.deps.executors.register(new LocalExecutorAdapter({ executorKey: LONG_EXECUTOR, handler: idle as never }));
  const tokens = await createTokens(db.pool, { operator: 'operator', approver: 'approver', requester: 'requester', viewer: 'viewer' });
  const base = ferry.url;
  await makeTemplateLive(
    base,
    db.pool,
    {
      template_key: 'treasury.layout',
      nodes: [
        { node_key: 'collect_from_every_hot_wallet', node_kind: 'action', action_type: 'transfer', executor_binding: LONG_EXECUTOR },
        { node_key: 'notify', node_kind: 'action', action_type: 'transfer', executor_binding: 'exec.sim.action' },
        { node_key: 'report', node_kind: 'action', action_type: 'transfer', executor_binding: 'exec.sim.action' },
      ],
      edges: [{ from: 'collect_from_every_hot_wallet', to: 'notify' }, { from: 'collect_from_every_hot_wallet', to: 'report' }],
    },
    { proposer: tokens.operator.token, approver: tokens.approver.token },
  );
  const created = await callApi(base, 'POST', '/v3/movements', tokens.requester.token, { template_key: 'treasury.layout', intent: {} });
  assert.equal(created.status, 201, created.text);
  const movementId: string = created.body.movement.id;

  const browser = await openBrowser(base);
  held.browser = browser;
  const { page, offsite, errors } = browser;

  /**
   * In the page: every text of `svg` inside its group's box (measured as drawn), and, with every
   * edge label shown, no label box over a state box or another label box.
   */
  // Page source as a string: the test runner's compiler would wrap named functions in a helper the
  // page does not have.
  const INSPECT = `(selector) => {
    const root = document.querySelector(selector);
    const overflow = [];
    const overlaps = [];
    const groups = [...root.querySelectorAll('g.m-state, g.dag-node')];
    const boxes = groups.map((g) => ({ name: g.getAttribute('data-state') || g.getAttribute('data-key'), box: g.querySelector('rect').getBoundingClientRect() }));
    for (const g of groups) {
      const rect = g.querySelector('rect').getBoundingClientRect();
      for (const t of g.querySelectorAll('text')) {
        const r = t.getBoundingClientRect();
        if (r.left < rect.left + 2 || r.right > rect.right - 2) overflow.push('"' + t.textContent + '" (' + r.left.toFixed(1) + '-' + r.right.toFixed(1) + ') in a box ' + rect.left.toFixed(1) + '-' + rect.right.toFixed(1));
      }
    }
    const labels = [...root.querySelectorAll('text.m-label')];
    for (const l of labels) l.style.display = 'inline';
    const labelBoxes = labels.map((l) => ({ text: [...l.querySelectorAll('tspan')].map((s) => s.textContent).join(', '), box: l.getBoundingClientRect() }));
    const hit = (a, b) => a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5;
    for (const l of labelBoxes) for (const s of boxes) if (hit(l.box, s.box)) overlaps.push('label "' + l.text + '" covers ' + s.name);
    for (let i = 0; i < labelBoxes.length; i++) for (let j = i + 1; j < labelBoxes.length; j++) if (hit(labelBoxes[i].box, labelBoxes[j].box)) overlaps.push('labels "' + labelBoxes[i].text + '" and "' + labelBoxes[j].text + '" overlap');
    for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) if (hit(boxes[i].box, boxes[j].box)) overlaps.push(boxes[i].name + ' and ' + boxes[j].name + ' overlap');
    for (const l of labels) l.style.display = '';
    return { overflow, overlaps, boxes: boxes.length, labels: labels.length };
  }`;
  /**
   * In the page: every text of `svg` inside its group's box (measured as drawn), and, with every
   * edge label shown, no label box over a state box or another label box.
   */
  const inspect = async (svg: string): Promise<Problems> => page.evaluate(`(${INSPECT})(${JSON.stringify(svg)})`);

  test('the plan, the movement machine and the node machine: every text inside its box, no label over a state or a label', async () => {
    await page.goto(`${base}/ui#/movements/${movementId}`);
    await page.locator('#token-input').fill(tokens.viewer.token);
    await page.locator('#login-form button').click();
    await page.locator('#dag g.dag-node[data-key="collect_from_every_hot_wallet"]').waitFor();
    await page.locator('#machine[data-machine="ferry.request"] g.m-state').first().waitFor();
    // The page's own width: the diagrams drawn at their natural size, so nothing is scaled down.
    await page.setViewportSize({ width: 3000, height: 1200 });

    const dag = await inspect('#dag');
    assert.equal(dag.boxes, 3);
    assert.match((await page.locator('#dag g.dag-node[data-key="collect_from_every_hot_wallet"] text.state').textContent()) ?? '', new RegExp(`${LONG_EXECUTOR}$`));
    assert.deepEqual(dag.overflow, [], 'the plan\'s texts fit their boxes');
    assert.deepEqual(dag.overlaps, []);

    const movement = await inspect('#machine');
    assert.equal(movement.boxes, 10);
    assert.ok(movement.labels >= 20);
    assert.deepEqual(movement.overflow, [], 'the movement machine\'s state names fit their boxes');
    assert.deepEqual(movement.overlaps, [], 'the movement machine\'s labels');

    await page.locator('#machine').screenshot({ path: new URL('ui-layout-movement-machine.png', ARTIFACTS).pathname });
    await page.locator('#dag g.dag-node[data-key="collect_from_every_hot_wallet"]').click();
    await page.locator('#machine[data-machine="ferry.node"]').waitFor();
    const node = await inspect('#machine');
    assert.equal(node.boxes, 12);
    assert.ok(node.labels >= 40);
    assert.deepEqual(node.overflow, [], 'the node machine\'s state names fit their boxes');
    assert.deepEqual(node.overlaps, [], 'the node machine\'s labels');
    await page.locator('#machine').screenshot({ path: new URL('ui-layout-node-machine.png', ARTIFACTS).pathname });
    await page.setViewportSize({ width: 1440, height: 960 });
    assert.deepEqual(offsite, []);
    assert.deepEqual(errors, []);
  });

  test('a native balance of 18 decimals takes one line, its exact amount in the title', async () => {
    await db.pool.query(
      `INSERT INTO balance_watch (chain, wallet, asset, lane, fetcher, symbol, label, amount, decimals, as_of, last_attempt_at, error_code, error_at, consecutive_errors)
       VALUES ('eip155:31337', '0x00000000000000000000000000000000000000aa', 'native', 'evm', 'evm_native', NULL, NULL, 9999998765432101234567, 18, now(), now(), NULL, NULL, 0),
              ('eip155:31337', '0x00000000000000000000000000000000000000aa', '0x00000000000000000000000000000000000000cc', 'evm', 'erc20', NULL, NULL, 1250500000, 6, now(), now(), NULL, NULL, 0)`,
    );
    await page.goto(`${base}/ui#/`);
    await page.reload();
    await page.locator('#balances tbody tr').nth(1).waitFor({ timeout: 30_000 });
    const rows: Array<{ texts: Array<{ text: string; lines: number }>; amountTitle: string | null }> = await page.evaluate(`[...document.querySelectorAll('#balances tbody tr')].map((tr) => {
      // Every text of the row's cells, with the number of lines it is laid out on.
      const texts = [];
      const walker = document.createTreeWalker(tr, NodeFilter.SHOW_TEXT);
      for (let n = walker.nextNode(); n; n = walker.nextNode()) {
        const range = document.createRange();
        range.selectNodeContents(n);
        const tops = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
        texts.push({ text: n.textContent, lines: tops.size });
      }
      return { texts, amountTitle: tr.querySelector('td.amount').getAttribute('title') };
    })`);
    const native = rows.find((r) => r.texts.some((t) => t.text === 'native'))!;
    assert.ok(native, JSON.stringify(rows));
    assert.deepEqual(native.texts.map((t) => t.text), ['0x0000...00aa', 'native', 'chain 31337', '9999.998765\u2026']);
    assert.equal(native.amountTitle, '9999.998765432101234567');
    for (const r of rows) for (const t of r.texts) assert.equal(t.lines, 1, `"${t.text}" is on ${t.lines} lines`);
    const token = rows.find((r) => r !== native)!;
    assert.deepEqual(token.texts.map((t) => t.text), ['0x0000...00aa', '0x0000...00cc', 'chain 31337', '1250.5']);
    await screenshot(page, 'ui-layout-balances.png');
    assert.deepEqual(errors, []);
  });
}
