/** The `ferry` CLI in a process of its own, run as a user runs it. */
import { spawn, type ChildProcess } from 'node:child_process';
import { repoRoot } from './ferry-process.ts';

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

export interface CliProcess {
  child: ChildProcess;
  /** Settles when the process has exited (a signal counts as code 128). */
  done: Promise<CliRun>;
  /** stdout so far. */
  output(): string;
  /** stderr so far. */
  errors(): string;
}

/** How the CLI is started: the TypeScript entry through tsx, or e.g. ['bin/ferry.js'] for the published one. */
export const CLI_ENTRY = ['--import', 'tsx', 'src/cli/index.ts'];

/**
 * Starts `ferry <args>` in the repository with this process's environment minus whatever would
 * point it at a database or a Ferry of its own (DATABASE_URL, TEST_DATABASE_URL, FERRY_URL,
 * FERRY_TOKEN), plus `env`.
 */
export function startCliProcess(args: string[], env: NodeJS.ProcessEnv = {}, entry: string[] = CLI_ENTRY): CliProcess {
  const base = { ...process.env };
  for (const k of ['DATABASE_URL', 'TEST_DATABASE_URL', 'FERRY_URL', 'FERRY_TOKEN']) delete base[k];
  const child = spawn(process.execPath, [...entry, ...args], { cwd: repoRoot, env: { ...base, ...env } });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const done = new Promise<CliRun>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? 128, stdout, stderr }));
  });
  return { child, done, output: () => stdout, errors: () => stderr };
}

/** startCliProcess, to its end. */
export function runCliProcess(args: string[], env: NodeJS.ProcessEnv = {}, entry: string[] = CLI_ENTRY): Promise<CliRun> {
  return startCliProcess(args, env, entry).done;
}
