/** Ferry started in this process, as `npm start` runs it: HTTP on a free loopback port and the workers. */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startRuntime } from '../../src/actors/runtime.ts';
import { log } from '../../src/log.ts';
import { startFerry, type RunningFerry } from '../../src/main.ts';

/**
 * Starts Ferry on `databaseUrl` with its worker runtime in this process and a data folder of its own;
 * `env` adds or overrides settings. The caller stops it (before its test database is dropped).
 */
export function startFerryWithWorkers(databaseUrl: string, env: Record<string, string> = {}): Promise<RunningFerry> {
  return startFerry(
    {
      DATABASE_URL: databaseUrl,
      HOST: '127.0.0.1',
      PORT: '0',
      FERRY_DATA_DIR: mkdtempSync(join(tmpdir(), 'ferry-test-')),
      FERRY_LOG_LEVEL: process.env.FERRY_LOG_LEVEL ?? 'silent',
      ...env,
    },
    {
      // Started before the server listens and stopped by Ferry's stop.
      startRuntime: (r) => startRuntime({ pool: r.workerPool, config: r.config, databaseUrl: r.databaseUrl, log, workers: true }),
    },
  );
}
