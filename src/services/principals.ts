import { NotFoundError, ValidationError } from '../errors.ts';
import { writeAudit } from '../persistence/audit.ts';
import { withTransaction, type Pool } from '../persistence/db.ts';
import {
  insertPrincipal,
  markPrincipalDisabled,
  findPrincipal,
  selectPrincipals,
  type PrincipalInfo,
} from '../persistence/principals.ts';
import { createToken, listTokens, revokeToken, type CreatedToken, type TokenInfo } from '../persistence/tokens.ts';

/**
 * Principals and their tokens: the one home for every change to who may act. The API
 * (/v3/principals, /v3/tokens) and the CLI (`ferry principals`, `ferry tokens`) both call these; each
 * change and its audit event commit in one transaction, so no principal or token exists (or stops
 * existing) without the audit chain saying who did it. Audit details never carry a token's secret or
 * hash.
 *
 * `actor` is who asks: `principal:<id>` for an API caller, `cli:<user>` at the CLI.
 */

export type { PrincipalInfo, TokenInfo, CreatedToken };

const MAX_EXPIRY_MS = 10 * 366 * 86_400_000;
const DURATION = /^([1-9][0-9]{0,5})([mhd])$/;
const UNIT_MS = { m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** `30d`, `12h`, `90m` as milliseconds; a ValidationError naming `field` otherwise. */
export function parseDuration(text: string, field = 'expires_in'): number {
  const m = DURATION.exec(text);
  if (!m) throw new ValidationError(`${field} must be a whole number of minutes, hours or days, e.g. 90m, 12h or 30d`, { field });
  const ms = Number(m[1]) * UNIT_MS[m[2] as keyof typeof UNIT_MS];
  if (ms > MAX_EXPIRY_MS) throw new ValidationError(`${field} must be at most 10 years`, { field });
  return ms;
}

function assertFutureExpiry(expiresAt: Date | null | undefined): void {
  if (expiresAt == null) return;
  if (!Number.isFinite(expiresAt.getTime())) throw new ValidationError('expires_at must be a valid time', { field: 'expires_at' });
  if (expiresAt.getTime() <= Date.now()) throw new ValidationError('expires_at must be in the future', { field: 'expires_at' });
  if (expiresAt.getTime() > Date.now() + MAX_EXPIRY_MS) throw new ValidationError('expires_at must be at most 10 years ahead', { field: 'expires_at' });
}

function principalDetails(p: PrincipalInfo) {
  return { name: p.name, kind: p.kind };
}

function tokenDetails(t: TokenInfo) {
  return {
    name: t.name,
    role: t.role,
    principal_id: t.principal_id,
    principal_name: t.principal_name,
    expires_at: t.expires_at?.toISOString() ?? null,
  };
}

export async function createPrincipal(pool: Pool, input: { name: string; kind: string }, actor: string): Promise<PrincipalInfo> {
  return withTransaction(pool, async (client) => {
    const principal = await insertPrincipal(client, input);
    await writeAudit(client, { actor, action: 'principal.create', entity_type: 'principal', entity_id: principal.id, details: principalDetails(principal) });
    return principal;
  });
}

/** Disables a principal (by id or name): each of its tokens is refused from then on, exactly as a revoked one. */
export async function disablePrincipal(pool: Pool, idOrName: string, actor: string): Promise<PrincipalInfo> {
  return withTransaction(pool, async (client) => {
    const principal = await markPrincipalDisabled(client, idOrName);
    await writeAudit(client, { actor, action: 'principal.disable', entity_type: 'principal', entity_id: principal.id, details: principalDetails(principal) });
    return principal;
  });
}

export function listPrincipals(pool: Pool, opts: { includeDisabled?: boolean } = {}): Promise<PrincipalInfo[]> {
  return selectPrincipals(pool, opts);
}

export function getPrincipal(pool: Pool, idOrName: string): Promise<PrincipalInfo | null> {
  return findPrincipal(pool, idOrName);
}

export interface CreateApiTokenInput {
  /** The principal (name or id). Absent: the principal named like the token, created as a person if missing. */
  principal?: string;
  /** The token's own name; defaults to `<principal>.<role>` when a principal is named, else required. */
  name?: string;
  role: string;
  expiresAt?: Date | null;
}

/** Creates a token; the result carries the secret, which nothing else ever shows again. */
export async function createApiToken(pool: Pool, input: CreateApiTokenInput, actor: string): Promise<CreatedToken & { principal_created: boolean }> {
  assertFutureExpiry(input.expiresAt);
  return withTransaction(pool, async (client) => {
    let name = input.name;
    if (input.principal !== undefined) {
      const principal = await findPrincipal(client, input.principal);
      if (!principal) throw new NotFoundError('principal', input.principal);
      name ??= `${principal.name}.${input.role}`;
    }
    if (name === undefined) throw new ValidationError('a token needs a name or a principal', { field: 'name' });
    const created = await createToken(client, { name, role: input.role, principal: input.principal, expiresAt: input.expiresAt ?? null });
    if (created.principal_created) {
      await writeAudit(client, {
        actor,
        action: 'principal.create',
        entity_type: 'principal',
        entity_id: created.principal_id,
        details: { name: created.principal_name, kind: 'person', with_token: created.name },
      });
    }
    await writeAudit(client, { actor, action: 'token.create', entity_type: 'token', entity_id: created.id, details: tokenDetails(created) });
    return created;
  });
}

/** Revokes the active token with this id or name. */
export async function revokeApiToken(pool: Pool, idOrName: string, actor: string): Promise<TokenInfo> {
  return withTransaction(pool, async (client) => {
    const revoked = await revokeToken(client, idOrName);
    await writeAudit(client, { actor, action: 'token.revoke', entity_type: 'token', entity_id: revoked.id, details: tokenDetails(revoked) });
    return revoked;
  });
}

export async function listApiTokens(pool: Pool, opts: { includeRevoked?: boolean; principal?: string } = {}): Promise<TokenInfo[]> {
  let principalId: string | undefined;
  if (opts.principal !== undefined) {
    const p = await findPrincipal(pool, opts.principal);
    if (!p) throw new NotFoundError('principal', opts.principal);
    principalId = p.id;
  }
  return listTokens(pool, { includeRevoked: opts.includeRevoked, principalId });
}
