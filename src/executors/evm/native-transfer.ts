import {
  createPublicClient,
  http,
  isAddress,
  serializeTransaction,
  TransactionNotFoundError,
  TransactionReceiptNotFoundError,
  type Address,
  type Hex,
  type PublicClient,
  type TransactionReceipt,
} from 'viem';
import { attemptIdempotencyKey } from '../context.ts';
import { TemporaryMovementError } from '../errors.ts';
import { payloadHash } from '../payload-hash.ts';
import {
  ExecutionResultSchema,
  type ExecutionContext,
  type ExecutionResult,
  type ExecutionResultInput,
  type Executor,
  type PreparedAction,
  type SubmitOptions,
} from '../protocol.ts';
import { capFees, nextVersion, type FeeBumpPolicy } from './fee-bump.ts';
import type { EvmNonceManager } from './nonces.ts';
import { classifyBroadcastError, errorDetail } from './rpc-errors.ts';
import { decodeSignedTx, preparedNonceOf, signedBytesOf, signedVersionsOf, signsExactly, type SignedTx } from './signed-tx.ts';
import { boundChainId, transferSpec } from './transfer-config.ts';

export const EVM_LANE = 'evm';
export const EVM_NATIVE_TRANSFER_KEY = 'exec.evm.native_transfer';
/** Gas of a plain value transfer to an account without code (the intrinsic cost, exactly). */
export const NATIVE_TRANSFER_GAS = 21_000n;

export interface EvmNativeTransferOptions {
  rpcUrl: string;
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
  nonces?: EvmNonceManager;
  /**
   * Fee bumping (needs `nonces`, which records when each version was sent): a version pending
   * longer than `afterSeconds` is replaced by one with the same nonce and higher fees, up to the
   * policy cap. `capWei` alone (without `afterSeconds`) only caps the first version's fees.
   */
  feeBump?: Partial<FeeBumpPolicy> & { capWei?: bigint | null };
}

/**
 * Sends native value (ETH and the like) from one hot-wallet address over JSON-RPC: an EIP-1559
 * transfer prepared unsigned, signed by the node's signer, broadcast by submit(), followed to the
 * required confirmations by observe(). observe() and recover() work only from the attempt's
 * stored signed bytes and the chain, never from this process's memory.
 *
 * Nonces come from the nonce manager (src/executors/evm/nonces.ts) when one is given: reserved per
 * attempt at prepare, cleared before every broadcast, released on a definite refusal. Without it,
 * from the sender's pending count at prepare time (one serial sender only; see docs/evm-lane.md).
 */
export class EvmNativeTransferExecutor implements Executor {
  readonly executorKey: string;
  readonly lane = EVM_LANE;
  readonly from: Address;
  readonly #client: PublicClient;
  readonly #nonces: EvmNonceManager | null;
  readonly #feeBump: FeeBumpPolicy | null;
  readonly #feeCap: bigint | null;
  readonly #confirmations: number;
  readonly #pollSeconds: number;

  constructor(opts: EvmNativeTransferOptions) {
    if (!isAddress(opts.from, { strict: false })) throw new TypeError(`EVM executor: sender ${JSON.stringify(opts.from)} is not an address`);
    this.executorKey = opts.executorKey ?? EVM_NATIVE_TRANSFER_KEY;
    this.from = opts.from.toLowerCase() as Address;
    this.#confirmations = opts.confirmations ?? 1;
    this.#pollSeconds = opts.pollSeconds ?? 1;
    this.#nonces = opts.nonces ?? null;
    this.#feeCap = opts.feeBump?.capWei ?? null;
    this.#feeBump =
      opts.feeBump?.afterSeconds !== undefined && this.#nonces
        ? { afterSeconds: opts.feeBump.afterSeconds, percent: opts.feeBump.percent ?? 20, capWei: this.#feeCap }
        : null;
    // One retry for a dropped connection; resending the same signed bytes is harmless. No cached
    // block number: a confirmation count must come from the head as it is now.
    this.#client = createPublicClient({
      cacheTime: 0,
      transport: http(opts.rpcUrl, { timeout: opts.rpcTimeoutMs ?? 10_000, retryCount: 1 }),
    });
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
    const chainId = await this.#read('eth_chainId', () => this.#client.getChainId());
    if (wanted !== null && wanted !== chainId) {
      return failed('EVM_CHAIN_MISMATCH', `the node is bound to chain ${wanted}, the RPC serves chain ${chainId}`);
    }
    return null;
  }

  async prepare(ctx: ExecutionContext): Promise<ExecutionResult> {
    const spec = transferSpec(ctx, this.#confirmations);
    if (!spec.ok) return failed(spec.code, spec.detail);
    const { to, valueWei } = spec.spec;
    const [chainId, pending, estimated] = await this.#read('prepare', () =>
      Promise.all([
        this.#client.getChainId(),
        this.#client.getTransactionCount({ address: this.from, blockTag: 'pending' }),
        this.#client.estimateFeesPerGas(),
      ]),
    );
    // The policy cap holds for the first version too.
    const fees = capFees(estimated, this.#feeCap);
    // The reservation is the last thing prepare does: nothing after it can fail the step, so a
    // nonce is only left behind when the process dies or the PREPARED commit is refused (the
    // reaper's case). Same attempt, same nonce.
    const nonce = this.#nonces
      ? await this.#nonces.reserve({ chainId, sender: this.from, requestNodeId: ctx.request_node_id, attemptNo: ctx.attempt_no }, pending)
      : pending;
    const payload = serializeTransaction({
      type: 'eip1559',
      chainId,
      nonce,
      to,
      value: valueWei,
      gas: NATIVE_TRANSFER_GAS,
      maxFeePerGas: fees.maxFeePerGas,
      maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
    });
    const key = ctx.idempotency_key ?? attemptIdempotencyKey(ctx.request_node_id, ctx.attempt_no);
    return result({
      next_state: 'AWAITING_SIGNATURE',
      prepared_action: {
        prepared_action_id: `evm-${key}`,
        action_type: ctx.action_type,
        payload_format: 'evm_raw_tx',
        payload,
        payload_hash: payloadHash(payload),
        signing_required: true,
        provider_hints: { chain_id: chainId, nonce, from: this.from, to: to.toLowerCase(), value_wei: valueWei.toString() },
      },
    });
  }

  /**
   * The attempt must still hold its nonce: one the reaper reclaimed (released or filled after the
   * attempt sat between prepare and submit past the stuck threshold) defers the node, and the next
   * dispatch prepares a new attempt with a new nonce.
   */
  async preSubmitCheck(ctx: ExecutionContext): Promise<void> {
    if (!this.#nonces) return;
    const held = await this.#nonces.reservationOf(this.from, ctx.request_node_id, ctx.attempt_no);
    if (!held || held.status === 'confirmed') {
      throw new TemporaryMovementError('EVM_NONCE_RECLAIMED', `attempt ${ctx.attempt_no} no longer holds a nonce of ${this.from}; it is prepared again`, {
        retry_after_seconds: 1,
      });
    }
  }

  async submit(ctx: ExecutionContext, prepared: PreparedAction, opts: SubmitOptions = {}): Promise<ExecutionResult> {
    // Every refusal below happens before a byte leaves the process: FAILED is certain.
    const signed = opts.signResult?.signature;
    if (!signed || opts.signResult?.signature_format !== 'evm_signed_tx') {
      return failed('EVM_SIGNATURE_MISSING', 'submit needs the signed transaction (signature_format evm_signed_tx)');
    }
    const decoded = await decodeSignedTx(signed);
    if (!decoded.ok) return failed('EVM_SIGNED_TX_INVALID', decoded.detail);
    const tx = decoded.tx;
    if (!prepared.payload || !signsExactly(tx.raw, prepared.payload)) {
      return failed('EVM_SIGNED_TX_MISMATCH', 'the signed transaction is not the prepared one');
    }
    if (tx.from !== this.from) return failed('EVM_SIGNER_MISMATCH', `the transaction is signed by ${tx.from}, the executor sends from ${this.from}`);
    if (this.#nonces) {
      const cleared = await this.#nonces.clearForBroadcast({ chainId: tx.chainId, sender: this.from, requestNodeId: ctx.request_node_id, attemptNo: ctx.attempt_no, nonce: tx.nonce, txHash: tx.hash });
      if (!cleared) return failed('EVM_NONCE_RECLAIMED', `nonce ${tx.nonce} is not (or no longer) reserved for this attempt; nothing was sent`);
    }
    // The hash is known before the broadcast, so even an answer lost on the way back leaves the
    // attempt traceable (recovery derives the same hash from the stored bytes).
    const sent = await this.#broadcast(tx);
    // A refused replacement (fee bump) says nothing about the attempt: an earlier version holds
    // the nonce and may still be mined; observe decides from all versions.
    if (prepared.provider_hints?.replaces) return sent;
    return this.#settleRefusal(ctx, tx, sent);
  }

  /** A definite refusal gives the nonce back (or records it as used, for "nonce too low"). */
  async #settleRefusal(ctx: ExecutionContext, tx: SignedTx, r: ExecutionResult): Promise<ExecutionResult> {
    if (!this.#nonces || r.next_state !== 'FAILED' || r.provider_state !== 'rejected') return r;
    const a = { chainId: tx.chainId, sender: this.from, requestNodeId: ctx.request_node_id, attemptNo: ctx.attempt_no, nonce: tx.nonce };
    const reason = `${r.error_code}: ${r.error_detail ?? ''}`.slice(0, 500);
    if (r.error_code === 'EVM_NONCE_TOO_LOW') await this.#nonces.consumed(a, reason);
    else await this.#nonces.release(a, reason);
    return r;
  }

  async observe(ctx: ExecutionContext): Promise<ExecutionResult> {
    const txs = await this.#attemptTxs(ctx);
    if (!txs.ok) return txs.result;
    const status = await this.#chainStatus(ctx, txs.txs);
    if (status) return status.next_state === 'SUBMITTED' ? this.#maybeBump(ctx, txs.txs, status) : status;
    const newest = txs.txs.at(-1)!;
    // Neither mined nor pending, its nonce still free: the node dropped it (restart, eviction).
    // Only recovery may send it again, unless it is overdue for a fee bump: a node evicts a
    // transaction whose fee cap fell under the base fee, and sending it again would be refused.
    const dropped = result({
      next_state: 'UNKNOWN',
      provider_state: 'dropped',
      provider_refs: refs(newest),
      error_code: 'EVM_TX_NOT_FOUND',
      error_detail: `transaction ${newest.hash} is neither mined nor pending`,
    });
    if (!this.#feeBump) return dropped;
    // With fee bumping on, the observer keeps the node: once the version is overdue it is
    // replaced (same nonce, higher fees) rather than re-sent as is.
    const waiting = result({ ...this.#submitted(newest), provider_state: 'dropped', error_code: 'EVM_TX_NOT_FOUND', error_detail: `${dropped.error_detail}; it is replaced once overdue` });
    return this.#maybeBump(ctx, txs.txs, waiting);
  }

  /**
   * Pending too long: proposes the next version (same nonce and fields, higher fees) as the
   * result's prepared_action; the runtime has it signed under the node's signing policy, stores it
   * on the attempt and only then broadcasts it through submit(). At the policy cap, says so and
   * proposes nothing.
   */
  async #maybeBump(ctx: ExecutionContext, txs: SignedTx[], pending: ExecutionResult): Promise<ExecutionResult> {
    const policy = this.#feeBump;
    if (!policy || !this.#nonces) return pending;
    const age = await this.#nonces.broadcastAge(this.from, ctx.request_node_id, ctx.attempt_no);
    if (age === null || age < policy.afterSeconds) return pending;
    const estimate = await this.#read('eth_feeHistory', () => this.#client.estimateFeesPerGas());
    const next = nextVersion(txs, estimate, policy);
    if (!next) return pending;
    if (next.kind === 'cap_reached') {
      return result({
        ...pending,
        provider_state: 'fee_cap_reached',
        provider_refs: { ...pending.provider_refs, versions: txs.length, max_fee_per_gas: next.maxFeePerGas.toString() },
        error_code: 'EVM_FEE_CAP_REACHED',
        error_detail: `pending for ${Math.floor(age)} s; ${next.detail}: no further replacement`,
      });
    }
    const top = txs.at(-1)!;
    const key = ctx.idempotency_key ?? attemptIdempotencyKey(ctx.request_node_id, ctx.attempt_no);
    return result({
      ...pending,
      provider_state: 'replacement_proposed',
      provider_refs: { ...pending.provider_refs, versions: txs.length },
      prepared_action: {
        prepared_action_id: `evm-${key}-v${next.version}`,
        action_type: ctx.action_type,
        payload_format: 'evm_raw_tx',
        payload: next.payload,
        payload_hash: payloadHash(next.payload),
        signing_required: true,
        provider_hints: {
          chain_id: top.chainId,
          nonce: top.nonce,
          from: this.from,
          replaces: next.replaces,
          version: next.version,
          max_fee_per_gas: next.maxFeePerGas.toString(),
          max_priority_fee_per_gas: next.maxPriorityFeePerGas.toString(),
        },
      },
    });
  }

  async recover(ctx: ExecutionContext): Promise<ExecutionResult> {
    const raw = signedBytesOf(ctx.attempt_artifacts);
    if (raw === null) return this.#recoverUnsigned(ctx);
    const txs = await this.#attemptTxs(ctx);
    if (!txs.ok) return txs.result;
    const status = await this.#chainStatus(ctx, txs.txs);
    if (status) return status;
    // The newest version: the one with the highest fees.
    const tx = { tx: txs.txs.at(-1)! };
    // Unknown to the chain and its nonce unused: sending the SAME signed bytes again can only
    // produce this very transaction (same hash), never a second payment. Unless the reaper took
    // the nonce back meanwhile: then these bytes must never be sent, and nothing of the attempt
    // ever reached the chain.
    if (this.#nonces) {
      const cleared = await this.#nonces.clearForBroadcast({ chainId: tx.tx.chainId, sender: this.from, requestNodeId: ctx.request_node_id, attemptNo: ctx.attempt_no, nonce: tx.tx.nonce, txHash: tx.tx.hash });
      if (!cleared) {
        return result({ next_state: 'READY', provider_refs: refs(tx.tx), error_code: 'EVM_NONCE_RECLAIMED', error_detail: `nonce ${tx.tx.nonce} was reclaimed and ${tx.tx.hash} never reached the chain` });
      }
    }
    return this.#settleRefusal(ctx, tx.tx, await this.#broadcast(tx.tx));
  }

  async health(): Promise<Record<string, unknown>> {
    const [chainId, blockNumber] = await Promise.all([this.#client.getChainId(), this.#client.getBlockNumber()]);
    return { ok: true, executor_key: this.executorKey, lane: EVM_LANE, chain_id: chainId, block_number: Number(blockNumber), from: this.from };
  }

  async #broadcast(tx: SignedTx): Promise<ExecutionResult> {
    try {
      await this.#client.sendRawTransaction({ serializedTransaction: tx.raw });
      return this.#submitted(tx);
    } catch (err) {
      const failure = classifyBroadcastError(err);
      if (failure.kind === 'already_known') return this.#submitted(tx);
      if (failure.kind === 'uncertain') return uncertain(tx, failure.detail);
      // A refusal may be about an earlier copy of these very bytes (a retried request whose
      // first try got through): if the chain knows the hash, the attempt is under way.
      let known: boolean;
      try {
        known = (await this.#receipt(tx.hash)) !== null || (await this.#pending(tx.hash));
      } catch (lookupErr) {
        return uncertain(tx, `${failure.detail}; then the lookup failed: ${errorDetail(lookupErr)}`);
      }
      if (known) return this.#submitted(tx);
      return result({ next_state: 'FAILED', provider_state: 'rejected', provider_refs: refs(tx), error_code: failure.code, error_detail: failure.detail });
    }
  }

  #submitted(tx: SignedTx): ExecutionResult {
    return result({ next_state: 'SUBMITTED', provider_state: 'broadcast', provider_refs: refs(tx), retry_after_seconds: this.#pollSeconds });
  }

  /**
   * Over every signed version of the attempt (they share one nonce, so at most one is ever mined):
   * a mined one (COMPLETED, OBSERVING until confirmed, or FAILED when reverted), else a pending one
   * (SUBMITTED, newest first), else the nonce taken by another transaction (FAILED); null when the
   * chain has no trace of any and the nonce is still free.
   */
  async #chainStatus(ctx: ExecutionContext, txs: SignedTx[]): Promise<ExecutionResult | null> {
    const spec = transferSpec(ctx, this.#confirmations);
    const required = spec.ok ? spec.spec.confirmations : this.#confirmations;
    const newest = txs.at(-1)!;
    return this.#read('lookup', async () => {
      const mined = async () => {
        for (const tx of txs) {
          const receipt = await this.#receipt(tx.hash);
          if (receipt) return this.#receiptResult(tx, receipt, required);
        }
        return null;
      };
      const found = await mined();
      if (found) return found;
      for (const tx of [...txs].reverse()) if (await this.#pending(tx.hash)) return this.#submitted(tx);
      const used = await this.#client.getTransactionCount({ address: newest.from, blockTag: 'latest' });
      if (used <= newest.nonce) return null;
      // The nonce is used: by one of these versions if it was mined since the first look, else by another.
      const late = await mined();
      if (late) return late;
      return result({
        next_state: 'FAILED',
        provider_state: 'replaced',
        provider_refs: refs(newest),
        error_code: 'EVM_NONCE_CONSUMED',
        error_detail: `nonce ${newest.nonce} of ${newest.from} was used by another transaction; no version of this attempt (${txs.length}) can ever be mined`,
      });
    });
  }

  async #receiptResult(tx: SignedTx, receipt: TransactionReceipt, required: number): Promise<ExecutionResult> {
    const proof = {
      tx_hash: tx.hash,
      block_number: Number(receipt.blockNumber),
      block_hash: receipt.blockHash,
      gas_used: receipt.gasUsed.toString(),
      effective_gas_price: receipt.effectiveGasPrice.toString(),
      status: receipt.status,
    };
    if (receipt.status !== 'success') {
      return result({
        next_state: 'FAILED',
        provider_state: 'reverted',
        provider_refs: refs(tx),
        proof,
        error_code: 'EVM_TX_REVERTED',
        error_detail: `transaction ${tx.hash} reverted in block ${receipt.blockNumber}`,
      });
    }
    const head = await this.#client.getBlockNumber();
    const confirmations = Number(head - receipt.blockNumber + 1n);
    if (confirmations < required) {
      return result({
        next_state: 'OBSERVING',
        provider_state: 'mined',
        provider_refs: { ...refs(tx), confirmations },
        retry_after_seconds: this.#pollSeconds,
      });
    }
    return result({
      next_state: 'COMPLETED',
      provider_state: 'confirmed',
      provider_refs: { ...refs(tx), block_number: proof.block_number, confirmations },
      proof: { ...proof, confirmations },
    });
  }

  /** SUBMITTING or UNKNOWN without signed bytes: nothing of this attempt can have been broadcast. */
  async #recoverUnsigned(ctx: ExecutionContext): Promise<ExecutionResult> {
    const reserved = preparedNonceOf(ctx.attempt_artifacts);
    if (reserved === null) return manual('EVM_NO_PREPARED_ACTION', 'the attempt has neither a signed transaction nor a prepared action');
    const pending = await this.#read('eth_getTransactionCount', () =>
      this.#client.getTransactionCount({ address: reserved.from, blockTag: 'pending' }),
    );
    if (pending <= reserved.nonce) {
      if (this.#nonces) {
        const chainId = await this.#read('eth_chainId', () => this.#client.getChainId());
        await this.#nonces.release({ chainId, sender: reserved.from, requestNodeId: ctx.request_node_id, attemptNo: ctx.attempt_no, nonce: reserved.nonce }, 'recovered without signed bytes');
      }
      return result({ next_state: 'READY', error_code: 'EVM_NOTHING_BROADCAST', error_detail: `no signed transaction and nonce ${reserved.nonce} is unused` });
    }
    return manual('EVM_NONCE_IN_USE', `no signed transaction stored, yet nonce ${reserved.nonce} of ${reserved.from} is in use: an operator must check the chain`);
  }

  /** Every signed version of the attempt, oldest first; all must be from the sender with one nonce. */
  async #attemptTxs(ctx: ExecutionContext): Promise<{ ok: true; txs: SignedTx[] } | { ok: false; result: ExecutionResult }> {
    const raws = signedVersionsOf(ctx.attempt_artifacts);
    if (raws.length === 0) return { ok: false, result: manual('EVM_NO_SIGNED_TX', 'the attempt has no stored signed transaction') };
    const txs: SignedTx[] = [];
    for (const raw of raws) {
      const decoded = await decodeSignedTx(raw);
      if (!decoded.ok) return { ok: false, result: manual('EVM_SIGNED_TX_INVALID', decoded.detail) };
      txs.push(decoded.tx);
    }
    if (txs.some((t) => t.nonce !== txs[0]!.nonce || t.from !== txs[0]!.from || t.chainId !== txs[0]!.chainId)) {
      return { ok: false, result: manual('EVM_SIGNED_TX_INVALID', 'the versions of the attempt do not share one sender, chain and nonce') };
    }
    return { ok: true, txs };
  }

  async #receipt(hash: Hex): Promise<TransactionReceipt | null> {
    try {
      return await this.#client.getTransactionReceipt({ hash });
    } catch (err) {
      if (err instanceof TransactionReceiptNotFoundError) return null;
      throw err;
    }
  }

  async #pending(hash: Hex): Promise<boolean> {
    try {
      await this.#client.getTransaction({ hash });
      return true;
    } catch (err) {
      if (err instanceof TransactionNotFoundError) return false;
      throw err;
    }
  }

  /** A read that fails says nothing about the movement: try again later. */
  async #read<T>(what: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw new TemporaryMovementError('EVM_RPC_UNAVAILABLE', `EVM RPC ${what} failed: ${errorDetail(err)}`, {}, { cause: err });
    }
  }
}

function refs(tx: SignedTx): Record<string, unknown> {
  return { tx_hash: tx.hash, from: tx.from, nonce: tx.nonce, chain_id: tx.chainId };
}

function result(input: ExecutionResultInput): ExecutionResult {
  return ExecutionResultSchema.parse(input);
}

function failed(code: string, detail: string): ExecutionResult {
  return result({ next_state: 'FAILED', error_code: code, error_detail: detail });
}

function manual(code: string, detail: string): ExecutionResult {
  return result({ next_state: 'UNKNOWN', error_code: code, error_detail: detail, manual_intervention_required: true });
}

function uncertain(tx: SignedTx, detail: string): ExecutionResult {
  return result({
    next_state: 'UNKNOWN',
    provider_state: 'broadcast_uncertain',
    provider_refs: refs(tx),
    error_code: 'EVM_BROADCAST_UNCERTAIN',
    error_detail: detail,
  });
}
