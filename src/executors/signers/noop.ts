import type { Signer, SignRequest, SignResult } from '../protocol.ts';
import { checkSignRequest } from './integrity.ts';

/**
 * Signs nothing: for dry runs and lanes whose provider authenticates otherwise (CEX API keys). It
 * still refuses a tampered request, so a test with it exercises the same refusal paths.
 */
export class NoopSigner implements Signer {
  constructor(readonly signerKey = 'noop') {}

  async sign(req: SignRequest): Promise<SignResult> {
    checkSignRequest(req);
    return { signature: '', signature_format: 'noop', signer_ref: `noop:${this.signerKey}` };
  }

  async health(): Promise<Record<string, unknown>> {
    return { ok: true, signer_key: this.signerKey, mode: 'noop' };
  }
}
