import { NotFoundError, ValidationError } from '../errors.ts';
import { isUuid } from '../ids.ts';
import type { Queryable } from './db.ts';

/**
 * Principals: who acts, a person or a service. A token is one of a principal's credentials; rows
 * record the principal (`principal:<uuid>`), so four-eyes and quorum count principals, not tokens.
 * Rows written before principals existed name a token (`token:<uuid>`); both forms resolve to the
 * same principal here (see actorAliases), so old rows keep their meaning.
 */

export const principalKinds = ['person', 'service'] as const;
export type PrincipalKind = (typeof principalKinds)[number];

export interface PrincipalInfo {
  id: string;
  name: string;
  kind: PrincipalKind;
  created_at: Date;
  disabled_at: Date | null;
}

/** Names of principals and tokens share one shape (a token created without a principal gives it its name). */
export const NAME_SHAPE = /^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$/;
const NAME_RULE = '1-64 characters: letters, digits and . _ @ - (starting with a letter or digit)';

const PRINCIPAL_ACTOR = /^principal:([0-9a-f-]{36})$/i;
const TOKEN_ACTOR = /^token:([0-9a-f-]{36})$/i;

/** The actor id recorded for whatever a principal does. */
export function principalActor(principalId: string): string {
  return `principal:${principalId}`;
}

/** The actor id rows written before principals existed carry for an API caller. */
export function tokenActor(tokenId: string): string {
  return `token:${tokenId}`;
}

/** What an actor id names: a principal, a token (older rows), or neither (a worker, `cli:<user>`). */
export function parseActor(actor: string): { principalId: string } | { tokenId: string } | null {
  const p = PRINCIPAL_ACTOR.exec(actor)?.[1];
  if (p && isUuid(p)) return { principalId: p.toLowerCase() };
  const t = TOKEN_ACTOR.exec(actor)?.[1];
  if (t && isUuid(t)) return { tokenId: t.toLowerCase() };
  return null;
}

export function assertName(what: string, name: unknown): asserts name is string {
  if (typeof name !== 'string' || !NAME_SHAPE.test(name)) {
    throw new ValidationError(`${what} name must be ${NAME_RULE}`, { field: 'name' });
  }
  if (isUuid(name)) {
    // Commands take an id or a name; a name shaped like an id would be ambiguous.
    throw new ValidationError(`${what} name must not look like an id (UUID)`, { field: 'name' });
  }
}

export function isPrincipalKind(value: unknown): value is PrincipalKind {
  return typeof value === 'string' && (principalKinds as readonly string[]).includes(value);
}

const COLUMNS = 'id, name, kind, created_at, disabled_at';

export async function insertPrincipal(client: Queryable, input: { name: string; kind: string }): Promise<PrincipalInfo> {
  assertName('principal', input.name);
  if (!isPrincipalKind(input.kind)) {
    throw new ValidationError(`unknown principal kind ${JSON.stringify(input.kind)}; expected one of ${principalKinds.join(', ')}`, {
      field: 'kind',
      allowed: [...principalKinds],
    });
  }
  const { rows } = await client.query<PrincipalInfo>(
    `INSERT INTO principals (name, kind) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING RETURNING ${COLUMNS}`,
    [input.name, input.kind],
  );
  if (rows.length === 0) throw new ValidationError(`a principal named ${input.name} already exists`, { field: 'name' });
  return rows[0];
}

/** The principal of that name, created as a person when there is none (tokens created by name alone). */
export async function ensurePrincipal(client: Queryable, name: string): Promise<{ principal: PrincipalInfo; created: boolean }> {
  assertName('principal', name);
  const inserted = await client.query<PrincipalInfo>(
    `INSERT INTO principals (name, kind) VALUES ($1, 'person') ON CONFLICT (name) DO NOTHING RETURNING ${COLUMNS}`,
    [name],
  );
  if (inserted.rows[0]) return { principal: inserted.rows[0], created: true };
  return { principal: (await findPrincipal(client, name))!, created: false };
}

/** The principal with this id or name, disabled ones included; null when there is none. */
export async function findPrincipal(db: Queryable, idOrName: string): Promise<PrincipalInfo | null> {
  const byId = isUuid(idOrName);
  const { rows } = await db.query<PrincipalInfo>(
    `SELECT ${COLUMNS} FROM principals WHERE ${byId ? 'id = $1::uuid' : 'name = $1'}`,
    [idOrName],
  );
  return rows[0] ?? null;
}

/** Every principal by name; disabled ones only when asked for. */
export async function selectPrincipals(db: Queryable, opts: { includeDisabled?: boolean } = {}): Promise<PrincipalInfo[]> {
  const { rows } = await db.query<PrincipalInfo>(
    `SELECT ${COLUMNS} FROM principals WHERE $1::boolean OR disabled_at IS NULL ORDER BY name`,
    [opts.includeDisabled === true],
  );
  return rows;
}

/**
 * Disables the principal with this id or name: every token it holds is refused from now on. A
 * principal already disabled counts as not found: there is nothing left to disable.
 */
export async function markPrincipalDisabled(client: Queryable, idOrName: string): Promise<PrincipalInfo> {
  const byId = isUuid(idOrName);
  const { rows } = await client.query<PrincipalInfo>(
    `UPDATE principals SET disabled_at = now()
      WHERE disabled_at IS NULL AND ${byId ? 'id = $1::uuid' : 'name = $1'}
      RETURNING ${COLUMNS}`,
    [idOrName],
  );
  if (rows.length === 0) throw new NotFoundError('active principal', idOrName);
  return rows[0];
}

/**
 * Display names for actor ids: a principal's name for `principal:<id>`, and for `token:<id>` (rows
 * from before principals) the name of the principal owning that token. Revoked tokens and disabled
 * principals still name who acted. One query.
 */
export async function namesOfActors(db: Queryable, actors: Iterable<string>): Promise<Map<string, string>> {
  const principalIds = new Set<string>();
  const tokenIds = new Set<string>();
  const parsed = new Map<string, ReturnType<typeof parseActor>>();
  for (const actor of actors) {
    const p = parseActor(actor);
    if (!p) continue;
    parsed.set(actor, p);
    if ('principalId' in p) principalIds.add(p.principalId);
    else tokenIds.add(p.tokenId);
  }
  const out = new Map<string, string>();
  if (parsed.size === 0) return out;
  const { rows } = await db.query<{ kind: 'p' | 't'; id: string; name: string }>(
    `SELECT 'p' AS kind, id::text AS id, name FROM principals WHERE id = ANY($1::uuid[])
     UNION ALL
     SELECT 't', t.id::text, p.name FROM api_tokens t JOIN principals p ON p.id = t.principal_id WHERE t.id = ANY($2::uuid[])`,
    [[...principalIds], [...tokenIds]],
  );
  const byPrincipal = new Map(rows.filter((r) => r.kind === 'p').map((r) => [r.id, r.name]));
  const byToken = new Map(rows.filter((r) => r.kind === 't').map((r) => [r.id, r.name]));
  for (const [actor, p] of parsed) {
    const name = p && ('principalId' in p ? byPrincipal.get(p.principalId) : byToken.get(p.tokenId));
    if (name) out.set(actor, name);
  }
  return out;
}

/**
 * Every actor id that names the same principal as `actor`: `principal:<id>` and `token:<id>` of each
 * of its tokens (revoked ones included: they acted for it). An actor that names no principal (a worker,
 * `cli:<user>`) is only itself. Four-eyes, quorum, "own movement" and idempotency compare these sets,
 * so a row written by a token before principals existed still belongs to its principal.
 */
export async function actorAliases(db: Queryable, actor: string): Promise<string[]> {
  const p = parseActor(actor);
  if (!p) return [actor];
  const { rows } = await db.query<{ principal_id: string; token_ids: string[] | null }>(
    `SELECT p.id AS principal_id, array_agg(t.id::text) FILTER (WHERE t.id IS NOT NULL) AS token_ids
       FROM principals p LEFT JOIN api_tokens t ON t.principal_id = p.id
      WHERE p.id = ${'principalId' in p ? '$1::uuid' : '(SELECT principal_id FROM api_tokens WHERE id = $1::uuid)'}
      GROUP BY p.id`,
    ['principalId' in p ? p.principalId : p.tokenId],
  );
  const row = rows[0];
  if (!row) return [actor];
  return [...new Set([actor, principalActor(row.principal_id), ...(row.token_ids ?? []).map(tokenActor)])];
}
