import { createMiddleware } from 'hono/factory';
import { FerryError } from '../errors.ts';
import type { Queryable } from '../persistence/db.ts';
import { authenticateToken, type AuthenticatedToken } from '../persistence/tokens.ts';
import { can, type Permission, type Role } from '../services/permissions.ts';
import { recordAuthFailure, refuseIfThrottled, type AuthThrottle } from './auth-throttle.ts';

export { can, permissions, roles, type Permission, type Role } from '../services/permissions.ts';

/** The authenticated caller: the principal acting, and the token it presented (whose role applies). */
export interface Principal {
  principalId: string;
  /** The principal's name: what a person reads. */
  name: string;
  tokenId: string;
  tokenName: string;
  role: Role;
}

/** The caller a usable token authenticates, as routes read it from c.get('principal'). */
export function callerOf(found: AuthenticatedToken): Principal {
  return { principalId: found.principalId, name: found.principalName, tokenId: found.id, tokenName: found.name, role: found.role };
}

/** Hono variables set by authenticate(); type routes with `Hono<AuthEnv>` to read c.get('principal'). */
export type AuthVariables = { principal: Principal };
export type AuthEnv = { Variables: AuthVariables };

// One message for every failure, so a caller cannot tell an unknown token from a revoked or expired
// one, or from a token of a disabled principal.
const UNAUTHENTICATED_MESSAGE = 'a valid bearer token is required (Authorization: Bearer <token>)';

function unauthenticated(): FerryError {
  return new FerryError('UNAUTHENTICATED', UNAUTHENTICATED_MESSAGE);
}

/** Extracts the token from `Authorization: Bearer <token>`; the scheme is case-insensitive (RFC 7235). */
export function bearerToken(header: string | undefined): string | null {
  if (!header) return null;
  const match = /^Bearer +([^\s]+) *$/i.exec(header);
  return match ? match[1] : null;
}

/**
 * Authenticates the bearer token. With a throttle (createApp passes the app's one), an address over
 * its failure limit is refused before its token is looked up, and every presented credential that
 * fails is logged and counted; a request without an Authorization header is no guess and is neither.
 */
export function authenticate(db: Queryable, throttle?: AuthThrottle) {
  return createMiddleware<AuthEnv>(async (c, next) => {
    refuseIfThrottled(throttle, c);
    const header = c.req.header('Authorization');
    const token = bearerToken(header);
    const found = token ? await authenticateToken(db, token) : null;
    if (!found) {
      if (header !== undefined) recordAuthFailure(throttle, c);
      c.header('WWW-Authenticate', 'Bearer');
      throw unauthenticated();
    }
    c.set('principal', callerOf(found));
    await next();
  });
}

/**
 * What a route declares about access: the middleware that enforces the permission, and the same
 * permission as `x-ferry-permission` on the route's OpenAPI operation, so the published document
 * says what the server enforces. Spread into createRoute({...}).
 */
export function permitted<P extends Permission>(permission: P) {
  const middleware: [ReturnType<typeof requirePermission>] = [requirePermission(permission)];
  return { middleware, 'x-ferry-permission': permission };
}

export function requirePermission(permission: Permission) {
  return createMiddleware<AuthEnv>(async (c, next) => {
    const principal = c.get('principal');
    if (!principal) throw unauthenticated();
    if (!can(principal.role, permission)) {
      throw new FerryError('FORBIDDEN', `role ${principal.role} does not grant ${permission}`, {
        permission,
        role: principal.role,
      });
    }
    await next();
  });
}
