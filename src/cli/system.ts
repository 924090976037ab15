import { runningEmbedded, type CliCommand } from './command.ts';



const migrateCommand: CliCommand = {
  path: ['migrate'],
  summary: 'apply pending database migrations',
  usage: '',
  async run(ctx) {
    const [{ migrate }, { prepareDatabase }] = await Promise.all([import('../persistence/migrate.ts'), import('../persistence/roles.ts')]);
    // Over the direct connection: the migrations' advisory lock is session state a pooler would lose.
    // As the owner when there is one (FERRY_DATABASE_OWNER_URL, the embedded superuser), which then
    // grants the application role its rights on what the migrations made (src/persistence/roles.ts).
    const applied = await ctx.withDatabase(
      async (db) => {
        if (db.source === 'embedded-running') throw runningEmbedded();
        return (
          await prepareDatabase({
            ownerUrl: db.ownerUrl ?? db.directUrl,
            appUrl: db.appUrl ?? db.directUrl,
            setup: db.source !== 'database-url',
            migrate: (url) => migrate(url),
          })
        ).applied;
      },
      'as-is',
    );
    if (applied.length === 0) ctx.out('database is up to date');
    else for (const name of applied) ctx.out(`applied ${name}`);
  },
};

const start: CliCommand = {
  path: ['start'],
  summary: 'run Ferry (API, workers, visualizer) until interrupted',
  usage: '',
  async run() {
    // Loaded here only, so the other commands do not pull in the whole server. Runs exactly what
    // `npm start` runs, and exits the process when Ferry stops.
    const { runFerryProgram } = await import('../main.ts');
    await runFerryProgram();
    await new Promise(() => {});
  },
};

export const systemCommands: CliCommand[] = [start, migrateCommand];
