import { getShortestPaths } from '@xstate/graph';
import { initialTransition, transition, type AnyStateMachine, type EventObject } from 'xstate';
import assert from 'node:assert/strict';
import { transitionKey } from '../../src/machines/introspect.ts';
import { step as ferryStep } from '../../src/machines/step.ts';

export interface ModelStep {
  event: EventObject;
  from: { value: string; context: unknown };
  to: { value: string; context: unknown };
}

export interface ModelPath {
  name: string;
  input: unknown;
  steps: ModelStep[];
}

/**
 * Paths generated from a machine: the shortest path to every reachable state, extended by every
 * event that state accepts. Together they take every transition reachable from the given input,
 * each on the shortest route there, so replaying them against the runtime is both complete and
 * small.
 */
export function coveringPaths(
  machine: AnyStateMachine,
  opts: { input: unknown; events: (snapshot: any) => EventObject[]; serializeState: (snapshot: any) => string },
): ModelPath[] {
  const shortest = getShortestPaths(machine, {
    input: opts.input,
    events: opts.events,
    serializeState: (s: any) => opts.serializeState(s),
  } as any);
  const paths: ModelPath[] = [];
  const seen = new Set<string>();
  for (const p of shortest) {
    // The library finds which event sequences reach each state; the snapshots along the way are
    // recomputed here from the machine itself, because states that serialize alike share one
    // stored snapshot in the traversal.
    const base: ModelStep[] = [];
    let end = initialTransition(machine, opts.input as never)[0] as any;
    let replayable = true;
    for (const { event } of p.steps.slice(1)) {
      const [next] = checkedTransition(machine, end, event);
      if (next === end) {
        replayable = false;
        break;
      }
      base.push({ event, from: snap(end), to: snap(next) });
      end = next;
    }
    if (!replayable || end.status !== 'active') continue;
    for (const event of opts.events(end)) {
      const [next] = checkedTransition(machine, end, event);
      if (next === end) continue;
      const step = { event, from: snap(end), to: snap(next) };
      const id = `${opts.serializeState(end)}|${JSON.stringify(event)}`;
      if (seen.has(id)) continue;
      seen.add(id);
      const steps = [...base, step];
      paths.push({ name: steps.map((s) => `${s.event.type}${s.to.value === s.from.value ? '' : '→' + s.to.value}`).join(' '), input: opts.input, steps });
    }
  }
  return paths;
}

/**
 * XState's transition(), checked against the runtime's (src/machines/step.ts, which reuses one
 * inert actor scope per machine): same state, context and actions on every generated step, so
 * every path any test generates also checks that the runtime computes what XState computes.
 */
function checkedTransition(machine: AnyStateMachine, from: any, event: EventObject): [any, unknown[]] {
  const [next, actions] = transition(machine, from, event as never);
  const [mine, myActions] = ferryStep(machine, from, event as never);
  const label = `${machine.id} ${String(from.value)} on ${event.type}`;
  assert.equal(mine === from, next === from, `${label}: taken by one and not the other`);
  assert.equal(String(mine.value), String(next.value), label);
  assert.deepEqual(mine.context, next.context, label);
  assert.equal(mine.status, next.status, label);
  assert.deepEqual(
    myActions.map((a) => [a.type, a.params]),
    actions.map((a) => [(a as { type: string }).type, (a as { params?: unknown }).params]),
    `${label}: actions`,
  );
  return [next, actions];
}

function snap(s: any) {
  return { value: String(s.value), context: s.context };
}

export function walkedTransitions(paths: ModelPath[]): Set<string> {
  const out = new Set<string>();
  for (const p of paths) for (const s of p.steps) out.add(transitionKey({ from: s.from.value, event: s.event.type, to: s.to.value }));
  return out;
}
