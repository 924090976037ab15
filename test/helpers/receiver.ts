/**
 * A loopback HTTP receiver for Ferry's callbacks: records every request with its raw bytes and
 * answers with the status a test chooses (holding the answer while `gate` is set).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { within } from './wait.ts';

export interface Received {
  /** The request's path and query. */
  url: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

export class CallbackReceiver {
  readonly received: Received[] = [];
  status = 200;
  /** The most requests this receiver had unanswered at once. */
  maxInFlight = 0;
  /** When set, responses wait for it (to hold a delivery in flight). */
  gate: Promise<void> | null = null;
  port = 0;
  private inFlight = 0;
  private server: Server | null = null;
  private waiters: Array<() => void> = [];

  async listen(port = 0): Promise<this> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      this.inFlight++;
      this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', async () => {
        this.received.push({ url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks) });
        for (const w of this.waiters.splice(0)) w();
        if (this.gate) await this.gate;
        this.inFlight--;
        res.writeHead(this.status, this.status >= 300 && this.status < 400 ? { location: this.url('/moved') } : {});
        res.end('ok');
      });
    });
    await new Promise<void>((resolve, reject) => {
      this.server!.once('error', reject);
      this.server!.listen(port, '127.0.0.1', () => resolve());
    });
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  url(path = '/callbacks'): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  /** Holds every answer from now on until the returned function is called (then answers at once again). */
  hold(): () => void {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    this.gate = gate;
    return () => {
      if (this.gate === gate) this.gate = null;
      release();
    };
  }

  /** Resolves once `count` requests have arrived; fails after `timeoutMs`. */
  async waitFor(count: number, timeoutMs = 60_000): Promise<void> {
    const arrived = (async () => {
      while (this.received.length < count) await new Promise<void>((r) => this.waiters.push(r));
    })();
    await within(`${count} callback request(s) (${this.received.length} so far)`, arrived, timeoutMs);
  }

  async close(): Promise<void> {
    if (!this.server) return;
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server!.close(() => r()));
    this.server = null;
  }
}

// ---------------------------------------------------------------------------------------------
// Verifying a callback as a receiver does (docs/security.md, "Verifying a callback"), written from
// the documented format and nothing of Ferry's own code, so the tests check what receivers rely on.

/** The replay window docs/security.md recommends. */
export const RECEIVER_TOLERANCE_SECONDS = 300;

export type Verdict =
  | { ok: true; timestamp: number }
  | { ok: false; reason: 'missing' | 'malformed' | 'too_old' | 'in_future' | 'no_matching_signature' };

/**
 * Checks `Ferry-Signature: t=<unix>,v1=<hex>[,v1=<hex>]` against the raw body with the secrets this
 * receiver holds: valid when t is within `toleranceSeconds` of `now` (unix seconds) and any v1 is
 * HMAC-SHA256(secret, `${t}.` + body) for any of the secrets.
 */
export function verifyFerrySignature(
  header: string | string[] | undefined,
  body: Buffer | string,
  secrets: readonly string[],
  opts: { toleranceSeconds?: number; now?: number } = {},
): Verdict {
  const value = Array.isArray(header) ? header.join(',') : header;
  if (!value) return { ok: false, reason: 'missing' };
  let t: number | null = null;
  const v1: string[] = [];
  for (const part of value.split(',')) {
    const eq = part.indexOf('=');
    const key = part.slice(0, eq).trim();
    const val = part.slice(eq + 1).trim();
    if (key === 't' && /^\d{1,12}$/.test(val)) t = Number(val);
    else if (key === 'v1' && /^[0-9a-f]{64}$/.test(val)) v1.push(val);
  }
  if (t === null || v1.length === 0) return { ok: false, reason: 'malformed' };
  const now = opts.now ?? Math.floor(Date.now() / 1000);
  const tolerance = opts.toleranceSeconds ?? RECEIVER_TOLERANCE_SECONDS;
  if (now - t > tolerance) return { ok: false, reason: 'too_old' };
  if (t - now > tolerance) return { ok: false, reason: 'in_future' };
  const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  for (const secret of secrets) {
    const expected = createHmac('sha256', secret).update(`${t}.`).update(bytes).digest();
    if (v1.some((sig) => timingSafeEqual(expected, Buffer.from(sig, 'hex')))) return { ok: true, timestamp: t };
  }
  return { ok: false, reason: 'no_matching_signature' };
}

/** verifyFerrySignature on a request this receiver recorded. */
export function verifyReceived(r: Received, secrets: readonly string[], opts: { toleranceSeconds?: number; now?: number } = {}): Verdict {
  return verifyFerrySignature(r.headers['ferry-signature'], r.body, secrets, opts);
}
