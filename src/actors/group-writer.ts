import { TransitionConflictError } from '../errors.ts';
import type { Pool } from '../persistence/db.ts';
import type { LockedMovement } from '../persistence/group-commit.ts';
import { Batch, batchResult, covers, deliverHeld, flushHeld, Pending, type BatchOptions, type BatchResult, type MovementItem, type NodeItem, type Refusal } from '../durable/transition.ts';

/**
 * The group writer of one process in the actor runtime: it merges the writes its movement actors
 * make over their held rows (deliverHeld) into one group statement per flush.
 *
 * A write goes out at once while fewer than `inFlight` flushes are running, so a lone write (low
 * load) costs exactly what deliverHeld does. Writes that arrive while the flushes are busy wait for
 * the next one and go out together: one statement for all of them, each movement fenced by its own
 * write_version. The statement is all or nothing (persistence/group-commit.ts), so when one of the
 * movements was written since its actor read it, the merged write is refused whole, and each write
 * of that flush is then made on its own: only the fenced-out one is refused.
 *
 * Writes are merged only with writes of the same actor label and carrying rule (claimUnblocked set
 * or not), and only when their movements are distinct (one actor per movement makes that the rule).
 */

interface Queued {
  items: { movements?: MovementItem[]; nodes?: NodeItem[] };
  opts: BatchOptions & { held: LockedMovement[] };
  resolve: (r: BatchResult) => void;
  reject: (err: unknown) => void;
}

export class GroupWriter {
  readonly #queue: Queued[] = [];
  #running = 0;

  constructor(
    private readonly pool: Pool,
    private readonly inFlight = 2,
  ) {}

  write(items: { movements?: MovementItem[]; nodes?: NodeItem[] }, opts: BatchOptions & { held: LockedMovement[] }): Promise<BatchResult> {
    if (opts.held.length !== 1 || !covers(opts.held, items.movements ?? [], items.nodes ?? [])) return deliverHeld(this.pool, items, opts);
    return new Promise((resolve, reject) => {
      this.#queue.push({ items, opts, resolve, reject });
      this.#pump();
    });
  }

  #pump(): void {
    while (this.#running < this.inFlight && this.#queue.length > 0) {
      const first = this.#queue[0];
      const key = groupKey(first.opts);
      const seen = new Set<string>();
      const group: Queued[] = [];
      for (let i = 0; i < this.#queue.length; ) {
        const q = this.#queue[i];
        const id = q.opts.held[0].movement.id;
        if (groupKey(q.opts) === key && !seen.has(id)) {
          seen.add(id);
          group.push(q);
          this.#queue.splice(i, 1);
        } else i++;
      }
      this.#running++;
      void this.#flush(group).finally(() => {
        this.#running--;
        this.#pump();
      });
    }
  }

  async #flush(group: Queued[]): Promise<void> {
    if (group.length === 1) return settle(group[0], () => deliverHeld(this.pool, group[0].items, group[0].opts));
    const opts = group[0].opts;
    const b = new Batch({ actor: opts.actor, deps: opts.deps, claimUnblocked: opts.claimUnblocked });
    for (const q of group) for (const m of q.opts.held) b.load(m.movement, m.nodes, m.movement.write_version);
    const per = group.map((q) => ({
      movements: (q.items.movements ?? []).map((i) => b.movementEvent(i.movementId, i.event, i.actor ?? q.opts.actor)) as (Pending | Refusal)[],
      nodes: (q.items.nodes ?? []).map((i) => b.nodeEvent(i, i.actor ?? q.opts.actor)) as (Pending | Refusal)[],
    }));
    b.derive();
    b.carryOnward();
    try {
      await flushHeld(this.pool, b);
    } catch (err) {
      if (!(err instanceof TransitionConflictError)) {
        for (const q of group) q.reject(err);
        return;
      }
      // One of them was fenced out: each on its own, so only that one is refused.
      await Promise.all(group.map((q) => settle(q, () => deliverHeld(this.pool, q.items, q.opts))));
      return;
    }
    group.forEach((q, i) => q.resolve(batchResult(b, per[i].movements, per[i].nodes, new Set([q.opts.held[0].movement.id]))));
  }
}

const groupKey = (opts: BatchOptions) => `${opts.actor}|${opts.claimUnblocked ? 'carry' : 'stay'}`;

async function settle(q: Queued, fn: () => Promise<BatchResult>): Promise<void> {
  try {
    q.resolve(await fn());
  } catch (err) {
    q.reject(err);
  }
}
