import { serializeTransaction, type Hex } from 'viem';
import type { EvmNonceManager, EvmNonceWallet as EvmWallet } from '../executors/evm/nonces.ts';
import { capFees } from '../executors/evm/fee-bump.ts';
import { classifyBroadcastError, errorDetail } from '../executors/evm/rpc-errors.ts';
import { decodeSignedTx, signsExactly, type SignedTx } from '../executors/evm/signed-tx.ts';
import { transactionKnown } from '../executors/evm/tx-lifecycle.ts';
import { payloadHash } from '../executors/payload-hash.ts';
import { PROTOCOL_VERSION } from '../executors/protocol.ts';
import { EVM_NONCE_FILL_ACTION } from '../executors/signers/evm-policy.ts';
import type { Logger } from '../log.ts';
import { evmNonceReaperTotal } from '../metrics.ts';
import { withTransaction } from '../persistence/db.ts';
import {
  closeConsumed,
  hasLiveAbove,
  lockReservation,
  lockWallet,
  openWallets,
  setStatus,
  signedVersionsOfAttempt,
  storeFiller,
  stuckReservations,
  touchReservation,
  unreportedAhead,
  type NonceRow,
  type WalletKey,
} from '../persistence/evm-nonces.ts';
import { raiseNonceDisagreement } from '../services/chain-attention.ts';
import { runBudget } from '../run-budget.ts';

/**
 * The EVM nonce reaper (reference runtime §10): one stuck nonce must never block a wallet. EVM
 * nonces are strictly ordered, so a reserved nonce whose transaction never reaches the chain holds
 * back every later transaction of the same sender. Each run, per wallet with open reservations:
 *
 * 1. settle: asks the chain's mined count and closes every row below it (confirmed, or filled when
 *    the nonce was used by a transaction Ferry did not send);
 * 2. looks at the rows at or above that count untouched for `stuckSeconds`, lowest nonce first:
 *    - broadcast (the attempt's signed bytes are durable and were cleared to be sent): when no
 *      version is pending on the node, it sends the newest stored version again (the same bytes,
 *      the same hash: never a second payment); when there are no usable bytes, or the chain
 *      refuses them for good (fee cap under the base fee, invalid), it fills the gap;
 *    - reserved (never cleared to broadcast: the dispatch died or was refused between prepare and
 *      submit): it is taken back under the wallet lock, so the attempt can never send it any more.
 *      With live nonces above it, it is filled; as the wallet's highest, it is simply released for
 *      the next reservation (no transaction needed);
 *    - filled, with its filler not pending: a new filler is signed and sent.
 *
 * A gap fill is a zero-value transfer from the sender to itself with the stuck nonce, signed by the
 * wallet's signer, stored on the row before it is broadcast. Any number of fillers for one nonce is
 * harmless: only one can be mined, and none moves value.
 *
 * Several processes may run the reaper at once. Taking a row over (reserved or broadcast -> filled
 * or released) happens under the wallet's advisory lock and only if the row is unchanged since it
 * was read, so exactly one reaper (or the attempt itself, clearing its nonce for broadcast) wins;
 * what two reapers may both do (send the same stored bytes again, sign a filler for one nonce) is
 * harmless. No lock is held while the chain or the signer is called.
 */

export interface EvmNonceReaperDeps {
  nonces: EvmNonceManager;
  /** A row untouched this long, its nonce still unused on chain, counts as stuck. */
  stuckSeconds: number;
  log: Logger;
  /**
   * Chain state disagreements (FERRY_EVM_NONCE_DISAGREEMENT_SECONDS): a reservation held this long
   * at or above the chain's pending nonce raises attention once; absent, none is looked for.
   */
  disagreement?: { afterSeconds: number; callbackMaxAttempts: number };
}

export interface EvmNonceReaperOptions {
  /** Most stuck rows handled per run. */
  batchSize: number;
  /** Time budget of one run in milliseconds; 0 means none. */
  maxRunMs: number;
}

export interface EvmNonceReaperReport {
  wallets: number;
  /** Rows closed because the chain's count passed their nonce. */
  settled: number;
  rebroadcast: number;
  filled: number;
  released: number;
  /** Stuck rows whose transaction turned out to be pending on the node. */
  pending: number;
  /** Rows or wallets left for a later run (no wallet registered here, RPC or signer failure). */
  skipped: number;
  /** Rows newly reported as a chain state disagreement (attention raised). */
  disagreements: number;
  budgetExhausted: boolean;
}

const FILL_GAS = 21_000n;

export async function runEvmNonceReaper(deps: EvmNonceReaperDeps, opts: EvmNonceReaperOptions): Promise<EvmNonceReaperReport> {
  const runTime = runBudget(opts.maxRunMs);
  const report: EvmNonceReaperReport = { wallets: 0, settled: 0, rebroadcast: 0, filled: 0, released: 0, pending: 0, skipped: 0, disagreements: 0, budgetExhausted: false };
  let budget = opts.batchSize;
  const pool = deps.nonces.pool;

  for (const w of await openWallets(pool, 100)) {
    if (budget <= 0) break;
    if (runTime.spent()) {
      report.budgetExhausted = true;
      break;
    }
    const wallet = await deps.nonces.walletFor(w);
    if (!wallet) {
      // No signer for this wallet in this process: another process (or a later start) reaps it.
      report.skipped++;
      continue;
    }
    report.wallets++;
    let latest: number;
    try {
      latest = await wallet.client.getTransactionCount({ address: wallet.address, blockTag: 'latest' });
    } catch (err) {
      deps.log.warn({ chain_id: w.chainId, sender: w.sender, err: errorDetail(err) }, 'nonce reaper: chain unavailable');
      report.skipped++;
      continue;
    }
    report.settled += await closeConsumed(pool, w, latest);
    if (deps.disagreement) {
      try {
        report.disagreements += await reportDisagreements(deps, deps.disagreement, wallet, w, latest);
      } catch (err) {
        deps.log.warn({ chain_id: w.chainId, sender: w.sender, err: errorDetail(err) }, 'nonce reaper: chain state check left for the next run');
      }
    }
    for (const row of await stuckReservations(pool, w, latest, deps.stuckSeconds, budget)) {
      if (runTime.spent()) {
        report.budgetExhausted = true;
        break;
      }
      budget--;
      try {
        await reapOne(deps, wallet, w, row, report);
      } catch (err) {
        deps.log.warn({ chain_id: w.chainId, sender: w.sender, nonce: row.nonce, err: errorDetail(err) }, 'nonce reaper: row left for the next run');
        report.skipped++;
      }
    }
  }
  for (const action of ['settled', 'rebroadcast', 'filled', 'released', 'pending', 'skipped', 'disagreements'] as const) {
    if (report[action] > 0) evmNonceReaperTotal.inc({ action }, report[action]);
  }
  return report;
}

async function reapOne(deps: EvmNonceReaperDeps, wallet: EvmWallet, w: WalletKey, row: NonceRow, report: EvmNonceReaperReport): Promise<void> {
  const pool = deps.nonces.pool;
  const log = deps.log.child({ chain_id: w.chainId, sender: w.sender, nonce: row.nonce, request_node_id: row.request_node_id, attempt_no: row.attempt_no });
  if (row.status === 'broadcast') {
    const versions = await usableVersions(pool, w, row);
    for (const v of versions) {
      if (await transactionKnown(wallet.client, v.hash)) {
        await touchReservation(pool, row.id, null);
        report.pending++;
        return;
      }
    }
    const newest = versions.at(-1);
    if (newest) {
      const sent = await send(wallet, newest.raw);
      if (sent.ok) {
        await touchReservation(pool, row.id, `re-broadcast ${newest.hash}`);
        log.info({ tx_hash: newest.hash }, 'nonce reaper: re-broadcast the stored signed transaction');
        report.rebroadcast++;
        return;
      }
      if (sent.kind === 'uncertain' || sent.code === 'EVM_NONCE_TOO_LOW') {
        // Uncertain: try again next run. Too low: mined meanwhile; the next settle closes it.
        await touchReservation(pool, row.id, sent.detail.slice(0, 500));
        report.skipped++;
        return;
      }
      if (!(await takeOver(pool, w, row, 'broadcast', `stored bytes refused (${sent.code}): ${sent.detail}`.slice(0, 500)))) return;
    } else if (!(await takeOver(pool, w, row, 'broadcast', 'no usable signed bytes stored for the attempt'))) {
      return;
    }
    await fill(deps, wallet, w, row, report);
    return;
  }

  if (row.status === 'reserved') {
    const outcome = await withTransaction(pool, async (client) => {
      await lockWallet(client, w);
      const current = await lockReservation(client, row.id);
      if (!current || current.status !== 'reserved' || current.updated_at.getTime() !== row.updated_at.getTime()) return 'moved';
      if (await hasLiveAbove(client, w, row.nonce)) {
        await setStatus(client, row.id, 'filled', 'reclaimed by the nonce reaper: never cleared to broadcast', false);
        return 'fill';
      }
      await setStatus(client, row.id, 'released', 'released by the nonce reaper: never cleared to broadcast', true);
      return 'released';
    });
    if (outcome === 'released') {
      log.info('nonce reaper: released an abandoned reservation');
      report.released++;
    }
    if (outcome === 'fill') await fill(deps, wallet, w, row, report);
    return;
  }

  if (row.status === 'filled') {
    if (row.filler_tx_hash && (await transactionKnown(wallet.client, row.filler_tx_hash as Hex))) {
      await touchReservation(pool, row.id, null);
      report.pending++;
      return;
    }
    await fill(deps, wallet, w, row, report);
  }
}

/**
 * Chain state disagreements, loud: rows held longer than the threshold at or above the chain's
 * pending nonce are something the chain does not know. When Ferry's lowest open nonce is above the
 * chain's next one, nothing Ferry holds can ever fill the nonces between (a new chain behind the
 * same RPC, a database restored over another wallet's history, transactions sent around Ferry and
 * dropped): every later transaction waits on them (`nonce_gap`). Otherwise a reservation sits ahead
 * of what the chain has (`reservation_ahead`): its transaction never arrived, or waits behind one
 * that never will. Either way a person must look: a warning, an audit event and a
 * request_attention callback for each waiting movement, once per row. Nothing is sent for it.
 */
async function reportDisagreements(
  deps: EvmNonceReaperDeps,
  opts: NonNullable<EvmNonceReaperDeps['disagreement']>,
  wallet: EvmWallet,
  w: WalletKey,
  latest: number,
): Promise<number> {
  const pending = await wallet.client.getTransactionCount({ address: wallet.address, blockTag: 'pending' });
  const { rows, lowest } = await unreportedAhead(deps.nonces.pool, w, pending, opts.afterSeconds, 100);
  if (rows.length === 0) return 0;
  const gap = lowest !== null && lowest > latest;
  const nonces = rows.map((r) => r.nonce);
  const detail = gap
    ? `the chain's next nonce of ${w.sender} on chain ${w.chainId} is ${latest}, Ferry's lowest open nonce is ${lowest}: nonces ${latest}..${lowest! - 1} are held by nothing Ferry knows, so nonces ${nonces.join(', ')} can never be mined until they are used (a new chain behind the RPC with Ferry's data kept? start from fresh data, or fill the gap)`
    : `nonces ${nonces.join(', ')} of ${w.sender} on chain ${w.chainId} are reserved above the chain's pending nonce ${pending} for more than ${opts.afterSeconds} s: their transactions are not in the chain's mempool in order`;
  const raised = await raiseNonceDisagreement(
    deps.nonces.pool,
    { kind: gap ? 'nonce_gap' : 'reservation_ahead', chainId: w.chainId, sender: w.sender, chainLatest: latest, chainPending: pending, lowestOpen: lowest, rows, detail },
    { callbackMaxAttempts: opts.callbackMaxAttempts },
  );
  deps.log.warn(
    { chain_id: w.chainId, sender: w.sender, kind: gap ? 'nonce_gap' : 'reservation_ahead', chain_latest_nonce: latest, chain_pending_nonce: pending, nonces, movements: raised.movements },
    `chain state disagreement: ${detail}`,
  );
  return rows.length;
}

/** broadcast -> filled under the wallet lock, unless the row moved since it was read. */
async function takeOver(pool: EvmNonceManager['pool'], w: WalletKey, row: NonceRow, from: 'broadcast', reason: string): Promise<boolean> {
  return withTransaction(pool, async (client) => {
    await lockWallet(client, w);
    const current = await lockReservation(client, row.id);
    if (!current || current.status !== from || current.updated_at.getTime() !== row.updated_at.getTime()) return false;
    await setStatus(client, row.id, 'filled', reason, false);
    return true;
  });
}

/** Signs a zero-value self-transfer with the row's nonce, stores it on the row, then sends it. */
async function fill(deps: EvmNonceReaperDeps, wallet: EvmWallet, w: WalletKey, row: NonceRow, report: EvmNonceReaperReport): Promise<void> {
  const estimate = await wallet.client.estimateFeesPerGas();
  // Twice the estimate: a filler exists to unblock the wallet, it should not wait on fees; never
  // above the chain's policy cap, which the signer checks too.
  const cap = wallet.feeCapWei ?? null;
  const fees = capFees({ maxFeePerGas: estimate.maxFeePerGas * 2n, maxPriorityFeePerGas: estimate.maxPriorityFeePerGas }, cap);
  const payload = serializeTransaction({
    type: 'eip1559',
    chainId: w.chainId,
    nonce: row.nonce,
    to: wallet.address,
    value: 0n,
    gas: FILL_GAS,
    maxFeePerGas: fees.maxFeePerGas,
    maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
  });
  const hash = payloadHash(payload);
  const signed = await wallet.signer.sign({
    protocol_version: PROTOCOL_VERSION,
    request_id: `evm-nonce-fill:${w.chainId}:${w.sender}:${row.nonce}`,
    request_node_id: row.request_node_id,
    attempt_no: row.attempt_no,
    signing_intent: {
      action: EVM_NONCE_FILL_ACTION,
      asset: 'native',
      amount: '0',
      destination: wallet.address,
      max_fee_usd: null,
      chain_family: 'evm',
      allowed_payload_hash: hash,
    },
    payload_format: 'evm_raw_tx',
    payload,
    payload_hash: hash,
    metadata: { purpose: 'nonce_gap_fill' },
    // The one shape the signer policy accepts for a filler (checkNonceFill): nothing but the nonce moves.
    expected_effect: {
      chain_id: w.chainId,
      asset: 'native',
      to: wallet.address,
      amount_base_units: '0',
      ...(cap === null ? {} : { max_fee_per_gas_cap_wei: cap.toString() }),
    },
  });
  const decoded = await decodeSignedTx(signed.signature);
  if (!decoded.ok || decoded.tx.from !== wallet.address || !signsExactly(decoded.tx.raw, payload)) {
    throw new Error('the signer returned something other than the gap filler it was asked to sign');
  }
  await storeFiller(deps.nonces.pool, row.id, decoded.tx.raw, decoded.tx.hash);
  const sent = await send(wallet, decoded.tx.raw);
  deps.log.info(
    { chain_id: w.chainId, sender: w.sender, nonce: row.nonce, filler_tx_hash: decoded.tx.hash, sent: sent.ok ? 'ok' : sent.code },
    'nonce reaper: filled a stuck nonce with a zero-value self-transfer',
  );
  if (sent.ok) report.filled++;
  else report.skipped++;
}

async function usableVersions(pool: EvmNonceManager['pool'], w: WalletKey, row: NonceRow): Promise<SignedTx[]> {
  const out: SignedTx[] = [];
  for (const raw of await signedVersionsOfAttempt(pool, row.request_node_id, row.attempt_no)) {
    const d = await decodeSignedTx(raw);
    if (d.ok && d.tx.nonce === row.nonce && d.tx.from === w.sender && d.tx.chainId === w.chainId) out.push(d.tx);
  }
  return out;
}

type Sent = { ok: true } | { ok: false; kind: 'refused' | 'uncertain'; code: string; detail: string };

async function send(wallet: EvmWallet, raw: Hex): Promise<Sent> {
  try {
    await wallet.client.sendRawTransaction({ serializedTransaction: raw });
    return { ok: true };
  } catch (err) {
    const f = classifyBroadcastError(err);
    if (f.kind === 'already_known') return { ok: true };
    if (f.kind === 'uncertain') return { ok: false, kind: 'uncertain', code: 'EVM_BROADCAST_UNCERTAIN', detail: f.detail };
    return { ok: false, kind: 'refused', code: f.code, detail: f.detail };
  }
}
