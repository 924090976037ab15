import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConfig } from '../src/config.ts';
import {
  availableConnections,
  clusterNeed,
  clusterShape,
  DASHBOARD_POOL,
  MIN_POOL_SIZES,
  planBudget,
  processNeeds,
  type ClusterShape,
} from '../src/connection-budget.ts';

const defaults = { pool: 20, worker: 20, pgboss: 4, sim: 4 };
const server = (maxConnections: number, inUseByOthers = 0) => ({ maxConnections, reservedConnections: 3, inUseByOthers });
const shape = (over: Partial<ClusterShape> = {}): ClusterShape => ({ apiProcesses: 1, workerProcesses: 4, apiRunsWorkers: false, pooled: false, ...over });

test('per-process needs: pools, LISTEN clients, and the dashboard in an API process', () => {
  const n = processNeeds(shape(), defaults);
  assert.deepEqual(n.worker, { pool: 0, worker: 20, pgboss: 4, sim: 4, listen: 1, dashboard: 0, total: 29 });
  // Without worker loops of its own, the API process never calls the simulated provider.
  assert.deepEqual(n.api, { pool: 20, worker: 0, pgboss: 4, sim: 0, listen: 2, dashboard: DASHBOARD_POOL, total: 36 });
  // Running the loops itself, the API process has the workers' pool beside its own.
  assert.equal(processNeeds(shape({ workerProcesses: 0, apiRunsWorkers: true }), defaults).api.total, 60);
  assert.equal(clusterNeed(shape(), defaults), 36 + 4 * 29);
});

test('available = max_connections - reserved - reserve - others in use', () => {
  assert.equal(availableConnections(server(100, 12), 5), 80);
  assert.equal(availableConnections(server(30, 40), 5), -18);
});

test('configured pools that fit are kept as they are', () => {
  const plan = planBudget({ shape: shape({ workerProcesses: 0, apiRunsWorkers: true }), configured: defaults, capacity: server(100, 10), reserve: 5 });
  assert.deepEqual(plan, { ok: true, sizes: defaults, fitted: false, need: 60, available: 82 });
});

test('pools that do not fit shrink, the largest first, until the cluster fits', () => {
  // 1 API + 4 workers at max_connections 100: 152 wanted, 82 free.
  const plan = planBudget({ shape: shape(), configured: defaults, capacity: server(100, 10), reserve: 5 });
  assert.equal(plan.ok, true);
  if (!plan.ok) return;
  assert.equal(plan.fitted, true);
  assert.ok(plan.need <= 82);
  assert.equal(clusterNeed(shape(), plan.sizes), plan.need);
  // The oversized API and workers' pools gave way in turn; the small ones kept their size.
  assert.deepEqual(plan.sizes, { pool: 6, worker: 6, pgboss: 4, sim: 4 });
  // One connection more would not have fitted: the fit is as large as it can be.
  assert.ok(clusterNeed(shape(), { ...plan.sizes, pool: plan.sizes.pool + 1 }) > 82);
});

test('when even the smallest pools do not fit, the plan refuses and names the settings to change', () => {
  const plan = planBudget({ shape: shape(), configured: defaults, capacity: server(30, 2), reserve: 5 });
  assert.equal(plan.ok, false);
  if (plan.ok) return;
  const minimum = (1 * (MIN_POOL_SIZES.pool + MIN_POOL_SIZES.pgboss + 2 + DASHBOARD_POOL)) + 4 * (MIN_POOL_SIZES.worker + MIN_POOL_SIZES.pgboss + MIN_POOL_SIZES.sim + 1);
  assert.equal(plan.minimumNeed, minimum);
  assert.equal(plan.available, 20);
  assert.doesNotMatch(plan.message, /\n/);
  for (const name of ['FERRY_WORKER_PROCESSES', 'FERRY_API_PROCESSES', 'FERRY_DB_CONNECTION_RESERVE', 'max_connections', `${minimum}`, ' 20 are free']) {
    assert.ok(plan.message.includes(name), `message names ${name}: ${plan.message}`);
  }
});

test('a server already full refuses even one process', () => {
  const plan = planBudget({ shape: shape({ workerProcesses: 0, apiRunsWorkers: true }), configured: defaults, capacity: server(100, 95), reserve: 5 });
  assert.equal(plan.ok, false);
  if (!plan.ok) assert.match(plan.message, /only 0 are free/);
});

test('pools below the minimum are raised to it', () => {
  const plan = planBudget({ shape: shape({ workerProcesses: 1 }), configured: { pool: 1, worker: 1, pgboss: 1, sim: 1 }, capacity: server(100), reserve: 5 });
  assert.equal(plan.ok && plan.sizes.pool, MIN_POOL_SIZES.pool);
});

test('behind a pooler only the direct connections count against max_connections', () => {
  const pooled = shape({ workerProcesses: 64, pooled: true });
  const n = processNeeds(pooled, defaults);
  assert.equal(n.worker.total, 1);
  assert.equal(n.api.total, 2 + DASHBOARD_POOL);
  const plan = planBudget({ shape: pooled, configured: defaults, capacity: server(100, 10), reserve: 5 });
  assert.deepEqual(plan, { ok: true, sizes: defaults, fitted: false, need: 64 + 12, available: 82 });
});

test('the cluster shape comes from the configuration and the process role', () => {
  const c = loadConfig({ FERRY_WORKER_PROCESSES: '4' });
  assert.deepEqual(clusterShape(c, 'api'), { apiProcesses: 1, workerProcesses: 4, apiRunsWorkers: false, pooled: false });
  const alone = loadConfig({});
  // The API process runs the loops itself; a worker started on its own counts at least itself.
  assert.equal(clusterShape(alone, 'api').apiRunsWorkers, true);
  assert.equal(clusterShape(alone, 'worker').workerProcesses, 1);
  const onlyWorkers = loadConfig({ FERRY_API_PROCESSES: '0', FERRY_WORKER_PROCESSES: '4' });
  assert.deepEqual(clusterShape(onlyWorkers, 'worker'), { apiProcesses: 0, workerProcesses: 4, apiRunsWorkers: false, pooled: false });
  const pooled = loadConfig({ DATABASE_URL: 'postgres://u@127.0.0.1:6432/db', FERRY_DATABASE_DIRECT_URL: 'postgres://u@127.0.0.1:5432/db' });
  assert.equal(clusterShape(pooled, 'worker').pooled, true);
  const same = loadConfig({ DATABASE_URL: 'postgres://u@127.0.0.1:5432/db', FERRY_DATABASE_DIRECT_URL: 'postgres://u@127.0.0.1:5432/db' });
  assert.equal(clusterShape(same, 'worker').pooled, false);
});
