import { encodeFunctionData, erc20Abi, parseEventLogs, type Address, type TransactionReceipt } from 'viem';
import type { EvmTokenConfig } from '../../config-file.ts';
import { fromBaseUnits } from '../evm/amounts.ts';
import { EvmContractCallExecutor, type ContractCall, type EvmContractCallOptions } from '../evm/contract-call.ts';
import { failed, firstHints, result, type ReceiptCheck } from '../evm/tx-lifecycle.ts';
import type { ExecutionContext, ExecutionResult } from '../protocol.ts';
import { gatewayWalletAbi } from './codec.ts';
import { GATEWAY_APPROVE_KEY, GATEWAY_DEPOSIT_KEY, GATEWAY_LANE } from './common.ts';
import type { GatewayConfig } from './config.ts';
import { gatewayAmountOf, type GatewayAmount, type Parsed } from './spec.ts';

export interface GatewayTxOptions extends EvmContractCallOptions {
  tokens: readonly EvmTokenConfig[];
  gateway: GatewayConfig;
}

/** What an approve or a deposit pinned at prepare (provider_hints). */
interface Pinned {
  wallet: Address;
  token: Address;
  amount: bigint;
}

function pinnedOf(h: Record<string, unknown>): Parsed<Pinned> {
  const { wallet, token, amount_base_units: amount } = h;
  if (typeof wallet !== 'string' || typeof token !== 'string' || typeof amount !== 'string' || !/^[0-9]+$/.test(amount)) {
    return { ok: false, code: 'GATEWAY_NO_PREPARED_ACTION', detail: 'the attempt has no prepared transaction' };
  }
  return { ok: true, value: { wallet: wallet as Address, token: token as Address, amount: BigInt(amount) } };
}

abstract class GatewayWalletTx extends EvmContractCallExecutor<Pinned> {
  readonly lane = GATEWAY_LANE;
  protected readonly tokens: readonly EvmTokenConfig[];
  protected readonly gateway: GatewayConfig;

  constructor(opts: GatewayTxOptions) {
    super(opts);
    this.tokens = opts.tokens;
    this.gateway = opts.gateway;
  }

  protected async resolve(ctx: ExecutionContext): Promise<Parsed<GatewayAmount>> {
    const a = gatewayAmountOf(this.gateway, this.chain.chainId, this.tokens, ctx.node_config, ctx.intent);
    if (!a.ok) return a;
    // The token's decimals on the chain must be the configuration's.
    const onChain = await this.tokenAmount({ address: a.value.token.address, decimals: a.value.token.decimals }, a.value.amountText);
    if (!onChain.ok) return onChain;
    const code = await this.tx.read('eth_getCode', () => this.chain.client.getCode({ address: a.value.entry.wallet as Address }));
    if (!code || code === '0x') return { ok: false, code: 'GATEWAY_CONTRACT_MISSING', detail: `${this.chain.label} has no GatewayWallet at ${a.value.entry.wallet}` };
    return a;
  }

  protected async readAllowanceAndBalance(a: GatewayAmount): Promise<{ allowance: bigint; balance: bigint }> {
    const [allowance, balance] = await this.tx.read('allowance/balanceOf', () =>
      Promise.all([
        this.chain.client.readContract({ address: a.token.address, abi: erc20Abi, functionName: 'allowance', args: [this.from, a.entry.wallet as Address] }),
        this.chain.client.readContract({ address: a.token.address, abi: erc20Abi, functionName: 'balanceOf', args: [this.from] }),
      ]),
    );
    return { allowance, balance };
  }

  protected hintsOf(a: GatewayAmount): Record<string, unknown> {
    return {
      wallet: a.entry.wallet.toLowerCase(),
      domain: a.entry.domain,
      token: a.token.address,
      decimals: a.token.decimals,
      amount: a.amountText,
      amount_base_units: a.amount.toString(),
    };
  }

  protected pinned(ctx: ExecutionContext): Parsed<Pinned> {
    return pinnedOf(firstHints(ctx));
  }
}

/**
 * `exec.gateway.approve`: the token's `approve(GatewayWallet, amount)` from one hot wallet, the
 * allowance a deposit needs (the wallet pulls the tokens with transferFrom). When the allowance
 * already covers the amount there is nothing to sign: SKIPPED.
 */
export class GatewayApproveExecutor extends GatewayWalletTx {
  readonly executorKey = GATEWAY_APPROVE_KEY;

  protected async check(ctx: ExecutionContext): Promise<ExecutionResult | null> {
    const a = await this.resolve(ctx);
    if (!a.ok) return failed(a.code, a.detail);
    const { allowance } = await this.readAllowanceAndBalance(a.value);
    if (allowance >= a.value.amount) {
      return result({ next_state: 'SKIPPED', provider_state: 'allowance_sufficient', error_code: 'GATEWAY_ALLOWANCE_SUFFICIENT', error_detail: `${this.from} already allows the GatewayWallet ${fromBaseUnits(allowance, a.value.token.decimals)} ${a.value.token.symbol}` });
    }
    return null;
  }

  protected async call(ctx: ExecutionContext): Promise<Parsed<ContractCall>> {
    const a = await this.resolve(ctx);
    if (!a.ok) return a;
    const v = a.value;
    return {
      ok: true,
      value: {
        to: v.token.address,
        data: encodeFunctionData({ abi: erc20Abi, functionName: 'approve', args: [v.entry.wallet as Address, v.amount] }),
        hints: { ...this.hintsOf(v), to: v.token.address },
        reverts: (detail) => failed('GATEWAY_APPROVE_WOULD_REVERT', `approve of the GatewayWallet reverts: ${detail}`),
      },
    };
  }

  protected receiptCheck(p: Pinned): ReceiptCheck {
    const from = this.from;
    return (receipt: TransactionReceipt, proof: Record<string, unknown>) => {
      const ok = parseEventLogs({ abi: erc20Abi, eventName: 'Approval', logs: receipt.logs, strict: true }).some(
        (l) => l.address.toLowerCase() === p.token.toLowerCase() && l.args.owner.toLowerCase() === from && l.args.spender.toLowerCase() === p.wallet.toLowerCase() && l.args.value === p.amount,
      );
      if (ok) return null;
      return result({ next_state: 'UNKNOWN', provider_state: 'mined_without_approval', provider_refs: { tx_hash: proof.tx_hash }, proof, error_code: 'GATEWAY_APPROVAL_EVENT_MISSING', error_detail: `transaction ${String(proof.tx_hash)} succeeded without the expected Approval`, manual_intervention_required: true });
    };
  }
}

/**
 * `exec.gateway.deposit`: `deposit(token, amount)` on the chain's GatewayWallet from one hot wallet,
 * crediting its available balance (a plain transfer to the wallet would credit nothing). Before
 * anything is signed: the token is supported by the wallet, the balance covers the amount, and the
 * wallet's allowance does (else GATEWAY_ALLOWANCE_INSUFFICIENT: approve first). A successful receipt
 * must carry the wallet's Deposited for this depositor, token and value.
 */
export class GatewayDepositExecutor extends GatewayWalletTx {
  readonly executorKey = GATEWAY_DEPOSIT_KEY;

  protected async check(ctx: ExecutionContext): Promise<ExecutionResult | null> {
    const a = await this.resolve(ctx);
    if (!a.ok) return failed(a.code, a.detail);
    const v = a.value;
    const supported = await this.tx.read('isTokenSupported', () => this.chain.client.readContract({ address: v.entry.wallet as Address, abi: gatewayWalletAbi, functionName: 'isTokenSupported', args: [v.token.address] }));
    if (!supported) return failed('GATEWAY_TOKEN_NOT_SUPPORTED', `the GatewayWallet ${v.entry.wallet} on ${this.chain.label} does not support ${v.token.symbol} (${v.token.address})`);
    const { allowance, balance } = await this.readAllowanceAndBalance(v);
    if (balance < v.amount) return failed('GATEWAY_INSUFFICIENT_BALANCE', `${this.from} holds ${fromBaseUnits(balance, v.token.decimals)} ${v.token.symbol}, the deposit needs ${v.amountText}`);
    if (allowance < v.amount) return failed('GATEWAY_ALLOWANCE_INSUFFICIENT', `${this.from} allows the GatewayWallet ${fromBaseUnits(allowance, v.token.decimals)} ${v.token.symbol}, the deposit needs ${v.amountText}; approve it first`);
    return null;
  }

  protected async call(ctx: ExecutionContext): Promise<Parsed<ContractCall>> {
    const a = await this.resolve(ctx);
    if (!a.ok) return a;
    const v = a.value;
    return {
      ok: true,
      value: {
        to: v.entry.wallet as Address,
        data: encodeFunctionData({ abi: gatewayWalletAbi, functionName: 'deposit', args: [v.token.address, v.amount] }),
        hints: { ...this.hintsOf(v), to: v.entry.wallet.toLowerCase() },
        reverts: (detail) => failed('GATEWAY_DEPOSIT_WOULD_REVERT', `deposit of ${v.amountText} ${v.token.symbol} reverts: ${detail}`),
      },
    };
  }

  protected receiptCheck(p: Pinned): ReceiptCheck {
    const from = this.from;
    return (receipt: TransactionReceipt, proof: Record<string, unknown>) => {
      const logs = parseEventLogs({ abi: gatewayWalletAbi, eventName: 'Deposited', logs: receipt.logs, strict: true }).filter(
        (l) => l.address.toLowerCase() === p.wallet.toLowerCase() && l.args.token.toLowerCase() === p.token.toLowerCase() && l.args.depositor.toLowerCase() === from && l.args.value === p.amount,
      );
      if (logs.length === 1) {
        proof.deposited_log_index = logs[0]!.logIndex;
        return null;
      }
      return result({ next_state: 'UNKNOWN', provider_state: 'mined_without_deposited', provider_refs: { tx_hash: proof.tx_hash }, proof, error_code: 'GATEWAY_DEPOSITED_EVENT_MISSING', error_detail: `transaction ${String(proof.tx_hash)} succeeded with ${logs.length} matching Deposited events (one expected)`, manual_intervention_required: true });
    };
  }

  /** The deposit's facts for the credit observer: who, where, how much. */
  protected override settle(r: ExecutionResult, p: Pinned): ExecutionResult {
    if (!r.provider_refs.tx_hash) return r;
    const entry = this.gateway.chains.find((c) => c.chain_id === this.chain.chainId);
    return { ...r, provider_refs: { ...r.provider_refs, depositor: this.from, wallet: p.wallet.toLowerCase(), token: p.token.toLowerCase(), amount_base_units: p.amount.toString(), source_chain_id: this.chain.chainId, ...(entry ? { domain: entry.domain } : {}) } };
  }
}
