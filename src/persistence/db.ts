import pg from 'pg';
import { commitSeconds } from '../metrics.ts';

export type Pool = pg.Pool;
export type Client = pg.PoolClient;
/** Anything that runs a query: the pool for single statements, a client inside a transaction. */
export type Queryable = Pick<pg.Pool, 'query'> | Pick<pg.PoolClient, 'query'>;

// Postgres bigint (int8) and numeric come back as strings by default; counts and sequence numbers in
// Ferry fit in a double, so read them as numbers.
pg.types.setTypeParser(20, (v) => Number(v));

/** How long a checkout waits for a connection before failing. */
const CONNECTION_TIMEOUT_MS = 30_000;

/**
 * A pool that fails a checkout after CONNECTION_TIMEOUT_MS instead of waiting forever, so an
 * exhausted pool shows up as errors in the worker logs rather than as a silent stall.
 */
export function createPool(
  connectionString: string,
  max = 20,
  applicationName = 'ferry',
  opts: { allowExitOnIdle?: boolean; statementTimeoutMs?: number; namedStatements?: boolean } = {},
): Pool {
  const pool = new pg.Pool({
    connectionString,
    max,
    application_name: applicationName,
    connectionTimeoutMillis: CONNECTION_TIMEOUT_MS,
    allowExitOnIdle: opts.allowExitOnIdle ?? false,
    // Sent at connect (a startup parameter): the server cancels any statement of this pool that
    // runs longer, with SQLSTATE 57014. Undefined or 0: the server's own setting.
    ...(opts.statementTimeoutMs ? { statement_timeout: opts.statementTimeoutMs } : {}),
  });
  // An idle client losing its connection (Postgres restart) must not crash the process.
  pool.on('error', () => {});
  if (opts.namedStatements) {
    keepsNamedStatements.add(pool);
    pool.on('connect', (client) => keepsNamedStatements.add(client));
  }
  return pool;
}

/**
 * Pools, and their clients, whose server connections keep the statements they prepare: a pool
 * straight to PostgreSQL (createPool's `namedStatements`), not one through a transaction pooler
 * such as PgBouncer, where the next statement may run on a server connection that never saw the
 * statement prepared.
 */
const keepsNamedStatements = new WeakSet<object>();

/**
 * A hot statement, named where the connection keeps it: PostgreSQL then parses and plans it once
 * per connection instead of on every call. Only for statements whose result columns no migration
 * can change (jsonb, counts, named scalars; never a bare `SELECT *`): a prepared statement whose
 * result type changed under it fails on every later call.
 */
export function named(db: Queryable, name: string, text: string): { name?: string; text: string } {
  return keepsNamedStatements.has(db) ? { name, text } : { text };
}

/**
 * Runs fn inside one transaction on a dedicated client. Commits when fn resolves, rolls back when
 * it throws. Keep fn short: no external calls while row locks are held.
 */
const commitHooks = new WeakMap<Client, Array<() => void>>();

/**
 * Runs `fn` once the transaction `client` is in has committed (withTransaction's), never when it
 * rolls back: for what must only say what is durable (log lines of transitions). Outside
 * withTransaction nothing runs it. `fn` must not throw; if it does, the error is dropped.
 */
export function afterCommit(client: Client, fn: () => void): void {
  const hooks = commitHooks.get(client);
  if (hooks) hooks.push(fn);
}

export async function withTransaction<T>(pool: Pool, fn: (client: Client) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  // A checked-out client whose server goes away between two queries (while a worker awaits a
  // provider) emits 'error'; unheard, that would crash the process. Its next query fails anyway.
  const onError = () => {};
  client.on('error', onError);
  let result: T;
  const hooks: Array<() => void> = [];
  commitHooks.set(client, hooks);
  try {
    await client.query('BEGIN');
    result = await fn(client);
    const end = commitSeconds.startTimer();
    await client.query('COMMIT');
    end();
  } catch (err) {
    commitHooks.delete(client);
    // A connection that cannot even roll back (the server restarted, the socket died) must not go
    // back to the pool, or every later checkout would fail on it.
    const broken = await client.query('ROLLBACK').then(
      () => false,
      () => true,
    );
    client.off('error', onError);
    client.release(broken ? (err as Error) : undefined);
    throw err;
  }
  commitHooks.delete(client);
  client.off('error', onError);
  client.release();
  for (const hook of hooks) {
    try {
      hook();
    } catch {
      // A log line that could not be written changes nothing that was committed.
    }
  }
  return result;
}

/** Runs fn inside a savepoint of an open transaction; a throw rolls back only the savepoint. */
export async function withSavepoint<T>(client: Client, name: string, fn: () => Promise<T>): Promise<T> {
  await client.query(`SAVEPOINT ${name}`);
  try {
    const result = await fn();
    await client.query(`RELEASE SAVEPOINT ${name}`);
    return result;
  } catch (err) {
    await client.query(`ROLLBACK TO SAVEPOINT ${name}`);
    throw err;
  }
}

/** Resolves when the database answers a trivial query. */
/**
 * The transaction's time (`now()`: when it started, the same for every statement in it), for work
 * that must name the moment its reads saw: the stranded-callback sweep's events, the reconciliation
 * mark of what a snapshot checked.
 */
export async function transactionNow(db: Queryable): Promise<Date> {
  const { rows } = await db.query<{ now: Date }>('SELECT now() AS now');
  return rows[0].now;
}

export async function ping(db: Queryable): Promise<void> {
  await db.query('SELECT 1');
}
