import { and, assign, setup } from 'xstate';
import type { ExecutorOutcome } from './outcome.ts';

/**
 * The lifecycle of one node of a movement plan. Pure: no I/O, no clock reads. Times arrive inside
 * events (`at`), so replaying the transition log reproduces the stored row exactly.
 *
 * The context is the node row's mutable columns; the durable transition function reads it from the
 * row and writes it back. Named actions without an implementation (advanceFrontier,
 * deriveMovementState) are messages the runtime turns into writes in the same transaction.
 */

export const NODE_MACHINE_ID = 'ferry.node';
export const NODE_MACHINE_VERSION = '1';

export const nodeStates = [
  'BLOCKED',
  'READY',
  'PREPARING',
  'AWAITING_SIGNATURE',
  'SUBMITTING',
  'SUBMITTED',
  'OBSERVING',
  'COMPLETED',
  'FAILED',
  'UNKNOWN',
  'SKIPPED',
  'CANCELLED',
] as const;
export type NodeState = (typeof nodeStates)[number];

export interface NodeContext {
  nodeKind: string;
  actionType: string;
  retryable: boolean;
  attemptNo: number;
  startedAt: string | null;
  providerState: string | null;
  providerRefs: Record<string, unknown>;
  providerRefId: string | null;
  nextObserveAt: string | null;
  lastObservedAt: string | null;
  observeCount: number;
  dispatchAfter: string | null;
  errorCode: string | null;
  errorDetail: string | null;
  /** The executor said automatic recovery is impossible: the movement waits for a person. */
  manualInterventionRequired: boolean;
}

interface Failure {
  errorCode: string;
  errorDetail?: string | null;
}

export type NodeEvent =
  | { type: 'UNBLOCKED' }
  | { type: 'DISPATCH_CLAIMED'; at: string }
  | ({ type: 'PREFLIGHT_FAILED' } & Failure)
  | ({ type: 'PREFLIGHT_SKIPPED' } & Partial<Failure>)
  | ({ type: 'PREPARE_FAILED' } & Failure)
  | { type: 'DISPATCH_DEFERRED'; errorCode: string; errorDetail?: string | null; retryAt: string }
  | { type: 'PREPARED'; signingRequired: boolean; at: string }
  | { type: 'SIGNED'; at: string }
  | ({ type: 'SIGNING_FAILED' } & Failure)
  | { type: 'PRE_SUBMIT_CHECK_DEFERRED'; errorCode: string; errorDetail?: string | null; retryAt: string }
  | ({ type: 'PRE_SUBMIT_CHECK_FAILED' } & Failure)
  | { type: 'SUBMIT_RESULT'; outcome: ExecutorOutcome; at: string; nextObserveAt: string | null }
  | { type: 'OBSERVED'; outcome: ExecutorOutcome; at: string; nextObserveAt: string | null }
  | { type: 'OBSERVATION_TIMED_OUT'; at: string; errorDetail?: string | null }
  /**
   * A new version of the attempt's submitted action (an EVM fee bump: same nonce, higher fees) was
   * signed; its signature is stored in the same transaction, before it is broadcast. Only for the
   * attempt that is current: a late one for an earlier attempt is refused.
   */
  | { type: 'REPLACEMENT_SIGNED'; attemptNo: number; payloadHash: string; at: string }
  | { type: 'RECOVERED'; outcome: ExecutorOutcome; at: string; nextObserveAt: string | null }
  | { type: 'RETRY_REQUESTED' }
  | { type: 'MANUAL_CONFIRMED'; at: string; note?: string }
  | { type: 'SKIP_REQUESTED'; reason?: string }
  | { type: 'CANCEL_REQUESTED' }
  /**
   * An operator asked to cancel the movement while this node's attempt was with the provider
   * (SUBMITTED or OBSERVING); the lane's cancel() answered `outcome`. CANCELLED only when the provider
   * confirms the attempt is cancelled; any other answer is recorded (providerRefs.cancel) and the
   * node goes on being observed, so a later observation can still confirm the cancel (EVM: the
   * zero-value replacement mined at the attempt's nonce) or complete the original.
   */
  | { type: 'CANCEL_ANSWERED'; outcome: ExecutorOutcome; attemptNo: number; by: string; at: string }
  /**
   * Reconciliation asked the provider about the node's attempt and its answer contradicts the
   * stored state (docs/operations.md, "Reconciliation"); applied only with auto-repair on.
   */
  | { type: 'RECONCILED'; outcome: ExecutorOutcome; attemptNo: number; driftClass: string; at: string; nextObserveAt: null }
  /** An operator's resolution, proposed by one principal and confirmed by another (node_resolutions). */
  | ({ type: 'RESOLVED_COMPLETED'; providerRef: string } & Resolution)
  | ({ type: 'RESOLVED_FAILED' } & Resolution)
  | ({ type: 'RESOLVED_RETRY' } & Resolution);

/** Who decided an operator's resolution, and why. */
export interface Resolution {
  resolutionId: string;
  attemptNo: number;
  proposedBy: string;
  confirmedBy: string;
  reason: string;
  at: string;
}

export type NodeEventType = NodeEvent['type'];

/** The fields of a node row the machine's context is built from. */
export interface NodeInput {
  nodeKind: string;
  actionType: string;
  retryable: boolean;
  requestNodeId: string;
}

export function initialNodeContext(input: Pick<NodeInput, 'nodeKind' | 'actionType' | 'retryable'>): NodeContext {
  return {
    nodeKind: input.nodeKind,
    actionType: input.actionType,
    retryable: input.retryable,
    attemptNo: 0,
    startedAt: null,
    providerState: null,
    providerRefs: {},
    providerRefId: null,
    nextObserveAt: null,
    lastObservedAt: null,
    observeCount: 0,
    dispatchAfter: null,
    errorCode: null,
    errorDetail: null,
    manualInterventionRequired: false,
  };
}

type OutcomeEvent = Exclude<Extract<NodeEvent, { outcome: ExecutorOutcome }>, { type: 'CANCEL_ANSWERED' }>;

/** The key of providerRefs under which the node keeps an operator's cancel and the lane's answer. */
export const CANCEL_REF = 'cancel';

/** What the node keeps of an operator's cancel (providerRefs.cancel): who asked, when, what the lane answered. */
export interface CancelRecord {
  requested_by: string;
  requested_at: string;
  /** The lane's answer: CANCELLED (confirmed), or the state the attempt is in (the cancel pending or refused). */
  answer: string;
  provider_state: string | null;
  error_code: string | null;
  error_detail: string | null;
  provider_refs: Record<string, unknown>;
}

export function isCancelRecord(v: unknown): v is CancelRecord {
  return typeof v === 'object' && v !== null && typeof (v as CancelRecord).requested_at === 'string';
}
const outcomeIs =
  (state: ExecutorOutcome['nextState']) =>
  ({ event }: { event: NodeEvent }) =>
    'outcome' in event && event.outcome.nextState === state;

/** An operator's cancel as the lane answered it, in SUBMITTED or OBSERVING (`state`). */
const cancelAnswered = (state: 'SUBMITTED' | 'OBSERVING') =>
  [
    { guard: and(['evidenceIsForCurrentAttempt', 'providerConfirmsCancelled']), target: 'CANCELLED', actions: ['recordCancelAnswer', 'deriveMovementState'] },
    { guard: 'evidenceIsForCurrentAttempt', target: state, reenter: true, actions: 'recordCancelAnswer' },
  ] as const;

/** A provider's definite answer about a submitted attempt (submit, recovery): where it takes the node. */
const providerAnswers = [
  { guard: 'providerReportsCompleted', target: 'COMPLETED', actions: ['recordOutcome', 'advanceFrontier'] },
  { guard: 'providerReportsSubmitted', target: 'SUBMITTED', actions: 'recordOutcome' },
  { guard: 'providerReportsObserving', target: 'OBSERVING', actions: 'recordOutcome' },
  { guard: 'providerReportsFailed', target: 'FAILED', actions: ['recordOutcome', 'deriveMovementState'] },
] as const;

/** An observation that settles the node (SUBMITTED or OBSERVING); any other answer keeps it observed. */
const observedEnds = [
  { guard: and(['cancelWasRequested', 'providerConfirmsCancelled']), target: 'CANCELLED', actions: ['countObservation', 'recordOutcome', 'deriveMovementState'] },
  { guard: 'providerReportsCompleted', target: 'COMPLETED', actions: ['countObservation', 'recordOutcome', 'advanceFrontier'] },
  { guard: 'providerReportsFailed', target: 'FAILED', actions: ['countObservation', 'recordOutcome', 'deriveMovementState'] },
  { guard: 'providerReportsUnknown', target: 'UNKNOWN', actions: ['countObservation', 'recordOutcome', 'deriveMovementState'] },
] as const;

export const nodeMachine = setup({
  types: {
    context: {} as NodeContext,
    events: {} as NodeEvent,
    input: {} as NodeContext,
  },
  guards: {
    signingIsRequired: ({ event }) => event.type === 'PREPARED' && event.signingRequired,
    providerReportsCompleted: outcomeIs('COMPLETED'),
    providerReportsSubmitted: outcomeIs('SUBMITTED'),
    providerReportsObserving: outcomeIs('OBSERVING'),
    providerReportsFailed: outcomeIs('FAILED'),
    providerReportsUnknown: outcomeIs('UNKNOWN'),
    providerConfirmsNothingSubmitted: outcomeIs('READY'),
    providerConfirmsCancelled: outcomeIs('CANCELLED'),
    // A provider's CANCELLED counts only for an attempt an operator asked the lane to cancel.
    cancelWasRequested: ({ context }) => isCancelRecord(context.providerRefs[CANCEL_REF]),
    laneAllowsRetry: ({ context }) => context.retryable,
    isCurrentAttempt: ({ context, event }) => event.type === 'REPLACEMENT_SIGNED' && event.attemptNo === context.attemptNo,
    providerNeedsOperator: ({ event }) => 'outcome' in event && event.outcome.manualInterventionRequired === true,
    // Evidence and resolutions are about one attempt: a node that moved on to another is not theirs.
    evidenceIsForCurrentAttempt: ({ context, event }) => 'attemptNo' in event && event.attemptNo === context.attemptNo,
    // Four-eyes: whoever proposed a resolution can never be the one who confirms it.
    confirmedBySecondPrincipal: ({ event }) => 'confirmedBy' in event && event.confirmedBy !== event.proposedBy,
    isManualGate: ({ context }) => context.nodeKind === 'manual_gate' || context.actionType.startsWith('manual_'),
    isAutomatic: ({ context }) => !(context.nodeKind === 'manual_gate' || context.actionType.startsWith('manual_')),
  },
  actions: {
    // A new attempt starts when the node is committed SUBMITTING: its number and idempotency key are
    // fixed before submit() is called, so a crash after this point is recovered, never resubmitted.
    beginSubmitAttempt: assign(({ context, event }) => {
      const at = 'at' in event ? (event as { at: string }).at : context.startedAt;
      const attemptNo = context.attemptNo + 1;
      // A cancel asked of an earlier attempt is not this attempt's.
      const { [CANCEL_REF]: _earlier, ...providerRefs } = context.providerRefs;
      return { attemptNo, startedAt: at, errorCode: null, errorDetail: null, dispatchAfter: null, providerRefs };
    }),
    // What the lane answered to an operator's cancel, kept on the node; the observer looks at once.
    recordCancelAnswer: assign(({ context, event }) => {
      const e = event as Extract<NodeEvent, { type: 'CANCEL_ANSWERED' }>;
      const record: CancelRecord = {
        requested_by: e.by,
        requested_at: e.at,
        answer: e.outcome.nextState,
        provider_state: e.outcome.providerState ?? null,
        error_code: e.outcome.errorCode ?? null,
        error_detail: e.outcome.errorDetail ?? null,
        provider_refs: e.outcome.providerRefs ?? {},
      };
      return {
        providerRefs: { ...context.providerRefs, [CANCEL_REF]: record },
        nextObserveAt: e.outcome.nextState === 'CANCELLED' ? null : e.at,
      };
    }),
    recordFailure: assign(({ event }) => {
      const e = event as Partial<Failure>;
      return { errorCode: e.errorCode ?? null, errorDetail: e.errorDetail ?? null };
    }),
    deferDispatch: assign(({ event }) => {
      const e = event as { errorCode: string; errorDetail?: string | null; retryAt: string };
      return { errorCode: e.errorCode, errorDetail: e.errorDetail ?? null, dispatchAfter: e.retryAt };
    }),
    recordOutcome: assign(({ context, event }) => {
      const { outcome, nextObserveAt } = event as OutcomeEvent;
      // The cancel record is the machine's own (recordCancelAnswer): an executor cannot write it.
      const { [CANCEL_REF]: _forged, ...refs } = outcome.providerRefs ?? {};
      return {
        providerState: outcome.providerState ?? context.providerState,
        providerRefs: { ...context.providerRefs, ...refs },
        providerRefId: outcome.providerRefId ?? context.providerRefId,
        errorCode: outcome.errorCode ?? null,
        errorDetail: outcome.errorDetail ?? null,
        nextObserveAt,
        manualInterventionRequired: outcome.manualInterventionRequired === true,
      };
    }),
    countObservation: assign(({ context, event }) => ({
      observeCount: context.observeCount + 1,
      lastObservedAt: (event as { at: string }).at,
    })),
    recordObservationTimeout: assign(({ event }) => ({
      errorCode: 'OBSERVATION_TIMEOUT',
      errorDetail: (event as { errorDetail?: string | null }).errorDetail ?? 'observation exceeded timeout_policy.observe_seconds',
      nextObserveAt: null,
    })),
    clearError: assign({ errorCode: null, errorDetail: null, dispatchAfter: null, manualInterventionRequired: false }),
    recordResolvedCompleted: assign(({ context, event }) => {
      const e = event as Extract<NodeEvent, { type: 'RESOLVED_COMPLETED' }>;
      return {
        providerRefs: { ...context.providerRefs, manual_provider_ref: e.providerRef, resolution_id: e.resolutionId },
        providerRefId: e.providerRef,
        errorCode: null,
        errorDetail: null,
        nextObserveAt: null,
        manualInterventionRequired: false,
      };
    }),
    recordResolvedFailed: assign(({ event }) => ({
      errorCode: 'RESOLVED_FAILED',
      errorDetail: (event as Resolution).reason,
      nextObserveAt: null,
      manualInterventionRequired: false,
    })),
    // The observer looks again at once: the new version is about to be broadcast.
    recordReplacement: assign(({ context, event }) => {
      const e = event as Extract<NodeEvent, { type: 'REPLACEMENT_SIGNED' }>;
      return {
        providerState: 'replacement_signed',
        providerRefs: { ...context.providerRefs, replacement_payload_hash: e.payloadHash },
        errorCode: null,
        errorDetail: null,
        nextObserveAt: e.at,
      };
    }),
    // Messages for the runtime, executed inside the same transaction.
    advanceFrontier: () => {},
    deriveMovementState: () => {},
  },
}).createMachine({
  id: NODE_MACHINE_ID,
  version: NODE_MACHINE_VERSION,
  context: ({ input }) => input,
  initial: 'BLOCKED',
  states: {
    BLOCKED: {
      on: {
        UNBLOCKED: { target: 'READY', actions: 'deriveMovementState' },
        SKIP_REQUESTED: { target: 'SKIPPED', actions: 'advanceFrontier' },
        CANCEL_REQUESTED: { target: 'CANCELLED' },
      },
    },
    READY: {
      on: {
        DISPATCH_CLAIMED: { guard: 'isAutomatic', target: 'PREPARING', actions: 'clearError' },
        MANUAL_CONFIRMED: { guard: 'isManualGate', target: 'COMPLETED', actions: 'advanceFrontier' },
        SKIP_REQUESTED: { target: 'SKIPPED', actions: 'advanceFrontier' },
        CANCEL_REQUESTED: { target: 'CANCELLED' },
      },
    },
    PREPARING: {
      on: {
        PREFLIGHT_FAILED: { target: 'FAILED', actions: ['recordFailure', 'deriveMovementState'] },
        PREFLIGHT_SKIPPED: { target: 'SKIPPED', actions: ['recordFailure', 'advanceFrontier'] },
        PREPARE_FAILED: { target: 'FAILED', actions: ['recordFailure', 'deriveMovementState'] },
        DISPATCH_DEFERRED: { target: 'READY', actions: 'deferDispatch' },
        PREPARED: [
          { guard: 'signingIsRequired', target: 'AWAITING_SIGNATURE' },
          { target: 'SUBMITTING', actions: 'beginSubmitAttempt' },
        ],
      },
    },
    AWAITING_SIGNATURE: {
      on: {
        SIGNED: { target: 'SUBMITTING', actions: 'beginSubmitAttempt' },
        SIGNING_FAILED: { target: 'FAILED', actions: ['recordFailure', 'deriveMovementState'] },
        DISPATCH_DEFERRED: { target: 'READY', actions: 'deferDispatch' },
      },
    },
    SUBMITTING: {
      on: {
        PRE_SUBMIT_CHECK_DEFERRED: { target: 'READY', actions: 'deferDispatch' },
        PRE_SUBMIT_CHECK_FAILED: { target: 'FAILED', actions: ['recordFailure', 'deriveMovementState'] },
        SUBMIT_RESULT: [
          ...providerAnswers,
          { guard: 'providerReportsUnknown', target: 'UNKNOWN', actions: ['recordOutcome', 'deriveMovementState'] },
        ],
        // A node stuck here (the process died around submit) is resolved by asking the provider.
        RECOVERED: [
          ...providerAnswers,
          { guard: 'providerReportsUnknown', target: 'UNKNOWN', actions: ['recordOutcome', 'deriveMovementState'] },
          { guard: 'providerConfirmsNothingSubmitted', target: 'READY', actions: 'recordOutcome' },
        ],
      },
    },
    SUBMITTED: {
      on: {
        OBSERVED: [
          ...observedEnds,
          { target: 'OBSERVING', actions: ['countObservation', 'recordOutcome'] },
        ],
        OBSERVATION_TIMED_OUT: { target: 'UNKNOWN', actions: ['recordObservationTimeout', 'deriveMovementState'] },
        REPLACEMENT_SIGNED: { guard: 'isCurrentAttempt', target: 'SUBMITTED', reenter: true, actions: 'recordReplacement' },
        CANCEL_ANSWERED: cancelAnswered('SUBMITTED'),
      },
    },
    OBSERVING: {
      on: {
        OBSERVED: [
          ...observedEnds,
          { target: 'OBSERVING', reenter: true, actions: ['countObservation', 'recordOutcome'] },
        ],
        OBSERVATION_TIMED_OUT: { target: 'UNKNOWN', actions: ['recordObservationTimeout', 'deriveMovementState'] },
        REPLACEMENT_SIGNED: { guard: 'isCurrentAttempt', target: 'OBSERVING', reenter: true, actions: 'recordReplacement' },
        CANCEL_ANSWERED: cancelAnswered('OBSERVING'),
      },
    },
    UNKNOWN: {
      on: {
        RECOVERED: [
          // A cancel asked while the attempt was observed, confirmed once recovery asks again.
          { guard: and(['cancelWasRequested', 'providerConfirmsCancelled']), target: 'CANCELLED', actions: ['recordOutcome', 'deriveMovementState'] },
          ...providerAnswers,
          // Undetermined, and the executor says only a person can tell: the movement waits for one.
          { guard: and(['providerReportsUnknown', 'providerNeedsOperator']), target: 'UNKNOWN', reenter: true, actions: ['recordOutcome', 'deriveMovementState'] },
          // Still undetermined: stays UNKNOWN, and moves to the back of the recovery queue.
          { guard: 'providerReportsUnknown', target: 'UNKNOWN', reenter: true, actions: 'recordOutcome' },
          { guard: 'providerConfirmsNothingSubmitted', target: 'READY', actions: 'recordOutcome' },
        ],
        RECONCILED: [
          { guard: and(['evidenceIsForCurrentAttempt', 'providerReportsCompleted']), target: 'COMPLETED', actions: ['recordOutcome', 'advanceFrontier'] },
          { guard: and(['evidenceIsForCurrentAttempt', 'providerReportsFailed']), target: 'FAILED', actions: ['recordOutcome', 'deriveMovementState'] },
        ],
        RESOLVED_COMPLETED: { guard: and(['confirmedBySecondPrincipal', 'evidenceIsForCurrentAttempt']), target: 'COMPLETED', actions: ['recordResolvedCompleted', 'advanceFrontier'] },
        RESOLVED_FAILED: { guard: and(['confirmedBySecondPrincipal', 'evidenceIsForCurrentAttempt']), target: 'FAILED', actions: ['recordResolvedFailed', 'deriveMovementState'] },
        RESOLVED_RETRY: { guard: and(['confirmedBySecondPrincipal', 'evidenceIsForCurrentAttempt']), target: 'READY', actions: ['clearError', 'deriveMovementState'] },
      },
    },
    FAILED: {
      on: {
        RETRY_REQUESTED: { guard: 'laneAllowsRetry', target: 'READY', actions: ['clearError', 'deriveMovementState'] },
        RECONCILED: { guard: and(['evidenceIsForCurrentAttempt', 'providerReportsCompleted']), target: 'COMPLETED', actions: ['recordOutcome', 'advanceFrontier'] },
        RESOLVED_COMPLETED: { guard: and(['confirmedBySecondPrincipal', 'evidenceIsForCurrentAttempt']), target: 'COMPLETED', actions: ['recordResolvedCompleted', 'advanceFrontier'] },
        RESOLVED_FAILED: { guard: and(['confirmedBySecondPrincipal', 'evidenceIsForCurrentAttempt']), target: 'FAILED', reenter: true, actions: ['recordResolvedFailed', 'deriveMovementState'] },
        RESOLVED_RETRY: { guard: and(['confirmedBySecondPrincipal', 'evidenceIsForCurrentAttempt']), target: 'READY', actions: ['clearError', 'deriveMovementState'] },
      },
    },
    COMPLETED: { type: 'final' },
    SKIPPED: { type: 'final' },
    CANCELLED: { type: 'final' },
  },
});

export type NodeMachine = typeof nodeMachine;
