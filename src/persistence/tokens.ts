import { createHash, randomBytes } from 'node:crypto';
import { NotFoundError, ValidationError } from '../errors.ts';
import { isUuid } from './cursor.ts';
import type { Queryable } from './db.ts';

/**
 * API tokens. A token is shown to its owner once, at creation; the database keeps only its SHA-256,
 * so a leaked table does not leak credentials. Lookup is by that hash through the unique index, so
 * no comparison ever runs over the secret itself (nothing to time).
 */

export const roles = ['viewer', 'requester', 'approver', 'operator', 'admin'] as const;
export type Role = (typeof roles)[number];

export function isRole(value: unknown): value is Role {
  return typeof value === 'string' && (roles as readonly string[]).includes(value);
}

/** What a caller may know about a token: never its hash, never the token. */
export interface TokenInfo {
  id: string;
  name: string;
  role: Role;
  created_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
}

export interface CreatedToken {
  id: string;
  name: string;
  role: Role;
  /** The bearer secret; returned here and nowhere else. */
  token: string;
  created_at: Date;
}

export interface AuthenticatedToken {
  id: string;
  name: string;
  role: Role;
}

const TOKEN_PREFIX = 'fy_';
// 32 random bytes in base64url without padding are 43 characters.
const TOKEN_SHAPE = /^fy_[A-Za-z0-9_-]{43}$/;
const NAME_SHAPE = /^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$/;
// last_used_at is informational; refreshing it at most once a minute keeps reads from writing.
const LAST_USED_RESOLUTION_MS = 60_000;

export function hashToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

export async function createToken(client: Queryable, input: { name: string; role: string }): Promise<CreatedToken> {
  if (typeof input.name !== 'string' || !NAME_SHAPE.test(input.name)) {
    throw new ValidationError(
      'token name must be 1-64 characters: letters, digits and . _ @ - (starting with a letter or digit)',
      { field: 'name' },
    );
  }
  if (isUuid(input.name)) {
    // revokeToken takes an id or a name; a name shaped like an id would be ambiguous.
    throw new ValidationError('token name must not look like a token id (UUID)', { field: 'name' });
  }
  if (!isRole(input.role)) {
    throw new ValidationError(`unknown role ${JSON.stringify(input.role)}; expected one of ${roles.join(', ')}`, {
      field: 'role',
      allowed: [...roles],
    });
  }
  const token = TOKEN_PREFIX + randomBytes(32).toString('base64url');
  try {
    const { rows } = await client.query<{ id: string; created_at: Date }>(
      `INSERT INTO api_tokens (name, role, token_hash) VALUES ($1, $2, $3) RETURNING id, created_at`,
      [input.name, input.role, hashToken(token)],
    );
    return { id: rows[0].id, name: input.name, role: input.role, token, created_at: rows[0].created_at };
  } catch (err) {
    if ((err as { code?: string; constraint?: string }).constraint === 'api_tokens_active_name') {
      throw new ValidationError(`an active token named ${input.name} already exists; revoke it or pick another name`, {
        field: 'name',
      });
    }
    throw err;
  }
}

/** Every token, oldest first; revoked ones only when asked for. */
export async function listTokens(db: Queryable, opts: { includeRevoked?: boolean } = {}): Promise<TokenInfo[]> {
  const { rows } = await db.query<TokenInfo>(
    `SELECT id, name, role, created_at, last_used_at, revoked_at
       FROM api_tokens
      WHERE $1::boolean OR revoked_at IS NULL
      ORDER BY created_at, id`,
    [opts.includeRevoked === true],
  );
  return rows;
}

/**
 * Revokes the active token with this id or name. A token already revoked counts as not found:
 * there is nothing left to revoke.
 */
export async function revokeToken(client: Queryable, idOrName: string): Promise<TokenInfo> {
  const byId = isUuid(idOrName);
  const { rows } = await client.query<TokenInfo>(
    `UPDATE api_tokens SET revoked_at = now()
      WHERE revoked_at IS NULL AND ${byId ? 'id = $1::uuid' : 'name = $1'}
      RETURNING id, name, role, created_at, last_used_at, revoked_at`,
    [idOrName],
  );
  if (rows.length === 0) throw new NotFoundError('active token', idOrName);
  return rows[0];
}

/** The token's identity when it is known and not revoked; null otherwise (the caller answers 401). */
export async function authenticateToken(db: Queryable, token: string): Promise<AuthenticatedToken | null> {
  if (typeof token !== 'string' || !TOKEN_SHAPE.test(token)) return null;
  const { rows } = await db.query<AuthenticatedToken & { last_used_at: Date | null }>(
    `SELECT id, name, role, last_used_at FROM api_tokens WHERE token_hash = $1 AND revoked_at IS NULL`,
    [hashToken(token)],
  );
  const row = rows[0];
  if (!row) return null;
  if (!row.last_used_at || Date.now() - row.last_used_at.getTime() >= LAST_USED_RESOLUTION_MS) {
    // The condition is repeated in SQL so concurrent requests do not all write.
    await db.query(
      `UPDATE api_tokens SET last_used_at = now()
        WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')`,
      [row.id],
    );
  }
  return { id: row.id, name: row.name, role: row.role };
}

/** The active (not revoked) token of that name: how queue messages name who asks. */
export async function activeTokenByName(db: Queryable, name: string): Promise<AuthenticatedToken | null> {
  const { rows } = await db.query<AuthenticatedToken>(`SELECT id, name, role FROM api_tokens WHERE name = $1 AND revoked_at IS NULL`, [name]);
  return rows[0] ?? null;
}

/** Whether any active admin token exists; start-up uses it to tell a new operator how to make one. */
export async function hasAdminToken(db: Queryable): Promise<boolean> {
  const { rows } = await db.query<{ exists: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM api_tokens WHERE role = 'admin' AND revoked_at IS NULL) AS exists`,
  );
  return rows[0].exists;
}

/**
 * The names of the tokens with these ids, revoked ones included (a revoked token still names who
 * acted before). Ids that are not UUIDs are skipped: they name no token.
 */
export async function tokenNames(db: Queryable, ids: Iterable<string>): Promise<Map<string, string>> {
  const wanted = [...new Set([...ids].filter(isUuid))];
  if (wanted.length === 0) return new Map();
  const { rows } = await db.query<{ id: string; name: string }>('SELECT id, name FROM api_tokens WHERE id = ANY($1::uuid[])', [wanted]);
  return new Map(rows.map((r) => [r.id, r.name]));
}
