import { createActor, type AnyStateMachine, type EventFromLogic, type SnapshotFrom } from 'xstate';

/**
 * XState's pure `transition(machine, snapshot, event)`, without its set-up cost per call.
 *
 * `transition()` builds a fresh inert actor scope on every call: it creates an actor of the
 * machine (which computes the machine's initial snapshot) and two actor systems, only to collect
 * the actions the transition would run. For Ferry's machines that costs about four times the
 * transition itself, and the runtime computes several transitions per node event (previews, the
 * write). Here each machine gets one inert scope, made once, whose action executor collects the
 * actions of the call in progress: a transition is synchronous, so calls never interleave.
 *
 * Sharing the scope is sound because Ferry's machines never spawn or invoke actors nor schedule
 * delayed events (their timers are durable columns, read by the runtime): nothing registers in the
 * scope's system between calls. test/machine-step.test.ts checks, over every machine, that this
 * gives what `transition()` gives.
 */
interface InertScope {
  self: unknown;
  defer: () => void;
  id: string;
  logger: () => void;
  sessionId: string;
  stopChild: () => void;
  system: unknown;
  emit: () => void;
  actionExecutor: (action: unknown) => void;
}

const scopes = new WeakMap<AnyStateMachine, InertScope>();

function scopeOf(machine: AnyStateMachine): InertScope {
  let scope = scopes.get(machine);
  if (!scope) {
    const self = createActor(machine);
    scope = {
      self,
      defer: () => {},
      id: '',
      logger: () => {},
      sessionId: '',
      stopChild: () => {},
      system: self.system,
      emit: () => {},
      actionExecutor: () => {},
    };
    scopes.set(machine, scope);
  }
  return scope;
}

/** The next snapshot of `machine` from `snapshot` on `event`, and the actions it would execute. */
export function step<M extends AnyStateMachine>(machine: M, snapshot: SnapshotFrom<M>, event: EventFromLogic<M>): [SnapshotFrom<M>, { type: string; params?: unknown }[]] {
  const scope = scopeOf(machine);
  const actions: { type: string; params?: unknown }[] = [];
  scope.actionExecutor = (action) => actions.push(action as { type: string; params?: unknown });
  try {
    return [machine.transition(snapshot, event, scope as never) as SnapshotFrom<M>, actions];
  } finally {
    scope.actionExecutor = () => {};
  }
}
