import { createHash } from 'node:crypto';

/**
 * The protocol's payload hash: "sha256:" + hex SHA-256 of the payload string's UTF-8 bytes. The
 * prepared action's artifact digest and the signer's tamper check both use it.
 */
export function payloadHash(payload: string): string {
  return 'sha256:' + createHash('sha256').update(payload, 'utf8').digest('hex');
}
