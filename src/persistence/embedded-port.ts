import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';

/** The embedded PostgreSQL's port when FERRY_EMBEDDED_PG_PORT is not set and nothing else holds it. */
export const DEFAULT_EMBEDDED_PG_PORT = 54329;

/** The file in the data folder that remembers a port picked because the default was taken. */
export const EMBEDDED_PORT_FILE = 'pg-port';

/**
 * The port the embedded PostgreSQL of `dataDir` uses:
 *
 * - `explicit` (FERRY_EMBEDDED_PG_PORT) when set, always, taken or not (a clash is then the
 *   operator's to resolve, and start-up says so);
 * - else the port remembered in the data folder, or the default;
 * - when that port is held by something other than this data folder's own server (another
 *   checkout's Ferry, any other program), a free loopback port, remembered in the data folder so
 *   the next start (and the CLI) finds the same server again.
 *
 * A port found free may be taken by someone else before PostgreSQL binds it: the start then binds
 * again on a new port (see `rememberNewPort` and startEmbeddedPostgres's `nextPort`), except for an
 * explicit port, whose clash fails with the server's own words.
 */
export async function resolveEmbeddedPort(
  dataDir: string,
  explicit: number | undefined,
  defaultPort: number = DEFAULT_EMBEDDED_PG_PORT,
): Promise<number> {
  if (explicit !== undefined) return explicit;
  const root = resolve(dataDir);
  const file = join(root, EMBEDDED_PORT_FILE);
  // The folder's own server, running (the sandbox's, started on an explicit port; or one a killed
  // Ferry left behind): its port, so a CLI command finds it and start-up can take it over.
  const own = ownServerPort(root);
  if (own !== undefined) return own;
  const wanted = rememberedPort(file) ?? defaultPort;
  if (await portIsFree(wanted)) return wanted;
  return rememberNewPort(root);
}

/**
 * A free loopback port for the data folder's server, remembered in the folder. Used when the
 * resolved port was free when looked at but taken when PostgreSQL bound it (two first starts at the
 * same moment): the start binds again on this one instead of failing.
 */
export async function rememberNewPort(dataDir: string): Promise<number> {
  const root = resolve(dataDir);
  const picked = await freeLoopbackPort();
  mkdirSync(root, { recursive: true });
  writeFileSync(join(root, EMBEDDED_PORT_FILE), `${picked}\n`);
  return picked;
}

function rememberedPort(file: string): number | undefined {
  if (!existsSync(file)) return undefined;
  const n = Number(readFileSync(file, 'utf8').trim());
  return Number.isInteger(n) && n >= 1 && n <= 65535 ? n : undefined;
}

/**
 * The port this data folder's PostgreSQL listens on while it runs: the fourth line of
 * postmaster.pid, when the process named on its first line is alive.
 */
export function ownServerPort(root: string): number | undefined {
  const pidFile = join(root, 'pg', 'postmaster.pid');
  if (!existsSync(pidFile)) return undefined;
  const lines = readFileSync(pidFile, 'utf8').split('\n');
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  if (!Number.isInteger(pid) || pid <= 0 || !Number.isInteger(port)) return undefined;
  try {
    process.kill(pid, 0);
  } catch (err) {
    // EPERM: alive, owned by another user (as root, PostgreSQL runs as its own user).
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return undefined;
  }
  return port;
}

function portIsFree(port: number): Promise<boolean> {
  return new Promise((done) => {
    const probe = createServer();
    probe.once('error', () => done(false));
    probe.listen({ port, host: '127.0.0.1', exclusive: true }, () => probe.close(() => done(true)));
  });
}

function freeLoopbackPort(): Promise<number> {
  return new Promise((done, fail) => {
    const probe = createServer();
    probe.once('error', fail);
    probe.listen({ port: 0, host: '127.0.0.1', exclusive: true }, () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => done(port));
    });
  });
}
