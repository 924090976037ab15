import { createHash, randomBytes } from 'node:crypto';
import type { Queryable } from './db.ts';
import { AUTH_COLUMNS, USABLE, type AuthenticatedToken } from './tokens.ts';

/**
 * Dashboard sessions (migration 0140). The session id is 32 random bytes, unrelated to the token
 * that signed in; only its SHA-256 is stored, and lookups go through the primary key on that hash.
 */

const SESSION_PREFIX = 'fds_';
const SESSION_SHAPE = /^fds_[A-Za-z0-9_-]{43}$/;
/** Expired sessions are deleted this long after their end, when the next session starts. */
const KEEP_EXPIRED = "interval '1 day'";

function hashSession(id: string): string {
  return createHash('sha256').update(id, 'utf8').digest('hex');
}

/** Starts a session for a token; returns the session id (the cookie's value). */
export async function createDashboardSession(db: Queryable, tokenId: string, ttlSeconds: number): Promise<string> {
  const id = SESSION_PREFIX + randomBytes(32).toString('base64url');
  await db.query(`DELETE FROM dashboard_sessions WHERE expires_at < now() - ${KEEP_EXPIRED}`);
  await db.query(
    `INSERT INTO dashboard_sessions (id_hash, token_id, expires_at) VALUES ($1, $2, now() + make_interval(secs => $3))`,
    [hashSession(id), tokenId, ttlSeconds],
  );
  return id;
}

/**
 * The token behind a live session: not signed out, not expired, and its token still usable (the
 * one condition of tokens.ts: not revoked, not expired, its principal not disabled).
 */
export async function dashboardSessionToken(db: Queryable, sessionId: string): Promise<AuthenticatedToken | null> {
  if (typeof sessionId !== 'string' || !SESSION_SHAPE.test(sessionId)) return null;
  const { rows } = await db.query<AuthenticatedToken>(
    `SELECT ${AUTH_COLUMNS}
       FROM dashboard_sessions s JOIN api_tokens t ON t.id = s.token_id JOIN principals p ON p.id = t.principal_id
      WHERE s.id_hash = $1 AND s.revoked_at IS NULL AND s.expires_at > now() AND ${USABLE}`,
    [hashSession(sessionId)],
  );
  return rows[0] ?? null;
}

/** Ends a session (sign-out): the token and principal it belonged to, or null for an unknown or ended one. */
export async function endDashboardSession(db: Queryable, sessionId: string): Promise<{ tokenId: string; principalId: string } | null> {
  if (typeof sessionId !== 'string' || !SESSION_SHAPE.test(sessionId)) return null;
  const { rows } = await db.query<{ tokenId: string; principalId: string }>(
    `UPDATE dashboard_sessions s SET revoked_at = now() FROM api_tokens t
      WHERE s.id_hash = $1 AND s.revoked_at IS NULL AND t.id = s.token_id
      RETURNING t.id AS "tokenId", t.principal_id AS "principalId"`,
    [hashSession(sessionId)],
  );
  return rows[0] ?? null;
}
