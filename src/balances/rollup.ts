import type { FerryConfig } from '../config.ts';
import { deleteExpiredRollups, foldSnapshotsIntoRollups } from '../persistence/balances.ts';
import type { Pool } from '../persistence/db.ts';
import { runBudget } from '../run-budget.ts';

/**
 * The balance history rollup (sidecar `balance_history_rollup`, on by default): folds balance
 * snapshots into hourly and daily buckets (min, max, last amount, number of samples) that outlive
 * the snapshots' own retention, for charts (GET /v3/balances/history, /ui). Each snapshot is folded
 * once (persistence/balances.ts keeps the last id folded); a run folds batches until none is left
 * or its budget is spent, then deletes buckets past FERRY_BALANCE_HISTORY_*_RETENTION_DAYS.
 */

export interface RollupRunResult {
  folded: number;
  deleted: number;
  budgetExhausted: boolean;
}

/** Snapshots this young wait for the next run: one written by a statement still committing keeps its place. */
const SETTLE_SECONDS = 5;

export async function runBalanceHistoryRollup(
  pool: Pool,
  config: Pick<FerryConfig, 'balanceHistoryHourlyRetentionDays' | 'balanceHistoryDailyRetentionDays'>,
  opts: { batchSize: number; maxRunMs: number; settleSeconds?: number },
): Promise<RollupRunResult> {
  const budget = runBudget(opts.maxRunMs);
  let folded = 0;
  let budgetExhausted = false;
  for (;;) {
    const r = await foldSnapshotsIntoRollups(pool, { limit: opts.batchSize, settleSeconds: opts.settleSeconds ?? SETTLE_SECONDS });
    folded += r.folded;
    if (!r.more) break;
    if (budget.spent()) {
      budgetExhausted = true;
      break;
    }
  }
  const deleted = await deleteExpiredRollups(pool, {
    hourlyDays: config.balanceHistoryHourlyRetentionDays,
    dailyDays: config.balanceHistoryDailyRetentionDays,
  });
  return { folded, deleted, budgetExhausted };
}
