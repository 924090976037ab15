import type { AnyStateMachine } from 'xstate';

/**
 * The transitions a machine defines, read from its definition: one entry per candidate of every
 * event handler of every state. This is the reference the generated-path coverage test and the
 * inspection API measure against.
 */
export interface DefinedTransition {
  from: string;
  event: string;
  to: string;
  guard: string | null;
  actions: string[];
}

/** A guard as the inspection API and the coverage test name it: its type, `and(a, b)` for a combination. */
export function guardLabel(guard: unknown): string | null {
  if (!guard) return null;
  if (typeof guard === 'string') return guard;
  const g = guard as { type?: string; guards?: unknown[] };
  if (g.guards) return `${g.type ?? 'and'}(${g.guards.map(guardLabel).join(', ')})`;
  return g.type ?? 'inline';
}

export function actionLabel(action: unknown): string {
  if (typeof action === 'string') return action;
  const a = action as { type?: string; name?: string };
  return a.type ?? a.name ?? 'inline';
}

export function definedTransitions(machine: AnyStateMachine): DefinedTransition[] {
  const out: DefinedTransition[] = [];
  for (const [key, state] of Object.entries(machine.root.states)) {
    for (const [event, candidates] of state.transitions) {
      for (const t of candidates) {
        const guard = t.guard as unknown;
        out.push({
          from: key,
          event,
          to: t.target?.[0]?.key ?? key,
          guard: guardLabel(guard),
          actions: (t.actions ?? []).map(actionLabel),
        });
      }
    }
  }
  return out;
}

export function stateKeys(machine: AnyStateMachine): { key: string; final: boolean }[] {
  return Object.entries(machine.root.states).map(([key, s]) => ({ key, final: s.type === 'final' }));
}

export function transitionKey(t: { from: string; event: string; to: string }): string {
  return `${t.from} --${t.event}--> ${t.to}`;
}
