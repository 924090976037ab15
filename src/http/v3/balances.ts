import { formatUnits } from 'viem';
import { chainIdOf } from '../../balances/watch.ts';
import { fetchFreshBalances, keyOf, type FreshResult } from '../../balances/fresh.ts';
import { createBalanceSnapshotDeps, type BalanceSweepDeps } from '../../balances/sweep.ts';
import { FerryError } from '../../errors.ts';
import { log } from '../../log.ts';
import { listBalances, rollupsOf, watchEntryExists, type BalanceListRow } from '../../persistence/balances.ts';
import { resourceApp, type V3Context } from './context.ts';
import { BalanceHistoryQuery, BalanceHistorySchema, BalanceListQuery, BalancePageSchema, notFound } from './schemas.ts';
import { pageRoute, readRoute } from './route.ts';

const listRoute = pageRoute({
  operationId: 'listBalances',
  path: '/balances',
  tags: ['Balances'],
  summary: 'The latest balance of every watched wallet, asset and chain, with its age and staleness',
  query: BalanceListQuery,
  page: BalancePageSchema,
  shows: 'One page of balances, by chain, wallet and asset',
});

const historyRoute = readRoute({
  operationId: 'getBalanceHistory',
  path: '/balances/history',
  tags: ['Balances'],
  summary: "One balance's hourly or daily rollups (min, max, last) for charts",
  request: { query: BalanceHistoryQuery },
  answer: BalanceHistorySchema,
  shows: 'The buckets, oldest first',
  errors: notFound,
});

const normalChain = (chain: string | undefined) => (chain && /^[0-9]+$/.test(chain) ? `eip155:${chain}` : chain);
// EVM addresses are stored lowercase; sim wallet names as configured.
const normalWallet = (wallet: string | undefined) => (wallet && /^0x[0-9a-fA-F]{40}$/.test(wallet) ? wallet.toLowerCase() : wallet);

function balanceView(row: BalanceListRow, fresh?: Map<string, FreshResult>) {
  const base = row.amount === null ? null : BigInt(row.amount);
  return {
    chain: row.chain,
    chain_id: chainIdOf(row.chain),
    lane: row.lane,
    wallet: row.wallet,
    label: row.label,
    asset: row.asset,
    symbol: row.symbol,
    amount: base === null || row.decimals === null ? null : formatUnits(base, row.decimals),
    amount_base_units: base === null ? null : base.toString(),
    decimals: row.decimals,
    as_of: row.as_of?.toISOString() ?? null,
    stale: row.stale,
    last_attempt_at: row.last_attempt_at?.toISOString() ?? null,
    error: row.error_code && row.error_at ? { code: row.error_code, at: row.error_at.toISOString(), consecutive: row.consecutive_errors } : null,
    ...(fresh ? { fresh: fresh.get(keyOf(row)) ?? { status: 'not_fetched' as const, code: null } } : {}),
  };
}

export function balanceRoutes(ctx: V3Context, sources?: BalanceSweepDeps) {
  const app = resourceApp();
  // The fetchers of fresh=true, made on first use (the same as the balance_snapshot sidecar's).
  let made: BalanceSweepDeps | undefined = sources;
  const freshSources = () => (made ??= createBalanceSnapshotDeps({ pool: ctx.pool, config: ctx.config, log }));
  app.openapi(listRoute, async (c) => {
    const q = c.req.valid('query');
    const chain = normalChain(q.chain);
    const wallet = normalWallet(q.address);
    let fresh: Map<string, FreshResult> | undefined;
    if (q.fresh === 'true') {
      if (q.cursor) throw new FerryError('VALIDATION_FAILED', 'fresh=true fetches the first page only; narrow with chain, address or asset instead of a cursor', { field: 'cursor' });
      fresh = await fetchFreshBalances(
        freshSources(),
        { chain, wallet, asset: q.asset },
        { concurrency: ctx.config.balanceFreshConcurrency, timeoutMs: ctx.config.balanceFreshTimeoutMs, limit: q.limit },
      );
    }
    const page = await listBalances(ctx.pool, {
      chain,
      wallet,
      asset: q.asset,
      staleThresholdSeconds: ctx.config.balanceStaleThresholdSeconds,
      limit: q.limit,
      cursor: q.cursor ?? null,
    });
    return c.json({ balances: page.balances.map((row) => balanceView(row, fresh)), next_cursor: page.next_cursor }, 200);
  });
  app.openapi(historyRoute, async (c) => {
    const q = c.req.valid('query');
    const chain = normalChain(q.chain)!;
    const wallet = normalWallet(q.address)!;
    // The asset as stored: 'native', a lowercase token address, or (a symbol) the watched row's asset.
    const found = await listBalances(ctx.pool, { chain, wallet, asset: q.asset, staleThresholdSeconds: ctx.config.balanceStaleThresholdSeconds, limit: 1 });
    const row = found.balances[0];
    const key = { chain, wallet, asset: row?.asset ?? q.asset.toLowerCase() };
    const points = await rollupsOf(ctx.pool, key, q.bucket, { since: q.since ? new Date(q.since) : null, limit: q.limit });
    if (!row && points.length === 0 && !(await watchEntryExists(ctx.pool, key))) {
      throw new FerryError('NOT_FOUND', 'no such watched balance', { kind: 'balance', id: `${chain}/${wallet}/${q.asset}` });
    }
    const units = (v: string, d: number) => formatUnits(BigInt(v), d);
    return c.json(
      {
        chain,
        wallet,
        asset: key.asset,
        symbol: row?.symbol ?? null,
        bucket: q.bucket,
        points: points.map((p) => ({
          bucket_start: p.bucket_start.toISOString(),
          min: units(p.min_amount, p.decimals),
          max: units(p.max_amount, p.decimals),
          last: units(p.last_amount, p.decimals),
          last_at: p.last_at.toISOString(),
          min_base_units: p.min_amount,
          max_base_units: p.max_amount,
          last_base_units: p.last_amount,
          decimals: p.decimals,
          samples: p.samples,
        })),
      },
      200,
    );
  });
  return app;
}
