import { isMovementError } from '../executors/errors.ts';
import type { ExecutorOutcome, OutcomeState } from '../machines/outcome.ts';
import { providerReconciledTotal, reconciliationDriftTotal, reconciliationRepairedTotal } from '../metrics.ts';
import { writeAudit } from '../persistence/audit.ts';
import { withTransaction } from '../persistence/db.ts';
import { getMovements, nodesOfMovements, type NodeRow, type MovementRow } from '../persistence/movements.ts';
import {
  evidenceCandidates,
  markDriftRepaired,
  markProviderChecked,
  recordDrift,
  type DriftClass,
} from '../persistence/reconciliation-drifts.ts';
import { askProvider, claimedContexts, errorOutcome, errorText, nowIso, type WorkerDeps } from '../actors/execution.ts';
import { deliverBatch, type MovementItem } from '../durable/transition.ts';
import { runBudget } from '../run-budget.ts';

/**
 * Reconciliation with evidence: the log replay (reconciliation.ts) proves the rows are what the
 * machines decided; this asks the provider whether what they decided is still true. Settled nodes
 * (COMPLETED, FAILED, UNKNOWN) changed within FERRY_RECONCILIATION_LOOKBACK_SECONDS are asked about
 * their current attempt through their executor's inspect(), which only reads: never recover(),
 * which may act (the EVM lane sends stored signed bytes again). Reconciliation's nodes include
 * UNKNOWN nodes of movements in MANUAL_INTERVENTION, which a person owns: nothing may be sent for
 * them behind that person's back. An answer that contradicts the stored state is drift, by class:
 *
 * - completed_but_provider_failed: stored COMPLETED, the provider says FAILED or UNKNOWN;
 * - failed_but_provider_completed: stored FAILED, the provider says COMPLETED;
 * - unknown_but_provider_knows: stored UNKNOWN, the provider has an answer.
 *
 * Drift is recorded (reconciliation_drifts, GET /v3/reconciliation, `ferry reconcile`), audited and
 * counted. With FERRY_RECONCILIATION_AUTO_REPAIR on, a repairable drift (a FAILED or UNKNOWN node
 * the provider shows COMPLETED, an UNKNOWN node it shows FAILED) is applied through the node
 * machine's RECONCILED event, which carries the evidence and is accepted only for the attempt the
 * evidence is about. A COMPLETED node is final: its drift is only reported, for an operator.
 *
 * No provider call runs inside a transaction: candidates are read without locks, the provider is
 * asked, and a repair then locks the movement and lets the machine re-check the node.
 */

const ACTOR = 'worker:reconciliation';
const ANY_ANSWER: readonly OutcomeState[] = ['COMPLETED', 'SUBMITTED', 'OBSERVING', 'FAILED', 'UNKNOWN', 'READY'];
// A repair reopens nothing: a movement that ended in one of these stays as the operator left it.
const NO_REPAIR_REQUEST_STATES = new Set(['FAILED', 'CANCELLED', 'REJECTED', 'EXPIRED']);

export interface ProviderReconciliationReport {
  checked: number;
  drifted: number;
  repaired: number;
  /** Asked but unanswered (the executor threw, or Ferry's database was unavailable). */
  unanswered: number;
  byClass: Partial<Record<DriftClass, number>>;
  budgetExhausted: boolean;
}

/** The drift a stored state and a provider's answer make, or null when they agree. */
export function driftClassOf(stored: string, provider: OutcomeState): DriftClass | null {
  if (stored === 'COMPLETED' && (provider === 'FAILED' || provider === 'UNKNOWN')) return 'completed_but_provider_failed';
  if (stored === 'FAILED' && provider === 'COMPLETED') return 'failed_but_provider_completed';
  if (stored === 'UNKNOWN' && provider !== 'UNKNOWN') return 'unknown_but_provider_knows';
  return null;
}

function repairable(node: NodeRow, provider: OutcomeState): boolean {
  // An operator's confirmed decision is not overturned by a sweep: reported, for a person.
  if (node.error_code === 'RESOLVED_FAILED') return false;
  const stored = node.node_state;
  return (stored === 'FAILED' && provider === 'COMPLETED') || (stored === 'UNKNOWN' && (provider === 'COMPLETED' || provider === 'FAILED'));
}

type Deps = Pick<WorkerDeps, 'pool' | 'config' | 'executors' | 'transitions' | 'log'>;

export async function reconcileWithProviders(deps: Deps): Promise<ProviderReconciliationReport> {
  const { config, pool } = deps;
  const report: ProviderReconciliationReport = { checked: 0, drifted: 0, repaired: 0, unanswered: 0, byClass: {}, budgetExhausted: false };
  if (!config.reconciliationEvidenceEnabled) return report;
  const budget = runBudget(config.reconciliationMaxRunMs);
  const candidates = await evidenceCandidates(pool, {
    lookbackSeconds: config.reconciliationLookbackSeconds,
    recheckSeconds: config.reconciliationRecheckSeconds,
    limit: config.reconciliationEvidenceBatchSize,
  });
  const asked: string[] = [];
  // The candidates' movements, their nodes and their artifacts: three reads for the whole run.
  const movements = new Map((candidates.length ? await getMovements(pool, [...new Set(candidates.map((n) => n.request_id))]) : []).map((m) => [m.id, m]));
  const siblings = movements.size ? await nodesOfMovements(pool, [...movements.keys()]) : new Map<string, NodeRow[]>();
  const subjects = candidates.filter((n) => movements.has(n.request_id)).map((node) => ({ node, movement: movements.get(node.request_id)!, nodes: siblings.get(node.request_id) ?? [] }));
  const contexts = subjects.length ? await claimedContexts(pool, subjects, (n) => n.attempt_no) : [];
  for (const [i, { node, movement }] of subjects.entries()) {
    if (budget.spent()) {
      report.budgetExhausted = true;
      break;
    }
    let threw = false;
    const ctx = contexts[i];
    const answer = await askProvider(deps as WorkerDeps, node, ctx, 'inspect', ANY_ANSWER, (err) => {
      threw = true;
      return errorOutcome('UNKNOWN', isMovementError(err) ? err.code : 'INSPECT_ERROR', errorText(err));
    });
    if (answer.infra || threw) {
      report.unanswered++;
      providerReconciledTotal.inc({ result: 'no_answer' });
      // Asked again next run (infra) or after the recheck period (the executor threw).
      if (!answer.infra) asked.push(node.id);
      continue;
    }
    asked.push(node.id);
    report.checked++;
    const cls = driftClassOf(node.node_state, answer.outcome.nextState);
    providerReconciledTotal.inc({ result: cls ? 'drift' : 'consistent' });
    if (!cls) continue;
    report.drifted++;
    report.byClass[cls] = (report.byClass[cls] ?? 0) + 1;
    reconciliationDriftTotal.inc({ class: cls });
    const drift = await recordFinding(deps, movement, node, cls, answer.outcome);
    if (config.reconciliationAutoRepair && repairable(node, answer.outcome.nextState) && !NO_REPAIR_REQUEST_STATES.has(movement.request_state)) {
      if (await repair(deps, movement, node, cls, answer.outcome, drift.id)) {
        report.repaired++;
        reconciliationRepairedTotal.inc({ class: cls });
      }
    }
  }
  await markProviderChecked(pool, asked);
  return report;
}

async function recordFinding(deps: Deps, movement: MovementRow, node: NodeRow, cls: DriftClass, outcome: ExecutorOutcome) {
  return withTransaction(deps.pool, async (client) => {
    const evidence = { outcome, checked_at: nowIso(), call: 'inspect' };
    const drift = await recordDrift(client, {
      request_id: movement.id,
      request_node_id: node.id,
      node_key: node.node_key,
      attempt_no: node.attempt_no,
      drift_class: cls,
      stored_state: node.node_state,
      provider_state: outcome.nextState,
      evidence,
    });
    if (drift.created) {
      await writeAudit(client, {
        actor: ACTOR,
        action: 'reconciliation.provider_drift',
        entity_type: 'movement_node',
        entity_id: node.id,
        details: { request_id: movement.id, node_key: node.node_key, attempt_no: node.attempt_no, drift_class: cls, stored_state: node.node_state, provider_state: outcome.nextState, drift_id: drift.id },
      });
      deps.log.warn({ worker: 'reconciliation', movement_id: movement.id, node_id: node.id, node_key: node.node_key, drift_class: cls }, 'provider contradicts stored node state');
    }
    return drift;
  });
}

/** Applies a drift through the node machine; false when the machine refused it (the node moved on). */
async function repair(deps: Deps, movement: MovementRow, node: NodeRow, cls: DriftClass, outcome: ExecutorOutcome, driftId: number): Promise<boolean> {
  const refused = Symbol('refused');
  try {
    return await withTransaction(deps.pool, async (client) => {
      const at = nowIso();
      // A movement waiting for a person goes on once the node it waited on is settled by evidence.
      const movements: MovementItem[] = movement.request_state === 'MANUAL_INTERVENTION' ? [{ movementId: movement.id, event: { type: 'RESUME', by: ACTOR } }] : [];
      const result = await deliverBatch(
        client,
        {
          movements,
          nodes: [
            {
              nodeId: node.id,
              event: { type: 'RECONCILED', outcome, attemptNo: node.attempt_no, driftClass: cls, at, nextObserveAt: null },
              audits: [
                {
                  actor: ACTOR,
                  action: 'reconciliation.repaired',
                  entity_type: 'movement_node',
                  entity_id: node.id,
                  details: { request_id: movement.id, node_key: node.node_key, attempt_no: node.attempt_no, drift_class: cls, from_state: node.node_state, to_state: outcome.nextState, drift_id: driftId },
                },
              ],
            },
          ],
        },
        { actor: ACTOR, deps: deps.transitions },
      );
      const delivered = result.nodes[0];
      if (!('node' in delivered)) throw refused;
      await markDriftRepaired(client, driftId, ACTOR);
      return true;
    });
  } catch (err) {
    if (err === refused) return false;
    throw err;
  }
}
