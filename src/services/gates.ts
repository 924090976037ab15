import { FerryError, InvalidTransitionError, NotFoundError, ValidationError } from '../errors.ts';
import { NODE_MACHINE_ID } from '../machines/node-machine.ts';
import { isManualNode } from '../machines/node-summary.ts';
import { MOVEMENT_MACHINE_ID } from '../machines/movement-machine.ts';
import { writeAudit } from '../persistence/audit.ts';
import { withTransaction } from '../persistence/db.ts';
import { getMovement, isMovementId, lockMovement, nodeByKey, nodesOfMovement, type MovementRow, type NodeRow } from '../persistence/movements.ts';
import { actorAliases } from '../persistence/principals.ts';
import { deliverNodeEvent } from '../durable/transition.ts';
import type { Movement, MovementServiceDeps } from './movements.ts';

/**
 * Manual gates: a `manual_gate` node (or an `action_type` starting with `manual_`) is never
 * dispatched; once READY its movement waits (WAITING_MANUAL_ACTION) until a person confirms the
 * gate, with a note (MANUAL_CONFIRMED: the gate is COMPLETED and the plan goes on), or skips it,
 * with a reason (SKIP_REQUESTED: SKIPPED, the plan goes on as after a skipped step).
 *
 * Four-eyes: the movement's requester can never operate its gates, with any of its tokens; with
 * the gate's `config.exclude_approvers: true`, nor can any principal that approved the movement.
 * Each operation runs in one transaction holding the movement's lock: the check, the node
 * machine's event (which decides, and advances the plan), an audit row (`movement.gate.confirm`,
 * `movement.gate.skip`) and a callback (`manual_gate_confirmed`, `manual_gate_skipped`, with the
 * gate's node_key) when the movement has a callback URL.
 */

export const GATE_MOVEMENT_STATES = new Set(['APPROVED', 'EXECUTING', 'WAITING_MANUAL_ACTION']);
export const GATE_NOTE_MAX = 2000;

export type GateOperation = 'confirm' | 'skip';

export interface GateInput {
  actor: string;
  nodeKey: string;
  /** confirm: the note (what was checked); skip: the reason. Required either way. */
  note: string;
}

const EVENT_OF = { confirm: 'MANUAL_CONFIRMED', skip: 'SKIP_REQUESTED' } as const;
const CALLBACK_OF = { confirm: 'manual_gate_confirmed', skip: 'manual_gate_skipped' } as const;
const AUDIT_OF = { confirm: 'movement.gate.confirm', skip: 'movement.gate.skip' } as const;

export function confirmGate(deps: MovementServiceDeps, id: string, input: GateInput): Promise<Movement> {
  return operateGate(deps, id, 'confirm', input);
}

export function skipGate(deps: MovementServiceDeps, id: string, input: GateInput): Promise<Movement> {
  return operateGate(deps, id, 'skip', input);
}

/** Whether the gate asks for a principal that did not approve the movement (the template's `config.exclude_approvers`). */
export function gateExcludesApprovers(node: Pick<NodeRow, 'config'>): boolean {
  return node.config?.exclude_approvers === true;
}

async function operateGate(deps: MovementServiceDeps, id: string, op: GateOperation, input: GateInput): Promise<Movement> {
  const note = input.note?.trim() ?? '';
  const field = op === 'confirm' ? 'note' : 'reason';
  if (note.length === 0) throw new ValidationError(`a gate ${op} needs a ${field}: what the person checked or decided`, { field });
  if (note.length > GATE_NOTE_MAX) throw new ValidationError(`the ${field} is longer than ${GATE_NOTE_MAX} characters`, { field });
  if (!isMovementId(id)) throw new NotFoundError('movement', id);
  const event = EVENT_OF[op];
  return withTransaction(deps.pool, async (client) => {
    const locked = await lockMovement(client, id);
    if (!locked) throw new NotFoundError('movement', id);
    const node = await nodeByKey(client, id, input.nodeKey);
    if (!node) throw new NotFoundError('node', `${input.nodeKey} of movement ${id}`);
    if (!isManualNode(node)) {
      throw new FerryError('INVALID_TRANSITION', `node ${input.nodeKey} of movement ${id} is not a manual gate`, {
        reason: 'NOT_A_MANUAL_GATE',
        machine: NODE_MACHINE_ID,
        entity_id: node.id,
        node_key: input.nodeKey,
        state: node.node_state,
        event,
      });
    }
    await assertMayOperate(client, locked, node, input.actor);
    if (!GATE_MOVEMENT_STATES.has(locked.request_state)) {
      throw new FerryError('INVALID_TRANSITION', `movement ${id} is ${locked.request_state}; its gates can be operated only once it is approved and running`, {
        reason: 'MOVEMENT_NOT_RUNNING',
        machine: MOVEMENT_MACHINE_ID,
        entity_id: id,
        state: locked.request_state,
        event,
      });
    }
    // Only a gate the plan has reached: a BLOCKED one is not the person's to decide yet.
    if (node.node_state !== 'READY') throw new InvalidTransitionError(NODE_MACHINE_ID, node.id, node.node_state, event);
    const at = new Date().toISOString();
    await deliverNodeEvent(client, node.id, op === 'confirm' ? { type: 'MANUAL_CONFIRMED', at, note } : { type: 'SKIP_REQUESTED', reason: note }, {
      actor: input.actor,
      deps: deps.transitions,
    });
    const movement = (await getMovement(client, id))!;
    await writeAudit(client, {
      actor: input.actor,
      action: AUDIT_OF[op],
      entity_type: 'movement_node',
      entity_id: node.id,
      details: { request_id: id, node_key: node.node_key, [field]: note, from_state: locked.request_state, to_state: movement.request_state },
    });
    if (movement.callback_url) await deps.transitions.callbacks(client, { movement, eventType: CALLBACK_OF[op], nodeKey: node.node_key, occurredAt: at });
    return { movement, nodes: await nodesOfMovement(client, id) };
  });
}

/** Four-eyes for a gate: never the requester; never an approver when the gate says so. Principals, with all their tokens. */
async function assertMayOperate(client: Parameters<typeof actorAliases>[0], movement: MovementRow, node: NodeRow, actor: string): Promise<void> {
  const same = new Set(await actorAliases(client, actor));
  if (same.has(movement.created_by)) {
    throw new FerryError('FOUR_EYES_VIOLATION', `the principal that created movement ${movement.id} cannot operate its manual gates; a second person must`, {
      movement_id: movement.id,
      node_key: node.node_key,
      reason: 'GATE_BY_REQUESTER',
    });
  }
  if (gateExcludesApprovers(node) && (movement.approvals ?? []).some((a) => same.has(a.by))) {
    throw new FerryError('FOUR_EYES_VIOLATION', `gate ${node.node_key} of movement ${movement.id} must be operated by a principal that did not approve the movement`, {
      movement_id: movement.id,
      node_key: node.node_key,
      reason: 'GATE_BY_APPROVER',
    });
  }
}
