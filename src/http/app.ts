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
import { AuthThrottle } from './auth-throttle.ts';
import { installErrorHandling, validationHook } from './errors.ts';
import { healthRoutes } from './health.ts';
import { Dashboards, dashboardRoutes } from './dashboard.ts';
import { EventStreams, inspectRoutes } from './inspect.ts';
import { metricsRoutes } from './metrics.ts';
import { uiRoutes } from './ui.ts';
import { mountDocs } from './docs.ts';
import { mountOpenApi } from './openapi.ts';
import { v3Routes, type ApiRuntime } from './v3/index.ts';
import type { BalanceSweepDeps } from '../balances/sweep.ts';

/**
 * What one app holds open besides its routes: its event streams and its dashboard's pools. Made by
 * createApp for that app alone, so two apps in one process (tests run several) never share, count
 * or close each other's.
 */
export interface AppResources {
  /** This app's open event streams; `end()` them before closing its server (docs: src/http/inspect.ts). */
  eventStreams: EventStreams;
  /** This app's dashboard handlers; closed by `close()`. */
  dashboards: Dashboards;
  /** Ends the event streams and closes the dashboard's pools; call once the server stopped serving. */
  close(): Promise<void>;
}

/** The Hono app createApp builds, with the resources it holds. */
export type FerryApp = OpenAPIHono & AppResources;

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
  /**
   * The worker runtime (startRuntime's result), started before the app is built so the first request
   * finds it. Without one (an app built only to read) /v3 changes answer 503.
   */
  runtime?: ApiRuntime;
  /** A direct connection string for session work (LISTEN, the dashboard) when `pool` goes through a pooler. */
  directDatabaseUrl?: string;
  /** Failed-authentication counts; createApp makes one per app from the configuration when absent. */
  authThrottle?: AuthThrottle;
  /** The balance sources of GET /v3/balances?fresh=true (tests); made from the configuration when absent. */
  balanceSources?: BalanceSweepDeps;
}

export function createApp(given: AppDeps): FerryApp {
  // One throttle for every route that takes a token (/v3, /inspect, /metrics, the dashboard), so an
  // address's failures count the same wherever it guesses.
  const deps: AppDeps = {
    ...given,
    authThrottle:
      given.authThrottle ??
      new AuthThrottle({
        limit: given.config.authFailureLimit,
        windowMs: given.config.authFailureWindowSeconds * 1000,
        maxAddresses: given.config.authFailureMaxAddresses,
      }),
  };
  // OpenAPIHono so that OpenAPI route modules mounted below inherit the validation hook.
  const hono = new OpenAPIHono({ defaultHook: validationHook });
  const eventStreams = new EventStreams();
  const dashboards = new Dashboards();
  const app: FerryApp = Object.assign(hono, {
    eventStreams,
    dashboards,
    close: async () => {
      // Both run even when one fails.
      const [streams, pools] = await Promise.allSettled([eventStreams.end(), dashboards.close()]);
      if (streams.status === 'rejected') throw streams.reason;
      if (pools.status === 'rejected') throw pools.reason;
    },
  });
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
  app
    .route('/', metricsRoutes(deps))
    .route('/', inspectRoutes({ ...deps, streams: eventStreams }))
    .route('/', uiRoutes())
    .route('/', dashboardRoutes({ ...deps, dashboards }));
  app.route('/v3', v3Routes(deps));
  mountOpenApi(app);
  mountDocs(app);
  for (const mount of deps.routes ?? []) mount(app, deps);
  return app;
}
