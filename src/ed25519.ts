import { createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify, type KeyObject } from 'node:crypto';

/**
 * Ed25519 keys as Ferry writes them down: the 32 raw bytes of a private key's seed or of a public
 * key, base64url (43 characters), so a key fits an environment variable or a database column.
 * Shared by the queue credentials (services/queue-credentials.ts) and the requests Ferry signs for
 * its remote hosts (executors/host-requests.ts).
 */

/** 32 bytes, base64url without padding. */
export const ED25519_KEY_SHAPE = /^[A-Za-z0-9_-]{43}$/;
/** 64 bytes, base64url without padding. */
export const ED25519_SIGNATURE_SHAPE = /^[A-Za-z0-9_-]{86}$/;

// DER headers of an Ed25519 private key (PKCS#8) and public key (SPKI) around their 32 raw bytes.
const PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');
const SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');

/** A new key pair: the private key's seed and the public key, each base64url. */
export function generateEd25519(): { seed: string; publicKey: string } {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  return {
    seed: (privateKey.export({ format: 'der', type: 'pkcs8' }) as Buffer).subarray(PKCS8_PREFIX.length).toString('base64url'),
    publicKey: (publicKey.export({ format: 'der', type: 'spki' }) as Buffer).subarray(SPKI_PREFIX.length).toString('base64url'),
  };
}

/** The private key of a base64url seed (checked by the caller against ED25519_KEY_SHAPE). */
export function ed25519PrivateKey(seed: string): KeyObject {
  return createPrivateKey({ key: Buffer.concat([PKCS8_PREFIX, Buffer.from(seed, 'base64url')]), format: 'der', type: 'pkcs8' });
}

/** The public key of its base64url raw bytes. */
export function ed25519PublicKey(raw: string): KeyObject {
  return createPublicKey({ key: Buffer.concat([SPKI_PREFIX, Buffer.from(raw, 'base64url')]), format: 'der', type: 'spki' });
}

/** The base64url raw bytes of a public key (of a private key: its public half). */
export function ed25519PublicKeyText(key: KeyObject): string {
  const pub = key.type === 'private' ? createPublicKey(key) : key;
  return (pub.export({ format: 'der', type: 'spki' }) as Buffer).subarray(SPKI_PREFIX.length).toString('base64url');
}

export function ed25519Sign(bytes: Buffer, privateKey: KeyObject): string {
  return sign(null, bytes, privateKey).toString('base64url');
}

/** False for a signature of the wrong shape, never an exception. */
export function ed25519Verify(bytes: Buffer, publicKey: KeyObject, signature: string): boolean {
  return ED25519_SIGNATURE_SHAPE.test(signature) && verify(null, bytes, publicKey, Buffer.from(signature, 'base64url'));
}
