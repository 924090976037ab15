import { FatalMovementError, TemporaryMovementError } from '../errors.ts';
import { ExecutionResultSchema, type ExecutionContext, type ExecutionResult, type ExecutionResultInput, type PreparedAction } from '../protocol.ts';
import type { CexAccount } from './client.ts';
import { classifyCexError, type CexFailure } from './errors.ts';

export const CEX_LANE = 'cex';

export function result(input: ExecutionResultInput): ExecutionResult {
  return ExecutionResultSchema.parse(input);
}

export function failed(code: string, detail: string, extra: Partial<ExecutionResultInput> = {}): ExecutionResult {
  return result({ next_state: 'FAILED', error_code: code, error_detail: detail, ...extra });
}

export function str(v: unknown): string | undefined {
  return typeof v === 'string' && v.length > 0 ? v : typeof v === 'number' && Number.isFinite(v) ? String(v) : undefined;
}

/** The account a node names: its executor binding's `account`, else its config's `account`. */
export function accountKeyOf(ctx: ExecutionContext): string | undefined {
  return str(ctx.resolved_bindings.executor.account) ?? str(ctx.node_config.account);
}

export type Accounts = ReadonlyMap<string, CexAccount>;

export function lookupAccount(accounts: Accounts, ctx: ExecutionContext): { ok: true; account: CexAccount } | { ok: false; result: ExecutionResult } {
  const key = accountKeyOf(ctx);
  if (!key) return { ok: false, result: failed('CEX_ACCOUNT_MISSING', 'the node names no exchange account (executor_binding.account or config.account)') };
  const account = accounts.get(key);
  if (!account) return { ok: false, result: failed('CEX_ACCOUNT_UNKNOWN', `exchange account ${key} is not configured (cex.accounts)`) };
  return { ok: true, account };
}

/** The prepared action this attempt recorded (committed with SUBMITTING, before submit()). */
export function preparedOf(ctx: ExecutionContext): PreparedAction | null {
  const a = [...(ctx.attempt_artifacts ?? [])].reverse().find((x) => x.artifact_type === 'prepared_action');
  if (!a?.content_inline) return null;
  try {
    return JSON.parse(a.content_inline) as PreparedAction;
  } catch {
    return null;
  }
}

export function payloadOf<T>(prepared: PreparedAction | null): T | null {
  if (!prepared?.payload) return null;
  try {
    return JSON.parse(prepared.payload) as T;
  } catch {
    return null;
  }
}

/**
 * Runs a read against the exchange. The account remembers a Retry-After, and no request is sent
 * until it has passed (a Binance 418 ban grows when it is ignored). A failed read moves no money:
 * it throws TemporaryMovementError for a rate limit (with retry_after_seconds) or an unreachable
 * exchange, FatalMovementError for a definite refusal (authentication, bad request).
 */
export async function exchangeCall<T>(account: CexAccount, what: string, fn: () => Promise<T>): Promise<T> {
  throwIfBlocked(account);
  try {
    return await fn();
  } catch (err) {
    const failure = classify(account, err);
    // A definite refusal (bad key, bad signature, stale clock) will not go away by waiting.
    const Err = failure.kind === 'rate_limited' || failure.kind === 'uncertain' ? TemporaryMovementError : FatalMovementError;
    throw new Err(failure.code, `${account.key}: ${what} failed: ${failure.detail}`, {
      ...(failure.kind === 'rate_limited' ? { retry_after_seconds: failure.retryAfterSeconds } : {}),
      failure_kind: failure.kind,
    });
  }
}

export function throwIfBlocked(account: CexAccount): void {
  const wait = Math.ceil((account.blockedUntilMs - Date.now()) / 1000);
  if (wait > 0) {
    throw new TemporaryMovementError('CEX_RATE_LIMITED', `${account.key}: the exchange asked to wait ${wait} s more (Retry-After)`, { retry_after_seconds: wait, failure_kind: 'rate_limited' });
  }
}

/** Classifies and, for a rate limit, remembers the Retry-After on the account. */
export function classify(account: CexAccount, err: unknown): CexFailure {
  const failure = classifyCexError(err, account);
  if (failure.kind === 'rate_limited') account.blockedUntilMs = Math.max(account.blockedUntilMs, Date.now() + failure.retryAfterSeconds * 1000);
  return failure;
}

/**
 * A read failure during observe: keep observing, after the Retry-After when there is one. A read
 * the exchange refuses (a stale clock, a revoked key) moves no money either: the node keeps
 * observing once a minute with the error on it, instead of turning UNKNOWN, which next to a
 * completed withdrawal would put the movement in MANUAL_INTERVENTION.
 */
export function observeLater(err: unknown): ExecutionResult {
  if (err instanceof TemporaryMovementError || err instanceof FatalMovementError) {
    const retry = Number(err.details.retry_after_seconds);
    return result({
      next_state: 'OBSERVING',
      error_code: err.code,
      error_detail: err.message,
      retry_after_seconds: Number.isFinite(retry) && retry > 0 ? retry : err instanceof FatalMovementError ? REFUSED_READ_RETRY_SECONDS : null,
    });
  }
  throw err;
}

const REFUSED_READ_RETRY_SECONDS = 60;

/** A decimal string greater than zero, e.g. '0.5'. */
export function positiveDecimal(v: string | undefined): boolean {
  return v !== undefined && /^[0-9]+(\.[0-9]+)?$/.test(v) && /[1-9]/.test(v);
}

/**
 * Health of the lane: every account's exchange answers its (unauthenticated) server-time call.
 * Names the accounts only, never their URLs or credentials.
 */
export async function accountsHealth(executorKey: string, accounts: Accounts): Promise<Record<string, unknown>> {
  const checks = await Promise.all(
    [...accounts.values()].map(async (a) => {
      try {
        const serverTime = await (await a.client()).fetchTime();
        return { account: a.key, reachable: true, clock_skew_ms: typeof serverTime === 'number' ? serverTime - Date.now() : null };
      } catch (err) {
        return { account: a.key, reachable: false, error: classify(a, err).code };
      }
    }),
  );
  return { ok: checks.every((c) => c.reachable), executor_key: executorKey, lane: CEX_LANE, accounts: checks };
}
