/** Loopback ports and servers for tests: a port nobody holds, whether a port answers, a server on loopback. */
import type { Server } from 'node:http';
import { connect, createServer, type AddressInfo } from 'node:net';

/** A loopback port free at the time of the call (the OS picks it). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** A URL on which nothing listens: a port that was free a moment ago. */
export async function deadUrl(path = ''): Promise<string> {
  return `http://127.0.0.1:${await freePort()}${path}`;
}

/** True when nothing accepts connections on 127.0.0.1:port. */
export function portRefuses(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', () => resolve(true));
  });
}

export interface Listening {
  url: string;
  port: number;
  /** Cuts every open connection (held answers, streams) and closes the server; safe to call twice. */
  stop(): Promise<void>;
}

/** Listens with `server` on 127.0.0.1 (`port`, or one the OS picks). */
export async function listenOnLoopback(server: Server, port = 0): Promise<Listening> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const bound = (server.address() as AddressInfo).port;
  let stopped: Promise<void> | null = null;
  return {
    url: `http://127.0.0.1:${bound}`,
    port: bound,
    stop: () =>
      (stopped ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      })),
  };
}
