import { isUuid } from '../ids.ts';
import { createToken, listTokens, revokeToken, roles, isRole, type TokenInfo } from '../persistence/tokens.ts';
import { UsageError, type CliCommand } from './command.ts';
import { table } from './format.ts';

/** The hint printed when no admin token exists yet. */
export const firstAdminTokenHint =
  'No admin token exists yet. Create one with:\n  npm run ferry -- tokens create --name admin --role admin';

const create: CliCommand = {
  path: ['tokens', 'create'],
  summary: 'create an API token (the token is printed once)',
  usage: `--name NAME --role ${roles.join('|')} [--json]`,
  options: { name: { type: 'string' }, role: { type: 'string' }, json: { type: 'boolean' } },
  async run(ctx) {
    const name = ctx.option('name');
    const role = ctx.option('role');
    if (!name) throw new UsageError('--name is required');
    if (!role) throw new UsageError('--role is required');
    if (!isRole(role)) throw new UsageError(`unknown role "${role}"; choose one of: ${roles.join(', ')}`);
    const created = await ctx.withDatabase(({ pool }) => createToken(pool, { name, role }));
    if (ctx.flag('json')) {
      ctx.out(JSON.stringify(created));
      return;
    }
    ctx.out(`Created token "${created.name}" (role ${created.role}, id ${created.id}):`);
    ctx.out('');
    ctx.out(`  ${created.token}`);
    ctx.out('');
    ctx.out('Store it now: Ferry keeps only its hash and cannot show it again.');
  },
};

const list: CliCommand = {
  path: ['tokens', 'list'],
  summary: 'list API tokens (never their secrets)',
  usage: '[--all] [--json]',
  options: { all: { type: 'boolean' }, json: { type: 'boolean' } },
  async run(ctx) {
    const tokens = await ctx.withDatabase(({ pool }) => listTokens(pool, { includeRevoked: ctx.flag('all') }));
    if (ctx.flag('json')) {
      ctx.out(JSON.stringify(tokens));
      return;
    }
    if (tokens.length === 0) {
      ctx.out('No tokens. Create one with: ferry tokens create --name NAME --role ROLE');
      return;
    }
    ctx.out(
      table(
        ['ID', 'NAME', 'ROLE', 'CREATED', 'LAST USED', 'STATUS'],
        tokens.map((t: TokenInfo) => [
          t.id,
          t.name,
          t.role,
          t.created_at.toISOString(),
          t.last_used_at?.toISOString() ?? '-',
          t.revoked_at ? `revoked ${t.revoked_at.toISOString()}` : 'active',
        ]),
      ),
    );
  },
};

const revoke: CliCommand = {
  path: ['tokens', 'revoke'],
  summary: 'revoke an API token by name or id',
  usage: '--name NAME | --id ID [--json]',
  options: { name: { type: 'string' }, id: { type: 'string' }, json: { type: 'boolean' } },
  async run(ctx) {
    const name = ctx.option('name');
    const id = ctx.option('id');
    if ((name === undefined) === (id === undefined)) throw new UsageError('give exactly one of --name or --id');
    if (id !== undefined && !isUuid(id)) {
      throw new UsageError(`--id must be a token id (a UUID), got "${id}"`);
    }
    const revoked = await ctx.withDatabase(({ pool }) => revokeToken(pool, (id ?? name)!));
    if (ctx.flag('json')) ctx.out(JSON.stringify(revoked));
    else ctx.out(`Revoked token "${revoked.name}" (role ${revoked.role}, id ${revoked.id}).`);
  },
};

export const tokenCommands: CliCommand[] = [create, list, revoke];
