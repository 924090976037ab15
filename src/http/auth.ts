import { createMiddleware } from 'hono/factory';
import { FerryError } from '../errors.ts';
import type { Queryable } from '../persistence/db.ts';
import { authenticateToken, roles, type AuthenticatedToken, type Role } from '../persistence/tokens.ts';

/**
 * Who may do what. Every /v3 route authenticates with a bearer token and then names the one
 * permission it needs; the matrix below is the whole policy, so reviewing access means reading it.
 */

export { roles, type Role };

export const permissions = [
  'read',
  'movement.create',
  /** approve and reject */
  'movement.approve',
  'movement.cancel',
  /** resume and retry */
  'movement.operate',
  'template.write',
  'callback.redrive',
  /** register, list, show, rotate and disable callback destinations (their URLs are operator data) */
  'callback.destination',
  'signer.identity',
  'dashboard',
  'token.admin',
  /** approve a template proposal (never one's own) */
  'template.approve',
  /** challenge an approved template proposal within its challenge window */
  'template.challenge',
  /** change jobs, queues and schedules through the dashboard (admin only: nobody else holds it) */
  'dashboard.jobs',
] as const;
export type Permission = (typeof permissions)[number];

// Separation of duties: whoever requests a movement cannot approve it by role, and approvers cannot
// create or steer movements. Admin holds everything except approving: approval is its own grant, held
// only by the approver role, so a principal who administers Ferry approves only with an approver token
// it was given explicitly (and audited), and never its own movements (four-eyes counts principals).
const grants: Record<Role, readonly Permission[]> = {
  viewer: ['read'],
  requester: ['read', 'movement.create', 'movement.cancel'],
  approver: ['read', 'movement.approve', 'template.approve', 'template.challenge'],
  operator: ['read', 'movement.cancel', 'movement.operate', 'callback.redrive', 'template.write', 'dashboard', 'callback.destination'],
  admin: permissions.filter((p) => p !== 'movement.approve'),
};

export function can(role: Role, permission: Permission): boolean {
  return grants[role]?.includes(permission) ?? false;
}

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

export function authenticate(db: Queryable) {
  return createMiddleware<AuthEnv>(async (c, next) => {
    const token = bearerToken(c.req.header('Authorization'));
    const found = token ? await authenticateToken(db, token) : null;
    if (!found) {
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
