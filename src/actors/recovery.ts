import { lanes, type LaneList } from '../executors/lanes.ts';
import { isMovementError } from '../executors/errors.ts';
import { addSeconds, observeDelaySeconds } from '../machines/observe-policy.ts';
import { claimAbandonedDispatches, claimRecoveryBatch, type RecoveryArm } from '../persistence/claims.ts';
import { claimsTotal, deferralsTotal } from '../metrics.ts';
import { withTransaction } from '../persistence/db.ts';
import { nodesOfMovements } from '../persistence/movements.ts';
import { cancelAsked } from './observer.ts';
import { askProvider, claimedContexts, errorOutcome, errorText, nodeLog, nowIso, type WorkerDeps } from './execution.ts';
import { deliverBatch, type NodeItem } from '../durable/transition.ts';

/**
 * Recovery: resolves UNKNOWN nodes, and nodes stuck in SUBMITTING past their lane's grace (the
 * process died around submit), by asking the provider through recover(). It never calls submit():
 * "we may have acted and cannot tell" is answered by the provider, not by trying again. Only
 * nodes of EXECUTING movements are swept; a movement in MANUAL_INTERVENTION is resumed first.
 *
 * Each arm's batch is claimed by one statement (FOR UPDATE ... SKIP LOCKED, see claims.ts), its
 * recover() calls run at once with the locks held, and its results commit in one batched
 * transition. A recover() that met Ferry's own database trouble records nothing: the node is
 * asked again next round.
 *
 * The batch is split across lane arms in priority order, each taking max(1, batch / arms), so one
 * lane with many stuck nodes cannot starve the others.
 */
export function recoveryArms(batch: number, list: LaneList = lanes): RecoveryArm[] {
  // The lanes with an arm of their own (recoveryPriority, src/executors/<lane>/lane.ts), in priority order.
  const priority = list.filter((l) => l.recoveryPriority !== undefined).sort((a, b) => a.recoveryPriority! - b.recoveryPriority!);
  const share = Math.max(1, Math.floor(batch / (priority.length + 1)));
  return [...priority.map((l) => ({ lanes: [l.name], limit: share })), { lanes: null, limit: share }];
}

export async function recoverBatch(deps: WorkerDeps): Promise<number> {
  const { config } = deps;
  let done = await releaseAbandonedDispatches(deps);
  for (const arm of recoveryArms(config.recoveryBatchSize)) done += await recoverArm(deps, arm);
  return done;
}

async function recoverArm(deps: WorkerDeps, arm: RecoveryArm): Promise<number> {
  const { config } = deps;
  return withTransaction(deps.pool, async (client) => {
    const claimed = await claimRecoveryBatch(
      client,
      arm,
      recoveryArms(1).flatMap((a) => a.lanes ?? []),
      Object.entries(config.submittingGraceByLane ?? {}).map(([lane, seconds]) => ({ lane, seconds })),
      config.submittingGraceSeconds,
    );
    if (claimed.length === 0) return 0;
    claimsTotal.inc({ worker: 'recovery', result: 'hit' }, claimed.length);
    const siblings = await nodesOfMovements(client, [...new Set(claimed.map((c) => c.movement.id))]);
    const contexts = await claimedContexts(client, claimed.map((c) => ({ ...c, nodes: siblings.get(c.movement.id) ?? [] })), (n) => n.attempt_no);
    const answers = await Promise.all(
      claimed.map(async ({ node }, i): Promise<NodeItem | null> => {
        const at = nowIso();
        const { outcome, artifacts, retryAfter, infra } = await askProvider(
          deps,
          node,
          contexts[i],
          'recover',
          cancelAsked(node) ? ['COMPLETED', 'SUBMITTED', 'OBSERVING', 'FAILED', 'UNKNOWN', 'READY', 'CANCELLED'] : ['COMPLETED', 'SUBMITTED', 'OBSERVING', 'FAILED', 'UNKNOWN', 'READY'],
          (err) => errorOutcome('UNKNOWN', isMovementError(err) ? err.code : 'RECOVER_ERROR', errorText(err)),
        );
        if (infra) {
          deferralsTotal.inc({ worker: 'recovery', cause: infra });
          nodeLog(deps, 'recovery', node).warn({ cause: infra }, "recovery deferred: Ferry's database was unavailable");
          return null;
        }
        const observing = outcome.nextState === 'SUBMITTED' || outcome.nextState === 'OBSERVING';
        const nextObserveAt = observing && retryAfter ? addSeconds(at, observeDelaySeconds(node.action_type, retryAfter)) : null;
        nodeLog(deps, 'recovery', node).info({ from_state: node.node_state, next_state: outcome.nextState, error_code: outcome.errorCode ?? null }, 'recovered');
        return { nodeId: node.id, event: { type: 'RECOVERED', outcome, at, nextObserveAt }, artifacts };
      }),
    );
    const items = answers.filter((a): a is NodeItem => a !== null);
    if (items.length > 0) await deliverBatch(client, { nodes: items }, { actor: 'worker:recovery', deps: deps.transitions });
    return items.length;
  });
}

/**
 * A node left in PREPARING or AWAITING_SIGNATURE by a process that died (or stalled) has moved no
 * money: nothing is submitted before SUBMITTING is committed. It goes back to READY for a fresh
 * dispatch, without asking anyone, once it has been idle longer than the SUBMITTING grace; its
 * lease goes with it, so the stalled dispatcher's later writes are refused.
 */
async function releaseAbandonedDispatches(deps: WorkerDeps): Promise<number> {
  return withTransaction(deps.pool, async (client) => {
    const claimed = await claimAbandonedDispatches(client, deps.config.submittingGraceSeconds, deps.config.recoveryBatchSize);
    if (claimed.length === 0) return 0;
    const at = nowIso();
    const items: NodeItem[] = claimed.map(({ node }) => ({
      nodeId: node.id,
      event: { type: 'DISPATCH_DEFERRED', errorCode: 'DISPATCH_ABANDONED', errorDetail: `dispatch stopped in ${node.node_state}`, retryAt: at },
    }));
    await deliverBatch(client, { nodes: items }, { actor: 'worker:recovery', deps: deps.transitions });
    return claimed.length;
  });
}
