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
