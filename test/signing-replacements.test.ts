import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { parseTransaction, serializeTransaction, type Address, type Hex, type TransactionSerializable } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { observeBatch } from '../src/actors/observer.ts';
import { FatalMovementError } from '../src/executors/errors.ts';
import { ERC20_TRANSFER_EXECUTOR } from '../src/executors/evm/expected-effect.ts';
import { payloadHash } from '../src/executors/payload-hash.ts';
import type { ExpectedEffect, SignRequest } from '../src/executors/protocol.ts';
import { checkReplacement } from '../src/executors/signers/evm-policy.ts';
import { LocalPrivateKeySignerEvm } from '../src/executors/signers/local-private-key-evm.ts';
import { RemoteSignerProxy } from '../src/executors/signers/remote-proxy.ts';
import { listenHost, type ListeningHost } from '../src/hosts/common.ts';
import { signerHostApp } from '../src/hosts/signer-host.ts';
import { log } from '../src/log.ts';
import { artifactsOfNodes, insertArtifacts } from '../src/persistence/artifacts.ts';
import { listAuditEvents, promoteAuditBatch } from '../src/persistence/audit.ts';
import type { Pool } from '../src/persistence/db.ts';
import { transitionsOfEntity } from '../src/persistence/movements.ts';
import { ANVIL_DEV_ADDRESS, ANVIL_DEV_KEY } from './helpers/anvil.ts';
import { sendCall, tokenBalance, usdcChainForFile, type UsdcChain } from './helpers/contracts.ts';
import { scratchDatabase } from './helpers/db.ts';
import { hostileDeps, hostileExecutor, transferData, usdcPlan, USDC_AMOUNT, type Variant } from './helpers/hostile-executor.ts';
import { approvedMovement, backdateNodes, dispatchUntilIdle, snapshot } from './helpers/runtime.ts';
import { EVIDENCE, requestSigner, requestVerifier, signedHeaders } from './helpers/host-requests.ts';

/**
 * Replacements are the same payment. A hostile remote executor (a loopback server speaking the
 * executor protocol) prepares an honest 100 USDC transfer on a real chain, then, from /observe,
 * proposes "replacements": the same transfer with another nonce (a second payment, the attack of
 * the security review), another recipient or amount, lower fees, fees far above the bump factor,
 * more replacements than allowed. The runtime has each signed only as a replacement of the
 * original it stored, and the signer refuses all but real fee bumps: the recipient is paid exactly
 * once, each refusal is audited with its rule, and the node keeps observing its original.
 */

let local: UsdcChain;
usdcChainForFile(async (l) => {
  local = l;
  await sendCall(l.chain, l.anvil.url, ANVIL_DEV_KEY, l.usdc, 'mint', [ANVIL_DEV_ADDRESS, 10n ** 15n]);
});

const CAP_WEI = 500_000_000_000n;
const AMOUNT = USDC_AMOUNT;
const ATTACKER = privateKeyToAccount(generatePrivateKey()).address.toLowerCase() as Address;
const fresh = () => privateKeyToAccount(generatePrivateKey()).address.toLowerCase() as Address;

const latestNonce = () => local.chain.getTransactionCount({ address: ANVIL_DEV_ADDRESS, blockTag: 'latest' });

async function nodeAudits(pool: Pool, nodeId: string) {
  while ((await promoteAuditBatch(pool)) > 0);
  return (await listAuditEvents(pool, { entity_type: 'movement_node', entity_id: nodeId, order: 'asc' })).events;
}

/**
 * Sends the movement (the original is mined at once: anvil mines a block per transaction), then
 * lets the observer look `looks` times; each look gets the hostile executor's proposal.
 */
async function attack(t: { after: (fn: () => Promise<void>) => void }, pool: Pool, variant: Variant, opts: { looks?: number; env?: Record<string, string> } = {}) {
  const recipient = fresh();
  const hostile = await hostileExecutor(local, recipient, { observe: variant });
  t.after(() => hostile.stop());
  const deps = hostileDeps(pool, local, hostile.url, { env: opts.env });
  const nonceBefore = await latestNonce();
  const id = await approvedMovement(deps, usdcPlan(`replacements-${Date.now()}-${Math.random()}`), { asset: 'USDC', amount: '100', destination: { address: recipient } });
  await dispatchUntilIdle(deps);
  const nodeId = (await snapshot(pool, id)).byKey.pay.id;
  assert.equal(hostile.broadcasts.length, 1, 'the original was sent');
  for (let i = 0; i < (opts.looks ?? 3); i++) {
    await backdateNodes(pool, [id], 'next_observe_at', 3600);
    assert.equal(await observeBatch(deps), 1, 'the node was observed');
  }
  return { id, nodeId, recipient, hostile, deps, nonceBefore, node: (await snapshot(pool, id)).byKey.pay };
}

async function assertPaidOnce(r: Awaited<ReturnType<typeof attack>>) {
  assert.equal(await tokenBalance(local.chain, local.usdc, r.recipient), AMOUNT, 'the recipient was paid exactly once');
  assert.equal(await tokenBalance(local.chain, local.usdc, ATTACKER), 0n);
  assert.equal(await latestNonce(), r.nonceBefore + 1, 'one transaction from the sender');
}

const refusals: Array<{ name: string; variant: Variant; rule: string; distinct?: boolean }> = [
  // The security review's attack: the same transfer again with the next nonce, at every look.
  { name: 'the same 100 USDC transfer with nonce+1, +2, +3', variant: (o, look) => ({ ...o, nonce: o.nonce! + look }), rule: 'replacement_nonce', distinct: true },
  { name: 'the transfer to another recipient', variant: (o) => ({ ...o, data: transferData(ATTACKER, AMOUNT) }), rule: 'replacement_data' },
  { name: 'the transfer of a larger amount', variant: (o) => ({ ...o, data: transferData(fresh(), AMOUNT * 10n) }), rule: 'replacement_data', distinct: true },
  { name: 'a call on another contract', variant: (o) => ({ ...o, to: ATTACKER }), rule: 'replacement_to' },
  { name: 'the transfer with native value added', variant: (o) => ({ ...o, value: 10n ** 18n }), rule: 'replacement_value' },
  { name: 'a higher gas limit', variant: (o) => ({ ...o, gas: 5_000_000n }), rule: 'replacement_gas' },
  { name: 'lower fees', variant: (o) => ({ ...o, maxFeePerGas: o.maxFeePerGas - 1n }), rule: 'replacement_fee_decrease' },
  { name: 'a fee far above the bump factor (still under the chain cap)', variant: (o) => ({ ...o, maxFeePerGas: o.maxFeePerGas * 20n }), rule: 'replacement_bump_factor' },
];

for (const c of refusals) {
  test(`a replacement that is ${c.name} is refused (${c.rule}): paid once, audited, the node keeps observing`, async (t) => {
    const db = await scratchDatabase(t);
    const r = await attack(t, db.pool, c.variant);
    await assertPaidOnce(r);
    assert.ok(['SUBMITTED', 'OBSERVING'].includes(r.node.node_state), `the node still observes its original (${r.node.node_state})`);
    assert.equal(r.hostile.broadcasts.length, 1, 'nothing else was sent');
    const events = (await transitionsOfEntity(db.pool, r.nodeId)).map((tr) => tr.event_type);
    assert.equal(events.includes('REPLACEMENT_SIGNED'), false);
    const artifacts = await artifactsOfNodes(db.pool, [r.nodeId]);
    assert.equal(artifacts.filter((a) => a.artifact_type === 'signature').length, 1, 'one signature: the original\'s');

    // Each request named the original, read from Ferry's records (not from the executor).
    const replacementRequests = r.deps.signRequests.filter((q) => q.replaces);
    assert.equal(replacementRequests.length, 3);
    const original = artifacts.find((a) => a.artifact_type === 'prepared_action')!;
    for (const q of replacementRequests) {
      assert.equal(q.replaces!.payload_hash, original.artifact_digest);
      assert.equal(q.replaces!.replacement_no, 1, 'nothing was signed, so each is still the first replacement');
    }

    const refused = (await nodeAudits(db.pool, r.nodeId)).filter((e) => e.action === 'signer.refused');
    // Audited once per distinct payload: an executor repeating a refused proposal does not fill the log.
    assert.equal(refused.length, c.distinct ? 3 : 1);
    for (const e of refused) {
      assert.equal(e.actor, 'worker:observer');
      assert.equal(e.details.error_code, 'SIGNER_POLICY_VIOLATION');
      assert.equal(e.details.rule, c.rule);
      assert.equal(e.details.replacement_no, 1);
      assert.equal(e.details.executor_key, ERC20_TRANSFER_EXECUTOR);
    }
  });
}

test('real fee bumps are signed up to FERRY_EVM_MAX_REPLACEMENTS, each audited; the next is refused before the signer is asked', async (t) => {
  const db = await scratchDatabase(t);
  // +20% per look over the original: a real fee bump, the same payment.
  const bump: Variant = (o, look) => ({ ...o, maxFeePerGas: (o.maxFeePerGas * BigInt(10 + 2 * look)) / 10n, maxPriorityFeePerGas: (o.maxPriorityFeePerGas * BigInt(10 + 2 * look)) / 10n });
  const r = await attack(t, db.pool, bump, { looks: 4, env: { FERRY_EVM_MAX_REPLACEMENTS: '2' } });
  await assertPaidOnce(r);
  // The original was mined at once: the chain refuses both replacements (nonce too low), as it must.
  assert.equal(r.hostile.broadcasts.length, 1);
  assert.equal(r.hostile.refusedBroadcasts.length, 2);
  assert.deepEqual(
    r.deps.signRequests.map((q) => q.replaces?.replacement_no ?? 0),
    [0, 1, 2],
    'the original, then replacements 1 and 2; the third and fourth never reached the signer',
  );
  const events = (await transitionsOfEntity(db.pool, r.nodeId)).map((tr) => tr.event_type);
  assert.equal(events.filter((e) => e === 'REPLACEMENT_SIGNED').length, 2);

  const audits = await nodeAudits(db.pool, r.nodeId);
  const signed = audits.filter((e) => e.action === 'signer.replacement');
  assert.deepEqual(signed.map((e) => e.details.replacement_no), [1, 2]);
  const original = (await artifactsOfNodes(db.pool, [r.nodeId])).find((a) => a.artifact_type === 'prepared_action')!;
  for (const e of signed) {
    assert.equal(e.actor, 'worker:observer');
    assert.equal(e.details.replaces_payload_hash, original.artifact_digest);
    assert.equal(e.details.signer_key, 'evm_local');
    assert.match(String(e.details.max_fee_per_gas), /^[0-9]+$/);
  }
  const refused = audits.filter((e) => e.action === 'signer.refused');
  assert.equal(refused.length, 1, 'the limit is audited once per attempt');
  assert.equal(refused[0]!.details.rule, 'replacement_limit');
  assert.equal(refused[0]!.details.replacement_no, 3);
});

test('the dispatcher signs no second original for an attempt that already holds a signature', async (t) => {
  const db = await scratchDatabase(t);
  const recipient = fresh();
  const hostile = await hostileExecutor(local, recipient, { observe: (o) => o });
  t.after(() => hostile.stop());
  const deps = hostileDeps(db.pool, local, hostile.url);
  const nonceBefore = await latestNonce();
  const id = await approvedMovement(deps, usdcPlan(`replacements-attempt-${Date.now()}`), { asset: 'USDC', amount: '100', destination: { address: recipient } });
  const node = (await snapshot(db.pool, id)).byKey.pay;
  // Records saying attempt 1 was already signed (a version whose SUBMITTING committed).
  await insertArtifacts(db.pool, [
    { request_id: id, request_node_id: node.id, attempt_no: 1, artifact_type: 'signature', artifact_digest: 'sha256:earlier', content_format: 'evm_signed_tx', content_inline: '0x00', content_uri: null, artifact_metadata: {} },
  ]);
  await dispatchUntilIdle(deps);
  const s = (await snapshot(db.pool, id)).byKey.pay;
  assert.equal(s.node_state, 'FAILED');
  assert.equal(s.error_code, 'SIGNER_POLICY_VIOLATION');
  assert.equal(deps.signRequests.length, 0, 'the signer was never asked');
  assert.equal(hostile.broadcasts.length, 0);
  assert.equal(await latestNonce(), nonceBefore);
  const refused = (await nodeAudits(db.pool, node.id)).filter((e) => e.action === 'signer.refused');
  assert.equal(refused.length, 1);
  assert.equal(refused[0]!.details.rule, 'attempt_already_signed');
});

describe('checkReplacement (pure)', () => {
  const gwei = 1_000_000_000n;
  const original = {
    type: 'eip1559',
    chainId: 8453,
    nonce: 7,
    to: '0x5fbdb2315678afecb367f032d93f642f64180aa3',
    value: 0n,
    data: transferData('0x1111111111111111111111111111111111111111', AMOUNT),
    gas: 90_000n,
    maxFeePerGas: 10n * gwei,
    maxPriorityFeePerGas: 1n * gwei,
  } as TransactionSerializable;
  const limits = { maxReplacements: 3, maxFeeBumpFactor: 4 };
  const refusedWith = (rule: string) => (err: unknown) => {
    assert.ok(err instanceof FatalMovementError, String(err));
    assert.equal(err.code, 'SIGNER_POLICY_VIOLATION');
    assert.equal(err.details.rule, rule, err.message);
    return true;
  };
  const check = (over: Partial<TransactionSerializable>, no = 1) => checkReplacement({ ...original, ...over } as TransactionSerializable, original, no, limits);

  test('a fee bump within the factor is the same payment', () => {
    check({ maxFeePerGas: 12n * gwei, maxPriorityFeePerGas: 2n * gwei });
    check({ maxFeePerGas: 40n * gwei, maxPriorityFeePerGas: 1n * gwei }, 3);
    check({}); // the original itself (a node refuses it as underpriced; nothing new is paid)
  });

  test('every field but the fees must be kept', () => {
    assert.throws(() => check({ nonce: 8 }), refusedWith('replacement_nonce'));
    assert.throws(() => check({ chainId: 1 }), refusedWith('replacement_chain_id'));
    assert.throws(() => check({ to: ATTACKER }), refusedWith('replacement_to'));
    assert.throws(() => check({ value: 1n }), refusedWith('replacement_value'));
    assert.throws(() => check({ data: transferData(ATTACKER, AMOUNT) }), refusedWith('replacement_data'));
    assert.throws(() => check({ data: `${original.data}00` as Hex }), refusedWith('replacement_data'));
    assert.throws(() => check({ gas: 90_001n }), refusedWith('replacement_gas'));
    assert.throws(() => check({ accessList: [{ address: ATTACKER, storageKeys: [] }] } as never), refusedWith('replacement_access_list'));
    const legacy = { type: 'legacy', chainId: 8453, nonce: 7, to: original.to, value: 0n, data: original.data, gas: 90_000n, gasPrice: 10n * gwei } as TransactionSerializable;
    assert.throws(() => checkReplacement(legacy, original, 1, limits), refusedWith('replacement_tx_type'));
  });

  test('fees never go down, nor above the bump factor; the count is bounded', () => {
    assert.throws(() => check({ maxFeePerGas: 10n * gwei - 1n }), refusedWith('replacement_fee_decrease'));
    assert.throws(() => check({ maxFeePerGas: 20n * gwei, maxPriorityFeePerGas: 1n }), refusedWith('replacement_fee_decrease'));
    assert.throws(() => check({ maxFeePerGas: 40n * gwei + 1n }), refusedWith('replacement_bump_factor'));
    assert.throws(() => check({ maxFeePerGas: 12n * gwei }, 4), refusedWith('replacement_limit'));
    assert.throws(() => check({ maxFeePerGas: 12n * gwei }, 0), refusedWith('replacement_limit'));
    const legacy = { type: 'legacy', chainId: 8453, nonce: 7, to: original.to, value: 0n, data: original.data, gas: 90_000n, gasPrice: 10n * gwei } as TransactionSerializable;
    checkReplacement({ ...legacy, gasPrice: 11n * gwei } as TransactionSerializable, legacy, 1, limits);
    assert.throws(() => checkReplacement({ ...legacy, gasPrice: 9n * gwei } as TransactionSerializable, legacy, 1, limits), refusedWith('replacement_fee_decrease'));
    assert.throws(() => checkReplacement({ ...legacy, gasPrice: 41n * gwei } as TransactionSerializable, legacy, 1, limits), refusedWith('replacement_bump_factor'));
  });
});

describe('a replacement request through the remote signer proxy and the signer host', () => {
  const TOKEN = '0x5fbdb2315678afecb367f032d93f642f64180aa3';
  const ALICE = '0x1111111111111111111111111111111111111111';
  const effect: ExpectedEffect = { chain_id: 8453, asset: TOKEN, to: ALICE, amount_base_units: AMOUNT.toString(), token_method: 'transfer', max_fee_per_gas_cap_wei: CAP_WEI.toString() };
  const tx = (over: Partial<TransactionSerializable> = {}) =>
    serializeTransaction({ type: 'eip1559', chainId: 8453, nonce: 3, to: TOKEN, value: 0n, data: transferData(ALICE, AMOUNT), gas: 90_000n, maxFeePerGas: 2_000_000_000n, maxPriorityFeePerGas: 1_000_000n, ...over } as never);
  const request = (payload: Hex, replaces: { payload: Hex; replacement_no: number } | null): SignRequest => ({
    protocol_version: '1.0',
    request_id: 'req-1',
    request_node_id: 'node-1',
    ...EVIDENCE,
    signing_intent: { action: 'evm_erc20_transfer', asset: 'USDC', amount: '100', destination: ALICE, max_fee_usd: null, chain_family: 'evm', allowed_payload_hash: payloadHash(payload) },
    payload_format: 'evm_raw_tx',
    payload,
    payload_hash: payloadHash(payload),
    metadata: {},
    executor_key: ERC20_TRANSFER_EXECUTOR,
    expected_effect: effect,
    expected_effect_unavailable: null,
    ...(replaces ? { replaces: { payload: replaces.payload, payload_hash: payloadHash(replaces.payload), replacement_no: replaces.replacement_no } } : {}),
  });
  const signer = new LocalPrivateKeySignerEvm({ signerKey: 'hot', privateKey: ANVIL_DEV_KEY, replacements: { maxReplacements: 2, maxFeeBumpFactor: 4 } });
  const TOKEN_HOST = 'host-token-0123456789abcdef';
  const app = signerHostApp({ signer, token: TOKEN_HOST, verifier: requestVerifier(), log: log.child({ test: true }) });
  let host: ListeningHost;
  before(async () => {
    host = await listenHost(app, '127.0.0.1', 0);
  });
  after(() => host?.stop());

  const post = (body: unknown) => {
    const text = JSON.stringify(body);
    return app.request('/sign', { method: 'POST', headers: signedHeaders('/sign', 'hot', text, TOKEN_HOST), body: text });
  };

  test('the host signs a real fee bump and refuses a nonce change, a bump over its factor and one over its limit', async () => {
    const original = tx();
    const ok = await post(request(tx({ maxFeePerGas: 3_000_000_000n }), { payload: original, replacement_no: 1 }));
    assert.equal(ok.status, 200);
    for (const [payload, no, pattern] of [
      [tx({ nonce: 4 }), 1, /nonce/],
      [tx({ maxFeePerGas: 9_000_000_000n }), 1, /times the original/],
      [tx({ maxFeePerGas: 3_000_000_000n }), 3, /over the limit/],
    ] as const) {
      const res = await post(request(payload, { payload: original, replacement_no: no }));
      assert.equal(res.status, 422);
      const body = (await res.json()) as { code: string; message: string };
      assert.equal(body.code, 'SIGNER_POLICY_VIOLATION');
      assert.match(body.message, pattern);
    }
    // A replaced version that is not what its hash says is a tampered request.
    const tampered = request(tx({ maxFeePerGas: 3_000_000_000n }), { payload: original, replacement_no: 1 });
    tampered.replaces!.payload = tx({ nonce: 4 });
    const res = await post(tampered);
    assert.equal(((await res.json()) as { code: string }).code, 'SIGNER_PAYLOAD_HASH_MISMATCH');
  });

  test('the proxy checks the replacement before the request leaves, and forwards `replaces` to the host', async () => {
    const proxy = new RemoteSignerProxy({ signerKey: 'hot', baseUrl: host.url, token: TOKEN_HOST, requestSigner, evmPolicy: { chains: [8453], replacements: { maxReplacements: 2, maxFeeBumpFactor: 4 } } });
    const original = tx();
    await assert.rejects(proxy.sign(request(tx({ nonce: 4 }), { payload: original, replacement_no: 1 })), (e: unknown) => e instanceof FatalMovementError && e.details.rule === 'replacement_nonce');
    const signed = await proxy.sign(request(tx({ maxFeePerGas: 3_000_000_000n }), { payload: original, replacement_no: 1 }));
    assert.equal(parseTransaction(signed.signature as Hex).maxFeePerGas, 3_000_000_000n);
    // Without a policy of its own the proxy forwards, and the host refuses with the same rule.
    const bare = new RemoteSignerProxy({ signerKey: 'hot', baseUrl: host.url, token: TOKEN_HOST, requestSigner });
    await assert.rejects(bare.sign(request(tx({ nonce: 4 }), { payload: original, replacement_no: 1 })), (e: unknown) => e instanceof FatalMovementError && /nonce/.test(e.message));
    await proxy.close();
    await bare.close();
  });
});

