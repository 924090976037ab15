import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createActor, fromPromise, initialTransition, setup, transition } from 'xstate';
import { waitFor } from './helpers/wait.ts';

/**
 * What XState v5 does with `invoke` under the pure `transition()` Ferry's durable transition uses,
 * and on restore: the facts the actor runtime's design rests on (docs/actor-runtime.md, "Step 1:
 * what the spike found"). A test, so an XState upgrade that changes any of them fails here first.
 */

function submittingMachine() {
  const calls = { submit: 0 };
  const machine = setup({
    types: { context: {} as { attempt: number } },
    actors: {
      submit: fromPromise(async () => {
        calls.submit++;
        return 'sent';
      }),
    },
  }).createMachine({
    id: 'spike',
    initial: 'ready',
    context: { attempt: 0 },
    states: {
      ready: { on: { GO: 'submitting' } },
      submitting: { invoke: { src: 'submit', onDone: 'submitted' } },
      submitted: { type: 'final' },
    },
  });
  return { machine, calls };
}

// An invoked promise actor starts inside actor.start(); one turn of the event loop lets it settle.
const settle = () => new Promise((r) => setImmediate(r));

test('the pure transition() returns an invocation as an action and runs nothing', () => {
  const { machine, calls } = submittingMachine();
  const [start] = initialTransition(machine);
  const [next, actions] = transition(machine, start, { type: 'GO' });
  assert.equal(next.value, 'submitting');
  assert.deepEqual(
    actions.map((a) => a.type),
    ['xstate.spawnChild'],
  );
  assert.equal(calls.submit, 0, 'transition() must not start the invoked promise');
  // The context, which is what Ferry persists with the state value, holds nothing of the child.
  assert.deepEqual(next.context, { attempt: 0 });
  // The snapshot itself does carry an (unstarted) child, and so does its persisted form.
  assert.deepEqual(Object.keys(next.children).length, 1);
  const persisted = machine.getPersistedSnapshot(next) as unknown as { children: Record<string, { src: string }> };
  assert.deepEqual(
    Object.values(persisted.children).map((c) => c.src),
    ['submit'],
  );
});

test('an actor restored from a state value and context does not invoke again', async () => {
  const { machine, calls } = submittingMachine();
  const actor = createActor(machine, { snapshot: machine.resolveState({ value: 'submitting', context: { attempt: 1 } }) });
  actor.start();
  await settle();
  // Restored this way (as Ferry rebuilds snapshots from rows), a SUBMITTING actor would sit forever.
  assert.equal(actor.getSnapshot().value, 'submitting');
  assert.equal(calls.submit, 0);
  actor.stop();
});

test("an actor restored from XState's persisted snapshot runs the invoked promise again", async () => {
  const { machine, calls } = submittingMachine();
  const [start] = initialTransition(machine);
  const [next] = transition(machine, start, { type: 'GO' });
  const actor = createActor(machine, { snapshot: machine.getPersistedSnapshot(next) as never });
  actor.start();
  await waitFor('the restored actor to finish its invoked submit', () => actor.getSnapshot().value === 'submitted', 2000, 5);
  // A blind resubmit: why a taken-over SUBMITTING node must never be restored by XState itself.
  assert.equal(calls.submit, 1);
  actor.stop();
});
