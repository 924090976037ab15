/**
 * A loopback HTTP receiver for Ferry's callbacks: records every request with its raw bytes and
 * answers with the status a test chooses (holding the answer while `gate` is set).
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { within } from './wait.ts';

export interface Received {
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
        this.received.push({ headers: req.headers, body: Buffer.concat(chunks) });
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
