import { listForeignTransfers } from '../../persistence/cex-transfers.ts';
import { resourceApp, type V3Context } from './context.ts';
import { CexTransferListQuery, CexTransferListSchema } from './schemas.ts';
import { readRoute } from './route.ts';

/** GET /v3/cex-transfers: exchange deposits and withdrawals no movement made (cex_transfer_ingest). */
const listRoute = readRoute({
  operationId: 'listCexTransfers',
  path: '/cex-transfers',
  tags: ['Balances'],
  summary: 'Deposits and withdrawals on exchange accounts that no movement made, newest first',
  request: { query: CexTransferListQuery },
  answer: CexTransferListSchema,
  shows: 'The recorded transfers, newest first',
});

export function cexTransferRoutes(ctx: V3Context) {
  const app = resourceApp();
  app.openapi(listRoute, async (c) => {
    const q = c.req.valid('query');
    const rows = await listForeignTransfers(ctx.pool, { venue: q.venue, limit: q.limit });
    return c.json(
      {
        transfers: rows.map((r) => ({
          id: r.id,
          venue: r.venue,
          direction: r.direction,
          asset: r.asset,
          amount: r.amount,
          network: r.network,
          tx_id: r.tx_id,
          address: r.address,
          provider_id: r.provider_id,
          provider_status: r.provider_status,
          occurred_at: r.occurred_at.toISOString(),
          recorded_at: r.recorded_at.toISOString(),
        })),
      },
      200,
    );
  });
  return app;
}
