import { cancelMovementAtLanes } from '../../services/movement-cancel.ts';
import {
  approveMovement,
  cancelMovement,
  createInputOf,
  createMovement,
  readMovement,
  requireMovement,
  rejectMovement,
  resumeMovement,
  retryMovementNode,
  type Movement,
} from '../../services/movements.ts';
import { decodeIdCursor, encodeIdCursor } from '../../persistence/cursor.ts';
import { listMovements, transitionsOfMovement } from '../../persistence/movements.ts';
import { listSigners } from '../../persistence/registry.ts';
import { actorNames, movementActors } from '../actor-names.ts';
import { can } from '../auth.ts';
import { actorOf, audienceOf, resourceApp, type V3Context } from './context.ts';
import {
  ApproveBody,
  CreateMovementBody,
  EmptyBody,
  IdempotencyHeaders,
  MovementDetailSchema,
  MovementIdParams,
  MovementListQuery,
  MovementPageSchema,
  ReasonBody,
  RetryBody,
  TransitionListQuery,
  TransitionPageSchema,
  conflict,
  forbidden,
  jsonBody,
  jsonResponse,
  notFound,
  unprocessable,
} from './schemas.ts';
import { effectDisplay, movementDetailView, movementSummaryView, transitionView, type Audience } from '../views.ts';
import { apiRoute, pageRoute, readRoute } from './route.ts';

const tags = ['Movements'];
const refused = conflict('The movement machine does not accept this event in the movement\'s state (INVALID_TRANSITION)');

const createMovementRoute = apiRoute({
  operationId: 'createMovement',
  method: 'post',
  path: '/movements',
  tags,
  summary: 'Create a movement from a template; it waits for approval',
  description:
    'The plan is compiled from the template version (the latest unless given) and the intent. With an Idempotency-Key, ' +
    'repeating the same body returns the original movement (200); a different body with the same key is refused (409).',
  permission: 'movement.create',
  request: { headers: IdempotencyHeaders, body: jsonBody(CreateMovementBody) },
  responses: {
    201: jsonResponse(MovementDetailSchema, 'Created, in PENDING_APPROVAL'),
    200: jsonResponse(MovementDetailSchema, 'The movement an earlier call with this Idempotency-Key created'),
    ...notFound,
    ...conflict('The Idempotency-Key was used with a different body (IDEMPOTENCY_KEY_REUSED), or the callback destination is disabled (CALLBACK_DESTINATION_DISABLED)'),
    ...unprocessable(
      'The plan cannot compile (INVALID_TEMPLATE), the intent does not match the template\'s intent schema or a node\'s token ' +
        '(INTENT_INVALID; details.field and details.rule say which), a number cannot be kept exactly (INEXACT_NUMBER), ' +
        'the callback host is not allowed (CALLBACK_HOST_NOT_ALLOWED), ' +
        'the callback URL is a loopback, private or link-local address outside the allowed networks (CALLBACK_ADDRESS_NOT_ALLOWED) ' +
        'or no callback destination has that name or id (CALLBACK_DESTINATION_UNKNOWN)',
    ),
  },
});

const listRoute = pageRoute({
  operationId: 'listMovements',
  path: '/movements',
  tags,
  summary: 'List movements, newest first',
  query: MovementListQuery,
  page: MovementPageSchema,
  shows: 'One page; pass next_cursor back as cursor for the next',
});

const getRoute = readRoute({
  operationId: 'getMovement',
  path: '/movements/{id}',
  tags,
  summary: 'A movement with its compiled plan and nodes',
  request: { params: MovementIdParams },
  answer: MovementDetailSchema,
  shows: 'The movement',
  errors: notFound,
});

const transitionsRoute = readRoute({
  operationId: 'listMovementTransitions',
  path: '/movements/{id}/transitions',
  tags,
  summary: 'The transition log of a movement and its nodes, oldest first',
  request: { params: MovementIdParams, query: TransitionListQuery },
  answer: TransitionPageSchema,
  shows: 'One page of transitions',
  errors: notFound,
});

const decided = (description: string) => jsonResponse(MovementDetailSchema, description);

const approveRoute = apiRoute({
  operationId: 'approveMovement',
  method: 'post',
  path: '/movements/{id}/approve',
  tags,
  summary: 'Approve a movement (four-eyes; a quorum of distinct approvers moves it to APPROVED)',
  permission: 'movement.approve',
  request: { params: MovementIdParams, body: jsonBody(ApproveBody) },
  responses: {
    200: decided('Approval recorded; APPROVED once the quorum is reached, with the first nodes READY'),
    ...forbidden('The role lacks movement.approve (FORBIDDEN), or this token created the movement (FOUR_EYES_VIOLATION)'),
    ...notFound,
    ...conflict(
      'The reviewed hash is not the movement\'s plan (STALE_PLAN_HASH), this token already approved (ALREADY_APPROVED), ' +
        'the approval window closed (APPROVAL_EXPIRED) or the movement is no longer pending (INVALID_TRANSITION)',
    ),
  },
});

const rejectRoute = apiRoute({
  operationId: 'rejectMovement',
  method: 'post',
  path: '/movements/{id}/reject',
  tags,
  summary: 'Reject a pending movement; one rejection ends it',
  permission: 'movement.approve',
  request: { params: MovementIdParams, body: jsonBody(ReasonBody, false) },
  responses: { 200: decided('REJECTED'), ...notFound, ...refused },
});

const cancelRoute = apiRoute({
  operationId: 'cancelMovement',
  method: 'post',
  path: '/movements/{id}/cancel',
  tags,
  summary: 'Cancel a movement; for an operator, nodes with their provider are cancelled through their lanes',
  description:
    'Without a node in flight the movement is CANCELLED at once. An operator\'s cancel of an EXECUTING movement whose in-flight nodes are SUBMITTED or OBSERVING asks each node\'s lane to cancel its attempt and records the answer on the node (provider_refs.cancel) and in the audit log: a confirmed cancel makes the node CANCELLED and the movement CANCELLED; a pending one (EVM: the zero-value replacement at the nonce, broadcast) leaves the node observed until the chain settles it; a refusal (too late, not cancellable) is 409 CANCEL_REFUSED and the movement goes on. 409 CANCEL_NODE_IN_DISPATCH while a node is PREPARING, AWAITING_SIGNATURE, SUBMITTING or UNKNOWN; 409 CANCEL_NOT_SUPPORTED when no such node\'s lane offers a cancel.',
  permission: 'movement.cancel',
  request: { params: MovementIdParams, body: jsonBody(ReasonBody, false) },
  responses: {
    200: decided('CANCELLED (nodes that had not started are cancelled), or EXECUTING with the cancel asked of the lanes and pending'),
    ...forbidden('The role lacks movement.cancel (FORBIDDEN), or a requester asks to cancel a movement another created (NOT_MOVEMENT_OWNER)'),
    ...notFound,
    ...refused,
  },
});

const resumeRoute = apiRoute({
  operationId: 'resumeMovement',
  method: 'post',
  path: '/movements/{id}/resume',
  tags,
  summary: 'Return a MANUAL_INTERVENTION movement to EXECUTING',
  permission: 'movement.operate',
  request: { params: MovementIdParams, body: jsonBody(EmptyBody, false) },
  responses: { 200: decided('EXECUTING'), ...notFound, ...refused },
});

const retryRoute = apiRoute({
  operationId: 'retryMovementNode',
  method: 'post',
  path: '/movements/{id}/retry',
  tags,
  summary: 'Re-ready a FAILED node whose lane allows retries; the movement returns to EXECUTING',
  permission: 'movement.operate',
  request: { params: MovementIdParams, body: jsonBody(RetryBody) },
  responses: {
    200: decided('The node is READY again'),
    ...notFound,
    ...conflict('The node or movement machine refuses the retry (INVALID_TRANSITION; details.reason RETRY_NOT_ALLOWED when the lane forbids it)'),
  },
});

export function movementRoutes(ctx: V3Context) {
  const app = resourceApp();
  const detail = async (m: Movement, audience: Audience) =>
    movementDetailView(m, audience, await actorNames(ctx.pool, movementActors(m.movement)), effectDisplay(ctx.config, await listSigners(ctx.pool)));

  app.openapi(createMovementRoute, async (c) => {
    const body = c.req.valid('json');
    const headers = c.req.valid('header');
    const created = await createMovement(ctx.movementDeps(), createInputOf(body, actorOf(c), headers['idempotency-key'] ?? null));
    const view = await detail(created, audienceOf(c));
    return created.replayed ? c.json(view, 200) : c.json(view, 201);
  });

  app.openapi(listRoute, async (c) => {
    const q = c.req.valid('query');
    const page = await listMovements(ctx.pool, { state: q.state, templateKey: q.template_key, limit: q.limit, cursor: q.cursor });
    const names = await actorNames(ctx.pool, page.movements.flatMap(movementActors));
    return c.json({ movements: page.movements.map((m) => movementSummaryView(m, audienceOf(c), names)), next_cursor: page.nextCursor }, 200);
  });

  app.openapi(getRoute, async (c) => {
    const { id } = c.req.valid('param');
    return c.json(await detail(await readMovement(ctx.pool, id), audienceOf(c)), 200);
  });

  app.openapi(transitionsRoute, async (c) => {
    const { id } = c.req.valid('param');
    const q = c.req.valid('query');
    await requireMovement(ctx.pool, id);
    const rows = await transitionsOfMovement(ctx.pool, id, q.cursor ? decodeIdCursor(q.cursor) : 0, q.limit + 1);
    const page = rows.slice(0, q.limit);
    const next = rows.length > q.limit ? encodeIdCursor(page[page.length - 1].id) : null;
    const names = await actorNames(ctx.pool, page.map((t) => t.actor));
    return c.json({ transitions: page.map((t) => transitionView(t, names)), next_cursor: next }, 200);
  });

  app.openapi(approveRoute, async (c) => {
    const { id } = c.req.valid('param');
    const { compiled_plan_hash } = c.req.valid('json');
    const moved = await approveMovement(ctx.movementDeps(), id, { actor: actorOf(c), compiledPlanHash: compiled_plan_hash });
    return c.json(await detail(moved, audienceOf(c)), 200);
  });

  app.openapi(rejectRoute, async (c) => {
    const { id } = c.req.valid('param');
    const { reason } = c.req.valid('json');
    return c.json(await detail(await rejectMovement(ctx.movementDeps(), id, { actor: actorOf(c), reason }), audienceOf(c)), 200);
  });

  app.openapi(cancelRoute, async (c) => {
    const { id } = c.req.valid('param');
    const { reason } = c.req.valid('json');
    // Operators steer every movement; a requester cancels only what it asked for.
    const scope = can(c.get('principal').role, 'movement.operate') ? 'any' : 'own';
    // Only an operator's cancel asks lanes to cancel what their provider already has.
    const moved = scope === 'any' ? await cancelMovementAtLanes(ctx.cancelDeps(), id, { actor: actorOf(c), reason, scope }) : await cancelMovement(ctx.movementDeps(), id, { actor: actorOf(c), reason, scope });
    return c.json(await detail(moved, audienceOf(c)), 200);
  });

  app.openapi(resumeRoute, async (c) => {
    const { id } = c.req.valid('param');
    return c.json(await detail(await resumeMovement(ctx.movementDeps(), id, { actor: actorOf(c) }), audienceOf(c)), 200);
  });

  app.openapi(retryRoute, async (c) => {
    const { id } = c.req.valid('param');
    const { node_key } = c.req.valid('json');
    return c.json(await detail(await retryMovementNode(ctx.movementDeps(), id, { actor: actorOf(c), nodeKey: node_key }), audienceOf(c)), 200);
  });

  return app;
}
