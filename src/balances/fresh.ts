import { recordFetchError, recordSnapshot, syncWatchEntries, type WatchKey } from '../persistence/balances.ts';
import { balanceFetchErrorsTotal, balanceSnapshotsTotal } from '../metrics.ts';
import { balanceErrorCode } from './errors.ts';
import type { BalanceSweepDeps } from './sweep.ts';
import type { BalanceTarget } from './watch.ts';

/**
 * Fresh balances (GET /v3/balances?fresh=true, `ferry balances --fresh`): the watched balances that
 * match a filter are fetched now rather than read from the last snapshot. At most `concurrency`
 * fetches run at once and each has `timeoutMs`; a source that fails or does not answer in time is
 * reported per balance (its class of error, and the last good amount stays, stale), never as a
 * failure of the whole request. A success is recorded like the sweep's, in the same append-only
 * history; no transaction is open while a source is asked.
 */

export type FreshStatus = 'fetched' | 'failed' | 'timed_out';

export interface FreshResult {
  status: FreshStatus;
  /** The class of error when not fetched ('FRESH_TIMEOUT' when the source did not answer in time). */
  code: string | null;
}

export interface FreshFilter {
  chain?: string;
  wallet?: string;
  asset?: string;
}

export interface FreshOptions {
  concurrency: number;
  timeoutMs: number;
  /** At most this many balances are fetched (the page the caller asked for). */
  limit: number;
}

export const keyOf = (k: WatchKey) => `${k.chain}\u0000${k.wallet}\u0000${k.asset}`;

export function matchesFilter(t: BalanceTarget, f: FreshFilter): boolean {
  if (f.chain && t.chain !== f.chain) return false;
  if (f.wallet && t.wallet !== f.wallet) return false;
  if (f.asset && t.asset !== f.asset.toLowerCase() && (t.symbol ?? '').toUpperCase() !== f.asset.toUpperCase()) return false;
  return true;
}

class FreshTimeout extends Error {}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new FreshTimeout()), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/** Fetches the matching watched balances now; answers one result per balance, keyed by keyOf. */
export async function fetchFreshBalances(deps: BalanceSweepDeps, filter: FreshFilter, opts: FreshOptions): Promise<Map<string, FreshResult>> {
  const targets = (await deps.targets()).filter((t) => matchesFilter(t, filter));
  targets.sort((a, b) => keyOf(a).localeCompare(keyOf(b)));
  const chosen = targets.slice(0, opts.limit);
  await syncWatchEntries(deps.pool, chosen);
  const results = new Map<string, FreshResult>();
  let next = 0;
  const worker = async () => {
    while (next < chosen.length) {
      const target = chosen[next++]!;
      const fetcher = deps.fetchers.get(target.fetcher);
      let result: FreshResult;
      try {
        if (!fetcher) throw Object.assign(new Error('no fetcher'), { freshCode: 'FETCHER_NOT_REGISTERED' });
        const fetched = await withTimeout(fetcher.fetch(target), opts.timeoutMs);
        await recordSnapshot(deps.pool, target, fetched.amount, fetched.decimals);
        balanceSnapshotsTotal.inc({ chain: target.chain });
        result = { status: 'fetched', code: null };
      } catch (err) {
        const timedOut = err instanceof FreshTimeout;
        const code = timedOut ? 'FRESH_TIMEOUT' : ((err as { freshCode?: string }).freshCode ?? balanceErrorCode(err));
        deps.log.warn({ worker: 'balances_fresh', chain: target.chain, wallet: target.wallet, asset: target.asset, code }, 'fresh balance fetch failed');
        await recordFetchError(deps.pool, target, code);
        balanceFetchErrorsTotal.inc({ chain: target.chain, code });
        result = { status: timedOut ? 'timed_out' : 'failed', code };
      }
      results.set(keyOf(target), result);
    }
  };
  await Promise.all(Array.from({ length: Math.min(opts.concurrency, chosen.length) }, worker));
  return results;
}
