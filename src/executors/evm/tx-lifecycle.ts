import {
  BlockNotFoundError,
  TransactionNotFoundError,
  TransactionReceiptNotFoundError,
  type Address,
  type Hex,
  type PublicClient,
  type TransactionReceipt,
} from 'viem';
import { attemptKey } from '../../ids.ts';
import { NothingSentError, TemporaryMovementError } from '../errors.ts';
import { payloadHash } from '../payload-hash.ts';
import { ExecutionResultSchema, type ExecutionContext, type ExecutionResult, type ExecutionResultInput, type PreparedAction, type SubmitOptions } from '../protocol.ts';
import { capFees, feesOf, nextVersion, type FeeBumpPolicy } from './fee-bump.ts';
import type { EvmNonceManager } from './nonces.ts';
import { classifyBroadcastError, errorDetail } from './rpc-errors.ts';
import { decodeSignedTx, preparedNonceOf, signedBytesOf, signedEntriesOf, signsExactly, type SignedTx } from './signed-tx.ts';
import { CANCEL_GAS } from '../signers/evm-policy.ts';
import { serializeTransaction } from 'viem';

/**
 * The life of one EVM transaction, shared by every executor that signs one (native transfers,
 * ERC-20 transfers): its nonce, broadcast, "where is it now?", fee bumping and recovery, all worked
 * out from the attempt's stored signed versions and the chain, never from a process's memory (see
 * docs/evm-lane.md):
 * - the nonce comes from the shared nonce manager when there is one (reserved at prepare, cleared
 *   before every broadcast, released on a definite refusal); without it, from the sender's pending
 *   count (one serial sender only);
 * - a broadcast error proves a refusal only when the node names one; anything else is uncertain;
 * - every signed version of the attempt shares one nonce, so at most one is ever mined; observe
 *   and recover look at all of them;
 * - a transaction neither mined nor pending whose nonce is still free was dropped: only recovery
 *   sends the SAME bytes again (same hash, so it can never pay twice), or, with fee bumping on, the
 *   observer proposes a replacement once it is overdue; inspect() (reconciliation's question)
 *   only reads, and reports it UNKNOWN;
 * - a nonce taken by another transaction means no version can ever be mined.
 */

export interface Finality {
  /** Blocks, the transaction's own included. */
  confirmations: number;
  /** Also wait until the chain's `finalized` block covers the receipt's block. */
  finalized: boolean;
}

/** Checks a successful receipt beyond its status (e.g. the expected event); null: it is fine. */
export type ReceiptCheck = (receipt: TransactionReceipt, proof: Record<string, unknown>) => ExecutionResult | null;

export interface TxLifecycleOptions {
  /** The shared nonce manager; without it nonces are the sender's pending count (one serial sender only). */
  nonces?: EvmNonceManager | null;
  /**
   * Fee bumping (needs `nonces`, which records when each version was sent): a version pending
   * longer than `afterSeconds` is replaced by one with the same nonce and higher fees, up to the
   * policy cap. `capWei` alone (without `afterSeconds`) only caps the first version's fees.
   */
  feeBump?: Partial<FeeBumpPolicy> & { capWei?: bigint | null };
}

export class EvmTxLifecycle {
  readonly nonces: EvmNonceManager | null;
  readonly feeBump: FeeBumpPolicy | null;
  readonly feeCap: bigint | null;

  constructor(
    readonly client: PublicClient,
    readonly pollSeconds: number,
    /** The address every transaction is sent from; null for executors that only read the chain. */
    readonly sender: Address | null = null,
    opts: TxLifecycleOptions = {},
  ) {
    this.nonces = opts.nonces ?? null;
    this.feeCap = opts.feeBump?.capWei ?? null;
    this.feeBump =
      opts.feeBump?.afterSeconds !== undefined && this.nonces
        ? { afterSeconds: opts.feeBump.afterSeconds, percent: opts.feeBump.percent ?? 20, capWei: this.feeCap, limits: opts.feeBump.limits }
        : null;
  }

  /** The sending address; only executors that send have one. */
  get from(): Address {
    if (!this.sender) throw new TypeError('this transaction lifecycle sends nothing: it was made without a sender');
    return this.sender;
  }

  /**
   * prepare(): the chain id, the attempt's nonce and the first version's fees (the policy cap holds
   * for it too). The reservation is the last read: the caller must not fail the step after it, so
   * a nonce is only left behind when the process dies or the PREPARED commit is refused (the
   * reaper's case). Same attempt, same nonce.
   */
  async prepareTx(ctx: ExecutionContext): Promise<{ chainId: number; nonce: number; maxFeePerGas: bigint; maxPriorityFeePerGas: bigint }> {
    const [chainId, pending, estimated] = await this.read('prepare', () =>
      Promise.all([
        this.client.getChainId(),
        this.client.getTransactionCount({ address: this.from, blockTag: 'pending' }),
        this.client.estimateFeesPerGas(),
      ]),
    );
    const fees = capFees(estimated, this.feeCap);
    const nonce = this.nonces
      ? await this.nonces.reserve({ chainId, sender: this.from, requestNodeId: ctx.request_node_id, attemptNo: ctx.attempt_no }, pending)
      : pending;
    return { chainId, nonce, maxFeePerGas: fees.maxFeePerGas, maxPriorityFeePerGas: fees.maxPriorityFeePerGas };
  }

  /**
   * The attempt must still hold its nonce: one the reaper reclaimed (released or filled after the
   * attempt sat between prepare and submit past the stuck threshold) defers the node, and the next
   * dispatch prepares a new attempt with a new nonce.
   */
  async preSubmitCheck(ctx: ExecutionContext): Promise<void> {
    if (!this.nonces) return;
    const held = await this.nonces.reservationOf(this.from, ctx.request_node_id, ctx.attempt_no);
    if (!held || held.status === 'confirmed') {
      throw new TemporaryMovementError('EVM_NONCE_RECLAIMED', `attempt ${ctx.attempt_no} no longer holds a nonce of ${this.from}; it is prepared again`, {
        retry_after_seconds: 1,
      });
    }
  }

  /**
   * An executor's submit(): checks the signed bytes against the prepared transaction and this
   * sender, then sends them. Every refusal happens before a byte leaves the process: FAILED is
   * certain.
   */
  async submitSigned(ctx: ExecutionContext, prepared: PreparedAction, opts: SubmitOptions): Promise<ExecutionResult> {
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
    return this.send(ctx, tx, prepared);
  }

  /**
   * The broadcast of signed bytes submitSigned checked: the nonce cleared for
   * broadcast, then the broadcast. A refused replacement (fee bump) says nothing about the attempt:
   * an earlier version holds the nonce and may still be mined; observe decides from all versions.
   */
  async send(ctx: ExecutionContext, tx: SignedTx, prepared: PreparedAction): Promise<ExecutionResult> {
    if (this.nonces) {
      const cleared = await this.nonces.clearForBroadcast({ chainId: tx.chainId, sender: this.from, requestNodeId: ctx.request_node_id, attemptNo: ctx.attempt_no, nonce: tx.nonce, txHash: tx.hash });
      // Reclaimed between the pre-submit check and here (a process that stalled past the reaper's
      // threshold): nothing was sent, so the attempt is abandoned and the node prepared again, as
      // when the pre-submit check sees it. Never FAILED: the approved transfer is still to be paid.
      if (!cleared) {
        throw new NothingSentError('EVM_NONCE_RECLAIMED', `nonce ${tx.nonce} is not (or no longer) reserved for attempt ${ctx.attempt_no}; nothing was sent, it is prepared again`, {
          retry_after_seconds: 1,
        });
      }
    }
    // The hash is known before the broadcast, so even an answer lost on the way back leaves the
    // attempt traceable (recovery derives the same hash from the stored bytes).
    const sent = await this.broadcast(tx);
    if (prepared.provider_hints?.replaces) return sent;
    return this.#settleRefusal(ctx, tx, sent);
  }

  /** A definite refusal gives the nonce back (or records it as used, for "nonce too low"). */
  async #settleRefusal(ctx: ExecutionContext, tx: SignedTx, r: ExecutionResult): Promise<ExecutionResult> {
    if (!this.nonces || r.next_state !== 'FAILED' || r.provider_state !== 'rejected') return r;
    const a = { chainId: tx.chainId, sender: this.from, requestNodeId: ctx.request_node_id, attemptNo: ctx.attempt_no, nonce: tx.nonce };
    const reason = `${r.error_code}: ${r.error_detail ?? ''}`.slice(0, 500);
    if (r.error_code === 'EVM_NONCE_TOO_LOW') await this.nonces.consumed(a, reason);
    else await this.nonces.release(a, reason);
    return r;
  }

  /** A read that fails says nothing about the movement: try again later. */
  async read<T>(what: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw new TemporaryMovementError('EVM_RPC_UNAVAILABLE', `EVM RPC ${what} failed: ${errorDetail(err)}`, {}, { cause: err });
    }
  }

  async broadcast(tx: SignedTx): Promise<ExecutionResult> {
    try {
      await this.client.sendRawTransaction({ serializedTransaction: tx.raw });
      return this.submitted(tx);
    } catch (err) {
      const failure = classifyBroadcastError(err);
      if (failure.kind === 'already_known') return this.submitted(tx);
      if (failure.kind === 'uncertain') return uncertain(tx, failure.detail);
      // A refusal may be about an earlier copy of these very bytes: if the chain knows the hash,
      // the attempt is under way.
      let known: boolean;
      try {
        known = (await this.receipt(tx.hash)) !== null || (await this.pending(tx.hash));
      } catch (lookupErr) {
        return uncertain(tx, `${failure.detail}; then the lookup failed: ${errorDetail(lookupErr)}`);
      }
      if (known) return this.submitted(tx);
      return result({ next_state: 'FAILED', provider_state: 'rejected', provider_refs: txRefs(tx), error_code: failure.code, error_detail: failure.detail });
    }
  }

  submitted(tx: SignedTx): ExecutionResult {
    return result({ next_state: 'SUBMITTED', provider_state: 'broadcast', provider_refs: txRefs(tx), retry_after_seconds: this.#retry() });
  }

  /**
   * observe(): the attempt's versions as the chain sees them now. Pending past the fee-bump
   * threshold: the result proposes the next version (see #maybeBump).
   */
  async observe(ctx: ExecutionContext, need: Finality, check?: ReceiptCheck): Promise<ExecutionResult> {
    const txs = await this.attemptTxs(ctx);
    if (!txs.ok) return txs.result;
    const status = await this.status(txs.txs, need, check);
    if (status) return status.next_state === 'SUBMITTED' ? this.#maybeBump(ctx, txs.txs, status) : status;
    const newest = txs.txs.at(-1)!;
    // Neither mined nor pending, its nonce still free: the node dropped it (restart, eviction).
    // Only recovery may send it again, unless it is overdue for a fee bump: a node evicts a
    // transaction whose fee cap fell under the base fee, and sending it again would be refused.
    const dropped = result({
      next_state: 'UNKNOWN',
      provider_state: 'dropped',
      provider_refs: txRefs(newest),
      error_code: 'EVM_TX_NOT_FOUND',
      error_detail: `transaction ${newest.hash} is neither mined nor pending`,
    });
    if (!this.feeBump) return dropped;
    // With fee bumping on, the observer keeps the node: once the version is overdue it is
    // replaced (same nonce, higher fees) rather than re-sent as is.
    const waiting = result({ ...this.submitted(newest), provider_state: 'dropped', error_code: 'EVM_TX_NOT_FOUND', error_detail: `${dropped.error_detail}; it is replaced once overdue` });
    return this.#maybeBump(ctx, txs.txs, waiting);
  }

  /**
   * Pending too long: proposes the next version (same nonce, calldata and gas; higher fees) as the
   * result's prepared_action, its hints those of the first version plus the new fees; the runtime
   * has it signed under the node's signing policy, stores it on the attempt and only then
   * broadcasts it through submit(). At the policy cap, says so and proposes nothing.
   */
  async #maybeBump(ctx: ExecutionContext, txs: SignedTx[], pending: ExecutionResult): Promise<ExecutionResult> {
    const policy = this.feeBump;
    if (!policy || !this.nonces) return pending;
    // After an operator's cancel, the payment is never bumped again: only the cancel should be mined.
    if (txs.some((t) => t.cancel)) return pending;
    const age = await this.nonces.broadcastAge(this.from, ctx.request_node_id, ctx.attempt_no);
    if (age === null || age < policy.afterSeconds) return pending;
    const estimate = await this.read('eth_feeHistory', () => this.client.estimateFeesPerGas());
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
    const key = ctx.idempotency_key ?? attemptKey(ctx.request_node_id, ctx.attempt_no);
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
          ...firstHints(ctx),
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

  /**
   * cancel(): an operator's cancel of the attempt. Read first: a version (or an earlier cancel)
   * already mined answers as observe would, with EVM_CANCEL_TOO_LATE for the payment (the node
   * goes on and completes). Otherwise it proposes the cancel as the result's prepared_action: a
   * zero-value transfer from the sender to itself at the attempt's nonce, 21,000 gas, fees above
   * every version's (so a node takes it as their replacement) and within the chain's cap. The
   * runtime has it signed (the signer allows this one shape, and only as a cancel of the attempt's
   * original, evm-policy.ts checkCancel), stores it and only then broadcasts it through submit().
   * It changes nothing itself: no broadcast, no nonce reservation touched.
   */
  async cancel(ctx: ExecutionContext, need: Finality, check?: ReceiptCheck): Promise<ExecutionResult> {
    const txs = await this.attemptTxs(ctx);
    if (!txs.ok) return result({ ...txs.result, next_state: 'SUBMITTED', manual_intervention_required: false, error_code: 'EVM_CANCEL_NOTHING_SIGNED', error_detail: `nothing to cancel: ${txs.result.error_detail}` });
    const status = await this.status(txs.txs, need, check);
    if (status && status.next_state !== 'SUBMITTED') {
      if (status.next_state === 'CANCELLED') return status;
      return result({
        ...status,
        next_state: status.next_state === 'FAILED' ? 'OBSERVING' : status.next_state,
        error_code: 'EVM_CANCEL_TOO_LATE',
        error_detail: `too late to cancel: ${status.error_detail ?? `transaction ${String(status.provider_refs.tx_hash ?? '')} is ${status.provider_state}`}`,
        prepared_action: null,
      });
    }
    const newest = txs.txs.at(-1)!;
    const earlier = txs.txs.find((t) => t.cancel);
    if (earlier) {
      return result({
        next_state: 'SUBMITTED',
        provider_state: 'cancel_pending',
        provider_refs: { ...txRefs(earlier), cancel_tx_hash: earlier.hash },
        error_detail: `the cancel ${earlier.hash} is already signed for nonce ${earlier.nonce}; it settles the node once mined`,
      });
    }
    const top = topFees(txs.txs);
    if (!top) return refusedCancel(newest, 'EVM_CANCEL_UNSUPPORTED_TX', 'only EIP-1559 transactions are cancelled by replacement');
    const [estimate, chainNext] = await this.read('cancel', () =>
      Promise.all([this.client.estimateFeesPerGas(), this.client.getTransactionCount({ address: newest.from, blockTag: 'pending' })]),
    );
    // A node takes a replacement only when both fee fields rise by at least 10% (geth, anvil); 20%.
    const bump = (v: bigint) => (v * 120n + 99n) / 100n;
    let maxFee = bump(top.maxFeePerGas) > estimate.maxFeePerGas ? bump(top.maxFeePerGas) : estimate.maxFeePerGas;
    let tip = bump(top.maxPriorityFeePerGas) > estimate.maxPriorityFeePerGas ? bump(top.maxPriorityFeePerGas) : estimate.maxPriorityFeePerGas;
    if (this.feeCap !== null && maxFee > this.feeCap) {
      if (this.feeCap < (top.maxFeePerGas * 110n + 99n) / 100n) {
        return refusedCancel(newest, 'EVM_CANCEL_FEE_CAP', `a cancel must offer 10% over ${top.maxFeePerGas} wei per gas; the chain's cap is ${this.feeCap}`);
      }
      maxFee = this.feeCap;
    }
    if (tip > maxFee) tip = maxFee;
    const payload = serializeTransaction({ type: 'eip1559', chainId: newest.chainId, nonce: newest.nonce, to: newest.from, value: 0n, gas: CANCEL_GAS, maxFeePerGas: maxFee, maxPriorityFeePerGas: tip });
    const key = ctx.idempotency_key ?? attemptKey(ctx.request_node_id, ctx.attempt_no);
    const gap = chainNext < newest.nonce ? { chain_next_nonce: chainNext } : {};
    return result({
      next_state: 'SUBMITTED',
      provider_state: 'cancel_proposed',
      provider_refs: { ...txRefs(newest), ...gap },
      error_detail:
        chainNext < newest.nonce
          ? `the chain's next nonce of ${newest.from} is ${chainNext}: neither the transfer nor its cancel at nonce ${newest.nonce} can be mined before nonces ${chainNext}..${newest.nonce - 1} are used`
          : null,
      prepared_action: {
        prepared_action_id: `evm-${key}-cancel`,
        action_type: EVM_CANCEL_ACTION,
        payload_format: 'evm_raw_tx',
        payload,
        payload_hash: payloadHash(payload),
        signing_required: true,
        provider_hints: {
          chain_id: newest.chainId,
          nonce: newest.nonce,
          from: newest.from,
          to: newest.from,
          value_wei: '0',
          cancel: true,
          replaces: top.tx.hash,
          max_fee_per_gas: maxFee.toString(),
          max_priority_fee_per_gas: tip.toString(),
        },
      },
    });
  }

  /**
   * inspect(): what the chain says about the attempt's versions, read only. It never broadcasts
   * (not even the same bytes again), never clears, releases or consumes a nonce reservation. Signed
   * versions the chain has no trace of, their nonce still free, are UNKNOWN (`not_found`): they may
   * still be sent, by recovery or by anyone holding the bytes, so nothing is settled yet.
   */
  async inspect(ctx: ExecutionContext, need: Finality, check?: ReceiptCheck): Promise<ExecutionResult> {
    if (signedBytesOf(ctx.attempt_artifacts) === null) return this.inspectUnsigned(ctx);
    const txs = await this.attemptTxs(ctx);
    if (!txs.ok) return txs.result;
    const status = await this.status(txs.txs, need, check);
    if (status) return this.#reclaimedFirst(ctx, txs.txs, status);
    const newest = txs.txs.at(-1)!;
    return result({
      next_state: 'UNKNOWN',
      provider_state: 'not_found',
      provider_refs: txRefs(newest),
      error_code: 'EVM_TX_NOT_FOUND',
      error_detail: `transaction ${newest.hash} is neither mined nor pending and nonce ${newest.nonce} is unused: it was never sent, or dropped`,
    });
  }

  /** inspect() of an attempt without signed bytes: as recoverUnsigned, but the reservation is left as it is. */
  async inspectUnsigned(ctx: ExecutionContext): Promise<ExecutionResult> {
    const reserved = preparedNonceOf(ctx.attempt_artifacts);
    if (reserved === null) return manual('EVM_NO_PREPARED_ACTION', 'the attempt has neither a signed transaction nor a prepared action');
    const pending = await this.read('eth_getTransactionCount', () => this.client.getTransactionCount({ address: reserved.from, blockTag: 'pending' }));
    if (pending <= reserved.nonce) return result({ next_state: 'READY', error_code: 'EVM_NOTHING_BROADCAST', error_detail: `no signed transaction and nonce ${reserved.nonce} is unused` });
    return manual('EVM_NONCE_IN_USE', `no signed transaction stored, yet nonce ${reserved.nonce} of ${reserved.from} is in use: an operator must check the chain`);
  }

  /**
   * A nonce used on chain says nothing about this attempt when the reaper reclaimed it before
   * any version was cleared for broadcast: the filler (or another attempt) used it, and this
   * attempt never sent a byte. It is a new attempt's to pay (READY), never FAILED: which of
   * the two the chain mined first must not decide whether the approved transfer is paid.
   */
  async #reclaimedFirst(ctx: ExecutionContext, txs: SignedTx[], status: ExecutionResult): Promise<ExecutionResult> {
    if (status.error_code !== 'EVM_NONCE_CONSUMED' || !this.nonces) return status;
    if (!(await this.nonces.reclaimedBeforeBroadcast(this.from, ctx.request_node_id, ctx.attempt_no))) return status;
    const tx = txs.at(-1)!;
    return result({ next_state: 'READY', provider_refs: txRefs(tx), error_code: 'EVM_NONCE_RECLAIMED', error_detail: `nonce ${tx.nonce} was reclaimed before ${tx.hash} was cleared for broadcast; nothing of this attempt reached the chain` });
  }

  /**
   * recover(): as observe; a dropped transaction with its nonce still free is sent again (the
   * newest version, the same bytes), unless the reaper took the nonce back meanwhile: then these
   * bytes must never be sent, and nothing of the attempt ever reached the chain.
   */
  async recover(ctx: ExecutionContext, need: Finality, check?: ReceiptCheck): Promise<ExecutionResult> {
    if (signedBytesOf(ctx.attempt_artifacts) === null) return this.recoverUnsigned(ctx);
    const txs = await this.attemptTxs(ctx);
    if (!txs.ok) return txs.result;
    const status = await this.status(txs.txs, need, check);
    if (status) return this.#reclaimedFirst(ctx, txs.txs, status);
    const tx = txs.txs.at(-1)!;
    if (this.nonces) {
      const cleared = await this.nonces.clearForBroadcast({ chainId: tx.chainId, sender: this.from, requestNodeId: ctx.request_node_id, attemptNo: ctx.attempt_no, nonce: tx.nonce, txHash: tx.hash });
      if (!cleared) {
        return result({ next_state: 'READY', provider_refs: txRefs(tx), error_code: 'EVM_NONCE_RECLAIMED', error_detail: `nonce ${tx.nonce} was reclaimed and ${tx.hash} never reached the chain` });
      }
    }
    return this.#settleRefusal(ctx, tx, await this.broadcast(tx));
  }

  /**
   * Over every signed version of the attempt (they share one nonce, so at most one is ever mined):
   * a mined one (COMPLETED, OBSERVING until final, FAILED when reverted), else a pending one
   * (SUBMITTED, newest first), else the nonce taken by another transaction (FAILED); null when the
   * chain has no trace of any and the nonce is still free.
   */
  async status(versions: SignedTx | readonly SignedTx[], need: Finality, check?: ReceiptCheck): Promise<ExecutionResult | null> {
    const txs: readonly SignedTx[] = Array.isArray(versions) ? versions : [versions as SignedTx];
    const newest = txs.at(-1)!;
    return this.read('lookup', async () => {
      const mined = async () => {
        for (const tx of txs) {
          const receipt = await this.receipt(tx.hash);
          if (receipt) return this.#receiptResult(tx, receipt, need, check);
        }
        return null;
      };
      const found = await mined();
      if (found) return found;
      for (const tx of [...txs].reverse()) if (await this.pending(tx.hash)) return this.submitted(tx);
      const used = await this.client.getTransactionCount({ address: newest.from, blockTag: 'latest' });
      if (used <= newest.nonce) return null;
      // The nonce is used: by one of these versions if it was mined since the first look, else by another.
      const late = await mined();
      if (late) return late;
      return result({
        next_state: 'FAILED',
        provider_state: 'replaced',
        provider_refs: txRefs(newest),
        error_code: 'EVM_NONCE_CONSUMED',
        error_detail:
          txs.length === 1
            ? `nonce ${newest.nonce} of ${newest.from} was used by another transaction; ${newest.hash} can never be mined`
            : `nonce ${newest.nonce} of ${newest.from} was used by another transaction; no version of this attempt (${txs.length}) can ever be mined`,
      });
    });
  }

  async #receiptResult(tx: SignedTx, receipt: TransactionReceipt, need: Finality, check?: ReceiptCheck): Promise<ExecutionResult> {
    const proof: Record<string, unknown> = receiptProof(tx.hash, receipt);
    // The fee the sender paid, from the moment the transaction is mined (a reverted one pays too).
    const paid = { fee_paid_wei: feePaidWei(receipt) };
    if (tx.cancel) {
      // The operator's cancel took the nonce: no version of the payment can ever be mined. Settled
      // at the same depth the payment would have needed, so a reorg cannot bring the payment back.
      const reached = await finalityOf(this.client, receipt, need);
      const refs = { ...txRefs(tx), cancel_tx_hash: tx.hash, ...paid, confirmations: reached.confirmations };
      if (!reached.done) return result({ next_state: 'OBSERVING', provider_state: 'cancel_mined', provider_refs: refs, retry_after_seconds: this.#retry() });
      return result({
        next_state: 'CANCELLED',
        provider_state: 'cancelled',
        provider_refs: { ...refs, block_number: Number(receipt.blockNumber) },
        proof: { ...proof, cancel: true, confirmations: reached.confirmations },
        error_code: 'EVM_TX_CANCELLED',
        error_detail: `the zero-value replacement ${tx.hash} was mined at nonce ${tx.nonce}: the transfer was cancelled and can never be mined`,
      });
    }
    if (receipt.status !== 'success') {
      return result({
        next_state: 'FAILED',
        provider_state: 'reverted',
        provider_refs: { ...txRefs(tx), ...paid },
        proof,
        error_code: 'EVM_TX_REVERTED',
        error_detail: `transaction ${tx.hash} reverted in block ${receipt.blockNumber}`,
      });
    }
    const checked = check?.(receipt, proof);
    if (checked) return checked;
    const reached = await finalityOf(this.client, receipt, need);
    if (!reached.done) {
      return result({
        next_state: 'OBSERVING',
        provider_state: 'mined',
        provider_refs: { ...txRefs(tx), ...paid, confirmations: reached.confirmations },
        retry_after_seconds: this.#retry(),
      });
    }
    return result({
      next_state: 'COMPLETED',
      provider_state: need.finalized ? 'finalized' : 'confirmed',
      provider_refs: { ...txRefs(tx), ...paid, block_number: Number(receipt.blockNumber), confirmations: reached.confirmations },
      proof: { ...proof, confirmations: reached.confirmations, ...(need.finalized ? { finalized: true } : {}) },
    });
  }

  /** SUBMITTING or UNKNOWN without signed bytes: nothing of this attempt can have been broadcast. */
  async recoverUnsigned(ctx: ExecutionContext): Promise<ExecutionResult> {
    const reserved = preparedNonceOf(ctx.attempt_artifacts);
    if (reserved === null) return manual('EVM_NO_PREPARED_ACTION', 'the attempt has neither a signed transaction nor a prepared action');
    const pending = await this.read('eth_getTransactionCount', () => this.client.getTransactionCount({ address: reserved.from, blockTag: 'pending' }));
    if (pending <= reserved.nonce) {
      // Nothing was signed, so nothing can use the nonce: a later reservation may take it.
      if (this.nonces) {
        const chainId = await this.read('eth_chainId', () => this.client.getChainId());
        await this.nonces.release({ chainId, sender: reserved.from, requestNodeId: ctx.request_node_id, attemptNo: ctx.attempt_no, nonce: reserved.nonce }, 'recovered without signed bytes');
      }
      return result({ next_state: 'READY', error_code: 'EVM_NOTHING_BROADCAST', error_detail: `no signed transaction and nonce ${reserved.nonce} is unused` });
    }
    return manual('EVM_NONCE_IN_USE', `no signed transaction stored, yet nonce ${reserved.nonce} of ${reserved.from} is in use: an operator must check the chain`);
  }

  /** Every signed version of the attempt, oldest first; all must be from one sender with one nonce on one chain. */
  async attemptTxs(ctx: ExecutionContext): Promise<{ ok: true; txs: SignedTx[] } | { ok: false; result: ExecutionResult }> {
    const entries = signedEntriesOf(ctx.attempt_artifacts);
    if (entries.length === 0) return { ok: false, result: manual('EVM_NO_SIGNED_TX', 'the attempt has no stored signed transaction') };
    const txs: SignedTx[] = [];
    for (const { raw, cancel } of entries) {
      const decoded = await decodeSignedTx(raw);
      if (!decoded.ok) return { ok: false, result: manual('EVM_SIGNED_TX_INVALID', decoded.detail) };
      txs.push(cancel ? { ...decoded.tx, cancel: true } : decoded.tx);
    }
    if (txs.some((t) => t.nonce !== txs[0]!.nonce || t.from !== txs[0]!.from || t.chainId !== txs[0]!.chainId)) {
      return { ok: false, result: manual('EVM_SIGNED_TX_INVALID', 'the versions of the attempt do not share one sender, chain and nonce') };
    }
    return { ok: true, txs };
  }

  receipt(hash: Hex): Promise<TransactionReceipt | null> {
    return receiptOrNull(this.client, hash);
  }

  pending(hash: Hex): Promise<boolean> {
    return transactionKnown(this.client, hash);
  }

  #retry(): number {
    return Math.round(this.pollSeconds);
  }
}

/** The action type of an operator's cancel of an EVM attempt (a zero-value self-transfer at its nonce). */
export const EVM_CANCEL_ACTION = 'evm_cancel';

/** The version offering the highest fees (EIP-1559 only): a cancel must outbid it. */
function topFees(txs: readonly SignedTx[]): { tx: SignedTx; maxFeePerGas: bigint; maxPriorityFeePerGas: bigint } | null {
  let top: { tx: SignedTx; maxFeePerGas: bigint; maxPriorityFeePerGas: bigint } | null = null;
  for (const tx of txs) {
    const fees = feesOf(tx.raw);
    if (fees && (!top || fees.maxFeePerGas > top.maxFeePerGas)) top = { tx, ...fees };
  }
  return top;
}

/** A cancel the lane cannot make: the node stays as it is, observed, and the answer says why. */
function refusedCancel(tx: SignedTx, code: string, detail: string): ExecutionResult {
  return result({ next_state: 'SUBMITTED', provider_state: 'cancel_refused', provider_refs: txRefs(tx), error_code: code, error_detail: detail });
}

/** The provider_hints of the attempt's first prepared action (a replacement keeps them); {} without one. */
export function firstHints(ctx: ExecutionContext): Record<string, unknown> {
  const first = (ctx.attempt_artifacts ?? []).find((a) => a.artifact_type === 'prepared_action' && a.content_inline);
  if (!first?.content_inline) return {};
  try {
    const hints = (JSON.parse(first.content_inline) as { provider_hints?: unknown }).provider_hints;
    return hints && typeof hints === 'object' && !Array.isArray(hints) ? (hints as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/** Whether the node knows the transaction (pending, or mined); false: it never saw it or dropped it. */
export async function transactionKnown(client: PublicClient, hash: Hex): Promise<boolean> {
  try {
    await client.getTransaction({ hash });
    return true;
  } catch (err) {
    if (err instanceof TransactionNotFoundError) return false;
    throw err;
  }
}

export async function receiptOrNull(client: PublicClient, hash: Hex): Promise<TransactionReceipt | null> {
  try {
    return await client.getTransactionReceipt({ hash });
  } catch (err) {
    if (err instanceof TransactionReceiptNotFoundError) return null;
    throw err;
  }
}

/**
 * How far a mined receipt is: confirmations from the current head, and, when asked, whether the
 * `finalized` block covers it. A receipt whose block is no longer the canonical block at its
 * height (a reorg in progress) counts as zero confirmations.
 */
export async function finalityOf(client: PublicClient, receipt: TransactionReceipt, need: Finality): Promise<{ done: boolean; confirmations: number; canonical: boolean }> {
  const [head, atHeight] = await Promise.all([client.getBlockNumber(), blockOrNull(client.getBlock({ blockNumber: receipt.blockNumber }))]);
  const canonical = atHeight !== null && atHeight.hash === receipt.blockHash;
  const confirmations = canonical && head >= receipt.blockNumber ? Number(head - receipt.blockNumber + 1n) : 0;
  let done = canonical && confirmations >= need.confirmations;
  if (done && need.finalized) {
    const finalized = await blockOrNull(client.getBlock({ blockTag: 'finalized' }));
    done = finalized !== null && finalized.number !== null && finalized.number >= receipt.blockNumber;
  }
  return { done, confirmations, canonical };
}

/** A block, or null when the node has none there (a height past a reorged head); other errors propagate. */
async function blockOrNull<T>(p: Promise<T>): Promise<T | null> {
  try {
    return await p;
  } catch (err) {
    if (err instanceof BlockNotFoundError) return null;
    throw err;
  }
}

export function receiptProof(hash: Hex, receipt: TransactionReceipt): Record<string, unknown> {
  return {
    tx_hash: hash,
    block_number: Number(receipt.blockNumber),
    block_hash: receipt.blockHash,
    gas_used: receipt.gasUsed.toString(),
    effective_gas_price: receipt.effectiveGasPrice.toString(),
    fee_paid_wei: feePaidWei(receipt),
    status: receipt.status,
  };
}

/**
 * What the transaction cost its sender in wei: gasUsed x effectiveGasPrice from the receipt (the
 * execution fee; the L1 data fee of a rollup, reported separately by its nodes, is not included).
 */
export function feePaidWei(receipt: Pick<TransactionReceipt, 'gasUsed' | 'effectiveGasPrice'>): string {
  return (receipt.gasUsed * receipt.effectiveGasPrice).toString();
}

export function txRefs(tx: SignedTx): Record<string, unknown> {
  return { tx_hash: tx.hash, from: tx.from, nonce: tx.nonce, chain_id: tx.chainId };
}

export function result(input: ExecutionResultInput): ExecutionResult {
  return ExecutionResultSchema.parse(input);
}

/**
 * prepare()'s answer for an unsigned transaction: the prepared action to sign, named after the
 * attempt's idempotency key, with the executor's provider hints.
 */
export function awaitingSignature(ctx: ExecutionContext, payload: Hex, providerHints: Record<string, unknown>): ExecutionResult {
  const key = ctx.idempotency_key ?? attemptKey(ctx.request_node_id, ctx.attempt_no);
  return result({
    next_state: 'AWAITING_SIGNATURE',
    prepared_action: {
      prepared_action_id: `evm-${key}`,
      action_type: ctx.action_type,
      payload_format: 'evm_raw_tx',
      payload,
      payload_hash: payloadHash(payload),
      signing_required: true,
      provider_hints: providerHints,
    },
  });
}

/**
 * prepare() of an executor that only watches (nothing is signed or sent): SUBMITTING, with what to
 * watch as the JSON payload submit() reads back.
 */
export function preparedWatch(ctx: ExecutionContext, idPrefix: string, payload: string, providerHints: Record<string, unknown>): ExecutionResult {
  const key = ctx.idempotency_key ?? attemptKey(ctx.request_node_id, ctx.attempt_no);
  return result({
    next_state: 'SUBMITTING',
    prepared_action: {
      prepared_action_id: `${idPrefix}-${key}`,
      action_type: ctx.action_type,
      payload_format: 'json',
      payload,
      payload_hash: payloadHash(payload),
      signing_required: false,
      provider_hints: providerHints,
    },
  });
}

export function failed(code: string, detail: string): ExecutionResult {
  return result({ next_state: 'FAILED', error_code: code, error_detail: detail });
}

export function manual(code: string, detail: string): ExecutionResult {
  return result({ next_state: 'UNKNOWN', error_code: code, error_detail: detail, manual_intervention_required: true });
}

function uncertain(tx: SignedTx, detail: string): ExecutionResult {
  return result({ next_state: 'UNKNOWN', provider_state: 'broadcast_uncertain', provider_refs: txRefs(tx), error_code: 'EVM_BROADCAST_UNCERTAIN', error_detail: detail });
}
