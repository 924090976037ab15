import type { KeyObject } from 'node:crypto';
import { ed25519PrivateKey, ed25519PublicKey, ed25519Sign, ed25519Verify, generateEd25519 } from '../ed25519.ts';
import { FerryError, NotFoundError } from '../errors.ts';
import { writeAudit } from '../persistence/audit.ts';
import { withTransaction, type Pool, type Queryable } from '../persistence/db.ts';
import { assertName, findPrincipal } from '../persistence/principals.ts';
import {
  insertQueueCredential,
  listQueueCredentials,
  revokeQueueCredential as revokeRow,
  usableQueueCredential,
  type QueueCredentialInfo,
} from '../persistence/queue-credentials.ts';
import { canonicalJson } from '../plan/canonical-json.ts';

/**
 * Queue credentials: who a queued movement order is from. The queue is a table anyone with write
 * access to it can insert into, and principal names are public (audit events show them), so an
 * order naming its requester proves nothing. An order is therefore signed: an Ed25519 signature
 * over its canonical JSON, with a key bound to one principal. Ferry keeps only the public key (a
 * leaked credentials table or job table signs nothing); the private key is shown once at creation,
 * as `fyq_<credential id>.<32-byte seed, base64url>`, like a token. Bearer tokens never travel
 * through the queue.
 *
 * What a signature does not stop, a replay of the very same message, the consumer answers: the
 * order carries `issued_at` (checked against the time its job was created) and an idempotency key
 * (a repeat returns the first movement).
 */

export type { QueueCredentialInfo };

const KEY_PREFIX = 'fyq_';
const KEY_SHAPE = /^fyq_([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.([A-Za-z0-9_-]{43})$/;
// What is signed starts with a domain label, so a signature over anything else never verifies here.
const SIGNED_PREFIX = 'ferry.movement-order.v1\n';

export interface CreatedQueueCredential extends QueueCredentialInfo {
  /** The private key; shown here and nowhere else. */
  key: string;
}

/** Creates a queue credential for an existing, enabled principal; audited, never with its key. */
export async function createQueueCredential(
  pool: Pool,
  input: { principal: string; name?: string },
  actor: string,
): Promise<CreatedQueueCredential> {
  return withTransaction(pool, async (client) => {
    const principal = await findPrincipal(client, input.principal);
    if (!principal) throw new NotFoundError('principal', input.principal);
    if (principal.disabled_at) throw new FerryError('VALIDATION_FAILED', `principal ${principal.name} is disabled`, { field: 'principal' });
    const name = input.name ?? `${principal.name}.queue`;
    assertName('queue credential', name);
    const { seed, publicKey } = generateEd25519();
    const info = await insertQueueCredential(client, { name, principalId: principal.id, publicKey });
    await writeAudit(client, {
      actor,
      action: 'queue_credential.create',
      entity_type: 'queue_credential',
      entity_id: info.id,
      details: { name: info.name, principal_id: info.principal_id, principal_name: info.principal_name },
    });
    return { ...info, key: `${KEY_PREFIX}${info.id}.${seed}` };
  });
}

export function revokeQueueCredential(pool: Pool, idOrName: string, actor: string): Promise<QueueCredentialInfo> {
  return withTransaction(pool, async (client) => {
    const info = await revokeRow(client, idOrName);
    await writeAudit(client, {
      actor,
      action: 'queue_credential.revoke',
      entity_type: 'queue_credential',
      entity_id: info.id,
      details: { name: info.name, principal_id: info.principal_id, principal_name: info.principal_name },
    });
    return info;
  });
}

export function queueCredentials(pool: Pool, opts: { includeRevoked?: boolean } = {}): Promise<QueueCredentialInfo[]> {
  return listQueueCredentials(pool, opts);
}

/** The credential id and the signing key a `fyq_` key holds; a clear error (never echoing it) otherwise. */
export function parseQueueKey(key: string): { credentialId: string; privateKey: KeyObject } {
  const m = KEY_SHAPE.exec(key.trim());
  if (!m) throw new FerryError('VALIDATION_FAILED', 'a queue key is fyq_<credential id>.<43 base64url characters>', { field: 'key' });
  return { credentialId: m[1]!, privateKey: ed25519PrivateKey(m[2]!) };
}

/** The bytes a signature covers: the order without its signature, as canonical JSON. */
function signedBytes(order: Record<string, unknown>): Buffer {
  const { signature: _, ...unsigned } = order;
  return Buffer.from(SIGNED_PREFIX + canonicalJson(unsigned), 'utf8');
}

/**
 * Signs an order with a queue key: sets `credential_id` and `issued_at` (now, unless given) and
 * returns the order with its `signature`. What other systems do before they send.
 */
export function signMovementOrder<T extends Record<string, unknown>>(
  order: T,
  key: string,
  issuedAt: Date = new Date(),
): T & { credential_id: string; issued_at: string; signature: string } {
  const { credentialId, privateKey } = parseQueueKey(key);
  const unsigned = { ...order, credential_id: credentialId, issued_at: issuedAt.toISOString() };
  const signature = ed25519Sign(signedBytes(unsigned), privateKey);
  return { ...unsigned, signature };
}

/** Why an order's authentication failed: in the dead-letter reason and the audit event, never a key. */
export type OrderAuthFailure = 'unsigned' | 'unknown_credential' | 'bad_signature' | 'requester_mismatch';

export function unauthenticatedOrder(reason: OrderAuthFailure, order: { credential_id?: unknown; requested_by?: unknown }): FerryError {
  return new FerryError('QUEUE_ORDER_UNAUTHENTICATED', `the movement order is not signed by a queue credential of ${JSON.stringify(order.requested_by)} (${reason})`, {
    reason,
    credential_id: typeof order.credential_id === 'string' ? order.credential_id : null,
    requested_by: typeof order.requested_by === 'string' ? order.requested_by : null,
  });
}

/**
 * Verifies an order's signature against its credential's public key, and that the credential's
 * principal is the one it names as `requested_by`. Returns that principal; throws
 * QUEUE_ORDER_UNAUTHENTICATED otherwise. Unknown, revoked and disabled credentials are one reason.
 */
export async function verifyMovementOrder(
  db: Queryable,
  order: Record<string, unknown> & { credential_id: string; signature: string; requested_by: string },
): Promise<{ principalId: string; principalName: string; credentialId: string }> {
  const credential = await usableQueueCredential(db, order.credential_id);
  if (!credential) throw unauthenticatedOrder('unknown_credential', order);
  const ok = ed25519Verify(signedBytes(order), ed25519PublicKey(credential.publicKey), order.signature);
  if (!ok) throw unauthenticatedOrder('bad_signature', order);
  if (credential.principalName !== order.requested_by) throw unauthenticatedOrder('requester_mismatch', order);
  return { principalId: credential.principalId, principalName: credential.principalName, credentialId: credential.id };
}
