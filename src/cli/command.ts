import type { ParseArgsOptionsConfig } from 'node:util';
import { isUuid } from '../ids.ts';
import type { CliDatabase, DatabaseMode } from './database.ts';

/**
 * The shape of one `ferry` command. Commands are plain table entries: adding a command means writing
 * one of these in a module listed in commands.ts and running `npm run cli-table` (help and parsing
 * read the generated command-table.ts); parsing, help and exit codes are shared.
 */
export interface CliCommand {
  /** The words that select it, e.g. ['tokens', 'create']. */
  path: string[];
  summary: string;
  /** Arguments after the command words, for help text, e.g. '--name NAME --role ROLE [--json]'. */
  usage: string;
  options?: ParseArgsOptionsConfig;
  /** Positional arguments accepted after the command words (default none). */
  positionals?: { min: number; max: number; names?: string };
  /** Returns the exit code (0 when omitted). */
  run(ctx: CliContext): Promise<number | void>;
}

/** What help, parsing and selection need of a command: everything but its implementation. */
export type CliCommandSpec = Omit<CliCommand, 'run'>;

/**
 * One row of the command table (command-table.ts, generated from the modules by `npm run cli-table`):
 * the spec and the module that implements the command, imported only when it runs.
 */
export interface CliCommandEntry extends CliCommandSpec {
  module: string;
}

export interface CliIO {
  out(text: string): void;
  err(text: string): void;
  /** A person at a terminal can answer (stdin and stdout are TTYs); false or absent: no questions. */
  interactive?: boolean;
  /** Asks `question` and resolves with the line typed (only when interactive). */
  ask?(question: string): Promise<string>;
  /** All of standard input, as text (`--token-file -`). */
  readStdin?(): Promise<string>;
}

export interface CliContext extends CliIO {
  command: CliCommand;
  values: Record<string, string | boolean | (string | boolean)[] | undefined>;
  positionals: string[];
  env: NodeJS.ProcessEnv;
  /** A string option's value; undefined when absent. */
  option(name: string): string | undefined;
  flag(name: string): boolean;
  /**
   * Runs fn with a pool on Ferry's database (DATABASE_URL, or the embedded server, started for the
   * duration of the command when Ferry is not running). The pool is closed afterwards.
   */
  withDatabase<T>(fn: (db: CliDatabase) => Promise<T>, mode?: DatabaseMode): Promise<T>;
}

/** Bad arguments (throw it from run()): reported with the command's usage and exit code 2. */
export class UsageError extends Error {
  constructor(
    message: string,
    readonly command?: CliCommandSpec,
  ) {
    super(message);
    this.name = 'UsageError';
  }
}

/** An expected failure the user can act on: its message is printed as is, with exit code 1. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode = 1,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

/** `--name NAME | --id ID`: the options of a command that names one thing either way. */
export const NAME_OR_ID = { usage: '--name NAME | --id ID', options: { name: { type: 'string' }, id: { type: 'string' } } } as const;

/** The thing NAME_OR_ID names: exactly one of the two; an --id must be a UUID when `idIs` says what it is. */
export function nameOrId(ctx: Pick<CliContext, 'option'>, idIs?: string): string {
  const name = ctx.option('name');
  const id = ctx.option('id');
  if ((name === undefined) === (id === undefined)) throw new UsageError('give exactly one of --name or --id');
  if (id !== undefined && idIs !== undefined && !isUuid(id)) throw new UsageError(`--id must be ${idIs} (a UUID), got "${id}"`);
  return (id ?? name)!;
}

/** The stable code of a database command refused because FERRY_URL points at a Ferry's API. */
export const DATABASE_ONLY = 'CLI_DATABASE_ONLY';
/** The stable code of `--url` given to a command that does not work over the API. */
export const NOT_OVER_API = 'CLI_NOT_OVER_API';

/**
 * A command that works on a database directly while FERRY_URL names a Ferry: it refuses (exit 2)
 * rather than open this machine's database while the user means another Ferry's.
 */
export function databaseOnly(path: string[]): CliError {
  const name = `ferry ${path.join(' ')}`;
  return new CliError(
    `${DATABASE_ONLY}: ${name} works on a database directly, not over a Ferry's API, and FERRY_URL is set: unset it (FERRY_URL= ${name}) to run it on this machine's database (DATABASE_URL, else the embedded PostgreSQL of FERRY_DATA_DIR)`,
    2,
  );
}

/** `--url` given to a command without it (a database command, or one that runs on this machine): exit 2. */
export function notOverApi(path: string[]): CliError {
  const name = `ferry ${path.join(' ')}`;
  return new CliError(
    `${NOT_OVER_API}: ${name} has no --url: it runs on this machine, not over a Ferry's API (on the database when it needs one: DATABASE_URL, else the embedded PostgreSQL of FERRY_DATA_DIR); drop --url`,
    2,
  );
}

/**
 * A Ferry running on the embedded database migrated it at its start and keeps no superuser login
 * while it runs (docs/security.md, "Least privilege at run time").
 */
export function runningEmbedded(): CliError {
  return new CliError('Ferry is running on this embedded database: its start applied the migrations and it keeps no superuser login while it runs; stop it first');
}
