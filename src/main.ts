/**
 * Start-up: configuration, the database (an external server or the embedded one), migrations, the
 * pool, the runtime (through the hooks) and then the HTTP server; and the reverse on SIGINT/SIGTERM.
 * `npm start` runs this file.
 */
import { realpathSync } from 'node:fs';
import type { Server } from 'node:http';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { serve } from '@hono/node-server';
import pg from 'pg';
import { ConfigError, loadConfig, type FerryConfig } from './config.ts';
import { createApp, type AppDeps, type FerryApp, type RouteModule } from './http/app.ts';
import type { ApiRuntime } from './http/v3/index.ts';
import { setUpDemo } from './demo/template.ts';
import { log, setLogLevel } from './log.ts';
import { applyConnectionBudget, budgetEnv } from './connection-budget-check.ts';
import { APP_NAMES } from './connection-budget.ts';
import { createPool, type Pool } from './persistence/db.ts';
import { EmbeddedStartError, startEmbeddedPostgres, type EmbeddedServer } from './persistence/embedded.ts';
import { rememberNewPort, resolveEmbeddedPort } from './persistence/embedded-port.ts';
import { migrate, pendingMigrations } from './persistence/migrate.ts';
import { auditProtection, prepareDatabase } from './persistence/roles.ts';
import { hasAdminToken } from './persistence/tokens.ts';
import { startWorkerCluster, type WorkerCluster } from './actors/cluster.ts';
import { startRuntime, type Runtime } from './actors/runtime.ts';

/** What start-up has built before the runtime and the HTTP server: handed to `startRuntime`. */
export interface FerryResources {
  config: FerryConfig;
  /** The API's pool (HTTP requests), with the API's statement_timeout. */
  pool: Pool;
  /**
   * The workers' pool, with the workers' statement_timeout: a pool of its own when the worker loops
   * run in this process, else the API's pool (the runtime then only sends jobs and serves the API).
   */
  workerPool: Pool;
  databaseUrl: string;
  /** Where session work goes (LISTEN, migrations): FERRY_DATABASE_DIRECT_URL, else databaseUrl. */
  directDatabaseUrl: string;
  database: 'embedded' | 'external';
}

/** A runtime started for the API (startRuntime's result fits): what /v3 changes need, and its stop. */
export interface StartedRuntime extends ApiRuntime {
  stop(): Promise<void>;
}

/** Everything a started Ferry holds; handed to `onStarted` and `onStopping`. */
export interface StartedFerry extends FerryResources {
  /** The app, with the event streams and dashboard pools it holds (closed by Ferry's stop). */
  app: FerryApp;
  /** What the app was built from, the runtime included; fixed once the app exists. */
  appDeps: Readonly<AppDeps>;
  url: string;
  port: number;
}

/**
 * Extension points for the parts of Ferry that run beside the HTTP server (workers, pg-boss).
 *
 * `startRuntime` runs before the HTTP server listens: what it returns is passed to createApp, so the
 * very first request already finds the runtime (no 503 for a write that came early). Ferry stops it
 * after `onStopping`, while the pool is still open. Without it /v3 changes answer 503.
 * `onStarted` runs once the server listens and before Ferry reports itself started (e.g. to start
 * worker processes). A throw from either aborts the start and undoes what was started.
 * `onStopping` runs after the server has stopped taking requests and before the runtime stops and
 * the pool closes, so whatever it stops can still use both.
 */
export interface FerryHooks {
  routes?: RouteModule[];
  startRuntime?(ferry: FerryResources): StartedRuntime | Promise<StartedRuntime>;
  onStarted?(runtime: StartedFerry): void | Promise<void>;
  onStopping?(runtime: StartedFerry): void | Promise<void>;
}

export interface RunningFerry extends StartedFerry {
  stop(): Promise<void>;
}

const ADMIN_TOKEN_COMMAND = 'npm run ferry -- tokens create --name admin --role admin';

/** How long in-flight requests get to finish on stop before their connections are cut. */
const DRAIN_MS = 5000;

function listen(app: FerryApp, hostname: string, port: number): Promise<{ server: Server; port: number }> {
  return new Promise((resolveListen, reject) => {
    const server = serve({ fetch: app.fetch, hostname, port }, (info) => {
      server.off('error', reject);
      resolveListen({ server: server as Server, port: info.port });
    });
    server.once('error', reject);
  });
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolveClose) => {
    const cut = setTimeout(() => server.closeAllConnections(), DRAIN_MS);
    cut.unref();
    server.close(() => {
      clearTimeout(cut);
      resolveClose();
    });
    server.closeIdleConnections();
  });
}

function urlFor(host: string, port: number): string {
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/** Runs every step even when one fails, then reports the first failure. */
async function runAll(steps: Array<() => Promise<unknown> | unknown>): Promise<void> {
  let first: unknown;
  for (const step of steps) {
    try {
      await step();
    } catch (err) {
      log.error({ err }, 'error while stopping');
      first ??= err;
    }
  }
  if (first !== undefined) throw first;
}

/**
 * Starts Ferry: with DATABASE_URL it uses that server, without it an embedded PostgreSQL kept in
 * FERRY_DATA_DIR (reused on the next start). Migrations run before the server listens; several
 * processes starting at once are safe. A bad configuration value throws a ConfigError naming it.
 */
export async function startFerry(env: NodeJS.ProcessEnv = process.env, hooks: FerryHooks = {}): Promise<RunningFerry> {
  let config = loadConfig(env);
  setLogLevel(config.logLevel);

  // Undo list for a start that fails half-way, run last-in first-out.
  const undo: Array<() => Promise<unknown>> = [];
  const abort = async (err: unknown): Promise<never> => {
    await runAll(undo.reverse()).catch(() => {});
    throw err;
  };

  let embedded: EmbeddedServer | undefined;
  let databaseUrl = config.databaseUrl;
  // The role that migrates (docs/security.md, "Audit log"); without one, DATABASE_URL's role does.
  // The start step's alone: dropped from the configuration and this process's environment before
  // anything else runs, so no worker process, hook or route of a running Ferry can reach it.
  let ownerUrl = config.databaseOwnerUrl;
  config = withoutOwner(config);
  try {
    if (!databaseUrl) {
      embedded = await startEmbedded(config);
      const server = embedded;
      undo.push(() => server.stop());
      // The embedded server's superuser owns and migrates; the runtime is its application role.
      databaseUrl = embedded.appUrl;
      ownerUrl = embedded.url;
    }
    // Behind a transaction-mode pooler, session work (the migrations' advisory lock, LISTEN) needs
    // a direct connection.
    const directDatabaseUrl = config.databaseDirectUrl ?? databaseUrl;
    config = await applyConnectionBudget(config, 'api', { databaseUrl, directUrl: directDatabaseUrl }, log);
    const prepared = await prepareDatabase({
      ownerUrl: ownerUrl ?? directDatabaseUrl,
      appUrl: directDatabaseUrl,
      setup: Boolean(embedded),
      // Without an owner, DATABASE_URL's role migrates; an application role that may not (the
      // migrations ran as a step of their own, `ferry migrate`) finds nothing to do and is not asked.
      migrate: async (url) =>
        ownerUrl || embedded || (await pendingAt(url)) > 0
          ? migrate(url, (msg) => log.debug({ component: 'migrate' }, msg), (count) => progress(`applying ${count} database migration${count === 1 ? '' : 's'}`))
          : [],
    });
    // Migrations and grants are done: the owner's part of start-up is over.
    ownerUrl = undefined;
    await embedded?.dropOwner();
    const applied = prepared.applied;
    // PgBouncer refuses unknown startup parameters: behind it the timeouts are the role's or the pooler's.
    const pooled = directDatabaseUrl !== databaseUrl;
    const pool = createPool(databaseUrl, config.dbPoolMax, APP_NAMES.api, {
      statementTimeoutMs: pooled ? undefined : config.apiStatementTimeoutMs,
      namedStatements: !pooled,
    });
    undo.push(() => pool.end());
    const inProcessWorkers = config.workersEnabled && config.workerProcesses === 0;
    const workerPool = inProcessWorkers
      ? createPool(databaseUrl, config.workerPoolMax ?? config.dbPoolMax, APP_NAMES.worker, {
          statementTimeoutMs: pooled ? undefined : config.workerStatementTimeoutMs,
          namedStatements: !pooled,
        })
      : pool;
    if (workerPool !== pool) undo.push(() => workerPool.end());
    await warnUnprotectedAudit(pool, prepared.separated);
    await setUpDemo({ pool, config, database: embedded ? 'embedded' : 'external' });

    const resources: FerryResources = {
      config,
      pool,
      workerPool,
      databaseUrl,
      directDatabaseUrl,
      database: embedded ? 'embedded' : 'external',
    };
    // Extension point: the worker runtime (registries, pg-boss) starts before the server listens
    // and goes to the app explicitly, so no request ever meets an app without it.
    if (hooks.startRuntime) progress('database ready; starting the runtime (job queue, lanes, workers)');
    const started = await hooks.startRuntime?.(resources);
    if (started) undo.push(() => started.stop());

    const appDeps: Readonly<AppDeps> = { pool, config, routes: hooks.routes, directDatabaseUrl, runtime: started };
    const app = createApp(appDeps);
    undo.push(() => app.close());
    const { server, port } = await listen(app, config.host, config.port);
    undo.push(() => closeServer(server));

    const runtime: StartedFerry = { ...resources, app, appDeps, url: urlFor(config.host, port), port };

    // Extension point: whatever needs the listening server (e.g. worker processes) starts here.
    await hooks.onStarted?.(runtime);

    let stopping: Promise<void> | undefined;
    const running: RunningFerry = {
      ...runtime,
      stop: () =>
        (stopping ??= (async () => {
          log.info('ferry stopping');
          await runAll([
            // This app's open event streams would hold the server's close for the whole drain time.
            () => app.eventStreams.end(),
            () => closeServer(server),
            // Extension point: worker processes stop here, while the runtime and the pool are open.
            () => hooks.onStopping?.(runtime),
            // The runtime (workers, pg-boss) stops while the pool is still open.
            () => started?.stop(),
            // The rest of what this app holds: its dashboard's pools.
            () => app.close(),
            () => (workerPool !== pool ? workerPool.end() : undefined),
            () => pool.end(),
            () => embedded?.stop(),
          ]);
          log.info('ferry stopped');
        })()),
    };

    await adviseFirstAdminToken(pool);
    // The last line of start-up: whoever waits for Ferry can act on it.
    log.info(
      { url: runtime.url, port, database: runtime.database, migrations_applied: applied.length },
      `ferry listening on ${runtime.url}`,
    );
    return running;
  } catch (err) {
    return abort(err);
  }
}

/**
 * One info line for a slow part of start-up (the first initdb, migrations, the runtime), so a first
 * `npm start` is never silent until it listens.
 */
function progress(line: string): void {
  log.info({ component: 'start', progress: true }, line);
}

/** The variable that holds the owner's URL: read by start-up (and `ferry db ...`) only. */
export const OWNER_URL_VARIABLE = 'FERRY_DATABASE_OWNER_URL';

/**
 * The configuration without the owner's URL, which is removed from this process's environment
 * as well (node:cluster and child processes inherit process.env). What the operating
 * system recorded when the process was started (/proc/PID/environ) no code can change: to keep the
 * URL out of even that, run `ferry migrate` as a step of its own and start Ferry without it.
 */
function withoutOwner(config: FerryConfig): FerryConfig {
  delete process.env[OWNER_URL_VARIABLE];
  return { ...config, databaseOwnerUrl: undefined };
}

/** An environment for a process Ferry starts: everything but the owner's URL. */
export function withoutOwnerEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const { [OWNER_URL_VARIABLE]: _dropped, ...rest } = env;
  return rest;
}

/** Migrations not yet applied on the database at `url`, read on a connection of its own. */
async function pendingAt(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url, application_name: APP_NAMES.migrate });
  client.on('error', () => {});
  await client.connect();
  try {
    return await pendingMigrations(client);
  } finally {
    await client.end().catch(() => {});
  }
}

/**
 * Starts the embedded PostgreSQL on the data folder's port (a new one, remembered, when another
 * program binds it first). When it refuses, the EmbeddedStartError names the cause in one line.
 */
async function startEmbedded(config: FerryConfig): Promise<EmbeddedServer> {
  const port = await resolveEmbeddedPort(config.dataDir, config.embeddedPgPort);
  return startEmbeddedPostgres({
    dataDir: config.dataDir,
    port,
    nextPort: config.embeddedPgPort === undefined ? () => rememberNewPort(config.dataDir) : undefined,
    sharedDir: config.embeddedPgSharedDir,
    onLog: (chunk) => {
      for (const line of chunk.split('\n').map((l) => l.trim()).filter(Boolean)) log.debug({ component: 'embedded-postgres' }, line);
    },
    onProgress: progress,
  });
}

/**
 * Says at start when the runtime's role could rewrite the audit trail (one role for migrations and
 * runtime, or an application role with too many rights): the append-only guarantee does not hold.
 */
async function warnUnprotectedAudit(pool: Pool, separated: boolean): Promise<void> {
  try {
    const found = await auditProtection(pool);
    if (found.protected) return;
    log.warn(
      { component: 'audit', reasons: found.reasons, separate_owner: separated },
      `the audit log is not protected from Ferry's own database role (${found.reasons.join('; ')}); ` +
        'set FERRY_DATABASE_OWNER_URL for migrations and DATABASE_URL to an application role (docs/security.md)',
    );
  } catch (err) {
    log.warn({ err }, 'could not check the database role for the audit log');
  }
}

/** A fresh installation has no way in until someone creates an admin token; say how. */
async function adviseFirstAdminToken(pool: Pool): Promise<void> {
  try {
    if (!(await hasAdminToken(pool))) {
      log.warn({ command: ADMIN_TOKEN_COMMAND }, `no admin API token exists yet; create the first one with: ${ADMIN_TOKEN_COMMAND}`);
    }
  } catch (err) {
    log.warn({ err }, 'could not check for an admin API token');
  }
}

/**
 * The hooks `npm start` runs with: the runtime (pg-boss, registries, and the worker loops in this
 * process, or FERRY_WORKER_PROCESSES worker processes under node:cluster). A core worker group that
 * dies ends the process with a non-zero code, so whatever supervises it restarts it.
 */
function programHooks(onCoreFailure: (err: unknown) => void): FerryHooks {
  let workers: WorkerCluster | undefined;
  return {
    async startRuntime(ferry): Promise<Runtime> {
      const clustered = ferry.config.workerProcesses > 0;
      const runtime = await startRuntime({
        pool: ferry.workerPool,
        config: ferry.config,
        databaseUrl: ferry.databaseUrl,
        listenUrl: ferry.directDatabaseUrl,
        log,
        workers: ferry.config.workersEnabled && !clustered,
      });
      runtime.done.catch(onCoreFailure);
      return runtime;
    },
    async onStarted(ferry) {
      const clustered = ferry.config.workerProcesses > 0;
      if (clustered && ferry.config.workersEnabled) {
        // The workers open the pools this process fitted for the whole cluster (and check nothing again).
        const env = {
          ...withoutOwnerEnv(process.env),
          DATABASE_URL: ferry.databaseUrl,
          FERRY_DATABASE_DIRECT_URL: ferry.directDatabaseUrl,
          ...budgetEnv(ferry.config),
        };
        workers = startWorkerCluster(ferry.config.workerProcesses, env, log);
      }
    },
    async onStopping() {
      // Ferry stops the runtime itself, right after this.
      await workers?.stop();
    },
  };
}

/** Runs Ferry as `npm start` does, until SIGINT, SIGTERM or SIGHUP; exits the process when it stops. */
export async function runFerryProgram(): Promise<void> {

  let ferry: RunningFerry | undefined;
  let signalled: NodeJS.Signals | undefined;
  const shutdown = (signal: NodeJS.Signals) => {
    if (signalled) return;
    signalled = signal;
    log.info({ signal }, 'signal received');
    // A signal during start-up is handled once start-up has finished (or failed).
    if (ferry) stopAndExit(ferry);
  };
  const stopAndExit = (running: RunningFerry) => {
    running.stop().then(
      () => process.exit(0),
      (err) => {
        log.error({ err }, 'ferry did not stop cleanly');
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', shutdown);
  process.on('SIGTERM', shutdown);
  // A closed terminal: stop in order as for SIGTERM, never leave the embedded server running.
  process.on('SIGHUP', shutdown);

  try {
    ferry = await startFerry(
      process.env,
      programHooks((err) => {
        log.fatal({ err }, 'core workers died; exiting so the process is restarted');
        if (ferry) void ferry.stop().finally(() => process.exit(1));
        else process.exit(1);
      }),
    );
  } catch (err) {
    if (err instanceof ConfigError || err instanceof EmbeddedStartError) {
      process.stderr.write(`ferry: ${err.message}\n`);
    } else {
      log.fatal({ err }, 'ferry failed to start');
    }
    process.exit(1);
  }
  if (signalled) stopAndExit(ferry);
}

function isEntryPoint(): boolean {
  const entry = process.argv[1];
  if (!entry) return false;
  try {
    return realpathSync(resolve(entry)) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (isEntryPoint()) void runFerryProgram();
