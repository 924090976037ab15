import { initialTransition, type AnyStateMachine } from 'xstate';
import { step } from './step.ts';

/**
 * Replays one entity's transition log through its machine, from the machine's initial state.
 * Pure: the log carries every time and fact the machines decided on, so the replay must land on
 * exactly the stored state and context. Anything else is drift, and the first transition where the log
 * and the machine part ways is named.
 */
export interface LoggedTransition {
  seq: number;
  from_state: string;
  to_state: string;
  event_type: string;
  event_payload: Record<string, unknown>;
}

export type ReplayResult =
  | { ok: true; value: string; context: unknown }
  | { ok: false; seq: number; reason: string };

export function replayLog(machine: AnyStateMachine, input: unknown, logged: readonly LoggedTransition[]): ReplayResult {
  const [initial] = initialTransition(machine, input as never);
  let snapshot = initial;
  const [birth, ...rest] = logged;
  if (!birth || birth.seq !== 0 || birth.event_type !== 'xstate.init') {
    return { ok: false, seq: birth?.seq ?? 0, reason: 'the log does not start with the entity’s creation' };
  }
  if (birth.to_state !== String(snapshot.value)) {
    return { ok: false, seq: 0, reason: `created in ${birth.to_state}, the machine starts in ${String(snapshot.value)}` };
  }
  for (const [i, t] of rest.entries()) {
    if (t.seq !== i + 1) return { ok: false, seq: t.seq, reason: `expected transition ${i + 1}, found ${t.seq}` };
    if (t.from_state !== String(snapshot.value)) {
      return { ok: false, seq: t.seq, reason: `logged from ${t.from_state}, the replay is in ${String(snapshot.value)}` };
    }
    const [next] = step(machine, snapshot, { ...t.event_payload, type: t.event_type } as never);
    if (next === snapshot) return { ok: false, seq: t.seq, reason: `${t.from_state} does not accept ${t.event_type}` };
    if (String(next.value) !== t.to_state) {
      return { ok: false, seq: t.seq, reason: `logged to ${t.to_state}, the machine goes to ${String(next.value)}` };
    }
    snapshot = next;
  }
  return { ok: true, value: String(snapshot.value), context: snapshot.context };
}
