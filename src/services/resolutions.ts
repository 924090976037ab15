import { FerryError, InvalidTransitionError, NotFoundError, ValidationError } from '../errors.ts';
import { NODE_MACHINE_ID, type NodeEvent, type Resolution } from '../machines/node-machine.ts';
import { MOVEMENT_MACHINE_ID } from '../machines/movement-machine.ts';
import { writeAudit } from '../persistence/audit.ts';
import { withTransaction } from '../persistence/db.ts';
import { getNode, getMovement, isMovementId, lockMovement, nodeByKey, nodesOfMovement } from '../persistence/movements.ts';
import {
  insertResolution,
  lockResolution,
  resolutionsOf,
  settleResolution,
  type ResolutionKind,
  type ResolutionRow,
} from '../persistence/resolutions.ts';
import type { Movement, MovementServiceDeps } from './movements.ts';
import { deliverBatch, type MovementItem } from '../durable/transition.ts';

/**
 * Manual intervention: a movement in MANUAL_INTERVENTION waits for a person to settle the node it
 * stopped on, with evidence. One operator proposes a resolution (mark the node completed with the
 * provider's reference, mark it failed, or retry it under a new attempt); a second principal confirms
 * it, and only the confirmation applies it, through the node machine (RESOLVED_COMPLETED,
 * RESOLVED_FAILED, RESOLVED_RETRY, whose guard refuses a confirmation by the proposer) and the movement
 * machine (RESUME, or NODE_RETRIED for a retry). Both steps are audited.
 */

const RESOLVABLE_NODE_STATES = new Set(['UNKNOWN', 'FAILED']);

export interface ProposeInput {
  actor: string;
  nodeKey: string;
  resolution: ResolutionKind;
  providerRef?: string | null;
  reason: string;
  evidence?: Record<string, unknown>;
}

function refusal(movementId: string, state: string, event: string, reason: string, message: string, details: Record<string, unknown> = {}) {
  return new FerryError('INVALID_TRANSITION', message, { reason, machine: MOVEMENT_MACHINE_ID, entity_id: movementId, state, event, ...details });
}

export async function proposeResolution(deps: Pick<MovementServiceDeps, 'pool'>, id: string, input: ProposeInput): Promise<ResolutionRow> {
  if (!isMovementId(id)) throw new NotFoundError('movement', id);
  if (input.resolution === 'complete' && !input.providerRef) {
    throw new ValidationError('a "complete" resolution needs provider_ref: the provider\'s reference for the completed action', { field: 'provider_ref' });
  }
  return withTransaction(deps.pool, async (client) => {
    const movement = await lockMovement(client, id);
    if (!movement) throw new NotFoundError('movement', id);
    const node = await nodeByKey(client, id, input.nodeKey);
    if (!node) throw new NotFoundError('node', `${input.nodeKey} of movement ${id}`);
    if (movement.request_state !== 'MANUAL_INTERVENTION') {
      throw refusal(id, movement.request_state, 'RESOLUTION_PROPOSED', 'NOT_IN_MANUAL_INTERVENTION', `movement ${id} is ${movement.request_state}; only a movement in MANUAL_INTERVENTION takes resolutions`);
    }
    if (!RESOLVABLE_NODE_STATES.has(node.node_state)) {
      throw new FerryError('INVALID_TRANSITION', `node ${input.nodeKey} is ${node.node_state}; only an UNKNOWN or FAILED node can be resolved`, {
        reason: 'NODE_NOT_RESOLVABLE',
        machine: NODE_MACHINE_ID,
        entity_id: node.id,
        node_key: input.nodeKey,
        state: node.node_state,
        event: 'RESOLUTION_PROPOSED',
      });
    }
    const row = await insertResolution(client, {
      request_id: id,
      request_node_id: node.id,
      node_key: node.node_key,
      attempt_no: node.attempt_no,
      resolution: input.resolution,
      provider_ref: input.providerRef ?? null,
      reason: input.reason,
      evidence: input.evidence ?? {},
      proposed_by: input.actor,
    });
    if (!row) {
      throw refusal(id, movement.request_state, 'RESOLUTION_PROPOSED', 'RESOLUTION_PENDING', `node ${input.nodeKey} already has a proposed resolution waiting for confirmation`, {
        node_key: input.nodeKey,
      });
    }
    await writeAudit(client, {
      actor: input.actor,
      action: 'movement.resolution.propose',
      entity_type: 'movement_node',
      entity_id: node.id,
      details: { request_id: id, node_key: node.node_key, resolution_id: row.id, resolution: row.resolution, provider_ref: row.provider_ref, reason: row.reason, attempt_no: row.attempt_no },
    });
    return row;
  });
}

function nodeEventOf(r: ResolutionRow, confirmedBy: string, at: string): NodeEvent {
  const base: Resolution = { resolutionId: r.id, attemptNo: r.attempt_no, proposedBy: r.proposed_by, confirmedBy, reason: r.reason, at };
  switch (r.resolution) {
    case 'complete':
      return { type: 'RESOLVED_COMPLETED', providerRef: r.provider_ref ?? '', ...base };
    case 'fail':
      return { type: 'RESOLVED_FAILED', ...base };
    case 'retry':
      return { type: 'RESOLVED_RETRY', ...base };
  }
}

/**
 * Applies a proposed resolution, confirmed by `actor`, who must not be its proposer. A node that
 * moved on since the proposal (another attempt, another state) refuses it: the proposal is marked
 * refused and a fresh one can be made.
 */
export async function confirmResolution(
  deps: MovementServiceDeps,
  id: string,
  resolutionId: string,
  input: { actor: string },
): Promise<{ resolution: ResolutionRow; movement: Movement }> {
  if (!isMovementId(id)) throw new NotFoundError('movement', id);
  if (!isMovementId(resolutionId)) throw new NotFoundError('resolution', resolutionId);
  const outcome = await withTransaction(deps.pool, async (client) => {
    const movement = await lockMovement(client, id);
    if (!movement) throw new NotFoundError('movement', id);
    const proposal = await lockResolution(client, id, resolutionId);
    if (!proposal) throw new NotFoundError('resolution', resolutionId);
    if (proposal.status !== 'proposed') {
      throw refusal(id, movement.request_state, 'RESOLUTION_CONFIRMED', 'RESOLUTION_NOT_OPEN', `resolution ${resolutionId} is ${proposal.status}, not waiting for confirmation`);
    }
    if (proposal.proposed_by === input.actor) {
      throw new FerryError('FOUR_EYES_VIOLATION', `the principal that proposed resolution ${resolutionId} cannot confirm it; a second person must`, {
        resolution_id: resolutionId,
      });
    }
    const at = new Date().toISOString();
    const movements: MovementItem[] =
      proposal.resolution === 'retry'
        ? [{ movementId: id, event: { type: 'NODE_RETRIED', by: input.actor, nodeKey: proposal.node_key } }]
        : [{ movementId: id, event: { type: 'RESUME', by: input.actor } }];
    const result = await deliverBatch(
      client,
      { movements, nodes: [{ nodeId: proposal.request_node_id, event: nodeEventOf(proposal, input.actor, at) }] },
      { actor: input.actor, deps: deps.transitions },
    );
    const [moved] = result.movements;
    const [node] = result.nodes;
    if (moved instanceof InvalidTransitionError || node instanceof InvalidTransitionError || !('node' in node) || !('movement' in moved)) {
      // Nothing is written: the refusal is recorded by the caller, outside this rolled-back transaction.
      const current = await getNode(client, proposal.request_node_id);
      throw new ResolutionRefused(proposal, current?.node_state ?? 'MISSING', current?.attempt_no ?? -1, movement.request_state);
    }
    const settled = await settleResolution(client, proposal.id, { status: 'applied', confirmedBy: input.actor });
    await writeAudit(client, {
      actor: input.actor,
      action: 'movement.resolution.confirm',
      entity_type: 'movement_node',
      entity_id: proposal.request_node_id,
      details: {
        request_id: id,
        node_key: proposal.node_key,
        resolution_id: proposal.id,
        resolution: proposal.resolution,
        proposed_by: proposal.proposed_by,
        from_state: node.from,
        to_state: node.to,
        request_from_state: movement.request_state,
        request_to_state: result.movementOf(id).request_state,
      },
    });
    return { resolution: settled, movement: { movement: (await getMovement(client, id))!, nodes: await nodesOfMovement(client, id) } };
  }).catch(async (err) => {
    if (!(err instanceof ResolutionRefused)) throw err;
    await withTransaction(deps.pool, async (client) => {
      await settleResolution(client, err.proposal.id, { status: 'refused', confirmedBy: input.actor, refusal: err.message });
      await writeAudit(client, {
        actor: input.actor,
        action: 'movement.resolution.refused',
        entity_type: 'movement_node',
        entity_id: err.proposal.request_node_id,
        details: { request_id: id, resolution_id: err.proposal.id, reason: err.message },
      });
    });
    throw new FerryError('INVALID_TRANSITION', err.message, {
      reason: 'RESOLUTION_REFUSED',
      machine: NODE_MACHINE_ID,
      entity_id: err.proposal.request_node_id,
      node_key: err.proposal.node_key,
      state: err.nodeState,
      event: nodeEventOf(err.proposal, input.actor, '').type,
    });
  });
  return outcome;
}

class ResolutionRefused extends Error {
  constructor(
    readonly proposal: ResolutionRow,
    readonly nodeState: string,
    attemptNo: number,
    movementState: string,
  ) {
    super(
      `resolution ${proposal.id} no longer applies: node ${proposal.node_key} is ${nodeState} at attempt ${attemptNo} (proposed for attempt ${proposal.attempt_no}), movement ${movementState}`,
    );
  }
}

export async function listResolutions(deps: Pick<MovementServiceDeps, 'pool'>, id: string): Promise<ResolutionRow[]> {
  if (!isMovementId(id) || !(await getMovement(deps.pool, id))) throw new NotFoundError('movement', id);
  return resolutionsOf(deps.pool, id);
}
