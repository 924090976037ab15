import { listAuditEvents } from '../../persistence/audit.ts';
import { decodeIdCursor, encodeIdCursor } from '../../persistence/cursor.ts';
import { actorNames } from '../actor-names.ts';
import { resourceApp, type V3Context } from './context.ts';
import { AuditListQuery, AuditPageSchema } from './schemas.ts';
import { auditEventView } from '../views.ts';
import { pageRoute } from './route.ts';

const listRoute = pageRoute({
  operationId: 'listAuditEvents',
  path: '/audit-events',
  tags: ['Audit'],
  summary: 'The audit chain: every audited action with the hash linking it to the one before',
  query: AuditListQuery,
  page: AuditPageSchema,
  shows: 'One page of audit events',
});

export function auditRoutes(ctx: V3Context) {
  const app = resourceApp();
  app.openapi(listRoute, async (c) => {
    const q = c.req.valid('query');
    const page = await listAuditEvents(ctx.pool, {
      limit: q.limit,
      // The chain's own position is an event id; the API hands it out opaque, like every cursor.
      cursor: q.cursor ? String(decodeIdCursor(q.cursor)) : null,
      order: q.order,
      entity_type: q.entity_type,
      entity_id: q.entity_id,
    });
    const names = await actorNames(ctx.pool, page.events.map((e) => e.actor));
    return c.json({ events: page.events.map((e) => auditEventView(e, names)), next_cursor: page.next_cursor === null ? null : encodeIdCursor(page.next_cursor) }, 200);
  });
  return app;
}
