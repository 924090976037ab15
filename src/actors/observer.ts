import { TemporaryMovementError, isMovementError } from '../executors/errors.ts';
import { addSeconds, observationTimedOut, observeDelaySeconds } from '../machines/observe-policy.ts';
import { insertArtifacts } from '../persistence/artifacts.ts';
import { claimForObserve, observeCandidates } from '../persistence/claims.ts';
import { claimsTotal } from '../metrics.ts';
import { claimInSavepoint, withTransaction } from '../persistence/db.ts';
import { askProvider, errorOutcome, errorText, nowIso, type RuntimeDeps } from './execution.ts';
import { signAndSendReplacement, type ReplacementProposal } from './replacement.ts';
import { deliverNodeEvent } from './transition.ts';

/**
 * The observer: polls SUBMITTED / OBSERVING nodes whose next_observe_at is due. Two phases, as the
 * reference runtime does: an unlocked snapshot of due candidates, then a per-node claim of node and
 * request in a savepoint. The claim's locks are held through observe() and the commit, as the
 * reference requires (observe() only reads from the provider), so one slow provider holds only
 * its own node and never the rest of the batch.
 */
export async function observeBatch(deps: RuntimeDeps): Promise<number> {
  const ids = await observeCandidates(deps.pool, deps.config.observeBatchSize);
  const results = await Promise.all(ids.map((id) => observeNode(deps, id)));
  return results.filter(Boolean).length;
}

async function observeNode(deps: RuntimeDeps, nodeId: string): Promise<boolean> {
  let proposal: ReplacementProposal | null = null;
  const observed = await withTransaction(deps.pool, async (client) => {
    const claimed = await claimInSavepoint(client, () => claimForObserve(client, nodeId));
    claimsTotal.inc({ worker: 'observer', result: claimed ? 'hit' : 'miss' });
    if (!claimed) return false;
    const { node, request } = claimed;
    const log = deps.log.child({ request_id: node.request_id, node_id: node.id, node_key: node.node_key, worker: 'observer', attempt: node.attempt_no });
    const opts = { actor: 'worker:observer', deps: deps.transitions };
    const at = nowIso();

    if (deps.config.observeTimeoutEnforcement && observationTimedOut(node.timeout_policy, node.started_at?.toISOString() ?? null, at)) {
      await deliverNodeEvent(client, node.id, { type: 'OBSERVATION_TIMED_OUT', at }, opts);
      return true;
    }

    const { outcome, artifacts, retryAfter, replacement } = await askProvider(
      client,
      deps,
      request,
      node,
      'observe',
      ['COMPLETED', 'OBSERVING', 'SUBMITTED', 'FAILED', 'UNKNOWN'],
      // A provider we cannot reach now says nothing about the movement: keep observing. Anything
      // else makes the node's fate unknown, which recovery resolves.
      (err) =>
        err instanceof TemporaryMovementError
          ? { nextState: 'OBSERVING', errorCode: err.code, errorDetail: err.message }
          : errorOutcome('UNKNOWN', isMovementError(err) ? err.code : 'OBSERVE_ERROR', errorText(err)),
    );
    const keepsObserving = outcome.nextState === 'OBSERVING' || outcome.nextState === 'SUBMITTED';
    const nextObserveAt = keepsObserving ? addSeconds(at, observeDelaySeconds(node.action_type, retryAfter)) : null;
    await insertArtifacts(client, artifacts);
    await deliverNodeEvent(client, node.id, { type: 'OBSERVED', outcome, at, nextObserveAt }, opts);
    log.debug({ next_state: outcome.nextState, error_code: outcome.errorCode ?? null, next_observe_at: nextObserveAt }, 'observed');
    if (replacement && keepsObserving) proposal = { nodeId: node.id, attemptNo: node.attempt_no, prepared: replacement };
    return true;
  });
  // A fee bump the executor proposed: signed and stored after the claim's locks are gone (see replacement.ts).
  if (proposal) await signAndSendReplacement(deps, proposal);
  return observed;
}
