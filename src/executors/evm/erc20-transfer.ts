import {
  BaseError,
  ContractFunctionExecutionError,
  encodeFunctionData,
  erc20Abi,
  ExecutionRevertedError,
  parseEventLogs,
  serializeTransaction,
  type Address,
  type Hex,
  type TransactionReceipt,
} from 'viem';
import type { EvmTokenConfig } from '../../config-file.ts';
import type { ExecutionContext, ExecutionResult, Executor, PreparedAction, SubmitOptions } from '../protocol.ts';
import { fromBaseUnits, toBaseUnits } from './amounts.ts';
import type { EvmChain } from './chains.ts';
import { EVM_LANE } from './native-transfer.ts';
import type { EvmNonceManager } from './nonces.ts';
import { errorDetail } from './rpc-errors.ts';
import { amountOf, confirmationsOf, recipientOf, tokenOf, type TokenRef } from './token-config.ts';
import { awaitingSignature, EvmTxLifecycle, failed, manual, result, type Finality, type ReceiptCheck, type TxLifecycleOptions } from './tx-lifecycle.ts';

export const EVM_ERC20_TRANSFER_KEY = 'exec.evm.erc20_transfer';
/** Estimated gas times this percentage is the transaction's gas limit: token contracts vary with state. */
export const ERC20_GAS_MARGIN_PERCENT = 125n;

export interface EvmErc20TransferOptions {
  chain: EvmChain;
  /** The address of the signer bound to the node; every transaction is sent from it. */
  from: Address;
  tokens: readonly EvmTokenConfig[];
  executorKey?: string;
  /** The shared nonce manager (see EvmNativeTransferOptions.nonces). */
  nonces?: EvmNonceManager | null;
  /** Fee bumping and the fee cap (see TxLifecycleOptions). */
  feeBump?: TxLifecycleOptions['feeBump'];
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
 * lifecycle's, as for native transfers, and a successful receipt must also carry the expected
 * `Transfer` event.
 */
export class EvmErc20TransferExecutor implements Executor {
  readonly executorKey: string;
  readonly lane = EVM_LANE;
  readonly from: Address;
  readonly chain: EvmChain;
  readonly #tokens: readonly EvmTokenConfig[];
  readonly #tx: EvmTxLifecycle;

  constructor(opts: EvmErc20TransferOptions) {
    this.executorKey = opts.executorKey ?? EVM_ERC20_TRANSFER_KEY;
    this.chain = opts.chain;
    this.from = opts.from.toLowerCase() as Address;
    this.#tokens = opts.tokens;
    this.#tx = new EvmTxLifecycle(opts.chain.client, opts.chain.pollSeconds, this.from, { nonces: opts.nonces, feeBump: opts.feeBump });
  }

  async preflight(ctx: ExecutionContext): Promise<ExecutionResult | null> {
    const chainId = await this.#tx.read('eth_chainId', () => this.chain.client.getChainId());
    if (chainId !== this.chain.chainId) return failed('EVM_CHAIN_MISMATCH', `${this.chain.label}: the RPC serves chain ${chainId}`);
    const r = await this.#resolve(ctx);
    if (!r.ok) return r.result;
    const balance = await this.#tx.read('balanceOf', () =>
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

  async prepare(ctx: ExecutionContext): Promise<ExecutionResult> {
    const r = await this.#resolve(ctx);
    if (!r.ok) return r.result;
    const { token, decimals, to, amount } = r.value;
    const data = encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [to, amount] });
    let estimate: bigint;
    try {
      estimate = await this.chain.client.estimateGas({ account: this.from, to: token.address, data });
    } catch (err) {
      // The node ran the call and it reverted: certain, and nothing was signed.
      if (reverted(err)) return failed('EVM_TX_WOULD_REVERT', `transfer of ${r.value.amountText} to ${to} reverts: ${errorDetail(err)}`);
      return this.#tx.read('eth_estimateGas', () => Promise.reject(err));
    }
    // The nonce reservation is prepareTx's last step: nothing below can fail.
    const { chainId, nonce, maxFeePerGas, maxPriorityFeePerGas } = await this.#tx.prepareTx(ctx);
    const gas = (estimate * ERC20_GAS_MARGIN_PERCENT + 99n) / 100n;
    const payload = serializeTransaction({
      type: 'eip1559',
      chainId,
      nonce,
      to: token.address,
      value: 0n,
      data,
      gas,
      maxFeePerGas,
      maxPriorityFeePerGas,
    });
    return awaitingSignature(ctx, payload, {
      chain_id: chainId,
      nonce,
      from: this.from,
      to: to.toLowerCase(),
      token: token.address.toLowerCase(),
      token_symbol: token.symbol,
      decimals,
      amount: r.value.amountText,
      amount_base_units: amount.toString(),
      gas_limit: gas.toString(),
      gas_estimate: estimate.toString(),
    });
  }

  preSubmitCheck(ctx: ExecutionContext): Promise<void> {
    return this.#tx.preSubmitCheck(ctx);
  }

  submit(ctx: ExecutionContext, prepared: PreparedAction, opts: SubmitOptions = {}): Promise<ExecutionResult> {
    return this.#tx.submitSigned(ctx, prepared, opts);
  }

  async observe(ctx: ExecutionContext): Promise<ExecutionResult> {
    const pinned = pinnedOf(ctx);
    if (!pinned) return manual('EVM_NO_PREPARED_ACTION', 'the attempt has no prepared ERC-20 transfer');
    return this.#tx.observe(ctx, this.#finality(ctx), transferCheck(pinned));
  }

  async recover(ctx: ExecutionContext): Promise<ExecutionResult> {
    const pinned = pinnedOf(ctx);
    if (!pinned) return this.#tx.recoverUnsigned(ctx);
    return this.#tx.recover(ctx, this.#finality(ctx), transferCheck(pinned));
  }

  async health(): Promise<Record<string, unknown>> {
    const [chainId, blockNumber] = await Promise.all([this.chain.client.getChainId(), this.chain.client.getBlockNumber()]);
    return { ok: true, executor_key: this.executorKey, lane: EVM_LANE, chain_id: chainId, block_number: Number(blockNumber), from: this.from };
  }

  #finality(ctx: ExecutionContext): Finality {
    const c = confirmationsOf(ctx.node_config, this.chain.confirmations);
    return {
      confirmations: c.ok ? c.value : this.chain.confirmations,
      finalized: ctx.node_config.finality === 'finalized' || (ctx.node_config.finality === undefined && this.chain.finality === 'finalized'),
    };
  }

  /** Token, decimals (read from the token, checked against config), recipient and exact amount. */
  async #resolve(ctx: ExecutionContext): Promise<{ ok: true; value: Resolved } | { ok: false; result: ExecutionResult }> {
    const cfg = ctx.node_config;
    const token = tokenOf(cfg, this.chain.chainId, this.#tokens);
    if (!token.ok) return refusal(token);
    const to = recipientOf(ctx);
    if (!to.ok) return refusal(to);
    const text = amountOf(ctx);
    if (!text.ok) return refusal(text);
    const confirmations = confirmationsOf(cfg, this.chain.confirmations);
    if (!confirmations.ok) return refusal(confirmations);

    const address = token.value.address;
    const code = await this.#tx.read('eth_getCode', () => this.chain.client.getCode({ address }));
    if (!code || code === '0x') return { ok: false, result: failed('EVM_INVALID_TOKEN', `${this.chain.label} has no contract at ${address}`) };
    let onChain: number;
    try {
      onChain = await this.chain.client.readContract({ address, abi: erc20Abi, functionName: 'decimals' });
    } catch (err) {
      if (err instanceof ContractFunctionExecutionError) {
        return { ok: false, result: failed('EVM_INVALID_TOKEN', `${address} does not answer decimals(): ${errorDetail(err)}`) };
      }
      return this.#tx.read('decimals', () => Promise.reject(err));
    }
    if (token.value.decimals !== null && token.value.decimals !== onChain) {
      return {
        ok: false,
        result: failed('EVM_TOKEN_DECIMALS_MISMATCH', `token ${address} has ${onChain} decimals on ${this.chain.label}, the configuration says ${token.value.decimals}`),
      };
    }
    const amount = toBaseUnits(text.value, onChain);
    if (!amount.ok) return { ok: false, result: failed('EVM_INVALID_AMOUNT', amount.detail) };
    if (amount.value <= 0n) return { ok: false, result: failed('EVM_INVALID_AMOUNT', 'amount must be more than zero') };
    return {
      ok: true,
      value: { token: token.value, decimals: onChain, to: to.value, amount: amount.value, amountText: text.value, confirmations: confirmations.value },
    };
  }
}

function refusal(r: { code: string; detail: string }): { ok: false; result: ExecutionResult } {
  return { ok: false, result: failed(r.code, r.detail) };
}

function reverted(err: unknown): boolean {
  return err instanceof BaseError && err.walk((e) => e instanceof ExecutionRevertedError) instanceof ExecutionRevertedError;
}

/** The transfer prepare pinned, from the attempt's first prepared_action artifact (fee bumps add later ones). */
function pinnedOf(ctx: ExecutionContext): Pinned | null {
  const prepared = (ctx.attempt_artifacts ?? []).find((a) => a.artifact_type === 'prepared_action' && a.content_inline);
  if (!prepared?.content_inline) return null;
  try {
    const h = (JSON.parse(prepared.content_inline) as { provider_hints?: Record<string, unknown> }).provider_hints ?? {};
    if (typeof h.token !== 'string' || typeof h.to !== 'string' || typeof h.from !== 'string' || typeof h.amount_base_units !== 'string') return null;
    return { token: h.token as Address, to: h.to as Address, from: h.from as Address, amount: BigInt(h.amount_base_units) };
  } catch {
    return null;
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
