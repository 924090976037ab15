/**
 * Issue 27, finding 2: an approver saw template, state and plan hash, not what the movement does.
 * GET /v3/movements/{id} (and /inspect/movements/{id}, which the CLI and /ui read) now carries the
 * effect: per node the action, asset, amount as a decimal with the asset's decimals, source,
 * destination, chain or venue and fee cap, derived from the approved plan and the pinned expected
 * effect, with the policy's decision beside it. Here for an ERC-20 transfer, an exchange
 * withdrawal, a node whose effect cannot be pinned, and (from the pure derivation) a CCTP burn.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { stringify as yaml } from 'yaml';
import { parseConfigFile } from '../src/config-file.ts';
import { loadConfig } from '../src/config.ts';
import { CCTP_BURN_EXECUTOR, ERC20_TRANSFER_EXECUTOR, pinExpectedEffect } from '../src/executors/evm/expected-effect.ts';
import { LocalExecutorAdapter } from '../src/executors/local-adapter.ts';
import { decimalOf, movementEffect } from '../src/http/effect.ts';
import { nodeTransaction } from '../src/http/explorer.ts';
import { getPolicyProposal } from '../src/persistence/policy.ts';
import { finalizePolicyProposal } from '../src/services/policy.ts';
import { appForFile } from './helpers/app.ts';
import { callApi, expectStatus, type Reply } from './helpers/http.ts';
import { makeTemplateLive } from './helpers/templates.ts';
import { createTokens } from './helpers/tokens.ts';

const CHAIN = 8453;
const USDC = '0x833589fcd6edb6e08f4c7c32d4f71b54bda02913';
const ALICE = '0x1111111111111111111111111111111111111111';
const dir = mkdtempSync(join(tmpdir(), 'ferry-effect-'));
const file = join(dir, 'ferry.yaml');
writeFileSync(
  file,
  yaml({ evm: { fee_caps: [{ chain_id: CHAIN, max_fee_per_gas_cap_wei: '50000000000' }], tokens: [{ chain_id: CHAIN, symbol: 'USDC', address: USDC, decimals: 6 }] } }),
);
const EXPLORERS = JSON.stringify({ [String(CHAIN)]: 'https://basescan.example/tx/{tx}' });

const { db, runtime, app } = await appForFile(
  { FERRY_DATA_DIR: '.ferry/test-api-effect', FERRY_CONFIG_FILE: file, FERRY_EXPLORER_URLS: EXPLORERS },
  { workers: false },
);
// The executors and the signer the templates bind; nothing runs (no worker loops), so they never answer.
const idle = { prepare: () => ({ next_state: 'FAILED' as const }), submit: () => ({ next_state: 'FAILED' as const }), observe: () => ({ next_state: 'FAILED' as const }), recover: () => ({ next_state: 'FAILED' as const }) };
for (const [executorKey, lane] of [[ERC20_TRANSFER_EXECUTOR, 'evm'], ['exec.cex.withdrawal_action', 'cex']] as const) {
  runtime.deps.executors.register(new LocalExecutorAdapter({ executorKey, lane, handler: idle as never }));
}
runtime.deps.signers.register({ signerKey: 'hot', sign: async () => { throw new Error('not in this test'); } } as never);

const tokens = await createTokens(db.pool, { operator: 'operator', requester: 'requester', approver: 'approver', viewer: 'viewer' });
type Who = keyof typeof tokens;
const call = (method: string, path: string, who: Who, body?: unknown): Promise<Reply> => callApi(app, method, path, tokens[who].token, body);
const live = (def: unknown) => makeTemplateLive(app, db.pool, def, { proposer: tokens.operator.token, approver: tokens.approver.token });

await live({
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
});
await live({
  template_key: 'cex.withdraw',
  nodes: [
    { node_key: 'withdraw', node_kind: 'action', action_type: 'cex_withdrawal', executor_binding: { executor_key: 'exec.cex.withdrawal_action', account: 'binance_main' }, config: { coin: 'USDT', network: 'tron' } },
  ],
  edges: [],
});
await live({
  template_key: 'unknown.token',
  nodes: [
    {
      node_key: 'pay',
      node_kind: 'action',
      action_type: 'evm_erc20_transfer',
      executor_binding: { executor_key: ERC20_TRANSFER_EXECUTOR },
      signer_binding: { signer_key: 'hot', chain_id: CHAIN },
      // An address evm.tokens does not list: no trusted decimals, so no amount can be pinned.
      config: { token: '0x2222222222222222222222222222222222222222' },
    },
  ],
  edges: [],
});

async function liveRules(set: unknown): Promise<number> {
  const p = await call('POST', '/v3/policy/rules', 'operator', set);
  assert.equal(p.status, 202, p.text);
  expectStatus(await call('POST', `/v3/policy/proposals/${p.body.id}/approve`, 'approver', {}), 200);
  const row = (await getPolicyProposal(db.pool, p.body.id))!;
  return (await finalizePolicyProposal({ pool: db.pool, now: () => new Date(row.challenge_ends_at!) }, p.body.id)).result_version!;
}

async function create(template: string, intent: Record<string, unknown>): Promise<any> {
  const r = await call('POST', '/v3/movements', 'requester', { template_key: template, intent });
  expectStatus(r, 201);
  return r.body;
}

test('an ERC-20 transfer: USDC, 100.25 as a decimal of 6 places, the signer, the recipient, the chain, the fee cap and the matched rule', async () => {
  const version = await liveRules({ rules: [{ id: 'usdc-small', match: { assets: ['USDC'] }, action: { type: 'allow' } }, { id: 'default', action: { type: 'allow' } }] });
  const created = await create('usdc.transfer', { asset: 'USDC', amount: '100.25', destination: ALICE });
  // Every answer with a movement detail carries it, creation included.
  assert.equal(created.effect.nodes[0].amount, '100.25');

  const r = await call('GET', `/v3/movements/${created.movement.id}`, 'viewer');
  expectStatus(r, 200);
  const { effect } = r.body;
  assert.equal(effect.compiled_plan_hash, created.movement.compiled_plan_hash);
  assert.deepEqual(effect.policy, { rule_set_version: version, rule_id: 'usdc-small', action: 'allow', destination_entry: null, approvers_from: null });
  assert.equal(effect.nodes.length, 1);
  const pay = effect.nodes[0];
  assert.deepEqual(
    {
      node_key: pay.node_key,
      action: pay.action,
      kind: pay.kind,
      lane: pay.lane,
      basis: pay.basis,
      asset: pay.asset,
      asset_address: pay.asset_address,
      amount: pay.amount,
      amount_base_units: pay.amount_base_units,
      decimals: pay.decimals,
      source: pay.source,
      destination: pay.destination,
      chain_id: pay.chain_id,
      chain: pay.chain,
      contract: pay.contract,
      method: pay.method,
      fee_cap: pay.fee_cap,
    },
    {
      node_key: 'pay',
      action: 'evm_erc20_transfer',
      kind: 'transfer',
      lane: 'evm',
      basis: 'pinned',
      asset: 'USDC',
      asset_address: USDC,
      amount: '100.25',
      amount_base_units: '100250000',
      decimals: 6,
      source: 'signer hot',
      destination: ALICE,
      chain_id: CHAIN,
      chain: `chain ${CHAIN}`,
      contract: USDC,
      method: 'transfer(address,uint256)',
      fee_cap: { max_fee_per_gas_wei: '50000000000', max_fee_per_gas_gwei: '50', cctp_max_fee: null },
    },
  );
  // The amount is the pinned one, the signer's: the same in base units as the node's expected effect.
  assert.equal(r.body.nodes[0].expected_effect.effect.amount_base_units, pay.amount_base_units);
  assert.ok(effect.warnings.some((w: string) => /checked when a node runs/.test(w)), effect.warnings.join('\n'));

  // The inspection API (the CLI's show and /ui) serves the same effect.
  const inspected = await call('GET', `/inspect/movements/${created.movement.id}`, 'viewer');
  expectStatus(inspected, 200);
  assert.deepEqual(inspected.body.effect, effect);
});

test('an exchange withdrawal: coin, amount exactly as approved, the account, the address with its tag, the network; no fee cap', async () => {
  const created = await create('cex.withdraw', { asset: 'USDT', amount: '250.5', destination: { address: 'TQn9Y2khEsLJW1ChVWFMSMeRDow5KcbLSE', tag: '4711' } });
  const r = await call('GET', `/v3/movements/${created.movement.id}`, 'viewer');
  expectStatus(r, 200);
  const w = r.body.effect.nodes[0];
  assert.equal(w.kind, 'cex_withdrawal');
  assert.equal(w.basis, 'plan');
  assert.equal(w.asset, 'USDT');
  assert.equal(w.amount, '250.5');
  assert.equal(w.source, 'account binance_main');
  assert.equal(w.venue, 'binance_main');
  assert.equal(w.destination, 'TQn9Y2khEsLJW1ChVWFMSMeRDow5KcbLSE');
  assert.equal(w.destination_tag, '4711');
  assert.equal(w.chain, 'tron');
  assert.equal(w.fee_cap, null);
  // The rule set the first test made live: its default rule matched.
  assert.equal(r.body.effect.policy.rule_id, 'default');
});

test('a node whose effect cannot be pinned says so, and that its signer will refuse it', async () => {
  const created = await create('unknown.token', { amount: '1', destination: ALICE });
  const r = await call('GET', `/v3/movements/${created.movement.id}`, 'viewer');
  const n = r.body.effect.nodes[0];
  assert.equal(n.basis, 'unavailable');
  assert.match(n.unavailable, /decimals/);
  assert.equal(n.amount, null);
  assert.ok(r.body.effect.warnings.some((w: string) => w.startsWith('node pay has no approval-bound effect')));
});

test('a signing node from before effects were pinned shows what dispatch would sign it against (the configuration of now)', async () => {
  const created = await create('usdc.transfer', { asset: 'USDC', amount: '12', destination: ALICE });
  await db.pool.query('UPDATE request_nodes SET expected_effect = NULL WHERE request_id = $1', [created.movement.id]);
  const n = (await call('GET', `/v3/movements/${created.movement.id}`, 'viewer')).body.effect.nodes[0];
  assert.equal(n.basis, 'plan');
  assert.equal(n.amount, '12');
  assert.equal(n.amount_base_units, '12000000');
  assert.equal(n.fee_cap.max_fee_per_gas_gwei, '50');
});

test('a node with a transaction hash links to the explorer of its chain; the hash is only rendered, never fetched', async () => {
  const created = await create('usdc.transfer', { asset: 'USDC', amount: '1', destination: ALICE });
  const hash = `0x${'ab'.repeat(32)}`;
  await db.pool.query(`UPDATE request_nodes SET provider_refs = $2, provider_ref_id = $3 WHERE request_id = $1`, [created.movement.id, { tx_hash: hash, chain_id: CHAIN }, hash]);
  for (const path of [`/v3/movements/${created.movement.id}`, `/inspect/movements/${created.movement.id}`]) {
    const r = await call('GET', path, 'viewer');
    expectStatus(r, 200);
    assert.deepEqual(r.body.nodes[0].transaction, { hash, chain: String(CHAIN), explorer_url: `https://basescan.example/tx/${hash}` });
  }
  // Only a hash is put into a URL: anything else the provider reported is no transaction.
  assert.equal(nodeTransaction({ provider_refs: { tx_hash: 'javascript:alert(1)' } }, {}, { [CHAIN]: 'https://x.example/{tx}' }), null);
  assert.equal(nodeTransaction({ provider_refs: { tx_hash: hash, chain_id: 1 } }, {}, { [CHAIN]: 'https://x.example/{tx}' })?.explorer_url, null);
});

test('the list cards carry asset, amount, destination and the error code of a failed node', async () => {
  const created = await create('usdc.transfer', { asset: 'USDC', amount: '7.5', destination: ALICE });
  await db.pool.query(`UPDATE request_nodes SET node_state = 'FAILED', error_code = 'EVM_INSUFFICIENT_FUNDS', error_detail = 'balance 1' WHERE request_id = $1`, [created.movement.id]);
  const r = await call('GET', '/inspect/movements?limit=50', 'viewer');
  expectStatus(r, 200);
  const card = r.body.movements.find((m: any) => m.id === created.movement.id).card;
  assert.deepEqual(card, { asset: 'USDC', amount: '7.5', destination: ALICE, error: { node_key: 'pay', code: 'EVM_INSUFFICIENT_FUNDS' } });
});

test('FERRY_EXPLORER_URLS is validated at start, naming the variable', () => {
  assert.throws(() => loadConfig({ FERRY_EXPLORER_URLS: 'not json' }), /FERRY_EXPLORER_URLS/);
  assert.throws(() => loadConfig({ FERRY_EXPLORER_URLS: '{"1": "https://etherscan.io/tx/"}' }), /FERRY_EXPLORER_URLS.*\{tx\}/);
  assert.throws(() => loadConfig({ FERRY_EXPLORER_URLS: '{"1": "javascript:alert({tx})"}' }), /FERRY_EXPLORER_URLS/);
  assert.deepEqual(loadConfig({ FERRY_EXPLORER_URLS: EXPLORERS }).explorerUrls, { [String(CHAIN)]: 'https://basescan.example/tx/{tx}' });
  assert.deepEqual(loadConfig({}).explorerUrls, {});
});

test('a CCTP burn: the burned token and amount, the mint recipient and domain, the messenger called, the max fee (from the pinned calldata)', () => {
  const MESSENGER = '0x28b5a0e9c621a5badaa536219b3a228c8168cf5d';
  const parsed = parseConfigFile(
    yaml({
      evm: {
        chains: [
          { chain_id: 1, name: 'ethereum', rpc_url: 'http://127.0.0.1:1', max_fee_per_gas_cap_wei: '100000000000', cctp: { domain: 0, token_messenger: MESSENGER, message_transmitter: '0x81d40f21f12a8f0e3252bccb954d722d4c464b64' } },
          { chain_id: CHAIN, rpc_url: 'http://127.0.0.1:2', max_fee_per_gas_cap_wei: '100000000000', cctp: { domain: 6, token_messenger: '0x28b5a0e9c621a5badaa536219b3a228c8168cf5e', message_transmitter: '0x81d40f21f12a8f0e3252bccb954d722d4c464b65' } },
        ],
        signers: [{ key: 'hot', kind: 'local_key', private_key_env: 'HOT', chains: [1, CHAIN] }],
        tokens: [{ chain_id: 1, symbol: 'USDC', address: '0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48', decimals: 6 }],
      },
      cctp: { attestation_url: 'http://127.0.0.1:3' },
    }),
  );
  assert.ok(parsed.ok, parsed.ok ? '' : parsed.reason);
  const plan = {
    nodes: [
      {
        node_key: 'burn',
        node_kind: 'action',
        action_type: 'cctp_burn',
        executor_binding: { executor_key: CCTP_BURN_EXECUTOR },
        signer_binding: { signer_key: 'hot', chain_id: 1 },
        config: { token: 'USDC', destination_chain_id: CHAIN, max_fee: '0.5' },
      },
    ],
  };
  const intent = { asset: 'USDC', amount: '1000', destination: ALICE };
  const pinned = pinExpectedEffect({ plan, nodeKey: 'burn', intent, evm: parsed.file.evm });
  assert.ok('effect' in pinned, JSON.stringify(pinned));
  const effect = movementEffect({
    plan,
    intent,
    compiledPlanHash: 'sha256:x',
    nodes: [{ node_key: 'burn', expected_effect: pinned }],
    policy: null,
    facts: { chainNames: new Map([[1, 'ethereum']]) },
  });
  const b = effect.nodes[0]!;
  assert.equal(b.kind, 'cctp_burn');
  assert.equal(b.asset, 'USDC');
  assert.equal(b.amount, '1000');
  assert.equal(b.amount_base_units, '1000000000');
  assert.equal(b.destination, ALICE);
  assert.equal(b.destination_domain, 6);
  assert.equal(b.destination_chain_id, CHAIN);
  assert.equal(b.chain, 'ethereum (1)');
  assert.equal(b.contract, MESSENGER);
  assert.deepEqual(b.fee_cap, { max_fee_per_gas_wei: '100000000000', max_fee_per_gas_gwei: '100', cctp_max_fee: '0.5' });
});

test('base units become decimals exactly', () => {
  assert.equal(decimalOf('100250000', 6), '100.25');
  assert.equal(decimalOf('1', 18), '0.000000000000000001');
  assert.equal(decimalOf('123456789012345678901234567890', 18), '123456789012.34567890123456789');
  assert.equal(decimalOf('0', 6), '0');
  assert.equal(decimalOf('5000000', 6), '5');
});
