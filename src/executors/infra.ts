import { databaseTroubleCause, type InfraCause } from '../persistence/infra-errors.ts';
import { TemporaryMovementError } from './errors.ts';

/**
 * An executor whose only dependency is Ferry's own database (the simulation lane) reports that
 * database's transient trouble with this error, never as a provider outcome. The workers defer the
 * node on it (before submit), or leave the attempt for recovery to resolve (after submit began);
 * no node becomes FAILED or UNKNOWN because of it.
 */
export class FerryInfraError extends TemporaryMovementError {
  readonly cause_: InfraCause;
  constructor(cause: InfraCause, call: string, options?: ErrorOptions) {
    super('FERRY_DATABASE_UNAVAILABLE', `Ferry's database was unavailable during ${call} (${cause}); the node is retried later`, {
      cause,
      retry_after_seconds: 1,
    }, options);
    this.cause_ = cause;
  }
}

/** The infra cause of an error thrown by Ferry's pipeline or a database-only executor, else null. */
export function infraCauseOf(err: unknown): InfraCause | null {
  if (err instanceof FerryInfraError) return err.cause_;
  return databaseTroubleCause(err);
}

/** Runs a database-only executor's own query, turning Ferry database trouble into FerryInfraError. */
export async function ownDatabase<T>(call: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    const cause = databaseTroubleCause(err);
    if (cause) throw new FerryInfraError(cause, call, { cause: err });
    throw err;
  }
}
