/** Worker processes for tests and the benchmark: spawn, wait for exit, poll for a condition. */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Starts a worker-only Ferry process (src/worker.ts) on the given database; `preload` modules load
 * first. Its log goes to this process's stdout, or, with `output: 'pipe'`, to the child's stdout
 * stream for the caller to read.
 */
export function spawnWorker(
  databaseUrl: string,
  env: Record<string, string> = {},
  opts: { output?: 'inherit' | 'pipe'; preload?: string[] } = {},
): ChildProcess {
  const preload = (opts.preload ?? []).flatMap((p) => ['--import', p]);
  const child = spawn(process.execPath, ['--import', 'tsx', ...preload, 'src/worker.ts'], {
    env: {
      ...process.env,
      DATABASE_URL: databaseUrl,
      FERRY_DATA_DIR: mkdtempSync(join(tmpdir(), 'ferry-worker-')),
      FERRY_LOG_LEVEL: process.env.FERRY_TEST_WORKER_LOG ?? 'warn',
      ...env,
    },
    stdio: ['ignore', opts.output ?? 'inherit', 'inherit'],
  });
  return child;
}

export function exited(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
}

export interface WaitOptions {
  /** How long to keep trying before failing: a liveness bound, not a speed target. Default 60 s. */
  timeoutMs?: number;
  /** Pause between tries. Default 50 ms. */
  everyMs?: number;
}

/**
 * Polls `check` until it returns a truthy value and returns that value; fails after the timeout with
 * a message naming `what` was awaited. The one bounded wait of the tests and the benchmark.
 */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | null | undefined | false> | T | null | undefined | false,
  timeout: number | WaitOptions = {},
  everyMs?: number,
): Promise<T> {
  const opts = typeof timeout === 'number' ? { timeoutMs: timeout, everyMs } : timeout;
  const timeoutMs = opts.timeoutMs ?? 60_000;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, opts.everyMs ?? 50));
  }
}
