import type { Address, PublicClient } from 'viem';
import { TemporaryMovementError } from '../errors.ts';
import type { Signer } from '../protocol.ts';
import { withTransaction, type Pool } from '../../persistence/db.ts';
import {
  broadcastAgeSeconds,
  highestLiveNonce,
  insertReservation,
  lockReservation,
  lockWallet,
  lowestReusableGap,
  markBroadcast,
  reclaimedBeforeBroadcast,
  reservationOfAttempt,
  reservationOfAttemptAnyChain,
  setStatus,
  type NonceRow,
  type WalletKey,
} from '../../persistence/evm-nonces.ts';

/**
 * The nonce manager every EVM executor of Ferry shares (native transfers, ERC-20 transfers...): it
 * decides which nonce an attempt signs, so many dispatchers in many processes can send from one hot
 * wallet at once. Keyed by (chain id, sender). See src/persistence/evm-nonces.ts for the locking.
 *
 * An attempt's life with it:
 * 1. prepare(): `reserve()` - one short transaction of its own, after the RPC reads. Idempotent per
 *    attempt: the same (node, attempt) gets the same nonce back as long as its row is live, so a
 *    dispatch that dies between reserve and the PREPARED commit and is dispatched again (same
 *    attempt number) reuses it. A reservation whose prepared action is never recorded at all is
 *    the nonce reaper's to reclaim.
 * 2. submit() (and recover() before re-sending): `clearForBroadcast()` - the attempt proves it
 *    still holds the nonce and marks it broadcast; a nonce the reaper took over is never sent.
 * 3. A definite refusal at broadcast: `release()` (nothing used the nonce; a later reservation
 *    reuses it, lowest gap first) or `consumed()` (nonce too low: something else used it).
 * 4. Confirmation is noticed by the reaper from the chain's count (rows below it are closed).
 */
export interface NonceAttempt {
  chainId: number;
  sender: Address;
  requestNodeId: string;
  attemptNo: number;
}

/** A wallet the reaper can act for: a chain client and the signer holding the sender's key. */
export interface EvmNonceWallet {
  address: Address;
  client: PublicClient;
  signer: Signer;
  /** The client's chain, when known (else asked once with eth_chainId). */
  chainId?: number;
  /** The chain's policy cap on maxFeePerGas, in wei; a gap filler offers no more. */
  feeCapWei?: bigint | null;
}

export class EvmNonceManager {
  readonly #pool: Pool;
  readonly #wallets: EvmNonceWallet[] = [];
  readonly #chainIds = new Map<PublicClient, Promise<number>>();

  /**
   * `pool` should not be the pool whose connections the observer and recovery hold while they call
   * an executor (the runtime gives the providers' own pool), so a nonce write never waits for them.
   */
  constructor(pool: Pool) {
    this.#pool = pool;
  }

  get pool(): Pool {
    return this.#pool;
  }

  /** Lets the reaper send from this wallet (gap fills, re-broadcasts). */
  registerWallet(wallet: EvmNonceWallet): void {
    const address = wallet.address.toLowerCase() as Address;
    if (this.#wallets.some((w) => w.address === address && w.client === wallet.client)) return;
    this.#wallets.push({ ...wallet, address });
  }

  /** The registered wallet sending from `sender` on `chainId`, if any. */
  async walletFor(w: WalletKey): Promise<EvmNonceWallet | null> {
    for (const wallet of this.#wallets) {
      if (wallet.address !== w.sender) continue;
      if (wallet.chainId !== undefined) {
        if (wallet.chainId === w.chainId) return wallet;
        continue;
      }
      let id = this.#chainIds.get(wallet.client);
      if (!id) {
        id = wallet.client.getChainId();
        this.#chainIds.set(wallet.client, id);
        id.catch(() => this.#chainIds.delete(wallet.client));
      }
      if ((await id.catch(() => null)) === w.chainId) return wallet;
    }
    return null;
  }

  get walletCount(): number {
    return this.#wallets.length;
  }

  /**
   * The attempt's nonce: its live reservation if it has one; else the lowest released gap at or
   * above the chain's pending count; else max(chain's pending count, highest live reservation + 1).
   * `chainPending` is read by the caller before this call: no RPC happens under the wallet lock.
   * A stale (too low) count is harmless, as every nonce Ferry handed out is in the table; a count
   * raised by a transaction sent outside Ferry is respected.
   */
  async reserve(a: NonceAttempt, chainPending: number): Promise<number> {
    const w = walletOf(a);
    try {
      return await withTransaction(this.#pool, async (client) => {
        await lockWallet(client, w);
        const own = await reservationOfAttempt(client, w, a.requestNodeId, a.attemptNo);
        if (own) return own.nonce;
        const gap = await lowestReusableGap(client, w, chainPending);
        const highest = await highestLiveNonce(client, w);
        const next = gap !== null && (highest === null || gap <= highest) ? gap : Math.max(chainPending, highest === null ? 0 : highest + 1);
        return (await insertReservation(client, w, next, a.requestNodeId, a.attemptNo)).nonce;
      });
    } catch (err) {
      throw unavailable(err);
    }
  }

  /**
   * The attempt still holds `nonce` and may send a version with it: marks the row broadcast (with
   * the version's hash) and returns true. False when the reaper released or filled it meanwhile,
   * or the attempt never reserved it: the caller must not send anything.
   */
  async clearForBroadcast(a: Omit<NonceAttempt, 'chainId'> & { chainId: number | null; nonce: number; txHash: string | null }): Promise<boolean> {
    try {
      return await withTransaction(this.#pool, async (client) => {
        const found =
          a.chainId === null
            ? await reservationOfAttemptAnyChain(client, a.sender.toLowerCase(), a.requestNodeId, a.attemptNo)
            : await reservationOfAttempt(client, walletOf(a as NonceAttempt), a.requestNodeId, a.attemptNo);
        if (!found || found.nonce !== a.nonce) return false;
        await lockWallet(client, { chainId: found.chain_id, sender: found.sender });
        const row = await lockReservation(client, found.id);
        if (!row || (row.status !== 'reserved' && row.status !== 'broadcast' && row.status !== 'confirmed')) return false;
        if (row.status !== 'confirmed') await markBroadcast(client, row.id, a.txHash);
        return true;
      });
    } catch (err) {
      throw unavailable(err);
    }
  }

  /** The attempt's live reservation (any chain of the sender), for checks and fee bumping. */
  async reservationOf(sender: Address, requestNodeId: string, attemptNo: number): Promise<NonceRow | null> {
    try {
      return await reservationOfAttemptAnyChain(this.#pool, sender.toLowerCase(), requestNodeId, attemptNo);
    } catch (err) {
      throw unavailable(err);
    }
  }

  /** The reaper reclaimed the attempt's nonce before any version was cleared for broadcast (see the query). */
  async reclaimedBeforeBroadcast(sender: Address, requestNodeId: string, attemptNo: number): Promise<boolean> {
    try {
      return await reclaimedBeforeBroadcast(this.#pool, sender.toLowerCase(), requestNodeId, attemptNo);
    } catch (err) {
      throw unavailable(err);
    }
  }

  /** Seconds since the attempt's newest version was cleared for broadcast; null when none was. */
  async broadcastAge(sender: Address, requestNodeId: string, attemptNo: number): Promise<number | null> {
    try {
      return await broadcastAgeSeconds(this.#pool, sender.toLowerCase(), requestNodeId, attemptNo);
    } catch (err) {
      throw unavailable(err);
    }
  }

  /** A definite refusal left the nonce unused: a later reservation may take it (lowest gap first). */
  release(a: NonceAttempt & { nonce: number }, reason: string): Promise<void> {
    return this.#end(a, 'released', reason, true);
  }

  /** The chain refused the nonce as used (nonce too low): it is gone for good. */
  consumed(a: NonceAttempt & { nonce: number }, reason: string): Promise<void> {
    return this.#end(a, 'filled', reason, true);
  }

  async #end(a: NonceAttempt & { nonce: number }, status: 'released' | 'filled', reason: string, closed: boolean): Promise<void> {
    const w = walletOf(a);
    try {
      await withTransaction(this.#pool, async (client) => {
        await lockWallet(client, w);
        const row = await reservationOfAttempt(client, w, a.requestNodeId, a.attemptNo);
        // Only a row this attempt still holds, and only before the chain confirmed it.
        if (!row || row.nonce !== a.nonce || row.status === 'confirmed') return;
        await setStatus(client, row.id, status, reason, closed);
      });
    } catch (err) {
      throw unavailable(err);
    }
  }
}

function walletOf(a: { chainId: number; sender: string }): WalletKey {
  return { chainId: a.chainId, sender: a.sender.toLowerCase() };
}

function unavailable(err: unknown): unknown {
  if (err instanceof TemporaryMovementError) return err;
  return new TemporaryMovementError('EVM_NONCE_STORE_UNAVAILABLE', `nonce reservations unavailable: ${err instanceof Error ? err.message : String(err)}`);
}
