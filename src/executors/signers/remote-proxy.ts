import { FatalMovementError } from '../errors.ts';
import type { HostRequestSigner } from '../host-requests.ts';
import { JsonHttpClient } from '../http-json.ts';
import { describeIssues, SignResultSchema, type Signer, type SignRequest, type SignResult } from '../protocol.ts';
import { checkExecutorAllowed, EVM_NONCE_FILL_ACTION, type EvmSignerScope, type SignerPolicyOptions } from './evm-policy.ts';
import { checkEvmRawTxRequest } from './evm-signing.ts';
import { checkSignRequest } from './integrity.ts';
import { checkTypedDataRequest, TYPED_DATA_FORMATS } from './typed-data-policy.ts';

export interface RemoteSignerOptions {
  signerKey: string;
  baseUrl: string;
  token?: string;
  timeoutMs?: number;
  /**
   * Apply the EVM signer policy here too (executor allowlist; an `evm_raw_tx` must match the
   * request's expected effect) before the request leaves the process. The remote signer receives
   * `executor_key` and `expected_effect` either way and must apply the same policy itself.
   */
  evmPolicy?: { chains?: readonly number[]; executors?: readonly string[]; typedData?: ReadonlyMap<string, ReadonlySet<string>> } & SignerPolicyOptions;
  /** Ferry's host request key (FERRY_HOST_REQUEST_KEY): signs every /sign for this signer key, as `ferry signer-host` requires. */
  requestSigner?: HostRequestSigner;
}

/**
 * A signer in another process (an HSM front, a signing service): POST /sign with a SignRequest,
 * GET /health. The request is checked here too, so a tampered one never leaves the process.
 */
export class RemoteSignerProxy implements Signer {
  readonly signerKey: string;
  readonly #http: JsonHttpClient;
  readonly #scope: EvmSignerScope | null;

  constructor(opts: RemoteSignerOptions) {
    this.signerKey = opts.signerKey;
    this.#scope = opts.evmPolicy ? { signerKey: opts.signerKey, ...opts.evmPolicy } : null;
    this.#http = new JsonHttpClient({
      baseUrl: opts.baseUrl,
      token: opts.token,
      timeoutMs: opts.timeoutMs,
      codePrefix: 'REMOTE_SIGNER',
      // The whole request is signed: the approval's evidence (movement, node, attempt, plan hash,
      // expected effect) reaches the host as Ferry built it, or is refused there.
      signHeaders: opts.requestSigner ? (r) => opts.requestSigner!.headers({ ...r, audience: opts.signerKey }) : undefined,
    });
  }

  async sign(req: SignRequest): Promise<SignResult> {
    const checked = checkSignRequest(req);
    if (this.#scope) {
      // The remote signer knows its own address and checks the filler's sender itself.
      if (checked.payload_format === 'evm_raw_tx') checkEvmRawTxRequest(checked, this.#scope, null);
      // Typed data: the same policy as the local signers (a permit signed for any spender is an
      // allowance), but for the owner, and the nonce when no RPC here reads it: the remote holds
      // the key and checks those itself.
      else if (TYPED_DATA_FORMATS.has(checked.payload_format)) await checkTypedDataRequest(checked, this.#scope, { owner: null });
      else if (checked.signing_intent.action !== EVM_NONCE_FILL_ACTION) checkExecutorAllowed(checked, this.#scope);
    }
    const res = await this.#http.call('POST', '/sign', checked);
    const parsed = SignResultSchema.safeParse(res.json);
    if (!parsed.success) {
      throw new FatalMovementError('REMOTE_SIGNER_INVALID_RESPONSE', `signer ${this.signerKey} /sign answered an invalid SignResult: ${describeIssues(parsed.error)}`);
    }
    return parsed.data;
  }

  health(): Promise<Record<string, unknown> | null> {
    return this.#http.health(`signer ${this.signerKey}`);
  }

  async close(): Promise<void> {
    await this.#http.close();
  }
}
