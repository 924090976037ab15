import assert from 'node:assert/strict';
import { test } from 'node:test';
import { encodeFunctionData, zeroAddress, type Address, type Hex } from 'viem';
import { stringify } from 'yaml';
import { checkBurnCallerAlignment, decodeMessage, encodeDepositForBurn, messageTransmitterAbi } from '../src/executors/cctp/index.ts';
import { parseConfigFile, type ConfigFile } from '../src/config-file.ts';
import { chainFromConfig, EvmChains } from '../src/executors/evm/chains.ts';
import { deriveExpectedEffect } from '../src/executors/evm/expected-effect.ts';
import { checkEvmTransaction } from '../src/executors/signers/evm-policy.ts';

/**
 * The CCTP lane's pure parts: its configuration block, the expected effects a signer compares the
 * burn and the mint with (a tampered burn is refused), the v2 message decoder and the burn's
 * caller alignment against the plan.
 */

const MESSENGER_A = '0x1111111111111111111111111111111111111111';
const TRANSMITTER_A = '0x2222222222222222222222222222222222222222';
const MESSENGER_B = '0x3333333333333333333333333333333333333333';
const TRANSMITTER_B = '0x4444444444444444444444444444444444444444';
const USDC_A = '0x5555555555555555555555555555555555555555';
const RECIPIENT = '0x6666666666666666666666666666666666666666';
const OTHER = '0x7777777777777777777777777777777777777777';
const HOT = '0x8888888888888888888888888888888888888888';

function config(extra: Record<string, unknown> = {}): ConfigFile {
  const r = parseConfigFile(
    stringify({
      evm: {
        chains: [
          { chain_id: 1, rpc_url: 'http://127.0.0.1:1', max_fee_per_gas_cap_wei: '100000000000', cctp: { domain: 0, token_messenger: MESSENGER_A, message_transmitter: TRANSMITTER_A } },
          { chain_id: 8453, rpc_url: 'http://127.0.0.1:2', max_fee_per_gas_cap_wei: '100000000000', cctp: { domain: 6, token_messenger: MESSENGER_B, message_transmitter: TRANSMITTER_B } },
        ],
        signers: [{ key: 'hot', kind: 'local_key', private_key_env: 'HOT', chains: [1, 8453] }],
        tokens: [{ chain_id: 1, symbol: 'USDC', address: USDC_A, decimals: 6 }],
      },
      cctp: { attestation_url: 'http://127.0.0.1:3' },
      ...extra,
    }),
  );
  assert.ok(r.ok, r.ok ? '' : r.reason);
  return r.file;
}

const plan = (burnConfig: Record<string, unknown> = {}, mintSigner = 'hot') => ({
  nodes: [
    {
      node_key: 'burn',
      executor_binding: 'exec.cctp.burn',
      signer_binding: { signer_key: 'hot', chain_id: 1 },
      config: { chain_id: 1, destination_chain_id: 8453, token: 'USDC', ...burnConfig },
      successors: ['attestation'],
    },
    { node_key: 'attestation', executor_binding: 'exec.observe.cctp_attestation', signer_binding: null, config: {}, successors: ['mint'] },
    { node_key: 'mint', executor_binding: 'exec.cctp.mint', signer_binding: { signer_key: mintSigner, chain_id: 8453 }, config: { chain_id: 8453 }, successors: [] },
  ],
});
const intent = { asset: 'USDC', amount: '12.5', destination: { address: RECIPIENT } };

test('config: a chain cctp entry and the attestation service are read; a bad one names the entry', () => {
  const file = config();
  assert.equal(file.evm.chains[1]!.cctp?.domain, 6);
  assert.equal(file.cctp?.poll_seconds, 5);
  const dup = parseConfigFile(
    stringify({
      evm: {
        chains: [
          { chain_id: 1, rpc_url: 'http://127.0.0.1:1', max_fee_per_gas_cap_wei: '100000000000', cctp: { domain: 0, token_messenger: MESSENGER_A, message_transmitter: TRANSMITTER_A } },
          { chain_id: 2, rpc_url: 'http://127.0.0.1:2', cctp: { domain: 0, token_messenger: MESSENGER_B, message_transmitter: TRANSMITTER_B } },
        ],
      },
    }),
  );
  assert.equal(dup.ok, false);
  assert.match((dup as { reason: string }).reason, /evm\.chains\[1\]\.cctp\.domain: CCTP domain 0 is listed twice/);
  const bad = parseConfigFile(stringify({ evm: { chains: [{ chain_id: 1, rpc_url: 'http://127.0.0.1:1', max_fee_per_gas_cap_wei: '100000000000', cctp: { domain: 0, token_messenger: 'nope', message_transmitter: TRANSMITTER_A } }] } }));
  assert.match((bad as { reason: string }).reason, /^evm\.chains\[0\]\.cctp\.token_messenger:/);
  const url = parseConfigFile(stringify({ cctp: { attestation_url: 'not a url' } }));
  assert.match((url as { reason: string }).reason, /^cctp\.attestation_url:/);
});

test('the burn is signed only with the calldata the approved plan fixes; a changed recipient or amount is refused', () => {
  const file = config();
  const derived = deriveExpectedEffect({ plan: plan({ max_fee: '0.01' }), nodeKey: 'burn', intent, evm: file.evm });
  assert.ok(derived.ok, derived.ok ? '' : derived.reason);
  const effect = derived.effect;
  assert.equal(effect.to, MESSENGER_A);
  assert.equal(effect.call?.selector, '0x8e0250ee');
  const args = { amount: 12_500_000n, destinationDomain: 6, mintRecipient: RECIPIENT as Address, burnToken: USDC_A as Address, destinationCaller: zeroAddress, maxFee: 10_000n, minFinalityThreshold: 2000 };
  const tx = (data: Hex, to = MESSENGER_A) => ({ type: 'eip1559' as const, chainId: 1, nonce: 0, to: to as Address, value: 0n, data, gas: 100_000n, maxFeePerGas: 1n, maxPriorityFeePerGas: 1n });
  const scope = { signerKey: 'hot' };
  checkEvmTransaction(tx(encodeDepositForBurn(args)), effect, scope);
  for (const [what, data] of [
    ['recipient', encodeDepositForBurn({ ...args, mintRecipient: OTHER as Address })],
    ['amount', encodeDepositForBurn({ ...args, amount: 13_000_000n })],
    ['destination domain', encodeDepositForBurn({ ...args, destinationDomain: 3 })],
    ['max fee', encodeDepositForBurn({ ...args, maxFee: 12_000_000n })],
  ] as const) {
    assert.throws(() => checkEvmTransaction(tx(data), effect, scope), (e: { code: string; details: { rule: string } }) => e.code === 'SIGNER_POLICY_VIOLATION' && e.details.rule === 'call_data', what);
  }
  assert.throws(() => checkEvmTransaction(tx(encodeDepositForBurn(args), OTHER), effect, scope), /contract/);
  // A value the approval did not fix cannot bind a burn.
  const ref = deriveExpectedEffect({ plan: plan({ destination_caller: '$ref:x.caller' }), nodeKey: 'burn', intent, evm: file.evm });
  assert.equal(ref.ok, false);
});

test('the mint is signed only as receiveMessage on the destination transmitter', () => {
  const file = config();
  const derived = deriveExpectedEffect({ plan: plan(), nodeKey: 'mint', intent, evm: file.evm });
  assert.ok(derived.ok);
  assert.equal(derived.effect.to, TRANSMITTER_B);
  assert.equal(derived.effect.call?.selector, '0x57ecfd28');
  const data = encodeFunctionData({ abi: messageTransmitterAbi, functionName: 'receiveMessage', args: ['0x01', '0x02'] });
  const tx = { type: 'eip1559' as const, chainId: 8453, nonce: 0, to: TRANSMITTER_B as Address, value: 0n, data, gas: 100_000n, maxFeePerGas: 1n, maxPriorityFeePerGas: 1n };
  checkEvmTransaction(tx, derived.effect, { signerKey: 'hot' });
  assert.throws(() => checkEvmTransaction({ ...tx, value: 1n }, derived.effect, { signerKey: 'hot' }), /native value/);
  assert.throws(() => checkEvmTransaction({ ...tx, to: TRANSMITTER_A as Address }, derived.effect, { signerKey: 'hot' }), /contract/);
});

test('decodeMessage reads the v2 header and burn body; a short message is refused', () => {
  const header = ['00000001', '00000000', '00000006', 'ab'.repeat(32), '00'.repeat(12) + MESSENGER_A.slice(2), '00'.repeat(12) + MESSENGER_B.slice(2), '00'.repeat(32), '000007d0', '000007d0'].join('');
  const body = ['00000001', '00'.repeat(12) + USDC_A.slice(2), '00'.repeat(12) + RECIPIENT.slice(2), (12_500_000).toString(16).padStart(64, '0'), '00'.repeat(12) + HOT.slice(2), '00'.repeat(32), '00'.repeat(32), '00'.repeat(32)].join('');
  const m = decodeMessage(`0x${header}${body}`);
  assert.ok(m);
  assert.equal(m.sourceDomain, 0);
  assert.equal(m.destinationDomain, 6);
  assert.equal(m.nonce, `0x${'ab'.repeat(32)}`);
  assert.equal(m.destinationCaller, zeroAddress);
  assert.equal(m.finalityThresholdExecuted, 2000);
  assert.equal(m.burn?.mintRecipient, RECIPIENT);
  assert.equal(m.burn?.amount, 12_500_000n);
  assert.equal(decodeMessage(`0x${header.slice(0, 200)}`), null);
  assert.equal(decodeMessage('not hex'), null);
});

test('caller alignment: destination_caller must be the mint signer; the mint must run on the burn destination domain', () => {
  const file = config();
  const chains = new EvmChains(file.evm.chains.map(chainFromConfig));
  const wallets = new Map([['hot', { signerKey: 'hot', address: HOT as Address, chains: [1, 8453] }], ['other', { signerKey: 'other', address: OTHER as Address, chains: [8453] }]]);
  const check = (p: unknown, destinationDomain = 6) => checkBurnCallerAlignment({ plan: p, nodeKey: 'burn', destinationDomain, wallets, chains });
  assert.equal(check(plan()), null, 'no destination_caller: anyone may receive');
  assert.equal(check(plan({ destination_caller: HOT })), null, 'the mint signer itself');
  assert.equal(check(plan({ destination_caller: HOT }, 'other'))?.error_code, 'CCTP_BURN_CALLER_MISALIGNED');
  assert.equal(check(plan({ destination_caller: '$ref:x.y' }))?.error_code, 'CCTP_BURN_CALLER_MISALIGNED');
  assert.equal(check(plan(), 3)?.error_code, 'CCTP_DESTINATION_DOMAIN_MISMATCH');
});
