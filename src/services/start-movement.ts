import { initialTransition } from 'xstate';
import { NODE_MACHINE_ID, NODE_MACHINE_VERSION, initialNodeContext, nodeMachine } from '../machines/node-machine.ts';
import {
  MOVEMENT_MACHINE_ID,
  MOVEMENT_MACHINE_VERSION,
  initialMovementContext,
  movementMachine,
} from '../machines/movement-machine.ts';
import type { Client } from '../persistence/db.ts';
import type { PinnedEffect } from '../executors/evm/expected-effect.ts';
import type { CompiledPlan } from '../plan/compile.ts';
import { appendTransition, insertNodes, insertMovement, type NodeRow, type MovementRow } from '../persistence/movements.ts';

/**
 * Creates a movement and its nodes in the machines' initial states, with the creation
 * logged as each entity's transition number 0 (event xstate.init), so the log alone can replay
 * every entity from birth.
 */

export interface StartMovementInput {
  /** The compiled plan; it is stored with the movement, which runs exactly this plan. */
  plan: CompiledPlan;
  intent: Record<string, unknown>;
  inputParams: Record<string, unknown>;
  createdBy: string;
  quorum: number;
  expiresAt: string | null;
  callbackUrl: string | null;
  idempotencyKey: string | null;
  fingerprint: string | null;
  /**
   * The expected effect of each signing node, by node key, pinned from the approved plan and the
   * configuration of now (evm/expected-effect.ts pinExpectedEffect); dispatch signs against it.
   */
  expectedEffects?: ReadonlyMap<string, PinnedEffect>;
}

export async function startMovement(client: Client, input: StartMovementInput): Promise<{ movement: MovementRow; nodes: NodeRow[] }> {
  const [reqSnap] = initialTransition(
    movementMachine,
    initialMovementContext({ createdBy: input.createdBy, quorum: input.quorum, expiresAt: input.expiresAt }),
  );
  const movement = await insertMovement(client, {
    template_version_id: input.plan.template_version_id,
    template_key: input.plan.template_key,
    template_version: input.plan.template_version,
    intent: input.intent,
    input_params: input.inputParams,
    compiled_plan_hash: input.plan.compiled_plan_hash,
    compiled_plan: input.plan,
    machine_id: MOVEMENT_MACHINE_ID,
    machine_version: MOVEMENT_MACHINE_VERSION,
    request_state: String(reqSnap.value),
    approval_quorum: input.quorum,
    expires_at: input.expiresAt,
    callback_url: input.callbackUrl,
    idempotency_key: input.idempotencyKey,
    request_fingerprint: input.fingerprint,
    created_by: input.createdBy,
  });
  await appendTransition(client, {
    machine_id: MOVEMENT_MACHINE_ID,
    machine_version: MOVEMENT_MACHINE_VERSION,
    entity_type: 'request',
    entity_id: movement.id,
    request_id: movement.id,
    node_key: null,
    seq: 0,
    from_state: '',
    to_state: movement.request_state,
    event_type: 'xstate.init',
    event_payload: { created_by: input.createdBy, quorum: input.quorum, expires_at: input.expiresAt },
    actor: input.createdBy,
  });

  const nodes = await insertNodes(
    client,
    movement.id,
    input.plan.nodes.map(({ predecessors, successors, ...n }) => {
      const [snap] = initialTransition(
        nodeMachine,
        initialNodeContext({ nodeKind: n.node_kind, actionType: n.action_type, retryable: n.retryable }),
      );
      return {
        ...n,
        predecessor_keys: predecessors,
        successor_keys: successors,
        machine_id: NODE_MACHINE_ID,
        machine_version: NODE_MACHINE_VERSION,
        node_state: String(snap.value),
        expected_effect: input.expectedEffects?.get(n.node_key) ?? null,
      };
    }),
  );
  for (const n of nodes) {
    await appendTransition(client, {
      machine_id: NODE_MACHINE_ID,
      machine_version: NODE_MACHINE_VERSION,
      entity_type: 'node',
      entity_id: n.id,
      request_id: movement.id,
      node_key: n.node_key,
      seq: 0,
      from_state: '',
      to_state: n.node_state,
      event_type: 'xstate.init',
      event_payload: {},
      actor: input.createdBy,
    });
  }
  return { movement, nodes };
}
