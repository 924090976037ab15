import { appendFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Webhook } from 'standardwebhooks';
import type { SandboxComponent, SandboxContext } from './component.ts';

/** One callback as the receiver saw it. */
export interface ReceivedCallback {
  event_type: string;
  movement_id: string;
  node_key: string | null;
  node_state: string | null;
  request_state: string;
  /** Whether its signature verified with the destination's secret. */
  verified: boolean;
}

/**
 * A callback receiver for the sandbox: a loopback HTTP server that Ferry knows as the callback
 * destination `name`, registered with node events, so a movement naming it reports every node's
 * state change as well as its own. Each callback is verified with the destination's secret (Ferry
 * hands it over at registration; Standard Webhooks) and written as one JSON line to callbacks.log in
 * the data folder; `GET /received` answers them all (for scripts and tests).
 */
export function callbackReceiver(opts: { name: string }): SandboxComponent {
  let server: Server | undefined;
  let secret: string | undefined;
  const received: ReceivedCallback[] = [];
  return {
    name: `callback receiver (${opts.name})`,
    async start(ctx: SandboxContext) {
      const logFile = join(ctx.dataDir, 'callbacks.log');
      server = createServer((req, res) => {
        if (req.method === 'GET' && req.url === '/received') {
          res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(received));
          return;
        }
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let verified = false;
          try {
            if (secret) {
              new Webhook(secret).verify(text, req.headers as Record<string, string>);
              verified = true;
            }
          } catch {
            // recorded as not verified
          }
          try {
            const body = JSON.parse(text) as { event_type: string; request_id: string; request_state: string; node_key?: string; node?: { node_state?: string } };
            const cb: ReceivedCallback = {
              event_type: body.event_type,
              movement_id: body.request_id,
              node_key: body.node_key ?? null,
              node_state: body.node?.node_state ?? null,
              request_state: body.request_state,
              verified,
            };
            received.push(cb);
            appendFileSync(logFile, JSON.stringify(cb) + '\n');
            res.writeHead(200).end();
          } catch {
            res.writeHead(400).end();
          }
        });
      });
      await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', () => resolve()));
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      // Callbacks to loopback are refused unless the operator allows it, as here.
      ctx.ferryEnv.FERRY_CALLBACK_ALLOWED_NETWORKS = '127.0.0.0/8';
      ctx.callbackDestinations ??= [];
      ctx.callbackDestinations.push({ name: opts.name, url: `${url}/callbacks`, nodeEvents: true, secret: (s) => (secret = s) });
      ctx.facts.callback_receiver = { name: opts.name, url, received_url: `${url}/received`, log: logFile };
    },
    async stop() {
      if (!server) return;
      server.closeAllConnections();
      await new Promise<void>((resolve) => server!.close(() => resolve()));
    },
  };
}
