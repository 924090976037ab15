import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { loadConfig } from '../config.ts';
import { createPool, ping, type Pool } from '../persistence/db.ts';
import type { EmbeddedServer } from '../persistence/embedded.ts';
import { EMBEDDED_APP_ROLE, prepareDatabase } from '../persistence/roles.ts';
import { rememberNewPort, resolveEmbeddedPort } from '../persistence/embedded-port.ts';
import { migrate, pendingMigrations } from '../persistence/migrate.ts';
import type { PgBoss } from 'pg-boss';
import { startBoss, stopBoss } from '../actors/boss.ts';
import { CliError, type CliContext } from './command.ts';

/**
 * Which database a CLI command talks to, following the same rule as the server: DATABASE_URL when
 * set, else the embedded PostgreSQL kept in FERRY_DATA_DIR. When Ferry is already running on the
 * embedded server the command connects to it; otherwise it starts the server for the duration of
 * the command (migrating it first, as Ferry's own start would) and stops it afterwards.
 */

export interface CliDatabase {
  url: string;
  /** The role migrations run as: FERRY_DATABASE_OWNER_URL, or the embedded server's superuser. */
  ownerUrl?: string;
  /** The URL the runtime connects with (its application role), when it differs from url. */
  appUrl?: string;
  /** Where session work (migrations' advisory lock) goes: FERRY_DATABASE_DIRECT_URL, else url. */
  directUrl: string;
  pool: Pool;
  source: 'database-url' | 'embedded-running' | 'embedded-started';
  /** The embedded server's data folder (embedded sources only). */
  dataDir?: string;
}

/** host:port/database of a PostgreSQL URL: no user, no password. */
export function databaseAddress(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || '5432'}${u.pathname.length > 1 ? decodeURIComponent(u.pathname) : '/'}`;
  } catch {
    return '(unparseable URL)';
  }
}

/** Which database a command opened, in words (host:port/database and where it came from; no user or password). */
export function openedDatabase(db: CliDatabase): string {
  if (db.source === 'database-url') return `${databaseAddress(db.url)} (DATABASE_URL)`;
  const started = db.source === 'embedded-started' ? ', started for this command' : '';
  return `${databaseAddress(db.url)} (the embedded PostgreSQL of ${db.dataDir ?? 'FERRY_DATA_DIR'}${started})`;
}

/**
 * 'require-migrated': refuse to run against a database with pending migrations (commands that read
 * or write Ferry's tables); 'as-is': hand over the database untouched (the migrate command itself).
 */
export type DatabaseMode = 'require-migrated' | 'as-is';

interface Opened {
  db: CliDatabase;
  close(): Promise<void>;
}

export async function withCliDatabase<T>(
  env: NodeJS.ProcessEnv,
  fn: (db: CliDatabase) => Promise<T>,
  mode: DatabaseMode = 'require-migrated',
): Promise<T> {
  const opened = await openCliDatabase(env, mode);
  try {
    return await fn(opened.db);
  } finally {
    await opened.close();
  }
}

async function openCliDatabase(env: NodeJS.ProcessEnv, mode: DatabaseMode): Promise<Opened> {
  const config = loadConfig(env);
  if (config.databaseUrl) {
    const opened = await openUrl(config.databaseUrl, 'database-url', mode, config.databaseDirectUrl);
    opened.db.ownerUrl = config.databaseOwnerUrl;
    return opened;
  }

  const dataDir = resolve(config.dataDir);
  const port = await resolveEmbeddedPort(dataDir, config.embeddedPgPort);
  const running = await runningEmbeddedUrl(dataDir, port);
  if (running) {
    // As the application role: a running Ferry keeps no superuser login (its start dropped it).
    const opened = await openUrl(running, 'embedded-running', mode);
    opened.db.appUrl = running;
    opened.db.dataDir = dataDir;
    return opened;
  }

  let server: EmbeddedServer;
  try {
    // Loaded only here: the package hooks process signals and exit as soon as it is imported.
    const { startEmbeddedPostgres } = await import('../persistence/embedded.ts');
    server = await startEmbeddedPostgres({
      dataDir,
      port,
      nextPort: config.embeddedPgPort === undefined ? () => rememberNewPort(dataDir) : undefined,
      sharedDir: config.embeddedPgSharedDir,
    });
  } catch (err) {
    throw new CliError(`could not start the embedded PostgreSQL in ${dataDir}: ${message(err)}`);
  }
  try {
    // A command that reads or writes Ferry's tables does it as the runtime would, as the
    // application role; `migrate` and `db setup-roles` ('as-is') get the superuser for their work.
    let url = server.url;
    if (mode === 'require-migrated') {
      await prepareDatabase({ ownerUrl: server.url, appUrl: server.appUrl, setup: true, migrate: (u) => migrate(u) });
      url = server.appUrl;
    }
    const pool = createPool(url, 4, 'ferry-cli');
    return {
      db: { url, directUrl: url, ownerUrl: server.url, appUrl: server.appUrl, pool, source: 'embedded-started', dataDir },
      close: async () => {
        await pool.end();
        await server.dropOwner().catch(() => {});
        await server.stop();
      },
    };
  } catch (err) {
    await server.stop();
    throw err;
  }
}

async function openUrl(url: string, source: CliDatabase['source'], mode: DatabaseMode, directUrl = url): Promise<Opened> {
  const pool = createPool(url, 4, 'ferry-cli');
  try {
    await ping(pool);
    if (mode === 'require-migrated') {
      const pending = await pendingMigrations(pool);
      if (pending > 0) {
        throw new CliError(`the database has ${pending} pending migration(s); run \`ferry migrate\` first`);
      }
    }
  } catch (err) {
    await pool.end();
    if (err instanceof CliError) throw err;
    throw new CliError(`cannot use the database at ${redactUrl(url)}: ${message(err)}`);
  }
  return { db: { url, directUrl, pool, source }, close: () => pool.end() };
}

/**
 * The application role's URL of the embedded server when one already answers on the port with this
 * data folder's credentials; null when nothing listens there (so the caller may start it).
 */
async function runningEmbeddedUrl(dataDir: string, port: number): Promise<string | null> {
  const passwordFile = join(dataDir, 'pg-app-password');
  const password = existsSync(passwordFile) ? readFileSync(passwordFile, 'utf8').trim() : null;
  const url = `postgres://${EMBEDDED_APP_ROLE}:${encodeURIComponent(password ?? '')}@127.0.0.1:${port}/ferry`;
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  try {
    await client.connect();
    await client.end();
    return url;
  } catch (err) {
    await client.end().catch(() => {});
    if ((err as { code?: string }).code === 'ECONNREFUSED') return null;
    throw new CliError(
      `a server answers on 127.0.0.1:${port} but is not the embedded Ferry database of ${dataDir} ` +
        `(${message(err)}); set DATABASE_URL, FERRY_DATA_DIR or FERRY_EMBEDDED_PG_PORT`,
    );
  }
}

/** The URL without its password, for messages. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparseable URL)';
  }
}

function message(err: unknown): string {
  if (err instanceof Error) {
    // pg reports "connect ECONNREFUSED ..." inside an AggregateError with an empty message.
    if (!err.message && err instanceof AggregateError) return err.errors.map(message).join('; ');
    return err.message || String((err as { code?: string }).code ?? err);
  }
  return String(err);
}

/** pg-boss for one command: no maintenance, no cron, closed afterwards. */
export async function withBoss<T>(ctx: CliContext, fn: (db: CliDatabase, boss: PgBoss) => Promise<T>): Promise<T> {
  return ctx.withDatabase(async (db) => {
    const boss = await startBoss(db.url, { supervise: false, schedule: false, max: 2 });
    try {
      return await fn(db, boss);
    } finally {
      await stopBoss(boss, { timeoutMs: 5_000 });
    }
  });
}
