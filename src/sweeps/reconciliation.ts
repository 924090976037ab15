import { isDeepStrictEqual } from 'node:util';
import { initialNodeContext, nodeMachine } from '../machines/node-machine.ts';
import { replayLog, type LoggedTransition, type ReplayResult } from '../machines/replay.ts';
import { initialMovementContext, movementMachine } from '../machines/movement-machine.ts';
import { reconciliationTotal } from '../metrics.ts';
import { writeAudit } from '../persistence/audit.ts';
import { transactionNow, withTransaction, type Pool, type Queryable } from '../persistence/db.ts';
import {
  getMovements,
  markReconciled,
  nodesOfMovements,
  reconciliationCandidates,
  transitionsOfMovements,
  type NodeRow,
  type MovementRow,
  type TransitionRow,
} from '../persistence/movements.ts';
import type { FerryConfig } from '../config.ts';
import { nodeContextFromRow, movementContextFromRow } from '../durable/transition.ts';
import { runBudget } from '../run-budget.ts';

/**
 * Reconciliation: replays each movement's transition log through the machines and compares the
 * result with the stored rows. A difference (a state written around the machines, a lost or
 * edited log row) is drift: counted in ferry_reconciliation_total{result="drift"} and written to
 * the audit log with the entity and the first transition where log and machine part ways. Drift is
 * reported, never repaired automatically: the operator decides which side is right.
 */

export interface Drift {
  entity_type: 'request' | 'node';
  entity_id: string;
  node_key: string | null;
  seq: number | null;
  reason: string;
}

export interface ReconciliationReport {
  checked: number;
  drifted: number;
  budgetExhausted: boolean;
}

function compare(result: ReplayResult, storedState: string, storedContext: unknown): { seq: number | null; reason: string } | null {
  if (!result.ok) return { seq: result.seq, reason: result.reason };
  if (result.value !== storedState) return { seq: null, reason: `stored ${storedState}, the log replays to ${result.value}` };
  if (!isDeepStrictEqual(result.context, storedContext)) {
    return { seq: null, reason: 'stored columns differ from what the log replays to' };
  }
  return null;
}

function loggedOf(log: TransitionRow[], entityId: string): LoggedTransition[] {
  return log.filter((t) => t.entity_id === entityId);
}

/** Replays one movement; returns its drifts (empty when the rows are what the log says). */
export function reconcileMovement(movement: MovementRow, nodes: NodeRow[], log: TransitionRow[]): Drift[] {
  const drifts: Drift[] = [];
  const movementLog = loggedOf(log, movement.id);
  const birth = (movementLog[0]?.event_payload ?? {}) as { created_by?: string; quorum?: number; expires_at?: string | null };
  const movementInput = initialMovementContext({
    createdBy: birth.created_by ?? movement.created_by,
    quorum: birth.quorum ?? movement.approval_quorum,
    expiresAt: birth.expires_at ?? null,
  });
  const r = compare(replayLog(movementMachine, movementInput, movementLog), movement.request_state, movementContextFromRow(movement));
  if (r) drifts.push({ entity_type: 'request', entity_id: movement.id, node_key: null, ...r });

  for (const node of nodes) {
    const input = initialNodeContext({ nodeKind: node.node_kind, actionType: node.action_type, retryable: node.retryable });
    const d = compare(replayLog(nodeMachine, input, loggedOf(log, node.id)), node.node_state, nodeContextFromRow(node));
    if (d) drifts.push({ entity_type: 'node', entity_id: node.id, node_key: node.node_key, ...d });
  }
  return drifts;
}

/**
 * Movements checked per snapshot: one read transaction and one marking statement for this many, so
 * reconciliation costs about 11 statements per chunk instead of per movement. The run's time budget
 * is checked between chunks.
 */
export const RECONCILIATION_CHUNK = 25;

export async function reconcileBatch(
  deps: { pool: Pool; config: FerryConfig },
  opts: { now?: () => number; chunkSize?: number } = {},
): Promise<ReconciliationReport> {
  const chunkSize = opts.chunkSize ?? RECONCILIATION_CHUNK;
  // The run-time budget is measured on this clock (tests inject one; no sleeps).
  const budget = runBudget(deps.config.reconciliationMaxRunMs, opts.now);
  const report: ReconciliationReport = { checked: 0, drifted: 0, budgetExhausted: false };
  const ids = await reconciliationCandidates(deps.pool, deps.config.reconciliationBatchSize);
  // A full batch is a budget too: there may be more, and the next run continues.
  if (ids.length >= deps.config.reconciliationBatchSize) report.budgetExhausted = true;
  for (let i = 0; i < ids.length; i += chunkSize) {
    if (budget.spent()) {
      report.budgetExhausted = true;
      break;
    }
    const chunk = ids.slice(i, i + chunkSize);
    // Rows and logs from one snapshot: a transition committing meanwhile is in both or in neither.
    const found = await withTransaction(deps.pool, async (client) => {
      await client.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY');
      const movements = await getMovements(client, chunk);
      const nodes = await nodesOfMovements(client, chunk);
      const logs = await transitionsOfMovements(client, chunk);
      const checkedAt = await transactionNow(client);
      return {
        checkedAt,
        checks: movements.map((m) => ({ id: m.id, drifts: reconcileMovement(m, nodes.get(m.id) ?? [], logs.get(m.id) ?? []) })),
      };
    });
    if (found.checks.length === 0) continue;
    await withTransaction(deps.pool, async (client) => {
      // A movement a writer holds right now is not marked: it stays due, and its drift (if any) is
      // written by the run that marks it, so a drift is audited once per checked change.
      const marked = new Set(await markReconciled(client, found.checks.map((c) => c.id), found.checkedAt));
      for (const { id, drifts } of found.checks) {
        if (!marked.has(id)) continue;
        for (const drift of drifts) {
          await writeAudit(client, {
            actor: 'worker:reconciliation',
            action: 'reconciliation.drift',
            entity_type: drift.entity_type === 'request' ? 'movement' : 'movement_node',
            entity_id: drift.entity_id,
            details: { request_id: id, node_key: drift.node_key, seq: drift.seq, reason: drift.reason },
          });
        }
      }
    });
    for (const { drifts } of found.checks) {
      report.checked++;
      if (drifts.length > 0) report.drifted++;
      reconciliationTotal.inc({ result: drifts.length > 0 ? 'drift' : 'consistent' });
    }
  }
  return report;
}
