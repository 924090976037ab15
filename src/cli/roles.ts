import { loadConfig } from '../config.ts';
import { CliError, databaseOnly, runningEmbedded, UsageError, type CliCommand } from './command.ts';

/** The embedded server's bootstrap superuser, which owns and migrates there. */
const EMBEDDED_OWNER_ROLE = 'ferry';

const setupRoles: CliCommand = {
  path: ['db', 'setup-roles'],
  summary: 'print the SQL that gives the runtime an application role unable to rewrite the audit log (--apply runs it)',
  usage: '[--owner-role NAME] [--app-role NAME] [--schema NAME] [--apply]',
  options: { 'owner-role': { type: 'string' }, 'app-role': { type: 'string' }, schema: { type: 'string' }, apply: { type: 'boolean' } },
  async run(ctx) {
    const { applyStatements, asScript, EMBEDDED_APP_ROLE, setupStatements, urlRole } = await import('../persistence/roles.ts');
    const config = loadConfig(ctx.env);
    const embedded = !config.databaseUrl;
    // Defaults: the owner is FERRY_DATABASE_OWNER_URL's role (else DATABASE_URL's, the role that
    // migrated so far); the application role is DATABASE_URL's when an owner URL is set, else ferry_app.
    const owner =
      ctx.option('owner-role') ?? (embedded ? EMBEDDED_OWNER_ROLE : urlRole(config.databaseOwnerUrl ?? config.databaseUrl!));
    const app =
      ctx.option('app-role') ??
      (embedded ? EMBEDDED_APP_ROLE : config.databaseOwnerUrl ? urlRole(config.databaseUrl!) : EMBEDDED_APP_ROLE);
    if (!owner) throw new UsageError('--owner-role NAME is required: the database URL names no user');
    if (!app) throw new UsageError('--app-role NAME is required: DATABASE_URL names no user');
    if (app === owner) {
      throw new UsageError(`the application role must differ from the owner role (both ${owner}); pass --app-role NAME`);
    }
    const statements = setupStatements({ owner, app, schema: ctx.option('schema') ?? 'public' });
    if (!ctx.flag('apply')) {
      ctx.out(`-- Ferry role setup: ${app} runs the runtime, ${owner} owns the tables and runs migrations.`);
      ctx.out('-- Run as a superuser (or a role that may create roles and act as both). Idempotent.');
      ctx.out(`-- Then set a password: ALTER ROLE ${app} PASSWORD '...'; and point DATABASE_URL at ${app}.`);
      ctx.out(asScript(statements));
      return 0;
    }
    const run = async (url: string) => {
      try {
        await applyStatements(url, statements);
      } catch (err) {
        throw new CliError(`role setup failed: ${(err as Error).message}`);
      }
    };
    if (embedded)
      await ctx.withDatabase(async (db) => {
        if (db.source === 'embedded-running') throw runningEmbedded();
        await run(db.ownerUrl ?? db.url);
      }, 'as-is');
    else {
      if (ctx.env.FERRY_URL) throw databaseOnly(ctx.command.path);
      const { databaseAddress } = await import('./database.ts');
      ctx.err(`ferry: db setup-roles: database ${databaseAddress(config.databaseOwnerUrl ?? config.databaseUrl!)} (${config.databaseOwnerUrl ? 'FERRY_DATABASE_OWNER_URL' : 'DATABASE_URL'})`);
      await run(config.databaseOwnerUrl ?? config.databaseUrl!);
    }
    ctx.out(`roles set up: ${app} may run Ferry without rewriting the audit log; ${owner} owns the tables`);
    return 0;
  },
};

export const databaseCommands: CliCommand[] = [setupRoles];
