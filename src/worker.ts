/**
 * A worker-only process: the runtime's loops and callback delivery, no HTTP server. Started by
 * the cluster primary (FERRY_WORKER_PROCESSES > 0), or by hand on any machine that reaches the
 * database (DATABASE_URL required). Nothing here depends on process memory for correctness: kill
 * it at any point and another process picks the work up from Postgres.
 */
import cluster from 'node:cluster';
import { realpathSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startRuntime, type Runtime } from './actors/runtime.ts';
import { ConfigError, loadConfig } from './config.ts';
import { applyConnectionBudget } from './connection-budget-check.ts';
import { APP_NAMES } from './connection-budget.ts';
import { log, setLogLevel } from './log.ts';
import { createPool } from './persistence/db.ts';

export async function startWorkerProcess(env: NodeJS.ProcessEnv = process.env): Promise<{ runtime: Runtime; stop(): Promise<void> }> {
  let config = loadConfig(env);
  setLogLevel(config.logLevel);
  // Never the worker's to use (migrations are start-up's): not kept where the runtime could reach it.
  delete process.env.FERRY_DATABASE_OWNER_URL;
  config = { ...config, databaseOwnerUrl: undefined };
  const databaseUrl = config.databaseUrl;
  if (!databaseUrl) throw new ConfigError('DATABASE_URL', 'is required for a worker process');
  const directUrl = config.databaseDirectUrl ?? databaseUrl;
  // A worker the cluster primary forked opens the pools the primary fitted for the whole cluster.
  if (!cluster.isWorker) config = await applyConnectionBudget(config, 'worker', { databaseUrl, directUrl }, log);
  // The workers' pool and its statement_timeout; behind a pooler the timeout is not sent (PgBouncer
  // refuses unknown startup parameters): set it on the role or in the pooler instead.
  const pooled = directUrl !== databaseUrl;
  const pool = createPool(databaseUrl, config.workerPoolMax ?? config.dbPoolMax, APP_NAMES.worker, {
    statementTimeoutMs: pooled ? undefined : config.workerStatementTimeoutMs,
    namedStatements: !pooled,
  });
  const runtime = await startRuntime({ pool, config, databaseUrl, listenUrl: directUrl, log, workers: true });
  log.info({ process_id: runtime.processId }, 'ferry worker started');
  return {
    runtime,
    async stop() {
      await runtime.stop();
      await pool.end();
    },
  };
}

async function runAsProgram(): Promise<void> {
  let worker: Awaited<ReturnType<typeof startWorkerProcess>>;
  try {
    worker = await startWorkerProcess();
  } catch (err) {
    if (err instanceof ConfigError) console.error(err.message);
    else log.fatal({ err }, 'ferry worker failed to start');
    process.exit(1);
  }
  let stopping = false;
  const stop = async (code: number) => {
    if (stopping) return;
    stopping = true;
    await worker.stop().catch((err) => log.error({ err }, 'error while stopping'));
    process.exit(code);
  };
  process.on('SIGTERM', () => void stop(0));
  process.on('SIGINT', () => void stop(0));
  // The core group died: exit non-zero so whoever supervises this process restarts it.
  worker.runtime.done.catch(() => void stop(1));
}

const entry = process.argv[1] ? realpathSync(resolve(process.argv[1])) : '';
if (entry === realpathSync(fileURLToPath(import.meta.url))) void runAsProgram();
