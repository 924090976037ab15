import { createPublicKey } from 'node:crypto';
import { GetPublicKeyCommand, KMSClient, SignCommand } from '@aws-sdk/client-kms';
import { bytesToHex, hexToBytes, keccak256, recoverAddress, serializeSignature, serializeTransaction, type Hex } from 'viem';
import { publicKeyToAddress } from 'viem/accounts';
import { FatalMovementError, MovementError, TemporaryMovementError } from '../errors.ts';
import type { Signer, SignRequest, SignResult } from '../protocol.ts';
import type { ChainHeadReader, EvmSignerScope, ReplacementLimits } from './evm-policy.ts';
import { evmSignerScope, signEvmRequest } from './evm-signing.ts';
import type { TokenNonceReader } from './typed-data-policy.ts';

/** The order of the secp256k1 group; a signature's s above half of it is flipped (EIP-2 low-s). */
const SECP256K1_N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
const HALF_N = SECP256K1_N / 2n;
/** How long a node waits after KMS throttled it, when KMS said nothing more precise. */
const THROTTLED_RETRY_SECONDS = 5;

export interface AwsKmsCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

export interface AwsKmsEvmSignerOptions {
  signerKey: string;
  /** Key id, ARN or alias of an ECC_SECG_P256K1 SIGN_VERIFY key. */
  keyId: string;
  region: string;
  /** The KMS endpoint, always explicit: the SDK never looks one up. */
  endpoint: string;
  /**
   * Static keys; unset: the SDK's default credential chain (environment, web identity, ECS task
   * role, shared files, instance role), which refreshes session credentials before they expire.
   */
  credentials?: AwsKmsCredentials;
  /** Timeout of one KMS request (connection and answer), in milliseconds. */
  timeoutMs?: number;
  /** Attempts per call, the SDK's retries included (throttling and 5xx are retried with backoff). */
  maxAttempts?: number;
  chains?: readonly number[];
  executors?: readonly string[];
  replacements?: ReplacementLimits;
  feeCaps?: ReadonlyMap<number, bigint>;
  typedData?: ReadonlyMap<string, ReadonlySet<string>>;
  tokenNonces?: TokenNonceReader;
  chainHeads?: ChainHeadReader;
  now?: () => number;
}

/**
 * An EVM signer whose key never leaves AWS KMS (key spec ECC_SECG_P256K1). The address comes from
 * GetPublicKey (SubjectPublicKeyInfo DER -> uncompressed point -> keccak address); a transaction is
 * signed with Sign (MessageType DIGEST, ECDSA_SHA_256) over its keccak digest, typed data over its
 * EIP-712 digest; the DER signature is split into (r, s), s is normalised to the low half, and the
 * recovery id is found by recovering the address with each parity. Before any of that, the request passes the same policy as every
 * EVM signer (evm-policy.ts).
 *
 * Errors: throttling, KMS-side or network failures, and expired or not yet loadable credentials
 * are TemporaryMovementErrors (the node is deferred, nothing was signed); a missing, disabled or
 * misused key and refused credentials are FatalMovementErrors with SIGNER_KMS_* codes. No message carries a credential or a KMS answer's text.
 */
export class AwsKmsEvmSigner implements Signer {
  readonly signerKey: string;
  readonly keyId: string;
  readonly region: string;
  readonly #client: KMSClient;
  readonly #scope: EvmSignerScope;
  #address: Promise<Hex> | null = null;

  constructor(opts: AwsKmsEvmSignerOptions) {
    this.signerKey = opts.signerKey;
    this.keyId = opts.keyId;
    this.region = opts.region;
    const timeout = opts.timeoutMs ?? 5_000;
    this.#client = new KMSClient({
      region: opts.region,
      endpoint: opts.endpoint,
      ...(opts.credentials ? { credentials: { ...opts.credentials } } : {}),
      maxAttempts: opts.maxAttempts ?? 3,
      // 'auto' could ask the instance metadata service for the region: never.
      defaultsMode: 'standard',
      requestHandler: { requestTimeout: timeout, connectionTimeout: timeout },
    });
    this.#scope = evmSignerScope(opts);
  }

  /** The key's address, lowercase; read once from GetPublicKey (again after a failed read). */
  async getAddress(): Promise<Hex> {
    this.#address ??= this.#readAddress().catch((err: unknown) => {
      this.#address = null;
      throw err;
    });
    return this.#address;
  }

  async sign(req: SignRequest): Promise<SignResult> {
    // The policy runs first: a refused request never reaches KMS at all.
    return signEvmRequest(
      req,
      this.#scope,
      {
        getAddress: () => this.getAddress(),
        signTransaction: async (tx) => {
          const signature = await this.#signDigest(keccak256(serializeTransaction(tx)), await this.getAddress());
          return serializeTransaction(tx, signature);
        },
        signDigest: async (digest) => serializeSignature(await this.#signDigest(digest, await this.getAddress())),
      },
      (address) => `aws_kms:${address}`,
    );
  }

  /** Asks KMS for the key (not the cached address): throws when KMS or the key is unusable. */
  async health(): Promise<Record<string, unknown>> {
    const address = await this.#readAddress();
    this.#address = Promise.resolve(address);
    return { ok: true, signer_key: this.signerKey, signer_address: address, mode: 'aws_kms', region: this.region };
  }

  async close(): Promise<void> {
    this.#client.destroy();
  }

  async #readAddress(): Promise<Hex> {
    const out = await this.#call('GetPublicKey', () => this.#client.send(new GetPublicKeyCommand({ KeyId: this.keyId })));
    const spec = out.KeySpec ?? out.CustomerMasterKeySpec;
    if (spec !== undefined && spec !== 'ECC_SECG_P256K1') {
      throw new FatalMovementError('SIGNER_KMS_KEY_SPEC_UNSUPPORTED', `signer ${this.signerKey}: KMS key spec ${spec} is not ECC_SECG_P256K1`);
    }
    if (out.KeyUsage !== undefined && out.KeyUsage !== 'SIGN_VERIFY') {
      throw new FatalMovementError('SIGNER_KMS_KEY_USAGE_INVALID', `signer ${this.signerKey}: KMS key usage ${out.KeyUsage} is not SIGN_VERIFY`);
    }
    if (!out.PublicKey) throw new FatalMovementError('SIGNER_KMS_INVALID_RESPONSE', `signer ${this.signerKey}: GetPublicKey returned no public key`);
    return publicKeyToAddress(uncompressedPoint(out.PublicKey, this.signerKey)).toLowerCase() as Hex;
  }

  /**
   * Sign over a 32-byte digest (a transaction's keccak, or typed data's EIP-712 digest): KMS signs
   * it as given (MessageType DIGEST), s is made low, and the parity is the one that recovers the
   * key's address.
   */
  async #signDigest(hash: Hex, address: Hex): Promise<{ r: Hex; s: Hex; yParity: number }> {
    const out = await this.#call('Sign', () =>
      this.#client.send(new SignCommand({ KeyId: this.keyId, Message: hexToBytes(hash), MessageType: 'DIGEST', SigningAlgorithm: 'ECDSA_SHA_256' })),
    );
    if (!out.Signature) throw new FatalMovementError('SIGNER_KMS_INVALID_RESPONSE', `signer ${this.signerKey}: Sign returned no signature`);
    const parsed = parseDerSignature(out.Signature);
    if (!parsed) throw new FatalMovementError('SIGNER_KMS_INVALID_RESPONSE', `signer ${this.signerKey}: Sign returned a signature that is not DER-encoded ECDSA`);
    const r = parsed.r;
    const s = parsed.s > HALF_N ? SECP256K1_N - parsed.s : parsed.s;
    const signature = { r: toWord(r), s: toWord(s) };
    for (const yParity of [0, 1]) {
      const recovered = await recoverAddress({ hash, signature: { ...signature, yParity } }).catch(() => null);
      if (recovered?.toLowerCase() === address) return { ...signature, yParity };
    }
    throw new FatalMovementError('SIGNER_KMS_SIGNATURE_INVALID', `signer ${this.signerKey}: the KMS signature does not recover to ${address}`);
  }

  async #call<T>(operation: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof MovementError) throw err;
      throw kmsError(this.signerKey, operation, err);
    }
  }
}

const FATAL_CODES: Record<string, string> = {
  NotFoundException: 'SIGNER_KMS_KEY_NOT_FOUND',
  DisabledException: 'SIGNER_KMS_KEY_DISABLED',
  KMSInvalidStateException: 'SIGNER_KMS_KEY_INVALID_STATE',
  InvalidKeyUsageException: 'SIGNER_KMS_KEY_USAGE_INVALID',
  KeyUnavailableException: 'SIGNER_KMS_KEY_UNAVAILABLE',
  AccessDeniedException: 'SIGNER_KMS_ACCESS_DENIED',
  UnrecognizedClientException: 'SIGNER_KMS_ACCESS_DENIED',
  InvalidSignatureException: 'SIGNER_KMS_ACCESS_DENIED',
  IncompleteSignature: 'SIGNER_KMS_ACCESS_DENIED',
};
/**
 * Credentials that expired, or that the default chain could not load right now (a web identity or
 * container endpoint that did not answer): nothing was signed, and refreshed credentials will do.
 */
const CREDENTIALS_EXPIRED = new Set(['ExpiredTokenException', 'ExpiredToken', 'RequestExpired']);
const CREDENTIALS_UNAVAILABLE = new Set(['CredentialsProviderError', 'TokenProviderError']);
const CREDENTIALS_RETRY_SECONDS = 30;
const THROTTLING = new Set(['ThrottlingException', 'Throttling', 'TooManyRequestsException', 'LimitExceededException', 'RequestLimitExceeded']);

/**
 * A typed error for a failed KMS call. Only the error's name and HTTP status are kept: the text of a
 * KMS answer is not ours to show, and no credential is ever part of either.
 */
export function kmsError(signerKey: string, operation: string, err: unknown): MovementError {
  const e = (err ?? {}) as { name?: string; $metadata?: { httpStatusCode?: number }; code?: string };
  const name = typeof e.name === 'string' ? e.name : 'Error';
  const status = e.$metadata?.httpStatusCode;
  const details = { kms_operation: operation, kms_error: name, ...(status ? { http_status: status } : {}) };
  const what = `signer ${signerKey}: KMS ${operation} failed: ${name}${status ? ` (HTTP ${status})` : ''}`;
  if (THROTTLING.has(name) || status === 429) {
    return new TemporaryMovementError('SIGNER_KMS_THROTTLED', what, { ...details, retry_after_seconds: THROTTLED_RETRY_SECONDS });
  }
  if (name === 'KMSInternalException' || name === 'DependencyTimeoutException' || (status !== undefined && status >= 500)) {
    return new TemporaryMovementError('SIGNER_KMS_UNAVAILABLE', what, details);
  }
  if (CREDENTIALS_EXPIRED.has(name)) {
    return new TemporaryMovementError('SIGNER_KMS_CREDENTIALS_EXPIRED', what, { ...details, retry_after_seconds: CREDENTIALS_RETRY_SECONDS });
  }
  if (CREDENTIALS_UNAVAILABLE.has(name)) {
    return new TemporaryMovementError('SIGNER_KMS_CREDENTIALS_UNAVAILABLE', what, { ...details, retry_after_seconds: CREDENTIALS_RETRY_SECONDS });
  }
  const fatal = FATAL_CODES[name];
  if (fatal) return new FatalMovementError(fatal, what, details);
  if (status === undefined) {
    // No HTTP answer at all: connection refused or reset, a timeout, DNS. Nothing was signed.
    return new TemporaryMovementError('SIGNER_KMS_UNREACHABLE', `signer ${signerKey}: KMS ${operation} got no answer (${name}${e.code ? ` ${e.code}` : ''})`, details);
  }
  return new FatalMovementError('SIGNER_KMS_ERROR', what, details);
}

/** The 0x04 || X || Y point of a secp256k1 SubjectPublicKeyInfo (DER), checked by node:crypto. */
function uncompressedPoint(spki: Uint8Array, signerKey: string): Hex {
  let jwk: { crv?: string; x?: string; y?: string };
  try {
    jwk = createPublicKey({ key: Buffer.from(spki), format: 'der', type: 'spki' }).export({ format: 'jwk' }) as typeof jwk;
  } catch {
    throw new FatalMovementError('SIGNER_KMS_INVALID_RESPONSE', `signer ${signerKey}: GetPublicKey returned no valid SubjectPublicKeyInfo`);
  }
  if (jwk.crv !== 'secp256k1' || !jwk.x || !jwk.y) {
    throw new FatalMovementError('SIGNER_KMS_KEY_SPEC_UNSUPPORTED', `signer ${signerKey}: the KMS key is not on secp256k1`);
  }
  const x = Buffer.from(jwk.x, 'base64url');
  const y = Buffer.from(jwk.y, 'base64url');
  return bytesToHex(new Uint8Array([4, ...x, ...y]));
}

/** SEQUENCE { INTEGER r, INTEGER s } -> (r, s); null for anything else. */
export function parseDerSignature(der: Uint8Array): { r: bigint; s: bigint } | null {
  let i = 0;
  const length = (): number | null => {
    const first = der[i++];
    if (first === undefined) return null;
    if (first < 0x80) return first;
    const count = first & 0x7f;
    if (count < 1 || count > 2) return null;
    let n = 0;
    for (let k = 0; k < count; k++) {
      const b = der[i++];
      if (b === undefined) return null;
      n = (n << 8) | b;
    }
    return n;
  };
  const integer = (): bigint | null => {
    if (der[i++] !== 0x02) return null;
    const len = length();
    if (len === null || len < 1 || len > 33 || i + len > der.length) return null;
    const bytes = der.subarray(i, i + len);
    i += len;
    if (bytes[0]! & 0x80) return null; // negative
    return BigInt(bytesToHex(bytes));
  };
  if (der[i++] !== 0x30) return null;
  const total = length();
  if (total === null || i + total !== der.length) return null;
  const r = integer();
  const s = integer();
  if (r === null || s === null || i !== der.length) return null;
  if (r <= 0n || r >= SECP256K1_N || s <= 0n || s >= SECP256K1_N) return null;
  return { r, s };
}

function toWord(n: bigint): Hex {
  return `0x${n.toString(16).padStart(64, '0')}` as Hex;
}
