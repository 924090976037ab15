import { createRoute } from '@hono/zod-openapi';
import {
  createDestination,
  disableDestination,
  listDestinations,
  rotateDestinationSecret,
  showDestination,
  type DestinationServiceDeps,
} from '../../services/callback-destinations.ts';
import type { DestinationRow } from '../../persistence/callback-destinations.ts';
import { permitted } from '../auth.ts';
import { actorOf, resourceApp, type V3Context } from './context.ts';
import {
  CreateDestinationBody,
  DestinationListSchema,
  DestinationRefParams,
  DestinationResultSchema,
  DestinationSecretSchema,
  EmptyBody,
  RotateSecretBody,
  bearerSecurity,
  commonErrors,
  conflict,
  jsonBody,
  jsonResponse,
  notFound,
  unprocessable,
} from './schemas.ts';

/**
 * /v3/callback-destinations: registered receivers of callbacks, each with its own signing secret.
 * The handlers only translate; the writes (transaction + audit event) are the destination service's.
 */

const tags = ['Callback destinations'];
const permission = permitted('callback.destination');

const createRouteDef = createRoute({
  method: 'post',
  path: '/callback-destinations',
  tags,
  summary: 'Register a callback destination; its signing secret is in this answer only',
  security: bearerSecurity,
  ...permission,
  request: { body: jsonBody(CreateDestinationBody) },
  responses: {
    201: jsonResponse(DestinationSecretSchema, 'Registered; store the secret now'),
    ...commonErrors,
    ...conflict('A destination with this name exists (CALLBACK_DESTINATION_EXISTS)'),
    ...unprocessable('The URL\'s host is not allowed (CALLBACK_HOST_NOT_ALLOWED)'),
  },
});

const listRouteDef = createRoute({
  method: 'get',
  path: '/callback-destinations',
  tags,
  summary: 'Callback destinations by name (never their secrets)',
  security: bearerSecurity,
  ...permission,
  responses: { 200: jsonResponse(DestinationListSchema, 'Every destination'), ...commonErrors },
});

const showRouteDef = createRoute({
  method: 'get',
  path: '/callback-destinations/{id}',
  tags,
  summary: 'One callback destination, by id or name (never its secrets)',
  security: bearerSecurity,
  ...permission,
  request: { params: DestinationRefParams },
  responses: { 200: jsonResponse(DestinationResultSchema, 'The destination'), ...commonErrors, ...notFound },
});

const rotateRouteDef = createRoute({
  method: 'post',
  path: '/callback-destinations/{id}/rotate-secret',
  tags,
  summary: 'Make a new signing secret; the previous ones keep signing for the overlap',
  description:
    'The new secret is in this answer only. Until previous_secrets_expire_at every delivery carries one v1 signature per valid secret ' +
    '(newest first) in Ferry-Signature; afterwards only the new one.',
  security: bearerSecurity,
  ...permission,
  request: { params: DestinationRefParams, body: jsonBody(RotateSecretBody, false) },
  responses: {
    200: jsonResponse(DestinationSecretSchema, 'Rotated; store the new secret now'),
    ...commonErrors,
    ...notFound,
    ...conflict('The destination is disabled (CALLBACK_DESTINATION_DISABLED)'),
  },
});

const disableRouteDef = createRoute({
  method: 'post',
  path: '/callback-destinations/{id}/disable',
  tags,
  summary: 'Stop delivering to a destination',
  description:
    'Its callbacks go to the dead-letter queue at their next attempt (last_error destination_disabled) without being sent, and new ' +
    'movements cannot name it. Disabling again changes nothing.',
  security: bearerSecurity,
  ...permission,
  request: { params: DestinationRefParams, body: jsonBody(EmptyBody, false) },
  responses: { 200: jsonResponse(DestinationResultSchema, 'Disabled'), ...commonErrors, ...notFound },
});

function iso(t: Date | null): string | null {
  return t ? t.toISOString() : null;
}

/** What the API shows of a destination: everything but its secrets. */
export function destinationView(d: DestinationRow) {
  return {
    id: d.id,
    name: d.name,
    url: d.url,
    status: d.status,
    created_by: d.created_by,
    created_at: d.created_at.toISOString(),
    disabled_by: d.disabled_by,
    disabled_at: iso(d.disabled_at),
    secret_created_at: iso(d.secret_created_at),
    previous_secrets_expire_at: iso(d.previous_secrets_expire_at),
  };
}

export function callbackDestinationRoutes(ctx: V3Context) {
  const app = resourceApp();
  const deps: DestinationServiceDeps = { pool: ctx.pool, config: ctx.config };

  app.openapi(createRouteDef, async (c) => {
    const body = c.req.valid('json');
    const made = await createDestination(deps, { actor: actorOf(c), name: body.name, url: body.url });
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
