import type { FerryConfig } from '../config.ts';
import { createCexAccount, type CexAccount } from '../executors/cex/client.ts';
import type { Logger } from '../log.ts';
import { writeAudit } from '../persistence/audit.ts';
import { ownTransferRefs, recordForeignTransfer, type ForeignTransferInput } from '../persistence/cex-transfers.ts';
import { withTransaction, type Pool } from '../persistence/db.ts';

/**
 * cex_transfer_ingest (sidecar, on when FERRY_CEX_TRANSFER_INGEST_VENUES lists CEX accounts): reads
 * each listed account's deposit and withdrawal history (ccxt fetchDeposits / fetchWithdrawals, i.e.
 * Binance's capital/deposit/hisrec and capital/withdraw/history, signed, through the account's own
 * client and base_url) over the lookback window, and records every transfer no movement made:
 * venue, asset, amount, network, transaction id, time. A withdrawal whose withdrawOrderId or
 * exchange id a CEX node holds, and a deposit whose transaction hash or exchange id a node holds,
 * is Ferry's own and is skipped. Recording is idempotent (one row per venue, direction and provider
 * id); each new row raises attention: a warning log and a `cex.foreign_transfer` audit event.
 * No transaction is open while the exchange is asked.
 */

export interface IngestDeps {
  pool: Pool;
  config: FerryConfig;
  log: Logger;
  env?: NodeJS.ProcessEnv;
  /** Accounts by key (tests; a process's lane accounts); made from the configuration file when absent. */
  accounts?: Map<string, CexAccount>;
}

export interface IngestResult {
  venues: number;
  seen: number;
  recorded: number;
  own: number;
  failed: Array<{ venue: string; code: string }>;
}

interface CcxtTransfer {
  id?: string;
  txid?: string;
  currency?: string;
  amount?: number;
  network?: string;
  address?: string;
  status?: string;
  timestamp?: number;
  info?: Record<string, unknown>;
}

const str = (v: unknown) => (v === undefined || v === null || v === '' ? null : String(v));

export async function runCexTransferIngest(deps: IngestDeps): Promise<IngestResult> {
  const out: IngestResult = { venues: 0, seen: 0, recorded: 0, own: 0, failed: [] };
  const since = Date.now() - deps.config.cexTransferIngestLookbackSeconds * 1000;
  for (const venue of deps.config.cexTransferIngestVenues) {
    const account = deps.accounts?.get(venue) ?? accountFromConfig(deps, venue);
    if (!account) {
      out.failed.push({ venue, code: 'CEX_ACCOUNT_UNKNOWN' });
      deps.log.warn({ worker: 'cex_transfer_ingest', venue }, 'FERRY_CEX_TRANSFER_INGEST_VENUES names an account the configuration file does not have');
      continue;
    }
    out.venues++;
    let deposits: CcxtTransfer[];
    let withdrawals: CcxtTransfer[];
    try {
      const ex = await account.client();
      deposits = (await ex.fetchDeposits(undefined, since)) as CcxtTransfer[];
      withdrawals = (await ex.fetchWithdrawals(undefined, since)) as CcxtTransfer[];
    } catch (err) {
      const code = (err as { constructor?: { name?: string } })?.constructor?.name ?? 'Error';
      out.failed.push({ venue, code });
      // The class only: an exchange error's text may carry request details.
      deps.log.warn({ worker: 'cex_transfer_ingest', venue, code }, 'exchange transfer history could not be read');
      continue;
    }
    const transfers: ForeignTransferInput[] = [
      ...deposits.map((d) => toInput(venue, 'deposit', d)),
      ...withdrawals.map((w) => toInput(venue, 'withdrawal', w)),
    ].filter((t): t is ForeignTransferInput & { order_id?: string | null } => t !== null);
    out.seen += transfers.length;
    const orderIds = withdrawals.map((w) => str(w.info?.withdrawOrderId)).filter((v): v is string => v !== null);
    const own = await ownTransferRefs(deps.pool, {
      orderIds,
      ids: transfers.map((t) => t.provider_id),
      txIds: transfers.map((t) => t.tx_id).filter((v): v is string => v !== null),
    });
    for (const [i, t] of transfers.entries()) {
      const raw = i < deposits.length ? deposits[i] : withdrawals[i - deposits.length];
      const orderId = t.direction === 'withdrawal' ? str(raw?.info?.withdrawOrderId) : null;
      const mine = (orderId !== null && own.has(orderId)) || own.has(t.provider_id) || (t.tx_id !== null && own.has(t.tx_id.toLowerCase()));
      if (mine) {
        out.own++;
        continue;
      }
      const recorded = await withTransaction(deps.pool, async (client) => {
        const row = await recordForeignTransfer(client, t);
        if (row) {
          await writeAudit(client, {
            actor: 'worker:cex_transfer_ingest',
            action: 'cex.foreign_transfer',
            entity_type: 'cex_transfer',
            entity_id: String(row.id),
            details: { venue, direction: t.direction, asset: t.asset, amount: t.amount, network: t.network, tx_id: t.tx_id, provider_id: t.provider_id },
          });
        }
        return row;
      });
      if (recorded) {
        out.recorded++;
        deps.log.warn(
          { worker: 'cex_transfer_ingest', attention: 'cex_foreign_transfer', venue, direction: t.direction, asset: t.asset, amount: t.amount, tx_id: t.tx_id },
          'a transfer no movement made moved funds on an exchange account',
        );
      }
    }
  }
  return out;
}

function toInput(venue: string, direction: 'deposit' | 'withdrawal', t: CcxtTransfer): ForeignTransferInput | null {
  const id = str(t.id) ?? str(t.txid);
  if (!id || !t.currency || t.amount === undefined) return null;
  return {
    venue,
    direction,
    provider_id: id,
    asset: t.currency,
    // The exchange's own decimal text when it gives one (ccxt's number may round).
    amount: str(t.info?.amount) ?? String(t.amount),
    network: str(t.info?.network) ?? str(t.network),
    tx_id: str(t.txid),
    address: str(t.address),
    provider_status: str(t.info?.status) ?? str(t.status),
    occurred_at: new Date(t.timestamp ?? Date.now()),
  };
}

const made = new WeakMap<FerryConfig, Map<string, CexAccount>>();

function accountFromConfig(deps: IngestDeps, venue: string): CexAccount | null {
  let cache = made.get(deps.config);
  if (!cache) made.set(deps.config, (cache = new Map()));
  const hit = cache.get(venue);
  if (hit) return hit;
  const entry = deps.config.file.cex.accounts.find((a) => a.key === venue);
  if (!entry) return null;
  const account = createCexAccount(entry, deps.env ?? process.env);
  cache.set(venue, account);
  return account;
}
