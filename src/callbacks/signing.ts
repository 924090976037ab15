import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * Callback signatures. Every delivery is signed the Standard Webhooks way (v1, below: webhook-id,
 * webhook-timestamp, webhook-signature), which any standardwebhooks library verifies. The older
 * headers (v3 and Ferry-Signature, further below) are still sent beside them for one release while
 * FERRY_CALLBACK_LEGACY_HEADERS is on (the default); they will be removed.
 *
 * Legacy: callback signature, version v3. The body carries only the payload; authentication travels in
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

// ---------------------------------------------------------------------------------------------
// Standard Webhooks v1 (https://www.standardwebhooks.com, spec 1.0.0), the headers every delivery
// carries:
//
//   webhook-id:        the callback's id (the body's callback_id): the same on every retry and
//                      redrive of one callback, so it is what a receiver dedupes on
//   webhook-timestamp: unix seconds of this attempt
//   webhook-signature: v1,<base64 HMAC-SHA256 of `${id}.${timestamp}.` + body bytes>, one per
//                      signing secret, space-separated, newest first (a rotation's overlap)
//
// The id and the timestamp are signed, so neither can be swapped on a captured delivery: a replay
// within the receiver's window has the id the receiver has already seen.
//
// Keys: a secret written `whsec_<base64>` (every secret Ferry makes now) is keyed with its
// base64-decoded bytes, as the spec says. A secret from before (a destination's `fcs_...`, a
// generated hex instance secret, any FERRY_CALLBACK_SECRET) is keyed with its UTF-8 bytes; its
// `whsec_` form for a receiver's library is `whsec_` + base64 of those bytes (webhookSecretForm).

export const WEBHOOK_HEADERS = {
  id: 'webhook-id',
  timestamp: 'webhook-timestamp',
  signature: 'webhook-signature',
} as const;

export const WEBHOOK_SECRET_PREFIX = 'whsec_';
/** Bytes of a secret Ferry makes (the spec asks for 24 to 64). */
export const WEBHOOK_SECRET_BYTES = 32;

/** A new signing secret: `whsec_` + base64 of 32 random bytes. */
export function newWebhookSecret(): string {
  return `${WEBHOOK_SECRET_PREFIX}${randomBytes(WEBHOOK_SECRET_BYTES).toString('base64')}`;
}

/** The bytes a `whsec_` secret stands for, or null when the rest is not canonical base64 of 24-64 bytes. */
export function decodeWebhookSecret(secret: string): Buffer | null {
  if (!secret.startsWith(WEBHOOK_SECRET_PREFIX)) return null;
  const b64 = secret.slice(WEBHOOK_SECRET_PREFIX.length);
  const key = Buffer.from(b64, 'base64');
  if (key.toString('base64') !== b64 || key.length < 24 || key.length > 64) return null;
  return key;
}

/** The HMAC key of a secret under Standard Webhooks (see above). */
export function webhookKey(secret: string): Buffer {
  if (secret.startsWith(WEBHOOK_SECRET_PREFIX)) {
    const key = decodeWebhookSecret(secret);
    if (!key) throw new Error('a whsec_ callback secret must be base64 of 24 to 64 bytes');
    return key;
  }
  return Buffer.from(secret, 'utf8');
}

/** The `whsec_` form of any secret, as a standardwebhooks library takes it: the same key. */
export function webhookSecretForm(secret: string): string {
  return `${WEBHOOK_SECRET_PREFIX}${webhookKey(secret).toString('base64')}`;
}

/** One `v1,<base64>` signature. The id and timestamp must not contain '.'. */
export function webhookSignatureV1(secret: string, id: string, timestamp: number, body: Body): string {
  if (id.includes('.')) throw new Error('a webhook id must not contain "."');
  const mac = createHmac('sha256', webhookKey(secret)).update(`${id}.${timestamp}.`).update(bytes(body)).digest('base64');
  return `v1,${mac}`;
}

/** The three Standard Webhooks headers of one attempt, signed with each secret (newest first). */
export function webhookHeaders(secrets: readonly string[], id: string, timestamp: number, body: Body): Record<string, string> {
  if (secrets.length === 0) throw new Error('a callback is signed with at least one secret');
  return {
    [WEBHOOK_HEADERS.id]: id,
    [WEBHOOK_HEADERS.timestamp]: String(timestamp),
    [WEBHOOK_HEADERS.signature]: secrets.map((s) => webhookSignatureV1(s, id, timestamp, body)).join(' '),
  };
}

export interface DeliverySigning {
  /** The callback's id: webhook-id. */
  callbackId: string;
  body: Body;
  /** The secrets that sign this attempt, newest first. */
  secrets: readonly string[];
  /** Unix seconds of this attempt. */
  attemptTime: number;
  /** Also send the legacy headers (FERRY_CALLBACK_LEGACY_HEADERS). */
  legacy: boolean;
  /** The callback's nonce (legacy X-Ferry-Callback-Nonce). */
  nonce: string;
  /** For a raw callback_url, the legacy v3 headers' secret and fixed timestamp. */
  v3?: { secret: string; timestamp: number };
}

/** Every signature header of one delivery attempt. */
export function deliveryHeaders(d: DeliverySigning): Record<string, string> {
  const headers = webhookHeaders(d.secrets, d.callbackId, d.attemptTime, d.body);
  if (!d.legacy) return headers;
  return {
    ...(d.v3 ? callbackHeaders(d.v3.secret, d.v3.timestamp, d.nonce, d.body) : { [CALLBACK_HEADERS.nonce]: d.nonce }),
    [SIGNATURE_HEADER]: ferrySignature(d.secrets, d.attemptTime, d.body),
    ...headers,
  };
}
