/**
 * What an executor reported, reduced to what the node machine decides on. The wire format
 * (ExecutionResult, snake_case) lives in src/executors; this is the machine's own view of it.
 */
// READY is meaningful only from recover(): the provider confirms nothing was submitted under the
// attempt's idempotency key, so a new attempt is safe. CANCELLED only after an operator's cancel
// was asked of the lane: the provider confirms the attempt was cancelled and moved nothing.
export const outcomeStates = ['COMPLETED', 'SUBMITTED', 'OBSERVING', 'FAILED', 'UNKNOWN', 'READY', 'CANCELLED'] as const;
export type OutcomeState = (typeof outcomeStates)[number];

export interface ExecutorOutcome {
  nextState: OutcomeState;
  providerState?: string | null;
  providerRefs?: Record<string, unknown>;
  providerRefId?: string | null;
  errorCode?: string | null;
  errorDetail?: string | null;
  /** The executor's manual_intervention_required: automatic recovery is impossible. Set only when true. */
  manualInterventionRequired?: boolean;
}

export function isOutcomeState(s: string): s is OutcomeState {
  return (outcomeStates as readonly string[]).includes(s);
}
