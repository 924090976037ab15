/** A test file's API tokens, made straight in the database. */
import type { Queryable } from '../../src/persistence/db.ts';
import { createToken, type CreatedToken, type Role } from '../../src/persistence/tokens.ts';

export type TokenSpec = Role | { name?: string; role: Role; principal?: string };

/**
 * One token per key: `{ viewer: 'viewer' }` makes a viewer token named viewer-1 (a principal of that
 * name); `{ approverAgain: { name: 'approver-1.again', role: 'approver', principal: 'approver-1' } }`
 * a second token of an existing principal. Made in the order given.
 */
export async function createTokens<K extends string>(pool: Queryable, spec: Record<K, TokenSpec>): Promise<Record<K, CreatedToken>> {
  const out = {} as Record<K, CreatedToken>;
  for (const [key, s] of Object.entries(spec) as Array<[K, TokenSpec]>) {
    const { name, role, principal } = typeof s === 'string' ? { role: s, name: undefined, principal: undefined } : s;
    out[key] = await createToken(pool, { name: name ?? `${role}-1`, role, ...(principal ? { principal } : {}) });
  }
  return out;
}
