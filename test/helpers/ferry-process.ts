import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { callApi, type Reply } from './http.ts';
import { waitFor } from './wait.ts';

/**
 * A Ferry (`src/main.ts`, or any script of the repository) in a child process, with every line it
 * prints kept: stdout and stderr as text (for "no secret in any log line" checks) and the JSON log
 * lines parsed.
 */

export const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

export interface ChildFerry {
  child: ChildProcess;
  /** stdout and stderr so far, as printed. */
  output(): string;
  lines: Array<Record<string, unknown>>;
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Our environment minus anything that would point a child elsewhere, plus `extra`. */
export function childEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of Object.keys(env)) if (name === 'DATABASE_URL' || name === 'PORT' || name === 'HOST' || name.startsWith('FERRY_')) delete env[name];
  return { ...env, FERRY_LOG_LEVEL: 'info', HOST: '127.0.0.1', PORT: '0', ...extra };
}

/**
 * Parses every line `stream` prints as JSON into `lines` (a line that is not JSON as
 * `{ unparsed: line }`); `onChunk` runs after each chunk with its raw text.
 */
export function collectJsonLines(stream: Readable, lines: Array<Record<string, unknown>>, onChunk?: (chunk: string) => void): void {
  let rest = '';
  stream.setEncoding('utf8').on('data', (chunk: string) => {
    rest += chunk;
    const parts = rest.split('\n');
    rest = parts.pop()!;
    for (const line of parts) {
      if (!line.trim()) continue;
      try {
        lines.push(JSON.parse(line));
      } catch {
        lines.push({ unparsed: line });
      }
    }
    onChunk?.(chunk);
  });
}

/** `detached`: in a process group of its own, so a test can signal the group as a terminal would. */
export function spawnScript(script: string, extra: Record<string, string>, args: string[] = [], opts: { detached?: boolean } = {}): ChildFerry {
  const child = spawn(process.execPath, ['--import', 'tsx', script, ...args], { cwd: repoRoot, env: childEnv(extra), stdio: ['ignore', 'pipe', 'pipe'], detached: opts.detached ?? false });
  let text = '';
  const lines: Array<Record<string, unknown>> = [];
  collectJsonLines(child.stdout!, lines, (chunk) => (text += chunk));
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  return { child, output: () => text, lines, exit };
}

export function spawnFerry(extra: Record<string, string>, opts: { detached?: boolean } = {}): ChildFerry {
  return spawnScript('src/main.ts', extra, [], opts);
}

/** The URL from Ferry's "ferry listening" line; fails when the process exits first. */
export async function listeningUrl(f: ChildFerry, timeoutMs = 60_000): Promise<string> {
  let exited = false;
  void f.exit.then(() => (exited = true));
  const line = await waitFor(
    'ferry to listen',
    async () => {
      const found = f.lines.find((l) => typeof l.url === 'string' && typeof l.msg === 'string' && l.msg.startsWith('ferry listening'));
      if (!found && exited) throw new Error(`ferry exited before listening:\n${f.output()}`);
      return found;
    },
    timeoutMs,
  );
  return line.url as string;
}

/** SIGTERM, then the exit code. */
export async function stopChild(f: ChildFerry, signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
  if (f.child.exitCode !== null || f.child.signalCode !== null) return f.child.exitCode;
  f.child.kill(signal);
  return (await f.exit).code;
}

/** One authenticated JSON call to a Ferry's API. */
export function api(base: string, token: string, method: string, path: string, body?: unknown): Promise<Reply> {
  return callApi(base, method, path, token, body);
}

/** A `node` on PATH older than Ferry needs (outside node_modules), as on a machine whose system Node is 20. */
export function oldSystemNode(): string | null {
  for (const dir of (process.env.PATH ?? '').split(':')) {
    if (!dir || dir.includes('node_modules')) continue;
    const bin = join(dir, 'node');
    if (!existsSync(bin)) continue;
    const probe = spawnSync(bin, ['-p', 'process.versions.node'], { encoding: 'utf8' });
    const [major, minor] = probe.stdout.trim().split('.').map(Number);
    if (major! < 22 || (major === 22 && minor! < 12)) return bin;
  }
  return null;
}
