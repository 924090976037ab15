import { getAddress, isAddress } from 'viem';
import { failed, manual, preparedWatch, result } from '../evm/tx-lifecycle.ts';
import type { ExecutionContext, ExecutionResult, Executor, PreparedAction } from '../protocol.ts';
import { HYPERLIQUID_CREDIT_KEY, HYPERLIQUID_LANE } from './common.ts';
import type { HyperliquidConfig } from './config.ts';
import { compare, formatDecimal, parseDecimal, subtract, type HyperliquidInfoClient } from './info.ts';
import { parseWatch as parseWatchOf, pinnedWatch } from '../watch.ts';

/** What the watch pins: whose account, how much must arrive, over which baseline. */
interface Watch {
  user: string;
  amount: string;
  baseline_withdrawable: string;
}

type Parsed<T> = { ok: true; value: T } | { ok: false; code: string; detail: string };

/**
 * `exec.observe.hyperliquid_credit`: waits until the account's clearinghouseState shows the deposit,
 * that is until `withdrawable` rose by at least the amount over the baseline the top-up pinned
 * before it was sent. The account, amount and baseline come from the node's config (`$ref` of the
 * top-up) or the top-up's provider_refs. Reads only: never signs, never sends.
 */
export class HyperliquidCreditObserver implements Executor {
  readonly executorKey = HYPERLIQUID_CREDIT_KEY;
  readonly lane = HYPERLIQUID_LANE;
  readonly #info: HyperliquidInfoClient;
  readonly #pollSeconds: number;

  constructor(cfg: HyperliquidConfig, info: HyperliquidInfoClient) {
    this.#info = info;
    this.#pollSeconds = cfg.poll_seconds;
  }

  async preflight(ctx: ExecutionContext): Promise<ExecutionResult | null> {
    const w = watchOf(ctx);
    return w.ok ? null : failed(w.code, w.detail);
  }

  async prepare(ctx: ExecutionContext): Promise<ExecutionResult> {
    const w = watchOf(ctx);
    if (!w.ok) return failed(w.code, w.detail);
    return preparedWatch(ctx, 'hyperliquid-credit', JSON.stringify(w.value), { ...w.value });
  }

  async submit(_ctx: ExecutionContext, prepared: PreparedAction): Promise<ExecutionResult> {
    const w = parseWatch(prepared.payload);
    if (!w) return failed('HYPERLIQUID_OBSERVE_SPEC_INVALID', 'the prepared watch cannot be read');
    return result({ next_state: 'SUBMITTED', provider_state: 'watching', provider_refs: { ...w }, retry_after_seconds: this.#poll() });
  }

  async observe(ctx: ExecutionContext): Promise<ExecutionResult> {
    const w = pinned(ctx);
    if (!w) return manual('HYPERLIQUID_NO_PREPARED_ACTION', 'the attempt has no prepared credit watch');
    const refs = { ...w };
    const answer = await this.#info.clearinghouseState(w.user);
    const waiting = (state: string, extra: Record<string, unknown> = {}) =>
      result({ next_state: 'OBSERVING', provider_state: state, provider_refs: refs, retry_after_seconds: this.#poll(), ...extra });
    if (answer.kind === 'unavailable') return waiting('unavailable', { error_code: 'HYPERLIQUID_INFO_UNAVAILABLE', error_detail: answer.detail });
    if (answer.kind === 'rejected') return waiting('rejected', { error_code: 'HYPERLIQUID_INFO_REJECTED', error_detail: answer.detail, retry_after_seconds: Math.max(this.#poll(), 60) });
    const now = parseDecimal(answer.state.withdrawable)!;
    const credited = subtract(now, parseDecimal(w.baseline_withdrawable)!);
    const progress = { withdrawable: answer.state.withdrawable, credited: formatDecimal(credited), state_time: answer.state.time };
    if (compare(credited, parseDecimal(w.amount)!) < 0) return waiting('not_credited', { provider_refs: { ...refs, ...progress } });
    return result({ next_state: 'COMPLETED', provider_state: 'credited', provider_refs: { ...refs, ...progress }, proof: { ...progress, baseline_withdrawable: w.baseline_withdrawable } });
  }

  async recover(ctx: ExecutionContext): Promise<ExecutionResult> {
    if (!pinned(ctx)) return result({ next_state: 'READY', error_code: 'HYPERLIQUID_NOTHING_SENT', error_detail: 'a credit watch has no side effect' });
    return this.observe(ctx);
  }

  /** A credit watch has no side effect: recover() only reads already. */
  inspect(ctx: ExecutionContext): Promise<ExecutionResult> {
    return this.recover(ctx);
  }

  async close(): Promise<void> {
    await this.#info.close();
  }

  #poll(): number {
    return Math.max(1, Math.round(this.#pollSeconds));
  }
}

/** From the node config, else the top-up's provider_refs (provider_context). */
function watchOf(ctx: ExecutionContext): Parsed<Watch> {
  const cfg = ctx.node_config;
  const p = ctx.provider_context;
  const user = cfg.user ?? p.hyperliquid_user;
  if (typeof user !== 'string' || !isAddress(user, { strict: false })) {
    return { ok: false, code: 'HYPERLIQUID_INVALID_CONFIG', detail: `user ${JSON.stringify(user ?? null)} is not an address (config.user, or a preceding top-up)` };
  }
  const amount = cfg.amount ?? p.amount;
  if (typeof amount !== 'string' || !parseDecimal(amount) || amount.startsWith('-')) {
    return { ok: false, code: 'HYPERLIQUID_INVALID_CONFIG', detail: `amount ${JSON.stringify(amount ?? null)} is not a decimal string (config.amount, or a preceding top-up)` };
  }
  const baseline = cfg.baseline_withdrawable ?? p.baseline_withdrawable;
  if (typeof baseline !== 'string' || !parseDecimal(baseline)) {
    return { ok: false, code: 'HYPERLIQUID_INVALID_CONFIG', detail: `baseline_withdrawable ${JSON.stringify(baseline ?? null)} is not a decimal string (config.baseline_withdrawable, or a preceding top-up)` };
  }
  return { ok: true, value: { user: getAddress(user).toLowerCase(), amount, baseline_withdrawable: baseline } };
}

function parseWatch(payload: string | null): Watch | null {
  return parseWatchOf<Watch>(payload, (w) => typeof w.user === 'string' && typeof w.amount === 'string' && typeof w.baseline_withdrawable === 'string' && !!parseDecimal(w.amount) && !!parseDecimal(w.baseline_withdrawable));
}

function pinned(ctx: ExecutionContext): Watch | null {
  return pinnedWatch(ctx, parseWatch);
}
