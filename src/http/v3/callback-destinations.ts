import {
  createDestination,
  disableDestination,
  listDestinations,
  rotateDestinationSecret,
  showDestination,
  type DestinationServiceDeps,
} from '../../services/callback-destinations.ts';
import type { DestinationRow } from '../../persistence/callback-destinations.ts';
import { actorOf, resourceApp, type V3Context } from './context.ts';
import {
  CreateDestinationBody,
  DestinationListSchema,
  DestinationRefParams,
  DestinationResultSchema,
  DestinationSecretSchema,
  EmptyBody,
  RotateSecretBody,
  conflict,
  jsonBody,
  jsonResponse,
  notFound,
  unprocessable,
} from './schemas.ts';
import { apiRoute, readRoute } from './route.ts';
import { isoOrNull } from '../views.ts';

/**
 * /v3/callback-destinations: registered receivers of callbacks, each with its own signing secret.
 * The handlers only translate; the writes (transaction + audit event) are the destination service's.
 */

const tags = ['Callback destinations'];
const permission = 'callback.destination' as const;

const createRouteDef = apiRoute({
  operationId: 'createCallbackDestination',
  method: 'post',
  path: '/callback-destinations',
  tags,
  summary: 'Register a callback destination; its signing secret is in this answer only',
  permission,
  request: { body: jsonBody(CreateDestinationBody) },
  responses: {
    201: jsonResponse(DestinationSecretSchema, 'Registered; store the secret now'),
    ...conflict('A destination with this name exists (CALLBACK_DESTINATION_EXISTS)'),
    ...unprocessable(
      'The URL\'s host is not allowed (CALLBACK_HOST_NOT_ALLOWED), or is a loopback, private or link-local address outside the allowed networks (CALLBACK_ADDRESS_NOT_ALLOWED)',
    ),
  },
});

const listRouteDef = readRoute({
  operationId: 'listCallbackDestinations',
  path: '/callback-destinations',
  tags,
  summary: 'Callback destinations by name (never their secrets)',
  permission,
  answer: DestinationListSchema,
  shows: 'Every destination',
});

const showRouteDef = readRoute({
  operationId: 'getCallbackDestination',
  path: '/callback-destinations/{id}',
  tags,
  summary: 'One callback destination, by id or name (never its secrets)',
  permission,
  request: { params: DestinationRefParams },
  answer: DestinationResultSchema,
  shows: 'The destination',
  errors: notFound,
});

const rotateRouteDef = apiRoute({
  operationId: 'rotateCallbackDestinationSecret',
  method: 'post',
  path: '/callback-destinations/{id}/rotate-secret',
  tags,
  summary: 'Make a new signing secret; the previous ones keep signing for the overlap',
  description:
    'The new secret is in this answer only. Until previous_secrets_expire_at every delivery carries one v1 signature per valid secret ' +
    '(newest first) in Ferry-Signature; afterwards only the new one.',
  permission,
  request: { params: DestinationRefParams, body: jsonBody(RotateSecretBody, false) },
  responses: {
    200: jsonResponse(DestinationSecretSchema, 'Rotated; store the new secret now'),
    ...notFound,
    ...conflict('The destination is disabled (CALLBACK_DESTINATION_DISABLED)'),
  },
});

const disableRouteDef = apiRoute({
  operationId: 'disableCallbackDestination',
  method: 'post',
  path: '/callback-destinations/{id}/disable',
  tags,
  summary: 'Stop delivering to a destination',
  description:
    'Its callbacks go to the dead-letter queue at their next attempt (last_error destination_disabled) without being sent, and new ' +
    'movements cannot name it. Disabling again changes nothing.',
  permission,
  request: { params: DestinationRefParams, body: jsonBody(EmptyBody, false) },
  responses: { 200: jsonResponse(DestinationResultSchema, 'Disabled'), ...notFound },
});


/** What the API shows of a destination: everything but its secrets. */
export function destinationView(d: DestinationRow) {
  return {
    id: d.id,
    name: d.name,
    url: d.url,
    status: d.status,
    node_events: d.node_events,
    created_by: d.created_by,
    created_at: d.created_at.toISOString(),
    disabled_by: d.disabled_by,
    disabled_at: isoOrNull(d.disabled_at),
    secret_created_at: isoOrNull(d.secret_created_at),
    previous_secrets_expire_at: isoOrNull(d.previous_secrets_expire_at),
  };
}

export function callbackDestinationRoutes(ctx: V3Context) {
  const app = resourceApp();
  const deps: DestinationServiceDeps = { pool: ctx.pool, config: ctx.config };

  app.openapi(createRouteDef, async (c) => {
    const body = c.req.valid('json');
    const made = await createDestination(deps, { actor: actorOf(c), name: body.name, url: body.url, nodeEvents: body.node_events });
    return c.json({ destination: destinationView(made.destination), secret: made.secret }, 201);
  });

  app.openapi(listRouteDef, async (c) => {
    return c.json({ destinations: (await listDestinations(ctx.pool)).map(destinationView) }, 200);
  });

  app.openapi(showRouteDef, async (c) => {
    const { id } = c.req.valid('param');
    return c.json({ destination: destinationView(await showDestination(ctx.pool, id)) }, 200);
  });

  app.openapi(rotateRouteDef, async (c) => {
    const { id } = c.req.valid('param');
    const body = c.req.valid('json') ?? {};
    const rotated = await rotateDestinationSecret(deps, { actor: actorOf(c), ref: id, overlapSeconds: body.overlap_seconds });
    return c.json({ destination: destinationView(rotated.destination), secret: rotated.secret }, 200);
  });

  app.openapi(disableRouteDef, async (c) => {
    const { id } = c.req.valid('param');
    return c.json({ destination: destinationView(await disableDestination(deps, { actor: actorOf(c), ref: id })) }, 200);
  });

  return app;
}
