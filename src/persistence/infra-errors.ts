/**
 * Ferry's own database trouble, told apart from everything else. A movement must never fail, or
 * need a person, because Ferry could not reach its own database for a moment: the worker that meets
 * one of these defers the node and tries again later. Errors of providers are never classified here;
 * callers only ask about errors raised by Ferry's own queries (or by an executor whose only
 * dependency is Ferry's database, the simulation lane).
 */

export type InfraCause =
  | 'connection_refused'
  | 'checkout_timeout'
  | 'connection_reset'
  | 'serialization_failure'
  | 'too_many_connections'
  | 'server_shutdown';

const BY_SQLSTATE: Record<string, InfraCause> = {
  '40001': 'serialization_failure',
  '40P01': 'serialization_failure', // deadlock detected: the transaction is rolled back, retry
  '53300': 'too_many_connections',
  '57P01': 'server_shutdown',
  '57P02': 'server_shutdown',
  '57P03': 'server_shutdown', // cannot connect now (starting up, recovering)
};

const BY_ERRNO: Record<string, InfraCause> = {
  ECONNREFUSED: 'connection_refused',
  ECONNRESET: 'connection_reset',
  EPIPE: 'connection_reset',
  ETIMEDOUT: 'connection_reset',
};

/** The cause when `err` (or an error it wraps) is a transient failure of Ferry's database; else null. */
export function databaseTroubleCause(err: unknown, depth = 0): InfraCause | null {
  if (!err || typeof err !== 'object' || depth > 4) return null;
  const e = err as { code?: unknown; message?: unknown; cause?: unknown; errors?: unknown };
  const code = typeof e.code === 'string' ? e.code : '';
  if (BY_SQLSTATE[code]) return BY_SQLSTATE[code];
  if (code.startsWith('08')) return 'connection_reset'; // SQLSTATE class 08: connection exception
  if (BY_ERRNO[code]) return BY_ERRNO[code];
  const message = typeof e.message === 'string' ? e.message : '';
  // node-postgres' own wording for a pool that could not hand out a connection in time, and for a
  // connection that died under a query.
  if (/timeout exceeded when trying to connect/i.test(message)) return 'checkout_timeout';
  if (/Connection terminated/i.test(message)) return 'connection_reset';
  if (/connection error and is not queryable/i.test(message)) return 'connection_reset';
  if (/sorry, too many clients/i.test(message)) return 'too_many_connections';
  if (Array.isArray(e.errors)) {
    for (const inner of e.errors) {
      const c = databaseTroubleCause(inner, depth + 1);
      if (c) return c;
    }
  }
  return databaseTroubleCause(e.cause, depth + 1);
}
