import { isHex, type Hex } from 'viem';
import { privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { FatalMovementError } from '../errors.ts';
import type { Signer, SignRequest, SignResult } from '../protocol.ts';
import type { ChainHeadReader, EvmSignerScope, ReplacementLimits } from './evm-policy.ts';
import { evmSignerScope, signEvmRequest } from './evm-signing.ts';
import type { TokenNonceReader } from './typed-data-policy.ts';

export interface LocalPrivateKeySignerOptions {
  signerKey: string;
  /** 32-byte secp256k1 key, 0x-prefixed hex. Development and tests only: it lives in process memory. */
  privateKey: string;
  /** Chain ids it may sign for (evm.signers[].chains); unset: any chain the expected effect names. */
  chains?: readonly number[];
  /** Executor keys it serves (evm.signers[].executors); unset: every executor. */
  executors?: readonly string[];
  /** Replacement bounds (FERRY_EVM_MAX_REPLACEMENTS...); unset: the defaults. */
  replacements?: ReplacementLimits;
  /** Its own fee caps by chain id (see EvmSignerScope.feeCaps). */
  feeCaps?: ReadonlyMap<number, bigint>;
  /** Typed data it signs, primary types by executor key (evm.signers[].typed_data); unset: none. */
  typedData?: ReadonlyMap<string, ReadonlySet<string>>;
  /** Reads a permit token's nonces(owner) (see EvmSignerScope.tokenNonces). */
  tokenNonces?: TokenNonceReader;
  /** Reads a chain's head (see EvmSignerScope.chainHeads). */
  chainHeads?: ChainHeadReader;
  /** The clock for typed data deadlines (tests). */
  now?: () => number;
}

/**
 * An EVM signer holding its key in memory (viem account). Signs `evm_raw_tx` payloads (a
 * serialized unsigned transaction, hex) into the signed serialized transaction (`evm_signed_tx`),
 * ready to broadcast, and only when the transaction does what the request's expected effect says
 * (see evm-policy.ts); and typed data (`eip712`) its configuration allows into a 65-byte
 * `eip712_signature`, only as the approved plan says (typed-data-policy.ts).
 */
export class LocalPrivateKeySignerEvm implements Signer {
  readonly signerKey: string;
  /** The key's address, lowercase. */
  readonly address: Hex;
  readonly #account: PrivateKeyAccount;
  readonly #scope: EvmSignerScope;

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
    this.#scope = evmSignerScope(opts);
  }

  async getAddress(): Promise<Hex> {
    return this.address;
  }

  async sign(req: SignRequest): Promise<SignResult> {
    return signEvmRequest(
      req,
      this.#scope,
      { getAddress: async () => this.address, signTransaction: (tx) => this.#account.signTransaction(tx), signDigest: (hash) => this.#account.sign({ hash }) },
      (address) => `local_evm:${address}`,
    );
  }

  async health(): Promise<Record<string, unknown>> {
    return { ok: true, signer_key: this.signerKey, signer_address: this.address, mode: 'local_private_key' };
  }
}
