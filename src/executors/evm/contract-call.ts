import { BaseError, ContractFunctionExecutionError, erc20Abi, ExecutionRevertedError, serializeTransaction, type Address, type Hex } from 'viem';
import type { ExecutionContext, ExecutionResult, Executor, PreparedAction, SubmitOptions } from '../protocol.ts';
import { toBaseUnits } from './amounts.ts';
import type { EvmChain } from './chains.ts';
import type { EvmNonceManager } from './nonces.ts';
import { errorDetail } from './rpc-errors.ts';
import { confirmationsOf, type Parsed } from './token-config.ts';
import { awaitingSignature, EvmTxLifecycle, failed, manual, type Finality, type ReceiptCheck, type TxLifecycleOptions } from './tx-lifecycle.ts';

/** Estimated gas times this percentage is a contract call's gas limit: contracts vary with state. */
export const CONTRACT_CALL_GAS_MARGIN_PERCENT = 125n;

export interface EvmContractCallOptions {
  chain: EvmChain;
  /** The address of the signer bound to the node; every transaction is sent from it. */
  from: Address;
  /** The shared nonce manager (see EvmNativeTransferOptions.nonces). */
  nonces?: EvmNonceManager | null;
  /** Fee bumping and the fee cap (see TxLifecycleOptions). */
  feeBump?: TxLifecycleOptions['feeBump'];
}

/** The one contract call an executor prepares: the transaction's target, calldata and what it records. */
export interface ContractCall {
  /** The contract called (the transaction's `to`). */
  to: Address;
  data: Hex;
  /** Native value sent with the call, in wei (a LayerZero fee); unset: none. */
  value?: bigint;
  /** The prepared action's provider_hints between chain_id, nonce, from and gas_limit, gas_estimate. */
  hints: Record<string, unknown>;
  /** The node ran the call and it reverted (certain, and nothing was signed): what prepare reports. */
  reverts(detail: string): ExecutionResult | Promise<ExecutionResult>;
}

/**
 * The lifecycle of one EVM contract call from one hot wallet, shared by the executors that send
 * one (ERC-20 transfer, CCTP burn, CCTP mint): preflight checks the chain id before the call's own
 * checks; prepare estimates the call (a revert is the executor's to word), reserves the nonce last
 * and pins the transaction with its gas margin; submit, observe and recover are the shared
 * transaction lifecycle's (tx-lifecycle.ts), with the executor's receipt check. What is its own
 * (calldata, checks, the receipt rule, a recover rule) each executor keeps.
 */
export abstract class EvmContractCallExecutor<P> implements Executor {
  abstract readonly executorKey: string;
  abstract readonly lane: string;
  readonly from: Address;
  readonly chain: EvmChain;
  protected readonly tx: EvmTxLifecycle;

  constructor(opts: EvmContractCallOptions) {
    this.chain = opts.chain;
    this.from = opts.from.toLowerCase() as Address;
    this.tx = new EvmTxLifecycle(opts.chain.client, opts.chain.pollSeconds, this.from, { nonces: opts.nonces, feeBump: opts.feeBump });
  }

  /** The call's own checks before anything is signed (the chain id is checked already); null: it may go on. */
  protected abstract check(ctx: ExecutionContext): Promise<ExecutionResult | null>;
  /** The call prepare pins, or the refusal that fails the node. */
  protected abstract call(ctx: ExecutionContext): Promise<Parsed<ContractCall>>;
  /** What observe and recover follow (what prepare pinned); a refusal: observe needs a person, recover finds nothing signed. */
  protected abstract pinned(ctx: ExecutionContext): Parsed<P>;
  /** A successful receipt's check beyond its status (the expected event). */
  protected abstract receiptCheck(p: P): ReceiptCheck;

  /** What observe and recover report from the lifecycle's answer; as it is, unless the executor adds to it. */
  protected settle(r: ExecutionResult, _p: P): ExecutionResult | Promise<ExecutionResult> {
    return r;
  }

  protected finality(ctx: ExecutionContext): Finality {
    const c = confirmationsOf(ctx.node_config, this.chain.confirmations);
    return { confirmations: c.ok ? c.value : this.chain.confirmations, finalized: this.chain.finality === 'finalized' };
  }

  async preflight(ctx: ExecutionContext): Promise<ExecutionResult | null> {
    const chainId = await this.tx.read('eth_chainId', () => this.chain.client.getChainId());
    if (chainId !== this.chain.chainId) return failed('EVM_CHAIN_MISMATCH', `${this.chain.label}: the RPC serves chain ${chainId}`);
    return this.check(ctx);
  }

  async prepare(ctx: ExecutionContext): Promise<ExecutionResult> {
    const call = await this.call(ctx);
    if (!call.ok) return failed(call.code, call.detail);
    const { to, data, hints } = call.value;
    const value = call.value.value ?? 0n;
    let estimate: bigint;
    try {
      estimate = await this.chain.client.estimateGas({ account: this.from, to, data, value });
    } catch (err) {
      if (reverted(err)) return call.value.reverts(errorDetail(err));
      return this.tx.read('eth_estimateGas', () => Promise.reject(err));
    }
    // The nonce reservation is prepareTx's last step: nothing below can fail.
    const { chainId, nonce, maxFeePerGas, maxPriorityFeePerGas } = await this.tx.prepareTx(ctx);
    const gas = (estimate * CONTRACT_CALL_GAS_MARGIN_PERCENT + 99n) / 100n;
    const payload = serializeTransaction({ type: 'eip1559', chainId, nonce, to, value, data, gas, maxFeePerGas, maxPriorityFeePerGas });
    return awaitingSignature(ctx, payload, {
      chain_id: chainId,
      nonce,
      from: this.from,
      ...hints,
      gas_limit: gas.toString(),
      gas_estimate: estimate.toString(),
    });
  }

  preSubmitCheck(ctx: ExecutionContext): Promise<void> {
    return this.tx.preSubmitCheck(ctx);
  }

  submit(ctx: ExecutionContext, prepared: PreparedAction, opts: SubmitOptions = {}): Promise<ExecutionResult> {
    return this.tx.submitSigned(ctx, prepared, opts);
  }

  async observe(ctx: ExecutionContext): Promise<ExecutionResult> {
    const p = this.pinned(ctx);
    if (!p.ok) return manual(p.code, p.detail);
    return this.settle(await this.tx.observe(ctx, this.finality(ctx), this.receiptCheck(p.value)), p.value);
  }

  /** From the stored signed bytes and the chain only: the same bytes may be sent again, a new call never. */
  async recover(ctx: ExecutionContext): Promise<ExecutionResult> {
    const p = this.pinned(ctx);
    if (!p.ok) return this.tx.recoverUnsigned(ctx);
    return this.settle(await this.tx.recover(ctx, this.finality(ctx), this.receiptCheck(p.value)), p.value);
  }

  /** An operator's cancel: proposes the zero-value replacement at the attempt's nonce (tx-lifecycle.ts). */
  async cancel(ctx: ExecutionContext): Promise<ExecutionResult> {
    const p = this.pinned(ctx);
    if (!p.ok) return this.tx.cancel(ctx, this.finality(ctx));
    return this.settle(await this.tx.cancel(ctx, this.finality(ctx), this.receiptCheck(p.value)), p.value);
  }

  /** As recover(), reading only: the stored bytes are looked up on the chain, never sent. */
  async inspect(ctx: ExecutionContext): Promise<ExecutionResult> {
    const p = this.pinned(ctx);
    if (!p.ok) return this.tx.inspectUnsigned(ctx);
    return this.settle(await this.tx.inspect(ctx, this.finality(ctx), this.receiptCheck(p.value)), p.value);
  }

  async health(): Promise<Record<string, unknown>> {
    const [chainId, blockNumber] = await Promise.all([this.chain.client.getChainId(), this.chain.client.getBlockNumber()]);
    return { ok: true, executor_key: this.executorKey, lane: this.lane, chain_id: chainId, block_number: Number(blockNumber), from: this.from };
  }

  /**
   * A token amount in base units, exactly: the token must be a contract, its decimals() (read from
   * the chain) must agree with the configuration's when it gives them, and the amount must be more
   * than zero.
   */
  protected async tokenAmount(token: { address: Address; decimals: number | null }, amountText: string): Promise<Parsed<{ decimals: number; amount: bigint }>> {
    const { address } = token;
    const code = await this.tx.read('eth_getCode', () => this.chain.client.getCode({ address }));
    if (!code || code === '0x') return { ok: false, code: 'EVM_INVALID_TOKEN', detail: `${this.chain.label} has no contract at ${address}` };
    let onChain: number;
    try {
      onChain = await this.chain.client.readContract({ address, abi: erc20Abi, functionName: 'decimals' });
    } catch (err) {
      if (err instanceof ContractFunctionExecutionError) return { ok: false, code: 'EVM_INVALID_TOKEN', detail: `${address} does not answer decimals(): ${errorDetail(err)}` };
      return this.tx.read('decimals', () => Promise.reject(err));
    }
    if (token.decimals !== null && token.decimals !== onChain) {
      return { ok: false, code: 'EVM_TOKEN_DECIMALS_MISMATCH', detail: `token ${address} has ${onChain} decimals on ${this.chain.label}, the configuration says ${token.decimals}` };
    }
    const amount = toBaseUnits(amountText, onChain);
    if (!amount.ok) return { ok: false, code: 'EVM_INVALID_AMOUNT', detail: amount.detail };
    if (amount.value <= 0n) return { ok: false, code: 'EVM_INVALID_AMOUNT', detail: 'amount must be more than zero' };
    return { ok: true, value: { decimals: onChain, amount: amount.value } };
  }
}

function reverted(err: unknown): boolean {
  return err instanceof BaseError && err.walk((e) => e instanceof ExecutionRevertedError) instanceof ExecutionRevertedError;
}
