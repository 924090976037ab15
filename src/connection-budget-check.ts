/**
 * The start-up side of the connection budget: read the server's figures, fit the pools, and hand
 * back the configuration with the sizes this process (and the worker processes it forks) must use,
 * or refuse to start. See src/connection-budget.ts for the arithmetic.
 */
import { ConfigError, type FerryConfig } from './config.ts';
import { clusterShape, planBudget, processNeeds, RUNTIME_APP_NAMES, type BudgetPlan } from './connection-budget.ts';
import type { Logger } from './log.ts';
import { readServerCapacity } from './persistence/connections.ts';

/** A cluster that cannot fit: start stops with this one line and exit code 1, like a bad setting. */
export class ConnectionBudgetError extends ConfigError {
  constructor(readonly plan: Extract<BudgetPlan, { ok: false }>) {
    super('FERRY_WORKER_PROCESSES', plan.message);
    this.message = plan.message;
    this.name = 'ConnectionBudgetError';
  }
}

/**
 * Checks the budget of the cluster this process belongs to and returns the configuration with the
 * fitted pool sizes. `databaseUrl` is where the pools connect, `directUrl` where session work
 * (LISTEN, migrations, this check) goes; they differ only behind a transaction-mode pooler.
 */
export async function applyConnectionBudget(
  config: FerryConfig,
  role: 'api' | 'worker',
  urls: { databaseUrl: string; directUrl: string },
  log: Logger,
): Promise<FerryConfig> {
  if (!config.connectionBudgetEnabled) return config;
  const shape = clusterShape({ ...config, databaseUrl: urls.databaseUrl, databaseDirectUrl: urls.directUrl }, role);
  // As the application role (the direct URL): a running Ferry never holds the owner's URL, and the
  // figures the count needs are readable by any role (src/persistence/connections.ts).
  const capacity = await readServerCapacity(urls.directUrl, RUNTIME_APP_NAMES);
  const configured = { pool: config.dbPoolMax, worker: config.workerPoolMax ?? config.dbPoolMax, pgboss: config.pgbossPoolMax, sim: config.simPoolMax };
  const plan = planBudget({ shape, configured, capacity, reserve: config.dbConnectionReserve });
  if (!plan.ok) throw new ConnectionBudgetError(plan);
  const summary = {
    api_processes: shape.apiProcesses,
    worker_processes: shape.workerProcesses,
    pooled: shape.pooled,
    max_connections: capacity.maxConnections,
    in_use_by_others: capacity.inUseByOthers,
    others_by_application: capacity.othersByApplication,
    cluster_need: plan.need,
    available: plan.available,
    per_process: processNeeds(shape, plan.sizes)[role].total,
    pool: plan.sizes.pool,
    worker_pool: plan.sizes.worker,
    pgboss_pool: plan.sizes.pgboss,
    sim_pool: plan.sizes.sim,
  };
  if (plan.fitted) {
    log.warn(
      { component: 'connection-budget', ...summary, configured },
      `connection budget: pools shrunk to fit ${plan.available} free connections (FERRY_DB_POOL_MAX ${plan.sizes.pool}, FERRY_WORKER_POOL_MAX ${plan.sizes.worker}, FERRY_PGBOSS_POOL_MAX ${plan.sizes.pgboss}, FERRY_SIM_POOL_MAX ${plan.sizes.sim})`,
    );
  } else {
    log.info({ component: 'connection-budget', ...summary }, 'connection budget fits');
  }
  return { ...config, dbPoolMax: plan.sizes.pool, workerPoolMax: plan.sizes.worker, pgbossPoolMax: plan.sizes.pgboss, simPoolMax: plan.sizes.sim };
}

/** The environment a forked worker process gets so it opens exactly the fitted pools. */
export function budgetEnv(config: FerryConfig): Record<string, string> {
  return {
    FERRY_DB_POOL_MAX: String(config.dbPoolMax),
    FERRY_WORKER_POOL_MAX: String(config.workerPoolMax ?? config.dbPoolMax),
    FERRY_PGBOSS_POOL_MAX: String(config.pgbossPoolMax),
    FERRY_SIM_POOL_MAX: String(config.simPoolMax),
  };
}
