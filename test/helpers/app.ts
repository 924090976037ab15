/**
 * A test file's database with Ferry's runtime on it, and the app built on both, as the API process
 * builds them (in this process, no HTTP server: call it with app.request through callApi).
 */
import { after } from 'node:test';
import { startBoss, stopBoss } from '../../src/actors/boss.ts';
import { startRuntime, type Runtime } from '../../src/actors/runtime.ts';
import { loadConfig, type FerryConfig } from '../../src/config.ts';
import { createApp, type FerryApp } from '../../src/http/app.ts';
import { log } from '../../src/log.ts';
import { testDatabase, type TestDb } from './db.ts';
import { LOOPBACK_NETWORKS } from './destinations.ts';

/**
 * For a runtime whose workers take movements to their end within a test: short dispatch and
 * observe intervals, and callbacks allowed to reach the tests' loopback receivers.
 */
export const FAST_WORKERS: Readonly<Record<string, string>> = {
  FERRY_CALLBACK_ALLOWED_NETWORKS: LOOPBACK_NETWORKS,
  FERRY_NODE_DISPATCH_INTERVAL_SECONDS: '0.2',
};

export interface RuntimeForFile {
  db: TestDb;
  config: FerryConfig;
  runtime: Runtime;
}

/**
 * The file's test database and a runtime on it, configured from `env` (log silent unless set), its
 * worker loops running or not. The runtime stops when the file ends, before the database is dropped
 * (the stop hook is registered first, and hooks run in registration order).
 */
export async function runtimeForFile(env: Record<string, string>, opts: { workers: boolean }): Promise<RuntimeForFile> {
  let runtime: Runtime | undefined;
  after(async () => {
    await runtime?.stop();
  });
  const db = await testDatabase();
  const config = loadConfig({ FERRY_LOG_LEVEL: 'silent', ...env });
  runtime = await startRuntime({ pool: db.pool, config, databaseUrl: db.url, log, workers: opts.workers });
  return { db, config, runtime };
}

/** runtimeForFile, and the app on that database, configuration and runtime. */
export async function appForFile(env: Record<string, string>, opts: { workers: boolean }): Promise<RuntimeForFile & { app: FerryApp }> {
  const r = await runtimeForFile(env, opts);
  return { ...r, app: createApp({ pool: r.db.pool, config: r.config, runtime: r.runtime }) };
}

export type Boss = Awaited<ReturnType<typeof startBoss>>;

/**
 * The file's test database with pg-boss on it (unsupervised, no schedules) and an app without a
 * runtime, for the pg-boss dashboard mounted in Ferry. When the file ends the app closes (the
 * dashboard's pools are its own) and pg-boss stops, before the database is dropped.
 */
export async function dashboardAppForFile(env: Record<string, string>): Promise<{ db: TestDb; boss: Boss; app: FerryApp }> {
  let boss: Boss | undefined;
  let app: FerryApp | undefined;
  after(async () => {
    await app?.close();
    if (boss) await stopBoss(boss);
  });
  const db = await testDatabase();
  boss = await startBoss(db.url, { supervise: false, schedule: false });
  app = createApp({ pool: db.pool, config: loadConfig({ FERRY_LOG_LEVEL: 'silent', ...env }) });
  return { db, boss, app };
}
