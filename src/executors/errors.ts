/**
 * Errors raised across the executor and signer boundary. They are not FerryErrors: they never reach
 * an HTTP client directly. The dispatcher, observer and recovery workers turn them into node events
 * (a deferred retry, a FAILED node with the error's code), so a broken executor never crashes a worker.
 */

/** Base of every error an executor or signer raises on purpose; `code` is stable and machine-readable. */
export class MovementError extends Error {
  readonly code: string;
  readonly details: Record<string, unknown>;

  constructor(code: string, message: string, details: Record<string, unknown> = {}, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
    this.details = details;
  }
}

/** The step may succeed if tried again later (provider down, rate limited, network hiccup). */
export class TemporaryMovementError extends MovementError {}

/**
 * Thrown by a local executor's submit() when it is certain that nothing of the attempt left the
 * process (an EVM nonce the reaper reclaimed before the broadcast was cleared): the attempt is
 * abandoned like a failed pre-submit check, and the node goes back to READY for a new attempt. Only
 * an executor running in Ferry's process can raise it; a remote executor's answer is a result, and a
 * result never starts a new attempt from submit.
 */
export class NothingSentError extends TemporaryMovementError {}

/** Trying again will not help (rejected by the provider, invalid payload, refused signature). */
export class FatalMovementError extends MovementError {}

/** A node's executor binding names no registered executor (or carries no executor_key at all). */
export class ExecutorNotRegisteredError extends MovementError {
  readonly executorKey: string | null;
  constructor(executorKey: string | null, message?: string) {
    super(
      'EXECUTOR_NOT_REGISTERED',
      message ?? `no executor registered under key ${JSON.stringify(executorKey)}`,
      { executor_key: executorKey },
    );
    this.executorKey = executorKey;
  }
}

/** A node's signer binding names no registered signer (or carries no signer_key at all). */
export class SignerNotRegisteredError extends MovementError {
  readonly signerKey: string | null;
  constructor(signerKey: string | null, message?: string) {
    super('SIGNER_NOT_REGISTERED', message ?? `no signer registered under key ${JSON.stringify(signerKey)}`, {
      signer_key: signerKey,
    });
    this.signerKey = signerKey;
  }
}

/** A `$ref:node_key.field` in a node's config points at nothing a completed node reported. */
export class ConfigRefUnresolvedError extends MovementError {
  readonly ref: string;
  constructor(ref: string, reason: string) {
    super('CONFIG_REF_UNRESOLVED', `config reference ${ref} cannot be resolved: ${reason}`, { ref });
    this.ref = ref;
  }
}

export function isMovementError(e: unknown): e is MovementError {
  return e instanceof MovementError;
}
