import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Callback signature, version v3. The body carries only the payload; authentication travels in
 * headers. The signature is lowercase hex HMAC-SHA256 keyed with the callback secret (its UTF-8
 * bytes) over `${timestamp}\n${nonce}\n${sha256 hex of the body bytes}`.
 *
 * Timestamp and nonce are fixed when the callback is created and reused on every retry and redrive,
 * so a receiver should dedupe on the nonce rather than reject old timestamps. v3 is sent only for a
 * raw callback_url, beside Ferry-Signature (below), whose timestamp is the attempt's and can be
 * checked against a replay window.
 */

export const CALLBACK_SIGNATURE_VERSION = 'v3';

export const CALLBACK_HEADERS = {
  timestamp: 'X-Ferry-Callback-Timestamp',
  nonce: 'X-Ferry-Callback-Nonce',
  version: 'X-Ferry-Callback-Signature-Version',
  signature: 'X-Ferry-Callback-Signature',
} as const;

export type Body = Uint8Array | string;

function bytes(body: Body): Uint8Array {
  return typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
}

export function signCallback(secret: string, timestamp: number | string, nonce: string, body: Body): string {
  const bodyHash = createHash('sha256').update(bytes(body)).digest('hex');
  return createHmac('sha256', secret).update(`${timestamp}\n${nonce}\n${bodyHash}`).digest('hex');
}

/** The four headers that go with a callback POST. */
export function callbackHeaders(secret: string, timestamp: number, nonce: string, body: Body): Record<string, string> {
  return {
    [CALLBACK_HEADERS.timestamp]: String(timestamp),
    [CALLBACK_HEADERS.nonce]: nonce,
    [CALLBACK_HEADERS.version]: CALLBACK_SIGNATURE_VERSION,
    [CALLBACK_HEADERS.signature]: signCallback(secret, timestamp, nonce, body),
  };
}

export interface SignedParts {
  timestamp: string;
  nonce: string;
  signature: string;
  version?: string;
}

type HeaderBag = Headers | Record<string, string | string[] | undefined>;

/** Reads the signature headers from Fetch Headers or Node's IncomingHttpHeaders; null if any is missing. */
export function readCallbackHeaders(headers: HeaderBag): SignedParts | null {
  const get = (name: string): string | undefined => {
    if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
    const bag = headers as Record<string, string | string[] | undefined>;
    const v = bag[name.toLowerCase()] ?? bag[name];
    return Array.isArray(v) ? v[0] : v;
  };
  const timestamp = get(CALLBACK_HEADERS.timestamp);
  const nonce = get(CALLBACK_HEADERS.nonce);
  const signature = get(CALLBACK_HEADERS.signature);
  const version = get(CALLBACK_HEADERS.version);
  if (timestamp === undefined || nonce === undefined || signature === undefined) return null;
  return { timestamp, nonce, signature, version };
}

/**
 * For receivers: true when the signature matches the body bytes exactly as received. Compared in
 * constant time. A version other than v3 fails; parts without a version are checked as v3.
 */
export function verifyCallback(secret: string, parts: SignedParts | null, body: Body): boolean {
  if (!parts) return false;
  if (parts.version !== undefined && parts.version !== CALLBACK_SIGNATURE_VERSION) return false;
  if (!/^[0-9a-f]{64}$/.test(parts.signature)) return false;
  const expected = Buffer.from(signCallback(secret, parts.timestamp, parts.nonce, body), 'hex');
  return timingSafeEqual(expected, Buffer.from(parts.signature, 'hex'));
}

// ---------------------------------------------------------------------------------------------
// Ferry-Signature: signed per attempt, with one value per signing secret.
//
//   Ferry-Signature: t=<unix seconds of this attempt>,v1=<hex>[,v1=<hex>...]
//   v1 = lowercase hex HMAC-SHA256, keyed with the secret's UTF-8 bytes, over `${t}.` + body bytes
//
// t is taken when the attempt is sent (not when the callback was created), so a receiver can
// refuse a delivery whose t is too far from its clock (a replay); five minutes is the recommended
// window. A destination inside a secret rotation's overlap gets one v1 per valid secret, newest
// first; a receiver accepts the delivery when any of them verifies with a secret it holds.

export const SIGNATURE_HEADER = 'Ferry-Signature';
/** The recommended replay window for receivers, in seconds. */
export const RECOMMENDED_TOLERANCE_SECONDS = 300;

export function signatureV1(secret: string, timestamp: number, body: Body): string {
  return createHmac('sha256', secret).update(`${timestamp}.`).update(bytes(body)).digest('hex');
}

/** The Ferry-Signature value for one attempt sent at `timestamp`, signed with each secret. */
export function ferrySignature(secrets: readonly string[], timestamp: number, body: Body): string {
  if (secrets.length === 0) throw new Error('a callback is signed with at least one secret');
  return [`t=${timestamp}`, ...secrets.map((s) => `v1=${signatureV1(s, timestamp, body)}`)].join(',');
}
