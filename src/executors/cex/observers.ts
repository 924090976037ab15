import { payloadHash } from '../payload-hash.ts';
import type { ExecutionContext, ExecutionResult, Executor, PreparedAction } from '../protocol.ts';
import { accountsHealth, CEX_LANE, exchangeCall, failed, lookupAccount, observeLater, payloadOf, positiveDecimal, preparedOf, result, str, type Accounts } from './common.ts';
import type { CexAccount } from './client.ts';

export const CEX_WITHDRAWAL_OBSERVE_KEY = 'exec.cex.withdrawal_observe';
export const CEX_DEPOSIT_OBSERVE_KEY = 'exec.cex.deposit_observe';
const DAY_MS = 86_400_000;
const SEVEN_DAYS_MS = 7 * DAY_MS - 1;

export interface CexObserveOptions {
  /** Seconds until the observer looks again while the exchange is still working. */
  pollSeconds?: number;
  executorKey?: string;
}

/**
 * The shape both observers share: preflight checks what the node must know, prepare records it,
 * submit has no side effect (SUBMITTED), observe() asks the exchange, and recover() asks again
 * (a read only, so a node stuck in SUBMITTING or UNKNOWN is resolved by the same lookup).
 */
abstract class CexObserver<T extends { account: string }> implements Executor {
  readonly lane = CEX_LANE;
  abstract readonly executorKey: string;
  protected readonly accounts: Accounts;
  protected readonly pollSeconds: number;

  constructor(accounts: Accounts, opts: CexObserveOptions) {
    this.accounts = accounts;
    this.pollSeconds = opts.pollSeconds ?? 5;
  }

  protected abstract target(ctx: ExecutionContext, account: CexAccount): { ok: true; target: T } | { ok: false; result: ExecutionResult };
  protected abstract look(account: CexAccount, target: T): Promise<ExecutionResult>;

  #resolve(ctx: ExecutionContext): { ok: true; account: CexAccount; target: T } | { ok: false; result: ExecutionResult } {
    const stored = payloadOf<T>(preparedOf(ctx));
    if (stored) {
      const account = this.accounts.get(stored.account);
      if (!account) return { ok: false, result: failed('CEX_ACCOUNT_UNKNOWN', `exchange account ${stored.account} is not configured`) };
      return { ok: true, account, target: stored };
    }
    const found = lookupAccount(this.accounts, ctx);
    if (!found.ok) return found;
    const t = this.target(ctx, found.account);
    return t.ok ? { ok: true, account: found.account, target: t.target } : t;
  }

  async preflight(ctx: ExecutionContext): Promise<ExecutionResult | null> {
    const r = this.#resolve(ctx);
    return r.ok ? null : r.result;
  }

  async prepare(ctx: ExecutionContext): Promise<ExecutionResult> {
    const r = this.#resolve(ctx);
    if (!r.ok) return r.result;
    const payload = JSON.stringify(r.target);
    return result({
      next_state: 'SUBMITTING',
      prepared_action: {
        prepared_action_id: `cex-observe-${ctx.request_node_id}-${ctx.attempt_no}`,
        action_type: ctx.action_type,
        payload_format: 'cex_observe_json',
        payload,
        payload_hash: payloadHash(payload),
        signing_required: false,
        provider_hints: { account: r.account.key },
      },
    });
  }

  async submit(_ctx: ExecutionContext, _prepared: PreparedAction): Promise<ExecutionResult> {
    return result({ next_state: 'SUBMITTED', provider_state: 'watching', retry_after_seconds: this.pollSeconds });
  }

  async observe(ctx: ExecutionContext): Promise<ExecutionResult> {
    const r = this.#resolve(ctx);
    if (!r.ok) return r.result;
    try {
      return await this.look(r.account, r.target);
    } catch (err) {
      return observeLater(err);
    }
  }

  async recover(ctx: ExecutionContext): Promise<ExecutionResult> {
    const r = await this.observe(ctx);
    // Still under way: back to the observer (recovery must not leave it UNKNOWN for a mere read).
    return r.next_state === 'OBSERVING' ? { ...r, next_state: 'SUBMITTED' } : r;
  }

  /** An observer has no side effect: recover() only reads the exchange's history already. */
  inspect(ctx: ExecutionContext): Promise<ExecutionResult> {
    return this.recover(ctx);
  }

  async health(): Promise<Record<string, unknown>> {
    return accountsHealth(this.executorKey, this.accounts);
  }
}

interface WithdrawalTarget {
  account: string;
  coin: string;
  withdraw_order_id: string | null;
  exchange_withdrawal_id: string | null;
  since_ms: number;
}

/**
 * `exec.cex.withdrawal_observe`: follows a withdrawal (from provider_context, i.e. the preceding
 * exec.cex.withdrawal_action, or from config) to Binance status 6 (COMPLETED, with the chain
 * transaction's hash as tx_hash) or 1/3/5 (FAILED).
 */
export class CexWithdrawalObserveExecutor extends CexObserver<WithdrawalTarget> {
  readonly executorKey: string;

  constructor(accounts: Accounts, opts: CexObserveOptions = {}) {
    super(accounts, opts);
    this.executorKey = opts.executorKey ?? CEX_WITHDRAWAL_OBSERVE_KEY;
  }

  protected target(ctx: ExecutionContext, account: CexAccount) {
    const pc = ctx.provider_context;
    const cfg = ctx.node_config;
    const orderId = str(cfg.withdraw_order_id) ?? str(pc.withdraw_order_id) ?? null;
    const id = str(cfg.exchange_withdrawal_id) ?? str(pc.exchange_withdrawal_id) ?? null;
    const coin = str(cfg.coin) ?? str(pc.coin) ?? str(ctx.intent.asset);
    if (!orderId && !id) return { ok: false as const, result: failed('CEX_WITHDRAWAL_REF_MISSING', 'no withdrawal to follow (provider_context or config exchange_withdrawal_id / withdraw_order_id)') };
    if (!coin) return { ok: false as const, result: failed('CEX_ASSET_MISSING', 'no coin (config.coin, provider_context.coin or intent.asset)') };
    return { ok: true as const, target: { account: account.key, coin, withdraw_order_id: orderId, exchange_withdrawal_id: id, since_ms: Date.now() - DAY_MS } };
  }

  protected async look(account: CexAccount, t: WithdrawalTarget): Promise<ExecutionResult> {
    const params: Record<string, unknown> = t.withdraw_order_id
      ? { withdrawOrderId: t.withdraw_order_id, startTime: t.since_ms, endTime: t.since_ms + SEVEN_DAYS_MS }
      : { idList: t.exchange_withdrawal_id };
    const list = await exchangeCall(account, 'reading the withdrawal history', async () => (await account.client()).fetchWithdrawals(t.coin, undefined, undefined, params));
    const w = list.find((x) => (t.withdraw_order_id ? (x.info as Record<string, unknown>)?.withdrawOrderId === t.withdraw_order_id : String(x.id) === t.exchange_withdrawal_id));
    if (!w) {
      return result({ next_state: 'OBSERVING', provider_state: 'not_visible', error_code: 'CEX_WITHDRAWAL_NOT_VISIBLE', error_detail: 'the exchange does not list the withdrawal yet', retry_after_seconds: this.pollSeconds });
    }
    const raw = Number((w.info as Record<string, unknown>).status);
    const txId = str(w.txid) ?? str((w.info as Record<string, unknown>).txId) ?? null;
    const refs = { account: account.key, exchange_withdrawal_id: String(w.id), withdraw_order_id: t.withdraw_order_id, coin: t.coin, amount: str(w.amount), address: str(w.address), tx_hash: txId, exchange_status: raw };
    if (w.status === 'ok') {
      if (!txId) return result({ next_state: 'OBSERVING', provider_state: 'ok_without_txid', provider_refs: refs, retry_after_seconds: this.pollSeconds });
      return result({ next_state: 'COMPLETED', provider_state: 'completed', provider_refs: refs, proof: { exchange_withdrawal_id: String(w.id), tx_hash: txId, exchange_status: raw } });
    }
    if (w.status === 'failed' || w.status === 'canceled') {
      return failed(w.status === 'canceled' ? 'CEX_WITHDRAWAL_CANCELLED' : 'CEX_WITHDRAWAL_FAILED', `withdrawal ${w.id} has exchange status ${raw}`, { provider_state: w.status, provider_refs: refs });
    }
    return result({ next_state: 'OBSERVING', provider_state: String(w.status ?? raw), provider_refs: refs, retry_after_seconds: this.pollSeconds });
  }
}

interface DepositTarget {
  account: string;
  coin: string;
  tx_hash: string | null;
  address: string | null;
  amount: string | null;
  since_ms: number;
  until_ms: number;
}

/**
 * `exec.cex.deposit_observe`: waits until the exchange credits a deposit (Binance status 1, or 6:
 * credited but not yet withdrawable). The deposit is matched by its transaction hash (config.tx_hash,
 * usually `$ref:<node>.tx_hash`, or provider_context.tx_hash) or, without one, by address (optional),
 * amount and a time window (config.window_seconds back from prepare, default 86400).
 */
export class CexDepositObserveExecutor extends CexObserver<DepositTarget> {
  readonly executorKey: string;

  constructor(accounts: Accounts, opts: CexObserveOptions = {}) {
    super(accounts, { pollSeconds: opts.pollSeconds ?? 10, ...opts });
    this.executorKey = opts.executorKey ?? CEX_DEPOSIT_OBSERVE_KEY;
  }

  protected target(ctx: ExecutionContext, account: CexAccount) {
    const pc = ctx.provider_context;
    const cfg = ctx.node_config;
    const coin = str(cfg.coin) ?? str(ctx.intent.asset) ?? str(pc.coin);
    const txHash = str(cfg.tx_hash) ?? str(pc.tx_hash) ?? null;
    const amount = str(cfg.amount) ?? str(ctx.intent.amount) ?? null;
    if (!coin) return { ok: false as const, result: failed('CEX_ASSET_MISSING', 'no coin (config.coin or intent.asset)') };
    if (!txHash && !positiveDecimal(amount ?? undefined)) {
      return { ok: false as const, result: failed('CEX_DEPOSIT_MATCH_MISSING', 'a deposit is matched by config.tx_hash, or by a positive amount within a time window') };
    }
    const windowMs = (Number(cfg.window_seconds) > 0 ? Number(cfg.window_seconds) : 86_400) * 1000;
    const now = Date.now();
    return {
      ok: true as const,
      target: { account: account.key, coin, tx_hash: txHash, address: str(cfg.address) ?? null, amount: txHash ? null : amount, since_ms: now - windowMs, until_ms: now + windowMs },
    };
  }

  protected async look(account: CexAccount, t: DepositTarget): Promise<ExecutionResult> {
    const params: Record<string, unknown> = t.tx_hash ? { txId: t.tx_hash } : { startTime: t.since_ms, endTime: Math.min(t.until_ms, t.since_ms + 90 * DAY_MS) };
    const list = await exchangeCall(account, 'reading the deposit history', async () => (await account.client()).fetchDeposits(t.coin, undefined, undefined, params));
    const d = list.find((x) => {
      if (t.tx_hash) return (str(x.txid) ?? '').toLowerCase() === t.tx_hash.toLowerCase();
      if (t.address && (str(x.address) ?? '').toLowerCase() !== t.address.toLowerCase()) return false;
      return Number(x.amount) === Number(t.amount) && (x.timestamp ?? 0) >= t.since_ms && (x.timestamp ?? 0) <= t.until_ms;
    });
    if (!d) return result({ next_state: 'OBSERVING', provider_state: 'not_seen', retry_after_seconds: this.pollSeconds });
    const raw = Number((d.info as Record<string, unknown>).status);
    const refs = { account: account.key, exchange_deposit_id: str(d.id) ?? null, tx_hash: str(d.txid) ?? null, coin: t.coin, amount: str(d.amount), exchange_status: raw, confirmations: str((d.info as Record<string, unknown>).confirmTimes) ?? null };
    if (raw === 1 || raw === 6) return result({ next_state: 'COMPLETED', provider_state: 'credited', provider_refs: refs, proof: { ...refs } });
    if (raw === 2 || raw === 7) return failed('CEX_DEPOSIT_REJECTED', `deposit ${d.id} has exchange status ${raw}`, { provider_state: 'rejected', provider_refs: refs });
    return result({ next_state: 'OBSERVING', provider_state: 'pending', provider_refs: refs, retry_after_seconds: this.pollSeconds });
  }
}
