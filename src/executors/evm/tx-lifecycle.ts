import { BlockNotFoundError, TransactionNotFoundError, TransactionReceiptNotFoundError, type Hex, type PublicClient, type TransactionReceipt } from 'viem';
import { TemporaryMovementError } from '../errors.ts';
import { ExecutionResultSchema, type ExecutionContext, type ExecutionResult, type ExecutionResultInput } from '../protocol.ts';
import { classifyBroadcastError, errorDetail } from './rpc-errors.ts';
import { decodeSignedTx, preparedNonceOf, signedBytesOf, type SignedTx } from './signed-tx.ts';

/**
 * The life of one signed EVM transaction after signing, shared by the executors that send
 * contract calls (ERC-20 transfers): broadcast, "where is it now?", and recovery, all worked out
 * from the attempt's stored signed bytes and the chain, never from a process's memory. The rules
 * are the native-value executor's (see docs/evm-lane.md):
 * - a broadcast error proves a refusal only when the node names one; anything else is uncertain;
 * - a transaction neither mined nor pending whose nonce is still free was dropped: only recovery
 *   sends the SAME bytes again (same hash, so it can never pay twice);
 * - a nonce taken by another transaction means this one can never be mined.
 */

export interface Finality {
  /** Blocks, the transaction's own included. */
  confirmations: number;
  /** Also wait until the chain's `finalized` block covers the receipt's block. */
  finalized: boolean;
}

/** Checks a successful receipt beyond its status (e.g. the expected event); null: it is fine. */
export type ReceiptCheck = (receipt: TransactionReceipt, proof: Record<string, unknown>) => ExecutionResult | null;

export class EvmTxLifecycle {
  constructor(
    readonly client: PublicClient,
    readonly pollSeconds: number,
  ) {}

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

  /** observe(): the attempt's transaction as the chain sees it now. */
  async observe(ctx: ExecutionContext, need: Finality, check?: ReceiptCheck): Promise<ExecutionResult> {
    const tx = await this.attemptTx(ctx);
    if (!tx.ok) return tx.result;
    const status = await this.status(tx.tx, need, check);
    if (status) return status;
    return result({
      next_state: 'UNKNOWN',
      provider_state: 'dropped',
      provider_refs: txRefs(tx.tx),
      error_code: 'EVM_TX_NOT_FOUND',
      error_detail: `transaction ${tx.tx.hash} is neither mined nor pending`,
    });
  }

  /** recover(): as observe, and a dropped transaction with its nonce still free is sent again, same bytes. */
  async recover(ctx: ExecutionContext, need: Finality, check?: ReceiptCheck): Promise<ExecutionResult> {
    if (signedBytesOf(ctx.attempt_artifacts) === null) return this.recoverUnsigned(ctx);
    const tx = await this.attemptTx(ctx);
    if (!tx.ok) return tx.result;
    const status = await this.status(tx.tx, need, check);
    if (status) return status;
    return this.broadcast(tx.tx);
  }

  /**
   * Mined (COMPLETED, OBSERVING until final, FAILED when reverted), pending (SUBMITTED), or its
   * nonce taken by another transaction (FAILED); null when the chain has no trace of it and the
   * nonce is still free.
   */
  async status(tx: SignedTx, need: Finality, check?: ReceiptCheck): Promise<ExecutionResult | null> {
    return this.read('lookup', async () => {
      let receipt = await this.receipt(tx.hash);
      if (!receipt) {
        if (await this.pending(tx.hash)) return this.submitted(tx);
        const used = await this.client.getTransactionCount({ address: tx.from, blockTag: 'latest' });
        if (used <= tx.nonce) return null;
        receipt = await this.receipt(tx.hash);
        if (!receipt) {
          return result({
            next_state: 'FAILED',
            provider_state: 'replaced',
            provider_refs: txRefs(tx),
            error_code: 'EVM_NONCE_CONSUMED',
            error_detail: `nonce ${tx.nonce} of ${tx.from} was used by another transaction; ${tx.hash} can never be mined`,
          });
        }
      }
      return this.#receiptResult(tx, receipt, need, check);
    });
  }

  async #receiptResult(tx: SignedTx, receipt: TransactionReceipt, need: Finality, check?: ReceiptCheck): Promise<ExecutionResult> {
    const proof: Record<string, unknown> = receiptProof(tx.hash, receipt);
    if (receipt.status !== 'success') {
      return result({
        next_state: 'FAILED',
        provider_state: 'reverted',
        provider_refs: txRefs(tx),
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
        provider_refs: { ...txRefs(tx), confirmations: reached.confirmations },
        retry_after_seconds: this.#retry(),
      });
    }
    return result({
      next_state: 'COMPLETED',
      provider_state: need.finalized ? 'finalized' : 'confirmed',
      provider_refs: { ...txRefs(tx), block_number: Number(receipt.blockNumber), confirmations: reached.confirmations },
      proof: { ...proof, confirmations: reached.confirmations, ...(need.finalized ? { finalized: true } : {}) },
    });
  }

  /** SUBMITTING or UNKNOWN without signed bytes: nothing of this attempt can have been broadcast. */
  async recoverUnsigned(ctx: ExecutionContext): Promise<ExecutionResult> {
    const reserved = preparedNonceOf(ctx.attempt_artifacts);
    if (reserved === null) return manual('EVM_NO_PREPARED_ACTION', 'the attempt has neither a signed transaction nor a prepared action');
    const pending = await this.read('eth_getTransactionCount', () => this.client.getTransactionCount({ address: reserved.from, blockTag: 'pending' }));
    if (pending <= reserved.nonce) {
      return result({ next_state: 'READY', error_code: 'EVM_NOTHING_BROADCAST', error_detail: `no signed transaction and nonce ${reserved.nonce} is unused` });
    }
    return manual('EVM_NONCE_IN_USE', `no signed transaction stored, yet nonce ${reserved.nonce} of ${reserved.from} is in use: an operator must check the chain`);
  }

  async attemptTx(ctx: ExecutionContext): Promise<{ ok: true; tx: SignedTx } | { ok: false; result: ExecutionResult }> {
    const raw = signedBytesOf(ctx.attempt_artifacts);
    if (raw === null) return { ok: false, result: manual('EVM_NO_SIGNED_TX', 'the attempt has no stored signed transaction') };
    const decoded = await decodeSignedTx(raw);
    if (!decoded.ok) return { ok: false, result: manual('EVM_SIGNED_TX_INVALID', decoded.detail) };
    return { ok: true, tx: decoded.tx };
  }

  receipt(hash: Hex): Promise<TransactionReceipt | null> {
    return receiptOrNull(this.client, hash);
  }

  async pending(hash: Hex): Promise<boolean> {
    try {
      await this.client.getTransaction({ hash });
      return true;
    } catch (err) {
      if (err instanceof TransactionNotFoundError) return false;
      throw err;
    }
  }

  #retry(): number {
    return Math.round(this.pollSeconds);
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
    status: receipt.status,
  };
}

export function txRefs(tx: SignedTx): Record<string, unknown> {
  return { tx_hash: tx.hash, from: tx.from, nonce: tx.nonce, chain_id: tx.chainId };
}

export function result(input: ExecutionResultInput): ExecutionResult {
  return ExecutionResultSchema.parse(input);
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
