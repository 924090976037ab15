import { z, type OpenAPIHono } from '@hono/zod-openapi';
import { registerCallbackWebhooks } from './v3/webhooks.ts';
import { JSON_COMPONENTS, JSON_VALUE_MARK, JSON_VALUE_REF } from './v3/schemas.ts';

/**
 * The OpenAPI 3.1 document, generated from the zod schemas the routes validate with, so what is
 * published is what is enforced. Served without authentication: it describes the API, it grants
 * nothing.
 */

export const OPENAPI_PATH = '/openapi.json';

const description = [
  'Ferry moves funds through plans of nodes that are compiled from templates, approved by a second person and',
  'executed durably. Every /v3 route needs `Authorization: Bearer <token>` (tokens are created with',
  '`npm run ferry -- tokens create --name NAME --role ROLE`); each operation names the permission it needs in `x-ferry-permission`.',
  'Errors always have the body `{"error": {"code", "message", "details"}}` with a stable code.',
].join(' ');

const registered = new WeakSet<object>();

/**
 * The routes outside /v3 that a client or a monitor uses: liveness, readiness and the metrics. They
 * are plain routes (src/http/health.ts, src/http/metrics.ts), described here once.
 */
function registerServiceRoutes(app: OpenAPIHono<any, any, any>): void {
  const error = { content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } } as const;
  app.openAPIRegistry.registerPath({
    method: 'get',
    path: '/healthz',
    operationId: 'getHealth',
    tags: ['Service'],
    summary: 'Liveness: the process serves HTTP',
    security: [],
    responses: {
      200: { description: 'Alive', content: { 'application/json': { schema: z.object({ status: z.literal('ok') }) } } },
    },
  });
  app.openAPIRegistry.registerPath({
    method: 'get',
    path: '/readyz',
    operationId: 'getReadiness',
    tags: ['Service'],
    summary: 'Readiness: the database answers and every migration is applied',
    security: [],
    responses: {
      200: {
        description: 'Ready',
        content: { 'application/json': { schema: z.object({ status: z.literal('ready'), database: z.literal('ok'), migrations: z.literal('current') }) } },
      },
      503: { description: 'Not ready (DATABASE_UNAVAILABLE, MIGRATIONS_PENDING)', ...error },
      default: { description: 'Any other error', ...error },
    },
  });
  app.openAPIRegistry.registerPath({
    method: 'get',
    path: '/metrics',
    operationId: 'getMetrics',
    tags: ['Service'],
    summary: 'Prometheus metrics (text exposition format 0.0.4); needs a token with read',
    security: [{ bearerAuth: [] }],
    'x-ferry-permission': 'read',
    responses: {
      200: { description: 'The metrics (docs/visualizer.md, "Metrics")', content: { 'text/plain; version=0.0.4': { schema: z.string() } } },
      401: { description: 'No valid bearer token (UNAUTHENTICATED)', ...error },
      403: { description: "The token's role lacks read (FORBIDDEN)", ...error },
      default: { description: 'Any other error', ...error },
    },
  } as never);
}

/** Builds the document from everything registered on the app so far. */
export function openApiDocument(app: OpenAPIHono<any, any, any>): Record<string, unknown> {
  app.openAPIRegistry.registerComponent('securitySchemes', 'bearerAuth', {
    type: 'http',
    scheme: 'bearer',
    description: 'An API token (fy_...) created with the ferry CLI',
  });
  if (!registered.has(app.openAPIRegistry)) {
    registered.add(app.openAPIRegistry);
    for (const [name, schema] of Object.entries(JSON_COMPONENTS)) app.openAPIRegistry.registerComponent('schemas', name, schema as never);
    registerServiceRoutes(app);
  }
  registerCallbackWebhooks(app);
  const doc = app.getOpenAPI31Document({
    openapi: '3.1.0',
    info: {
      title: 'Ferry API',
      version: '3',
      description,
      // OpenAPI 3.1's SPDX identifier (the generator's types know only name and url).
      license: { name: 'Apache-2.0', identifier: 'Apache-2.0' } as { name: string },
    },
    // Relative: the document is served by the instance it describes, at its root.
    servers: [{ url: '/', description: 'The Ferry instance serving this document' }],
    tags: [
      { name: 'Templates', description: 'Plan templates and their immutable versions' },
      { name: 'Movements', description: 'Movements: creation, approval, control and history' },
      { name: 'Registry', description: 'Executors and signers, their health and signer identity' },
      { name: 'Callbacks', description: 'Signed callbacks owed to movement callers' },
      { name: 'Audit', description: 'The hash-chained audit trail' },
      { name: 'Service', description: 'Liveness, readiness and metrics, outside /v3' },
    ],
  }) as unknown as Record<string, unknown>;
  return referToJsonValue(doc) as Record<string, unknown>;
}

/** Replaces each inline any-JSON schema (marked JSON_VALUE_MARK) with a reference to the JsonValue component. */
function referToJsonValue(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(referToJsonValue);
  if (node === null || typeof node !== 'object') return node;
  if ((node as Record<string, unknown>)[JSON_VALUE_MARK] === true) return { $ref: JSON_VALUE_REF };
  return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, referToJsonValue(v)]));
}

/**
 * Serves the document at /openapi.json. It is generated on first request, when every route module
 * has been mounted on the app, and kept: routes do not change while the process runs.
 */
export function mountOpenApi(app: OpenAPIHono<any, any, any>): void {
  let cached: string | null = null;
  app.get(OPENAPI_PATH, (c) => {
    cached ??= JSON.stringify(openApiDocument(app));
    return c.body(cached, 200, { 'content-type': 'application/json; charset=utf-8' });
  });
}
