import { HTTPException } from 'hono/http-exception';
import { authenticate } from '../auth.ts';
import { auditRoutes } from './audit.ts';
import { balanceRoutes } from './balances.ts';
import { callbackRoutes } from './callbacks.ts';
import { cexTransferRoutes } from './cex-transfers.ts';
import { callbackDestinationRoutes } from './callback-destinations.ts';
import { attentionRoutes } from './attention.ts';
import { operatorChannelRoutes } from './operator-channels.ts';
import { credentialProposalRoutes } from './credential-proposals.ts';
import { resourceApp, v3Context, type V3Deps } from './context.ts';
import { movementRoutes } from './movements.ts';
import { policyRoutes } from './policy.ts';
import { standingOrderRoutes } from './standing-orders.ts';
import { principalRoutes } from './principals.ts';
import { registryRoutes } from './registry.ts';
import { registryDriftRoutes } from './registry-drift.ts';
import { templateRoutes } from './templates.ts';
import { templateProposalRoutes } from './template-proposals.ts';
import { refuseUnstorableText } from './text-guard.ts';
import { workerRoutes } from './workers.ts';
import { operationsRoutes } from './operations.ts';
import { gateRoutes } from './gates.ts';

export type { ApiRuntime, V3Deps } from './context.ts';

/**
 * The /v3 API: every route behind a bearer token, then the one permission it names. Mount with
 * `app.route('/v3', v3Routes(deps))`.
 */
export function v3Routes(deps: V3Deps) {
  const ctx = v3Context(deps);
  const app = resourceApp();
  // Before any route: an unauthenticated caller learns nothing, not even which paths exist.
  app.use('*', authenticate(deps.pool, deps.authThrottle));
  app.use('*', refuseUnstorableText);
  app.route('/', templateRoutes(ctx));
  app.route('/', movementRoutes(ctx));
  app.route('/', registryRoutes(ctx));
  app.route('/', callbackRoutes(ctx));
  app.route('/', callbackDestinationRoutes(ctx));
  app.route('/', auditRoutes(ctx));
  app.route('/', workerRoutes(ctx));
  app.route('/', balanceRoutes(ctx, deps.balanceSources));
  // Exchange transfers no movement made (cex_transfer_ingest).
  app.route('/', cexTransferRoutes(ctx));
  // On-chain facts of the lanes' configuration that the chain contradicts (verify_drift).
  app.route('/', registryDriftRoutes(ctx));
  app.route('/', templateProposalRoutes(ctx));
  // The treasury policy: address book, rule set, their proposals (docs/policy.md).
  app.route('/', policyRoutes(ctx));
  // Standing orders: routine movements approved once, within bounds (docs/policy.md).
  app.route('/', standingOrderRoutes(ctx));
  // Principals and tokens (token.admin).
  app.route('/', principalRoutes(ctx));
  app.route('/', credentialProposalRoutes(ctx));
  // Reconciliation drifts and manual-intervention resolutions.
  app.route('/', operationsRoutes(ctx));
  // Manual gates: confirm or skip (movement.operate, four-eyes).
  app.route('/', gateRoutes(ctx));
  // Operator notifications and movements waiting too long (docs/operations.md).
  app.route('/', attentionRoutes(ctx));
  // Where notifications go: the operator channels (notify.channel, admin only).
  app.route('/', operatorChannelRoutes(ctx));
  // Last: it sees every route above.
  refuseOtherMethods(app);
  return app;
}

/**
 * After every route: a request whose path is a /v3 route's but whose method is none of that path's
 * (DELETE /v3/movements/{id}) is 405 METHOD_NOT_ALLOWED with an Allow header naming the methods, not
 * 404; a path no route has goes on to 404.
 */
function refuseOtherMethods(app: ReturnType<typeof resourceApp>): void {
  const byPath = new Map<string, { pattern: RegExp; methods: Set<string> }>();
  for (const r of app.routes) {
    if (r.method === 'ALL') continue;
    const entry = byPath.get(r.path) ?? { pattern: new RegExp(`^${r.path.replace(/:[A-Za-z0-9_]+(\{[^}]*\})?/g, '[^/]+')}/?$`), methods: new Set<string>() };
    entry.methods.add(r.method.toUpperCase());
    byPath.set(r.path, entry);
  }
  app.all('*', async (c, next) => {
    const path = c.req.path.replace(/^\/v3(?=\/)/, '');
    const allowed = new Set<string>();
    for (const { pattern, methods } of byPath.values()) if (pattern.test(path)) for (const m of methods) allowed.add(m);
    if (allowed.size === 0 || allowed.has(c.req.method)) return next();
    if (allowed.has('GET')) allowed.add('HEAD');
    const allow = [...allowed].sort().join(', ');
    // The error handler answers 405 METHOD_NOT_ALLOWED and passes the Allow header on.
    throw new HTTPException(405, { message: `${c.req.method} is not allowed on ${c.req.path}; allowed: ${allow}`, res: new Response(null, { status: 405, headers: { allow } }) });
  });
}
