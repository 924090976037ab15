import { z } from '@hono/zod-openapi';
import { standingOrderStates } from '../../machines/standing-order-machine.ts';
import type { StandingOrderRow, StandingOrderRunRow } from '../../persistence/standing-orders.ts';
import { standingOrderInputSchema } from '../../policy/standing-orders.ts';
import {
  approveStandingOrder,
  listStandingOrderRows,
  pauseStandingOrder,
  proposeStandingOrder,
  rejectStandingOrder,
  resumeStandingOrder,
  revokeStandingOrder,
  standingOrderDetail,
  type StandingOrderDeps,
} from '../../services/standing-orders.ts';
import { actorNames, type ActorNames } from '../actor-names.ts';
import { iso } from '../views.ts';
import { actorOf, resourceApp, type V3Context } from './context.ts';
import { pageLimit } from '../query.ts';
import { EmptyBody, conflict, forbidden, jsonBody, jsonResponse, notFound, unprocessable } from './schemas.ts';
import { apiRoute, readRoute } from './route.ts';

/**
 * Standing orders (docs/policy.md, "Standing orders"): proposed with policy.write, approved with
 * policy.approve by as many other principals as the policy requires for the order's maximum per
 * run; paused, resumed and revoked with policy.write; read by anyone with their run history.
 */

const tags = ['Standing orders'];
const anyObject = z.record(z.string(), z.unknown());

const StandingOrderBody = standingOrderInputSchema.meta({ id: 'StandingOrderRequest' });
const StandingOrderParams = z.object({
  id: z.string().min(1).max(64).openapi({ param: { name: 'id', in: 'path' }, description: 'Standing order id or name' }),
});
const ListQuery = z.object({
  state: z.enum(standingOrderStates).optional(),
  limit: pageLimit(500, 100),
});
const ReasonBody = z.strictObject({ reason: z.string().trim().min(1, 'a reason is required').max(2000) }).openapi('StandingOrderReasonRequest');
const OptionalReasonBody = z.strictObject({ reason: z.string().trim().min(1).max(2000).optional() }).openapi('StandingOrderOptionalReasonRequest');

const StandingOrderSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    state: z.enum(standingOrderStates),
    template_key: z.string(),
    intent: anyObject,
    asset: z.string(),
    destinations: z.array(z.string()),
    max_per_run: z.string(),
    max_per_window: z.string(),
    window_seconds: z.number().int(),
    trigger: anyObject,
    expires_at: z.string(),
    proposed_by: z.string(),
    proposed_by_name: z.string().nullable(),
    required_approvals: z.number().int(),
    approvals: z.array(z.object({ by: z.string(), by_name: z.string().nullable(), at: z.string() })),
    decided_by: z.string().nullable(),
    reason: z.string().nullable(),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .openapi('StandingOrder');

const RunSchema = z
  .object({
    id: z.string(),
    slot_key: z.string(),
    amount: z.string().nullable(),
    destination_entry: z.string().nullable(),
    movement_id: z.string().nullable(),
    outcome: z.enum(['pending', 'approved', 'waiting', 'refused', 'skipped']),
    error_code: z.string().nullable(),
    error_detail: z.string().nullable(),
    created_at: z.string(),
  })
  .openapi('StandingOrderRun');

const ListSchema = z.object({ standing_orders: z.array(StandingOrderSchema) }).openapi('StandingOrderList');
const DetailSchema = z
  .object({
    standing_order: StandingOrderSchema,
    runs: z.array(RunSchema),
    history: z.array(z.object({ seq: z.number().int(), from: z.string(), to: z.string(), event: z.string(), actor: z.string(), at: z.string() })),
  })
  .openapi('StandingOrderDetail');

function orderView(o: StandingOrderRow, names: ActorNames): z.infer<typeof StandingOrderSchema> {
  return {
    id: o.id,
    name: o.name,
    state: o.proposal_state as z.infer<typeof StandingOrderSchema>['state'],
    template_key: o.template_key,
    intent: o.intent,
    asset: o.asset,
    destinations: o.destinations,
    max_per_run: o.max_per_run,
    max_per_window: o.max_per_window,
    window_seconds: o.window_seconds,
    trigger: o.trigger as unknown as Record<string, unknown>,
    expires_at: iso(o.expires_at),
    proposed_by: o.proposed_by,
    proposed_by_name: names(o.proposed_by),
    required_approvals: o.required_approvals,
    approvals: o.approvals.map((a) => ({ by: a.by, by_name: names(a.by), at: a.at })),
    decided_by: o.decided_by,
    reason: o.reason,
    created_at: iso(o.created_at),
    updated_at: iso(o.updated_at),
  };
}

const runView = (r: StandingOrderRunRow): z.infer<typeof RunSchema> => ({
  id: r.id,
  slot_key: r.slot_key,
  amount: r.amount,
  destination_entry: r.destination_entry,
  movement_id: r.movement_id,
  outcome: r.outcome,
  error_code: r.error_code,
  error_detail: r.error_detail,
  created_at: iso(r.created_at),
});

const actorsOf = (o: StandingOrderRow) => [o.proposed_by, o.decided_by, ...o.approvals.map((a) => a.by)];
const answer = (what: string) => jsonResponse(StandingOrderSchema, what);
const stateConflict = conflict('The order is not in a state that takes this (STANDING_ORDER_STATE_CONFLICT), or it expired (STANDING_ORDER_EXPIRED)');

const listRoute = readRoute({ path: '/standing-orders', operationId: 'listStandingOrders', tags, summary: 'Standing orders, newest first', request: { query: ListQuery }, answer: ListSchema, shows: 'The orders' });
const showRoute = readRoute({
  path: '/standing-orders/{id}',
  operationId: 'getStandingOrder',
  tags,
  summary: 'A standing order with its runs (newest first) and its history',
  request: { params: StandingOrderParams },
  answer: DetailSchema,
  shows: 'The order',
  errors: notFound,
});
const proposeRoute = apiRoute({
  method: 'post',
  path: '/standing-orders',
  operationId: 'proposeStandingOrder',
  tags,
  summary: 'Propose a standing order: it runs once approved by as many other principals as the policy requires for its maximum per run',
  permission: 'policy.write',
  request: { body: jsonBody(StandingOrderBody) },
  responses: {
    202: answer('The order, PROPOSED'),
    ...conflict('Another order has this name (STANDING_ORDER_EXISTS)'),
    ...unprocessable('The order contradicts itself or the book (STANDING_ORDER_INVALID), or the policy does not allow its maximum (POLICY_BLOCKED, POLICY_NO_MATCHING_RULE, POLICY_PRICE_UNAVAILABLE)'),
  },
});
const decide = (path: string, operationId: string, summary: string, permission: 'policy.write' | 'policy.approve', body: z.ZodType, ok: string, required = true) =>
  apiRoute({
    method: 'post',
    path: `/standing-orders/{id}/${path}`,
    operationId,
    tags,
    summary,
    permission,
    request: { params: StandingOrderParams, body: jsonBody(body, required) },
    responses: { 200: answer(ok), ...forbidden('The role lacks the permission (FORBIDDEN), or this principal proposed it (FOUR_EYES_VIOLATION)'), ...notFound, ...stateConflict },
  });
const approveRoute = decide('approve', 'approveStandingOrder', 'Approve a proposed standing order (never its proposer); ACTIVE with the last approval it requires', 'policy.approve', EmptyBody, 'The order', false);
const rejectRoute = decide('reject', 'rejectStandingOrder', 'Reject a proposed standing order, with a reason', 'policy.approve', ReasonBody, 'The order, REJECTED');
const pauseRoute = decide('pause', 'pauseStandingOrder', 'Pause an active standing order: it creates no runs until resumed', 'policy.write', OptionalReasonBody, 'The order, PAUSED', false);
const resumeRoute = decide('resume', 'resumeStandingOrder', 'Resume a paused standing order', 'policy.write', EmptyBody, 'The order, ACTIVE', false);
const revokeRoute = decide('revoke', 'revokeStandingOrder', 'Revoke a standing order for good', 'policy.write', OptionalReasonBody, 'The order, REVOKED', false);

export function standingOrderRoutes(ctx: V3Context) {
  const app = resourceApp();
  const deps = (): StandingOrderDeps => ({ ...ctx.movementDeps(), config: ctx.config });
  const one = async (o: StandingOrderRow) => orderView(o, await actorNames(ctx.pool, actorsOf(o)));
  const reason = (body: unknown) => (body && typeof body === 'object' && 'reason' in body ? (body as { reason?: string }).reason : undefined);

  app.openapi(listRoute, async (c) => {
    const q = c.req.valid('query');
    const rows = await listStandingOrderRows(ctx.pool, { state: q.state, limit: q.limit });
    const names = await actorNames(ctx.pool, rows.flatMap(actorsOf));
    return c.json({ standing_orders: rows.map((o) => orderView(o, names)) }, 200);
  });
  app.openapi(showRoute, async (c) => {
    const d = await standingOrderDetail(ctx.pool, c.req.valid('param').id);
    return c.json(
      {
        standing_order: await one(d.order),
        runs: d.runs.map(runView),
        history: d.history.map((t) => ({ seq: t.seq, from: t.from_state, to: t.to_state, event: t.event_type, actor: t.actor, at: iso(t.at) })),
      },
      200,
    );
  });
  app.openapi(proposeRoute, async (c) => c.json(await one(await proposeStandingOrder(deps(), c.req.valid('json'), actorOf(c))), 202));
  app.openapi(approveRoute, async (c) => c.json(await one(await approveStandingOrder(deps(), c.req.valid('param').id, actorOf(c))), 200));
  app.openapi(rejectRoute, async (c) => c.json(await one(await rejectStandingOrder(deps(), c.req.valid('param').id, actorOf(c), reason(c.req.valid('json'))!)), 200));
  app.openapi(pauseRoute, async (c) => c.json(await one(await pauseStandingOrder(deps(), c.req.valid('param').id, actorOf(c), reason(c.req.valid('json')))), 200));
  app.openapi(resumeRoute, async (c) => c.json(await one(await resumeStandingOrder(deps(), c.req.valid('param').id, actorOf(c))), 200));
  app.openapi(revokeRoute, async (c) => c.json(await one(await revokeStandingOrder(deps(), c.req.valid('param').id, actorOf(c), reason(c.req.valid('json')))), 200));
  return app;
}
