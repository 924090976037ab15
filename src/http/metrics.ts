/**
 * GET /metrics: the process's Prometheus registry (src/metrics.ts) in the text exposition format.
 *
 * It needs a token with 'read' (a viewer token is enough). Prometheus sends one natively
 * (`authorization: { credentials: ... }` in a scrape config), and the by-state counts are business
 * information (how much is moving, how much is stuck) that an unauthenticated port should not give
 * away.
 *
 * Counters are per process; the gauges of requests and nodes by state, and of the watched balances,
 * are read from the database at scrape time, so every process reports the same, cluster-wide,
 * numbers for them.
 */
import { Hono } from 'hono';
import { movementStates } from '../machines/movement-machine.ts';
import { nodeStates } from '../machines/node-machine.ts';
import { standingOrderStates } from '../machines/standing-order-machine.ts';
import { lanes } from '../executors/lanes.ts';
import {
  BALANCE_GAUGE_LIMIT,
  balanceAgeSeconds,
  balanceAmount,
  balanceConsecutiveErrors,
  nodesByState,
  registry,
  movementsByState,
  registryDriftsOpen,
  standingOrdersByState,
} from '../metrics.ts';
import { balanceGaugeRows } from '../persistence/balances.ts';
import type { Pool } from '../persistence/db.ts';
import { nodeCountsByState, movementCountsByState, type StateCount } from '../persistence/inspection.ts';
import { openRegistryDriftCounts } from '../persistence/registry-drifts.ts';
import { standingOrderCountsByState } from '../persistence/standing-orders.ts';
import { authenticate, requirePermission, type AuthEnv } from './auth.ts';
import type { AuthThrottle } from './auth-throttle.ts';

/** Sets a gauge for every known state, zero included, so a series never vanishes when a state empties. */
function fill(gauge: typeof nodesByState, known: readonly string[], counts: StateCount[]): void {
  const byState = new Map(counts.map((c) => [c.state, c.count]));
  gauge.reset();
  for (const state of new Set([...known, ...byState.keys()])) gauge.set({ state }, byState.get(state) ?? 0);
}

/**
 * A base-unit integer as a number of whole units: the decimal point placed in the string first, so
 * the only rounding is the float's own (a balance far above 2^53 base units keeps its magnitude).
 */
export function wholeUnits(amount: string, decimals: number): number {
  const negative = amount.startsWith('-');
  const digits = (negative ? amount.slice(1) : amount).padStart(decimals + 1, '0');
  const text = decimals > 0 ? `${digits.slice(0, -decimals)}.${digits.slice(-decimals)}` : digits;
  return Number(negative ? `-${text}` : text);
}

async function refreshBalanceGauges(pool: Pool): Promise<void> {
  const rows = await balanceGaugeRows(pool, BALANCE_GAUGE_LIMIT);
  for (const g of [balanceAmount, balanceAgeSeconds, balanceConsecutiveErrors]) g.reset();
  for (const r of rows) {
    const labels = { chain: r.chain, wallet: r.wallet, asset: r.asset, symbol: r.symbol ?? '' };
    balanceConsecutiveErrors.set(labels, r.consecutive_errors);
    // A balance never fetched has no value to report: its series is absent, not a false zero.
    if (r.amount === null || r.decimals === null || r.age_seconds === null) continue;
    balanceAmount.set(labels, wholeUnits(r.amount, r.decimals));
    balanceAgeSeconds.set(labels, Math.max(0, r.age_seconds));
  }
}

export async function refreshStateGauges(pool: Pool): Promise<void> {
  const [movements, nodes, drifts, orders] = await Promise.all([
    movementCountsByState(pool),
    nodeCountsByState(pool),
    openRegistryDriftCounts(pool),
    standingOrderCountsByState(pool),
    refreshBalanceGauges(pool),
  ]);
  fill(movementsByState, movementStates, movements);
  fill(nodesByState, nodeStates, nodes);
  // Every state has a series, zero included.
  const byState = new Map(orders.map((o) => [o.state, o.count]));
  for (const state of standingOrderStates) standingOrdersByState.set({ state }, byState.get(state) ?? 0);
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
