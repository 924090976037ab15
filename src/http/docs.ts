import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { Hono } from 'hono';
import { NotFoundError } from '../errors.ts';
import { OPENAPI_PATH } from './openapi.ts';

/**
 * The interactive API docs at /docs: Swagger UI, served from the installed swagger-ui-dist package
 * through Ferry itself, so the page works on a machine without internet access (no CDN) and the
 * version is the one the lockfile pins.
 */

export const DOCS_PATH = '/docs';
const ASSETS = `${DOCS_PATH}/assets`;

// Only these files are served; nothing else in the package directory is reachable.
const assetTypes: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'swagger-ui-standalone-preset.js': 'text/javascript; charset=utf-8',
  'favicon-32x32.png': 'image/png',
  'favicon-16x16.png': 'image/png',
  'docs-init.js': 'text/javascript; charset=utf-8',
};

function swaggerUiDir(): string {
  return dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
}

// Kept in its own file (not inline) so the page works under a Content-Security-Policy without
// 'unsafe-inline' scripts.
const initScript = `window.addEventListener('load', function () {
  window.ui = SwaggerUIBundle({
    url: ${JSON.stringify(OPENAPI_PATH)},
    dom_id: '#swagger-ui',
    deepLinking: true,
    persistAuthorization: false,
    // The default validator badge would send the document to an outside service.
    validatorUrl: null,
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
    layout: 'StandaloneLayout'
  });
});
`;

const page = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>Ferry API</title>
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <link rel="stylesheet" href="${ASSETS}/swagger-ui.css">
  <link rel="icon" type="image/png" href="${ASSETS}/favicon-32x32.png" sizes="32x32">
  <link rel="icon" type="image/png" href="${ASSETS}/favicon-16x16.png" sizes="16x16">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="${ASSETS}/swagger-ui-bundle.js"></script>
  <script src="${ASSETS}/swagger-ui-standalone-preset.js"></script>
  <script src="${ASSETS}/docs-init.js"></script>
</body>
</html>
`;

/**
 * What the page may load: its own scripts, styles and images from this server, the document and
 * "try it out" requests to this server, nothing inline but styles (Swagger UI sets style
 * attributes), data: images (its icons), no framing, no form posts elsewhere.
 */
export const DOCS_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "form-action 'self'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join('; ');

export function mountDocs(app: Hono<any, any, any>): void {
  const cache = new Map<string, Uint8Array>();
  let dir: string | null = null;

  async function asset(name: string): Promise<Uint8Array> {
    const hit = cache.get(name);
    if (hit) return hit;
    let bytes: Uint8Array;
    if (name === 'docs-init.js') bytes = Buffer.from(initScript, 'utf8');
    else bytes = await readFile(join((dir ??= swaggerUiDir()), name));
    cache.set(name, bytes);
    return bytes;
  }

  app.get(DOCS_PATH, (c) => {
    c.header('Content-Security-Policy', DOCS_CSP);
    c.header('X-Content-Type-Options', 'nosniff');
    return c.html(page);
  });
  app.get(`${ASSETS}/:name`, async (c) => {
    const name = c.req.param('name');
    const type = Object.hasOwn(assetTypes, name) ? assetTypes[name] : undefined;
    if (!type) throw new NotFoundError('docs asset', name);
    const bytes = await asset(name);
    return c.body(bytes as Uint8Array<ArrayBuffer>, 200, {
      'content-type': type,
      'cache-control': 'public, max-age=3600',
      'x-content-type-options': 'nosniff',
    });
  });
}
