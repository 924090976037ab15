import { roles, isRole, type TokenInfo } from '../persistence/tokens.ts';
// The service (its persistence and audit) loads in the commands that write or read, not for --help.
const principals = () => import('../services/principals.ts');
import { NAME_OR_ID, nameOrId, UsageError, type CliCommand } from './command.ts';
import { printedJson, printList } from './format.ts';
import { API_USAGE, apiOptions, apiTarget, callApi, overApi } from './movements.ts';
import { operatorName } from './operator.ts';

/** A token as the API shows it (instants as ISO strings). */
type TokenView = Omit<TokenInfo, 'created_at' | 'last_used_at' | 'expires_at' | 'revoked_at'> & Record<'created_at', string> & Record<'last_used_at' | 'expires_at' | 'revoked_at', string | null>;

const instant = (v: string | null) => (v === null ? null : new Date(v));

function tokenFromView(t: TokenView): TokenInfo {
  return { ...t, created_at: new Date(t.created_at), last_used_at: instant(t.last_used_at), expires_at: instant(t.expires_at), revoked_at: instant(t.revoked_at) };
}

/** The hint printed when no admin token exists yet. */
export const firstAdminTokenHint =
  'No admin token exists yet. Create one with:\n  npm run ferry -- tokens create --name admin --role admin';

const create: CliCommand = {
  path: ['tokens', 'create'],
  summary: 'create an API token of a principal (the token is printed once; audited)',
  // Without --principal the token belongs to the principal named like it (created as a person when
  // missing); with it, the principal must exist and the token is named PRINCIPAL.ROLE unless --name says.
  usage: `[--principal PRINCIPAL] [--name NAME] --role ${roles.join('|')} [--expires-in 30d|12h|90m] [--by OPERATOR] [--json]`,
  options: {
    name: { type: 'string' },
    principal: { type: 'string' },
    role: { type: 'string' },
    'expires-in': { type: 'string' },
    by: { type: 'string' },
    json: { type: 'boolean' },
  },
  async run(ctx) {
    const name = ctx.option('name');
    const principal = ctx.option('principal');
    const role = ctx.option('role');
    const expiresIn = ctx.option('expires-in');
    if (!name && !principal) throw new UsageError('give --principal (the token is named PRINCIPAL.ROLE unless --name is given) or --name');
    if (!role) throw new UsageError('--role is required');
    if (!isRole(role)) throw new UsageError(`unknown role "${role}"; choose one of: ${roles.join(', ')}`);
    let expiresAt: Date | null = null;
    if (expiresIn !== undefined) {
      try {
        expiresAt = new Date(Date.now() + (await principals()).parseDuration(expiresIn, '--expires-in'));
      } catch (err) {
        throw new UsageError((err as Error).message);
      }
    }
    const actor = operatorName(ctx);
    const { createApiToken } = await principals();
    const created = await ctx.withDatabase(({ pool }) => createApiToken(pool, { name, principal, role, expiresAt }, actor));
    const { principal_created: _, ...shown } = created;
    if (printedJson(ctx, shown)) return;
    if (created.principal_created) ctx.out(`Created principal "${created.principal_name}" (person) for it.`);
    const expiry = created.expires_at ? `, expires ${created.expires_at.toISOString()}` : '';
    ctx.out(`Created token "${created.name}" of principal "${created.principal_name}" (role ${created.role}, id ${created.id}${expiry}):`);
    ctx.out('');
    ctx.out(`  ${created.token}`);
    ctx.out('');
    ctx.out('Store it now: Ferry keeps only its hash and cannot show it again.');
  },
};

function status(t: TokenInfo, now = Date.now()): string {
  if (t.revoked_at) return `revoked ${t.revoked_at.toISOString()}`;
  if (t.expires_at && t.expires_at.getTime() <= now) return `expired ${t.expires_at.toISOString()}`;
  return 'active';
}

const list: CliCommand = {
  path: ['tokens', 'list'],
  summary: 'list API tokens and their principals (never their secrets)',
  // With --url or FERRY_URL it asks that Ferry (GET /v3/tokens, token.admin); else the database.
  usage: `[--principal PRINCIPAL] [--all] ${API_USAGE}`,
  options: { ...apiOptions, all: { type: 'boolean' }, principal: { type: 'string' } },
  async run(ctx) {
    const principal = ctx.option('principal');
    let tokens: TokenInfo[];
    if (overApi(ctx)) {
      const query = new URLSearchParams({ include_revoked: String(ctx.flag('all')), ...(principal === undefined ? {} : { principal }) });
      const answer = await callApi<{ tokens: TokenView[] }>(await apiTarget(ctx), 'GET', `/v3/tokens?${query}`);
      tokens = answer.tokens.map(tokenFromView);
    } else {
      const { listApiTokens } = await principals();
      tokens = await ctx.withDatabase(({ pool }) => listApiTokens(pool, { includeRevoked: ctx.flag('all'), principal }));
    }
    printList(ctx, tokens, {
      empty: 'No tokens. Create one with: ferry tokens create --principal PRINCIPAL --role ROLE',
      columns: ['ID', 'NAME', 'ROLE', 'PRINCIPAL', 'CREATED', 'EXPIRES', 'LAST USED', 'STATUS'],
      row: (t: TokenInfo) => [
        t.id,
        t.name,
        t.role,
        t.principal_name,
        t.created_at.toISOString(),
        t.expires_at?.toISOString() ?? '-',
        t.last_used_at?.toISOString() ?? '-',
        status(t),
      ],
    });
  },
};

const revoke: CliCommand = {
  path: ['tokens', 'revoke'],
  summary: 'revoke an API token by name or id (audited)',
  usage: `${NAME_OR_ID.usage} [--by OPERATOR] [--json]`,
  options: { ...NAME_OR_ID.options, by: { type: 'string' }, json: { type: 'boolean' } },
  async run(ctx) {
    const ref = nameOrId(ctx, 'a token id');
    const actor = operatorName(ctx);
    const { revokeApiToken } = await principals();
    const revoked = await ctx.withDatabase(({ pool }) => revokeApiToken(pool, ref, actor));
    if (!printedJson(ctx, revoked)) ctx.out(`Revoked token "${revoked.name}" of principal "${revoked.principal_name}" (role ${revoked.role}, id ${revoked.id}).`);
  },
};

export const tokenCommands: CliCommand[] = [create, list, revoke];
