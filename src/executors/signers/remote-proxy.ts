import { FatalMovementError } from '../errors.ts';
import { JsonHttpClient } from '../http-json.ts';
import { describeIssues, SignResultSchema, type Signer, type SignRequest, type SignResult } from '../protocol.ts';
import { checkSignRequest } from './integrity.ts';

export interface RemoteSignerOptions {
  signerKey: string;
  baseUrl: string;
  token?: string;
  timeoutMs?: number;
}

/**
 * A signer in another process (an HSM front, a signing service): POST /sign with a SignRequest,
 * GET /health. The request is checked here too, so a tampered one never leaves the process.
 */
export class RemoteSignerProxy implements Signer {
  readonly signerKey: string;
  readonly #http: JsonHttpClient;

  constructor(opts: RemoteSignerOptions) {
    this.signerKey = opts.signerKey;
    this.#http = new JsonHttpClient({ baseUrl: opts.baseUrl, token: opts.token, timeoutMs: opts.timeoutMs, codePrefix: 'REMOTE_SIGNER' });
  }

  async sign(req: SignRequest): Promise<SignResult> {
    const checked = checkSignRequest(req);
    const res = await this.#http.call('POST', '/sign', checked);
    const parsed = SignResultSchema.safeParse(res.json);
    if (!parsed.success) {
      throw new FatalMovementError('REMOTE_SIGNER_INVALID_RESPONSE', `signer ${this.signerKey} /sign answered an invalid SignResult: ${describeIssues(parsed.error)}`);
    }
    return parsed.data;
  }

  async health(): Promise<Record<string, unknown> | null> {
    const res = await this.#http.call('GET', '/health');
    if (res.json === undefined || res.json === null) return null;
    if (typeof res.json !== 'object' || Array.isArray(res.json)) {
      throw new FatalMovementError('REMOTE_SIGNER_INVALID_RESPONSE', `signer ${this.signerKey} /health did not answer a JSON object`);
    }
    return res.json as Record<string, unknown>;
  }

  async close(): Promise<void> {
    await this.#http.close();
  }
}
