import type { Queryable } from './db.ts';

/**
 * Reads of pg-boss's own job table, for what Ferry records about changes made through the pg-boss
 * dashboard (src/services/dashboard-actions.ts). Ferry never writes these rows.
 */

/** The schema pg-boss's tables live in (Ferry's migrations grant the application role its use). */
export const PGBOSS_SCHEMA = 'pgboss';

const IDENTIFIER = /^[a-z_][a-z0-9_]*$/i;

/** The state of one job of one queue, or null when there is no such job. */
export async function pgbossJobState(db: Queryable, schema: string, queue: string, jobId: string): Promise<string | null> {
  if (!IDENTIFIER.test(schema)) throw new Error(`not a schema name: ${schema}`);
  const { rows } = await db.query<{ state: string }>(`SELECT state::text AS state FROM "${schema}".job WHERE name = $1 AND id = $2::uuid`, [queue, jobId]);
  return rows[0]?.state ?? null;
}
