import { NotFoundError, ValidationError } from '../errors.ts';
import { writeAudit } from '../persistence/audit.ts';
import { withTransaction, type Client, type Pool, type Queryable } from '../persistence/db.ts';
import {
  assertName,
  insertPrincipal,
  markPrincipalDisabled,
  findPrincipal,
  selectPrincipals,
  type PrincipalInfo,
} from '../persistence/principals.ts';
import {
  activeTokenNameTaken,
  bareNameTaken,
  createToken,
  isRole,
  listTokens,
  revokeToken,
  roles,
  type CreatedToken,
  type TokenInfo,
} from '../persistence/tokens.ts';

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

export function assertFutureExpiry(expiresAt: Date | null | undefined): void {
  if (expiresAt == null) return;
  if (!Number.isFinite(expiresAt.getTime())) throw new ValidationError('expires_at must be a valid time', { field: 'expires_at' });
  if (expiresAt.getTime() <= Date.now()) throw new ValidationError('expires_at must be in the future', { field: 'expires_at' });
  if (expiresAt.getTime() > Date.now() + MAX_EXPIRY_MS) throw new ValidationError('expires_at must be at most 10 years ahead', { field: 'expires_at' });
}

export function principalDetails(p: PrincipalInfo) {
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

/**
 * Creates a principal and its audit event inside the caller's transaction; `extra` joins the audit
 * details (a confirmed credential proposal names itself and its proposer there).
 */
export async function insertPrincipalAudited(
  client: Client,
  input: { name: string; kind: string },
  actor: string,
  extra: Record<string, unknown> = {},
): Promise<PrincipalInfo> {
  const principal = await insertPrincipal(client, input);
  await writeAudit(client, { actor, action: 'principal.create', entity_type: 'principal', entity_id: principal.id, details: { ...principalDetails(principal), ...extra } });
  return principal;
}

/**
 * Creates a principal directly. Only the CLI calls this (database access is the root of trust); the
 * API proposes it instead (src/services/credential-proposals.ts), for a second admin to confirm.
 */
export async function createPrincipal(pool: Pool, input: { name: string; kind: string }, actor: string): Promise<PrincipalInfo> {
  return withTransaction(pool, (client) => insertPrincipalAudited(client, input, actor));
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

/** What a token request resolves to before anything is written: its principal (if named) and its name. */
export interface ResolvedTokenInput {
  principal: PrincipalInfo | null;
  name: string;
  role: string;
  expiresAt: Date | null;
}

/**
 * Checks a token request and resolves its principal and name: the principal must exist and not be
 * disabled; without one, the name must not be a principal's (a bare name never lands on someone
 * who exists); the role is known; the name is free among active tokens; the expiry is ahead.
 */
export async function resolveTokenInput(db: Queryable, input: CreateApiTokenInput): Promise<ResolvedTokenInput> {
  assertFutureExpiry(input.expiresAt);
  if (!isRole(input.role)) {
    throw new ValidationError(`unknown role ${JSON.stringify(input.role)}; expected one of ${roles.join(', ')}`, { field: 'role', allowed: [...roles] });
  }
  let principal: PrincipalInfo | null = null;
  if (input.principal !== undefined) {
    principal = await findPrincipal(db, input.principal);
    if (!principal) throw new NotFoundError('principal', input.principal);
    if (principal.disabled_at) throw new ValidationError(`principal ${principal.name} is disabled; it cannot be given tokens`, { field: 'principal' });
  }
  const name = input.name ?? (principal ? `${principal.name}.${input.role}` : undefined);
  if (name === undefined) throw new ValidationError('a token needs a name or a principal', { field: 'name' });
  assertName('token', name);
  if (!principal) {
    assertName('principal', name);
    if (await findPrincipal(db, name)) throw bareNameTaken(name);
  }
  if (await activeTokenNameTaken(db, name)) {
    throw new ValidationError(`an active token named ${name} already exists; revoke it or pick another name`, { field: 'name' });
  }
  return { principal, name, role: input.role, expiresAt: input.expiresAt ?? null };
}

/**
 * Creates a token and its audit events inside the caller's transaction (a principal created with a
 * bare name gets its own). `extra` joins the audit details.
 */
export async function insertTokenAudited(
  client: Client,
  input: { principal?: string; name: string; role: string; expiresAt: Date | null },
  actor: string,
  extra: Record<string, unknown> = {},
): Promise<CreatedToken & { principal_created: boolean }> {
  assertFutureExpiry(input.expiresAt);
  const created = await createToken(client, input);
  if (created.principal_created) {
    await writeAudit(client, {
      actor,
      action: 'principal.create',
      entity_type: 'principal',
      entity_id: created.principal_id,
      details: { name: created.principal_name, kind: 'person', with_token: created.name, ...extra },
    });
  }
  await writeAudit(client, { actor, action: 'token.create', entity_type: 'token', entity_id: created.id, details: { ...tokenDetails(created), ...extra } });
  return created;
}

/**
 * Creates a token directly; the result carries the secret, which nothing else ever shows again. The
 * CLI calls this (database access is the root of trust), and the API for what one admin may do
 * alone: a token of its own principal whose role decides nothing (src/services/credential-proposals.ts).
 */
export async function createApiToken(pool: Pool, input: CreateApiTokenInput, actor: string): Promise<CreatedToken & { principal_created: boolean }> {
  return withTransaction(pool, async (client) => {
    const r = await resolveTokenInput(client, input);
    return insertTokenAudited(client, { principal: r.principal?.id, name: r.name, role: r.role, expiresAt: r.expiresAt }, actor);
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
