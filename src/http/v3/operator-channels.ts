import { z } from '@hono/zod-openapi';
import { NOTIFY_CHANNEL_NAME } from '../../config.ts';
import {
  CHANNEL_LIMITS,
  createChannel,
  deleteChannel,
  listChannels,
  showChannel,
  updateChannel,
  type ChannelServiceDeps,
} from '../../services/operator-channels.ts';
import { actorOf, resourceApp, type V3Context } from './context.ts';
import { conflict, isoTime, jsonBody, jsonResponse, notFound, unprocessable } from './schemas.ts';
import { apiRoute, readRoute } from './route.ts';

/**
 * /v3/operator-channels: where operator notifications go (docs/operations.md, "Operator
 * notifications"). Admin only (notify.channel). The channels of FERRY_NOTIFY_CHANNELS are listed
 * read-only (source "config"); the others are made, changed and deleted here, through the operator
 * channel service, which writes the audit events. A secret is accepted and never answered.
 */

const tags = ['Operator channels'];
const permission = 'notify.channel' as const;

const int = (field: keyof typeof CHANNEL_LIMITS, description: string) =>
  z.number().int().min(CHANNEL_LIMITS[field][0]).max(CHANNEL_LIMITS[field][1]).openapi({ description });

const settings = {
  rate_limit_per_minute: int('rate_limit_per_minute', 'At most this many delivery attempts per minute; default 30').optional(),
  dedup_seconds: int('dedup_seconds', 'An event saying what the channel was told within this window is suppressed; default 3600').optional(),
  max_attempts: int('max_attempts', 'Attempts before a delivery fails; default 5').optional(),
  timeout_ms: int('timeout_ms', 'Per attempt; default 5000').optional(),
  enabled: z.boolean().optional().openapi({ description: 'A disabled channel is sent nothing; default true' }),
};
const url = z.string().min(1).max(2048).openapi({ format: 'uri', description: 'Checked like a callback destination\'s URL (FERRY_CALLBACK_ALLOWED_*)' });
const secret = z
  .string()
  .min(1)
  .max(200)
  .openapi({ description: 'Write-only: the Standard Webhooks secret (whsec_...) a webhook channel signs with. Never returned.', writeOnly: true });

const CreateBody = z
  .strictObject({
    name: z.string().regex(NOTIFY_CHANNEL_NAME, 'name must be 1-63 lowercase letters, digits, "_", "." or "-", starting with a letter or digit').openapi({ example: 'treasury-ops' }),
    kind: z.enum(['webhook', 'slack']),
    url,
    secret: secret.optional(),
    ...settings,
  })
  .openapi('CreateOperatorChannelRequest');

const UpdateBody = z.strictObject({ url: url.optional(), secret: secret.optional(), ...settings }).openapi('UpdateOperatorChannelRequest');

const NameParams = z.object({
  name: z.string().min(1).max(100).openapi({ param: { name: 'name', in: 'path' }, description: 'The channel name' }),
});

const ChannelSchema = z
  .object({
    name: z.string(),
    kind: z.enum(['webhook', 'slack']),
    source: z.enum(['config', 'api']).openapi({ description: 'config: from FERRY_NOTIFY_CHANNELS, read-only here' }),
    editable: z.boolean(),
    url: z.string().openapi({ description: "A Slack-style channel's origin only (its path is its token); a webhook's URL without its query" }),
    enabled: z.boolean(),
    rate_limit_per_minute: z.number().int(),
    dedup_seconds: z.number().int(),
    max_attempts: z.number().int(),
    timeout_ms: z.number().int(),
    has_secret: z.boolean(),
    secret_set_at: isoTime.nullable(),
    created_by: z.string().nullable(),
    created_at: isoTime.nullable(),
    updated_by: z.string().nullable(),
    updated_at: isoTime.nullable(),
  })
  .openapi('OperatorChannel');
const ChannelResult = z.object({ channel: ChannelSchema }).openapi('OperatorChannelResult');

const readOnly = conflict('The channel is configured in FERRY_NOTIFY_CHANNELS (OPERATOR_CHANNEL_READ_ONLY)');
const badUrl = unprocessable(
  "The URL's host is not allowed (CALLBACK_HOST_NOT_ALLOWED), or is a loopback, private or link-local address outside the allowed networks (CALLBACK_ADDRESS_NOT_ALLOWED)",
);

const listRouteDef = readRoute({
  operationId: 'listOperatorChannels',
  path: '/operator-channels',
  tags,
  summary: 'Operator channels by name, configured and made through the API (never their secrets)',
  permission,
  answer: z.object({ channels: z.array(ChannelSchema) }).openapi('OperatorChannelList'),
  shows: 'Every channel',
});

const showRouteDef = readRoute({
  operationId: 'getOperatorChannel',
  path: '/operator-channels/{name}',
  tags,
  summary: 'One operator channel (never its secret)',
  permission,
  request: { params: NameParams },
  answer: ChannelResult,
  shows: 'The channel',
  errors: notFound,
});

const createRouteDef = apiRoute({
  operationId: 'createOperatorChannel',
  method: 'post',
  path: '/operator-channels',
  tags,
  summary: 'Add an operator channel: a signed webhook (with its secret) or a Slack-style incoming webhook',
  permission,
  request: { body: jsonBody(CreateBody) },
  responses: {
    201: jsonResponse(ChannelResult, 'Added; it starts at the next attention event'),
    ...conflict('A channel with this name exists, made here or configured (OPERATOR_CHANNEL_EXISTS, details.source)'),
    ...badUrl,
  },
});

const updateRouteDef = apiRoute({
  operationId: 'updateOperatorChannel',
  method: 'patch',
  path: '/operator-channels/{name}',
  tags,
  summary: 'Change, disable or enable an operator channel',
  description:
    'Only the fields given change. Disabling settles its pending deliveries as failed (channel_disabled): nothing is sent to it, then or later; ' +
    'enabling starts it at the next attention event. A new secret replaces the old one at once.',
  permission,
  request: { params: NameParams, body: jsonBody(UpdateBody) },
  responses: { 200: jsonResponse(ChannelResult, 'Changed'), ...notFound, ...readOnly, ...badUrl },
});

const deleteRouteDef = apiRoute({
  operationId: 'deleteOperatorChannel',
  method: 'delete',
  path: '/operator-channels/{name}',
  tags,
  summary: 'Delete an operator channel; its pending deliveries fail (channel_deleted), its past ones stay',
  permission,
  request: { params: NameParams },
  responses: { 200: jsonResponse(ChannelResult, 'Deleted; the channel as it was'), ...notFound, ...readOnly },
});

export function operatorChannelRoutes(ctx: V3Context) {
  const app = resourceApp();
  const deps: ChannelServiceDeps = { pool: ctx.pool, config: ctx.config };

  app.openapi(listRouteDef, async (c) => c.json({ channels: await listChannels(deps) }, 200));

  app.openapi(showRouteDef, async (c) => {
    const { name } = c.req.valid('param');
    return c.json({ channel: await showChannel(deps, name) }, 200);
  });

  app.openapi(createRouteDef, async (c) => {
    const body = c.req.valid('json');
    return c.json({ channel: await createChannel(deps, { actor: actorOf(c), ...body }) }, 201);
  });

  app.openapi(updateRouteDef, async (c) => {
    const { name } = c.req.valid('param');
    return c.json({ channel: await updateChannel(deps, { actor: actorOf(c), name, change: c.req.valid('json') ?? {} }) }, 200);
  });

  app.openapi(deleteRouteDef, async (c) => {
    const { name } = c.req.valid('param');
    return c.json({ channel: await deleteChannel(deps, { actor: actorOf(c), name }) }, 200);
  });

  return app;
}
