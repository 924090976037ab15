import { formatUnits } from 'viem';
import { chainIdOf } from '../../balances/watch.ts';
import { listBalances, type BalanceListRow } from '../../persistence/balances.ts';
import { resourceApp, type V3Context } from './context.ts';
import { BalanceListQuery, BalancePageSchema } from './schemas.ts';
import { pageRoute } from './route.ts';

const listRoute = pageRoute({
  operationId: 'listBalances',
  path: '/balances',
  tags: ['Balances'],
  summary: 'The latest balance of every watched wallet, asset and chain, with its age and staleness',
  query: BalanceListQuery,
  page: BalancePageSchema,
  shows: 'One page of balances, by chain, wallet and asset',
});

function balanceView(row: BalanceListRow) {
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
  };
}

export function balanceRoutes(ctx: V3Context) {
  const app = resourceApp();
  app.openapi(listRoute, async (c) => {
    const q = c.req.valid('query');
    const chain = q.chain && /^[0-9]+$/.test(q.chain) ? `eip155:${q.chain}` : q.chain;
    // EVM addresses are stored lowercase; sim wallet names as configured.
    const wallet = q.address && /^0x[0-9a-fA-F]{40}$/.test(q.address) ? q.address.toLowerCase() : q.address;
    const page = await listBalances(ctx.pool, {
      chain,
      wallet,
      asset: q.asset,
      staleThresholdSeconds: ctx.config.balanceStaleThresholdSeconds,
      limit: q.limit,
      cursor: q.cursor ?? null,
    });
    return c.json({ balances: page.balances.map(balanceView), next_cursor: page.next_cursor }, 200);
  });
  return app;
}
