import { encodeFunctionData, erc20Abi, parseEventLogs, type Address, type Hex, type TransactionReceipt } from 'viem';
import type { EvmTokenConfig } from '../../config-file.ts';
import type { ExecutionContext, ExecutionResult } from '../protocol.ts';
import { fromBaseUnits } from './amounts.ts';
import { CONTRACT_CALL_GAS_MARGIN_PERCENT, EvmContractCallExecutor, type ContractCall, type EvmContractCallOptions } from './contract-call.ts';
import { EVM_LANE } from './native-transfer.ts';
import { amountOf, confirmationsOf, recipientOf, tokenOf, type Parsed, type TokenRef } from './token-config.ts';
import { failed, firstHints, result, type Finality, type ReceiptCheck } from './tx-lifecycle.ts';

export const EVM_ERC20_TRANSFER_KEY = 'exec.evm.erc20_transfer';
/** Estimated gas times this percentage is the transaction's gas limit: token contracts vary with state. */
export const ERC20_GAS_MARGIN_PERCENT = CONTRACT_CALL_GAS_MARGIN_PERCENT;

export interface EvmErc20TransferOptions extends EvmContractCallOptions {
  tokens: readonly EvmTokenConfig[];
  executorKey?: string;
}

/** Everything one transfer is about, resolved against the chain: what prepare pins. */
interface Resolved {
  token: TokenRef;
  decimals: number;
  to: Address;
  amount: bigint;
  amountText: string;
  confirmations: number;
}

/** The pinned transfer, as prepare recorded it in provider_hints. */
interface Pinned {
  token: Address;
  to: Address;
  from: Address;
  amount: bigint;
}

/**
 * An ERC-20 `transfer(to, amount)` from one hot wallet on one chain. Token address and decimals
 * are resolved at prepare (decimals read from the token, checked against the node config or
 * evm.tokens when they give them) and pinned in the prepared action; the amount, a decimal string
 * in token units, becomes base units exactly. Preflight refuses a transfer the wallet cannot cover
 * before anything is signed. The transaction's life (nonce reservation, broadcast, observe, fee
 * bumping with the same calldata, recovery from the stored signed versions) is the shared
 * contract-call lifecycle's (contract-call.ts), and a successful receipt must also carry the
 * expected `Transfer` event.
 */
export class EvmErc20TransferExecutor extends EvmContractCallExecutor<Pinned> {
  readonly executorKey: string;
  readonly lane: string = EVM_LANE;
  readonly #tokens: readonly EvmTokenConfig[];

  constructor(opts: EvmErc20TransferOptions) {
    super(opts);
    this.executorKey = opts.executorKey ?? EVM_ERC20_TRANSFER_KEY;
    this.#tokens = opts.tokens;
  }

  protected async check(ctx: ExecutionContext): Promise<ExecutionResult | null> {
    const r = await this.#resolve(ctx);
    if (!r.ok) return failed(r.code, r.detail);
    const balance = await this.tx.read('balanceOf', () =>
      this.chain.client.readContract({ address: r.value.token.address, abi: erc20Abi, functionName: 'balanceOf', args: [this.from] }),
    );
    if (balance < r.value.amount) {
      return failed(
        'EVM_INSUFFICIENT_TOKEN_BALANCE',
        `${this.from} holds ${fromBaseUnits(balance, r.value.decimals)} of token ${r.value.token.address}, the transfer needs ${r.value.amountText}`,
      );
    }
    return null;
  }

  protected async call(ctx: ExecutionContext): Promise<Parsed<ContractCall>> {
    const r = await this.#resolve(ctx);
    if (!r.ok) return r;
    const { token, decimals, to, amount, amountText } = r.value;
    return {
      ok: true,
      value: {
        to: token.address,
        data: encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [to, amount] }),
        hints: {
          to: to.toLowerCase(),
          token: token.address.toLowerCase(),
          token_symbol: token.symbol,
          decimals,
          amount: amountText,
          amount_base_units: amount.toString(),
        },
        reverts: (detail) => failed('EVM_TX_WOULD_REVERT', `transfer of ${amountText} to ${to} reverts: ${detail}`),
      },
    };
  }

  /** The transfer prepare pinned, from the attempt's first prepared_action artifact (fee bumps add later ones). */
  protected pinned(ctx: ExecutionContext): Parsed<Pinned> {
    const none = { ok: false, code: 'EVM_NO_PREPARED_ACTION', detail: 'the attempt has no prepared ERC-20 transfer' } as const;
    const h = firstHints(ctx);
    if (typeof h.token !== 'string' || typeof h.to !== 'string' || typeof h.from !== 'string' || typeof h.amount_base_units !== 'string') return none;
    try {
      return { ok: true, value: { token: h.token as Address, to: h.to as Address, from: h.from as Address, amount: BigInt(h.amount_base_units) } };
    } catch {
      return none;
    }
  }

  protected receiptCheck(p: Pinned): ReceiptCheck {
    return transferCheck(p);
  }

  /** A node may ask for finalized (or not) on its own; else the chain's setting. */
  protected override finality(ctx: ExecutionContext): Finality {
    const c = confirmationsOf(ctx.node_config, this.chain.confirmations);
    return {
      confirmations: c.ok ? c.value : this.chain.confirmations,
      finalized: ctx.node_config.finality === 'finalized' || (ctx.node_config.finality === undefined && this.chain.finality === 'finalized'),
    };
  }

  /** Token, decimals (read from the token, checked against config), recipient and exact amount. */
  async #resolve(ctx: ExecutionContext): Promise<Parsed<Resolved>> {
    const cfg = ctx.node_config;
    const token = tokenOf(cfg, this.chain.chainId, this.#tokens);
    if (!token.ok) return token;
    const to = recipientOf(ctx);
    if (!to.ok) return to;
    const text = amountOf(ctx);
    if (!text.ok) return text;
    const confirmations = confirmationsOf(cfg, this.chain.confirmations);
    if (!confirmations.ok) return confirmations;
    const amount = await this.tokenAmount(token.value, text.value);
    if (!amount.ok) return amount;
    return {
      ok: true,
      value: { token: token.value, decimals: amount.value.decimals, to: to.value, amount: amount.value.amount, amountText: text.value, confirmations: confirmations.value },
    };
  }
}

/** A successful receipt must carry Transfer(from, to, amount) emitted by the token itself. */
function transferCheck(p: Pinned): ReceiptCheck {
  return (receipt: TransactionReceipt, proof: Record<string, unknown>) => {
    const logs = parseEventLogs({ abi: erc20Abi, eventName: 'Transfer', logs: receipt.logs, strict: true });
    const match = logs.find(
      (l) =>
        l.address.toLowerCase() === p.token.toLowerCase() &&
        l.args.from.toLowerCase() === p.from.toLowerCase() &&
        l.args.to.toLowerCase() === p.to.toLowerCase() &&
        l.args.value === p.amount,
    );
    if (match) {
      proof.token = p.token;
      proof.transfer_log_index = match.logIndex;
      proof.amount_base_units = p.amount.toString();
      return null;
    }
    // Mined and successful, yet the token did not report this transfer: nobody can say where the
    // value went without looking, and trying again could pay twice.
    return result({
      next_state: 'UNKNOWN',
      provider_state: 'mined_without_transfer',
      provider_refs: { tx_hash: proof.tx_hash as Hex },
      proof,
      error_code: 'EVM_TRANSFER_EVENT_MISSING',
      error_detail: `transaction ${String(proof.tx_hash)} succeeded without a Transfer of ${p.amount} from ${p.from} to ${p.to} by ${p.token}`,
      manual_intervention_required: true,
    });
  };
}
