import { principalKinds, type PrincipalInfo } from '../persistence/principals.ts';
// The service loads in the commands that use it, not for --help.
const service = () => import('../services/principals.ts');
import { NAME_OR_ID, nameOrId, UsageError, type CliCommand } from './command.ts';
import { printedJson, printList } from './format.ts';
import { API_USAGE, apiOptions, apiTarget, callApi, overApi } from './movements.ts';
import { operatorName } from './operator.ts';

/**
 * `ferry principals create | list | disable`: who may act (a person or a service). Tokens are a
 * principal's credentials (`ferry tokens create --principal NAME`); four-eyes and quorum count
 * principals. Changes are audited as `cli:<user>` (or `--by`).
 */

const create: CliCommand = {
  path: ['principals', 'create'],
  summary: 'create a principal: a person or a service that holds tokens (audited)',
  usage: `--name NAME [--kind ${principalKinds.join('|')}] [--by OPERATOR] [--json]`,
  options: { name: { type: 'string' }, kind: { type: 'string' }, by: { type: 'string' }, json: { type: 'boolean' } },
  async run(ctx) {
    const name = ctx.option('name');
    const kind = ctx.option('kind') ?? 'person';
    if (!name) throw new UsageError('--name is required');
    if (!(principalKinds as readonly string[]).includes(kind)) throw new UsageError(`unknown kind "${kind}"; choose one of: ${principalKinds.join(', ')}`);
    const actor = operatorName(ctx);
    const { createPrincipal } = await service();
    const created = await ctx.withDatabase(({ pool }) => createPrincipal(pool, { name, kind }, actor));
    if (!printedJson(ctx, created)) ctx.out(`Created principal "${created.name}" (${created.kind}, id ${created.id}). Give it tokens with: ferry tokens create --principal ${created.name} --role ROLE`);
  },
};

const list: CliCommand = {
  path: ['principals', 'list'],
  summary: 'list principals',
  // With --url or FERRY_URL it asks that Ferry (GET /v3/principals, token.admin); else the database.
  usage: `[--all] ${API_USAGE}`,
  options: { ...apiOptions, all: { type: 'boolean' } },
  async run(ctx) {
    let principals: PrincipalInfo[];
    if (overApi(ctx)) {
      type View = Omit<PrincipalInfo, 'created_at' | 'disabled_at'> & { created_at: string; disabled_at: string | null; actor?: string };
      const answer = await callApi<{ principals: View[] }>(await apiTarget(ctx), 'GET', `/v3/principals?include_disabled=${ctx.flag('all')}`);
      // The same fields as from the database (the API adds the actor string).
      principals = answer.principals.map(({ actor: _actor, ...p }) => ({ ...p, created_at: new Date(p.created_at), disabled_at: p.disabled_at === null ? null : new Date(p.disabled_at) }));
    } else {
      const { listPrincipals } = await service();
      principals = await ctx.withDatabase(({ pool }) => listPrincipals(pool, { includeDisabled: ctx.flag('all') }));
    }
    printList(ctx, principals, {
      empty: 'No principals. Create one with: ferry principals create --name NAME',
      columns: ['ID', 'NAME', 'KIND', 'CREATED', 'STATUS'],
      row: (p: PrincipalInfo) => [p.id, p.name, p.kind, p.created_at.toISOString(), p.disabled_at ? `disabled ${p.disabled_at.toISOString()}` : 'active'],
    });
  },
};

const disable: CliCommand = {
  path: ['principals', 'disable'],
  summary: 'disable a principal: every token it holds is refused from now on (audited)',
  usage: `${NAME_OR_ID.usage} [--by OPERATOR] [--json]`,
  options: { ...NAME_OR_ID.options, by: { type: 'string' }, json: { type: 'boolean' } },
  async run(ctx) {
    const ref = nameOrId(ctx);
    const actor = operatorName(ctx);
    const { disablePrincipal } = await service();
    const disabled = await ctx.withDatabase(({ pool }) => disablePrincipal(pool, ref, actor));
    if (!printedJson(ctx, disabled)) ctx.out(`Disabled principal "${disabled.name}" (id ${disabled.id}); its tokens no longer authenticate.`);
  },
};

export const principalCommands: CliCommand[] = [create, list, disable];
