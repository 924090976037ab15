/**
 * GET /metrics: the process's Prometheus registry (src/metrics.ts) in the text exposition format.
 *
 * It needs a token with 'read' (a viewer token is enough). Prometheus sends one natively
 * (`authorization: { credentials: ... }` in a scrape config), and the by-state counts are business
 * information (how much is moving, how much is stuck) that an unauthenticated port should not give
 * away.
 *
 * Counters are per process; the gauges of requests and nodes by state are read from the database at
 * scrape time, so every process reports the same, cluster-wide, numbers for them.
 */
import { Hono } from 'hono';
import { movementStates } from '../machines/movement-machine.ts';
import { nodeStates } from '../machines/node-machine.ts';
import { lanes } from '../executors/lanes.ts';
import { nodesByState, registry, movementsByState, registryDriftsOpen } from '../metrics.ts';
import type { Pool } from '../persistence/db.ts';
import { nodeCountsByState, movementCountsByState, type StateCount } from '../persistence/inspection.ts';
import { openRegistryDriftCounts } from '../persistence/registry-drifts.ts';
import { authenticate, requirePermission, type AuthEnv } from './auth.ts';
import type { AuthThrottle } from './auth-throttle.ts';

/** Sets a gauge for every known state, zero included, so a series never vanishes when a state empties. */
function fill(gauge: typeof nodesByState, known: readonly string[], counts: StateCount[]): void {
  const byState = new Map(counts.map((c) => [c.state, c.count]));
  gauge.reset();
  for (const state of new Set([...known, ...byState.keys()])) gauge.set({ state }, byState.get(state) ?? 0);
}

export async function refreshStateGauges(pool: Pool): Promise<void> {
  const [requests, nodes, drifts] = await Promise.all([movementCountsByState(pool), nodeCountsByState(pool), openRegistryDriftCounts(pool)]);
  fill(movementsByState, movementStates, requests);
  fill(nodesByState, nodeStates, nodes);
  // Every lane that declares baselines has a series, zero included.
  const open = new Map(drifts.map((d) => [d.lane, d.count]));
  registryDriftsOpen.reset();
  for (const lane of new Set([...lanes.filter((l) => l.registryBaselines).map((l) => l.name), ...open.keys()])) registryDriftsOpen.set({ lane }, open.get(lane) ?? 0);
}

export function metricsRoutes(deps: { pool: Pool; authThrottle?: AuthThrottle }): Hono<AuthEnv> {
  const app = new Hono<AuthEnv>();
  app.get('/metrics', authenticate(deps.pool, deps.authThrottle), requirePermission('read'), async (c) => {
    await refreshStateGauges(deps.pool);
    return c.body(await registry.metrics(), 200, { 'Content-Type': registry.contentType, 'Cache-Control': 'no-store' });
  });
  return app;
}
