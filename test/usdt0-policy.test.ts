import assert from 'node:assert/strict';
import { test } from 'node:test';
import { serializeTransaction, type Address, type Hex, type TransactionSerializableEIP1559 } from 'viem';
import { ConfigFileSchema, parseConfigFile } from '../src/config-file.ts';
import { FatalMovementError } from '../src/executors/errors.ts';
import { deriveExpectedEffect } from '../src/executors/evm/expected-effect.ts';
import { checkEvmTransaction } from '../src/executors/signers/evm-policy.ts';
import { checkEvmRawTxRequest } from '../src/executors/signers/evm-signing.ts';
import { addressToBytes32, encodeSend, type SendParam } from '../src/executors/usdt0/oft.ts';

/**
 * The USDT0 lane without chains: its configuration's checks, the expected effect of a send as the
 * approved plan fixes it (and the plans that get none), and the signer's rule for an OFT `send`
 * where the sender is known (a local key) and where it is not (a proxy in front of a remote signer).
 */

const OFT_A = '0x00000000000000000000000000000000000000a1';
const OFT_B = '0x00000000000000000000000000000000000000b2';
const TOKEN_A = '0x00000000000000000000000000000000000000c3';
const TOKEN_B = '0x00000000000000000000000000000000000000d4';
const SENDER = '0x00000000000000000000000000000000000000e5' as Address;
const ALICE = '0x00000000000000000000000000000000000000f6' as Address;
const OTHER = '0x0000000000000000000000000000000000000017' as Address;

const yaml = (usdt0: string, decimals = 6) => `
evm:
  chains:
    - { chain_id: 1, rpc_url: "http://127.0.0.1:9", max_fee_per_gas_cap_wei: "100000000000" }
    - { chain_id: 42161, rpc_url: "http://127.0.0.1:9", max_fee_per_gas_cap_wei: "100000000000" }
  tokens:
    - { chain_id: 1, symbol: USDT0, address: "${TOKEN_A}", decimals: ${decimals} }
    - { chain_id: 42161, symbol: USDT0, address: "${TOKEN_B}", decimals: 6 }
${usdt0}`;

const DEPLOYMENTS = `usdt0:
  deployments:
    - { chain_id: 1, eid: 30101, oft: "${OFT_A}" }
    - { chain_id: 42161, eid: 30110, oft: "${OFT_B}" }
`;

function file(text = yaml(DEPLOYMENTS)) {
  const r = parseConfigFile(text);
  assert.ok(r.ok, !r.ok ? r.reason : '');
  return r.file;
}

test('the usdt0 section: deployments on chains of evm.chains, one eid and one deployment per chain, tokens listed with decimals', () => {
  const f = file();
  assert.equal(f.usdt0!.deployments[1]!.token, 'USDT0');
  assert.equal(f.usdt0!.delivery_timeout_seconds, 1800);
  const refused = (text: string, path: RegExp) => {
    const r = parseConfigFile(text);
    assert.equal(r.ok, false);
    assert.match((r as { reason: string }).reason, path);
  };
  refused(yaml(DEPLOYMENTS.replace('chain_id: 42161, eid', 'chain_id: 10, eid')), /^usdt0\.deployments\[1\]\.chain_id: chain 10 is not in evm\.chains/);
  refused(yaml(DEPLOYMENTS.replace('eid: 30110', 'eid: 30101')), /^usdt0\.deployments\[1\]\.eid: eid 30101 is listed twice/);
  refused(yaml(DEPLOYMENTS.replace(`oft: "${OFT_B}" }`, `oft: "${OFT_B}", token: USDC }`)), /^usdt0\.deployments\[1\]\.token: USDC is not listed in evm\.tokens/);
  refused(yaml(DEPLOYMENTS.replace(`oft: "${OFT_B}" }`, 'oft: "0x12" }')), /^usdt0\.deployments\[1\]\.oft/);
  refused(yaml(`${DEPLOYMENTS}  unknown: 1\n`), /usdt0/);
  assert.ok(ConfigFileSchema.shape.usdt0);
});

const plan = (config: Record<string, unknown>) => ({
  nodes: [
    {
      node_key: 'send',
      executor_binding: { executor_key: 'exec.usdt0.send' },
      signer_binding: { signer_key: 'hot', chain_id: 1 },
      config: { destination_chain_id: 42161, max_native_fee_wei: '5000000000000000', ...config },
    },
  ],
});
const intent = { asset: 'USDT0', amount: '250.5', destination: { address: ALICE } };
const derive = (config: Record<string, unknown> = {}, text?: string, i: Record<string, unknown> = intent) => {
  const f = file(text);
  return deriveExpectedEffect({ plan: plan(config), nodeKey: 'send', intent: i, evm: f.evm, usdt0: f.usdt0 });
};

test('the expected effect of a send: the OFT, the eid, the recipient as bytes32, the amount as its minimum, the fee cap; plans that get none', () => {
  const e = derive();
  assert.ok(e.ok, !e.ok ? e.reason : '');
  assert.equal(e.effect.to, OFT_A);
  assert.equal(e.effect.asset, TOKEN_A);
  assert.equal(e.effect.max_fee_per_gas_cap_wei, '100000000000');
  assert.deepEqual(e.effect.oft_send, {
    dst_eid: 30110,
    to: addressToBytes32(ALICE),
    amount_ld: '250500000',
    min_amount_ld: '250500000',
    extra_options: '0x',
    compose_msg: '0x',
    oft_cmd: '0x',
    max_native_fee_wei: '5000000000000000',
  });
  const byEid = derive({ destination_chain_id: undefined, destination_eid: 30110, min_amount: '250', refund_address: OTHER });
  assert.ok(byEid.ok);
  assert.equal(byEid.effect.oft_send!.min_amount_ld, '250000000');
  assert.equal(byEid.effect.oft_send!.refund_address, OTHER);
  const none = (config: Record<string, unknown>, reason: RegExp, text?: string, i?: Record<string, unknown>) => {
    const r = derive(config, text, i);
    assert.ok(!r.ok, `${JSON.stringify(config)} has no effect`);
    assert.match(r.reason, reason);
  };
  none({ max_native_fee_wei: undefined }, /max_native_fee_wei is required/);
  none({ destination_chain_id: undefined }, /neither config\.destination_chain_id nor config\.destination_eid/);
  none({ destination_chain_id: undefined, destination_eid: 40_000 }, /eid 40000 has no usdt0 deployment/);
  none({ destination_eid: 30101 }, /is not the eid of config\.destination_chain_id/);
  none({ destination_chain_id: 1 }, /the source chain's own/);
  none({ min_amount: '300' }, /above the amount/);
  none({ to: '$ref:other.address' }, /reference to another node's output/);
  none({ extra_options: '0x0001' }, /type-3 options/);
  none({ token: 'USDC' }, /not listed in evm\.tokens/);
  // 18 decimals on the source: 250.5000000000001 has dust below the 6 shared decimals.
  none({}, /dust below the 6 shared decimals/, yaml(DEPLOYMENTS, 18), { ...intent, amount: '250.5000000000001' });
  const f = file();
  const noSection = deriveExpectedEffect({ plan: plan({}), nodeKey: 'send', intent, evm: f.evm });
  assert.ok(!noSection.ok && /no usdt0 section/.test(noSection.reason));
});

const sp = (change: Partial<SendParam> = {}): SendParam => ({
  dstEid: 30110,
  to: addressToBytes32(ALICE),
  amountLD: 250_500_000n,
  minAmountLD: 250_500_000n,
  extraOptions: '0x',
  composeMsg: '0x',
  oftCmd: '0x',
  ...change,
});
const tx = (data: Hex, value: bigint): TransactionSerializableEIP1559 => ({
  type: 'eip1559',
  chainId: 1,
  nonce: 3,
  to: OFT_A,
  value,
  data,
  gas: 300_000n,
  maxFeePerGas: 1_000_000_000n,
  maxPriorityFeePerGas: 1_000_000n,
});
const rule = (f: () => void, expected: string) =>
  assert.throws(f, (err: unknown) => err instanceof FatalMovementError && err.code === 'SIGNER_POLICY_VIOLATION' && (err.details as { rule?: string }).rule === expected, `rule ${expected}`);

test("the signer's OFT send rule: the approved send passes; the refund goes to the sender, or to the plan's refund address", () => {
  const effect = (config: Record<string, unknown> = {}) => {
    const e = derive(config);
    assert.ok(e.ok);
    return e.effect;
  };
  const scope = { signerKey: 'hot' };
  const fee = 1_234_567n;
  const honest = tx(encodeSend(sp(), fee, SENDER), fee);
  checkEvmTransaction(honest, effect(), scope, null, SENDER);
  // The refund to someone else: refused where the sender is known...
  const elsewhere = tx(encodeSend(sp(), fee, OTHER), fee);
  rule(() => checkEvmTransaction(elsewhere, effect(), scope, null, SENDER), 'oft_refund_address');
  // ...and where it is not (a proxy in front of a remote signer), only the remote can tell.
  checkEvmTransaction(elsewhere, effect(), scope, null, null);
  // A plan that names the refund address binds it wherever the check runs.
  checkEvmTransaction(elsewhere, effect({ refund_address: OTHER }), scope, null, null);
  rule(() => checkEvmTransaction(honest, effect({ refund_address: OTHER }), scope, null, null), 'oft_refund_address');
  // Trailing bytes are not the send they look like.
  rule(() => checkEvmTransaction(tx(`${encodeSend(sp(), fee, SENDER)}00` as Hex, fee), effect(), scope, null, SENDER), 'oft_calldata');
  // Options the plan did not approve.
  rule(() => checkEvmTransaction(tx(encodeSend(sp({ extraOptions: '0x0003' }), fee, SENDER), fee), effect(), scope, null, SENDER), 'oft_options');
  rule(() => checkEvmTransaction(tx(encodeSend(sp({ oftCmd: '0x01' }), fee, SENDER), fee), effect(), scope, null, SENDER), 'oft_cmd');
  // The gas fee cap still holds.
  rule(() => checkEvmTransaction({ ...honest, maxFeePerGas: 200_000_000_000n }, effect(), scope, null, SENDER), 'fee_cap');
  // A raw-tx request without the signer's address (the remote proxy) runs the same rule.
  const payload = serializeTransaction(honest);
  const request = {
    protocol_version: '1',
    request_id: 'r',
    request_node_id: 'n',
    attempt_no: 1,
    compiled_plan_hash: 'sha256:x',
    signing_intent: { action: 'usdt0_send', asset: 'USDT0', amount: '250.5', destination: ALICE, max_fee_usd: null, chain_family: 'evm', allowed_payload_hash: 'x' },
    payload_format: 'evm_raw_tx',
    payload,
    payload_hash: 'x',
    metadata: {},
    executor_key: 'exec.usdt0.send',
    expected_effect: effect(),
    expected_effect_unavailable: null,
  };
  checkEvmRawTxRequest(request as never, scope, SENDER);
  rule(() => checkEvmRawTxRequest({ ...request, payload: serializeTransaction(tx(encodeSend(sp({ to: addressToBytes32(OTHER) }), fee, SENDER), fee)) } as never, scope, null), 'oft_recipient');
});
