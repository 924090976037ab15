import { FatalMovementError } from './errors.ts';
import {
  parseExecutionResult,
  type ExecutionContext,
  type ExecutionResult,
  type ExecutionResultInput,
  type Executor,
  type PreparedAction,
  type SubmitOptions,
} from './protocol.ts';

type MaybePromise<T> = T | Promise<T>;

/**
 * An in-process implementation: any subset of the executor's methods. Results only need
 * `next_state`; the adapter validates them and fills the protocol's defaults.
 */
export interface ExecutorHandler {
  preflight?(ctx: ExecutionContext): MaybePromise<ExecutionResultInput | null | undefined>;
  prepare?(ctx: ExecutionContext): MaybePromise<ExecutionResultInput>;
  submit?(ctx: ExecutionContext, preparedAction: PreparedAction, opts: SubmitOptions): MaybePromise<ExecutionResultInput>;
  observe?(ctx: ExecutionContext): MaybePromise<ExecutionResultInput>;
  recover?(ctx: ExecutionContext): MaybePromise<ExecutionResultInput>;
  /** Read only (see Executor.inspect); without it, reconciliation gets no answer for this executor's nodes. */
  inspect?(ctx: ExecutionContext): MaybePromise<ExecutionResultInput>;
  cancel?(ctx: ExecutionContext): MaybePromise<ExecutionResultInput>;
  health?(): MaybePromise<Record<string, unknown> | null>;
  close?(): MaybePromise<void>;
  preSubmitCheck?(ctx: ExecutionContext, prepared?: PreparedAction): MaybePromise<void>;
}

export interface LocalExecutorOptions {
  executorKey: string;
  lane?: string;
  handler: ExecutorHandler;
}

/**
 * Wraps a handler as an Executor. A handler without preflight passes every precondition; without
 * recover, an uncertain attempt stays UNKNOWN and asks for an operator (guessing FAILED could hide a
 * payment that went out); without inspect, inspect() throws (reconciliation counts no answer: it never
 * falls back on recover(), which may act); without health, cancel or preSubmitCheck, the adapter
 * does not offer them.
 */
export class LocalExecutorAdapter implements Executor {
  readonly executorKey: string;
  readonly lane: string;
  readonly health?: () => Promise<Record<string, unknown> | null>;
  readonly cancel?: (ctx: ExecutionContext) => Promise<ExecutionResult>;
  readonly preSubmitCheck?: (ctx: ExecutionContext, prepared?: PreparedAction) => Promise<void>;
  readonly #handler: ExecutorHandler;

  constructor(opts: LocalExecutorOptions) {
    this.executorKey = opts.executorKey;
    this.lane = opts.lane ?? 'local';
    const handler = opts.handler;
    this.#handler = handler;
    if (handler.health) this.health = async () => (await handler.health!()) ?? null;
    if (handler.cancel) this.cancel = async (ctx) => this.#result('cancel', await handler.cancel!(ctx));
    if (handler.preSubmitCheck) this.preSubmitCheck = async (ctx, prepared) => void (await handler.preSubmitCheck!(ctx, prepared));
  }

  async preflight(ctx: ExecutionContext): Promise<ExecutionResult | null> {
    if (!this.#handler.preflight) return null;
    const raw = await this.#handler.preflight(ctx);
    return raw == null ? null : this.#result('preflight', raw);
  }

  async prepare(ctx: ExecutionContext): Promise<ExecutionResult> {
    return this.#result('prepare', await this.#required('prepare').call(this.#handler, ctx));
  }

  async submit(ctx: ExecutionContext, preparedAction: PreparedAction, opts: SubmitOptions = {}): Promise<ExecutionResult> {
    return this.#result('submit', await this.#required('submit').call(this.#handler, ctx, preparedAction, opts));
  }

  async observe(ctx: ExecutionContext): Promise<ExecutionResult> {
    return this.#result('observe', await this.#required('observe').call(this.#handler, ctx));
  }

  async recover(ctx: ExecutionContext): Promise<ExecutionResult> {
    if (!this.#handler.recover) {
      return this.#result('recover', {
        next_state: 'UNKNOWN',
        error_code: 'RECOVER_NOT_IMPLEMENTED',
        error_detail: `executor ${this.executorKey} cannot recover an uncertain attempt; an operator must resolve it`,
        manual_intervention_required: true,
      });
    }
    return this.#result('recover', await this.#handler.recover(ctx));
  }

  async inspect(ctx: ExecutionContext): Promise<ExecutionResult> {
    return this.#result('inspect', await this.#required('inspect').call(this.#handler, ctx));
  }

  async close(): Promise<void> {
    await this.#handler.close?.();
  }

  #required<M extends 'prepare' | 'submit' | 'observe' | 'inspect'>(method: M): NonNullable<ExecutorHandler[M]> {
    const fn = this.#handler[method];
    if (!fn) {
      throw new FatalMovementError('EXECUTOR_METHOD_NOT_IMPLEMENTED', `executor ${this.executorKey} does not implement ${method}()`, {
        executor_key: this.executorKey,
        method,
      });
    }
    return fn as NonNullable<ExecutorHandler[M]>;
  }

  #result(method: string, raw: unknown): ExecutionResult {
    return parseExecutionResult(raw, `executor ${this.executorKey} ${method}()`);
  }
}
