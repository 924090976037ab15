import { generateHostRequestKey, HostRequestSigner, HostRequestVerifier, type HostRequestVerifierOptions } from '../../src/executors/host-requests.ts';

/**
 * One host request key pair per test process (`ferry hosts keygen` makes them the same way): the
 * signer Ferry's proxies use, a verifier a host pins its public key in, and the headers of a
 * signed POST for tests that speak to a host app directly.
 */
export const hostKeys = generateHostRequestKey();
export const requestSigner = new HostRequestSigner(hostKeys.privateKey);

export function requestVerifier(opts: Partial<HostRequestVerifierOptions> = {}): HostRequestVerifier {
  return new HostRequestVerifier({ publicKeys: [hostKeys.publicKey], ...opts });
}

/** Headers of a POST with a bearer token, signed by Ferry's test key for `audience` (or unsigned with `signer: null`). */
export function signedHeaders(
  path: string,
  audience: string,
  body: string,
  token: string,
  signer: HostRequestSigner | null = requestSigner,
): Record<string, string> {
  return {
    authorization: `Bearer ${token}`,
    'content-type': 'application/json',
    ...(signer ? signer.headers({ method: 'POST', path, audience, body }) : {}),
  };
}

/** The approval's evidence a sign request carries besides its movement and node (attempt, approved plan hash). */
export const EVIDENCE = { attempt_no: 1, compiled_plan_hash: 'sha256:' + 'c'.repeat(64) } as const;
