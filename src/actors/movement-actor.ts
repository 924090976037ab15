import { randomUUID } from 'node:crypto';
import { assign, createActor, fromPromise, setup, type ActorRefFrom } from 'xstate';
import { TransitionConflictError } from '../errors.ts';
import { isManualNode } from '../machines/node-summary.ts';
import type { LockedMovement } from '../persistence/group-commit.ts';
import { readMovements } from '../persistence/leases.ts';
import type { NodeRow } from '../persistence/movements.ts';
import { ArtifactCache, versionsOf } from './artifact-cache.ts';
import { carriedWithResults, runDispatches } from './dispatcher.ts';
import { claimedContexts, nowIso, type WorkerDeps } from './execution.ts';
import { observationOf } from './observer.ts';
import { signAndSendReplacement, type ReplacementProposal } from './replacement.ts';
import { deliverHeld, nextWorkAt, previewHeld, type BatchResult, type MovementItem, type NodeItem } from '../durable/transition.ts';

/**
 * A movement actor: one live XState actor per movement this process leases (lease-holder.ts),
 * which drives the movement from its rows in memory.
 *
 * The movement and node machines in src/machines stay pure and decide every state; this actor's
 * own small machine (the driver) only says when to take the next step, and each step is an invoked
 * promise that asks the machines through the durable transition function (deliverHeld): a step
 * takes the movement's due READY node through the dispatcher's round (prepare, sign, SUBMITTING
 * committed before submit, the result committed with the successor it unblocks claimed, and so on
 * while successors are carried), or observes its due SUBMITTED / OBSERVING nodes and commits what
 * the provider said. Between steps the actor keeps the rows its last commit left and writes over
 * them without a re-read, fenced by the movement's write_version (group-commit.ts): a write that
 * finds the movement changed (an operator's cancel, recovery, a takeover) is refused whole, and the
 * actor reads the rows again before it decides anything.
 *
 * A node the actor finds already in dispatch (PREPARING, AWAITING_SIGNATURE, SUBMITTING) at the
 * start of a step is not its own: a process died with it, and recovery resolves it by asking the
 * provider. The actor never submits it; it hands the movement back. Why the driver restores no
 * XState snapshot of its own: docs/actor-runtime.md ("Step 1: what the spike found").
 *
 * The waits are delayed events: a node observed again in a few seconds, or deferred with a
 * dispatch_after, keeps the movement's actor waiting (up to `holdMs`) instead of handing it back;
 * a later one hands the movement back, and its next_work_at makes it leasable when due.
 */

const ACTOR = 'worker:movement_actor';
const IN_DISPATCH = new Set(['PREPARING', 'AWAITING_SIGNATURE', 'SUBMITTING']);
/** Steps in a row whose writes were refused before the actor gives the movement back. */
const MAX_REFUSED_STEPS = 3;

export type StepOutcome = { next: 'step' } | { next: 'wait'; ms: number } | { next: 'done'; reason: string };

/** The rows a movement actor holds between steps; null: read them again before the next step. */
export interface MovementActorState {
  movementId: string;
  held: LockedMovement | null;
  refusedSteps: number;
  /** An outside event changed the movement: the next step reads its rows first. */
  stale?: boolean;
  /** The highest write_version a NOTIFY told of (lease-holder.ts): rows older than it are read again. */
  noticed?: number;
  /** The artifacts of the held rows, kept between steps (artifact-cache.ts). */
  artifacts?: ArtifactCache;
}

const driver = setup({
  types: {
    context: {} as { waitMs: number; reason: string },
    events: {} as { type: 'POKE' } | { type: 'LEASE_LOST' } | { type: 'STOP' },
    input: {} as Record<string, never>,
    output: {} as { reason: string },
  },
  actors: {
    // Provided per actor (startMovementActor): one step over the movement's rows.
    step: fromPromise<StepOutcome>(async () => ({ next: 'done', reason: 'no step provided' })),
  },
  delays: {
    untilDue: ({ context }) => context.waitMs,
  },
  guards: {
    hasMoreNow: (_, out: StepOutcome) => out.next === 'step',
    waitsShortly: (_, out: StepOutcome) => out.next === 'wait',
  },
}).createMachine({
  id: 'ferry.movement_actor',
  initial: 'stepping',
  context: { waitMs: 0, reason: '' },
  output: ({ context }) => ({ reason: context.reason }),
  states: {
    stepping: {
      invoke: {
        src: 'step',
        onDone: [
          { guard: { type: 'hasMoreNow', params: ({ event }) => event.output }, target: 'stepping', reenter: true },
          {
            guard: { type: 'waitsShortly', params: ({ event }) => event.output },
            target: 'waiting',
            actions: assign({ waitMs: ({ event }) => (event.output as { ms: number }).ms }),
          },
          { target: 'done', actions: assign({ reason: ({ event }) => (event.output as { reason?: string }).reason ?? 'nothing due' }) },
        ],
        onError: { target: 'done', actions: assign({ reason: 'step failed' }) },
      },
      // A step in flight finishes (its effects are the machines' to record); a lost lease shows up as
      // a refused write, and the holder drops the actor once the step is over.
      on: { STOP: { actions: assign({ reason: 'stopping' }) } },
    },
    waiting: {
      after: { untilDue: 'stepping' },
      on: {
        POKE: 'stepping',
        LEASE_LOST: { target: 'done', actions: assign({ reason: 'lease lost' }) },
        STOP: { target: 'done', actions: assign({ reason: 'stopping' }) },
      },
    },
    done: { type: 'final' },
  },
});

export type MovementActor = ActorRefFrom<typeof driver>;

/** Starts the actor of one leased movement; `onDone` runs once it has stopped. */
export function startMovementActor(
  deps: WorkerDeps,
  state: MovementActorState,
  opts: { holdMs: number; stopping: () => boolean; onDone: (reason: string) => void },
): MovementActor {
  const actor = createActor(
    driver.provide({
      actors: {
        step: fromPromise(async () => {
          if (opts.stopping()) return { next: 'done' as const, reason: 'stopping' };
          try {
            return await stepMovement(deps, state, opts.holdMs);
          } catch (err) {
            // Ferry's own trouble (the database, a bug): the movement is handed back, and its
            // next_work_at makes it leasable again; what was committed stands.
            deps.log.warn({ err, movement_id: state.movementId, worker: 'movement_actor' }, 'movement step failed; the movement is handed back');
            throw err;
          }
        }),
      },
    }),
    { input: {} },
  );
  actor.subscribe({
    complete: () => opts.onDone(actor.getSnapshot().output?.reason ?? 'done'),
    error: (err) => {
      deps.log.error({ err, movement_id: state.movementId }, 'movement actor failed');
      opts.onDone('failed');
    },
  });
  actor.start();
  return actor;
}

const isRefusal = (r: unknown) => r instanceof Error;

/** One step over the movement: dispatch its due READY node, or observe its due nodes, or say when. */
export async function stepMovement(deps: WorkerDeps, state: MovementActorState, holdMs: number): Promise<StepOutcome> {
  if (state.stale || (state.held && (state.noticed ?? 0) > Number(state.held.movement.write_version))) {
    state.stale = false;
    state.held = null;
  }
  if (!state.held) state.held = (await readMovements(deps.pool, [state.movementId]))[0] ?? null;
  const held = state.held;
  if (!held) return { next: 'done', reason: 'movement gone' };
  const { movement, nodes } = held;
  if (movement.request_state !== 'APPROVED' && movement.request_state !== 'EXECUTING') return { next: 'done', reason: `movement ${movement.request_state}` };
  // Not this actor's: a process died with it in dispatch, and recovery asks the provider.
  if (nodes.some((n) => IN_DISPATCH.has(n.node_state))) return { next: 'done', reason: 'a node is in dispatch elsewhere' };
  if (state.refusedSteps >= MAX_REFUSED_STEPS) return { next: 'done', reason: 'writes refused' };

  const now = Date.now();
  const ready = nodes.find((n) => n.node_state === 'READY' && !isManualNode(n) && (!n.dispatch_after || n.dispatch_after.getTime() <= now));
  if (ready) return dispatchNode(deps, state, held, ready);
  const due = nodes.filter((n) => (n.node_state === 'SUBMITTED' || n.node_state === 'OBSERVING') && (!n.next_observe_at || n.next_observe_at.getTime() <= now));
  if (due.length > 0) return observeNodes(deps, state, held, due);

  const next = nextWorkAt(movement, nodes);
  if (!next) return { next: 'done', reason: 'nothing due' };
  const ms = Math.max(0, new Date(next).getTime() - Date.now());
  return ms <= holdMs ? { next: 'wait', ms } : { next: 'done', reason: 'next work later' };
}

/** A write over held rows; null when the fence refused it (the rows are read again next step). */
async function commitHeld(deps: WorkerDeps, state: MovementActorState, items: { movements?: MovementItem[]; nodes?: NodeItem[] }, carry: boolean): Promise<BatchResult | null> {
  try {
    const before = versionsOf([state.held!]);
    const opts = { actor: ACTOR, deps: deps.transitions, held: [state.held!], claimUnblocked: carry ? () => randomUUID() : undefined };
    const result = await (deps.groupWriter?.write(items, opts) ?? deliverHeld(deps.pool, items, opts));
    state.held = { movement: result.movementOf(state.movementId), nodes: result.nodesOf(state.movementId) };
    state.artifacts?.committed(before, items.nodes ?? [], result);
    return result;
  } catch (err) {
    if (!(err instanceof TransitionConflictError)) throw err;
    state.held = null;
    state.refusedSteps++;
    return null;
  }
}

/**
 * Dispatches a READY node. The claim (with the movement's DISPATCH_STARTED) is computed over the
 * held rows and written with the node's SUBMITTING, in one commit, fenced like any held write:
 * the actor's lease on the movement already keeps every other dispatcher off it.
 */
async function dispatchNode(deps: WorkerDeps, state: MovementActorState, held: LockedMovement, node: NodeRow): Promise<StepOutcome> {
  const lease = randomUUID();
  const movements: MovementItem[] = held.movement.request_state === 'APPROVED' ? [{ movementId: held.movement.id, event: { type: 'DISPATCH_STARTED' } }] : [];
  const nodeItems: NodeItem[] = [{ nodeId: node.id, event: { type: 'DISPATCH_CLAIMED', at: nowIso() }, lease }];
  const claimed = previewHeld(held, { movements, nodes: nodeItems }, { actor: ACTOR, deps: deps.transitions });
  if (!claimed) {
    state.held = null;
    state.refusedSteps++;
    return { next: 'step' };
  }
  state.refusedSteps = 0;
  const claim = { node: claimed.nodes.find((n) => n.id === node.id)!, movement: claimed.movement, nodes: claimed.nodes, lease, unwritten: { held, movements, nodes: nodeItems } };
  const latest = await runDispatches(deps, [claim], true, state.artifacts, observationOf);
  // Nothing written (every commit refused): what the actor holds is read again.
  state.held = latest.get(held.movement.id) ?? null;
  return { next: 'step' };
}

async function observeNodes(deps: WorkerDeps, state: MovementActorState, held: LockedMovement, due: NodeRow[]): Promise<StepOutcome> {
  const contexts = await claimedContexts(deps.pool, due.map((node) => ({ node, movement: held.movement, nodes: held.nodes })), (n) => n.attempt_no, state.artifacts);
  const observed = await Promise.all(due.map((n, i) => observationOf(deps, n, contexts[i])));
  // An observation that lets successors start (and proposes no fee bump) is written with their SUBMITTING.
  if (observed.every((o) => o.proposal === undefined)) {
    const carried = carriedWithResults(deps, held, observed.map((o) => o.item));
    if (carried) {
      state.refusedSteps = 0;
      const latest = await runDispatches(deps, carried, true, state.artifacts, observationOf);
      state.held = latest.get(held.movement.id) ?? null;
      return { next: 'step' };
    }
  }
  const result = await commitHeld(deps, state, { nodes: observed.map((o) => o.item) }, true);
  if (!result) return { next: 'step' };
  state.refusedSteps = 0;
  // Only a fee bump whose observation was recorded goes on to be signed (replacement.ts writes it).
  const accepted = observed.map((o) => o.proposal).filter((p, i): p is ReplacementProposal => p !== undefined && !isRefusal(result.nodes[i]));
  for (const proposal of accepted) await signAndSendReplacement(deps, proposal);
  if (accepted.length > 0) {
    // A refused fee bump stores its artifact without a transition: what the actor holds is read again.
    state.held = null;
    state.artifacts?.forget(state.movementId);
  }
  if (result.claimed.length > 0) {
    const latest = await runDispatches(deps, result.claimed, true, state.artifacts, observationOf);
    state.held = latest.get(held.movement.id) ?? null;
  }
  return { next: 'step' };
}
