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

async function checkDatabase(pool: Pool): Promise<void> {
  const connecting = pool.connect();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no connection within ${DATABASE_CHECK_MS} ms`)), DATABASE_CHECK_MS);
  });
  try {
    const client = await Promise.race([connecting, timeout]);
    client.release();
  } catch (cause) {
    // A connection that arrives after we gave up must still go back to the pool.
    connecting.then((client) => client.release()).catch(() => {});
    throw new FerryError('DATABASE_UNAVAILABLE', 'The database does not answer', { reason: String((cause as Error)?.message ?? cause) }, { cause });
  } finally {
    clearTimeout(timer);
  }
}

export function healthRoutes(deps: { pool: Pool }): Hono {
  const app = new Hono();

  app.get('/healthz', (c) => c.json({ status: 'ok' }));

  app.get('/readyz', async (c) => {
    await checkDatabase(deps.pool);
    const pending = await pendingMigrations(deps.pool);
    if (pending > 0) {
      throw new FerryError('MIGRATIONS_PENDING', `${pending} migration(s) not yet applied`, { pending });
    }
    return c.json({ status: 'ready', database: 'ok', migrations: 'current' });
  });

  return app;
}
