import type { OpenAPIHono } from '@hono/zod-openapi';
import { registerCallbackWebhooks } from './v3/webhooks.ts';

/**
 * The OpenAPI 3.1 document, generated from the zod schemas the routes validate with, so what is
 * published is what is enforced. Served without authentication: it describes the API, it grants
 * nothing.
 */

export const OPENAPI_PATH = '/openapi.json';

const description = [
  'Ferry moves funds through multi-step plans that are compiled from templates, approved by a second person and',
  'executed durably. Every /v3 route needs `Authorization: Bearer <token>` (tokens are created with',
  '`npm run ferry -- tokens create --name NAME --role ROLE`); each operation names the permission it needs in `x-ferry-permission`.',
  'Errors always have the body `{"error": {"code", "message", "details"}}` with a stable code.',
].join(' ');

/** Builds the document from everything registered on the app so far. */
export function openApiDocument(app: OpenAPIHono<any, any, any>): Record<string, unknown> {
  app.openAPIRegistry.registerComponent('securitySchemes', 'bearerAuth', {
    type: 'http',
    scheme: 'bearer',
    description: 'An API token (fy_...) created with the ferry CLI',
  });
  registerCallbackWebhooks(app);
  return app.getOpenAPI31Document({
    openapi: '3.1.0',
    info: { title: 'Ferry API', version: '3', description },
    tags: [
      { name: 'Templates', description: 'Plan templates and their immutable versions' },
      { name: 'Movements', description: 'Movement requests: creation, approval, control and history' },
      { name: 'Registry', description: 'Executors and signers, their health and signer identity' },
      { name: 'Callbacks', description: 'Signed callbacks owed to movement callers' },
      { name: 'Audit', description: 'The hash-chained audit trail' },
    ],
  }) as unknown as Record<string, unknown>;
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
