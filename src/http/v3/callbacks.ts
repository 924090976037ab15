import { redriveCallbackAudited } from '../../callbacks/outbox.ts';
import { listCallbacks } from '../../persistence/callbacks.ts';
import { actorOf, audienceOf, resourceApp, type V3Context } from './context.ts';
import {
  CallbackIdParams,
  CallbackListQuery,
  CallbackPageSchema,
  CallbackResultSchema,
  EmptyBody,
  conflict,
  jsonBody,
  jsonResponse,
  notFound,
} from './schemas.ts';
import { callbackView } from '../views.ts';
import { apiRoute, pageRoute } from './route.ts';

const tags = ['Callbacks'];

const listRoute = pageRoute({
  operationId: 'listCallbacks',
  path: '/callbacks',
  tags,
  summary: 'Callbacks by delivery status, oldest first',
  query: CallbackListQuery,
  page: CallbackPageSchema,
  shows: 'One page of callbacks',
});

const redriveRoute = apiRoute({
  operationId: 'redriveCallback',
  method: 'post',
  path: '/callbacks/{id}/redrive',
  tags,
  summary: 'Send a dead-lettered (or pending) callback again, with its original body, timestamp and nonce',
  permission: 'callback.redrive',
  request: { params: CallbackIdParams, body: jsonBody(EmptyBody, false) },
  responses: {
    200: jsonResponse(CallbackResultSchema, 'Pending again, due now'),
    ...notFound,
    ...conflict('The callback was already delivered (CALLBACK_NOT_REDRIVABLE)'),
  },
});

export function callbackRoutes(ctx: V3Context) {
  const app = resourceApp();

  app.openapi(listRoute, async (c) => {
    const q = c.req.valid('query');
    const page = await listCallbacks(ctx.pool, { status: q.status, movementId: q.movement_id, limit: q.limit, cursor: q.cursor });
    return c.json({ callbacks: page.callbacks.map((row) => callbackView(row, audienceOf(c))), next_cursor: page.nextCursor }, 200);
  });

  app.openapi(redriveRoute, async (c) => {
    const { id } = c.req.valid('param');
    const row = await redriveCallbackAudited(ctx.pool, ctx.callbackQueue(), { actor: actorOf(c), id });
    return c.json({ callback: callbackView(row, audienceOf(c)) }, 200);
  });

  return app;
}
