/** Worker processes for tests and the benchmark: spawn, wait for exit, poll for a condition. */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Starts a worker-only Ferry process (src/worker.ts) on the given database; `preload` modules load first. */
export function spawnWorker(databaseUrl: string, env: Record<string, string> = {}, preload: string[] = []): ChildProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', ...preload.flatMap((p) => ['--import', p]), 'src/worker.ts'], {
    env: {
      ...process.env,
      DATABASE_URL: databaseUrl,
      FERRY_DATA_DIR: mkdtempSync(join(tmpdir(), 'ferry-worker-')),
      FERRY_LOG_LEVEL: process.env.FERRY_TEST_WORKER_LOG ?? 'warn',
      ...env,
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  return child;
}

export function exited(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
}

/** Polls `check` until it returns a truthy value; fails after `timeoutMs` (a liveness bound, not a speed target). */
export async function waitFor<T>(what: string, check: () => Promise<T | null | undefined | false>, timeoutMs = 60_000, everyMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
