import type { NodeState } from './node-machine.ts';

/**
 * The facts about a movement's nodes that decide the movement's state. Computed from the node rows
 * inside the transaction and carried in the movement event, so the movement machine stays pure and
 * the transition log records exactly what it decided on.
 */
export interface NodeSummary {
  total: number;
  done: number;
  failed: number;
  unknown: number;
  sideEffectCompleted: boolean;
  manualGateReady: boolean;
  executing: boolean;
  inFlight: boolean;
  /** Nodes CANCELLED; while the movement runs, only by a provider's confirmed cancel. Absent in older logs. */
  cancelled?: number;
  /** A node whose executor asked for a person (manual_intervention_required) is UNKNOWN or FAILED. */
  manualIntervention?: boolean;
}

export interface SummarizedNode {
  node_state: NodeState | string;
  node_kind: string;
  action_type: string;
  manual_intervention_required?: boolean;
}

const SIDE_EFFECT_KINDS = new Set(['action', 'compensation', 'post_action']);
const EXECUTING = new Set(['PREPARING', 'AWAITING_SIGNATURE', 'SUBMITTING', 'SUBMITTED', 'OBSERVING']);
// A node in one of these is being worked on or may have moved money already: cancelling the movement
// now would race the worker or lose track of the side effect.
const IN_FLIGHT = new Set(['PREPARING', 'AWAITING_SIGNATURE', 'SUBMITTING', 'SUBMITTED', 'OBSERVING', 'UNKNOWN']);

export function isManualNode(n: Pick<SummarizedNode, 'node_kind' | 'action_type'>): boolean {
  return n.node_kind === 'manual_gate' || n.action_type.startsWith('manual_');
}

export function summarizeNodes(nodes: readonly SummarizedNode[]): NodeSummary {
  const s: NodeSummary = {
    total: nodes.length,
    done: 0,
    failed: 0,
    unknown: 0,
    sideEffectCompleted: false,
    manualGateReady: false,
    executing: false,
    inFlight: false,
    cancelled: 0,
  };
  for (const n of nodes) {
    if (n.node_state === 'COMPLETED' || n.node_state === 'SKIPPED') s.done++;
    if (n.node_state === 'FAILED') s.failed++;
    if (n.node_state === 'UNKNOWN') s.unknown++;
    if (n.node_state === 'CANCELLED') s.cancelled!++;
    if (n.node_state === 'COMPLETED' && SIDE_EFFECT_KINDS.has(n.node_kind)) s.sideEffectCompleted = true;
    if (n.node_state === 'READY' && isManualNode(n)) s.manualGateReady = true;
    if (EXECUTING.has(n.node_state)) s.executing = true;
    if (IN_FLIGHT.has(n.node_state)) s.inFlight = true;
    if (n.manual_intervention_required && (n.node_state === 'UNKNOWN' || n.node_state === 'FAILED')) s.manualIntervention = true;
  }
  return s;
}
