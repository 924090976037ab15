/** Calling Ferry's HTTP API from a test: an in-process app (app.request) or a server at a base URL. */
import assert from 'node:assert/strict';
import type { Server } from 'node:http';
import { after } from 'node:test';
import { createAdaptorServer } from '@hono/node-server';
import { listenOnLoopback, type Listening } from './net.ts';

export interface Reply {
  status: number;
  /** The answer's JSON, or null when it is empty or not JSON. */
  body: any;
  /** The answer as sent. */
  text: string;
}

/** What `createApp()` returns, as far as a caller needs it. */
export interface InProcessApp {
  request(path: string, init: RequestInit): Response | Promise<Response>;
}

/** Sends JSON (when `body` is given) with a bearer token; the answer's status, JSON and text. */
export async function callApi(
  target: InProcessApp | string,
  method: string,
  path: string,
  token: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Reply> {
  const init: RequestInit = {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  };
  const res = typeof target === 'string' ? await fetch(`${target}${path}`, init) : await target.request(path, init);
  const text = await res.text();
  let parsed: unknown = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    // not JSON: the text says what came
  }
  return { status: res.status, body: parsed, text };
}

/** Asserts an answer's status (the body as the message) and, when given, its error code. */
export function expectStatus(r: Reply, status: number, code?: string): void {
  assert.equal(r.status, status, r.text);
  if (code) assert.equal(r.body?.error?.code, code, r.body?.error?.message ?? r.text);
}

/**
 * `call(method, path, who, body?, headers?)` for a test file's named tokens: callApi on `target`
 * with the bearer token of `tokens[who]`.
 */
export function callerFor<K extends string>(target: InProcessApp | string, tokens: Record<K, { token: string }>) {
  return (method: string, path: string, who: K, body?: unknown, headers: Record<string, string> = {}): Promise<Reply> =>
    callApi(target, method, path, tokens[who].token, body, headers);
}

/**
 * Serves an app's fetch handler over real HTTP on a free loopback port (for a CLI, a browser or
 * raw sockets). Stopped when the file ends, or earlier by `stop()`; open streams are cut.
 */
export async function serveApp(app: { fetch: (req: Request) => Response | Promise<Response> }): Promise<Listening> {
  const listening = await listenOnLoopback(createAdaptorServer({ fetch: app.fetch }) as Server);
  after(() => listening.stop());
  return listening;
}
