import type { Queryable } from '../persistence/db.ts';
import { namesOfActors, parseActor, principalActor, tokenActor } from '../persistence/principals.ts';

/**
 * Who acted, as a person reads it. Rows keep a stable actor id (`principal:<uuid>` for an API caller,
 * `token:<uuid>` on rows written before principals existed, a worker's name such as `expiry` for the
 * runtime, `cli:<user>` for an operator at the CLI); views show it under `actor` (or `created_by`,
 * `decided_by`, `by`) for machines, and its display name beside it under `*_name`.
 *
 * This is the one place that turns an actor id into a name: the principal's name, for both forms of
 * an API caller (a token id resolves to the principal owning the token). Every view (/v3, /inspect,
 * the page, the CLI through them) gets its names from here.
 */

export { principalActor, tokenActor };

/** An actor id's display name: the principal's name for an API caller, the id itself for anything else. */
export type ActorNames = (actor: string) => string;

/** Without a database at hand: every actor shown by its id. */
export const actorIdsOnly: ActorNames = (actor) => actor;

/** Resolves the names of these actors (one query), for the views of one answer. */
export async function actorNames(db: Queryable, actors: Iterable<string | null | undefined>): Promise<ActorNames> {
  const named = new Set<string>();
  for (const actor of actors) if (actor && parseActor(actor)) named.add(actor);
  if (named.size === 0) return actorIdsOnly;
  const names = await namesOfActors(db, named);
  return (actor) => names.get(actor) ?? actor;
}

/** Every actor a movement row names: its creator, its decider and its approvers. */
export function movementActors(r: { created_by: string; decided_by: string | null; approvals: unknown }): string[] {
  const approvals = Array.isArray(r.approvals) ? (r.approvals as Array<{ by?: unknown }>) : [];
  return [r.created_by, r.decided_by ?? '', ...approvals.map((a) => (typeof a.by === 'string' ? a.by : ''))].filter(Boolean);
}
