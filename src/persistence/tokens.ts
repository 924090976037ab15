import { createHash, randomBytes } from 'node:crypto';
import { NotFoundError, ValidationError } from '../errors.ts';
import { isUuid } from './cursor.ts';
import type { Queryable } from './db.ts';
import { assertName, ensurePrincipal, findPrincipal, type PrincipalInfo } from './principals.ts';

/**
 * API tokens. A token is shown to its owner once, at creation; the database keeps only its SHA-256,
 * so a leaked table does not leak credentials. Lookup is by that hash through the unique index, so
 * no comparison ever runs over the secret itself (nothing to time). Every token belongs to a
 * principal (src/persistence/principals.ts): what a token does is recorded as its principal's.
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
  principal_id: string;
  principal_name: string;
  created_at: Date;
  last_used_at: Date | null;
  /** After this instant the token is refused exactly as a revoked one; null: it does not expire. */
  expires_at: Date | null;
  revoked_at: Date | null;
}

export interface CreatedToken extends TokenInfo {
  /** The bearer secret; returned here and nowhere else. */
  token: string;
}

/** The caller a valid token authenticates: the token and the principal it belongs to. */
export interface AuthenticatedToken {
  id: string;
  name: string;
  role: Role;
  principalId: string;
  principalName: string;
}

const TOKEN_PREFIX = 'fy_';
// 32 random bytes in base64url without padding are 43 characters.
const TOKEN_SHAPE = /^fy_[A-Za-z0-9_-]{43}$/;
// last_used_at is informational; refreshing it at most once a minute keeps reads from writing.
const LAST_USED_RESOLUTION_MS = 60_000;

// A token is usable while it is not revoked, not expired and its principal is not disabled. Every
// lookup that authorises a caller uses this one condition (t = api_tokens, p = principals).
export const USABLE = `t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now()) AND p.disabled_at IS NULL`;
const INFO_COLUMNS = `t.id, t.name, t.role, t.principal_id, p.name AS principal_name, t.created_at, t.last_used_at, t.expires_at, t.revoked_at`;

export function hashToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

export interface CreateTokenInput {
  name: string;
  role: string;
  /**
   * The principal (name or id) the token belongs to; it must exist and not be disabled. Without
   * one, the token belongs to the principal of its own name, created as a person when missing.
   */
  principal?: string;
  /** When the token stops working; null or absent: never. */
  expiresAt?: Date | null;
}

/** A token named like an existing principal without naming a principal: refused, never landed on it. */
export function bareNameTaken(name: string): ValidationError {
  return new ValidationError(
    `a principal named ${name} exists; a token without a principal makes a new one, so name the principal to give ${name} a token`,
    { field: 'principal', principal: name },
  );
}

/** Whether an active (not revoked) token has this name: names are unique among them. */
export async function activeTokenNameTaken(db: Queryable, name: string): Promise<boolean> {
  const { rows } = await db.query('SELECT 1 FROM api_tokens WHERE name = $1 AND revoked_at IS NULL', [name]);
  return rows.length > 0;
}

/**
 * Inserts a token. Call it inside a transaction when a principal may be created with it (the
 * service in src/services/principals.ts does, and writes the audit event beside it).
 */
export async function createToken(client: Queryable, input: CreateTokenInput): Promise<CreatedToken & { principal_created: boolean }> {
  assertName('token', input.name);
  if (!isRole(input.role)) {
    throw new ValidationError(`unknown role ${JSON.stringify(input.role)}; expected one of ${roles.join(', ')}`, {
      field: 'role',
      allowed: [...roles],
    });
  }
  const expiresAt = input.expiresAt ?? null;
  if (expiresAt !== null && !(expiresAt instanceof Date && Number.isFinite(expiresAt.getTime()))) {
    throw new ValidationError('expires_at must be a valid time', { field: 'expires_at' });
  }
  let principal: PrincipalInfo;
  let principalCreated = false;
  if (input.principal === undefined) {
    ({ principal, created: principalCreated } = await ensurePrincipal(client, input.name));
    // A bare name makes a new principal, never a credential of an existing one: whoever gives a token
    // to someone who exists must say so (`principal`), where it is checked and audited as such.
    if (!principalCreated) throw bareNameTaken(input.name);
  } else {
    const found = await findPrincipal(client, input.principal);
    if (!found) throw new NotFoundError('principal', input.principal);
    principal = found;
  }
  if (principal.disabled_at) {
    throw new ValidationError(`principal ${principal.name} is disabled; it cannot be given tokens`, { field: 'principal' });
  }
  const token = TOKEN_PREFIX + randomBytes(32).toString('base64url');
  try {
    const { rows } = await client.query<{ id: string; created_at: Date }>(
      `INSERT INTO api_tokens (name, role, token_hash, principal_id, expires_at) VALUES ($1, $2, $3, $4, $5) RETURNING id, created_at`,
      [input.name, input.role, hashToken(token), principal.id, expiresAt],
    );
    return {
      id: rows[0].id,
      name: input.name,
      role: input.role,
      principal_id: principal.id,
      principal_name: principal.name,
      created_at: rows[0].created_at,
      last_used_at: null,
      expires_at: expiresAt,
      revoked_at: null,
      token,
      principal_created: principalCreated,
    };
  } catch (err) {
    if ((err as { code?: string; constraint?: string }).constraint === 'api_tokens_active_name') {
      throw new ValidationError(`an active token named ${input.name} already exists; revoke it or pick another name`, {
        field: 'name',
      });
    }
    throw err;
  }
}

/** Every token, oldest first; revoked ones only when asked for; only one principal's when named. */
export async function listTokens(db: Queryable, opts: { includeRevoked?: boolean; principalId?: string } = {}): Promise<TokenInfo[]> {
  const { rows } = await db.query<TokenInfo>(
    `SELECT ${INFO_COLUMNS}
       FROM api_tokens t JOIN principals p ON p.id = t.principal_id
      WHERE ($1::boolean OR t.revoked_at IS NULL) AND ($2::uuid IS NULL OR t.principal_id = $2::uuid)
      ORDER BY t.created_at, t.id`,
    [opts.includeRevoked === true, opts.principalId ?? null],
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
    `WITH revoked AS (
       UPDATE api_tokens SET revoked_at = now()
        WHERE revoked_at IS NULL AND ${byId ? 'id = $1::uuid' : 'name = $1'}
        RETURNING *)
     SELECT ${INFO_COLUMNS} FROM revoked t JOIN principals p ON p.id = t.principal_id`,
    [idOrName],
  );
  if (rows.length === 0) throw new NotFoundError('active token', idOrName);
  return rows[0];
}

export const AUTH_COLUMNS = `t.id, t.name, t.role, t.principal_id AS "principalId", p.name AS "principalName"`;

/**
 * The caller's identity when the token is known and usable (not revoked, not expired, its principal
 * not disabled); null otherwise, whichever the reason (the caller answers one 401 for all).
 */
export async function authenticateToken(db: Queryable, token: string): Promise<AuthenticatedToken | null> {
  if (typeof token !== 'string' || !TOKEN_SHAPE.test(token)) return null;
  const { rows } = await db.query<AuthenticatedToken & { last_used_at: Date | null }>(
    `SELECT ${AUTH_COLUMNS}, t.last_used_at
       FROM api_tokens t JOIN principals p ON p.id = t.principal_id
      WHERE t.token_hash = $1 AND ${USABLE}`,
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
  return { id: row.id, name: row.name, role: row.role, principalId: row.principalId, principalName: row.principalName };
}

/** Whether any usable admin token exists; start-up uses it to tell a new operator how to make one. */
export async function hasAdminToken(db: Queryable): Promise<boolean> {
  const { rows } = await db.query<{ exists: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM api_tokens t JOIN principals p ON p.id = t.principal_id WHERE t.role = 'admin' AND ${USABLE}) AS exists`,
  );
  return rows[0].exists;
}
