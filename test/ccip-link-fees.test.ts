import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { decodeFunctionData, encodeFunctionData, erc20Abi, parseTransaction, serializeTransaction, zeroAddress, type Address, type Hex, type TransactionSerializableEIP1559 } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import type { WorkerDeps } from '../src/actors/execution.ts';
import { configuredRegistries } from '../src/actors/runtime.ts';
import { CCIP_FEE_APPROVAL_KEY, CCIP_SEND_KEY, decodeCcipSend, routerAbi } from '../src/executors/ccip/index.ts';
import { deriveExpectedEffect } from '../src/executors/evm/expected-effect.ts';
import { payloadHash } from '../src/executors/payload-hash.ts';
import type { Executor, Signer } from '../src/executors/protocol.ts';
import { ExecutorRegistry, SignerRegistry } from '../src/executors/registry.ts';
import { log } from '../src/log.ts';
import { listAuditEvents, promoteAuditBatch } from '../src/persistence/audit.ts';
import type { Pool } from '../src/persistence/db.ts';
import type { TemplateDefinitionInput } from '../src/plan/template-schema.ts';
import { ccipSendTemplate } from '../scripts/sandbox/templates.ts';
import { BASE_FEE_WEI, ccipConfigFile, ccipEvents, DESTINATION_CHAIN_ID, FEE_PER_TOKEN_WEI, SOURCE_CHAIN_ID, startCcipWorld, type CcipWorld } from './helpers/ccip.ts';
import { sendCall, tokenBalance } from './helpers/contracts.ts';
import { scratchDatabase } from './helpers/db.ts';
import { approvedMovement, backdateNodes, drain, runtimeDeps, snapshot } from './helpers/runtime.ts';
import { waitFor } from './helpers/wait.ts';

/**
 * CCIP fees paid in LINK (docs/ccip-lane.md, "Fees in LINK") on the CCIP test contracts: the plan's
 * fee approval node approves the cap of LINK to the Router, then the send quotes getFee with
 * feeToken = LINK (the cap checked before signing), carries no native value, and the Router pulls
 * exactly the quoted LINK. The signer checks both transactions against the approved plan: the
 * approve's token, spender (the Router) and amount (the cap), and the send's fee token and zero
 * value. A quote above the cap fails the node before anything is signed.
 */

let w: CcipWorld;
before(async () => {
  w = await startCcipWorld();
  await sendCall(w.source.chain, w.source.rpcUrl, w.hotKey, w.source.link, 'approve', [w.source.router.address, 0n]);
});
after(async () => {
  await w?.stop();
});

const LINK_CAP = 10n ** 18n; // 1 LINK, in juels
const QUOTED_LINK = (BASE_FEE_WEI + FEE_PER_TOKEN_WEI) * 200n; // the test FeeQuoter's rate: 200 LINK per native
const fresh = () => privateKeyToAccount(generatePrivateKey()).address.toLowerCase() as Address;

async function laneDeps(pool: Pool, wrap?: (r: ExecutorRegistry) => ExecutorRegistry): Promise<WorkerDeps & { signed: number[] }> {
  const env = { FERRY_SUBMITTING_GRACE_SECONDS_BY_LANE: 'ccip=0.001', FERRY_CONFIG_FILE: ccipConfigFile(w, { ccip: { fee_tokens: ['LINK'] } }), CCIP_HOT_KEY: w.hotKey };
  const base = runtimeDeps(pool, env);
  const { executors, signers } = await configuredRegistries(pool, base.config, { env, log });
  const signed: number[] = [];
  const counting = new SignerRegistry();
  for (const s of signers.all()) counting.register({ signerKey: s.signerKey, sign: (req) => (signed.push(1), s.sign(req)) } satisfies Signer);
  return { ...base, executors: wrap ? wrap(executors) : executors, signers: counting, signed };
}

const template = (key: string, cap = LINK_CAP, approve = '1') =>
  ccipSendTemplate({ templateKey: key, sourceChainId: SOURCE_CHAIN_ID, destinationChainId: DESTINATION_CHAIN_ID, signerKey: 'hot', maxFeeWei: cap.toString(), feeToken: { symbol: 'LINK', approve } }) as unknown as TemplateDefinitionInput;

async function runToEnd(deps: WorkerDeps, id: string) {
  return waitFor('the movement to finish', async () => {
    await drain(deps);
    const s = await snapshot(deps.pool, id);
    if (['COMPLETED', 'FAILED', 'MANUAL_INTERVENTION'].includes(s.movement.request_state)) return s;
    await backdateNodes(deps.pool, [id], 'next_observe_at', 60);
    return null;
  });
}
const shown = (s: Awaited<ReturnType<typeof snapshot>>) => JSON.stringify(s.nodes.map((n) => [n.node_key, n.node_state, n.error_code, n.error_detail]));
const allowance = () => w.source.chain.readContract({ address: w.source.link.address, abi: erc20Abi, functionName: 'allowance', args: [w.hot, w.source.router.address] });

test('a send paying its fee in LINK: approve of the cap to the Router, then ccipSend with no value; the Router pulls exactly the quoted LINK; delivered', async (t) => {
  const db = await scratchDatabase(t);
  const deps = await laneDeps(db.pool);
  await sendCall(w.source.chain, w.source.rpcUrl, w.hotKey, w.source.link, 'approve', [w.source.router.address, 0n]);
  await sendCall(w.source.chain, w.source.rpcUrl, '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80', w.source.link, 'mint', [w.hot, 5n * 10n ** 18n]);
  const linkBefore = await tokenBalance(w.source.chain, w.source.link, w.hot);
  const rampLinkBefore = await tokenBalance(w.source.chain, w.source.link, w.source.onRamp.address);
  const to = fresh();
  const id = await approvedMovement(deps, template('ccip-link'), { asset: 'USDC', amount: '3', destination: { address: to } });
  const s = await runToEnd(deps, id);
  assert.equal(s.movement.request_state, 'COMPLETED', shown(s));
  assert.deepEqual(s.nodes.map((n) => n.node_key).sort(), ['delivery', 'fee_approval', 'send']);
  assert.equal(await tokenBalance(w.destination.chain, w.destination.token, to), 3_000_000n, 'delivered');
  assert.equal(linkBefore - (await tokenBalance(w.source.chain, w.source.link, w.hot)), QUOTED_LINK, 'exactly the quoted LINK paid');
  assert.equal((await tokenBalance(w.source.chain, w.source.link, w.source.onRamp.address)) - rampLinkBefore, QUOTED_LINK);
  assert.equal(await allowance(), LINK_CAP - QUOTED_LINK, 'the Router may pull no more than the cap');
  // On chain: the approve of the cap to the Router, then the send with no value and LINK as its fee token.
  const approveTx = await w.source.chain.getTransaction({ hash: s.byKey.fee_approval.provider_refs.tx_hash as Hex });
  assert.equal(approveTx.to?.toLowerCase(), w.source.link.address);
  const approveCall = decodeFunctionData({ abi: erc20Abi, data: approveTx.input });
  assert.deepEqual([approveCall.functionName, String(approveCall.args![0]).toLowerCase(), approveCall.args![1]], ['approve', w.source.router.address, LINK_CAP]);
  const sendTx = await w.source.chain.getTransaction({ hash: s.byKey.send.provider_refs.tx_hash as Hex });
  assert.equal(sendTx.value, 0n);
  assert.equal(decodeCcipSend(sendTx.input)!.message.feeToken.toLowerCase(), w.source.link.address);
  assert.equal(s.byKey.send.provider_refs.fee_token, w.source.link.address);
  assert.equal(BigInt(String(s.byKey.send.provider_refs.fee_wei)), QUOTED_LINK);
  // The effects the signer checked: an approve of the cap to the Router, and a send in LINK.
  const approval = deriveExpectedEffect({ plan: s.movement.compiled_plan, nodeKey: 'fee_approval', intent: s.movement.intent, evm: deps.config.file.evm, ccip: deps.config.file.ccip });
  assert.ok(approval.ok);
  assert.deepEqual([approval.effect.asset, approval.effect.to, approval.effect.amount_base_units, approval.effect.token_method], [w.source.link.address, w.source.router.address, LINK_CAP.toString(), 'approve']);
  const send = deriveExpectedEffect({ plan: s.movement.compiled_plan, nodeKey: 'send', intent: s.movement.intent, evm: deps.config.file.evm, ccip: deps.config.file.ccip });
  assert.ok(send.ok);
  assert.equal(send.effect.ccip_send!.fee_token, w.source.link.address);
  assert.equal(send.effect.ccip_send!.max_fee_wei, LINK_CAP.toString());
  // The plan must bound the fee on chain: without its approval right before, or approving more than the cap, the send has no effect (nothing signable).
  const plan = s.movement.compiled_plan as { nodes: Array<{ node_key: string; predecessors: string[]; config: Record<string, any> }> };
  const variant = (change: (p: typeof plan) => void) => {
    const copy = structuredClone(plan);
    change(copy);
    return deriveExpectedEffect({ plan: copy, nodeKey: 'send', intent: s.movement.intent, evm: deps.config.file.evm, ccip: deps.config.file.ccip });
  };
  const unbounded = variant((p) => void (p.nodes.find((n) => n.node_key === 'send')!.predecessors = []));
  assert.ok(!unbounded.ok && /needs a node right before it approving LINK/.test(unbounded.reason));
  const above = variant((p) => void (p.nodes.find((n) => n.node_key === 'fee_approval')!.config.token_approval.amount = '1.000000000000000001'));
  assert.ok(!above.ok && /at most config.max_fee_wei/.test(above.reason));
  const elsewhere = variant((p) => void (p.nodes.find((n) => n.node_key === 'fee_approval')!.config.token_approval.spender = fresh()));
  assert.ok(!elsewhere.ok, 'an approval to another spender does not bound the Router');
  // A fee token the section does not list: no effect, nothing signable.
  const unlisted = deriveExpectedEffect({ plan: s.movement.compiled_plan, nodeKey: 'send', intent: s.movement.intent, evm: deps.config.file.evm, ccip: { ...deps.config.file.ccip!, fee_tokens: [] } });
  assert.ok(!unlisted.ok && /not one of ccip.fee_tokens/.test(unlisted.reason));
});

test('a LINK quote above the approved cap fails the send before signing (CCIP_FEE_ABOVE_CAP); only the approval was signed', async (t) => {
  const db = await scratchDatabase(t);
  const deps = await laneDeps(db.pool);
  const id = await approvedMovement(deps, template('ccip-link-cap', QUOTED_LINK - 1n, '0.01'), { asset: 'USDC', amount: '1', destination: { address: fresh() } });
  const before = await ccipEvents(w);
  const s = await runToEnd(deps, id);
  assert.equal(s.byKey.send.node_state, 'FAILED', shown(s));
  assert.equal(s.byKey.send.error_code, 'CCIP_FEE_ABOVE_CAP');
  assert.equal(s.byKey.fee_approval.node_state, 'COMPLETED');
  assert.equal(deps.signed.length, 1, 'the approval only');
  assert.equal((await ccipEvents(w)).sent.length, before.sent.length);
});

// --- A hostile executor: a prepared transaction rewritten after prepare.

type Rewrite = (tx: TransactionSerializableEIP1559) => TransactionSerializableEIP1559;

function rewriting(key: string, rewrite: Rewrite) {
  return (real: ExecutorRegistry): ExecutorRegistry => {
    const r = new ExecutorRegistry();
    for (const e of real.all()) {
      if (e.executorKey !== key) {
        r.register(e);
        continue;
      }
      r.register({
        executorKey: e.executorKey,
        lane: e.lane,
        preflight: (ctx) => e.preflight(ctx),
        prepare: async (ctx) => {
          const res = await e.prepare(ctx);
          if (!res.prepared_action) return res;
          const pa = res.prepared_action;
          const payload = serializeTransaction(rewrite(parseTransaction(pa.payload as Hex) as TransactionSerializableEIP1559));
          return { ...res, prepared_action: { ...pa, payload, payload_hash: payloadHash(payload) } };
        },
        preSubmitCheck: e.preSubmitCheck ? (ctx, prepared) => e.preSubmitCheck!(ctx, prepared) : undefined,
        submit: (ctx, p, o) => e.submit(ctx, p, o),
        observe: (ctx) => e.observe(ctx),
        recover: (ctx) => e.recover(ctx),
        inspect: (ctx) => e.inspect(ctx),
      } satisfies Executor);
    }
    return r;
  };
}

const thief = fresh();
const resend = (tx: TransactionSerializableEIP1559, change: { feeToken?: Address; value: bigint }) => {
  const s = decodeCcipSend(tx.data!)!;
  return { ...tx, data: encodeFunctionData({ abi: routerAbi, functionName: 'ccipSend', args: [s.destinationChainSelector, { ...s.message, ...(change.feeToken ? { feeToken: change.feeToken } : {}) }] }), value: change.value };
};
const cases: Array<[string, string, string, Rewrite]> = [
  ['a send with LINK fees also carrying native value', CCIP_SEND_KEY, 'ccip_fee_value', (tx) => resend(tx, { value: 1n })],
  ['a send switched to a native fee (the cap is in LINK)', CCIP_SEND_KEY, 'ccip_fee_token', (tx) => resend(tx, { feeToken: zeroAddress, value: LINK_CAP })],
  ['an approval to another spender', CCIP_FEE_APPROVAL_KEY, 'to', (tx) => ({ ...tx, data: encodeFunctionData({ abi: erc20Abi, functionName: 'approve', args: [thief, LINK_CAP] }) })],
  ['an approval above the cap', CCIP_FEE_APPROVAL_KEY, 'amount', (tx) => ({ ...tx, data: encodeFunctionData({ abi: erc20Abi, functionName: 'approve', args: [w.source.router.address, 2n ** 256n - 1n] }) })],
];

for (const [what, key, rule, rewrite] of cases) {
  test(`a hostile executor proposing ${what}: no signature (rule ${rule}), nothing sent`, async (t) => {
    const db = await scratchDatabase(t);
    const deps = await laneDeps(db.pool, rewriting(key, rewrite));
    const before = await ccipEvents(w);
    const id = await approvedMovement(deps, template(`ccip-link-hostile-${rule}`), { asset: 'USDC', amount: '1', destination: { address: fresh() } });
    const s = await runToEnd(deps, id);
    const node = key === CCIP_SEND_KEY ? s.byKey.send : s.byKey.fee_approval;
    assert.equal(node.node_state, 'FAILED', shown(s));
    assert.equal(node.error_code, 'SIGNER_POLICY_VIOLATION', String(node.error_detail));
    assert.equal((await ccipEvents(w)).sent.length, before.sent.length, 'no CCIPMessageSent');
    while ((await promoteAuditBatch(db.pool)) > 0);
    const { events } = await listAuditEvents(db.pool, { entity_type: 'movement_node', entity_id: node.id });
    assert.deepEqual(events.filter((e) => e.action === 'signer.refused').map((e) => e.details.rule), [rule]);
  });
}
