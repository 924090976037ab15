import { createRoute } from '@hono/zod-openapi';
import { listAuditEvents } from '../../persistence/audit.ts';
import { actorNames } from '../actor-names.ts';
import { permitted } from '../auth.ts';
import { resourceApp, type V3Context } from './context.ts';
import { AuditListQuery, AuditPageSchema, bearerSecurity, commonErrors, jsonResponse } from './schemas.ts';
import { auditEventView } from './views.ts';

const listRoute = createRoute({
  method: 'get',
  path: '/audit-events',
  tags: ['Audit'],
  summary: 'The audit chain: every audited action with the hash linking it to the one before',
  security: bearerSecurity,
  ...permitted('read'),
  request: { query: AuditListQuery },
  responses: { 200: jsonResponse(AuditPageSchema, 'One page of audit events'), ...commonErrors },
});

export function auditRoutes(ctx: V3Context) {
  const app = resourceApp();
  app.openapi(listRoute, async (c) => {
    const q = c.req.valid('query');
    const page = await listAuditEvents(ctx.pool, {
      limit: q.limit,
      cursor: q.cursor ?? null,
      order: q.order,
      entity_type: q.entity_type,
      entity_id: q.entity_id,
    });
    const names = await actorNames(ctx.pool, page.events.map((e) => e.actor));
    return c.json({ events: page.events.map((e) => auditEventView(e, names)), next_cursor: page.next_cursor }, 200);
  });
  return app;
}
