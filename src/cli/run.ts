import { parseArgs } from 'node:util';
import { isFerryError } from '../errors.ts';
import { CliError, databaseOnly, notOverApi, UsageError, type CliCommand, type CliCommandEntry, type CliCommandSpec, type CliContext, type CliIO } from './command.ts';
import { commandTable } from './command-table.ts';
import { loadCommand } from './commands.ts';

/** Exit codes: 0 success, 1 the command failed (or found a problem), 2 bad arguments. */
export const EXIT_OK = 0;
export const EXIT_FAILED = 1;
export const EXIT_USAGE = 2;

export interface RunOptions {
  env?: NodeJS.ProcessEnv;
  io?: CliIO;
  /** Commands to run instead of Ferry's own (tests). */
  commands?: CliCommand[];
  /** The command table to read instead of command-table.ts (tests: a stale one). */
  table?: CliCommandEntry[];
}

/** A command as help and parsing see it, and how to get its implementation when it runs. */
interface LazyCommand extends CliCommandSpec {
  load(): Promise<CliCommand>;
}

/**
 * Ferry's commands, from the generated table: their modules (with the lanes, pg and pg-boss some
 * of them import) are loaded only when one of their commands runs.
 */
const lazyCommands = (table: CliCommandEntry[]): LazyCommand[] => table.map(({ module, ...spec }) => ({ ...spec, load: () => loadCommand(module, spec.path) }));
const defaultCommands = lazyCommands(commandTable);

const stdio: CliIO = {
  out: (text) => process.stdout.write(text + '\n'),
  err: (text) => process.stderr.write(text + '\n'),
  interactive: process.stdin.isTTY === true && process.stdout.isTTY === true,
  ask: async (question) => {
    const { createInterface } = await import('node:readline/promises');
    const rl = createInterface({ input: process.stdin, output: process.stdout });
    try {
      return await rl.question(question);
    } finally {
      rl.close();
    }
  },
  readStdin: async () => {
    let text = '';
    for await (const chunk of process.stdin) text += chunk;
    return text;
  },
};

function commandLine(c: CliCommandSpec): string {
  return ['ferry', ...c.path, c.usage].filter(Boolean).join(' ');
}

function overview(commands: CliCommandSpec[]): string {
  const width = Math.max(...commands.map((c) => c.path.join(' ').length));
  return [
    'usage: ferry <command> [options]   (or: npm run ferry -- <command> [options])',
    '',
    'commands:',
    ...commands.map((c) => `  ${c.path.join(' ').padEnd(width)}  ${c.summary}`),
    '',
    'Run `ferry <command> --help` for its options. The database is DATABASE_URL when set, else the',
    'embedded PostgreSQL in FERRY_DATA_DIR (default ./.ferry/data).',
  ].join('\n');
}

/** A command's spec as text, to compare the table's with the module's. */
function specText(c: CliCommandSpec): string {
  return JSON.stringify({ path: c.path, summary: c.summary, usage: c.usage, options: c.options, positionals: c.positionals });
}

/** `ferry <group> --help`: each command of the group, its usage and what it does. */
function groupHelp(group: CliCommandSpec[]): string {
  return group.map((c) => `usage: ${commandLine(c)}\n  ${c.summary}`).join('\n');
}

function commandHelp(c: CliCommandSpec): string {
  return `usage: ${commandLine(c)}\n\n${c.summary}`;
}

/** The command selected by the longest matching word prefix of argv. */
function select<C extends CliCommandSpec>(commands: C[], argv: string[]): C | undefined {
  let best: C | undefined;
  for (const c of commands) {
    if (c.path.length <= argv.length && c.path.every((w, i) => argv[i] === w)) {
      if (!best || c.path.length > best.path.length) best = c;
    }
  }
  return best;
}

/** Runs one CLI invocation and returns its exit code; never throws for a user's mistake. */
export async function runCli(argv: string[], opts: RunOptions = {}): Promise<number> {
  const env = opts.env ?? process.env;
  const io = opts.io ?? stdio;
  const commands: LazyCommand[] = opts.commands
    ? opts.commands.map((c) => ({ ...c, load: async () => c }))
    : opts.table
      ? lazyCommands(opts.table)
      : defaultCommands;

  const first = argv[0];
  if (first === undefined) {
    io.err(overview(commands));
    return EXIT_USAGE;
  }
  if (first === 'help' || first === '--help' || first === '-h') {
    const topic = select(commands, argv.slice(1));
    const group = commands.filter((c) => argv[1] !== undefined && c.path[0] === argv[1]);
    io.out(topic ? commandHelp(topic) : group.length > 0 ? groupHelp(group) : overview(commands));
    return EXIT_OK;
  }

  const entry = select(commands, argv);
  if (!entry) {
    const group = commands.filter((c) => c.path[0] === first);
    if (group.length > 0 && (argv[1] === '--help' || argv[1] === '-h')) {
      io.out(groupHelp(group));
      return EXIT_OK;
    }
    if (group.length > 0) {
      const sub = argv[1] === undefined ? 'a subcommand is required' : `unknown ${first} command "${argv[1]}"`;
      io.err(`ferry: ${sub}\n\n${group.map((c) => `usage: ${commandLine(c)}`).join('\n')}`);
    } else {
      io.err(`ferry: unknown command "${first}"\n\n${overview(commands)}`);
    }
    return EXIT_USAGE;
  }

  // Until the implementation is loaded, errors are reported with the table's spec.
  let command: CliCommandSpec = entry;
  try {
    let parsed;
    try {
      parsed = parseArgs({
        args: argv.slice(entry.path.length),
        options: { ...entry.options, help: { type: 'boolean', short: 'h' } },
        strict: true,
        allowPositionals: true,
      });
    } catch (err) {
      // --url on a command without it: a database command (or a local one) pointed at a Ferry's API.
      if (argv.slice(entry.path.length).some((a) => a === '--url' || a.startsWith('--url='))) throw notOverApi(entry.path);
      throw new UsageError((err as Error).message, command);
    }
    if (parsed.values.help) {
      io.out(commandHelp(entry));
      return EXIT_OK;
    }
    const { min, max } = entry.positionals ?? { min: 0, max: 0 };
    if (parsed.positionals.length < min || parsed.positionals.length > max) {
      const extra = parsed.positionals.length > max;
      throw new UsageError(
        extra ? `unexpected argument "${parsed.positionals[max]}"` : `missing ${entry.positionals?.names ?? 'argument'}`,
      );
    }
    const implementation = await entry.load();
    command = implementation;
    // Help and parsing came from the table: a module changed since it was generated is said so.
    if (specText(implementation) !== specText(entry)) io.err('ferry: warning: src/cli/command-table.ts is out of date for this command; run `npm run cli-table`');
    const values = parsed.values as CliContext['values'];
    const ctx: CliContext = {
      ...io,
      command: implementation,
      values,
      positionals: parsed.positionals,
      env,
      option: (name) => {
        const v = values[name];
        return typeof v === 'string' ? v : undefined;
      },
      flag: (name) => values[name] === true,
      // Loaded by the commands that open the database only (pg, migrations, pg-boss).
      withDatabase: async (fn, mode) => {
        // FERRY_URL points at a Ferry's API: this command would open a database of its own instead.
        if (env.FERRY_URL) throw databaseOnly(implementation.path);
        const { withCliDatabase, openedDatabase } = await import('./database.ts');
        return withCliDatabase(
          env,
          (db) => {
            io.err(`ferry: ${implementation.path.join(' ')}: database ${openedDatabase(db)}`);
            return fn(db);
          },
          mode,
        );
      },
    };
    return (await implementation.run(ctx)) ?? EXIT_OK;
  } catch (err) {
    return report(err, command, io, env);
  }
}

function report(err: unknown, command: CliCommandSpec, io: CliIO, env: NodeJS.ProcessEnv): number {
  if (err instanceof UsageError) {
    io.err(`ferry: ${err.message}\nusage: ${commandLine(err.command ?? command)}`);
    return EXIT_USAGE;
  }
  if (isFerryError(err)) {
    // Input the domain refused (a bad token name, say) is a usage problem, not a failure.
    if (err.code === 'VALIDATION_FAILED') {
      io.err(`ferry: ${err.message}\nusage: ${commandLine(command)}`);
      return EXIT_USAGE;
    }
    io.err(`ferry: ${err.message}`);
    return EXIT_FAILED;
  }
  if (err instanceof CliError) {
    io.err(`ferry: ${err.message}`);
    return err.exitCode;
  }
  // By name: config.ts (with every lane's config schema) is not loaded for a command that needs none.
  if (err instanceof Error && err.name === 'ConfigError') {
    io.err(`ferry: ${err.message}`);
    return EXIT_FAILED;
  }
  const message = err instanceof Error ? err.message || err.name : String(err);
  io.err(`ferry: ${command.path.join(' ')} failed: ${message}`);
  if (env.FERRY_DEBUG === '1' && err instanceof Error && err.stack) io.err(err.stack);
  else io.err('(set FERRY_DEBUG=1 to see the stack trace)');
  return EXIT_FAILED;
}
