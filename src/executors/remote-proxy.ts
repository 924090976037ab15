import { FatalMovementError, MovementError } from './errors.ts';
import type { HostRequestSigner } from './host-requests.ts';
import { JsonHttpClient } from './http-json.ts';
import {
  describeIssues,
  EXECUTOR_ANSWER_TOO_LARGE,
  ExecutionResultSchema,
  isTooLarge,
  type ExecutionContext,
  type ExecutionResult,
  type Executor,
  type PreparedAction,
  type SubmitOptions,
} from './protocol.ts';

export interface RemoteExecutorOptions {
  executorKey: string;
  baseUrl: string;
  /** Bearer token for the remote executor, if it wants one. */
  token?: string;
  timeoutMs?: number;
  lane?: string;
  /** Largest answer read (FERRY_EXECUTOR_ANSWER_MAX_BYTES); a longer one is EXECUTOR_ANSWER_TOO_LARGE. */
  maxAnswerBytes?: number;
  /** Ferry's host request key (FERRY_HOST_REQUEST_KEY): signs every POST for this executor key, as `ferry executor-host` requires. */
  requestSigner?: HostRequestSigner;
}

/**
 * An executor living in another process, spoken to over the reference HTTP protocol:
 * POST /preflight (204 = no objection), /prepare, /submit, /observe, /recover, /cancel; GET /health;
 * and Ferry's addition POST /inspect (read only, see Executor.inspect). A peer without /inspect
 * answers 404: an error, so reconciliation gets no answer; it never asks /recover instead.
 *
 * Answers are read up to a size limit and refused past it (EXECUTOR_ANSWER_TOO_LARGE), before
 * any of it is parsed, logged or stored; the fields of an answer within it are bounded by
 * ExecutionResultSchema (RESULT_BOUNDS), as those of an executor in this process are.
 *
 * submit() is special: once the request may have reached the remote side (timeout after sending,
 * connection lost, 5xx, an unreadable answer), money may have moved, so it reports UNKNOWN for
 * recovery to resolve instead of throwing an error a caller could answer with a second submit.
 */
export class RemoteExecutorProxy implements Executor {
  readonly executorKey: string;
  readonly lane: string;
  readonly #http: JsonHttpClient;

  constructor(opts: RemoteExecutorOptions) {
    this.executorKey = opts.executorKey;
    this.lane = opts.lane ?? 'remote';
    this.#http = new JsonHttpClient({
      baseUrl: opts.baseUrl,
      token: opts.token,
      timeoutMs: opts.timeoutMs,
      codePrefix: 'REMOTE_EXECUTOR',
      maxAnswerBytes: opts.maxAnswerBytes,
      tooLargeCode: EXECUTOR_ANSWER_TOO_LARGE,
      signHeaders: opts.requestSigner ? (r) => opts.requestSigner!.headers({ ...r, audience: opts.executorKey }) : undefined,
    });
  }

  get baseUrl(): string {
    return this.#http.baseUrl;
  }

  async preflight(ctx: ExecutionContext): Promise<ExecutionResult | null> {
    const res = await this.#http.call('POST', '/preflight', ctx);
    if (res.status === 204 || res.json === undefined || res.json === null) return null;
    return this.#parse('preflight', res.json);
  }

  async prepare(ctx: ExecutionContext): Promise<ExecutionResult> {
    return this.#post('prepare', ctx);
  }

  async submit(ctx: ExecutionContext, preparedAction: PreparedAction, opts: SubmitOptions = {}): Promise<ExecutionResult> {
    const body: Record<string, unknown> = { context: ctx, prepared_action: preparedAction };
    if (opts.signResult) body.sign_result = opts.signResult;
    try {
      const res = await this.#http.call('POST', '/submit', body);
      return this.#parse('submit', res.json);
    } catch (err) {
      if (err instanceof MovementError && err.details.may_have_acted === true) {
        return ExecutionResultSchema.parse({
          next_state: 'UNKNOWN',
          error_code: 'REMOTE_SUBMIT_OUTCOME_UNKNOWN',
          error_detail: `${err.code}: ${err.message}`,
        });
      }
      throw err;
    }
  }

  async observe(ctx: ExecutionContext): Promise<ExecutionResult> {
    return this.#post('observe', ctx);
  }

  async recover(ctx: ExecutionContext): Promise<ExecutionResult> {
    return this.#post('recover', ctx);
  }

  async inspect(ctx: ExecutionContext): Promise<ExecutionResult> {
    return this.#post('inspect', ctx);
  }

  async cancel(ctx: ExecutionContext): Promise<ExecutionResult> {
    return this.#post('cancel', ctx);
  }

  health(): Promise<Record<string, unknown> | null> {
    return this.#http.health(`executor ${this.executorKey}`);
  }

  async close(): Promise<void> {
    await this.#http.close();
  }

  async #post(method: 'prepare' | 'observe' | 'recover' | 'inspect' | 'cancel', ctx: ExecutionContext): Promise<ExecutionResult> {
    const res = await this.#http.call('POST', `/${method}`, ctx);
    return this.#parse(method, res.json);
  }

  #parse(method: string, json: unknown): ExecutionResult {
    const parsed = ExecutionResultSchema.safeParse(json);
    if (parsed.success) return parsed.data;
    // A field over its bound (RESULT_BOUNDS) is refused like an answer over the transport limit.
    throw new FatalMovementError(
      isTooLarge(parsed.error) ? EXECUTOR_ANSWER_TOO_LARGE : 'REMOTE_EXECUTOR_INVALID_RESPONSE',
      `executor ${this.executorKey} /${method} answered an invalid ExecutionResult: ${describeIssues(parsed.error)}`,
      { may_have_acted: true },
    );
  }
}
