import { and, assign, setup } from 'xstate';
import type { NodeSummary } from './node-summary.ts';

/**
 * The lifecycle of a movement request: approval (four-eyes, quorum, expiry), execution, and the
 * states derived from its nodes. Pure: times and node facts arrive inside events.
 *
 * Actions without an implementation are messages the durable transition function turns into
 * writes in the same transaction: readyFrontier (frontier nodes BLOCKED -> READY),
 * cancelOpenNodes (nodes not yet started -> CANCELLED), requestAttention (a request_attention
 * callback). A callback for the state change itself is written for every change of state.
 */

export const MOVEMENT_MACHINE_ID = 'ferry.request';
export const MOVEMENT_MACHINE_VERSION = '1';

export const movementStates = [
  'PENDING_APPROVAL',
  'APPROVED',
  'EXECUTING',
  'WAITING_MANUAL_ACTION',
  'MANUAL_INTERVENTION',
  'COMPLETED',
  'FAILED',
  'REJECTED',
  'EXPIRED',
  'CANCELLED',
] as const;
export type MovementState = (typeof movementStates)[number];

export interface Approval {
  by: string;
  at: string;
}

export interface MovementContext {
  createdBy: string;
  quorum: number;
  approvals: Approval[];
  approvalStatus: 'pending' | 'approved' | 'rejected';
  decidedBy: string | null;
  expiresAt: string | null;
}

export type MovementEvent =
  | { type: 'APPROVE'; by: string; at: string }
  | { type: 'REJECT'; by: string; at: string; reason?: string }
  | { type: 'EXPIRE'; at: string }
  | { type: 'DISPATCH_STARTED' }
  | { type: 'NODES_SETTLED'; summary: NodeSummary }
  | { type: 'RESUME'; by: string }
  | { type: 'NODE_RETRIED'; by: string; nodeKey: string }
  | { type: 'CANCEL'; by: string; summary: NodeSummary; reason?: string };

export type MovementEventType = MovementEvent['type'];

export function initialMovementContext(input: { createdBy: string; quorum: number; expiresAt: string | null }): MovementContext {
  return {
    createdBy: input.createdBy,
    quorum: input.quorum,
    approvals: [],
    approvalStatus: 'pending',
    decidedBy: null,
    expiresAt: input.expiresAt,
  };
}

const summaryOf = (event: MovementEvent): NodeSummary | null => ('summary' in event ? event.summary : null);
const isPast = (at: string, deadline: string | null) => deadline !== null && Date.parse(at) >= Date.parse(deadline);

/** How settled nodes end a running movement (EXECUTING or WAITING_MANUAL_ACTION), the first that holds; each state adds its own last. */
const settledEnds = [
  { guard: 'allNodesDone', target: 'COMPLETED' },
  { guard: 'executorAskedForOperator', target: 'MANUAL_INTERVENTION', actions: 'requestAttention' },
  { guard: 'failedAfterSideEffect', target: 'MANUAL_INTERVENTION', actions: 'requestAttention' },
  { guard: 'failedWithoutSideEffect', target: 'FAILED' },
] as const;

/** A movement past approval is cancelled only when no node has an attempt in flight. */
const cancelWhenIdle = { guard: 'nothingInFlight', target: 'CANCELLED', actions: 'cancelOpenNodes' } as const;

export const movementMachine = setup({
  types: {
    context: {} as MovementContext,
    events: {} as MovementEvent,
    input: {} as MovementContext,
  },
  guards: {
    // Four-eyes: whoever created a movement can never approve it. Actor ids name principals
    // (`principal:<id>`), so equal ids are one person whichever token each call used; rows recorded as
    // `token:<id>` before principals are matched to their principal by the movement service first.
    approverIsNotRequester: ({ context, event }) => event.type === 'APPROVE' && event.by !== context.createdBy,
    approverHasNotApprovedYet: ({ context, event }) =>
      event.type === 'APPROVE' && !context.approvals.some((a) => a.by === event.by),
    approvalWindowOpen: ({ context, event }) => 'at' in event && !isPast(event.at, context.expiresAt),
    approvalWindowElapsed: ({ context, event }) => 'at' in event && isPast(event.at, context.expiresAt),
    quorumReachedWithThisApproval: ({ context }) => context.approvals.length + 1 >= context.quorum,
    allNodesDone: ({ event }) => {
      const s = summaryOf(event);
      return !!s && s.total > 0 && s.done === s.total;
    },
    failedAfterSideEffect: ({ event }) => {
      const s = summaryOf(event);
      return !!s && s.failed + s.unknown > 0 && s.sideEffectCompleted;
    },
    // The executor said only a person can settle one of the nodes (manual_intervention_required).
    executorAskedForOperator: ({ event }) => summaryOf(event)?.manualIntervention === true,
    failedWithoutSideEffect: ({ event }) => {
      const s = summaryOf(event);
      return !!s && s.failed > 0 && !s.sideEffectCompleted;
    },
    waitingOnManualGate: ({ event }) => {
      const s = summaryOf(event);
      return !!s && s.manualGateReady && !s.executing;
    },
    noManualGateWaiting: ({ event }) => {
      const s = summaryOf(event);
      return !!s && !s.manualGateReady;
    },
    // A lane confirmed an operator's cancel of a node's attempt (the only way a node of a running
    // movement becomes CANCELLED): once nothing else is in flight, the movement is cancelled.
    aNodeWasCancelled: ({ event }) => (summaryOf(event)?.cancelled ?? 0) > 0,
    nothingInFlight: ({ event }) => {
      const s = summaryOf(event);
      return !!s && !s.inFlight;
    },
  },
  actions: {
    recordApproval: assign({
      approvals: ({ context, event }) => [...context.approvals, { by: (event as { by: string }).by, at: (event as { at: string }).at }],
    }),
    markApproved: assign({ approvalStatus: 'approved' as const, decidedBy: ({ event }) => (event as { by: string }).by }),
    markRejected: assign({ approvalStatus: 'rejected' as const, decidedBy: ({ event }) => ('by' in event ? event.by : 'system:expiry') }),
    readyFrontier: () => {},
    cancelOpenNodes: () => {},
    requestAttention: () => {},
  },
}).createMachine({
  id: MOVEMENT_MACHINE_ID,
  version: MOVEMENT_MACHINE_VERSION,
  context: ({ input }) => input,
  initial: 'PENDING_APPROVAL',
  states: {
    PENDING_APPROVAL: {
      on: {
        APPROVE: [
          {
            guard: and(['approverIsNotRequester', 'approverHasNotApprovedYet', 'approvalWindowOpen', 'quorumReachedWithThisApproval']),
            target: 'APPROVED',
            actions: ['recordApproval', 'markApproved', 'readyFrontier'],
          },
          {
            guard: and(['approverIsNotRequester', 'approverHasNotApprovedYet', 'approvalWindowOpen']),
            target: 'PENDING_APPROVAL',
            reenter: true,
            actions: 'recordApproval',
          },
        ],
        REJECT: { target: 'REJECTED', actions: 'markRejected' },
        EXPIRE: { guard: 'approvalWindowElapsed', target: 'EXPIRED', actions: 'markRejected' },
        CANCEL: { target: 'CANCELLED', actions: 'cancelOpenNodes' },
      },
    },
    APPROVED: {
      on: {
        DISPATCH_STARTED: { target: 'EXECUTING' },
        NODES_SETTLED: [{ guard: 'waitingOnManualGate', target: 'WAITING_MANUAL_ACTION', actions: 'requestAttention' }],
        CANCEL: cancelWhenIdle,
      },
    },
    EXECUTING: {
      on: {
        NODES_SETTLED: [
          { guard: and(['aNodeWasCancelled', 'nothingInFlight']), target: 'CANCELLED', actions: 'cancelOpenNodes' },
          ...settledEnds,
          { guard: 'waitingOnManualGate', target: 'WAITING_MANUAL_ACTION', actions: 'requestAttention' },
        ],
        CANCEL: cancelWhenIdle,
      },
    },
    WAITING_MANUAL_ACTION: {
      on: {
        NODES_SETTLED: [...settledEnds, { guard: 'noManualGateWaiting', target: 'EXECUTING' }],
        CANCEL: cancelWhenIdle,
      },
    },
    MANUAL_INTERVENTION: {
      on: {
        RESUME: { target: 'EXECUTING' },
        NODE_RETRIED: { target: 'EXECUTING' },
        CANCEL: { target: 'CANCELLED', actions: 'cancelOpenNodes' },
      },
    },
    FAILED: {
      on: {
        NODE_RETRIED: { target: 'EXECUTING' },
        CANCEL: { target: 'CANCELLED', actions: 'cancelOpenNodes' },
      },
    },
    COMPLETED: { type: 'final' },
    REJECTED: { type: 'final' },
    EXPIRED: { type: 'final' },
    CANCELLED: { type: 'final' },
  },
});

export type MovementMachine = typeof movementMachine;
