import { ExecutorNotRegisteredError, SignerNotRegisteredError } from './errors.ts';
import type { Executor, Signer } from './protocol.ts';

/**
 * Executor and signer registries. Each runtime builds its own instances at bootstrap (tests build
 * theirs), so nothing here is a module global.
 *
 * A binding is either a key, or an object carrying the key plus settings the executor reads
 * (`{ executor_key: 'exec.cex.withdrawal_action', exchange: 'upbit' }`).
 */
export type ExecutorBinding = string | { executor_key: string; [field: string]: unknown };
export type SignerBinding = string | { signer_key: string; [field: string]: unknown };

type KeyField = 'executor_key' | 'signer_key';

/** The key a binding names, or null when the binding is malformed (not a key, no key field). */
export function bindingKey(binding: unknown, field: KeyField): string | null {
  if (typeof binding === 'string') return binding.length > 0 ? binding : null;
  if (binding !== null && typeof binding === 'object' && !Array.isArray(binding)) {
    const key = (binding as Record<string, unknown>)[field];
    return typeof key === 'string' && key.length > 0 ? key : null;
  }
  return null;
}

/** The fields of an object binding other than its key; a string binding has none. */
export function bindingExtras(binding: unknown): Record<string, unknown> {
  if (binding === null || typeof binding !== 'object' || Array.isArray(binding)) return {};
  const { executor_key: _e, signer_key: _s, ...extras } = binding as Record<string, unknown>;
  return extras;
}

class Registry<T> {
  readonly #items = new Map<string, T>();

  constructor(
    private readonly kind: 'executor' | 'signer',
    private readonly keyOf: (item: T) => string,
    /** The error for a binding naming no registered item (key null: it names no key at all). */
    private readonly notRegistered: (key: string | null, message?: string) => Error,
  ) {}

  /** Adds an implementation. A second, different implementation under the same key is a bootstrap bug. */
  register(item: T): void {
    const key = this.keyOf(item);
    if (typeof key !== 'string' || key.length === 0) throw new TypeError(`${this.kind} has no key`);
    const existing = this.#items.get(key);
    if (existing !== undefined && existing !== item) {
      throw new Error(`${this.kind} key ${key} is already registered to another implementation`);
    }
    this.#items.set(key, item);
  }

  has(key: string): boolean {
    return this.#items.has(key);
  }

  keys(): string[] {
    return [...this.#items.keys()].sort();
  }

  all(): T[] {
    return this.keys().map((k) => this.#items.get(k) as T);
  }

  /** The item a binding names; the registry's not-registered error for an unknown or malformed binding. */
  get(binding: unknown): T {
    const field: KeyField = this.kind === 'executor' ? 'executor_key' : 'signer_key';
    const key = bindingKey(binding, field);
    const item = key === null ? undefined : this.#items.get(key);
    if (item !== undefined) return item;
    if (key === null) throw this.notRegistered(null, `${this.kind} binding names no ${field}`);
    throw this.notRegistered(key);
  }
}

export class ExecutorRegistry extends Registry<Executor> {
  /** get() throws ExecutorNotRegisteredError (code EXECUTOR_NOT_REGISTERED) for an unknown or malformed binding. */
  constructor() {
    super('executor', (e) => e.executorKey, (key, message) => new ExecutorNotRegisteredError(key, message));
  }
}

export class SignerRegistry extends Registry<Signer> {
  /** get() throws SignerNotRegisteredError (code SIGNER_NOT_REGISTERED) for an unknown or malformed binding. */
  constructor() {
    super('signer', (s) => s.signerKey, (key, message) => new SignerNotRegisteredError(key, message));
  }
}
