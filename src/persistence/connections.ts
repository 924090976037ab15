import pg from 'pg';
import type { ServerCapacity } from '../connection-budget.ts';

/**
 * What the server offers the connection budget: max_connections, the slots it reserves for
 * superusers (and, from PostgreSQL 16, for pg_use_reserved_connections), and the client
 * connections open right now that are not the Ferry runtime's own on this database.
 *
 * A snapshot, read on a short-lived connection of its own (not counted): connections that open or
 * close a moment later are not seen, which is what FERRY_DB_CONNECTION_RESERVE is for. The
 * runtime's own connections are recognised by application_name and database, so processes of the
 * same cluster starting together do not count each other's pools twice (the budget counts every
 * process's whole pools instead).
 */
export async function readServerCapacity(databaseUrl: string, ownApplicationNames: readonly string[]): Promise<ServerCapacity> {
  const client = new pg.Client({ connectionString: databaseUrl, application_name: 'ferry-budget', connectionTimeoutMillis: 10_000 });
  await client.connect();
  try {
    const { rows } = await client.query<{ max_connections: number; reserved: number; in_use_by_others: number }>(
      `SELECT current_setting('max_connections')::int AS max_connections,
              current_setting('superuser_reserved_connections')::int
                + coalesce(nullif(current_setting('reserved_connections', true), '')::int, 0) AS reserved,
              (SELECT count(*)::int FROM pg_stat_activity
                WHERE backend_type = 'client backend'
                  AND pid <> pg_backend_pid()
                  AND NOT (datname = current_database() AND application_name = ANY($1::text[]))) AS in_use_by_others`,
      [ownApplicationNames],
    );
    const r = rows[0];
    return { maxConnections: r.max_connections, reservedConnections: r.reserved, inUseByOthers: r.in_use_by_others };
  } finally {
    await client.end().catch(() => {});
  }
}
