import { approvalExpiryTotal } from '../metrics.ts';
import { writeAudit } from '../persistence/audit.ts';
import { claimForExpiry, expiredCandidates } from '../persistence/claims.ts';
import { withTransaction } from '../persistence/db.ts';
import type { WorkerDeps } from '../actors/execution.ts';
import { nowIso } from '../actors/execution.ts';
import { deliverMovementEvent } from '../durable/transition.ts';
import { runBudget } from '../run-budget.ts';

/**
 * Approval expiry: PENDING_APPROVAL movements past expires_at become EXPIRED (with a
 * request_expired callback), at most `batch` per run and within a time budget. Approve and expire
 * race the way finalize and challenge do in the reference: each locks the movement row, the machine
 * re-checks the state and the deadline, and exactly one of them wins; the loser sees
 * INVALID_TRANSITION (the approver) or counts a skip (the sweep). An expiry writes its audit event
 * in the same transaction as the transition and the callback: all three or none.
 */
export interface ExpiryReport {
  expired: number;
  skipped: number;
  budgetExhausted: boolean;
}


export async function expirePendingMovements(
  deps: Pick<WorkerDeps, 'pool' | 'config' | 'transitions'>,
  opts: { now?: () => number } = {},
): Promise<ExpiryReport> {
  // The run-time budget is measured on this clock (tests inject one; no sleeps).
  const budget = runBudget(deps.config.expirationMaxRunMs, opts.now);
  const report: ExpiryReport = { expired: 0, skipped: 0, budgetExhausted: false };
  const ids = await expiredCandidates(deps.pool, deps.config.expirationBatchSize);
  for (const id of ids) {
    if (budget.spent()) {
      report.budgetExhausted = true;
      break;
    }
    const done = await withTransaction(deps.pool, async (client) => {
      const claimed = await claimForExpiry(client, id);
      if (!claimed) return false;
      const moved = await deliverMovementEvent(
        client,
        id,
        { type: 'EXPIRE', at: nowIso() },
        { actor: 'worker:expiry', deps: deps.transitions, ifAccepted: true },
      );
      if (moved === null) return false;
      await writeAudit(client, {
        actor: 'worker:expiry',
        action: 'movement.expire',
        entity_type: 'movement',
        entity_id: id,
        details: { expires_at: claimed.expires_at ? new Date(claimed.expires_at).toISOString() : null },
      });
      return true;
    });
    if (done) report.expired++;
    else report.skipped++;
  }
  if (!report.budgetExhausted && ids.length >= deps.config.expirationBatchSize) report.budgetExhausted = true;
  approvalExpiryTotal.inc({ result: 'expired' }, report.expired);
  approvalExpiryTotal.inc({ result: 'skipped' }, report.skipped);
  return report;
}
