import { createHash, timingSafeEqual } from 'node:crypto';
import { serve } from '@hono/node-server';
import type { Context, Hono, MiddlewareHandler } from 'hono';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { z } from 'zod';
import { errorStatus } from '../errors.ts';
import { isMovementError, TemporaryMovementError } from '../executors/errors.ts';
import { HOST_REQUEST_HEADERS, type HostRequestVerifier } from '../executors/host-requests.ts';
import { describeIssues } from '../executors/protocol.ts';
import type { Logger } from '../log.ts';

/**
 * What the executor host and the signer host share: bearer authentication compared in constant
 * time, the mapping of an implementation's errors to the HTTP answers the remote proxies
 * (src/executors/remote-proxy.ts, signers/remote-proxy.ts) read back, and listening/stopping.
 * Neither the token nor a request's body is ever logged.
 */

/** The shortest bearer token a host accepts to start with. */
export const MIN_HOST_TOKEN_LENGTH = 16;

const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();

/** Refuses (401) a request without `Authorization: Bearer <token>`; the comparison takes the same time whatever is sent. */
export function bearerAuth(token: string): MiddlewareHandler {
  const expected = digest(token);
  return async (c, next) => {
    const header = c.req.header('authorization') ?? '';
    const given = header.startsWith('Bearer ') ? header.slice('Bearer '.length) : '';
    if (!timingSafeEqual(digest(given), expected) || given.length === 0) {
      return c.json({ code: 'HOST_UNAUTHORIZED', message: 'a valid bearer token is required' }, 401, { 'www-authenticate': 'Bearer' });
    }
    await next();
  };
}

/**
 * Refuses a POST Ferry did not sign (src/executors/host-requests.ts): unsigned, signed by a key the
 * host does not pin or for a key it does not serve (`audiences`; null: the route compares the
 * audience with what the body names), outside the replay window, or a
 * repeat. Runs after the bearer check and the body limit; the body it verifies is the one the
 * route then parses (Hono keeps it). GET /health needs the bearer token only.
 */
export function signedRequests(verifier: HostRequestVerifier, audiences: ReadonlySet<string> | null, log: Logger): MiddlewareHandler {
  return async (c, next) => {
    if (c.req.method !== 'POST') return next();
    const body = await c.req.text();
    const verdict = verifier.verify({ method: c.req.method, path: c.req.path, header: (name) => c.req.header(name), body, audiences });
    if (!verdict.ok) {
      log.warn({ path: c.req.path, error_code: verdict.code, audience: c.req.header(HOST_REQUEST_HEADERS.audience)?.slice(0, 200) ?? null }, 'host request refused');
      const status = errorStatus[verdict.code] as 401 | 409 | 503;
      return c.json({ code: verdict.code, message: verdict.message }, status, status === 503 ? { 'retry-after': '1' } : {});
    }
    await next();
  };
}

/** The audience the verified request was signed for (set only behind signedRequests). */
export function signedAudience(c: Context): string | undefined {
  return c.req.header(HOST_REQUEST_HEADERS.audience);
}

/** A body that does not parse: 400, which the proxies read as a refusal (nothing was done). */
export async function parseBody<T extends z.ZodType>(c: Context, schema: T): Promise<{ ok: true; value: z.output<T> } | { ok: false; response: Response }> {
  let json: unknown;
  try {
    json = await c.req.json();
  } catch {
    return { ok: false, response: c.json({ code: 'HOST_INVALID_REQUEST', message: 'the body is not JSON' }, 400) };
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) return { ok: false, response: c.json({ code: 'HOST_INVALID_REQUEST', message: describeIssues(parsed.error) }, 400) };
  return { ok: true, value: parsed.data };
}

/**
 * An implementation's error as an answer: temporary -> 503 (with Retry-After when known), which
 * the proxies retry (and a submit proxy turns into UNKNOWN, since the call may have acted); a
 * deliberate refusal -> 422 with its code; anything else -> 500. The message is the
 * implementation's own, which redacts its secrets; nothing else of the request is echoed.
 */
export function errorAnswer(c: Context, err: unknown): Response {
  if (isMovementError(err)) {
    const retry = err.details.retry_after_seconds;
    const headers: Record<string, string> = typeof retry === 'number' && retry >= 0 ? { 'retry-after': String(Math.ceil(retry)) } : {};
    return c.json({ code: err.code, message: err.message }, err instanceof TemporaryMovementError ? 503 : 422, headers);
  }
  return c.json({ code: 'HOST_INTERNAL_ERROR', message: 'the host failed while handling the request' }, 500);
}

/** Logs one answered call: what, for which node, how it ended, never the body or the headers. */
export function callLog(log: Logger, fields: Record<string, unknown>, status: number, started: number, err?: unknown): void {
  const line = { ...fields, status, ms: Date.now() - started, ...(err ? { error_code: isMovementError(err) ? err.code : 'HOST_INTERNAL_ERROR', error: (err as Error).message } : {}) };
  if (status >= 500) log.warn(line, 'host call failed');
  else log.info(line, 'host call');
}

export interface ListeningHost {
  url: string;
  server: Server;
  stop(): Promise<void>;
}

export function listenHost(app: Hono, hostname: string, port: number): Promise<ListeningHost> {
  return new Promise((resolve, reject) => {
    const server = serve({ fetch: app.fetch, hostname, port }, (info) => {
      server.off('error', reject);
      const address = server.address() as AddressInfo;
      const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address;
      resolve({
        url: `http://${shown}:${info.port}`,
        server: server as Server,
        stop: () =>
          new Promise<void>((done) => {
            (server as Server).closeAllConnections();
            server.close(() => done());
          }),
      });
    }) as Server;
    server.once('error', reject);
  });
}
