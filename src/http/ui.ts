/**
 * The visualizer page at /ui: four static files (src/http/ui/) served by Ferry itself, so it works
 * with no internet access and loads nothing from elsewhere (the Content-Security-Policy forbids it).
 * The page holds no data of its own: it reads the inspection API with the token the user gives it,
 * and its proposals and resolutions views read and act through the /v3 routes with that same token
 * (the workers view only reads, GET /v3/workers).
 */
import { readFileSync } from 'node:fs';
import { Hono, type Context } from 'hono';

interface Asset {
  file: string;
  type: string;
}

const assets: Record<string, Asset> = {
  '/ui': { file: 'index.html', type: 'text/html; charset=utf-8' },
  '/ui/': { file: 'index.html', type: 'text/html; charset=utf-8' },
  '/ui/app.js': { file: 'app.js', type: 'text/javascript; charset=utf-8' },
  // The diagrams' layouts, a module of its own so tests can check them without a browser.
  '/ui/layout.js': { file: 'layout.js', type: 'text/javascript; charset=utf-8' },
  '/ui/app.css': { file: 'app.css', type: 'text/css; charset=utf-8' },
};

export const UI_CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const cache = new Map<string, string>();
function content(file: string): string {
  let text = cache.get(file);
  if (text === undefined) {
    text = readFileSync(new URL(`./ui/${file}`, import.meta.url), 'utf8');
    cache.set(file, text);
  }
  return text;
}

export function uiRoutes(): Hono {
  const app = new Hono();
  const serve = (c: Context) => {
    const asset = assets[c.req.path];
    return c.body(content(asset.file), 200, {
      'Content-Type': asset.type,
      'Content-Security-Policy': UI_CONTENT_SECURITY_POLICY,
      'X-Content-Type-Options': 'nosniff',
      'Referrer-Policy': 'no-referrer',
      // Small files that change with Ferry's version: revalidate rather than risk a stale page.
      'Cache-Control': 'no-cache',
    });
  };
  for (const path of Object.keys(assets)) app.get(path, serve);
  return app;
}
