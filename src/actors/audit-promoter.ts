import type { Pool } from '../persistence/db.ts';
import { promoteAuditBatch } from '../persistence/audit.ts';

const BATCH = 500;
// A burst larger than this waits for the next tick rather than holding one run open indefinitely.
const MAX_BATCHES_PER_RUN = 20;

/**
 * One run of the audit promoter (the loop runner calls it every second): moves pending outbox rows
 * onto the hash chain, batch after batch until the outbox is drained or the run's cap is reached.
 * Returns how many rows it promoted.
 */
export async function promoteAudit(pool: Pool): Promise<number> {
  let total = 0;
  for (let i = 0; i < MAX_BATCHES_PER_RUN; i++) {
    const moved = await promoteAuditBatch(pool, BATCH);
    total += moved;
    if (moved < BATCH) break;
  }
  return total;
}
