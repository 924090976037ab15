import type { Context } from 'hono';
import { OpenAPIHono } from '@hono/zod-openapi';
import type { PgBoss } from 'pg-boss';
import type { WorkerDeps } from '../../actors/execution.ts';
import type { MovementServiceDeps } from '../../services/movements.ts';
import type { CancelServiceDeps } from '../../services/movement-cancel.ts';
import { createCallbackQueue } from '../../actors/callback-delivery.ts';
import type { CallbackQueue } from '../../callbacks/jobs.ts';
import type { FerryConfig } from '../../config.ts';
import { FerryError } from '../../errors.ts';
import type { Pool } from '../../persistence/db.ts';
import type { BindingCatalog } from '../../plan/validate.ts';
import { principalActor } from '../actor-names.ts';
import { can, type AuthEnv } from '../auth.ts';
import { validationHook } from '../errors.ts';
import type { Audience } from '../views.ts';
import type { AuthThrottle } from '../auth-throttle.ts';
import type { BalanceSweepDeps } from '../../balances/sweep.ts';

/**
 * What the /v3 routes need. Reads need only the pool; anything that changes state also needs the
 * runtime (the transition deps write callback jobs through pg-boss, and the registries decide which
 * bindings exist). The runtime is read on each request, so it may be attached after the app is built.
 */
export interface ApiRuntime {
  deps: Pick<WorkerDeps, 'transitions' | 'executors' | 'signers'>;
  boss: PgBoss;
}

export interface V3Deps {
  pool: Pool;
  config: FerryConfig;
  runtime?: ApiRuntime;
  authThrottle?: AuthThrottle;
  /** The balance sources GET /v3/balances?fresh=true asks (tests); made from the configuration when absent. */
  balanceSources?: BalanceSweepDeps;
}

export interface V3Context {
  pool: Pool;
  config: FerryConfig;
  /** The running runtime; 503 SERVICE_UNAVAILABLE until there is one. */
  runtime(): ApiRuntime;
  movementDeps(): MovementServiceDeps;
  /** What a cancel needs besides: the lanes it asks and the signers that sign a cancel replacement. */
  cancelDeps(): CancelServiceDeps;
  bindings(): BindingCatalog;
  /** The catalog when the runtime runs here; reads that can do without it (previews) get undefined. */
  bindingsIfRunning(): BindingCatalog | undefined;
  callbackQueue(): CallbackQueue;
}

export function v3Context(deps: V3Deps): V3Context {
  const runtime = (): ApiRuntime => {
    if (!deps.runtime) throw new FerryError('SERVICE_UNAVAILABLE', 'The runtime is not running in this process; changes cannot be made yet');
    return deps.runtime;
  };
  const bindings = (): BindingCatalog => {
    const { executors, signers } = runtime().deps;
    return { hasExecutor: (key) => executors.has(key), hasSigner: (key) => signers.has(key) };
  };
  return {
    pool: deps.pool,
    config: deps.config,
    runtime,
    bindings,
    bindingsIfRunning: () => (deps.runtime ? bindings() : undefined),
    movementDeps: () => ({ pool: deps.pool, config: deps.config, transitions: runtime().deps.transitions, bindings: bindings() }),
    cancelDeps: () => {
      const r = runtime().deps;
      return { pool: deps.pool, config: deps.config, transitions: r.transitions, bindings: bindings(), executors: r.executors, signers: r.signers, log: (r as { log?: CancelServiceDeps['log'] }).log };
    },
    callbackQueue: () => createCallbackQueue(runtime().boss),
  };
}

/** A sub-app for one resource: OpenAPI routes, the shared validation hook, the principal in context. */
export function resourceApp(): OpenAPIHono<AuthEnv> {
  return new OpenAPIHono<AuthEnv>({ defaultHook: validationHook });
}

/**
 * How the authenticated caller is named in created_by, approvals, transitions and audit rows: its
 * principal (`principal:<uuid>`), whichever of the principal's tokens it presented.
 */
export function actorOf(c: Context<AuthEnv>): string {
  return principalActor(c.get('principal').principalId);
}

/** What the caller's role may see in the views (see Audience). */
export function audienceOf(c: Context<AuthEnv>): Audience {
  // Both go to the roles that run deliveries (operator, admin): the callback.redrive permission.
  const operates = can(c.get('principal').role, 'callback.redrive');
  return { callbackUrls: operates, callbackErrors: operates };
}
