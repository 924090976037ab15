import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { migrate, migrationsDir } from '../../src/persistence/migrate.ts';

/**
 * Databases for tests: one migrated template per migration set, and a fresh copy of it per test
 * file, so files run in parallel and a failed file's database can be kept for inspection.
 */

export function templateName(): string {
  const h = createHash('sha256');
  for (const f of readdirSync(migrationsDir).sort()) h.update(f).update(readFileSync(join(migrationsDir, f)));
  return `ferry_tpl_${h.digest('hex').slice(0, 12)}`;
}

export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = '/' + database;
  return u.toString();
}

/** Creates and migrates the template database unless it already exists (serialised by an advisory lock). */
export async function ensureTemplate(adminUrl: string): Promise<string> {
  const name = templateName();
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query('SELECT pg_advisory_lock(7346021)');
    const { rowCount } = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (!rowCount) {
      const building = `${name}_build`;
      await admin.query(`DROP DATABASE IF EXISTS ${building}`);
      await admin.query(`CREATE DATABASE ${building}`);
      await migrate(withDatabase(adminUrl, building));
      await admin.query(`ALTER DATABASE ${building} RENAME TO ${name}`);
    }
    await admin.query('SELECT pg_advisory_unlock(7346021)');
    return name;
  } finally {
    await admin.end();
  }
}

/** A template younger than this may belong to another checkout's test run going on right now. */
const TEMPLATE_KEEP_MS = 60 * 60 * 1000;

/**
 * Drops databases left by earlier test runs (kept because their files failed) and stale templates,
 * but never another run's: a test database whose process (`ferry_t_<pid>_...`) is still alive on
 * this machine, or a template created within the last hour (another checkout, with other
 * migrations, may be cloning it between two files).
 */
export async function dropOldTestDatabases(adminUrl: string, keepTemplate: string): Promise<void> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    const { rows } = await admin.query<{ datname: string; created: Date | null }>(
      `SELECT datname, created FROM pg_database d
         LEFT JOIN LATERAL (SELECT (pg_stat_file('base/' || d.oid || '/PG_VERSION', true)).modification AS created) f ON true
        WHERE (datname LIKE 'ferry\\_t\\_%' OR datname LIKE 'ferry\\_tpl\\_%') AND datname <> $1`,
      [keepTemplate],
    ).catch(() =>
      // pg_stat_file needs a superuser (or pg_read_server_files); without it, ages are unknown.
      admin.query<{ datname: string; created: Date | null }>(
        `SELECT datname, NULL::timestamptz AS created FROM pg_database
          WHERE (datname LIKE 'ferry\\_t\\_%' OR datname LIKE 'ferry\\_tpl\\_%') AND datname <> $1`,
        [keepTemplate],
      ),
    );
    for (const { datname, created } of rows) {
      if (datname.startsWith('ferry_tpl_') && (!created || Date.now() - created.getTime() < TEMPLATE_KEEP_MS)) continue;
      const pid = /^ferry_t_(\d+)_/.exec(datname)?.[1];
      if (pid && processAlive(Number(pid))) continue;
      // Without FORCE: a database another test run is using right now (its connections are open)
      // is left alone; the drop fails with 55006 and we move on.
      await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(datname)}`).catch(() => {});
    }
  } finally {
    await admin.end();
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export async function cloneTemplate(adminUrl: string, template: string, name: string): Promise<string> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    for (let attempt = 0; ; attempt++) {
      try {
        await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(name)} TEMPLATE ${pg.escapeIdentifier(template)}`);
        break;
      } catch (err) {
        // 55006: the template is briefly in use by another file's CREATE DATABASE; try again.
        if ((err as { code?: string }).code !== '55006' || attempt > 50) throw err;
        await new Promise((r) => setTimeout(r, 100 + Math.random() * 200));
      }
    }
  } finally {
    await admin.end();
  }
  return withDatabase(adminUrl, name);
}

export async function dropDatabase(adminUrl: string, name: string): Promise<void> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`);
  } finally {
    await admin.end();
  }
}

/** Creates a database with nothing in it (no migrations), for tests that exercise start-up itself. */
export async function createEmptyDatabase(adminUrl: string, name: string): Promise<string> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`);
  } finally {
    await admin.end();
  }
  return withDatabase(adminUrl, name);
}

/** Names of the databases whose name starts with `prefix` (scratch databases of tests and the benchmark). */
export async function databasesNamed(adminUrl: string, prefix: string): Promise<string[]> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    const like = prefix.replace(/[\\%_]/g, (c) => `\\${c}`) + '%';
    const { rows } = await admin.query<{ datname: string }>('SELECT datname FROM pg_database WHERE datname LIKE $1 ORDER BY datname', [like]);
    return rows.map((r) => r.datname);
  } finally {
    await admin.end();
  }
}

/** Drops a database only when nobody is connected to it (a run still using it keeps it); false when in use. */
export async function dropDatabaseIfUnused(adminUrl: string, name: string): Promise<boolean> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)}`);
    return true;
  } catch (err) {
    if ((err as { code?: string }).code === '55006') return false;
    throw err;
  } finally {
    await admin.end();
  }
}
