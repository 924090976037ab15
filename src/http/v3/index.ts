import { authenticate } from '../auth.ts';
import { auditRoutes } from './audit.ts';
import { balanceRoutes } from './balances.ts';
import { callbackRoutes } from './callbacks.ts';
import { callbackDestinationRoutes } from './callback-destinations.ts';
import { credentialProposalRoutes } from './credential-proposals.ts';
import { resourceApp, v3Context, type V3Deps } from './context.ts';
import { movementRoutes } from './movements.ts';
import { policyRoutes } from './policy.ts';
import { principalRoutes } from './principals.ts';
import { registryRoutes } from './registry.ts';
import { templateRoutes } from './templates.ts';
import { templateProposalRoutes } from './template-proposals.ts';
import { refuseUnstorableText } from './text-guard.ts';
import { workerRoutes } from './workers.ts';
import { operationsRoutes } from './operations.ts';

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
  app.route('/', balanceRoutes(ctx));
  app.route('/', templateProposalRoutes(ctx));
  // The treasury policy: address book, rule set, their proposals (docs/policy.md).
  app.route('/', policyRoutes(ctx));
  // Principals and tokens (token.admin).
  app.route('/', principalRoutes(ctx));
  app.route('/', credentialProposalRoutes(ctx));
  // Reconciliation drifts and manual-intervention resolutions.
  app.route('/', operationsRoutes(ctx));
  return app;
}
