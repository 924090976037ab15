import type { Address } from 'viem';
import { EvmErc20TransferExecutor, type EvmErc20TransferOptions } from '../evm/erc20-transfer.ts';
import type { ContractCall } from '../evm/contract-call.ts';
import { amountOf, type Parsed } from '../evm/token-config.ts';
import { firstHints } from '../evm/tx-lifecycle.ts';
import { FatalMovementError, TemporaryMovementError } from '../errors.ts';
import type { ExecutionContext, ExecutionResult, PreparedAction, SubmitOptions } from '../protocol.ts';
import { HYPERLIQUID_LANE, HYPERLIQUID_TOPUP_KEY } from './common.ts';
import { HYPERLIQUID_MIN_DEPOSIT, type HyperliquidConfig } from './config.ts';
import type { HyperliquidInfoClient } from './info.ts';

export interface HyperliquidTopupOptions extends Omit<EvmErc20TransferOptions, 'executorKey'> {
  hyperliquid: HyperliquidConfig;
  info: HyperliquidInfoClient;
}

/**
 * `exec.hyperliquid.topup`: a Bridge2 deposit, which is a plain ERC-20 `transfer(bridge, amount)` of
 * USDC from the hot wallet on the bridge's chain; Hyperliquid credits it to the sending address.
 * It is the EVM lane's ERC-20 transfer with the recipient and the token fixed by the `hyperliquid`
 * section (a node naming another recipient or token is refused), so the transaction's life (nonce,
 * signing against the expected effect, broadcast, observe, recovery from the stored signed bytes)
 * is that executor's. Its own rules:
 * - an amount under 5 USDC is refused before anything is signed (HYPERLIQUID_DEPOSIT_BELOW_MINIMUM):
 *   Hyperliquid never credits it and the funds are lost;
 * - prepare reads the account's clearinghouseState and pins its `withdrawable` as the baseline the
 *   credit observer measures the deposit against (a read: the info API has no side effect);
 * - its results carry the account (`user`), the amount and the baseline for the credit observer.
 */
export class HyperliquidTopupExecutor extends EvmErc20TransferExecutor {
  override readonly lane = HYPERLIQUID_LANE;
  readonly #hl: HyperliquidConfig;
  readonly #info: HyperliquidInfoClient;

  constructor(opts: HyperliquidTopupOptions) {
    super({ ...opts, executorKey: HYPERLIQUID_TOPUP_KEY });
    this.#hl = opts.hyperliquid;
    this.#info = opts.info;
  }

  protected override async check(ctx: ExecutionContext): Promise<ExecutionResult | null> {
    return super.check(this.#deposit(ctx));
  }

  protected override async call(ctx: ExecutionContext): Promise<Parsed<ContractCall>> {
    const fixed = this.#deposit(ctx);
    const call = await super.call(fixed);
    if (!call.ok) return call;
    const answer = await this.#info.clearinghouseState(this.from);
    if (answer.kind !== 'ok') {
      // Nothing is signed without a baseline: the credit could not be told from what was there.
      throw new TemporaryMovementError('HYPERLIQUID_INFO_UNAVAILABLE', `no baseline for ${this.from}: ${answer.detail}`);
    }
    return {
      ok: true,
      value: {
        ...call.value,
        hints: {
          ...call.value.hints,
          hyperliquid_user: this.from,
          hyperliquid_bridge: this.#hl.bridge.toLowerCase(),
          baseline_withdrawable: answer.state.withdrawable,
          baseline_time: answer.state.time,
        },
      },
    };
  }

  override async submit(ctx: ExecutionContext, prepared: PreparedAction, opts?: SubmitOptions): Promise<ExecutionResult> {
    return withCreditRefs(await super.submit(ctx, prepared, opts), ctx);
  }

  override async observe(ctx: ExecutionContext): Promise<ExecutionResult> {
    return withCreditRefs(await super.observe(ctx), ctx);
  }

  override async recover(ctx: ExecutionContext): Promise<ExecutionResult> {
    return withCreditRefs(await super.recover(ctx), ctx);
  }

  override async inspect(ctx: ExecutionContext): Promise<ExecutionResult> {
    return withCreditRefs(await super.inspect(ctx), ctx);
  }

  /**
   * The node as the ERC-20 transfer it is: to the bridge, of the configured token. A node naming
   * another recipient or token, or an amount under the minimum, is refused (FatalMovementError).
   */
  #deposit(ctx: ExecutionContext): ExecutionContext {
    const cfg = ctx.node_config;
    const bridge = this.#hl.bridge.toLowerCase() as Address;
    if (cfg.to !== undefined && (typeof cfg.to !== 'string' || cfg.to.toLowerCase() !== bridge)) {
      throw new FatalMovementError('HYPERLIQUID_INVALID_CONFIG', `a top-up goes to the configured bridge ${bridge}, never to config.to ${JSON.stringify(cfg.to)}`);
    }
    if (cfg.token !== undefined && cfg.token !== this.#hl.token) {
      throw new FatalMovementError('HYPERLIQUID_INVALID_CONFIG', `a top-up deposits ${this.#hl.token} (hyperliquid.token), not ${JSON.stringify(cfg.token)}`);
    }
    const amount = amountOf(ctx);
    if (amount.ok) {
      const whole = /^([0-9]+)(?:\.[0-9]+)?$/.exec(amount.value);
      // Compared in token units, exactly: under 5 whole units is under 5 USDC.
      if (whole && BigInt(whole[1]!) < HYPERLIQUID_MIN_DEPOSIT) {
        throw new FatalMovementError(
          'HYPERLIQUID_DEPOSIT_BELOW_MINIMUM',
          `a deposit of ${amount.value} ${this.#hl.token} is under Hyperliquid's minimum of ${HYPERLIQUID_MIN_DEPOSIT}: it would never be credited and the funds would be lost`,
          { amount: amount.value, minimum: HYPERLIQUID_MIN_DEPOSIT.toString() },
        );
      }
    }
    return { ...ctx, node_config: { ...cfg, token: this.#hl.token, to: bridge } };
  }
}

/** A result that names the transaction also names the account, the amount and the baseline, for the credit observer to `$ref`. */
function withCreditRefs(r: ExecutionResult, ctx: ExecutionContext): ExecutionResult {
  if (!r.provider_refs.tx_hash) return r;
  const h = firstHints(ctx);
  if (typeof h.hyperliquid_user !== 'string' || typeof h.baseline_withdrawable !== 'string') return r;
  return {
    ...r,
    provider_refs: {
      ...r.provider_refs,
      hyperliquid_user: h.hyperliquid_user,
      bridge: h.hyperliquid_bridge,
      amount: h.amount,
      amount_base_units: h.amount_base_units,
      decimals: h.decimals,
      baseline_withdrawable: h.baseline_withdrawable,
      baseline_time: h.baseline_time,
    },
  };
}
