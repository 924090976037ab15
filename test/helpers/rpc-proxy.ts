import { createServer, type IncomingMessage, type Server } from 'node:http';
import { listenOnLoopback } from './net.ts';

/**
 * A JSON-RPC pass-through on loopback in front of a real node, able to swallow the broadcast: in
 * `hold_before` an eth_sendRawTransaction is never forwarded and never answered (the bytes never
 * reach the chain); in `hold_after` it is forwarded and the chain's answer never comes back (the
 * transaction is on chain, the sender does not know). A process killed while held has died
 * exactly before or after its broadcast.
 */
export type ProxyMode = 'pass' | 'hold_before' | 'hold_after';

export interface RpcProxy {
  url: string;
  mode: ProxyMode;
  /** A provider that stops answering for `ms`: requests arriving meanwhile wait until it ends, then pass. */
  stall(ms: number): void;
  /** Resolves when the first broadcast is held. */
  held: Promise<string>;
  /** Methods answered with HTTP 503 while listed (a provider failing those calls). */
  failing: Set<string>;
  stop(): Promise<void>;
}

export async function startRpcProxy(target: string, mode: ProxyMode): Promise<RpcProxy> {
  let onHeld!: (raw: string) => void;
  const held = new Promise<string>((r) => (onHeld = r));
  let stalledUntil = 0;
  const proxy: RpcProxy = { url: '', mode, held, failing: new Set(), stop: async () => {}, stall: (ms) => void (stalledUntil = Math.max(stalledUntil, Date.now() + ms)) };
  const server: Server = createServer(async (req, res) => {
    const body = await read(req);
    const wait = stalledUntil - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    let method = '';
    let raw = '';
    try {
      const msg = JSON.parse(body) as { method?: string; params?: unknown[] };
      method = msg.method ?? '';
      raw = typeof msg.params?.[0] === 'string' ? (msg.params[0] as string) : '';
    } catch {
      // not ours to judge: forward
    }
    if (proxy.failing.has(method)) {
      res.writeHead(503, { 'content-type': 'text/plain' });
      res.end('unavailable');
      return;
    }
    const holding = method === 'eth_sendRawTransaction' && proxy.mode !== 'pass';
    if (holding && proxy.mode === 'hold_before') {
      onHeld(raw);
      return; // never forwarded, never answered
    }
    const answer = await fetch(target, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    const text = await answer.text();
    if (holding) {
      onHeld(raw);
      return; // on chain, but the answer is lost
    }
    res.writeHead(answer.status, { 'content-type': 'application/json' });
    res.end(text);
  });
  ({ url: proxy.url, stop: proxy.stop } = await listenOnLoopback(server));
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
