import type { Pool } from '../persistence/db.ts';
import { promoteAuditBatch } from '../persistence/audit.ts';

export interface AuditPromotionOptions {
  /** Outbox rows per batch (FERRY_AUDIT_PROMOTER_BATCH_SIZE). Default 500. */
  batchSize?: number;
  /** Batches per run, the run's budget (FERRY_AUDIT_PROMOTER_MAX_BATCHES). Default 20. */
  maxBatches?: number;
}

export interface AuditPromotionReport {
  promoted: number;
  batches: number;
  /** The run stopped at its batch budget with rows still waiting; the next run continues. */
  budgetExhausted: boolean;
}

/**
 * One run of the audit promoter sweep: moves pending outbox rows onto the hash chain, batch after
 * batch until the outbox is drained or the run's batch budget is spent (a burst larger than that
 * waits for the next run rather than holding one run open indefinitely).
 */
export async function promoteAuditRun(pool: Pool, opts: AuditPromotionOptions = {}): Promise<AuditPromotionReport> {
  const batchSize = opts.batchSize ?? 500;
  const maxBatches = opts.maxBatches ?? 20;
  const report: AuditPromotionReport = { promoted: 0, batches: 0, budgetExhausted: false };
  for (;;) {
    if (report.batches >= maxBatches) {
      report.budgetExhausted = true;
      break;
    }
    const moved = await promoteAuditBatch(pool, batchSize);
    report.batches++;
    report.promoted += moved;
    if (moved < batchSize) break;
  }
  return report;
}

/** promoteAuditRun's row count, for callers that only need that. */
export async function promoteAudit(pool: Pool, opts: AuditPromotionOptions = {}): Promise<number> {
  return (await promoteAuditRun(pool, opts)).promoted;
}
