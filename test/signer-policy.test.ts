import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { encodeFunctionData, erc20Abi, parseAbi, parseTransaction, serializeTransaction, toFunctionSelector, type Hex, type TransactionSerializable } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { ConfigFileSchema } from '../src/config-file.ts';
import { FatalMovementError } from '../src/executors/errors.ts';
import { deriveExpectedEffect } from '../src/executors/evm/expected-effect.ts';
import { payloadHash } from '../src/executors/payload-hash.ts';
import { nextVersion } from '../src/executors/evm/fee-bump.ts';
import { decodeSignedTx } from '../src/executors/evm/signed-tx.ts';
import type { ExecutionContext, ExpectedEffect, PreparedAction, SignRequest } from '../src/executors/protocol.ts';
import { buildSignRequest } from '../src/executors/sign-request.ts';
import { checkEvmTransaction, checkNonceFill, decodeEffect, EVM_NONCE_FILL_ACTION } from '../src/executors/signers/evm-policy.ts';
import { LocalPrivateKeySignerEvm } from '../src/executors/signers/local-private-key-evm.ts';
import { RemoteSignerProxy } from '../src/executors/signers/remote-proxy.ts';

/**
 * The approval-bound signing policy, piece by piece: the decoder (what a transaction does, from its
 * bytes), the comparison with the expected effect (each field that may differ), the derivation of
 * the expected effect from an approved plan, and a signer's executor allowlist.
 */

const TOKEN = '0x5fbdb2315678afecb367f032d93f642f64180aa3';
const ALICE = '0x1111111111111111111111111111111111111111';
const MALLORY = '0x3333333333333333333333333333333333333333';
const SPENDER = '0x4444444444444444444444444444444444444444';
const scope = { signerKey: 'hot' };

const base = { type: 'eip1559', chainId: 8453, nonce: 3, gas: 90_000n, maxFeePerGas: 2_000_000_000n, maxPriorityFeePerGas: 1_000_000n } as const;
const native = (to: string, value: bigint, extra: Partial<TransactionSerializable> = {}): TransactionSerializable =>
  ({ ...base, to: to as Hex, value, ...extra }) as TransactionSerializable;
const transfer = (to: string, amount: bigint, extra: Partial<TransactionSerializable> = {}): TransactionSerializable =>
  ({ ...base, to: TOKEN, value: 0n, data: encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [to as Hex, amount] }), ...extra }) as TransactionSerializable;
const approve = (spender: string, amount: bigint): TransactionSerializable =>
  ({ ...base, to: TOKEN, value: 0n, data: encodeFunctionData({ abi: erc20Abi, functionName: 'approve', args: [spender as Hex, amount] }) }) as TransactionSerializable;

// Every expected effect carries its chain's fee cap (without one the signer refuses: fee_cap_missing).
const CAP = '50000000000';
const nativeEffect: ExpectedEffect = { chain_id: 8453, asset: 'native', to: ALICE, amount_base_units: '1000', max_fee_per_gas_cap_wei: CAP };
const tokenEffect: ExpectedEffect = { chain_id: 8453, asset: TOKEN, to: ALICE, amount_base_units: '100250000', token_method: 'transfer', max_fee_per_gas_cap_wei: CAP };

function refusedWith(rule: string) {
  return (err: unknown) => {
    assert.ok(err instanceof FatalMovementError, `expected a FatalMovementError, got ${String(err)}`);
    assert.equal(err.code, 'SIGNER_POLICY_VIOLATION');
    assert.equal(err.details.rule, rule, err.message);
    return true;
  };
}

describe('decodeEffect', () => {
  test('reads a native transfer, an ERC-20 transfer and approve, and anything else as a call', () => {
    assert.deepEqual(decodeEffect(native(ALICE, 5n)), { kind: 'native', chain_id: 8453, to: ALICE, amount: 5n });
    assert.deepEqual(decodeEffect(transfer(ALICE, 7n)), { kind: 'token', method: 'transfer', chain_id: 8453, token: TOKEN, to: ALICE, amount: 7n, value: 0n });
    assert.deepEqual(decodeEffect(approve(SPENDER, 9n)), { kind: 'token', method: 'approve', chain_id: 8453, token: TOKEN, to: SPENDER, amount: 9n, value: 0n });
    const other = encodeFunctionData({ abi: parseAbi(['function deposit(uint256 amount, address to)']), args: [1n, ALICE] });
    assert.deepEqual(decodeEffect(native(TOKEN, 0n, { data: other })), { kind: 'call', chain_id: 8453, contract: TOKEN, selector: other.slice(0, 10), value: 0n });
    // transfer calldata with a byte appended is not the transfer it starts like.
    const padded = (transfer(ALICE, 7n).data + '00') as Hex;
    assert.equal(decodeEffect(native(TOKEN, 0n, { data: padded })).kind, 'call');
    assert.equal(decodeEffect({ ...base, value: 0n, data: '0x6080' } as TransactionSerializable).kind, 'deploy');
  });
});

describe('checkEvmTransaction', () => {
  test('accepts exactly the expected native transfer and ERC-20 transfer', () => {
    // checkEvmTransaction returns nothing and throws its refusal: accepted is not throwing.
    assert.doesNotThrow(() => checkEvmTransaction(native(ALICE, 1000n), nativeEffect, scope));
    assert.doesNotThrow(() => checkEvmTransaction(native(ALICE.toUpperCase().replace('0X', '0x'), 1000n), nativeEffect, scope), 'the address in any case');
    assert.doesNotThrow(() => checkEvmTransaction(transfer(ALICE, 100_250_000n), tokenEffect, scope));
  });

  test('default deny: without an expected effect nothing is signed, and the reason is named', () => {
    assert.throws(() => checkEvmTransaction(native(ALICE, 1000n), null, scope), refusedWith('no_expected_effect'));
    assert.throws(() => checkEvmTransaction(native(ALICE, 1000n), undefined, scope, 'decimals unknown'), (err: unknown) => {
      refusedWith('no_expected_effect')(err);
      return (err as Error).message.includes('decimals unknown');
    });
  });

  test('native: another recipient, another amount, calldata, or a token transfer are refused', () => {
    assert.throws(() => checkEvmTransaction(native(MALLORY, 1000n), nativeEffect, scope), refusedWith('to'));
    assert.throws(() => checkEvmTransaction(native(ALICE, 1001n), nativeEffect, scope), refusedWith('amount'));
    assert.throws(() => checkEvmTransaction(native(ALICE, 1000n, { data: '0x01' }), nativeEffect, scope), refusedWith('asset'));
    assert.throws(() => checkEvmTransaction(transfer(ALICE, 1000n), nativeEffect, scope), refusedWith('asset'));
  });

  test('ERC-20: another token, recipient or amount, an approve, native value or a native transfer are refused', () => {
    const otherToken = { ...transfer(ALICE, 100_250_000n), to: MALLORY } as TransactionSerializable;
    assert.throws(() => checkEvmTransaction(otherToken, tokenEffect, scope), refusedWith('asset'));
    assert.throws(() => checkEvmTransaction(transfer(MALLORY, 100_250_000n), tokenEffect, scope), refusedWith('to'));
    assert.throws(() => checkEvmTransaction(transfer(ALICE, 1_000_250_000n), tokenEffect, scope), refusedWith('amount'));
    assert.throws(() => checkEvmTransaction(approve(ALICE, 100_250_000n), tokenEffect, scope), refusedWith('method'));
    assert.throws(() => checkEvmTransaction(transfer(ALICE, 100_250_000n, { value: 1n }), tokenEffect, scope), refusedWith('value'));
    assert.throws(() => checkEvmTransaction(native(ALICE, 100_250_000n), tokenEffect, scope), refusedWith('asset'));
  });

  test('ERC-20 approve: signed only when the plan expects an approve of that spender and amount', () => {
    const approveEffect: ExpectedEffect = { chain_id: 8453, asset: TOKEN, to: SPENDER, amount_base_units: '9', token_method: 'approve', max_fee_per_gas_cap_wei: CAP };
    checkEvmTransaction(approve(SPENDER, 9n), approveEffect, scope);
    assert.throws(() => checkEvmTransaction(approve(MALLORY, 9n), approveEffect, scope), refusedWith('to'));
    assert.throws(() => checkEvmTransaction(approve(SPENDER, 2n ** 256n - 1n), approveEffect, scope), refusedWith('amount'));
    assert.throws(() => checkEvmTransaction(transfer(SPENDER, 9n), approveEffect, scope), refusedWith('method'));
  });

  test('unknown calldata: refused unless the plan names that contract and method', () => {
    const abi = parseAbi(['function deposit(uint256 amount, address to)', 'function withdraw(uint256 amount)']);
    const deposit = native(TOKEN, 0n, { data: encodeFunctionData({ abi, functionName: 'deposit', args: [5n, ALICE] }) });
    assert.throws(() => checkEvmTransaction(deposit, tokenEffect, scope), refusedWith('asset'));
    assert.throws(() => checkEvmTransaction(deposit, nativeEffect, scope), refusedWith('asset'));
    const callEffect: ExpectedEffect = {
      chain_id: 8453,
      asset: 'native',
      to: TOKEN,
      amount_base_units: '0',
      call: { method: 'deposit(uint256,address)', selector: toFunctionSelector('deposit(uint256,address)') },
      max_fee_per_gas_cap_wei: CAP,
    };
    checkEvmTransaction(deposit, callEffect, scope);
    const withdraw = native(TOKEN, 0n, { data: encodeFunctionData({ abi, functionName: 'withdraw', args: [5n] }) });
    assert.throws(() => checkEvmTransaction(withdraw, callEffect, scope), refusedWith('call'));
    assert.throws(() => checkEvmTransaction({ ...deposit, to: MALLORY } as TransactionSerializable, callEffect, scope), refusedWith('to'));
    assert.throws(() => checkEvmTransaction({ ...deposit, value: 1n } as TransactionSerializable, callEffect, scope), refusedWith('amount'));
  });

  test('wrong chain, a chain the signer does not serve, and a fee above the cap are refused', () => {
    assert.throws(() => checkEvmTransaction(native(ALICE, 1000n, { chainId: 1 }), nativeEffect, scope), refusedWith('chain_id'));
    assert.throws(() => checkEvmTransaction(native(ALICE, 1000n), nativeEffect, { signerKey: 'hot', chains: [1, 10] }), refusedWith('chain_not_served'));
    const capped = { ...nativeEffect, max_fee_per_gas_cap_wei: '2000000000' };
    checkEvmTransaction(native(ALICE, 1000n), capped, scope);
    assert.throws(() => checkEvmTransaction(native(ALICE, 1000n, { maxFeePerGas: 2_000_000_001n }), capped, scope), refusedWith('fee_cap'));
    const legacy = { type: 'legacy', chainId: 8453, nonce: 1, to: ALICE, value: 1000n, gas: 21_000n, gasPrice: 3_000_000_000n } as TransactionSerializable;
    assert.throws(() => checkEvmTransaction(legacy, capped, scope), refusedWith('fee_cap'));
  });

  test('an expected effect without a fee cap is refused; the signer\'s own cap lowers the request\'s, never raises it', () => {
    const { max_fee_per_gas_cap_wei: _cap, ...uncapped } = nativeEffect;
    assert.throws(() => checkEvmTransaction(native(ALICE, 1000n), uncapped, scope), refusedWith('fee_cap_missing'));
    const own = { signerKey: 'hot', feeCaps: new Map([[8453, 1_000_000_000n]]) };
    // The request says 50 gwei; the signer's own configuration says 1 gwei for this chain.
    assert.throws(() => checkEvmTransaction(native(ALICE, 1000n), nativeEffect, own), (err: unknown) => {
      refusedWith('fee_cap')(err);
      assert.equal((err as FatalMovementError).details.expected, '1000000000');
      assert.match((err as FatalMovementError).message, /signer's own cap/);
      return true;
    });
    checkEvmTransaction(native(ALICE, 1000n, { maxFeePerGas: 1_000_000_000n }), nativeEffect, own);
    // A higher own cap does not raise the request's.
    const generous = { signerKey: 'hot', feeCaps: new Map([[8453, 10n ** 15n]]) };
    assert.throws(() => checkEvmTransaction(native(ALICE, 1000n, { maxFeePerGas: 50_000_000_001n }), nativeEffect, generous), refusedWith('fee_cap'));
    // Another chain's own cap does not apply.
    checkEvmTransaction(native(ALICE, 1000n), nativeEffect, { signerKey: 'hot', feeCaps: new Map([[1, 1n]]) });
    // The gap filler too.
    assert.throws(() => checkNonceFill(native(ALICE, 0n), { chain_id: 8453, asset: 'native', to: ALICE, amount_base_units: '0' }, scope, ALICE), refusedWith('fee_cap_missing'));
  });

  test('a delegation (EIP-7702) is never signed', () => {
    const tx = { ...native(ALICE, 1000n), type: 'eip7702', authorizationList: [{ address: MALLORY, chainId: 8453, nonce: 0, r: '0x1', s: '0x1', yParity: 0 }] };
    assert.throws(() => checkEvmTransaction(tx as unknown as TransactionSerializable, nativeEffect, scope), refusedWith('tx_type_not_allowed'));
  });
});

describe('deriveExpectedEffect', () => {
  const evm = ConfigFileSchema.parse({
    evm: {
      chains: [{ chain_id: 8453, rpc_url: 'http://127.0.0.1:1', max_fee_per_gas_cap_wei: '50000000000' }, { chain_id: 1, rpc_url: 'http://127.0.0.1:2' }],
      signers: [{ key: 'hot', kind: 'local_key', private_key_env: 'K', chains: [8453] }],
      tokens: [{ chain_id: 8453, symbol: 'USDC', address: '0x5FbDB2315678afecb367f032d93F642f64180aa3', decimals: 6 }, { chain_id: 1, symbol: 'DAI', address: MALLORY }],
    },
  }).evm;
  const planWith = (node: Record<string, unknown>) => ({
    nodes: [{ node_key: 'pay', executor_binding: 'exec.evm.erc20_transfer', signer_binding: { signer_key: 'hot' }, config: {}, ...node }],
  });
  const derive = (node: Record<string, unknown>, intent: Record<string, unknown> = {}) => deriveExpectedEffect({ plan: planWith(node), nodeKey: 'pay', intent, evm });

  test('an ERC-20 transfer: token by symbol, decimals from evm.tokens, amount exact, the chain fee cap', () => {
    const r = derive({ config: { token: 'USDC' } }, { amount: '100.25', destination: { address: ALICE } });
    assert.deepEqual(r, {
      ok: true,
      // The decimals the amount was computed with and the symbol are part of the effect (pinned at creation).
      effect: { chain_id: 8453, asset: TOKEN, to: ALICE, amount_base_units: '100250000', token_method: 'transfer', token_decimals: 6, token_symbol: 'USDC', max_fee_per_gas_cap_wei: '50000000000' },
    });
    const big = derive({ config: { token: TOKEN, to: ALICE, amount: '123456789012345678901234567890.000001' } });
    assert.equal(big.ok && big.effect.amount_base_units, '123456789012345678901234567890000001');
  });

  test('a native transfer: recipient and value from the node config, else the intent', () => {
    const r = derive({ executor_binding: { executor_key: 'exec.evm.native_transfer' }, signer_binding: { signer_key: 'x', chain_id: 1 } }, { amount: '77', destination: ALICE });
    assert.deepEqual(r, { ok: true, effect: { chain_id: 1, asset: 'native', to: ALICE, amount_base_units: '77' } });
  });

  test('a contract call named by the node config', () => {
    const r = derive({ executor_binding: 'exec.cctp.burn', config: { chain_id: 8453, contract_call: { contract: SPENDER, method: 'depositForBurn(uint256,uint32,bytes32,address,bytes32,uint256,uint32)' } } });
    assert.ok(r.ok);
    assert.deepEqual(r.effect.call, { method: 'depositForBurn(uint256,uint32,bytes32,address,bytes32,uint256,uint32)', selector: '0x8e0250ee' });
    assert.equal(r.effect.to, SPENDER);
    assert.equal(r.effect.amount_base_units, '0');
  });

  test('an ERC-20 allowance named by the node config: that spender and amount, as an approve', () => {
    const r = derive({ executor_binding: 'exec.cctp.approve', config: { token_approval: { token: 'USDC', spender: SPENDER, amount: '5' } } });
    assert.deepEqual(r, {
      ok: true,
      effect: { chain_id: 8453, asset: TOKEN, to: SPENDER, amount_base_units: '5000000', token_method: 'approve', token_decimals: 6, token_symbol: 'USDC', max_fee_per_gas_cap_wei: '50000000000' },
    });
    if (r.ok) {
      checkEvmTransaction(approve(SPENDER, 5_000_000n), r.effect, scope);
      assert.throws(() => checkEvmTransaction(approve(SPENDER, 2n ** 256n - 1n), r.effect, scope), refusedWith('amount'));
    }
    // A generic contract_call cannot stand in for it: the spender and amount would go unchecked.
    const generic = derive({ executor_binding: 'exec.cctp.approve', config: { contract_call: { contract: TOKEN, method: 'approve(address,uint256)' } } });
    assert.ok(!generic.ok && /cannot name an ERC-20 transfer or approve/.test(generic.reason));
    // Nor any other call that hands someone else the wallet's tokens, or sends them with a callback.
    for (const method of [
      'increaseAllowance(address,uint256)',
      'permit(address,address,uint256,uint256,uint8,bytes32,bytes32)',
      'permit(address,address,uint256,uint256,bool,uint8,bytes32,bytes32)',
      'transferAndCall(address,uint256,bytes)',
      'approveAndCall(address,uint256,bytes)',
      'setApprovalForAll(address,bool)',
      'authorizeOperator(address)',
      'approve(address,address,uint160,uint48)',
    ]) {
      const r = derive({ executor_binding: 'exec.cctp.approve', config: { contract_call: { contract: TOKEN, method } } });
      assert.ok(!r.ok && r.reason.includes(`cannot name ${method}`), `${method}: ${JSON.stringify(r)}`);
    }
    // An ordinary call still derives (the burn above).
    assert.ok(derive({ executor_binding: 'exec.custom', config: { chain_id: 8453, contract_call: { contract: SPENDER, method: 'deposit(uint256,address)' } } }).ok);
  });

  test('nothing is derived from what only an executor would say; each refusal names its reason', () => {
    const reason = (r: ReturnType<typeof derive>) => (r.ok ? 'derived' : r.reason);
    assert.match(reason(derive({ config: { token: 'USDC', to: '$ref:quote.address', amount: '1' } })), /reference to another node's output/);
    assert.match(reason(derive({ config: { token: MALLORY, chain_id: 1, to: ALICE, amount: '1' } })), /decimals .* neither/);
    assert.match(reason(derive({ config: { token: 'USDC', decimals: 18, to: ALICE, amount: '1' } })), /differs from evm.tokens/);
    assert.match(reason(derive({ config: { token: 'USDC', to: ALICE, amount: '1.0000001' } })), /more than 6 fractional digits/);
    assert.match(reason(derive({ config: { token: 'USDC', to: ALICE, amount: 'lots' } })), /not a decimal number/);
    assert.match(reason(derive({ config: { token: 'USDT', to: ALICE, amount: '1' } })), /not listed in evm.tokens/);
    assert.match(reason(derive({ config: { token: 'USDC', to: 'bob', amount: '1' } })), /not an EVM address/);
    assert.match(reason(derive({ config: { token: 'USDC', chain_id: 1, to: ALICE, amount: '1' }, signer_binding: { signer_key: 'hot', chain_id: 8453 } })), /disagree/);
    assert.match(reason(derive({ executor_binding: 'exec.sim.action' })), /no approval-bound effect/);
    assert.match(reason(derive({ signer_binding: { signer_key: 'unknown' }, config: { token: TOKEN, to: ALICE, amount: '1', decimals: 6 } })), /pins no chain id/);
    assert.match(reason(deriveExpectedEffect({ plan: planWith({}), nodeKey: 'other', intent: {}, evm })), /not in the compiled plan/);
  });
});

describe('signers apply the policy', () => {
  const payload = serializeTransaction(native(ALICE, 1000n) as never);
  const request = (extra: Partial<SignRequest> = {}): SignRequest => ({
    protocol_version: '1.0',
    request_id: 'r',
    request_node_id: 'n',
    signing_intent: { action: 'a', asset: 'ETH', amount: '1000', destination: ALICE, max_fee_usd: null, chain_family: 'evm', allowed_payload_hash: payloadHash(payload) },
    payload_format: 'evm_raw_tx',
    payload,
    payload_hash: payloadHash(payload),
    metadata: {},
    executor_key: 'exec.evm.native_transfer',
    expected_effect: nativeEffect,
    ...extra,
  });

  test('the local key serves only the executors it lists, and only requests that name one', async () => {
    const open = new LocalPrivateKeySignerEvm({ signerKey: 'hot', privateKey: generatePrivateKey() });
    assert.equal((await open.sign(request({ executor_key: undefined }))).signature_format, 'evm_signed_tx');
    const listed = new LocalPrivateKeySignerEvm({ signerKey: 'hot', privateKey: generatePrivateKey(), executors: ['exec.evm.native_transfer'] });
    assert.equal((await listed.sign(request())).signature_format, 'evm_signed_tx');
    await assert.rejects(listed.sign(request({ executor_key: 'exec.evm.hostile' })), refusedWith('executor_not_allowed'));
    await assert.rejects(listed.sign(request({ executor_key: undefined })), refusedWith('executor_not_named'));
    await assert.rejects(listed.sign(request({ expected_effect: null })), refusedWith('no_expected_effect'));
    await assert.rejects(listed.sign(request({ expected_effect: { ...nativeEffect, to: MALLORY } })), refusedWith('to'));
  });

  test('the remote proxy with an EVM policy refuses before anything leaves the process', async () => {
    // The base URL is never reached: every request below is refused first.
    const proxy = new RemoteSignerProxy({ signerKey: 'remote', baseUrl: 'http://127.0.0.1:9', evmPolicy: { executors: ['exec.evm.native_transfer'] } });
    await assert.rejects(proxy.sign(request({ expected_effect: { ...nativeEffect, amount_base_units: '1' } })), refusedWith('amount'));
    await assert.rejects(proxy.sign(request({ executor_key: 'exec.other' })), refusedWith('executor_not_allowed'));
    await assert.rejects(proxy.sign(request({ expected_effect: undefined })), refusedWith('no_expected_effect'));
    await proxy.close();
  });
});

describe('the nonce gap filler and fee-bumped versions', () => {
  const key = generatePrivateKey();
  const self = privateKeyToAccount(key).address.toLowerCase();
  // The signer serves one executor only: a filler is signed all the same, under its own rule.
  const signer = new LocalPrivateKeySignerEvm({ signerKey: 'hot', privateKey: key, chains: [8453], executors: ['exec.evm.erc20_transfer'] });
  const fillEffect: ExpectedEffect = { chain_id: 8453, asset: 'native', to: self, amount_base_units: '0', max_fee_per_gas_cap_wei: CAP };
  const fillRequest = (tx: TransactionSerializable, effect: ExpectedEffect | null = fillEffect, action = EVM_NONCE_FILL_ACTION): SignRequest => {
    const payload = serializeTransaction(tx as never);
    return {
      protocol_version: '1.0',
      request_id: 'evm-nonce-fill:8453:x:3',
      request_node_id: 'n',
      signing_intent: { action, asset: 'native', amount: '0', destination: self, max_fee_usd: null, chain_family: 'evm', allowed_payload_hash: payloadHash(payload) },
      payload_format: 'evm_raw_tx',
      payload,
      payload_hash: payloadHash(payload),
      metadata: {},
      expected_effect: effect,
    };
  };

  test('a zero-value self-transfer with its exact expected effect is signed, naming no executor', async () => {
    const signed = await signer.sign(fillRequest(native(self, 0n, { gas: 21_000n })));
    assert.equal(signed.signature_format, 'evm_signed_tx');
    checkNonceFill(native(self, 0n), { ...fillEffect, max_fee_per_gas_cap_wei: '2000000000' }, scope, self);
  });

  test('anything else under the filler action is refused', async () => {
    await assert.rejects(signer.sign(fillRequest(native(MALLORY, 0n), { ...fillEffect, to: MALLORY })), refusedWith('nonce_fill'));
    await assert.rejects(signer.sign(fillRequest(native(MALLORY, 0n))), refusedWith('to'));
    await assert.rejects(signer.sign(fillRequest(native(self, 1n))), refusedWith('amount'));
    await assert.rejects(signer.sign(fillRequest(native(self, 1n), { ...fillEffect, amount_base_units: '1' })), refusedWith('nonce_fill'));
    await assert.rejects(signer.sign(fillRequest(transfer(self, 0n))), refusedWith('nonce_fill'));
    await assert.rejects(signer.sign(fillRequest(native(self, 0n, { data: '0x12345678' }))), refusedWith('nonce_fill'));
    await assert.rejects(signer.sign(fillRequest(native(self, 0n), { ...fillEffect, token_method: 'transfer' })), refusedWith('nonce_fill'));
    await assert.rejects(signer.sign(fillRequest(native(self, 0n), null)), refusedWith('no_expected_effect'));
    await assert.rejects(signer.sign(fillRequest(native(self, 0n, { chainId: 1 }), { ...fillEffect, chain_id: 1 })), refusedWith('chain_not_served'));
    await assert.rejects(signer.sign(fillRequest(native(self, 0n), { ...fillEffect, max_fee_per_gas_cap_wei: '1' })), refusedWith('fee_cap'));
    // The same zero-value shape outside the filler action: no plan approves moving nothing.
    const open = new LocalPrivateKeySignerEvm({ signerKey: 'hot', privateKey: key });
    await assert.rejects(open.sign({ ...fillRequest(native(self, 0n), fillEffect, 'evm_native_transfer'), executor_key: 'exec.evm.native_transfer' }), refusedWith('amount'));
  });

  test('a fee-bumped version goes through the dispatcher\'s sign request: same recipient and amount accepted, a fee above the cap refused', async () => {
    const evm = ConfigFileSchema.parse({
      evm: { chains: [{ chain_id: 8453, rpc_url: 'http://127.0.0.1:1', max_fee_per_gas_cap_wei: '3000000000' }] },
    }).evm;
    const plan = {
      nodes: [{ node_key: 'pay', executor_binding: { executor_key: 'exec.evm.native_transfer' }, signer_binding: { signer_key: 'hot', chain_id: 8453 }, config: { to: ALICE, value_wei: '1000' } }],
    };
    const ctx = {
      protocol_version: '1.0',
      request_id: 'r',
      request_node_id: 'n',
      node_key: 'pay',
      intent: { asset: 'ETH', amount: '1000' },
      input_params: {},
      resolved_bindings: { executor: { executor_key: 'exec.evm.native_transfer' }, signer: { signer_key: 'hot' } },
    } as unknown as ExecutionContext;
    const hot = new LocalPrivateKeySignerEvm({ signerKey: 'hot', privateKey: key });
    const sign = (tx: TransactionSerializable) => {
      const payload = serializeTransaction(tx as never);
      const prepared: PreparedAction = { prepared_action_id: 'p', action_type: 'evm_native_transfer', payload_format: 'evm_raw_tx', payload, payload_hash: payloadHash(payload), signing_required: true, provider_hints: {}, expires_at: null };
      return hot.sign(buildSignRequest({ ctx, prepared, plan, evm }));
    };
    const v1 = await sign(native(ALICE, 1000n));
    const decoded = await decodeSignedTx(v1.signature);
    assert.ok(decoded.ok);
    const bumped = nextVersion([decoded.tx], { maxFeePerGas: 1n, maxPriorityFeePerGas: 1n }, { afterSeconds: 1, percent: 20, capWei: null });
    assert.equal(bumped?.kind, 'replace');
    const v2 = bumped as Extract<typeof bumped, { kind: 'replace' }>;
    assert.equal(v2.maxFeePerGas, 2_400_000_000n);
    assert.equal((await sign(parseTransaction(v2.payload) as TransactionSerializable)).signature_format, 'evm_signed_tx', 'the replacement is signed');
    // A version past the chain's cap (an executor ignoring it) is refused by the signer.
    const over = nextVersion([decoded.tx], { maxFeePerGas: 4_000_000_000n, maxPriorityFeePerGas: 1n }, { afterSeconds: 1, percent: 20, capWei: null });
    await assert.rejects(sign(parseTransaction((over as { payload: Hex }).payload) as TransactionSerializable), refusedWith('fee_cap'));
    // And a version that changes the recipient, whatever its fees, too.
    await assert.rejects(sign(native(MALLORY, 1000n, { maxFeePerGas: 2_400_000_000n })), refusedWith('to'));
  });
});
