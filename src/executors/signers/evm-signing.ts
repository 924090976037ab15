import { isHex, parseTransaction, verifyTypedData, type Hex, type TransactionSerializable } from 'viem';
import { FatalMovementError } from '../errors.ts';
import type { SignRequest, SignResult } from '../protocol.ts';
import { checkCancel, checkEvmTransaction, checkExecutorAllowed, checkNonceFill, checkReplacement, EVM_NONCE_FILL_ACTION, violation, type EvmSignerScope } from './evm-policy.ts';
import { checkSignRequest } from './integrity.ts';
import { checkTypedDataRequest, TYPED_DATA_SIGNATURE_FORMAT } from './typed-data-policy.ts';

/** What differs between EVM signers: where the key is and how a transaction or a digest gets its signature. */
export interface EvmSigningBackend {
  /** The key's address, lowercase. */
  getAddress(): Promise<Hex>;
  /** Returns the signed serialized transaction. */
  signTransaction(tx: TransactionSerializable): Promise<Hex>;
  /** Signs a 32-byte digest as given (no prefix); returns r || s || v, 65 bytes, v 27 or 28. */
  signDigest(digest: Hex): Promise<Hex>;
}

/**
 * The policy scope of an EVM signer, picked from its options: a signer's constructor passes its
 * whole options object, so a scope field added here reaches every backend at once.
 */
export function evmSignerScope(opts: EvmSignerScope): EvmSignerScope {
  return {
    signerKey: opts.signerKey,
    chains: opts.chains,
    executors: opts.executors,
    replacements: opts.replacements,
    feeCaps: opts.feeCaps,
    typedData: opts.typedData,
    tokenNonces: opts.tokenNonces,
    now: opts.now,
    chainHeads: opts.chainHeads,
  };
}

/**
 * The sign() every EVM signer shares: the tamper check, the executor allowlist, decoding of the
 * payload, the approval-bound policy (for the nonce reaper's gap filler, checkNonceFill instead of
 * the allowlist and the plan's effect; for typed data, typed-data-policy.ts), then the backend's
 * key. Nothing reaches the key before every check passed. A typed data signature is verified
 * against the signer's address (viem's verifyTypedData) before it is returned.
 */
export async function signEvmRequest(
  req: SignRequest,
  scope: EvmSignerScope,
  backend: EvmSigningBackend,
  signerRef: (address: Hex) => string,
): Promise<SignResult> {
  const r = checkSignRequest(req);
  if (r.payload_format !== 'evm_raw_tx' && r.signing_intent.action !== EVM_NONCE_FILL_ACTION) checkExecutorAllowed(r, scope);
  switch (r.payload_format) {
    case 'evm_raw_tx': {
      // The address only for the gap filler's rule: a KMS signer reads it with a call, and a
      // refused request must make none.
      // An OFT send's refund goes back to the sender unless the plan names another address.
      const needsSender = r.signing_intent.action === EVM_NONCE_FILL_ACTION || r.cancels || (r.expected_effect?.oft_send && !r.expected_effect.oft_send.refund_address);
      const sender = needsSender ? await backend.getAddress() : null;
      const tx = checkEvmRawTxRequest(r, scope, sender);
      const signature = await backend.signTransaction(tx);
      return { signature, signature_format: 'evm_signed_tx', signer_ref: signerRef(await backend.getAddress()) };
    }
    case 'eip712':
    case 'eip712_compact': {
      // The address only once the checks that need no key passed: a KMS signer reads it with a call.
      const checked = await checkTypedDataRequest(r, scope, { owner: async () => (await backend.getAddress()).toLowerCase() });
      const address = (await backend.getAddress()).toLowerCase() as Hex;
      const signature = await backend.signDigest(checked.digest);
      if (!(await verifyTypedData({ ...checked.typedData, address, signature }).catch(() => false))) {
        throw new FatalMovementError('SIGNER_SIGNATURE_INVALID', `signer ${scope.signerKey}: the typed data signature does not verify for ${address}`);
      }
      return { signature, signature_format: TYPED_DATA_SIGNATURE_FORMAT, signer_ref: signerRef(address) };
    }
    default:
      throw new FatalMovementError('SIGNER_PAYLOAD_FORMAT_UNSUPPORTED', `signer ${scope.signerKey} cannot sign payload_format ${r.payload_format}`, {
        payload_format: r.payload_format,
      });
  }
}

/**
 * The whole policy for an `evm_raw_tx` request whose integrity checkSignRequest established; returns
 * the transaction to sign. The nonce reaper's gap filler comes from no executor: its own, narrower
 * rule applies, and it is never a replacement. Any other transaction needs the executor allowlist
 * and must do what the expected effect says; a replacement (`replaces` set by the runtime from its
 * own records) must besides be the same payment as the original, which itself must pass the same
 * check. `sender`: the signer's address, null where it is not known (a proxy in front of a remote
 * signer, which checks the filler's sender itself).
 * @throws FatalMovementError SIGNER_POLICY_VIOLATION or SIGNER_PAYLOAD_INVALID
 */
export function checkEvmRawTxRequest(r: SignRequest, scope: EvmSignerScope, sender: string | null): TransactionSerializable {
  const fill = r.signing_intent.action === EVM_NONCE_FILL_ACTION;
  if (!fill) checkExecutorAllowed(r, scope);
  const tx = parseUnsignedTransaction(r.payload);
  if (fill) {
    if (r.replaces || r.cancels) throw violation('nonce_fill', 'a nonce gap filler is never a replacement');
    checkNonceFill(tx, r.expected_effect, scope, sender);
    return tx;
  }
  if (r.cancels) {
    // An operator's cancel: the one zero-value shape, at the original's nonce (checkCancel).
    if (r.replaces) throw violation('cancel_shape', 'a cancel is not a fee bump: replaces and cancels are never both set');
    checkCancel(tx, parseUnsignedTransaction(r.cancels.payload), r.expected_effect, scope, sender, r.expected_effect_unavailable);
    return tx;
  }
  if (r.replaces) {
    // The replacement rules first: their refusal says how the version differs from the original.
    const original = parseUnsignedTransaction(r.replaces.payload);
    checkReplacement(tx, original, r.replaces.replacement_no, scope.replacements);
    checkEvmTransaction(original, r.expected_effect, scope, r.expected_effect_unavailable, sender);
  }
  checkEvmTransaction(tx, r.expected_effect, scope, r.expected_effect_unavailable, sender);
  return tx;
}

/** The payload as an unsigned transaction with a chain id, or SIGNER_PAYLOAD_INVALID. */
export function parseUnsignedTransaction(payload: string): TransactionSerializable {
  if (!isHex(payload, { strict: true })) throw invalidPayload('evm_raw_tx payload is not 0x-prefixed hex');
  let tx: TransactionSerializable & { r?: unknown; s?: unknown };
  try {
    tx = parseTransaction(payload);
  } catch (err) {
    throw invalidPayload(`evm_raw_tx payload is not a serialized transaction: ${(err as Error).message.split('\n')[0]}`);
  }
  if (tx.r !== undefined || tx.s !== undefined) throw invalidPayload('evm_raw_tx payload is already signed');
  // Without a chain id the signature would be valid on every chain (no EIP-155 replay protection).
  if (tx.chainId === undefined) throw invalidPayload('evm_raw_tx payload has no chainId');
  return tx;
}

function invalidPayload(message: string): FatalMovementError {
  return new FatalMovementError('SIGNER_PAYLOAD_INVALID', message);
}
