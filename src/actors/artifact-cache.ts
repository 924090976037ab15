import { artifactsOfNodes, type NewArtifact } from '../persistence/artifacts.ts';
import type { Queryable } from '../persistence/db.ts';
import type { LockedMovement } from '../persistence/group-commit.ts';
import type { BatchResult, NodeItem } from '../durable/transition.ts';

/**
 * The artifacts of the movements a movement actor holds (movement-actor.ts), kept in memory between
 * its steps, so that building a node's execution context does not read them again for every node.
 *
 * Each movement's entry is valid for one write_version: the version of the rows it was read with,
 * carried forward by the actor's own commits. Every write of a movement's rows moves its
 * write_version, and every artifact Ferry stores is written by such a commit (its node's
 * transition) or by the actor itself (a refused fee bump, after which the actor forgets the entry).
 * So an entry whose version is not the rows' version may be missing another writer's artifacts, and
 * is read again, in one statement for the movement's nodes.
 */
export class ArtifactCache {
  readonly #byMovement = new Map<string, { version: number; rows: NewArtifact[] }>();

  /** The artifacts of these movements' nodes as of the held rows: from memory, or read once. */
  async of(db: Queryable, movements: readonly LockedMovement[]): Promise<NewArtifact[]> {
    const out: NewArtifact[] = [];
    const missing: LockedMovement[] = [];
    for (const m of movements) {
      const entry = this.#byMovement.get(m.movement.id);
      if (entry && entry.version === Number(m.movement.write_version)) out.push(...entry.rows);
      else missing.push(m);
    }
    if (missing.length === 0) return out;
    const read = await artifactsOfNodes(db, missing.flatMap((m) => m.nodes.map((n) => n.id)));
    for (const m of missing) {
      const rows = read.filter((a) => a.request_id === m.movement.id);
      this.#byMovement.set(m.movement.id, { version: Number(m.movement.write_version), rows });
      out.push(...rows);
    }
    return out;
  }

  /**
   * After a commit of `items` over rows at the `before` versions: an entry whose movement the commit
   * moved by exactly one version (no other writer came between) gains the artifacts the accepted
   * items stored; any other entry the commit touched is forgotten.
   */
  committed(before: ReadonlyMap<string, number>, items: readonly NodeItem[], result: BatchResult): void {
    for (const [movementId, version] of before) {
      const entry = this.#byMovement.get(movementId);
      if (!entry) continue;
      let after: number;
      try {
        after = Number(result.movementOf(movementId).write_version);
      } catch {
        this.#byMovement.delete(movementId);
        continue;
      }
      if (entry.version !== version || after !== version + 1) {
        this.#byMovement.delete(movementId);
        continue;
      }
      items.forEach((item, i) => {
        const r = result.nodes[i];
        if (r instanceof Error || !item.artifacts) return;
        for (const a of item.artifacts) if (a.request_id === movementId) entry.rows.push(a);
      });
      entry.version = after;
    }
  }

  /** Records that the movement's nodes hold no artifact as of these rows (the lease read says so). */
  knownEmpty(m: LockedMovement): void {
    this.#byMovement.set(m.movement.id, { version: Number(m.movement.write_version), rows: [] });
  }

  forget(movementId: string): void {
    this.#byMovement.delete(movementId);
  }
}

/** The write_version of each movement among rows about to be written over. */
export function versionsOf(movements: readonly LockedMovement[]): Map<string, number> {
  return new Map(movements.map((m) => [m.movement.id, Number(m.movement.write_version)]));
}
