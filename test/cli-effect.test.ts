/**
 * Issue 27, finding 2, on the command line: `ferry movements show` and `ferry movements approve`
 * print the effect (asset, amount, source, destination, chain, fee cap, the policy's decision)
 * served by the API; approve prints it before it asks, `--yes` skips the question, and off a
 * terminal it needs --yes or --plan-hash.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { stringify as yaml } from 'yaml';
import { runCli } from '../src/cli/run.ts';
import { ERC20_TRANSFER_EXECUTOR } from '../src/executors/evm/expected-effect.ts';
import { LocalExecutorAdapter } from '../src/executors/local-adapter.ts';
import { ferryForFile } from './helpers/ferry.ts';
import { callApi, expectStatus } from './helpers/http.ts';
import { makeTemplateLive } from './helpers/templates.ts';
import { createTokens } from './helpers/tokens.ts';

const CHAIN = 8453;
const USDC = '0x833589fcd6edb6e08f4c7c32d4f71b54bda02913';
const ALICE = '0x1111111111111111111111111111111111111111';
const dir = mkdtempSync(join(tmpdir(), 'ferry-cli-effect-'));
const file = join(dir, 'ferry.yaml');
writeFileSync(file, yaml({ evm: { fee_caps: [{ chain_id: CHAIN, max_fee_per_gas_cap_wei: '50000000000' }], tokens: [{ chain_id: CHAIN, symbol: 'USDC', address: USDC, decimals: 6 }] } }));

const { db, ferry, runtime } = await ferryForFile({ FERRY_CONFIG_FILE: file }, { runtime: 'api' });
const idle = { prepare: () => ({ next_state: 'FAILED' }), submit: () => ({ next_state: 'FAILED' }), observe: () => ({ next_state: 'FAILED' }), recover: () => ({ next_state: 'FAILED' }) };
runtime!.deps.executors.register(new LocalExecutorAdapter({ executorKey: ERC20_TRANSFER_EXECUTOR, lane: 'evm', handler: idle as never }));
runtime!.deps.signers.register({ signerKey: 'hot', sign: async () => { throw new Error('not in this test'); } } as never);
const tokens = await createTokens(db.pool, { operator: 'operator', requester: 'requester', approver: 'approver' });

await makeTemplateLive(
  ferry.url,
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

async function movement(amount = '100.25'): Promise<{ id: string; compiled_plan_hash: string }> {
  const r = await callApi(ferry.url, 'POST', '/v3/movements', tokens.requester.token, { template_key: 'usdc.transfer', intent: { asset: 'USDC', amount, destination: ALICE } });
  expectStatus(r, 201);
  return r.body.movement;
}

interface Run {
  code: number;
  out: string;
  err: string;
  /** What was printed before the question, and the question itself. */
  asked: { before: string; question: string } | null;
}

async function ferryCli(args: string[], opts: { interactive?: boolean; answer?: string } = {}): Promise<Run> {
  const run: Run = { code: -1, out: '', err: '', asked: null };
  run.code = await runCli(args, {
    env: { FERRY_URL: ferry.url, FERRY_TOKEN: tokens.approver.token },
    io: {
      out: (t) => (run.out += t + '\n'),
      err: (t) => (run.err += t + '\n'),
      interactive: opts.interactive ?? false,
      ask: async (question) => {
        run.asked = { before: run.out, question };
        return opts.answer ?? '';
      },
    },
  });
  return run;
}

const state = async (id: string) => (await callApi(ferry.url, 'GET', `/v3/movements/${id}`, tokens.approver.token)).body.movement.state;

/** The effect lines every command prints for the 100.25 USDC transfer. */
function assertEffect(text: string): void {
  assert.match(text, /^ {2}policy {5}no rule set was live when it was created$/m);
  assert.match(text, /^ {2}node pay {2}transfer \(evm_erc20_transfer\) {2}exec\.evm\.erc20_transfer$/m);
  assert.match(text, new RegExp(`^ {4}asset {8}USDC \\(${USDC}\\)$`, 'm'));
  assert.match(text, /^ {4}amount {7}100\.25 USDC {2}\(100250000 base units, 6 decimals\)$/m);
  assert.match(text, /^ {4}from {9}signer hot$/m);
  assert.match(text, new RegExp(`^ {4}to {11}${ALICE}$`, 'm'));
  assert.match(text, /^ {4}chain {8}chain 8453$/m);
  assert.match(text, /^ {4}fee cap {6}50 gwei per gas \(50000000000 wei\)$/m);
  assert.match(text, /^ {2}warning {4}balances and the provider's limits are checked when a node runs/m);
}

test('movements show prints the effect', async () => {
  const m = await movement();
  const r = await ferryCli(['movements', 'show', m.id]);
  assert.equal(r.code, 0, r.err);
  assert.match(r.out, /^Effect \(what the approval lets each node do\):$/m);
  assertEffect(r.out);
  assert.match(r.out, new RegExp(`plan hash {2}${m.compiled_plan_hash}`));
});

test('movements approve prints the effect before it asks; no keeps it pending, yes approves that plan', async () => {
  const m = await movement();
  const no = await ferryCli(['movements', 'approve', m.id], { interactive: true, answer: 'no' });
  assert.equal(no.code, 1);
  assert.ok(no.asked, 'it asked');
  assertEffect(no.asked!.before);
  assert.match(no.asked!.before, new RegExp(`^ {2}plan hash {2}${m.compiled_plan_hash}$`, 'm'));
  assert.equal(no.asked!.question, `Approve plan ${m.compiled_plan_hash}? Type yes to approve: `);
  assert.equal(await state(m.id), 'PENDING_APPROVAL');

  const yes = await ferryCli(['movements', 'approve', m.id], { interactive: true, answer: 'yes' });
  assert.equal(yes.code, 0, yes.err);
  assert.match(yes.out, new RegExp(`Approved plan ${m.compiled_plan_hash} of movement ${m.id}`));
  assert.equal(await state(m.id), 'APPROVED');
});

test('off a terminal approve prints the effect and needs --yes or --plan-hash; --yes skips the question; a stale --plan-hash is refused', async () => {
  const m = await movement('3');
  const refused = await ferryCli(['movements', 'approve', m.id]);
  assert.equal(refused.code, 2);
  assert.match(refused.err, /not on a terminal: pass --plan-hash HASH .* or --yes/);
  assert.match(refused.out, /^ {4}amount {7}3 USDC {2}\(3000000 base units, 6 decimals\)$/m);
  assert.equal(await state(m.id), 'PENDING_APPROVAL');

  const stale = await ferryCli(['movements', 'approve', m.id, '--plan-hash', `sha256:${'0'.repeat(64)}`]);
  assert.equal(stale.code, 1);
  assert.match(stale.err, /the plan changed: you reviewed sha256:0+, the movement's plan is now/);
  assert.equal(await state(m.id), 'PENDING_APPROVAL');

  const yes = await ferryCli(['movements', 'approve', m.id, '--yes'], { interactive: true, answer: 'no' });
  assert.equal(yes.code, 0, yes.err);
  assert.equal(yes.asked, null, '--yes asks nothing');
  assert.match(yes.out, /^ {4}amount {7}3 USDC/m);
  assert.equal(await state(m.id), 'APPROVED');
});

test('approve --json keeps stdout for the answer and prints the effect on stderr', async () => {
  const m = await movement('4');
  const r = await ferryCli(['movements', 'approve', m.id, '--plan-hash', m.compiled_plan_hash, '--json']);
  assert.equal(r.code, 0, r.err);
  assert.equal(JSON.parse(r.out).movement.state, 'APPROVED');
  assert.match(r.err, /^ {4}amount {7}4 USDC/m);
});
