import { createHash, randomBytes, type KeyObject } from 'node:crypto';
import { ED25519_KEY_SHAPE, ed25519PrivateKey, ed25519PublicKey, ed25519PublicKeyText, ed25519Sign, ed25519Verify, generateEd25519 } from '../ed25519.ts';

/**
 * Requests Ferry signs for its remote hosts (`ferry signer-host`, `ferry executor-host`), so that a
 * host acts for Ferry, not for whoever holds its bearer token. Ferry holds an Ed25519 private key
 * (FERRY_HOST_REQUEST_KEY); a host pins the public key (FERRY_HOST_REQUEST_PUBLIC_KEYS) and refuses
 * a POST that is unsigned, signed by another key or for another host, outside the replay window
 * (FERRY_HOST_REQUEST_MAX_AGE_SECONDS) or carrying a nonce it has already seen.
 *
 * The signature covers the method, the endpoint path, the audience (the signer or executor key the
 * request is for), the time, a random nonce and the SHA-256 of the exact body bytes: every field
 * of a sign request (movement, node, attempt, approved plan hash, expected effect, payload) and of
 * an executor context is covered, so a host judges only what Ferry sent. What Ferry signs is only
 * as good as Ferry: whoever holds the private key can still have anything within a host's own
 * policy signed (docs/security.md).
 */

export const HOST_REQUEST_KEY_PREFIX = 'fyh_';
export const HOST_REQUEST_KEY_SHAPE = /^fyh_[A-Za-z0-9_-]{43}$/;
export const DEFAULT_HOST_REQUEST_MAX_AGE_SECONDS = 60;
/** Nonces a host remembers at most; past it (and after dropping expired ones) it answers 503. */
export const DEFAULT_HOST_REQUEST_NONCE_MEMORY = 100_000;

export const HOST_REQUEST_HEADERS = {
  key: 'ferry-request-key',
  audience: 'ferry-request-audience',
  timestamp: 'ferry-request-timestamp',
  nonce: 'ferry-request-nonce',
  signature: 'ferry-request-signature',
} as const;

// A domain label first, so a signature over anything else (a queue order...) never verifies here.
const SIGNED_PREFIX = 'ferry.host-request.v1\n';
const NONCE_SHAPE = /^[A-Za-z0-9_-]{22,64}$/;
const TIMESTAMP_SHAPE = /^[0-9]{1,12}$/;

/** A short, public name of a public key (hex of the first 8 bytes of its SHA-256): which pinned key signed. */
export function hostRequestKeyId(publicKey: string): string {
  return createHash('sha256').update(Buffer.from(publicKey, 'base64url')).digest('hex').slice(0, 16);
}

/** A new key pair for `ferry hosts keygen`: the private key for Ferry, the public key for the hosts. */
export function generateHostRequestKey(): { privateKey: string; publicKey: string; keyId: string } {
  const { seed, publicKey } = generateEd25519();
  return { privateKey: `${HOST_REQUEST_KEY_PREFIX}${seed}`, publicKey, keyId: hostRequestKeyId(publicKey) };
}

function signedBytes(f: { method: string; path: string; audience: string; timestamp: string; nonce: string; body: string }): Buffer {
  const bodyHash = createHash('sha256').update(f.body, 'utf8').digest('hex');
  return Buffer.from(`${SIGNED_PREFIX}${f.method.toUpperCase()}\n${f.path}\n${f.audience}\n${f.timestamp}\n${f.nonce}\n${bodyHash}`, 'utf8');
}

/** Ferry's side: signs one request; a fresh nonce and the current time every call. */
export class HostRequestSigner {
  readonly keyId: string;
  readonly #key: KeyObject;
  readonly #now: () => number;

  /** @param key FERRY_HOST_REQUEST_KEY (`fyh_` + 43 base64url characters). Never echoed when refused. */
  constructor(key: string, opts: { now?: () => number } = {}) {
    if (!HOST_REQUEST_KEY_SHAPE.test(key)) throw new TypeError('a host request key is fyh_ followed by 43 base64url characters');
    this.#key = ed25519PrivateKey(key.slice(HOST_REQUEST_KEY_PREFIX.length));
    this.keyId = hostRequestKeyId(ed25519PublicKeyText(this.#key));
    this.#now = opts.now ?? Date.now;
  }

  /** The headers that authenticate `body` (the exact bytes sent) for `audience`. */
  headers(input: { method: string; path: string; audience: string; body: string }): Record<string, string> {
    const timestamp = String(Math.floor(this.#now() / 1000));
    const nonce = randomBytes(16).toString('base64url');
    const signature = ed25519Sign(signedBytes({ ...input, timestamp, nonce }), this.#key);
    return {
      [HOST_REQUEST_HEADERS.key]: this.keyId,
      [HOST_REQUEST_HEADERS.audience]: input.audience,
      [HOST_REQUEST_HEADERS.timestamp]: timestamp,
      [HOST_REQUEST_HEADERS.nonce]: nonce,
      [HOST_REQUEST_HEADERS.signature]: signature,
    };
  }

  toJSON(): string {
    return `HostRequestSigner(${this.keyId})`;
  }
}

export type HostRequestRefusalCode =
  | 'HOST_REQUEST_UNSIGNED'
  | 'HOST_REQUEST_SIGNATURE_INVALID'
  | 'HOST_REQUEST_EXPIRED'
  | 'HOST_REQUEST_REPLAYED'
  | 'HOST_REQUEST_NONCE_MEMORY_FULL';

export type HostRequestVerdict = { ok: true; audience: string; keyId: string } | { ok: false; code: HostRequestRefusalCode; message: string };

export interface HostRequestVerifierOptions {
  /** The public keys the host pins (FERRY_HOST_REQUEST_PUBLIC_KEYS), base64url; more than one while a key is rotated. */
  publicKeys: readonly string[];
  /** FERRY_HOST_REQUEST_MAX_AGE_SECONDS: how far a request's time may lie from the host's clock, either way. */
  maxAgeSeconds?: number;
  /** Nonces remembered at most (DEFAULT_HOST_REQUEST_NONCE_MEMORY). */
  maxNonces?: number;
  now?: () => number;
}

/**
 * A host's side: verifies one request, and remembers its nonce until its time leaves the window
 * (after which the time check refuses it anyway), so memory stays bounded by the request rate.
 */
export class HostRequestVerifier {
  readonly maxAgeSeconds: number;
  readonly #keys: Map<string, KeyObject>;
  readonly #maxNonces: number;
  readonly #now: () => number;
  /** nonce -> when it may be forgotten (ms). */
  readonly #seen = new Map<string, number>();

  constructor(opts: HostRequestVerifierOptions) {
    if (opts.publicKeys.length === 0) throw new TypeError('a host pins at least one public key');
    this.#keys = new Map(
      opts.publicKeys.map((k) => {
        if (!ED25519_KEY_SHAPE.test(k)) throw new TypeError('a pinned public key is 43 base64url characters');
        return [hostRequestKeyId(k), ed25519PublicKey(k)] as const;
      }),
    );
    this.maxAgeSeconds = opts.maxAgeSeconds ?? DEFAULT_HOST_REQUEST_MAX_AGE_SECONDS;
    this.#maxNonces = opts.maxNonces ?? DEFAULT_HOST_REQUEST_NONCE_MEMORY;
    this.#now = opts.now ?? Date.now;
  }

  /** How many nonces are remembered now (for tests and health). */
  get remembered(): number {
    return this.#seen.size;
  }

  /** `audiences`: the keys the host serves; null when the route checks the audience against what the body names. */
  verify(input: { method: string; path: string; header: (name: string) => string | undefined; body: string; audiences: ReadonlySet<string> | null }): HostRequestVerdict {
    const h = (name: keyof typeof HOST_REQUEST_HEADERS) => input.header(HOST_REQUEST_HEADERS[name]);
    const keyId = h('key');
    const audience = h('audience');
    const timestamp = h('timestamp');
    const nonce = h('nonce');
    const signature = h('signature');
    if (!keyId || !audience || !timestamp || !nonce || !signature) {
      return refuse('HOST_REQUEST_UNSIGNED', `the request is not signed by Ferry (${Object.values(HOST_REQUEST_HEADERS).join(', ')} are required)`);
    }
    const key = this.#keys.get(keyId);
    if (!key) return refuse('HOST_REQUEST_SIGNATURE_INVALID', `the request is signed with key ${JSON.stringify(keyId.slice(0, 32))}, which this host does not pin`);
    if (!TIMESTAMP_SHAPE.test(timestamp) || !NONCE_SHAPE.test(nonce)) return refuse('HOST_REQUEST_SIGNATURE_INVALID', 'the request time or nonce is malformed');
    if (!ed25519Verify(signedBytes({ method: input.method, path: input.path, audience, timestamp, nonce, body: input.body }), key, signature)) {
      return refuse('HOST_REQUEST_SIGNATURE_INVALID', 'the request signature does not verify: the request is not the one Ferry signed');
    }
    // Signed for another signer or executor: never served here, even by a host that could.
    if (input.audiences && !input.audiences.has(audience)) return refuse('HOST_REQUEST_SIGNATURE_INVALID', `the request is signed for ${JSON.stringify(audience)}, which this host does not serve`);
    const now = this.#now();
    const at = Number(timestamp) * 1000;
    const window = this.maxAgeSeconds * 1000;
    if (Math.abs(now - at) > window) {
      return refuse('HOST_REQUEST_EXPIRED', `the request was signed ${Math.round((now - at) / 1000)} s from this host's clock, outside the replay window of ${this.maxAgeSeconds} s`);
    }
    if (this.#seen.has(nonce)) return refuse('HOST_REQUEST_REPLAYED', 'the request repeats a nonce already seen inside the replay window');
    if (this.#seen.size >= this.#maxNonces) this.#forgetExpired(now);
    if (this.#seen.size >= this.#maxNonces) return refuse('HOST_REQUEST_NONCE_MEMORY_FULL', 'the host remembers as many recent requests as it may; try again shortly');
    this.#seen.set(nonce, at + window);
    if (this.#seen.size % 1024 === 0) this.#forgetExpired(now);
    return { ok: true, audience, keyId };
  }

  #forgetExpired(now: number): void {
    for (const [nonce, until] of this.#seen) if (until < now) this.#seen.delete(nonce);
  }
}

function refuse(code: HostRequestRefusalCode, message: string): HostRequestVerdict {
  return { ok: false, code, message };
}
