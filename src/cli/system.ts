import { migrate } from '../persistence/migrate.ts';
import type { CliCommand } from './command.ts';


const migrateCommand: CliCommand = {
  path: ['migrate'],
  summary: 'apply pending database migrations',
  usage: '',
  async run(ctx) {
    // Over the direct connection: the migrations' advisory lock is session state a pooler would lose.
    const applied = await ctx.withDatabase(({ directUrl }) => migrate(directUrl), 'as-is');
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
