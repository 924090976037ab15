import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseTransaction, recoverTransactionAddress, serializeTransaction, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { FatalMovementError } from '../src/executors/errors.ts';
import { payloadHash } from '../src/executors/payload-hash.ts';
import type { SignRequest } from '../src/executors/protocol.ts';
import { LocalPrivateKeySignerEvm } from '../src/executors/signers/local-private-key-evm.ts';
import { NoopSigner } from '../src/executors/signers/noop.ts';

// The first well-known development key (anvil/hardhat account 0): a fixed vector for derivation.
const DEV_KEY = '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80';
const DEV_ADDRESS = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266';

const to = '0x1111111111111111111111111111111111111111';
const unsignedTx = serializeTransaction({
  type: 'eip1559',
  chainId: 8453,
  nonce: 7,
  to,
  value: 1_000_000n,
  gas: 60_000n,
  maxFeePerGas: 2_000_000_000n,
  maxPriorityFeePerGas: 1_000_000n,
});
/** What the approved plan lets unsignedTx do. */
const expected_effect = { chain_id: 8453, asset: 'native' as const, to, amount_base_units: '1000000', max_fee_per_gas_cap_wei: '500000000000' };

const typedData = {
  domain: { name: 'Ferry Test', version: '1', chainId: 1, verifyingContract: '0x2222222222222222222222222222222222222222' },
  types: {
    Transfer: [
      { name: 'to', type: 'address' },
      { name: 'amount', type: 'uint256' },
      { name: 'memo', type: 'string' },
    ],
  },
  primaryType: 'Transfer',
  message: { to, amount: '1000000', memo: 'invoice 42' },
} as const;

function request(payload_format: string, payload: string, hashes: { declared?: string; allowed?: string } = {}): SignRequest {
  const declared = hashes.declared ?? payloadHash(payload);
  return {
    protocol_version: '1.0',
    request_id: 'req-1',
    request_node_id: 'node-1',
    signing_intent: {
      action: 'exec.evm.erc20_transfer',
      asset: 'USDC',
      amount: '1',
      destination: to,
      max_fee_usd: null,
      chain_family: 'evm',
      allowed_payload_hash: hashes.allowed ?? declared,
    },
    payload_format,
    payload,
    payload_hash: declared,
    metadata: {},
    expected_effect,
  };
}

const isMismatch = (err: unknown) => err instanceof FatalMovementError && err.code === 'SIGNER_PAYLOAD_HASH_MISMATCH';

describe('LocalPrivateKeySignerEvm', () => {
  test('derives its address from the key, lowercase, and reports it in health', async () => {
    const signer = new LocalPrivateKeySignerEvm({ signerKey: 'dev', privateKey: DEV_KEY });
    assert.equal(signer.address, DEV_ADDRESS);
    assert.deepEqual(await signer.health(), { ok: true, signer_key: 'dev', signer_address: DEV_ADDRESS, mode: 'local_private_key' });
  });

  test('signs an unsigned EIP-1559 transaction; the signature recovers to its address', async () => {
    const key = generatePrivateKey();
    const signer = new LocalPrivateKeySignerEvm({ signerKey: 'k', privateKey: key });
    const result = await signer.sign(request('evm_raw_tx', unsignedTx));
    assert.equal(result.signature_format, 'evm_signed_tx');
    assert.equal(result.signer_ref, `local_evm:${signer.address}`);
    const recovered = await recoverTransactionAddress({ serializedTransaction: result.signature as Hex as never });
    assert.equal(recovered.toLowerCase(), privateKeyToAccount(key).address.toLowerCase());
    // The signed transaction is the prepared one, not another.
    const signed = parseTransaction(result.signature as Hex);
    assert.equal(signed.chainId, 8453);
    assert.equal(signed.nonce, 7);
    assert.equal(signed.to, to);
    assert.equal(signed.value, 1_000_000n);
    assert.equal(signed.data, undefined);
  });

  test('refuses EIP-712 typed data when its configuration allows none (default deny)', async () => {
    const signer = new LocalPrivateKeySignerEvm({ signerKey: 'k', privateKey: generatePrivateKey() });
    await assert.rejects(
      signer.sign(request('eip712', JSON.stringify(typedData))),
      (err: unknown) => err instanceof FatalMovementError && err.code === 'SIGNER_POLICY_VIOLATION' && err.details.rule === 'typed_data_not_allowed',
    );
  });

  test('refuses when the intent allows a different hash than the request declares', async () => {
    const signer = new LocalPrivateKeySignerEvm({ signerKey: 'k', privateKey: DEV_KEY });
    await assert.rejects(signer.sign(request('evm_raw_tx', unsignedTx, { allowed: payloadHash('something else') })), isMismatch);
  });

  test('refuses when the payload does not hash to the declared (and allowed) hash', async () => {
    const signer = new LocalPrivateKeySignerEvm({ signerKey: 'k', privateKey: DEV_KEY });
    const tampered = serializeTransaction({ ...parseTransaction(unsignedTx), to: '0x3333333333333333333333333333333333333333' } as never);
    const req = request('evm_raw_tx', tampered, { declared: payloadHash(unsignedTx) });
    assert.equal(req.signing_intent.allowed_payload_hash, req.payload_hash);
    await assert.rejects(signer.sign(req), isMismatch);
    const typed = request('eip712', JSON.stringify({ ...typedData, message: { ...typedData.message, to: '0x3333333333333333333333333333333333333333' } }), {
      declared: payloadHash(JSON.stringify(typedData)),
    });
    await assert.rejects(signer.sign(typed), isMismatch);
  });

  test('refuses payloads it cannot sign safely', async () => {
    const signer = new LocalPrivateKeySignerEvm({ signerKey: 'k', privateKey: DEV_KEY });
    const code = (c: string) => (err: unknown) => err instanceof FatalMovementError && err.code === c;
    await assert.rejects(signer.sign(request('solana_tx', 'abc')), code('SIGNER_PAYLOAD_FORMAT_UNSUPPORTED'));
    await assert.rejects(signer.sign(request('evm_raw_tx', 'not hex')), code('SIGNER_PAYLOAD_INVALID'));
    await assert.rejects(signer.sign(request('evm_raw_tx', '0x1234')), code('SIGNER_PAYLOAD_INVALID'));
    const alreadySigned = (await signer.sign(request('evm_raw_tx', unsignedTx))).signature;
    await assert.rejects(signer.sign(request('evm_raw_tx', alreadySigned)), code('SIGNER_PAYLOAD_INVALID'));
    const legacyNoChain = serializeTransaction({ type: 'legacy', nonce: 1, to, value: 1n, gas: 21_000n, gasPrice: 1n });
    await assert.rejects(signer.sign(request('evm_raw_tx', legacyNoChain)), code('SIGNER_PAYLOAD_INVALID'));
  });

  test('a malformed key is refused without echoing it', () => {
    const bad = '0x' + 'zz'.repeat(32);
    assert.throws(
      () => new LocalPrivateKeySignerEvm({ signerKey: 'k', privateKey: bad }),
      (err: unknown) => err instanceof FatalMovementError && err.code === 'SIGNER_KEY_INVALID' && !err.message.includes('zz'),
    );
    assert.throws(() => new LocalPrivateKeySignerEvm({ signerKey: 'k', privateKey: '0x' + '00'.repeat(32) }), FatalMovementError);
  });
});

describe('NoopSigner', () => {
  test('returns an empty signature, and still refuses a tampered request', async () => {
    const signer = new NoopSigner('dry');
    assert.deepEqual(await signer.sign(request('json', '{"a":1}')), { signature: '', signature_format: 'noop', signer_ref: 'noop:dry' });
    await assert.rejects(signer.sign(request('json', '{"a":2}', { declared: payloadHash('{"a":1}') })), isMismatch);
    assert.deepEqual(await signer.health(), { ok: true, signer_key: 'dry', mode: 'noop' });
  });
});
