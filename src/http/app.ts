/**
 * The HTTP application: one root app holding the error mapping, the body size limit and request ids,
 * with every route module mounted under it. Route modules either get added here or are passed in
 * `deps.routes` (which is how start-up hooks and tests add theirs).
 */
import { OpenAPIHono } from '@hono/zod-openapi';
import { bodyLimit } from 'hono/body-limit';
import { requestId } from 'hono/request-id';
import type { FerryConfig } from '../config.ts';
import { FerryError } from '../errors.ts';
import type { Pool } from '../persistence/db.ts';
import { installErrorHandling, validationHook } from './errors.ts';
import { healthRoutes } from './health.ts';
import { dashboardRoutes } from './dashboard.ts';
import { inspectRoutes } from './inspect.ts';
import { metricsRoutes } from './metrics.ts';
import { uiRoutes } from './ui.ts';
import { mountDocs } from './docs.ts';
import { mountOpenApi } from './openapi.ts';
import { v3Routes, type ApiRuntime } from './v3/index.ts';

/** Mounts routes on the root app, e.g. `(app, deps) => app.route('/v3', requestRoutes(deps))`. */
export type RouteModule = (app: OpenAPIHono, deps: AppDeps) => void;

/**
 * What the HTTP layer needs from the running process. Other modules add optional fields here as
 * they need them (runtime handles, queue clients), so tests can build an app with only a pool.
 */
export interface AppDeps {
  pool: Pool;
  config: FerryConfig;
  /** Extra route modules, mounted after the built-in ones in the order given. */
  routes?: RouteModule[];
  /** The worker runtime (startRuntime's result). Read per request: /v3 changes answer 503 until it is set. */
  runtime?: ApiRuntime;
  /** A direct connection string for session work (LISTEN, the dashboard) when `pool` goes through a pooler. */
  directDatabaseUrl?: string;
}

export function createApp(deps: AppDeps): OpenAPIHono {
  // OpenAPIHono so that OpenAPI route modules mounted below inherit the validation hook.
  const app = new OpenAPIHono({ defaultHook: validationHook });
  installErrorHandling(app);

  app.use('*', requestId());
  app.use(
    '*',
    bodyLimit({
      maxSize: deps.config.maxBodyBytes,
      // The rest of the body is not read, and the server stops draining it after a moment: say
      // so, or a client would send its next request on a connection about to be closed.
      onError: (c) => {
        c.header('Connection', 'close');
        throw new FerryError('PAYLOAD_TOO_LARGE', `Request body exceeds ${deps.config.maxBodyBytes} bytes`, {
          max_bytes: deps.config.maxBodyBytes,
        });
      },
    }),
  );

  app.route('/', healthRoutes(deps));
  app.route('/', metricsRoutes(deps)).route('/', inspectRoutes(deps)).route('/', uiRoutes()).route('/', dashboardRoutes(deps));
  app.route('/v3', v3Routes(deps));
  mountOpenApi(app);
  mountDocs(app);
  for (const mount of deps.routes ?? []) mount(app, deps);
  return app;
}
