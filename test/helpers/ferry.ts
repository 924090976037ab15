/** Ferry started in this process, as `npm start` runs it: HTTP on a free loopback port and the workers. */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import { startRuntime, type Runtime } from '../../src/actors/runtime.ts';
import { log } from '../../src/log.ts';
import { startFerry, type FerryHooks, type RunningFerry } from '../../src/main.ts';
import { testDatabase, type TestDb } from './db.ts';

/** Ferry's settings for a test: `databaseUrl`, loopback on a port the OS picks, a data folder of its own, log silent; `env` adds or overrides. */
export function testFerryEnv(databaseUrl: string, env: Record<string, string> = {}): Record<string, string> {
  return {
    DATABASE_URL: databaseUrl,
    HOST: '127.0.0.1',
    PORT: '0',
    FERRY_DATA_DIR: mkdtempSync(join(tmpdir(), 'ferry-test-')),
    FERRY_LOG_LEVEL: process.env.FERRY_LOG_LEVEL ?? 'silent',
    ...env,
  };
}

/**
 * The hook that starts the worker runtime in this process, on the workers' pool as `npm start` does
 * (its loops running when `workers`); `started` receives it (for a test that drives its deps).
 */
export function inProcessRuntime(workers: boolean, started?: (runtime: Runtime) => void): NonNullable<FerryHooks['startRuntime']> {
  return async (r) => {
    const runtime = await startRuntime({ pool: r.workerPool, config: r.config, databaseUrl: r.databaseUrl, log, workers });
    started?.(runtime);
    return runtime;
  };
}

/**
 * Starts Ferry on `databaseUrl` with its worker runtime in this process and a data folder of its own;
 * `env` adds or overrides settings. The caller stops it (before its test database is dropped).
 */
export function startFerryWithWorkers(databaseUrl: string, env: Record<string, string> = {}): Promise<RunningFerry> {
  // Started before the server listens and stopped by Ferry's stop.
  return startFerry(testFerryEnv(databaseUrl, env), { startRuntime: inProcessRuntime(true) });
}

export interface FerryForFile {
  db: TestDb;
  ferry: RunningFerry;
  /** The worker runtime in this process; undefined when started with `runtime: 'none'`. */
  runtime: Runtime | undefined;
}

/**
 * The file's test database and Ferry on it (testFerryEnv plus `env`), stopped when the file ends,
 * before the database is dropped. `runtime`: the worker runtime in this process with its loops
 * running ('workers'), without them ('api': workers run elsewhere, or not at all), or none (then
 * /v3 changes answer 503). `routes` adds test routes.
 */
export async function ferryForFile(
  env: Record<string, string>,
  opts: { runtime: 'workers' | 'api' | 'none'; routes?: FerryHooks['routes'] },
): Promise<FerryForFile> {
  let ferry: RunningFerry | undefined;
  let runtime: Runtime | undefined;
  after(async () => {
    await ferry?.stop();
  });
  const db = await testDatabase();
  const hooks: FerryHooks = { routes: opts.routes };
  if (opts.runtime !== 'none') hooks.startRuntime = inProcessRuntime(opts.runtime === 'workers', (r) => (runtime = r));
  ferry = await startFerry(testFerryEnv(db.url, env), hooks);
  return { db, ferry, runtime };
}
