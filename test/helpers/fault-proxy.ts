import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { listenOnLoopback } from './net.ts';

/**
 * An HTTP pass-through on loopback in front of one provider (a chain's JSON-RPC, the attestation
 * service, an exchange), with faults switched on for a span of time or for one request:
 *
 * - `stall(ms)`: the provider stops answering; requests arriving meanwhile wait, then pass;
 * - `down(ms)`: the provider is unreachable; requests arriving meanwhile have their connection
 *   reset before anything is forwarded;
 * - `slow(ms, delayMs)`: each request arriving meanwhile is forwarded, and its answer delivered
 *   `delayMs` later (the provider acted; the caller may have given up);
 * - `onRequest`: consulted before forwarding; `hold` swallows the request (never forwarded, never
 *   answered: the provider never saw it);
 * - `onAnswer`: consulted with the provider's answer; `hold` keeps it from the caller (the provider
 *   acted, the caller never hears).
 *
 * A held request stays open until the caller goes away (a killed process) or the proxy stops.
 */
export interface ProxiedRequest {
  method: string;
  path: string;
  body: string;
}

export type Verdict = 'pass' | 'hold';

export interface FaultProxy {
  url: string;
  stall(ms: number): void;
  down(ms: number): void;
  slow(ms: number, delayMs: number): void;
  onRequest: ((r: ProxiedRequest) => Verdict) | null;
  onAnswer: ((r: ProxiedRequest, answer: { status: number; body: string }) => Verdict) | null;
  stop(): Promise<void>;
}

export async function startFaultProxy(target: string): Promise<FaultProxy> {
  let stalledUntil = 0;
  let downUntil = 0;
  let slowUntil = 0;
  let slowBy = 0;
  const held = new Set<ServerResponse>();
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const proxy: FaultProxy = {
    url: '',
    stall: (ms) => void (stalledUntil = Math.max(stalledUntil, Date.now() + ms)),
    down: (ms) => void (downUntil = Math.max(downUntil, Date.now() + ms)),
    slow: (ms, delayMs) => {
      slowUntil = Math.max(slowUntil, Date.now() + ms);
      slowBy = delayMs;
    },
    onRequest: null,
    onAnswer: null,
    stop: async () => {},
  };
  const hold = (res: ServerResponse) => {
    held.add(res);
    res.on('close', () => held.delete(res));
  };
  const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const body = await read(req);
    const r: ProxiedRequest = { method: req.method ?? 'GET', path: req.url ?? '/', body };
    if (Date.now() < downUntil) return void req.socket.destroy();
    const wait = stalledUntil - Date.now();
    if (wait > 0) await sleep(wait);
    if (proxy.onRequest?.(r) === 'hold') return hold(res);
    const delay = Date.now() < slowUntil ? slowBy : 0;
    let status: number;
    let text: string;
    let type: string;
    try {
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string' && !['host', 'connection', 'content-length'].includes(k)) headers[k] = v;
      const answer = await fetch(target + r.path, { method: r.method, headers, body: r.method === 'GET' || r.method === 'HEAD' ? undefined : body });
      status = answer.status;
      text = await answer.text();
      type = answer.headers.get('content-type') ?? 'application/json';
      const retryAfter = answer.headers.get('retry-after');
      if (retryAfter !== null) res.setHeader('retry-after', retryAfter);
    } catch {
      return void req.socket.destroy();
    }
    if (delay > 0) await sleep(delay);
    if (proxy.onAnswer?.(r, { status, body: text }) === 'hold') return hold(res);
    res.writeHead(status, { 'content-type': type });
    res.end(text);
  });
  const listening = await listenOnLoopback(server);
  proxy.url = listening.url;
  proxy.stop = async () => {
    for (const res of held) res.socket?.destroy();
    held.clear();
    await listening.stop();
  };
  return proxy;
}

function read(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let s = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (s += c));
    req.on('end', () => resolve(s));
    req.on('error', reject);
  });
}
