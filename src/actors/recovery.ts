import { isMovementError } from '../executors/errors.ts';
import { addSeconds, observeDelaySeconds } from '../machines/observe-policy.ts';
import { insertArtifacts } from '../persistence/artifacts.ts';
import { abandonedDispatches, claimUnchangedNode, recoveryCandidates, type RecoveryArm } from '../persistence/claims.ts';
import { claimsTotal } from '../metrics.ts';
import { claimInSavepoint, withTransaction } from '../persistence/db.ts';
import { askProvider, errorOutcome, errorText, nowIso, type RuntimeDeps } from './execution.ts';
import { deliverNodeEvent } from './transition.ts';

/**
 * Recovery: resolves UNKNOWN nodes, and nodes stuck in SUBMITTING past their lane's grace (the
 * process died around submit), by asking the provider through recover(). It never calls submit():
 * "we may have acted and cannot tell" is answered by the provider, not by trying again. Only
 * nodes of EXECUTING requests are swept; a movement in MANUAL_INTERVENTION is resumed first.
 *
 * The batch is split across lane arms in priority order, each taking max(1, batch / arms), so one
 * lane with many stuck nodes cannot starve the others.
 */
const PRIORITY_LANES = [['cctp'], ['evm'], ['cex']];

export function recoveryArms(batch: number): RecoveryArm[] {
  const share = Math.max(1, Math.floor(batch / (PRIORITY_LANES.length + 1)));
  return [...PRIORITY_LANES.map((lanes) => ({ lanes, limit: share })), { lanes: null, limit: share }];
}

export async function recoverBatch(deps: RuntimeDeps): Promise<number> {
  const { config } = deps;
  let done = await releaseAbandonedDispatches(deps);
  for (const arm of recoveryArms(config.recoveryBatchSize)) {
    const candidates = await recoveryCandidates(
      deps.pool,
      arm,
      PRIORITY_LANES.flat(),
      Object.entries(config.submittingGraceByLane ?? {}).map(([lane, seconds]) => ({ lane, seconds })),
      config.submittingGraceSeconds,
    );
    for (const c of candidates) if (await recoverNode(deps, c.id, c.row_version)) done++;
  }
  return done;
}

async function recoverNode(deps: RuntimeDeps, nodeId: string, rowVersion: number): Promise<boolean> {
  return withTransaction(deps.pool, async (client) => {
    const claimed = await claimInSavepoint(client, () => claimUnchangedNode(client, nodeId, rowVersion, ['UNKNOWN', 'SUBMITTING']));
    claimsTotal.inc({ worker: 'recovery', result: claimed ? 'hit' : 'miss' });
    if (!claimed) return false;
    const { node, request } = claimed;
    const log = deps.log.child({ request_id: node.request_id, node_id: node.id, node_key: node.node_key, worker: 'recovery', attempt: node.attempt_no });
    const at = nowIso();
    // The reference runtime holds the node and request locks across recover(): it must not race
    // the observer or an operator while it decides what happened to the attempt.
    const { outcome, artifacts, retryAfter } = await askProvider(
      client,
      deps,
      request,
      node,
      'recover',
      ['COMPLETED', 'SUBMITTED', 'OBSERVING', 'FAILED', 'UNKNOWN', 'READY'],
      (err) => errorOutcome('UNKNOWN', isMovementError(err) ? err.code : 'RECOVER_ERROR', errorText(err)),
    );
    const observing = outcome.nextState === 'SUBMITTED' || outcome.nextState === 'OBSERVING';
    const nextObserveAt = observing && retryAfter ? addSeconds(at, observeDelaySeconds(node.action_type, retryAfter)) : null;
    await insertArtifacts(client, artifacts);
    await deliverNodeEvent(client, node.id, { type: 'RECOVERED', outcome, at, nextObserveAt }, { actor: 'worker:recovery', deps: deps.transitions });
    log.info({ from_state: node.node_state, next_state: outcome.nextState, error_code: outcome.errorCode ?? null }, 'recovered');
    return true;
  });
}

/**
 * A node left in PREPARING or AWAITING_SIGNATURE by a process that died has moved no money: nothing
 * is submitted before SUBMITTING is committed. It goes back to READY for a fresh dispatch, without
 * asking anyone, once it has been idle longer than the SUBMITTING grace.
 */
async function releaseAbandonedDispatches(deps: RuntimeDeps): Promise<number> {
  const candidates = await abandonedDispatches(deps.pool, deps.config.submittingGraceSeconds, deps.config.recoveryBatchSize);
  let released = 0;
  for (const c of candidates) {
    const done = await withTransaction(deps.pool, async (client) => {
      const claimed = await claimInSavepoint(client, () => claimUnchangedNode(client, c.id, c.row_version, ['PREPARING', 'AWAITING_SIGNATURE']));
      if (!claimed) return false;
      const at = nowIso();
      await deliverNodeEvent(
        client,
        c.id,
        { type: 'DISPATCH_DEFERRED', errorCode: 'DISPATCH_ABANDONED', errorDetail: `dispatch stopped in ${claimed.node.node_state}`, retryAt: at },
        { actor: 'worker:recovery', deps: deps.transitions },
      );
      return true;
    });
    if (done) released++;
  }
  return released;
}
