/**
 * Liveness and readiness. /healthz answers whenever the process can serve HTTP at all; /readyz only
 * when the database answers and every migration in migrations/ has been applied, so a load balancer
 * sends no traffic to an instance that would fail every request.
 */
import { Hono } from 'hono';
import { FerryError } from '../errors.ts';
import type { Pool } from '../persistence/db.ts';
import { pendingMigrations } from '../persistence/migrate.ts';

/** How long readiness waits for a database connection before calling the instance unready. */
const DATABASE_CHECK_MS = 3000;
/**
 * How long one answer is reused. A load balancer polling every instance, or a caller hammering the
 * route, then costs the database at most one check per second per process.
 */
export const READINESS_CACHE_MS = 1000;

async function checkDatabase(pool: Pool): Promise<void> {
  const connecting = pool.connect();
  let timer: NodeJS.Timeout | undefined;
  let timedOut = false;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      timedOut = true;
      reject(new Error(`no connection within ${DATABASE_CHECK_MS} ms`));
    }, DATABASE_CHECK_MS);
  });
  try {
    const client = await Promise.race([connecting, timeout]);
    client.release();
  } catch (cause) {
    // A connection that arrives after we gave up must still go back to the pool.
    connecting.then((client) => client.release()).catch(() => {});
    // The driver's text names hosts, ports and users: a class only, for an unauthenticated route.
    throw new FerryError('DATABASE_UNAVAILABLE', 'The database does not answer', { reason: timedOut ? 'timeout' : 'connection_failed' }, { cause });
  } finally {
    clearTimeout(timer);
  }
}

async function readiness(pool: Pool): Promise<void> {
  await checkDatabase(pool);
  const pending = await pendingMigrations(pool);
  if (pending > 0) {
    throw new FerryError('MIGRATIONS_PENDING', `${pending} migration(s) not yet applied`, { pending });
  }
}

export function healthRoutes(deps: { pool: Pool }): Hono {
  const app = new Hono();
  // One check in flight at a time, and its outcome (success or error) reused for a moment.
  let last: { at: number; outcome: Promise<void> } | null = null;

  app.get('/healthz', (c) => c.json({ status: 'ok' }));

  app.get('/readyz', async (c) => {
    const now = Date.now();
    if (!last || now - last.at >= READINESS_CACHE_MS) {
      const outcome = readiness(deps.pool);
      outcome.catch(() => {});
      last = { at: now, outcome };
    }
    await last.outcome;
    return c.json({ status: 'ready', database: 'ok', migrations: 'current' });
  });

  return app;
}
