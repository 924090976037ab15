import { fileURLToPath } from 'node:url';
import { runner } from 'node-pg-migrate';
import pg from 'pg';
import { APP_NAMES } from '../connection-budget.ts';

export const migrationsDir = fileURLToPath(new URL('../../migrations', import.meta.url));

/**
 * Applies every pending migration in migrations/. Several processes starting at once are safe:
 * the migration library holds an advisory lock and the others wait for it, then find nothing to do.
 */
export async function migrate(databaseUrl: string, log: (msg: string) => void = () => {}, onPending?: (count: number) => void): Promise<string[]> {
  const client = new pg.Client({ connectionString: databaseUrl, application_name: APP_NAMES.migrate });
  // A connection cut mid-migration fails the running query, which is the error to report; the
  // client's own 'error' event must not also crash the process.
  client.on('error', () => {});
  await client.connect();
  try {
    if (onPending) {
      const pending = await pendingMigrations(client);
      if (pending > 0) onPending(pending);
    }
    const applied = await runner({
      dbClient: client,
      dir: migrationsDir,
      migrationsTable: 'ferry_migrations',
      direction: 'up',
      singleTransaction: true,
      advisoryLockMode: 'wait',
      checkOrder: true,
      log,
      logger: { debug: () => {}, info: log, warn: log, error: log },
    } as Parameters<typeof runner>[0]);
    return applied.map((m) => m.name);
  } finally {
    await client.end();
  }
}

/** The names of the migration files, in order; readiness compares them with what is applied. */
export async function pendingMigrations(db: pg.Pool | pg.Client): Promise<number> {
  const { readdirSync } = await import('node:fs');
  const files = readdirSync(migrationsDir).filter((f) => f.endsWith('.sql'));
  try {
    const { rows } = await db.query<{ name: string }>('SELECT name FROM ferry_migrations');
    const done = new Set(rows.map((r) => r.name));
    return files.filter((f) => !done.has(f.replace(/\.sql$/, ''))).length;
  } catch {
    return files.length;
  }
}
