import type { FerryConfig } from '../config.ts';
import type { Logger } from '../log.ts';
import { lanes as allLanes, type LaneList } from '../executors/lanes.ts';
import { balanceFetchErrorsTotal, balanceSnapshotsTotal, balanceSweepBudgetExhaustedTotal } from '../metrics.ts';
import {
  claimDueWatchEntries,
  deleteExpiredBalances,
  recordFetchError,
  recordSnapshot,
  releaseWatchEntries,
  syncWatchEntries,
  type WatchKey,
} from '../persistence/balances.ts';
import type { Pool } from '../persistence/db.ts';
import { balanceClientFor, type BalanceChain } from './clients.ts';
import { CHAIN_WIDE_ERRORS, balanceErrorCode, type BalanceErrorCode } from './errors.ts';
import { EvmChainClients, createBalanceFetchers, type BalanceFetcherRegistry } from './fetchers.ts';
import { buildWatchPlan, type BalanceTarget, type LegacyChain } from './watch.ts';
import { runBudget } from '../run-budget.ts';

/**
 * The balance snapshot sweep (reference runtime §7, `balance_snapshot`): each run claims the watched
 * balances that are due, fetches them, records each result, then deletes what is past retention.
 *
 * - A run handles at most `batchSize` balances and stops starting new fetches once `maxRunMs` has
 *   passed (0: no budget); what it claimed but did not fetch is released, so the next run (at once,
 *   since this one handled items) continues with it.
 * - Chains are fetched concurrently, one balance at a time per chain. A failure is recorded on the
 *   balance it concerns as a class of error (errors.ts), never as text; a failure that says the
 *   chain's endpoint is unusable (unreachable, timing out, another chain) marks the chain's other
 *   balances in this run with the same class without asking again. Other chains go on.
 * - No transaction is open while a fetcher runs: the claim is a lease column, not a row lock.
 */

export interface BalanceSweepDeps {
  pool: Pool;
  log: Logger;
  fetchers: BalanceFetcherRegistry;
  /** The balances to watch (the configuration's, see watch.ts). */
  targets(): Promise<BalanceTarget[]>;
  /** A balance is due again this long after its last attempt. */
  intervalSeconds: number;
  retentionSeconds: number;
  /** Milliseconds, for the run budget (default performance.now). */
  clock?: () => number;
}

export interface BalanceSweepOptions {
  batchSize: number;
  /** 0: no budget. */
  maxRunMs: number;
}

export interface BalanceSweepResult {
  claimed: number;
  snapshots: number;
  errors: number;
  /** Claimed but given back unfetched because the budget ran out. */
  released: number;
  budgetExhausted: boolean;
  deleted: { snapshots: number; entries: number };
}

const keyOf = (k: WatchKey) => `${k.chain}\u0000${k.wallet}\u0000${k.asset}`;

export async function runBalanceSnapshotSweep(deps: BalanceSweepDeps, opts: BalanceSweepOptions): Promise<BalanceSweepResult> {
  const clock = deps.clock ?? (() => performance.now());
  const runTime = runBudget(opts.maxRunMs, clock);
  // A run always starts at least one fetch, so a budget smaller than one call still makes progress.
  let begun = 0;
  const overBudget = () => begun > 0 && runTime.spent();
  const result: BalanceSweepResult = { claimed: 0, snapshots: 0, errors: 0, released: 0, budgetExhausted: false, deleted: { snapshots: 0, entries: 0 } };

  const targets = await deps.targets();
  const byKey = new Map(targets.map((t) => [keyOf(t), t]));
  await syncWatchEntries(deps.pool, targets);
  // The lease outlives the run's budget by one slow RPC call; a dead process's leases expire.
  const leaseMs = (opts.maxRunMs > 0 ? opts.maxRunMs : 10 * 60_000) + 60_000;
  const claimed = await claimDueWatchEntries(deps.pool, targets, { limit: opts.batchSize, intervalSeconds: deps.intervalSeconds, leaseMs });
  result.claimed = claimed.length;

  const perChain = new Map<string, BalanceTarget[]>();
  for (const row of claimed) {
    const target = byKey.get(keyOf(row));
    if (!target) continue;
    perChain.set(target.chain, [...(perChain.get(target.chain) ?? []), target]);
  }

  const unfetched: WatchKey[] = [];
  const failed = async (target: BalanceTarget, code: BalanceErrorCode) => {
    await recordFetchError(deps.pool, target, code);
    result.errors++;
    balanceFetchErrorsTotal.inc({ chain: target.chain, code });
  };

  await Promise.all(
    [...perChain.values()].map(async (list) => {
      let chainDown: BalanceErrorCode | null = null;
      for (const target of list) {
        if (overBudget()) {
          result.budgetExhausted = true;
          unfetched.push(target);
          continue;
        }
        if (chainDown) {
          await failed(target, chainDown);
          continue;
        }
        begun++;
        const fetcher = deps.fetchers.get(target.fetcher);
        let fetched;
        try {
          if (!fetcher) {
            await failed(target, 'FETCHER_NOT_REGISTERED');
            continue;
          }
          fetched = await fetcher.fetch(target);
        } catch (err) {
          const code = balanceErrorCode(err);
          // The code only: upstream error text names the RPC URL.
          deps.log.warn({ worker: 'balance_snapshot', chain: target.chain, wallet: target.wallet, asset: target.asset, code }, 'balance fetch failed');
          await failed(target, code);
          if (CHAIN_WIDE_ERRORS.has(code)) chainDown = code;
          continue;
        }
        await recordSnapshot(deps.pool, target, fetched.amount, fetched.decimals);
        result.snapshots++;
        balanceSnapshotsTotal.inc({ chain: target.chain });
      }
    }),
  );

  await releaseWatchEntries(deps.pool, unfetched);
  result.released = unfetched.length;
  if (result.budgetExhausted) balanceSweepBudgetExhaustedTotal.inc();
  result.deleted = await deleteExpiredBalances(deps.pool, deps.retentionSeconds);
  return result;
}

export function balanceSweepOptions(config: Pick<FerryConfig, 'balanceSnapshotBatchSize' | 'balanceSnapshotMaxRunMs'>): BalanceSweepOptions {
  return { batchSize: config.balanceSnapshotBatchSize, maxRunMs: config.balanceSnapshotMaxRunMs };
}

/**
 * The sweep's dependencies from Ferry's configuration. The legacy single chain
 * (FERRY_EVM_RPC_URL + FERRY_EVM_SIGNER_KEY) has no configured chain id: it is asked for one, and
 * its `evm_local` balances join once it answers.
 */
export function createBalanceSnapshotDeps(opts: {
  pool: Pool;
  config: FerryConfig;
  log: Logger;
  env?: NodeJS.ProcessEnv;
  /** Replaces the client factory (tests; the lane's shared chain clients). */
  clientFor?: (chain: BalanceChain) => ReturnType<typeof balanceClientFor>;
  /** The lanes whose balance fetchers are used (default: every lane). */
  lanes?: LaneList;
}): BalanceSweepDeps {
  const { pool, config, log } = opts;
  const env = opts.env ?? process.env;
  const clientFor = opts.clientFor ?? balanceClientFor;
  const clients = new EvmChainClients(new Map(), clientFor);
  const lanes = opts.lanes ?? allLanes;
  const legacyUrl = config.evmRpcUrl && config.evmSignerKey ? config.evmRpcUrl : null;
  let legacy: LegacyChain | null = null;
  let plan: ReturnType<typeof buildWatchPlan> | null = null;

  return {
    pool,
    log,
    fetchers: createBalanceFetchers(clients, lanes),
    // Due a little before a full interval has passed: the loop, woken early by its jitter, still
    // finds them due, so each balance is fetched once per interval rather than every other one.
    intervalSeconds: config.balanceSnapshotIntervalSeconds * 0.8,
    retentionSeconds: config.balanceSnapshotRetentionSeconds,
    async targets() {
      if (legacyUrl && !legacy) {
        try {
          const chainId = await clientFor({ chain_id: 0, rpc_url: legacyUrl }).getChainId();
          legacy = { chainId, rpcUrl: legacyUrl, signerPrivateKey: config.evmSignerKey! };
          plan = null;
        } catch (err) {
          const code = balanceErrorCode(err);
          balanceFetchErrorsTotal.inc({ chain: 'legacy', code });
          log.warn({ worker: 'balance_snapshot', code }, 'balance snapshots: the FERRY_EVM_RPC_URL chain did not tell its chain id; its balances wait');
        }
      }
      // Built once (and again when the legacy chain joins): deriving addresses from keys is not free.
      if (!plan) {
        plan = buildWatchPlan({ file: config.file, legacy, env, lanes });
        clients.update(plan.chains);
        for (const s of plan.skipped) log.warn({ worker: 'balance_snapshot', signer: s.signer, reason: s.reason }, 'balance snapshots: signer not watched');
      }
      return plan.targets;
    },
  };
}
