import type { Pool } from '../../persistence/db.ts';
import { recordCalls, type SimCallEntry } from '../../persistence/sim-ledger.ts';

/**
 * The simulated provider's group commit. Calls that arrive while a ledger write is in flight are
 * written together by the next one (one statement, one commit), and each caller is answered only
 * when the commit holding its row is done: a call is still durable the moment it returns. An idle
 * ledger writes a lone call at once, so low load adds no latency.
 */
export class LedgerBatcher {
  #pending: { entry: SimCallEntry; resolve: (v: { priorCalls: number }) => void; reject: (e: unknown) => void }[] = [];
  #inFlight = 0;

  constructor(
    private readonly pool: Pool,
    /** Ledger writes in flight at once (at most the provider pool's size). */
    private readonly maxInFlight = 2,
    private readonly maxBatch = 256,
  ) {}

  record(entry: SimCallEntry): Promise<{ priorCalls: number }> {
    return new Promise((resolve, reject) => {
      this.#pending.push({ entry, resolve, reject });
      this.#pump();
    });
  }

  #pump(): void {
    while (this.#inFlight < this.maxInFlight && this.#pending.length > 0) {
      const batch = this.#pending.splice(0, this.maxBatch);
      this.#inFlight++;
      recordCalls(
        this.pool,
        batch.map((b) => b.entry),
      )
        .then(
          (results) => batch.forEach((b, i) => b.resolve(results[i])),
          (err) => batch.forEach((b) => b.reject(err)),
        )
        .finally(() => {
          this.#inFlight--;
          this.#pump();
        });
    }
  }
}
