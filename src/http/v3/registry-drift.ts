import { listRegistryChecks, listRegistryDrifts } from '../../persistence/registry-drifts.ts';
import { resourceApp, type V3Context } from './context.ts';
import { readRoute } from './route.ts';
import { RegistryDriftListQuery, RegistryDriftListSchema } from './schemas.ts';

/** GET /v3/registry-drift: on-chain facts the lanes' configuration asserts and the chain contradicts (verify_drift). */
const listRoute = readRoute({
  operationId: 'listRegistryDrifts',
  path: '/registry-drift',
  tags: ['Registry'],
  summary: "Registry drift: on-chain facts of the lanes' configuration (token decimals, CCTP contracts, OFT peers, bridge code) that the chain contradicts, and those it could not verify",
  request: { query: RegistryDriftListQuery },
  answer: RegistryDriftListSchema,
  shows: 'The drifts, open first, and the facts left unverified by their latest check',
});

const iso = (d: Date | null) => (d ? d.toISOString() : null);

export function registryDriftRoutes(ctx: V3Context) {
  const app = resourceApp();
  app.openapi(listRoute, async (c) => {
    const q = c.req.valid('query');
    const [drifts, unverified, latest] = await Promise.all([
      listRegistryDrifts(ctx.pool, { lane: q.lane, state: q.state, limit: q.limit }),
      listRegistryChecks(ctx.pool, { lane: q.lane, outcome: 'unverified', limit: q.limit }),
      listRegistryChecks(ctx.pool, { lane: q.lane, limit: 1, newest: true }),
    ]);
    const fact = (r: { lane: string; chain_id: number; subject: string; property: string; address: string; expected: string }) => ({
      lane: r.lane,
      chain_id: r.chain_id,
      subject: r.subject,
      property: r.property,
      address: r.address,
      expected: r.expected,
    });
    return c.json(
      {
        drifts: drifts.map((d) => ({
          id: d.id,
          ...fact(d),
          observed: d.observed,
          first_seen: d.first_seen.toISOString(),
          last_seen: d.last_seen.toISOString(),
          resolved_at: iso(d.resolved_at),
          resolution: d.resolution,
        })),
        unverified: unverified.map((u) => ({ ...fact(u), error_code: u.error_code ?? 'RPC_ERROR', checked_at: u.checked_at.toISOString() })),
        last_checked_at: iso(latest[0]?.checked_at ?? null),
      },
      200,
    );
  });
  return app;
}
