import type { AnyStateMachine } from 'xstate';
import { step } from '../machines/step.ts';
import { SnapshotIncompatibleError, TransitionConflictError } from '../errors.ts';
import { transitionsTotal } from '../metrics.ts';
import type { Client } from '../persistence/db.ts';
import { appendEntityTransition, type EntityTransitionType } from '../persistence/entity-transitions.ts';

/**
 * Delivering one event to an entity whose state lives in one row and is decided by one machine
 * (a template proposal, a credential proposal), the caller holding the row's lock: the stored
 * machine version is checked, the machine's rules are asked first (so a refusal can say which
 * rule), then XState's pure transition() decides, the row is written with its version as the
 * precondition, and one transition row is logged. A refusal throws and writes nothing. Movements
 * and nodes go through the batched durable transition function instead (durable/transition.ts).
 */
export interface RowState {
  id: string;
  row_version: number;
  proposal_state: string;
  machine_id: string;
  machine_version: string;
}

export interface RowMachine<Row extends RowState, State extends string, Ctx, Ev extends { type: string; at: string }> {
  machine: AnyStateMachine;
  machineId: string;
  machineVersion: string;
  entityType: EntityTransitionType;
  context(row: Row): Ctx;
  /** Which rule refuses the event, or null (the machine's guards as plain rules). */
  refusal(from: State, context: Ctx, event: Ev): string | null;
  refused(row: Row, event: Ev, why: string): Error;
  /** Writes the new state and context; null when the row is no longer at `row.row_version`. */
  write(client: Client, row: Row, to: State, context: Ctx): Promise<Row | null>;
}

export interface RowDelivered<Row, State> {
  row: Row;
  from: State;
  to: State;
  /** The machine's messages to the service (e.g. writeVersion, applyChange). */
  actions: string[];
}

export async function deliverToRow<Row extends RowState, State extends string, Ctx, Ev extends { type: string; at: string }>(
  m: RowMachine<Row, State, Ctx, Ev>,
  client: Client,
  row: Row,
  event: Ev,
  actor: string,
): Promise<RowDelivered<Row, State>> {
  if (row.machine_id !== m.machineId || row.machine_version !== m.machineVersion) {
    throw new SnapshotIncompatibleError(m.machineId, row.id, `stored ${row.machine_id}@${row.machine_version}`);
  }
  const from = row.proposal_state as State;
  const context = m.context(row);
  const why = m.refusal(from, context, event);
  if (why) throw m.refused(row, event, why);
  let snapshot;
  try {
    snapshot = m.machine.resolveState({ value: from, context });
  } catch (err) {
    throw new SnapshotIncompatibleError(m.machineId, row.id, err);
  }
  const [next, actions] = step(m.machine, snapshot, event);
  if (next === snapshot) throw m.refused(row, event, 'state');
  const to = String(next.value) as State;
  const updated = await m.write(client, row, to, next.context as Ctx);
  if (!updated) throw new TransitionConflictError(m.machineId, row.id);
  const { type, ...payload } = event;
  await appendEntityTransition(client, m.entityType, {
    machine_id: m.machineId,
    machine_version: m.machineVersion,
    entity_id: row.id,
    seq: row.row_version + 1,
    from_state: from,
    to_state: to,
    event_type: type,
    event_payload: payload,
    actor,
    at: event.at,
  });
  transitionsTotal.inc({ machine: m.machineId, from, to });
  return { row: updated, from, to, actions: actions.map((a) => a.type) };
}
