import { isHex, parseTransaction, type Hex, type TransactionSerializable } from 'viem';
import { privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { z } from 'zod';
import { FatalMovementError } from '../errors.ts';
import type { Signer, SignRequest, SignResult } from '../protocol.ts';
import { checkSignRequest } from './integrity.ts';

export interface LocalPrivateKeySignerOptions {
  signerKey: string;
  /** 32-byte secp256k1 key, 0x-prefixed hex. Development and tests only: it lives in process memory. */
  privateKey: string;
}

const TypedDataSchema = z.object({
  domain: z.record(z.string(), z.unknown()),
  types: z.record(z.string(), z.array(z.object({ name: z.string(), type: z.string() }))),
  primaryType: z.string().min(1),
  message: z.record(z.string(), z.unknown()),
});

/**
 * An EVM signer holding its key in memory (viem account). Signs
 * - `evm_raw_tx`: payload is a serialized unsigned transaction (hex); the result is the signed
 *   serialized transaction (`evm_signed_tx`), ready to broadcast;
 * - `eip712`: payload is typed data as JSON `{domain, types, primaryType, message}`; the result is
 *   the 65-byte signature (`eip712`).
 * It refuses anything whose payload is not exactly what the signing intent allows.
 */
export class LocalPrivateKeySignerEvm implements Signer {
  readonly signerKey: string;
  /** The key's address, lowercase. */
  readonly address: Hex;
  readonly #account: PrivateKeyAccount;

  constructor(opts: LocalPrivateKeySignerOptions) {
    this.signerKey = opts.signerKey;
    if (!isHex(opts.privateKey, { strict: true }) || opts.privateKey.length !== 66) {
      // Never echo the key material, not even a malformed one.
      throw new FatalMovementError('SIGNER_KEY_INVALID', `signer ${opts.signerKey}: private key must be 32 bytes of 0x-prefixed hex`);
    }
    try {
      this.#account = privateKeyToAccount(opts.privateKey);
    } catch {
      throw new FatalMovementError('SIGNER_KEY_INVALID', `signer ${opts.signerKey}: private key is not a valid secp256k1 key`);
    }
    this.address = this.#account.address.toLowerCase() as Hex;
  }

  async sign(req: SignRequest): Promise<SignResult> {
    const r = checkSignRequest(req);
    const signer_ref = `local_evm:${this.address}`;
    switch (r.payload_format) {
      case 'evm_raw_tx':
        return { signature: await this.#signTransaction(r.payload), signature_format: 'evm_signed_tx', signer_ref };
      case 'eip712':
        return { signature: await this.#signTypedData(r.payload), signature_format: 'eip712', signer_ref };
      default:
        throw new FatalMovementError('SIGNER_PAYLOAD_FORMAT_UNSUPPORTED', `signer ${this.signerKey} cannot sign payload_format ${r.payload_format}`, {
          payload_format: r.payload_format,
        });
    }
  }

  async health(): Promise<Record<string, unknown>> {
    return { ok: true, signer_key: this.signerKey, signer_address: this.address, mode: 'local_private_key' };
  }

  async #signTransaction(payload: string): Promise<Hex> {
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
    return this.#account.signTransaction(tx);
  }

  async #signTypedData(payload: string): Promise<Hex> {
    let json: unknown;
    try {
      json = JSON.parse(payload);
    } catch {
      throw invalidPayload('eip712 payload is not JSON');
    }
    const parsed = TypedDataSchema.safeParse(json);
    if (!parsed.success) throw invalidPayload('eip712 payload must be {domain, types, primaryType, message}');
    try {
      return await this.#account.signTypedData(parsed.data as Parameters<PrivateKeyAccount['signTypedData']>[0]);
    } catch (err) {
      throw invalidPayload(`eip712 payload cannot be signed: ${(err as Error).message.split('\n')[0]}`);
    }
  }
}

function invalidPayload(message: string): FatalMovementError {
  return new FatalMovementError('SIGNER_PAYLOAD_INVALID', message);
}
