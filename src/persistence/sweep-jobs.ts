import type { Queryable } from './db.ts';

/**
 * Reads of the sweep runs pg-boss keeps (one job per run, in pg-boss's own job table). Ferry never
 * writes these rows itself: pg-boss owns them, and every change goes through its API. These are
 * plain snapshot reads without locks, for the workers report; a run that settles meanwhile shows up
 * on the next read.
 */

export interface SweepJobRow {
  name: string;
  id: string;
  state: 'created' | 'retry' | 'active' | 'completed' | 'cancelled' | 'failed';
  data: Record<string, unknown> | null;
  output: Record<string, unknown> | null;
  retry_count: number;
  start_after: Date;
  started_on: Date | null;
  completed_on: Date | null;
  created_on: Date;
}

// The schema is Ferry's own constant (never input); checked anyway, as it is spliced into the text.
function table(schema: string): string {
  if (!/^[a-z_][a-z0-9_]*$/.test(schema)) throw new Error(`unexpected pg-boss schema name ${JSON.stringify(schema)}`);
  return `${schema}.job`;
}

const COLUMNS = 'name, id::text AS id, state::text AS state, data, output, retry_count, start_after, started_on, completed_on, created_on';

/** The last finished (completed or failed) run of each named queue. */
export async function lastFinishedRuns(db: Queryable, schema: string, queues: string[]): Promise<SweepJobRow[]> {
  const { rows } = await db.query<SweepJobRow>(
    `SELECT DISTINCT ON (name) ${COLUMNS} FROM ${table(schema)}
      WHERE name = ANY($1::text[]) AND state IN ('completed', 'failed')
      ORDER BY name, completed_on DESC NULLS LAST`,
    [queues],
  );
  return rows;
}

/** Runs in progress (at most one per sweep queue: the queues are 'stately'). */
export async function activeRuns(db: Queryable, schema: string, queues: string[]): Promise<SweepJobRow[]> {
  const { rows } = await db.query<SweepJobRow>(
    `SELECT ${COLUMNS} FROM ${table(schema)} WHERE name = ANY($1::text[]) AND state = 'active' ORDER BY started_on`,
    [queues],
  );
  return rows;
}

/** The earliest waiting run (created or retry) of each named queue. */
export async function nextQueuedRuns(db: Queryable, schema: string, queues: string[]): Promise<SweepJobRow[]> {
  const { rows } = await db.query<SweepJobRow>(
    `SELECT DISTINCT ON (name) ${COLUMNS} FROM ${table(schema)}
      WHERE name = ANY($1::text[]) AND state IN ('created', 'retry')
      ORDER BY name, start_after`,
    [queues],
  );
  return rows;
}

/** Every run of one queue since `since`, oldest first (tests and operators auditing overlap). */
export async function runsSince(db: Queryable, schema: string, queue: string, since: Date): Promise<SweepJobRow[]> {
  const { rows } = await db.query<SweepJobRow>(
    `SELECT ${COLUMNS} FROM ${table(schema)} WHERE name = $1 AND created_on >= $2 ORDER BY started_on NULLS LAST, created_on`,
    [queue, since],
  );
  return rows;
}

/**
 * Serialises the start-run decision for one sweep queue across processes starting together: a
 * transaction-scoped advisory lock keyed on the queue name, released at commit. Whoever holds it
 * sees the job the previous holder queued (its transaction committed before the lock passed on).
 */
export async function lockSweepStart(db: Queryable, queue: string): Promise<void> {
  await db.query(`SELECT pg_advisory_xact_lock(hashtext('ferry-sweep-start'), hashtext($1))`, [queue]);
}

/**
 * Whether a sweep needs no start run: a run is waiting or in progress, or one finished within the
 * last `intervalSeconds` (the sweep is not overdue).
 */
export async function hasPendingOrRecentRun(db: Queryable, schema: string, queue: string, intervalSeconds: number): Promise<boolean> {
  const { rows } = await db.query(
    `SELECT 1 FROM ${table(schema)}
      WHERE name = $1
        AND (state IN ('created', 'retry', 'active')
             OR (state = 'completed' AND completed_on > now() - make_interval(secs => $2)))
      LIMIT 1`,
    [queue, intervalSeconds],
  );
  return rows.length > 0;
}

/** The channel a requested sweep run is announced on; the workers' wake-up connection listens to it. */
export const SWEEP_CHANNEL = 'ferry_sweeps';

/**
 * Announces a requested run of a sweep's queue, delivered when the caller's transaction commits (and
 * never if it rolls back), so every worker process fetches the run now instead of at its next poll.
 */
export async function announceSweepRun(db: Queryable, queue: string): Promise<void> {
  await db.query('SELECT pg_notify($1, $2)', [SWEEP_CHANNEL, queue]);
}
