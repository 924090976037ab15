import assert from 'node:assert/strict';
import { test } from 'node:test';
import { zeroAddress, type Address, type Hex } from 'viem';
import { ConfigFileSchema, parseConfigFile } from '../src/config-file.ts';
import { checkCcipSend, encodeCcipSend, encodeExtraArgsV2, encodeReceiver, tokenMessage, type CcipSendEffect } from '../src/executors/ccip/router.ts';
import { FatalMovementError } from '../src/executors/errors.ts';
import { deriveExpectedEffect } from '../src/executors/evm/expected-effect.ts';

/**
 * The CCIP lane without chains: its configuration's checks, the expected effect of a send as the
 * approved plan fixes it (and the plans that get none), and the signer's rule for a `ccipSend`.
 */

const ROUTER_A = '0x00000000000000000000000000000000000000a1';
const ROUTER_B = '0x00000000000000000000000000000000000000b2';
const TOKEN_A = '0x00000000000000000000000000000000000000c3';
const TOKEN_B = '0x00000000000000000000000000000000000000d4';
const ALICE = '0x00000000000000000000000000000000000000f6' as Address;
const ETH = '5009297550715157269';
const ARB = '4949039107694359620';

const yaml = (ccip: string) => `
evm:
  chains:
    - { chain_id: 1, rpc_url: "http://127.0.0.1:9", max_fee_per_gas_cap_wei: "100000000000" }
    - { chain_id: 42161, rpc_url: "http://127.0.0.1:9", max_fee_per_gas_cap_wei: "100000000000" }
  tokens:
    - { chain_id: 1, symbol: USDC, address: "${TOKEN_A}", decimals: 6 }
    - { chain_id: 42161, symbol: USDC, address: "${TOKEN_B}", decimals: 6 }
    - { chain_id: 1, symbol: WETH, address: "0x00000000000000000000000000000000000000e7", decimals: 18 }
${ccip}`;

const SECTION = `ccip:
  tokens: [USDC]
  chains:
    - { chain_id: 1, selector: "${ETH}", router: "${ROUTER_A}" }
    - { chain_id: 42161, selector: "${ARB}", router: "${ROUTER_B}", off_ramp: "0x00000000000000000000000000000000000000b3" }
`;

function file(text = yaml(SECTION)) {
  const r = parseConfigFile(text);
  assert.ok(r.ok, !r.ok ? r.reason : '');
  return r.file;
}

test('the ccip section: chains of evm.chains, one entry and one selector per chain, selectors as exact uint64 strings, tokens listed with decimals on each chain', () => {
  const f = file();
  assert.equal(f.ccip!.chains[0]!.selector, ETH, 'kept exactly (no float)');
  assert.equal(f.ccip!.stranded_after_seconds, 8 * 3600);
  const refused = (text: string, path: RegExp) => {
    const r = parseConfigFile(text);
    assert.equal(r.ok, false, text);
    assert.match((r as { reason: string }).reason, path);
  };
  refused(yaml(SECTION.replace('chain_id: 42161, selector', 'chain_id: 10, selector')), /^ccip\.chains\[1\]\.chain_id: chain 10 is not in evm\.chains/);
  refused(yaml(SECTION.replace(`selector: "${ARB}"`, `selector: "${ETH}"`)), /^ccip\.chains\[1\]\.selector: selector .* is listed twice/);
  refused(yaml(SECTION.replace(`selector: "${ARB}"`, 'selector: "18446744073709551616"')), /ccip\.chains\[1\]\.selector/);
  refused(yaml(SECTION.replace(`selector: "${ARB}"`, 'selector: 4949039107694359620')), /ccip\.chains\[1\]\.selector/);
  refused(yaml(SECTION.replace('tokens: [USDC]', 'tokens: [WETH]')), /^ccip\.tokens: WETH is not listed in evm\.tokens for chain 42161/);
  refused(yaml(SECTION.replace(`router: "${ROUTER_B}"`, 'router: "0x12"')), /^ccip\.chains\[1\]\.router/);
  refused(yaml(`${SECTION}  unknown: 1\n`), /ccip/);
  assert.ok(ConfigFileSchema.shape.ccip);
});

const plan = (config: Record<string, unknown>) => ({
  nodes: [
    {
      node_key: 'send',
      executor_binding: { executor_key: 'exec.ccip.send' },
      signer_binding: { signer_key: 'hot', chain_id: 1 },
      config: { destination_chain_id: 42161, max_fee_wei: '5000000000000000', ...config },
    },
  ],
});
const intent = { asset: 'USDC', amount: '250.5', destination: { address: ALICE } };
const derive = (config: Record<string, unknown> = {}, text?: string) => {
  const f = file(text);
  return deriveExpectedEffect({ plan: plan(config), nodeKey: 'send', intent, evm: f.evm, ccip: f.ccip });
};

test('the expected effect of a send: the Router, the selector, the receiver, one token amount, no data, EVMExtraArgsV2, the native fee cap; plans that get none', () => {
  const e = derive();
  assert.ok(e.ok, !e.ok ? e.reason : '');
  assert.equal(e.effect.to, ROUTER_A);
  assert.equal(e.effect.asset, TOKEN_A);
  assert.equal(e.effect.amount_base_units, '250500000');
  assert.deepEqual(e.effect.ccip_send, {
    dest_chain_selector: ARB,
    destination_chain_id: 42161,
    receiver: encodeReceiver(ALICE),
    token: TOKEN_A,
    amount: '250500000',
    data: '0x',
    fee_token: zeroAddress,
    extra_args: encodeExtraArgsV2(0n, true),
    max_fee_wei: '5000000000000000',
  });
  const gas = derive({ gas_limit: 200_000, allow_out_of_order_execution: false });
  assert.ok(gas.ok && gas.effect.ccip_send!.extra_args === encodeExtraArgsV2(200_000n, false));
  const none = (config: Record<string, unknown>, why: RegExp, text?: string) => {
    const r = derive(config, text);
    assert.ok(!r.ok, JSON.stringify(config));
    assert.match(r.reason, why);
  };
  none({ max_fee_wei: undefined }, /max_fee_wei is required/);
  none({ destination_chain_id: 1 }, /is the source chain/);
  none({ destination_chain_id: 10 }, /has no ccip entry/);
  none({ destination_chain_id: undefined }, /names no config.destination_chain_id/);
  none({ token: 'WETH' }, /not one of ccip.tokens/);
  none({ gas_limit: -1 }, /gas_limit/);
  none({ to: '$ref:other.output' }, /reference/);
  const f = file();
  const withoutSection = deriveExpectedEffect({ plan: plan({}), nodeKey: 'send', intent, evm: f.evm });
  assert.ok(!withoutSection.ok && /no ccip section/.test(withoutSection.reason));
});

test('the signer rule for ccipSend: the approved message and a value at most the cap, anything else refused by rule', () => {
  const effect: CcipSendEffect = {
    dest_chain_selector: ARB,
    destination_chain_id: 42161,
    receiver: encodeReceiver(ALICE),
    token: TOKEN_A,
    amount: '1000000',
    data: '0x',
    fee_token: zeroAddress,
    extra_args: encodeExtraArgsV2(0n, true),
    max_fee_wei: '1000',
  };
  const violation = (rule: string, message: string) => new FatalMovementError('SIGNER_POLICY_VIOLATION', message, { rule });
  const good = tokenMessage(ALICE, TOKEN_A as Address, 1_000_000n, encodeExtraArgsV2(0n, true));
  const check = (data: Hex, value: bigint, to = ROUTER_A) => checkCcipSend({ to, data, value }, { to: ROUTER_A, ccip_send: effect }, violation);
  const ruleOf = (f: () => void) => {
    try {
      f();
      return null;
    } catch (err) {
      return (err as FatalMovementError).details.rule;
    }
  };
  assert.equal(ruleOf(() => check(encodeCcipSend(BigInt(ARB), good), 1000n)), null, 'the approved send at the cap');
  assert.equal(ruleOf(() => check(encodeCcipSend(BigInt(ARB), good), 0n)), null, 'a value below the cap (the Router would refuse it, not the signer)');
  assert.equal(ruleOf(() => check(encodeCcipSend(BigInt(ARB), good), 1001n)), 'ccip_fee_cap');
  assert.equal(ruleOf(() => check(encodeCcipSend(BigInt(ETH), good), 1n)), 'ccip_dest_selector');
  assert.equal(ruleOf(() => check(encodeCcipSend(BigInt(ARB), { ...good, receiver: encodeReceiver(ROUTER_B) }), 1n)), 'ccip_receiver');
  assert.equal(ruleOf(() => check(encodeCcipSend(BigInt(ARB), { ...good, tokenAmounts: [{ token: TOKEN_B as Address, amount: 1_000_000n }] }), 1n)), 'ccip_token');
  assert.equal(ruleOf(() => check(encodeCcipSend(BigInt(ARB), { ...good, tokenAmounts: [] }), 1n)), 'ccip_token_amounts');
  assert.equal(ruleOf(() => check(encodeCcipSend(BigInt(ARB), { ...good, feeToken: TOKEN_B as Address }), 0n)), 'ccip_fee_token');
  assert.equal(ruleOf(() => check(encodeCcipSend(BigInt(ARB), { ...good, extraArgs: '0x' }), 1n)), 'ccip_extra_args');
  assert.equal(ruleOf(() => check(`${encodeCcipSend(BigInt(ARB), good)}00`, 1n)), 'ccip_calldata');
  assert.equal(ruleOf(() => check(encodeCcipSend(BigInt(ARB), good), 1n, ROUTER_B)), 'to');
  assert.equal(ruleOf(() => check('0xa9059cbb', 1n)), 'call');
});
