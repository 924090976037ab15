/**
 * Issue 27, finding 2, in the browser: /ui shows a movement's effect (asset, amount, source,
 * destination, chain, fee cap, the policy's decision) and the plan hash, and approves or rejects it
 * with buttons that send the hash on the screen. A second principal approves from the page and the
 * movement is APPROVED; another is rejected; and when the movement's plan is another than the one
 * shown, the page's approval is refused (STALE_PLAN_HASH). List cards carry amount, asset,
 * destination and a failed node's code; the node card its error and its transaction's explorer link.
 * Headless Chromium (playwright-core) against a Ferry whose runtime runs no worker loops, so a
 * movement stays where the page left it.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { stringify as yaml } from 'yaml';
import { ERC20_TRANSFER_EXECUTOR } from '../src/executors/evm/expected-effect.ts';
import { LocalExecutorAdapter } from '../src/executors/local-adapter.ts';
import { compiledPlanHash } from '../src/plan/compile.ts';
import { browserAvailable, browserFixture, openBrowser, screenshot } from './helpers/browser.ts';
import { ferryForFile } from './helpers/ferry.ts';
import { callApi } from './helpers/http.ts';
import { makeTemplateLive } from './helpers/templates.ts';
import { createTokens } from './helpers/tokens.ts';
import { dispatchUntilIdle } from './helpers/runtime.ts';
import { waitFor } from './helpers/wait.ts';

const CHAIN = 8453;
const USDC = '0x833589fcd6edb6e08f4c7c32d4f71b54bda02913';
const ALICE = '0x1111111111111111111111111111111111111111';
const TX = `0x${'cd'.repeat(32)}`;

if (browserAvailable('the effect and the decision in /ui')) await browserTests();

async function browserTests() {
  // Registered first: the browser closes before Ferry stops and the database is dropped.
  const held = browserFixture();
  const dir = mkdtempSync(join(tmpdir(), 'ferry-ui-effect-'));
  const file = join(dir, 'ferry.yaml');
  writeFileSync(file, yaml({ evm: { fee_caps: [{ chain_id: CHAIN, max_fee_per_gas_cap_wei: '50000000000' }], tokens: [{ chain_id: CHAIN, symbol: 'USDC', address: USDC, decimals: 6 }] } }));
  const { db, ferry, runtime } = await ferryForFile(
    { FERRY_CONFIG_FILE: file, FERRY_EXPLORER_URLS: JSON.stringify({ [CHAIN]: 'https://basescan.example/tx/{tx}' }) },
    { runtime: 'api' },
  );
  const idle = { prepare: () => ({ next_state: 'FAILED' }), submit: () => ({ next_state: 'FAILED' }), observe: () => ({ next_state: 'FAILED' }), recover: () => ({ next_state: 'FAILED' }) };
  runtime!.deps.executors.register(new LocalExecutorAdapter({ executorKey: ERC20_TRANSFER_EXECUTOR, lane: 'evm', handler: idle as never }));
  runtime!.deps.signers.register({ signerKey: 'hot', sign: async () => { throw new Error('not in this test'); } } as never);
  const tokens = await createTokens(db.pool, { operator: 'operator', requester: 'requester', approver: 'approver', approver2: { name: 'approver-2', role: 'approver' } });
  const base = ferry.url;
  await makeTemplateLive(
    base,
    db.pool,
    {
      template_key: 'usdc.transfer',
      nodes: [
        {
          node_key: 'pay',
          node_kind: 'action',
          action_type: 'evm_erc20_transfer',
          executor_binding: { executor_key: ERC20_TRANSFER_EXECUTOR },
          signer_binding: { signer_key: 'hot', chain_id: CHAIN },
          config: { token: 'USDC' },
        },
      ],
      edges: [],
    },
    { proposer: tokens.operator.token, approver: tokens.approver.token },
  );

  const create = async (amount: string): Promise<{ id: string; compiled_plan_hash: string }> => {
    const r = await callApi(base, 'POST', '/v3/movements', tokens.requester.token, { template_key: 'usdc.transfer', intent: { asset: 'USDC', amount, destination: ALICE } });
    assert.equal(r.status, 201, r.text);
    return r.body.movement;
  };
  const movement = async (id: string) => (await callApi(base, 'GET', `/v3/movements/${id}`, tokens.approver.token)).body.movement;

  const browser = await openBrowser(base);
  held.browser = browser;
  const { page, offsite, errors } = browser;
  const cell = (key: string, cls: string) => page.locator(`#effect tr[data-key="${key}"] td.${cls}`).textContent();

  /** Opens a movement in the page (signing in as approver-2 the first time). */
  let signedIn = false;
  async function open(id: string) {
    await page.goto(`${base}/ui#/movements/${id}`);
    if (!signedIn) {
      await page.locator('#token-input').fill(tokens.approver2.token);
      await page.locator('#login-form button').click();
      signedIn = true;
    }
    await page.locator(`#decision-hash[data-movement="${id}"]`).waitFor({ state: 'attached' });
    await page.locator('#effect tr[data-key="pay"]').waitFor();
  }

  test('the movement page shows the effect and the plan hash; approver-2 approves from the page and the movement is APPROVED', async () => {
    const m = await create('100.25');
    await open(m.id);
    assert.equal(await cell('pay', 'asset'), 'USDC');
    assert.equal(await cell('pay', 'amount'), '100.25');
    assert.equal(await cell('pay', 'from'), 'signer hot');
    assert.equal(await cell('pay', 'to'), ALICE);
    assert.equal(await cell('pay', 'where'), `chain ${CHAIN}`);
    assert.equal(await cell('pay', 'fee'), '50 gwei/gas');
    assert.equal(await page.locator('#effect tr[data-key="pay"]').getAttribute('data-basis'), 'pinned');
    assert.equal(await page.locator('#effect-policy').textContent(), 'Policy: no rule set was live when it was created.');
    assert.match((await page.locator('#effect-warnings').textContent()) ?? '', /checked when a node runs/);
    // The hash on the screen is the movement's, in full.
    assert.equal(await page.locator('#decision-hash').textContent(), m.compiled_plan_hash);
    assert.equal(await page.locator('#movement-state').getAttribute('data-state'), 'PENDING_APPROVAL');
    // The list card says what it moves and where.
    const li = page.locator(`#movements li[data-id="${m.id}"]`);
    assert.equal(await li.locator('.card').getAttribute('data-amount'), '100.25');
    assert.match((await li.locator('.card').textContent()) ?? '', /^100\.25 USDC to 0x1111\.\.\.1111$/);
    await screenshot(page, 'ui-effect-pending.png', true);

    await page.locator('#movement-approve').click();
    await page.locator('#movement-state[data-state="APPROVED"]').waitFor();
    const approved = await movement(m.id);
    assert.equal(approved.state, 'APPROVED');
    assert.deepEqual(approved.approvals.map((a: { by_name: string }) => a.by_name), ['approver-2']);
    assert.equal(await page.locator('#decision').isHidden(), true, 'no buttons once it is decided');
    assert.equal(await page.locator('#decision-error').textContent(), '');
  });

  test('reject from the page ends the movement, with the reason given', async () => {
    const m = await create('2');
    await open(m.id);
    await page.locator('#reject-reason').fill('wrong destination');
    await page.locator('#movement-reject').click();
    await page.locator('#movement-state[data-state="REJECTED"]').waitFor();
    assert.equal((await movement(m.id)).state, 'REJECTED');
    const { rows } = await db.pool.query(`SELECT event_payload FROM transitions WHERE entity_id = $1 AND to_state = 'REJECTED'`, [m.id]);
    assert.match(JSON.stringify(rows[0]?.event_payload ?? {}), /wrong destination/);
  });

  test('hostile: the plan changes under the approver; the page sends the hash it showed and Ferry refuses it', async () => {
    const m = await create('3');
    await open(m.id);
    assert.equal(await page.locator('#decision-hash').textContent(), m.compiled_plan_hash);
    // The movement's plan is another by the time the approver clicks: 3000 USDC instead of 3, stored
    // whole and consistent (its hash recomputed), so only the hash the page showed can tell.
    const { rows } = await db.pool.query('SELECT compiled_plan, intent, input_params FROM movement_requests WHERE id = $1', [m.id]);
    const intent = { ...rows[0].intent, amount: '3000' };
    const other = compiledPlanHash(rows[0].compiled_plan, intent, rows[0].input_params);
    await db.pool.query(
      `UPDATE movement_requests SET intent = $2, compiled_plan = jsonb_set(compiled_plan, '{compiled_plan_hash}', to_jsonb($3::text)), compiled_plan_hash = $3 WHERE id = $1`,
      [m.id, intent, other],
    );
    await page.locator('#movement-approve').click();
    await page.locator('#decision-error[data-code="STALE_PLAN_HASH"]').waitFor();
    const after = await movement(m.id);
    assert.equal(after.state, 'PENDING_APPROVAL');
    assert.deepEqual(after.approvals, []);
    assert.equal(await page.locator('#movement-state').getAttribute('data-state'), 'PENDING_APPROVAL');
    // The changed plan itself could be approved, with its own hash: the refusal was the hash's.
    const direct = await callApi(base, 'POST', `/v3/movements/${m.id}/approve`, tokens.approver.token, { compiled_plan_hash: other });
    assert.equal(direct.status, 200, direct.text);
  });

  test('a failed node: the list card shows its code, the node card its code, detail and transaction with the explorer link', async () => {
    // A real failure through the machines: the simulated provider refuses the submit, naming the transaction.
    await makeTemplateLive(
      base,
      db.pool,
      {
        template_key: 'sim.pay',
        nodes: [
          {
            node_key: 'pay',
            node_kind: 'action',
            action_type: 'transfer',
            executor_binding: 'exec.sim.action',
            config: {
              sim: {
                submit: [{ next_state: 'FAILED', error_code: 'SIM_EXECUTION_REVERTED', error_detail: 'transfer amount exceeds balance', provider_refs: { tx_hash: TX, chain_id: CHAIN } }],
              },
            },
          },
        ],
        edges: [],
      },
      { proposer: tokens.operator.token, approver: tokens.approver.token },
    );
    const r = await callApi(base, 'POST', '/v3/movements', tokens.requester.token, { template_key: 'sim.pay', intent: { asset: 'USDC', amount: '4', destination: ALICE } });
    assert.equal(r.status, 201, r.text);
    const m = r.body.movement;
    const approved = await callApi(base, 'POST', `/v3/movements/${m.id}/approve`, tokens.approver.token, { compiled_plan_hash: m.compiled_plan_hash });
    assert.equal(approved.status, 200, approved.text);
    await dispatchUntilIdle(runtime!.deps);
    assert.equal((await movement(m.id)).state, 'FAILED');

    await open(m.id);
    await page.locator(`#movements li[data-id="${m.id}"] .card-error[data-code="SIM_EXECUTION_REVERTED"]`).waitFor();
    assert.equal(await page.locator(`#movements li[data-id="${m.id}"] .card-error`).textContent(), 'pay: SIM_EXECUTION_REVERTED');
    await page.locator('#dag g.dag-node[data-key="pay"]').click();
    await page.locator('#node-card[data-key="pay"]').waitFor();
    assert.equal(await page.locator('#node-card dd[data-fact="error"]').textContent(), 'SIM_EXECUTION_REVERTED');
    assert.equal(await page.locator('#node-card dd[data-fact="detail"]').textContent(), 'transfer amount exceeds balance');
    const link = page.locator('#node-card dd[data-fact="transaction"] a.explorer');
    assert.equal(await link.textContent(), TX);
    assert.equal(await link.getAttribute('href'), `https://basescan.example/tx/${TX}`);
    assert.equal(await link.getAttribute('rel'), 'noopener noreferrer');
    assert.match((await page.locator('#dag g.dag-node[data-key="pay"] text.state').textContent()) ?? '', /SIM_EXECUTION_REVERTED/);
    await screenshot(page, 'ui-effect-failed-node.png', true);
  });

  test('the page loaded nothing from elsewhere and threw nothing', async () => {
    await waitFor('the page to settle', async () => ((await page.locator('#app').isVisible()) ? true : null));
    assert.deepEqual(offsite, []);
    assert.deepEqual(errors, []);
  });
}
