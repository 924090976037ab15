import type { Queryable } from '../persistence/db.ts';
import { tokenNames } from '../persistence/tokens.ts';

/**
 * Who acted, as a person reads it. Rows keep a stable actor id (`token:<uuid>` for an API caller, a
 * worker's name such as `expiry` for the runtime); views show it under `actor` (or `created_by`,
 * `decided_by`, `by`) for machines, and its display name beside it under `*_name`.
 *
 * This is the one place that turns an actor id into a name: today a token's name, later the name of
 * the principal owning the token. Every view (/v3, /inspect, the page, the CLI through them) gets its
 * names from here.
 */

const TOKEN_ACTOR = /^token:(.+)$/;

/** The actor id of an API caller authenticated by this token. */
export function tokenActor(tokenId: string): string {
  return `token:${tokenId}`;
}

/** An actor id's display name: the token's name for an API caller, the id itself for anything else. */
export type ActorNames = (actor: string) => string;

/** Without a database at hand: every actor shown by its id. */
export const actorIdsOnly: ActorNames = (actor) => actor;

/** Resolves the names of these actors (one query), for the views of one answer. */
export async function actorNames(db: Queryable, actors: Iterable<string | null | undefined>): Promise<ActorNames> {
  const tokenIds = new Set<string>();
  for (const actor of actors) {
    const id = actor ? TOKEN_ACTOR.exec(actor)?.[1] : undefined;
    if (id) tokenIds.add(id);
  }
  if (tokenIds.size === 0) return actorIdsOnly;
  const names = await tokenNames(db, tokenIds);
  return (actor) => {
    const id = TOKEN_ACTOR.exec(actor)?.[1];
    return (id && names.get(id)) || actor;
  };
}

/** Every actor a movement row names: its creator, its decider and its approvers. */
export function movementActors(r: { created_by: string; decided_by: string | null; approvals: unknown }): string[] {
  const approvals = Array.isArray(r.approvals) ? (r.approvals as Array<{ by?: unknown }>) : [];
  return [r.created_by, r.decided_by ?? '', ...approvals.map((a) => (typeof a.by === 'string' ? a.by : ''))].filter(Boolean);
}
