import { FatalMovementError } from '../errors.ts';
import { payloadHash } from '../payload-hash.ts';
import { describeIssues, SignRequestSchema, type SignRequest } from '../protocol.ts';

/**
 * The signer's tamper check: the payload must be exactly what the signing intent allows. A signer
 * runs it before touching a key.
 * @throws FatalMovementError SIGNER_REQUEST_INVALID for a malformed request,
 *         SIGNER_PAYLOAD_HASH_MISMATCH when intent, declared hash and payload disagree.
 */
export function checkSignRequest(req: unknown): SignRequest {
  const parsed = SignRequestSchema.safeParse(req);
  if (!parsed.success) {
    throw new FatalMovementError('SIGNER_REQUEST_INVALID', `invalid sign request: ${describeIssues(parsed.error)}`);
  }
  const r = parsed.data;
  if (r.signing_intent.allowed_payload_hash !== r.payload_hash) {
    throw new FatalMovementError('SIGNER_PAYLOAD_HASH_MISMATCH', 'payload_hash differs from the hash the signing intent allows', {
      allowed_payload_hash: r.signing_intent.allowed_payload_hash,
      payload_hash: r.payload_hash,
    });
  }
  const actual = payloadHash(r.payload);
  if (actual !== r.payload_hash) {
    throw new FatalMovementError('SIGNER_PAYLOAD_HASH_MISMATCH', 'payload does not hash to payload_hash', {
      payload_hash: r.payload_hash,
      computed_hash: actual,
    });
  }
  if (r.replaces && payloadHash(r.replaces.payload) !== r.replaces.payload_hash) {
    throw new FatalMovementError('SIGNER_PAYLOAD_HASH_MISMATCH', 'the replaced version does not hash to its payload_hash', {
      payload_hash: r.replaces.payload_hash,
      computed_hash: payloadHash(r.replaces.payload),
    });
  }
  if (r.cancels && payloadHash(r.cancels.payload) !== r.cancels.payload_hash) {
    throw new FatalMovementError('SIGNER_PAYLOAD_HASH_MISMATCH', 'the cancelled version does not hash to its payload_hash', {
      payload_hash: r.cancels.payload_hash,
      computed_hash: payloadHash(r.cancels.payload),
    });
  }
  return r;
}
