import { attemptKey } from '../../ids.ts';
import { payloadHash } from '../payload-hash.ts';
import type { ExecutionContext, ExecutionResult, Executor, PreparedAction } from '../protocol.ts';
import {
  accountsHealth,
  CEX_LANE,
  classify,
  exchangeCall,
  failed,
  lookupAccount,
  networkId,
  payloadOf,
  positiveDecimal,
  preparedOf,
  result,
  str,
  throwIfBlocked,
  type Accounts,
} from './common.ts';
import type { CexAccount } from './client.ts';

export const CEX_WITHDRAWAL_ACTION_KEY = 'exec.cex.withdrawal_action';
/** Binance accepts a withdrawOrderId lookup over at most 7 days. */
const LOOKUP_WINDOW_MS = 7 * 86_400_000 - 1;
const LOOKUP_BACKDATE_MS = 3_600_000;

/** What prepare() fixes and submit() sends: the prepared action's payload. */
export interface WithdrawalRequest {
  account: string;
  coin: string;
  network: string | null;
  address: string;
  address_tag: string | null;
  amount: string;
  /** The attempt's idempotency key, sent as Binance's client withdrawal id. */
  withdraw_order_id: string;
  prepared_at_ms: number;
}

export interface CexWithdrawalActionOptions {
  /**
   * How long after prepare an attempt whose outcome is unknown (timeout, 5xx, a process that died
   * in submit) must stay invisible in the exchange's history before recovery concludes nothing was
   * withdrawn and lets the node start a new attempt (with a new withdrawOrderId).
   */
  notFoundAfterSeconds?: number;
  executorKey?: string;
}

/**
 * `exec.cex.withdrawal_action`: one exchange withdrawal, sent with the attempt's idempotency key as
 * `withdrawOrderId`. The node completes when the exchange accepts (its withdrawal id and the order
 * id in provider_refs); `exec.cex.withdrawal_observe` follows it to the chain.
 *
 * recover() never withdraws: it looks the withdrawal up by withdrawOrderId. Found: the attempt
 * went through (an answer lost after the exchange accepted). Not found: after a refusal that
 * proves nothing happened (a rate limit) the node goes back to READY once the Retry-After has
 * passed; otherwise only once the attempt is older than notFoundAfterSeconds.
 */
export class CexWithdrawalActionExecutor implements Executor {
  readonly executorKey: string;
  readonly lane = CEX_LANE;
  readonly #accounts: Accounts;
  readonly #notFoundAfterMs: number;

  constructor(accounts: Accounts, opts: CexWithdrawalActionOptions = {}) {
    this.#accounts = accounts;
    this.executorKey = opts.executorKey ?? CEX_WITHDRAWAL_ACTION_KEY;
    this.#notFoundAfterMs = (opts.notFoundAfterSeconds ?? 300) * 1000;
  }

  async preflight(ctx: ExecutionContext): Promise<ExecutionResult | null> {
    const spec = this.#spec(ctx);
    if (!spec.ok) return spec.result;
    const { account, request } = spec;
    const ex = await account.client();
    // Currencies and networks (capital/config/getall) and the spot exchangeInfo, then the balance.
    await exchangeCall(account, 'loading currencies', () => ex.loadMarkets());
    const currency = ex.currencies[request.coin];
    if (!currency) return failed('CEX_ASSET_UNKNOWN', `${account.key} has no currency ${request.coin}`);
    if (request.network) {
      const networks = Object.values(currency.networks ?? {}) as Array<{ id?: string; withdraw?: boolean; limits?: { withdraw?: { min?: number; max?: number } } }>;
      const net = networks.find((n) => n.id === request.network);
      if (!net) return failed('CEX_NETWORK_UNKNOWN', `${account.key} lists no network ${request.network} for ${request.coin}`);
      if (net.withdraw === false) return failed('CEX_WITHDRAW_DISABLED', `${account.key} has withdrawals of ${request.coin} on ${request.network} disabled`);
      const amount = Number(request.amount);
      const min = net.limits?.withdraw?.min;
      const max = net.limits?.withdraw?.max;
      if (min !== undefined && amount < min) return failed('CEX_AMOUNT_OUT_OF_RANGE', `${request.amount} ${request.coin} is below the minimum withdrawal ${min}`);
      if (max !== undefined && max > 0 && amount > max) return failed('CEX_AMOUNT_OUT_OF_RANGE', `${request.amount} ${request.coin} is above the maximum withdrawal ${max}`);
    }
    const balance = await exchangeCall(account, 'reading the balance', () => ex.fetchBalance());
    const free = Number((balance.free as unknown as Record<string, number | undefined>)[request.coin] ?? 0);
    if (free < Number(request.amount)) {
      return failed('CEX_INSUFFICIENT_BALANCE', `${account.key} holds ${free} ${request.coin} free, the withdrawal needs ${request.amount}`);
    }
    return null;
  }

  async prepare(ctx: ExecutionContext): Promise<ExecutionResult> {
    const spec = this.#spec(ctx);
    if (!spec.ok) return spec.result;
    const payload = JSON.stringify(spec.request);
    return result({
      next_state: 'SUBMITTING',
      prepared_action: {
        prepared_action_id: `cex-${spec.request.withdraw_order_id}`,
        action_type: ctx.action_type,
        payload_format: 'cex_withdrawal_json',
        payload,
        payload_hash: payloadHash(payload),
        // Authenticated with the account's API key, not a signature of ours.
        signing_required: false,
        provider_hints: { account: spec.account.key, withdraw_order_id: spec.request.withdraw_order_id },
      },
    });
  }

  async submit(_ctx: ExecutionContext, prepared: PreparedAction): Promise<ExecutionResult> {
    const request = payloadOf<WithdrawalRequest>(prepared);
    if (!request) return failed('CEX_PREPARED_ACTION_INVALID', 'the prepared action carries no withdrawal request');
    const account = this.#accounts.get(request.account);
    if (!account) return failed('CEX_ACCOUNT_UNKNOWN', `exchange account ${request.account} is not configured`);
    try {
      throwIfBlocked(account);
    } catch (err) {
      // Nothing was sent: recovery lets the node try again once the wait is over.
      return rateLimited(request, Math.max(1, Math.ceil((account.blockedUntilMs - Date.now()) / 1000)), (err as Error).message);
    }
    try {
      const params: Record<string, unknown> = { withdrawOrderId: request.withdraw_order_id };
      if (request.network) params.network = request.network;
      // ccxt truncates the amount to the network's withdrawIntegerMultiple; it takes the decimal string.
      const tx = await (await account.client()).withdraw(request.coin, request.amount as unknown as number, request.address, request.address_tag ?? undefined, params);
      return accepted(request, String(tx.id), 'accepted');
    } catch (err) {
      const failure = classify(account, err);
      switch (failure.kind) {
        case 'insufficient_balance':
        case 'invalid_address':
        case 'rejected':
          return failed(failure.code, failure.detail, { provider_state: 'rejected', provider_refs: refs(request) });
        case 'rate_limited':
          return rateLimited(request, failure.retryAfterSeconds, failure.detail);
        case 'uncertain':
          return result({
            next_state: 'UNKNOWN',
            provider_state: 'submit_uncertain',
            provider_refs: refs(request),
            error_code: failure.code,
            error_detail: failure.detail,
          });
      }
    }
  }

  /** A withdrawal action completes on acceptance; observing it again is the lookup recover() does. */
  async observe(ctx: ExecutionContext): Promise<ExecutionResult> {
    return this.recover(ctx);
  }

  async recover(ctx: ExecutionContext): Promise<ExecutionResult> {
    const prepared = preparedOf(ctx);
    const request = payloadOf<WithdrawalRequest>(prepared);
    if (!request) {
      return result({ next_state: 'UNKNOWN', error_code: 'CEX_NO_PREPARED_ACTION', error_detail: 'the attempt has no prepared withdrawal', manual_intervention_required: true });
    }
    const account = this.#accounts.get(request.account);
    if (!account) return result({ next_state: 'UNKNOWN', error_code: 'CEX_ACCOUNT_UNKNOWN', error_detail: `exchange account ${request.account} is not configured` });
    const startTime = request.prepared_at_ms - LOOKUP_BACKDATE_MS;
    const found = await exchangeCall(account, 'looking the withdrawal up', async () =>
      (await account.client()).fetchWithdrawals(request.coin, undefined, undefined, {
        withdrawOrderId: request.withdraw_order_id,
        startTime,
        endTime: startTime + LOOKUP_WINDOW_MS,
      }),
    );
    const mine = found.find((t) => (t.info as Record<string, unknown> | undefined)?.withdrawOrderId === request.withdraw_order_id);
    if (mine) {
      const raw = Number((mine.info as Record<string, unknown>).status);
      // 1 cancelled, 3 rejected, 5 failure: the exchange took the request and did not pay.
      if (raw === 1 || raw === 3 || raw === 5) {
        return failed(raw === 1 ? 'CEX_WITHDRAWAL_CANCELLED' : 'CEX_WITHDRAWAL_FAILED', `withdrawal ${mine.id} has exchange status ${raw}`, {
          provider_state: String(mine.status ?? raw),
          provider_refs: { ...refs(request), exchange_withdrawal_id: String(mine.id) },
        });
      }
      return accepted(request, String(mine.id), 'recovered');
    }
    const refusal = refusalOf(ctx);
    const now = Date.now();
    if (refusal) {
      if (now >= refusal.retry_at_ms) {
        return result({ next_state: 'READY', provider_refs: refs(request), error_code: 'CEX_RATE_LIMITED', error_detail: 'the exchange refused the attempt (rate limit); the wait is over' });
      }
      return result({
        next_state: 'UNKNOWN',
        provider_refs: refs(request),
        error_code: 'CEX_RATE_LIMITED',
        error_detail: `the exchange refused the attempt (rate limit); retry after ${new Date(refusal.retry_at_ms).toISOString()}`,
        retry_after_seconds: Math.ceil((refusal.retry_at_ms - now) / 1000),
      });
    }
    if (now - request.prepared_at_ms >= this.#notFoundAfterMs) {
      return result({
        next_state: 'READY',
        provider_refs: refs(request),
        error_code: 'CEX_WITHDRAWAL_NOT_FOUND',
        error_detail: `no withdrawal with withdrawOrderId ${request.withdraw_order_id} after ${this.#notFoundAfterMs / 1000} s: nothing was withdrawn`,
      });
    }
    return result({
      next_state: 'UNKNOWN',
      provider_refs: refs(request),
      error_code: 'CEX_WITHDRAWAL_NOT_FOUND',
      error_detail: `no withdrawal with withdrawOrderId ${request.withdraw_order_id} yet; looking again later`,
    });
  }

  async health(): Promise<Record<string, unknown>> {
    return accountsHealth(this.executorKey, this.#accounts);
  }

  #spec(ctx: ExecutionContext): { ok: true; account: CexAccount; request: WithdrawalRequest } | { ok: false; result: ExecutionResult } {
    const found = lookupAccount(this.#accounts, ctx);
    if (!found.ok) return found;
    const account = found.account;
    const cfg = ctx.node_config;
    const intent = ctx.intent;
    const destination = intent.destination;
    const coin = str(cfg.coin) ?? str(cfg.asset) ?? str(intent.asset);
    const address =
      str(cfg.address) ??
      (typeof destination === 'string' ? destination : destination && typeof destination === 'object' ? str((destination as Record<string, unknown>).address) : undefined);
    const amount = str(cfg.amount) ?? str(intent.amount);
    if (!coin) return { ok: false, result: failed('CEX_ASSET_MISSING', 'no coin (config.coin or intent.asset)') };
    if (!address) return { ok: false, result: failed('CEX_INVALID_ADDRESS', 'no destination address (config.address or intent.destination.address)') };
    if (!positiveDecimal(amount)) return { ok: false, result: failed('CEX_AMOUNT_INVALID', 'the amount (config.amount or intent.amount) must be a positive decimal string') };
    const prepared = preparedOf(ctx);
    const key = ctx.idempotency_key ?? attemptKey(ctx.request_node_id, ctx.attempt_no);
    return {
      ok: true,
      account,
      request: {
        account: account.key,
        coin,
        network: networkId(account, str(cfg.network) ?? str(intent.network)) ?? null,
        address,
        address_tag: str(cfg.address_tag) ?? null,
        amount: amount!,
        withdraw_order_id: key,
        prepared_at_ms: payloadOf<WithdrawalRequest>(prepared)?.prepared_at_ms ?? Date.now(),
      },
    };
  }
}

function refs(r: WithdrawalRequest): Record<string, unknown> {
  return { account: r.account, withdraw_order_id: r.withdraw_order_id, coin: r.coin, network: r.network, amount: r.amount, address: r.address };
}

function accepted(r: WithdrawalRequest, id: string, how: 'accepted' | 'recovered'): ExecutionResult {
  return result({ next_state: 'COMPLETED', provider_state: how, provider_refs: { ...refs(r), exchange_withdrawal_id: id }, proof: { exchange_withdrawal_id: id, withdraw_order_id: r.withdraw_order_id } });
}

const REFUSAL_ARTIFACT = 'cex_submit_refusal';

/** The exchange refused before acting; the refusal is kept with the attempt for recover(). */
function rateLimited(r: WithdrawalRequest, retryAfterSeconds: number, detail: string): ExecutionResult {
  const content = JSON.stringify({ kind: 'rate_limited', retry_after_seconds: retryAfterSeconds, retry_at_ms: Date.now() + retryAfterSeconds * 1000 });
  return result({
    next_state: 'UNKNOWN',
    provider_state: 'rate_limited',
    provider_refs: refs(r),
    error_code: 'CEX_RATE_LIMITED',
    error_detail: detail,
    retry_after_seconds: retryAfterSeconds,
    generated_artifacts: [{ artifact_type: REFUSAL_ARTIFACT, content_format: 'json', content_inline: content, artifact_metadata: {}, artifact_digest: null, content_uri: null }],
  });
}

function refusalOf(ctx: ExecutionContext): { retry_at_ms: number } | null {
  const a = [...(ctx.attempt_artifacts ?? [])].reverse().find((x) => x.artifact_type === REFUSAL_ARTIFACT);
  if (!a?.content_inline) return null;
  try {
    const v = JSON.parse(a.content_inline) as { retry_at_ms?: unknown };
    return typeof v.retry_at_ms === 'number' ? { retry_at_ms: v.retry_at_ms } : null;
  } catch {
    return null;
  }
}
