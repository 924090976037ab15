import type { Context } from 'hono';
import { isIPv4, isIPv6 } from 'node:net';
import { FerryError } from '../errors.ts';
import { log } from '../log.ts';
import { authFailuresTotal } from '../metrics.ts';

/**
 * Throttling of failed authentication, per client address, in this process's memory (docs/security.md,
 * "Failed authentication"). A token is 256 random bits, so guessing one is hopeless; the point is that
 * guessing is slow, visible (a warn line and a metric per failure) and cannot be run at line rate.
 *
 * An address whose presented credentials failed `limit` times within `windowMs` (counted from its
 * first failure) gets 429 AUTH_THROTTLED until that window ends, without its token being looked up.
 * Successes do not reset the count (a guesser holding one valid token must not clear its own record).
 * Memory is bounded: at most `maxAddresses` are tracked; the least recently failed is dropped first.
 */
export interface AuthThrottleOptions {
  limit: number;
  windowMs: number;
  maxAddresses: number;
  /** The clock, in ms (tests pass their own). */
  now?: () => number;
}

interface Entry {
  start: number;
  failures: number;
}

export class AuthThrottle {
  private readonly entries = new Map<string, Entry>();
  private readonly now: () => number;

  constructor(readonly options: AuthThrottleOptions) {
    this.now = options.now ?? Date.now;
  }

  /** Addresses currently tracked (bounded by maxAddresses). */
  get tracked(): number {
    return this.entries.size;
  }

  private live(client: string): Entry | undefined {
    const entry = this.entries.get(client);
    if (entry && this.now() >= entry.start + this.options.windowMs) {
      this.entries.delete(client);
      return undefined;
    }
    return entry;
  }

  /** Seconds until the client may try again, or null when it is not throttled. */
  retryAfterSeconds(client: string): number | null {
    const entry = this.live(client);
    if (!entry || entry.failures < this.options.limit) return null;
    return Math.max(1, Math.ceil((entry.start + this.options.windowMs - this.now()) / 1000));
  }

  /** Counts one failed authentication of the client; returns its failures in the current window. */
  fail(client: string): number {
    const entry = this.live(client) ?? { start: this.now(), failures: 0 };
    entry.failures++;
    // Re-inserted so the map's order is least recently failed first: that one is dropped at the cap.
    this.entries.delete(client);
    this.entries.set(client, entry);
    while (this.entries.size > this.options.maxAddresses) {
      const oldest = this.entries.keys().next().value as string;
      this.entries.delete(oldest);
    }
    return entry.failures;
  }
}

/** An IPv6 address's first four groups (its /64): one host usually holds a whole /64. */
function ipv6Prefix64(address: string): string {
  const [head, tail = ''] = address.split('::');
  const left = head ? head.split(':') : [];
  const right = address.includes('::') && tail ? tail.split(':') : [];
  const groups = address.includes('::') ? [...left, ...Array(8 - left.length - right.length).fill('0'), ...right] : left;
  return `${groups.slice(0, 4).map((g) => (parseInt(g, 16) || 0).toString(16)).join(':')}::/64`;
}

/**
 * The key a client is throttled under: the connection's peer address (no forwarding header is
 * trusted: a client could name any address in one), an IPv4-mapped IPv6 address as its IPv4, any
 * other IPv6 address by its /64. Requests without a socket (in-process) share `unknown`.
 */
export function clientKey(c: Context): string {
  const peer = (c.env as { incoming?: { socket?: { remoteAddress?: string } } } | undefined)?.incoming?.socket?.remoteAddress;
  if (!peer) return 'unknown';
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(peer);
  if (mapped) return mapped[1];
  if (isIPv4(peer)) return peer;
  if (isIPv6(peer)) return ipv6Prefix64(peer.split('%')[0]);
  return peer;
}

/** Refuses a throttled client before its credential is looked at (429 AUTH_THROTTLED, Retry-After). */
export function refuseIfThrottled(throttle: AuthThrottle | undefined, c: Context): void {
  if (!throttle) return;
  const client = clientKey(c);
  const wait = throttle.retryAfterSeconds(client);
  if (wait === null) return;
  authFailuresTotal.inc({ result: 'throttled' });
  c.header('Retry-After', String(wait));
  throw new FerryError('AUTH_THROTTLED', `too many failed authentications from this address; retry in ${wait} s`, {
    retry_after_seconds: wait,
  });
}

/**
 * Records a presented credential that did not authenticate: a warn line (client and path, never the
 * credential), the metric, and the throttle's count. Call it only when a credential was presented.
 */
export function recordAuthFailure(throttle: AuthThrottle | undefined, c: Context): void {
  const client = clientKey(c);
  authFailuresTotal.inc({ result: 'refused' });
  const failures = throttle?.fail(client);
  log.warn({ client, method: c.req.method, path: c.req.path, failures, limit: throttle?.options.limit }, 'authentication failed');
}
