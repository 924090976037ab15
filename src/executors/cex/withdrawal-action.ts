import type { Exchange } from 'ccxt';
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
  payloadOf,
  positiveDecimal,
  preparedOf,
  result,
  str,
  throwIfBlocked,
  type Accounts,
} from './common.ts';
import type { ApprovedWithdrawal, CexAccount } from './client.ts';
import { FatalMovementError } from '../errors.ts';
import { addDecimal, decimalOf, sameDecimal } from './decimal.ts';
import { checkWithdrawal, resolveNetwork, type CoinNetwork, type Refusal } from './networks.ts';

export const CEX_WITHDRAWAL_ACTION_KEY = 'exec.cex.withdrawal_action';
/** Binance accepts a withdrawOrderId lookup over at most 7 days. */
const LOOKUP_WINDOW_MS = 7 * 86_400_000 - 1;
const LOOKUP_BACKDATE_MS = 3_600_000;

/** What prepare() fixes and submit() sends: the prepared action's payload. */
export interface WithdrawalRequest {
  account: string;
  coin: string;
  /**
   * Before prepare: the node's network name (mapped through the account's networks); in the
   * prepared payload: the exchange's network id it resolved to.
   */
  network: string | null;
  /** ccxt's unified code of that network (what withdraw() is given); null in older payloads. */
  network_code?: string | null;
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
   * withdrawn and lets the node start a new attempt (with a new withdrawOrderId). An account's
   * `not_found_after_seconds` takes precedence.
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
    const checked = await this.#checked(ctx);
    if (!checked.ok) return checked.result;
    const { account, request, ex } = checked;
    const balance = await exchangeCall(account, 'reading the balance', () => ex.fetchBalance());
    const free = Number((balance.free as unknown as Record<string, number | undefined>)[request.coin] ?? 0);
    if (free < Number(request.amount)) {
      return failed('CEX_INSUFFICIENT_BALANCE', `${account.key} holds ${free} ${request.coin} free, the withdrawal needs ${request.amount}`);
    }
    return null;
  }

  async prepare(ctx: ExecutionContext): Promise<ExecutionResult> {
    const checked = await this.#checked(ctx);
    if (!checked.ok) return checked.result;
    const payload = JSON.stringify(checked.request);
    return result({
      next_state: 'SUBMITTING',
      prepared_action: {
        prepared_action_id: `cex-${checked.request.withdraw_order_id}`,
        action_type: ctx.action_type,
        payload_format: 'cex_withdrawal_json',
        payload,
        payload_hash: payloadHash(payload),
        // Authenticated with the account's API key, not a signature of ours.
        signing_required: false,
        provider_hints: { account: checked.account.key, withdraw_order_id: checked.request.withdraw_order_id },
      },
    });
  }

  /**
   * The node's request with its network resolved against the exchange's currencies (loaded by
   * ccxt: capital/config/getall and the spot exchangeInfo) and the amount checked for that network.
   */
  async #checked(ctx: ExecutionContext): Promise<{ ok: true; account: CexAccount; request: WithdrawalRequest; ex: Exchange } | { ok: false; result: ExecutionResult }> {
    const spec = this.#spec(ctx);
    if (!spec.ok) return spec;
    const { account, request } = spec;
    const ex = await account.client();
    await exchangeCall(account, 'loading currencies', () => ex.loadMarkets());
    if (!ex.currencies[request.coin]) return { ok: false, result: failed('CEX_ASSET_UNKNOWN', `${account.key} has no currency ${request.coin}`) };
    const net = resolveNetwork(ex, account, request.coin, request.network);
    if (!net.ok) return { ok: false, result: refused(net) };
    const refusal = checkWithdrawal(ex, account, request.coin, net.network, request.amount);
    if (refusal) return { ok: false, result: refused(refusal) };
    return { ok: true, account, ex, request: { ...request, network: net.network.id, network_code: net.network.code } };
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
    let ex: Exchange;
    try {
      ex = await account.client();
      await ex.loadMarkets();
    } catch (err) {
      // Nothing was sent: a failed read of the currencies never withdraws.
      const failure = classify(account, err);
      if (failure.kind === 'rate_limited') return rateLimited(request, failure.retryAfterSeconds, failure.detail);
      if (failure.kind === 'uncertain') return notSent(request, failure.code, NOT_SENT_RETRY_SECONDS, failure.detail);
      return failed(failure.code, failure.detail, { provider_state: 'refused', provider_refs: refs(request) });
    }
    // Checked again here, with the currencies this process holds now: the request goes out only on
    // the network it names, with exactly the approved amount.
    const net = resolveNetwork(ex, account, request.coin, request.network_code ?? request.network, { direct: true });
    if (!net.ok) return refused(net, request);
    if (request.network !== null && net.network.id !== request.network) {
      return refused({ ok: false, code: 'CEX_NETWORK_MISMATCH', detail: `the prepared network ${request.network} resolves to ${net.network.code} (id ${net.network.id})`, details: { network: request.network, network_code: net.network.code } }, request);
    }
    const refusal = checkWithdrawal(ex, account, request.coin, net.network, request.amount);
    if (refusal) return refused(refusal, request);
    if (account.approved.has(request.withdraw_order_id)) {
      return result({ next_state: 'UNKNOWN', provider_state: 'submit_in_flight', provider_refs: refs(request), error_code: 'CEX_WITHDRAWAL_IN_FLIGHT', error_detail: `a withdraw call for ${request.withdraw_order_id} is already running in this process` });
    }
    const approval: ApprovedWithdrawal = { coin: request.coin, network: net.network.id, amount: request.amount };
    account.approved.set(request.withdraw_order_id, approval);
    try {
      const params: Record<string, unknown> = { withdrawOrderId: request.withdraw_order_id, network: net.network.code };
      // ccxt takes the decimal string; the amount is already exact for the network (checked above,
      // and again by the client's fetch() against what ccxt actually puts on the wire).
      const tx = await ex.withdraw(request.coin, request.amount as unknown as number, request.address, request.address_tag ?? undefined, params);
      return accepted(request, String(tx.id), 'accepted', net.network, approval.sent);
    } catch (err) {
      if (err instanceof FatalMovementError) {
        // The client's last guard refused the request before a byte was sent.
        return failed(err.code, err.message, { provider_state: 'refused', provider_refs: { ...refs(request), ...err.details } });
      }
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
    } finally {
      account.approved.delete(request.withdraw_order_id);
    }
  }

  /** A withdrawal action completes on acceptance; observing it again is the lookup recover() does. */
  async observe(ctx: ExecutionContext): Promise<ExecutionResult> {
    return this.recover(ctx);
  }

  /** recover() never withdraws (it looks the withdrawal up by withdrawOrderId): the same read. */
  inspect(ctx: ExecutionContext): Promise<ExecutionResult> {
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
      // The exchange's record of the amount must be the approved one; anything else is for a
      // person to look at. Binance's history lists `amount` beside `transactionFee`, and whether
      // `amount` is before or after the fee is not settled by its documentation: either reading
      // that gives the approved amount counts as it.
      const info = mine.info as Record<string, unknown>;
      const listedAmount = str(mine.amount) ?? str(info.amount);
      const listedFee = decimalOf(info.transactionFee) ?? decimalOf(mine.fee?.cost);
      const grossOfFee = listedAmount !== undefined && listedFee !== undefined ? addDecimal(listedAmount, listedFee) : null;
      if (listedAmount !== undefined && !sameDecimal(listedAmount, request.amount) && !(grossOfFee !== null && sameDecimal(grossOfFee, request.amount))) {
        return result({
          next_state: 'UNKNOWN',
          provider_refs: { ...refs(request), exchange_withdrawal_id: String(mine.id), exchange_amount: listedAmount },
          error_code: 'CEX_AMOUNT_MISMATCH',
          error_detail: `withdrawal ${mine.id} lists ${listedAmount} ${request.coin}, ${request.amount} was approved`,
          manual_intervention_required: true,
        });
      }
      return accepted(request, String(mine.id), 'recovered', null, listedAmount ? { coin: request.coin, network: str((mine.info as Record<string, unknown>).network) ?? request.network, amount: listedAmount, address: str(mine.address) ?? null } : undefined);
    }
    const refusal = refusalOf(ctx);
    const now = Date.now();
    if (refusal) {
      const what = refusal.code === 'CEX_RATE_LIMITED' ? 'the exchange refused the attempt (rate limit)' : `nothing was sent (${refusal.code})`;
      if (now >= refusal.retry_at_ms) {
        return result({ next_state: 'READY', provider_refs: refs(request), error_code: refusal.code, error_detail: `${what}; the wait is over` });
      }
      return result({
        next_state: 'UNKNOWN',
        provider_refs: refs(request),
        error_code: refusal.code,
        error_detail: `${what}; retry after ${new Date(refusal.retry_at_ms).toISOString()}`,
        retry_after_seconds: Math.ceil((refusal.retry_at_ms - now) / 1000),
      });
    }
    const notFoundAfterMs = account.notFoundAfterMs ?? this.#notFoundAfterMs;
    if (now - request.prepared_at_ms >= notFoundAfterMs) {
      return result({
        next_state: 'READY',
        provider_refs: refs(request),
        error_code: 'CEX_WITHDRAWAL_NOT_FOUND',
        error_detail: `no withdrawal with withdrawOrderId ${request.withdraw_order_id} after ${notFoundAfterMs / 1000} s: nothing was withdrawn`,
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
        network: str(cfg.network) ?? str(intent.network) ?? null,
        address,
        address_tag: str(cfg.address_tag) ?? null,
        amount: amount!,
        withdraw_order_id: key,
        prepared_at_ms: payloadOf<WithdrawalRequest>(prepared)?.prepared_at_ms ?? Date.now(),
      },
    };
  }
}

type Sent = { coin: string; network: string | null; amount: string; address: string | null };

function refs(r: WithdrawalRequest): Record<string, unknown> {
  return { account: r.account, withdraw_order_id: r.withdraw_order_id, coin: r.coin, network: r.network, network_code: r.network_code ?? null, amount: r.amount, address: r.address };
}

/** provider_refs.amount and .network are what went out: the request on the wire (or the exchange's record of it). */
function accepted(r: WithdrawalRequest, id: string, how: 'accepted' | 'recovered', network: CoinNetwork | null, sent: Sent | undefined): ExecutionResult {
  const out = { ...refs(r), ...(network ? { network: network.id, network_code: network.code } : {}), ...(sent ? { amount: sent.amount, network: sent.network } : {}), exchange_withdrawal_id: id };
  return result({ next_state: 'COMPLETED', provider_state: how, provider_refs: out, proof: { exchange_withdrawal_id: id, withdraw_order_id: r.withdraw_order_id } });
}

/** A check of ours refused the withdrawal: FAILED, nothing was sent; the facts in provider_refs. */
function refused(refusal: Refusal, r?: WithdrawalRequest): ExecutionResult {
  return failed(refusal.code, refusal.detail, { provider_state: 'refused', provider_refs: { ...(r ? refs(r) : {}), ...refusal.details } });
}

const REFUSAL_ARTIFACT = 'cex_submit_refusal';
/** After a currency load that failed without an answer in submit (nothing sent): try again after this. */
const NOT_SENT_RETRY_SECONDS = 5;

/** The exchange refused before acting; the refusal is kept with the attempt for recover(). */
function rateLimited(r: WithdrawalRequest, retryAfterSeconds: number, detail: string): ExecutionResult {
  return notSent(r, 'CEX_RATE_LIMITED', retryAfterSeconds, detail, 'rate_limited');
}

/**
 * Nothing was sent (a rate limit, or the currencies could not be read in submit): UNKNOWN, with the
 * refusal kept with the attempt, so recover() confirms the withdrawal is absent and lets the node
 * try again once `retryAfterSeconds` have passed.
 */
function notSent(r: WithdrawalRequest, code: string, retryAfterSeconds: number, detail: string, providerState = 'not_sent'): ExecutionResult {
  const content = JSON.stringify({ kind: providerState, code, retry_after_seconds: retryAfterSeconds, retry_at_ms: Date.now() + retryAfterSeconds * 1000 });
  return result({
    next_state: 'UNKNOWN',
    provider_state: providerState,
    provider_refs: refs(r),
    error_code: code,
    error_detail: detail,
    retry_after_seconds: retryAfterSeconds,
    generated_artifacts: [{ artifact_type: REFUSAL_ARTIFACT, content_format: 'json', content_inline: content, artifact_metadata: {}, artifact_digest: null, content_uri: null }],
  });
}

function refusalOf(ctx: ExecutionContext): { retry_at_ms: number; code: string } | null {
  const a = [...(ctx.attempt_artifacts ?? [])].reverse().find((x) => x.artifact_type === REFUSAL_ARTIFACT);
  if (!a?.content_inline) return null;
  try {
    const v = JSON.parse(a.content_inline) as { retry_at_ms?: unknown; code?: unknown };
    return typeof v.retry_at_ms === 'number' ? { retry_at_ms: v.retry_at_ms, code: typeof v.code === 'string' ? v.code : 'CEX_RATE_LIMITED' } : null;
  } catch {
    return null;
  }
}
