import { isAddress, serializeTransaction, type Address, type PublicClient } from 'viem';
import type { ExecutionContext, ExecutionResult, Executor, PreparedAction, SubmitOptions } from '../protocol.ts';
import { createChainClient } from './chains.ts';
import type { EvmNonceManager } from './nonces.ts';
import { boundChainId, transferSpec } from './transfer-config.ts';
import { awaitingSignature, EvmTxLifecycle, failed, type Finality, type TxLifecycleOptions } from './tx-lifecycle.ts';

export const EVM_LANE = 'evm';
export const EVM_NATIVE_TRANSFER_KEY = 'exec.evm.native_transfer';
/** Gas of a plain value transfer to an account without code (the intrinsic cost, exactly). */
export const NATIVE_TRANSFER_GAS = 21_000n;

export interface EvmNativeTransferOptions {
  /** The chain's client (src/executors/evm/chains.ts); else one is made for rpcUrl. */
  client?: PublicClient;
  rpcUrl?: string;
  /** The address the signer bound to this executor signs with; every transaction is sent from it. */
  from: string;
  /** Blocks, the transaction's own included, before a transfer counts as done (a node may ask for more or fewer). */
  confirmations?: number;
  /** Seconds until the observer looks again at a transfer not yet confirmed. */
  pollSeconds?: number;
  /** Timeout of one JSON-RPC call, in milliseconds. */
  rpcTimeoutMs?: number;
  executorKey?: string;
  /**
   * The shared nonce manager. Without it the nonce is the sender's pending count at prepare time,
   * which is sound only for one sender driven serially.
   */
  nonces?: EvmNonceManager | null;
  /** Fee bumping and the fee cap (see TxLifecycleOptions). */
  feeBump?: TxLifecycleOptions['feeBump'];
}

/**
 * Sends native value (ETH and the like) from one hot-wallet address over JSON-RPC: an EIP-1559
 * transfer prepared unsigned, signed by the node's signer, broadcast by submit(), followed to the
 * required confirmations by observe(). observe() and recover() work only from the attempt's
 * stored signed versions and the chain, never from this process's memory.
 *
 * Nonces, broadcast, fee bumping and recovery are the shared transaction lifecycle's
 * (tx-lifecycle.ts): with the nonce manager, reserved per attempt at prepare, cleared before every
 * broadcast, released on a definite refusal; without it, the sender's pending count at prepare
 * time (one serial sender only; see docs/evm-lane.md).
 */
export class EvmNativeTransferExecutor implements Executor {
  readonly executorKey: string;
  readonly lane = EVM_LANE;
  readonly from: Address;
  readonly #client: PublicClient;
  readonly #tx: EvmTxLifecycle;
  readonly #confirmations: number;

  constructor(opts: EvmNativeTransferOptions) {
    if (!isAddress(opts.from, { strict: false })) throw new TypeError(`EVM executor: sender ${JSON.stringify(opts.from)} is not an address`);
    this.executorKey = opts.executorKey ?? EVM_NATIVE_TRANSFER_KEY;
    this.from = opts.from.toLowerCase() as Address;
    this.#confirmations = opts.confirmations ?? 1;
    // A configured chain's client, or one made the same way (errors never carry the URL).
    this.#client = opts.client ?? createChainClient(opts.rpcUrl ?? '', { timeoutMs: opts.rpcTimeoutMs });
    this.#tx = new EvmTxLifecycle(this.#client, opts.pollSeconds ?? 1, this.from, { nonces: opts.nonces, feeBump: opts.feeBump });
  }

  /** The chain client this executor reads and broadcasts with (the nonce reaper sends with it too). */
  get client(): PublicClient {
    return this.#client;
  }

  async preflight(ctx: ExecutionContext): Promise<ExecutionResult | null> {
    const spec = transferSpec(ctx, this.#confirmations);
    if (!spec.ok) return failed(spec.code, spec.detail);
    const wanted = boundChainId(ctx);
    if (Number.isNaN(wanted)) return failed('EVM_CHAIN_MISMATCH', 'the binding\'s chain_id is not a positive integer');
    const chainId = await this.#tx.read('eth_chainId', () => this.#client.getChainId());
    if (wanted !== null && wanted !== chainId) {
      return failed('EVM_CHAIN_MISMATCH', `the node is bound to chain ${wanted}, the RPC serves chain ${chainId}`);
    }
    return null;
  }

  async prepare(ctx: ExecutionContext): Promise<ExecutionResult> {
    const spec = transferSpec(ctx, this.#confirmations);
    if (!spec.ok) return failed(spec.code, spec.detail);
    const { to, valueWei } = spec.spec;
    // The nonce reservation is prepareTx's last step: nothing below can fail.
    const { chainId, nonce, maxFeePerGas, maxPriorityFeePerGas } = await this.#tx.prepareTx(ctx);
    const payload = serializeTransaction({ type: 'eip1559', chainId, nonce, to, value: valueWei, gas: NATIVE_TRANSFER_GAS, maxFeePerGas, maxPriorityFeePerGas });
    return awaitingSignature(ctx, payload, { chain_id: chainId, nonce, from: this.from, to: to.toLowerCase(), value_wei: valueWei.toString() });
  }

  preSubmitCheck(ctx: ExecutionContext): Promise<void> {
    return this.#tx.preSubmitCheck(ctx);
  }

  submit(ctx: ExecutionContext, prepared: PreparedAction, opts: SubmitOptions = {}): Promise<ExecutionResult> {
    return this.#tx.submitSigned(ctx, prepared, opts);
  }

  observe(ctx: ExecutionContext): Promise<ExecutionResult> {
    return this.#tx.observe(ctx, this.#finality(ctx));
  }

  recover(ctx: ExecutionContext): Promise<ExecutionResult> {
    return this.#tx.recover(ctx, this.#finality(ctx));
  }

  /** Read only: receipts, the mempool and the sender's nonce; nothing is sent. */
  inspect(ctx: ExecutionContext): Promise<ExecutionResult> {
    return this.#tx.inspect(ctx, this.#finality(ctx));
  }

  /** An operator's cancel: proposes the zero-value replacement at the attempt's nonce (tx-lifecycle.ts). */
  cancel(ctx: ExecutionContext): Promise<ExecutionResult> {
    return this.#tx.cancel(ctx, this.#finality(ctx));
  }

  async health(): Promise<Record<string, unknown>> {
    const [chainId, blockNumber] = await Promise.all([this.#client.getChainId(), this.#client.getBlockNumber()]);
    return { ok: true, executor_key: this.executorKey, lane: EVM_LANE, chain_id: chainId, block_number: Number(blockNumber), from: this.from };
  }

  #finality(ctx: ExecutionContext): Finality {
    const spec = transferSpec(ctx, this.#confirmations);
    return { confirmations: spec.ok ? spec.spec.confirmations : this.#confirmations, finalized: false };
  }
}
