import { randomUUID } from 'node:crypto';
import { FerryInfraError } from '../executors/infra.ts';
import { TemporaryMovementError, isMovementError } from '../executors/errors.ts';
import { addSeconds, observationTimedOut, observeDelaySeconds } from '../machines/observe-policy.ts';
import { claimObserveBatch } from '../persistence/claims.ts';
import { claimsTotal, deferralsTotal } from '../metrics.ts';
import { withTransaction } from '../persistence/db.ts';
import { nodesOfMovements, type NodeRow } from '../persistence/movements.ts';
import type { ExecutionContext } from '../executors/protocol.ts';
import { runDispatches } from './dispatcher.ts';
import { askProvider, claimedContexts, errorOutcome, errorText, nodeLog, nowIso, type WorkerDeps } from './execution.ts';
import { deliverBatch, type CarriedClaim, type NodeItem } from '../durable/transition.ts';
import { signAndSendReplacement, type ReplacementProposal } from './replacement.ts';
import { CANCEL_REF, isCancelRecord } from '../machines/node-machine.ts';

/** Whether an operator's cancel was asked of the node's current attempt (providerRefs.cancel). */
export const cancelAsked = (node: Pick<NodeRow, 'provider_refs'>): boolean => isCancelRecord((node.provider_refs ?? {})[CANCEL_REF]);

/**
 * One node's observation: asks the provider (observe()), or times the observation out, and returns
 * the OBSERVED (or OBSERVATION_TIMED_OUT) event to commit, with the fee bump the executor proposed
 * if any. The movement actors' observation step (movement-actor.ts), and observeBatch's.
 */
export async function observationOf(deps: WorkerDeps, node: NodeRow, ctx: ExecutionContext | { error: unknown }): Promise<{ item: NodeItem; proposal?: ReplacementProposal }> {
  const at = nowIso();
  if (deps.config.observeTimeoutEnforcement && observationTimedOut(node.timeout_policy, node.started_at?.toISOString() ?? null, at)) {
    return { item: { nodeId: node.id, event: { type: 'OBSERVATION_TIMED_OUT', at } } };
  }
  const { outcome, artifacts, retryAfter, infra, replacement } = await askProvider(
    deps,
    node,
    ctx,
    'observe',
    // CANCELLED only for an attempt an operator's cancel was asked of (the machine checks it too).
    cancelAsked(node) ? ['COMPLETED', 'OBSERVING', 'SUBMITTED', 'FAILED', 'UNKNOWN', 'CANCELLED'] : ['COMPLETED', 'OBSERVING', 'SUBMITTED', 'FAILED', 'UNKNOWN'],
    // A provider we cannot reach now says nothing about the movement: keep observing; so does
    // Ferry's own database trouble. Anything else makes the node's fate unknown, which recovery
    // resolves.
    (err) =>
      err instanceof TemporaryMovementError || err instanceof FerryInfraError
        ? { nextState: 'OBSERVING', errorCode: isMovementError(err) ? err.code : 'FERRY_DATABASE_UNAVAILABLE', errorDetail: errorText(err) }
        : errorOutcome('UNKNOWN', isMovementError(err) ? err.code : 'OBSERVE_ERROR', errorText(err)),
  );
  if (infra) {
    deferralsTotal.inc({ worker: 'observer', cause: infra });
    if (outcome.nextState !== 'OBSERVING') Object.assign(outcome, { nextState: 'OBSERVING', errorCode: 'FERRY_DATABASE_UNAVAILABLE' });
  }
  const keepsObserving = outcome.nextState === 'OBSERVING' || outcome.nextState === 'SUBMITTED';
  const nextObserveAt = keepsObserving ? addSeconds(at, observeDelaySeconds(node.action_type, retryAfter ?? (infra ? 1 : null))) : null;
  nodeLog(deps, 'observer', node).debug({ next_state: outcome.nextState, error_code: outcome.errorCode ?? null, next_observe_at: nextObserveAt }, 'observed');
  const proposal = replacement && keepsObserving ? { nodeId: node.id, attemptNo: node.attempt_no, prepared: replacement } : undefined;
  return { item: { nodeId: node.id, event: { type: 'OBSERVED', outcome, at, nextObserveAt }, artifacts }, proposal };
}

/**
 * Observes one batch of SUBMITTED / OBSERVING nodes whose next_observe_at is due, without a runtime
 * (tests and tools drive nodes with it; in a runtime the movement actors observe the movements they
 * lease). One statement claims the batch (node and movement, FOR UPDATE ... SKIP LOCKED, oldest
 * movement first); the locks are held through observe() and the commit (observe() only reads from
 * the provider, and recovery or an operator must not act on the attempt meanwhile). The
 * observations run at once and their results commit together, in one batched transition; a
 * successor an observation unblocks is claimed in that commit and dispatched here.
 */
export async function observeBatch(deps: WorkerDeps): Promise<number> {
  let carried: CarriedClaim[] = [];
  let accepted: ReplacementProposal[] = [];
  const proposals: (ReplacementProposal | undefined)[] = [];
  const observed = await withTransaction(deps.pool, async (client) => {
    const claimed = await claimObserveBatch(client, deps.config.observeBatchSize);
    claimsTotal.inc({ worker: 'observer', result: claimed.length > 0 ? 'hit' : 'miss' }, Math.max(1, claimed.length));
    if (claimed.length === 0) return 0;
    const siblings = await nodesOfMovements(client, [...new Set(claimed.map((c) => c.movement.id))]);
    const withNodes = claimed.map((c) => ({ ...c, nodes: siblings.get(c.movement.id) ?? [] }));
    const contexts = await claimedContexts(client, withNodes, (n) => n.attempt_no);

    const observed = await Promise.all(claimed.map(({ node }, i) => observationOf(deps, node, contexts[i])));
    const items = observed.map((o) => o.item);
    observed.forEach((o, i) => (proposals[i] = o.proposal));
    // The claim holds every movement's row lock, so the rows just read are the rows: no re-read.
    const held = [...new Map(withNodes.map((c) => [c.movement.id, { movement: c.movement, nodes: c.nodes }])).values()];
    const result = await deliverBatch(client, { nodes: items }, { actor: 'worker:observer', deps: deps.transitions, claimUnblocked: () => randomUUID(), held });
    carried = result.claimed;
    // Only a fee bump whose observation was recorded goes on to be signed.
    accepted = proposals.filter((p, i): p is ReplacementProposal => p !== undefined && !(result.nodes[i] instanceof Error));
    if (carried.length > 0) claimsTotal.inc({ worker: 'dispatcher', result: 'hit' }, carried.length);
    return claimed.length;
  });
  // The successors this commit claimed are dispatched here, without a NOTIFY round trip or another claim.
  if (carried.length > 0) await runDispatches(deps, carried);
  // Fee bumps the executors proposed: signed and stored after the claim's locks are gone (see replacement.ts).
  for (const proposal of accepted) await signAndSendReplacement(deps, proposal);
  return observed;
}
