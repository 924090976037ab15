/**
 * The connection budget: how many PostgreSQL connections a Ferry cluster may open, and whether they
 * fit into what the server has left. Pure arithmetic; the server's figures are read by
 * src/persistence/connections.ts. docs/scaling.md explains the formula.
 *
 * A cluster is `apiProcesses` processes serving HTTP plus `workerProcesses` worker processes, all
 * against one database. Every process opens, at most:
 *   - the API's pool (FERRY_DB_POOL_MAX) in an API process, for HTTP requests;
 *   - the workers' pool (FERRY_WORKER_POOL_MAX) where worker loops run: a worker process, or an API
 *     process that runs the loops itself (then it has both pools, each with its own statement_timeout);
 *   - pg-boss's pool (FERRY_PGBOSS_POOL_MAX);
 *   - the simulation lane's provider pool (FERRY_SIM_POOL_MAX), where worker loops run;
 *   - one LISTEN client for wake-ups;
 * and an API process also one LISTEN client for live inspection streams and the queue dashboard's
 * pool (fixed at DASHBOARD_POOL by the dashboard package, opened only while someone uses it).
 */

/** The application_name of each kind of connection Ferry's runtime opens. */
export const APP_NAMES = {
  api: 'ferry',
  worker: 'ferry-worker',
  pgboss: 'ferry-pgboss',
  sim: 'ferry-sim-provider',
  listen: 'ferry-listen',
  dashboard: 'ferry-dashboard',
  /** Start-up's short-lived connections, covered by the reserve: migrations and this budget's check. */
  migrate: 'ferry-migrate',
  budget: 'ferry-budget',
} as const;

/** Every name above: connections under these names (on Ferry's database) belong to the cluster. */
export const RUNTIME_APP_NAMES: readonly string[] = Object.values(APP_NAMES);

/** The queue dashboard's own pool size (fixed by @pg-boss/dashboard). */
export const DASHBOARD_POOL = 10;

export interface PoolSizes {
  /** The API's pool. */
  pool: number;
  /** The workers' pool. */
  worker: number;
  pgboss: number;
  sim: number;
}

/** The smallest pools Ferry works with: below these a loop could wait for itself. */
export const MIN_POOL_SIZES: Readonly<PoolSizes> = { pool: 2, worker: 2, pgboss: 1, sim: 1 };

export interface ClusterShape {
  apiProcesses: number;
  workerProcesses: number;
  /** The API processes run the worker loops themselves (no separate worker processes). */
  apiRunsWorkers: boolean;
  /**
   * DATABASE_URL reaches PostgreSQL through a transaction-mode pooler (a separate direct URL is
   * set): the pools' connections are the pooler's to bound, and only the direct ones (LISTEN, the
   * dashboard) count against max_connections here.
   */
  pooled: boolean;
}

export interface ServerCapacity {
  maxConnections: number;
  /** superuser_reserved_connections plus reserved_connections (PostgreSQL 16+). */
  reservedConnections: number;
  /** Client connections open now that are not this cluster's runtime connections. */
  inUseByOthers: number;
  /** The same, by application_name (for the message), when known. */
  othersByApplication?: Record<string, number>;
}

export interface ProcessNeed {
  /** The API's pool. */
  pool: number;
  /** The workers' pool. */
  worker: number;
  pgboss: number;
  sim: number;
  listen: number;
  dashboard: number;
  total: number;
}

function need(parts: Omit<ProcessNeed, 'total'>): ProcessNeed {
  return { ...parts, total: parts.pool + parts.worker + parts.pgboss + parts.sim + parts.listen + parts.dashboard };
}

/** What one process of each kind may open against PostgreSQL (pooled connections count 0 behind a pooler). */
export function processNeeds(shape: ClusterShape, sizes: PoolSizes): { api: ProcessNeed; worker: ProcessNeed } {
  const direct = (n: number) => (shape.pooled ? 0 : n);
  return {
    api: need({
      pool: direct(sizes.pool),
      worker: shape.apiRunsWorkers ? direct(sizes.worker) : 0,
      pgboss: direct(sizes.pgboss),
      sim: shape.apiRunsWorkers ? direct(sizes.sim) : 0,
      listen: 2,
      dashboard: DASHBOARD_POOL,
    }),
    worker: need({ pool: 0, worker: direct(sizes.worker), pgboss: direct(sizes.pgboss), sim: direct(sizes.sim), listen: 1, dashboard: 0 }),
  };
}

/** Connections the whole cluster may open: A × api + W × worker. */
export function clusterNeed(shape: ClusterShape, sizes: PoolSizes): number {
  const n = processNeeds(shape, sizes);
  return shape.apiProcesses * n.api.total + shape.workerProcesses * n.worker.total;
}

/** What the server leaves the cluster: max_connections − reserved − reserve − others' connections. */
export function availableConnections(capacity: ServerCapacity, reserve: number): number {
  return capacity.maxConnections - capacity.reservedConnections - reserve - capacity.inUseByOthers;
}

export interface BudgetInput {
  shape: ClusterShape;
  configured: PoolSizes;
  capacity: ServerCapacity;
  /** FERRY_DB_CONNECTION_RESERVE: connections left for operators and migrations. */
  reserve: number;
}

export type BudgetPlan =
  | { ok: true; sizes: PoolSizes; fitted: boolean; need: number; available: number }
  | { ok: false; minimumNeed: number; available: number; message: string };

/**
 * Fits the pools into what is left. The configured sizes when they fit; otherwise the largest pool
 * above its minimum shrinks by one until the cluster fits (so an oversized FERRY_DB_POOL_MAX gives
 * way first, then all three shrink in turn); when even the minimums do not fit, a refusal whose
 * message names what to change.
 */
export function planBudget(input: BudgetInput): BudgetPlan {
  const { shape, capacity, reserve } = input;
  const available = availableConnections(capacity, reserve);
  const sizes: PoolSizes = {
    pool: Math.max(input.configured.pool, MIN_POOL_SIZES.pool),
    worker: Math.max(input.configured.worker, MIN_POOL_SIZES.worker),
    pgboss: Math.max(input.configured.pgboss, MIN_POOL_SIZES.pgboss),
    sim: Math.max(input.configured.sim, MIN_POOL_SIZES.sim),
  };
  let fitted = false;
  const order: Array<keyof PoolSizes> = ['pool', 'worker', 'pgboss', 'sim'];
  while (clusterNeed(shape, sizes) > available) {
    const shrinkable = order.filter((k) => sizes[k] > MIN_POOL_SIZES[k]);
    if (shrinkable.length === 0) break;
    const largest = shrinkable.reduce((a, b) => (sizes[b] > sizes[a] ? b : a));
    sizes[largest]--;
    fitted = true;
  }
  const total = clusterNeed(shape, sizes);
  if (total <= available) return { ok: true, sizes, fitted, need: total, available };
  return { ok: false, minimumNeed: total, available, message: refusal(input, total, available) };
}

function byApplication(apps: Record<string, number> | undefined): string {
  const top = Object.entries(apps ?? {})
    .sort((a, b) => b[1] - a[1])
    .slice(0, 5);
  return top.length ? ` [${top.map(([app, n]) => `${app} ${n}`).join(', ')}]` : '';
}

function refusal(input: BudgetInput, minimum: number, available: number): string {
  const { shape, capacity, reserve } = input;
  const processes = `${shape.apiProcesses} API + ${shape.workerProcesses} worker process${shape.workerProcesses === 1 ? '' : 'es'}`;
  return (
    `connection budget: ${processes} need at least ${minimum} PostgreSQL connections with the smallest pools, ` +
    `but only ${Math.max(available, 0)} are free (max_connections ${capacity.maxConnections} - reserved ${capacity.reservedConnections} ` +
    `- FERRY_DB_CONNECTION_RESERVE ${reserve} - ${capacity.inUseByOthers} in use by others${byApplication(capacity.othersByApplication)}); ` +
    `lower FERRY_WORKER_PROCESSES or FERRY_API_PROCESSES, lower FERRY_DB_CONNECTION_RESERVE, ` +
    `raise PostgreSQL's max_connections, or put PgBouncer in front (DATABASE_URL via PgBouncer, FERRY_DATABASE_DIRECT_URL direct)`
  );
}

/** The cluster as a process of the given role sees it from its configuration. */
export function clusterShape(
  config: { apiProcesses: number; workerProcesses: number; workersEnabled: boolean; databaseUrl?: string; databaseDirectUrl?: string },
  role: 'api' | 'worker',
): ClusterShape {
  // An API process counts itself; a worker started on its own counts itself among the workers.
  const apiProcesses = role === 'api' ? Math.max(config.apiProcesses, 1) : config.apiProcesses;
  const workerProcesses = role === 'worker' ? Math.max(config.workerProcesses, 1) : config.workerProcesses;
  return {
    apiProcesses,
    workerProcesses,
    apiRunsWorkers: config.workersEnabled && config.workerProcesses === 0,
    pooled: Boolean(config.databaseDirectUrl && config.databaseUrl && config.databaseDirectUrl !== config.databaseUrl),
  };
}
