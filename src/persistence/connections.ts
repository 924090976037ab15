import pg from 'pg';
import { APP_NAMES, type ServerCapacity } from '../connection-budget.ts';

/**
 * What the server offers the connection budget: max_connections, the slots it reserves for
 * superusers (and, from PostgreSQL 16, for pg_use_reserved_connections), and the client
 * connections open right now that are not the Ferry runtime's own on this database.
 *
 * A snapshot, read on a short-lived connection of its own (not counted): connections that open or
 * close a moment later, or are still authenticating, are not seen, which is what
 * FERRY_DB_CONNECTION_RESERVE is for. Read as the application role: PostgreSQL shows every role
 * the settings and, in pg_stat_activity, every session's user, database and application_name (not
 * its backend type or query without pg_read_all_stats), which is all the count needs. The
 * runtime's own connections are recognised by application_name and database, so processes of the
 * same cluster starting together do not count each other's pools twice (the budget counts every
 * process's whole pools instead).
 */
export async function readServerCapacity(databaseUrl: string, ownApplicationNames: readonly string[]): Promise<ServerCapacity> {
  const client = new pg.Client({ connectionString: databaseUrl, application_name: APP_NAMES.budget, connectionTimeoutMillis: 10_000 });
  await client.connect();
  try {
    const { rows } = await client.query<{ max_connections: number; reserved: number; others: Record<string, number> | null }>(
      `SELECT current_setting('max_connections')::int AS max_connections,
              current_setting('superuser_reserved_connections')::int
                + coalesce(nullif(current_setting('reserved_connections', true), '')::int, 0) AS reserved,
              (SELECT jsonb_object_agg(app, n) FROM (
                 SELECT coalesce(nullif(application_name, ''), '(unnamed)') AS app, count(*)::int AS n
                   FROM pg_stat_activity
                  -- Another role's row shows no backend_type to a role without pg_read_all_stats
                  -- (the application role), only its user, database and application_name: a row
                  -- with a user and a database is a session (or a parallel worker, counted too).
                  WHERE (backend_type = 'client backend' OR (backend_type IS NULL AND usesysid IS NOT NULL))
                    AND pid <> pg_backend_pid()
                    -- Still authenticating: not yet anyone's (its name and database arrive with it).
                    AND datname IS NOT NULL
                    AND NOT (datname = current_database() AND application_name = ANY($1::text[]))
                  GROUP BY 1) o) AS others`,
      [ownApplicationNames],
    );
    const r = rows[0];
    const othersByApplication = r.others ?? {};
    const inUseByOthers = Object.values(othersByApplication).reduce((a, b) => a + b, 0);
    return { maxConnections: r.max_connections, reservedConnections: r.reserved, inUseByOthers, othersByApplication };
  } finally {
    await client.end().catch(() => {});
  }
}
