/**
 * A PgBouncer in transaction mode on a loopback port, with a generated configuration in a
 * temporary folder, in front of the test PostgreSQL server. Tests skip when no pgbouncer binary
 * is installed (Debian: `apt-get install pgbouncer`; CI installs it).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, chmodSync, constants, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from './net.ts';
import { exited } from './processes.ts';
import { waitFor } from './wait.ts';

const CANDIDATES = [process.env.FERRY_TEST_PGBOUNCER, '/usr/sbin/pgbouncer', '/usr/bin/pgbouncer', '/usr/local/bin/pgbouncer'];

/** The pgbouncer binary, or null when none is installed. */
export function pgbouncerBinary(): string | null {
  for (const path of CANDIDATES) {
    if (!path) continue;
    try {
      accessSync(path, constants.X_OK);
      return path;
    } catch {
      // not here
    }
  }
  for (const dir of (process.env.PATH ?? '').split(':').filter(Boolean)) {
    try {
      accessSync(join(dir, 'pgbouncer'), constants.X_OK);
      return join(dir, 'pgbouncer');
    } catch {
      // not here
    }
  }
  return null;
}

export interface PgBouncer {
  /** A connection string through PgBouncer to `database` on the upstream server. */
  urlFor(database: string): string;
  /** Runs a command on PgBouncer's admin console (SHOW STATS, SHOW POOLS, ...). */
  admin<T extends Record<string, unknown>>(command: string): Promise<T[]>;
  /** The end of PgBouncer's log, for failure messages. */
  logTail(): string;
  stop(): Promise<void>;
}

export interface PgBouncerOptions {
  /** Server connections PgBouncer keeps per database and user (default_pool_size). */
  poolSize?: number;
}

/** Starts PgBouncer in front of the server `upstreamUrl` points at; resolves once it answers. */
export async function startPgBouncer(binary: string, upstreamUrl: string, opts: PgBouncerOptions = {}): Promise<PgBouncer> {
  const upstream = new URL(upstreamUrl);
  const user = decodeURIComponent(upstream.username || 'postgres');
  const password = decodeURIComponent(upstream.password);
  const dir = mkdtempSync(join(tmpdir(), 'ferry-pgbouncer-'));
  // As root, PgBouncer must switch to another user, who has to read this folder and write its log.
  chmodSync(dir, 0o755);
  const port = await freePort();
  const quote = (s: string) => `"${s.replace(/"/g, '""')}"`;
  writeFileSync(join(dir, 'users.txt'), `${quote(user)} ${quote(password)}\n`, { mode: 0o644 });
  const log = join(dir, 'pgbouncer.log');
  writeFileSync(
    join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `* = host=${upstream.hostname} port=${upstream.port || 5432}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${join(dir, 'users.txt')}`,
      `admin_users = ${user}`,
      'pool_mode = transaction',
      'max_client_conn = 1000',
      `default_pool_size = ${opts.poolSize ?? 20}`,
      'max_db_connections = 0',
      `logfile = ${log}`,
      'log_connections = 0',
      'log_disconnections = 0',
      '',
    ].join('\n'),
    { mode: 0o644 },
  );
  writeFileSync(log, '');
  chmodSync(log, 0o666);
  const args = process.getuid?.() === 0 ? ['-u', 'postgres', join(dir, 'pgbouncer.ini')] : [join(dir, 'pgbouncer.ini')];
  const child: ChildProcess = spawn(binary, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (d) => (stderr += String(d)));

  const logTail = () => {
    let text = stderr;
    try {
      text += readFileSync(log, 'utf8');
    } catch {
      // no log yet
    }
    return text.split('\n').slice(-20).join('\n');
  };
  const adminUrl = () => {
    const u = new URL(upstreamUrl);
    u.hostname = '127.0.0.1';
    u.port = String(port);
    u.pathname = '/pgbouncer';
    return u.toString();
  };
  const admin = async <T extends Record<string, unknown>>(command: string): Promise<T[]> => {
    const client = new pg.Client({ connectionString: adminUrl() });
    await client.connect();
    try {
      return (await client.query<T>(command)).rows;
    } finally {
      await client.end().catch(() => {});
    }
  };

  try {
    await waitFor(
      'pgbouncer to answer',
      async () => {
        if (child.exitCode !== null) throw new Error(`pgbouncer exited with ${child.exitCode}: ${logTail()}`);
        return admin('SHOW VERSION').then(
          () => true,
          () => false,
        );
      },
      20_000,
      100,
    );
  } catch (err) {
    child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }

  return {
    urlFor(database) {
      const u = new URL(upstreamUrl);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      u.pathname = '/' + database;
      return u.toString();
    },
    admin,
    logTail,
    async stop() {
      // SIGTERM: PgBouncer's immediate shutdown.
      child.kill('SIGTERM');
      await exited(child);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
