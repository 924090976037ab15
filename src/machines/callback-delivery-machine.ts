import { assign, setup } from 'xstate';

/**
 * The delivery lifecycle of one callback (one `callback_outbox` row). Pure: the attempt's outcome
 * and its time arrive inside the event, and the backoff is computed from that time.
 *
 *   pending --DELIVERED (a 2xx)--> sent
 *   pending --DELIVERY_FAILED (failureIsFinal or attemptsExhausted)--> dlq
 *   pending --DELIVERY_FAILED (otherwise)--> pending, next attempt after the backoff
 *   pending | dlq --REDRIVEN (an operator)--> pending, attempts 0, due at once
 *   pending --STRANDED_REQUEUED (the sweep wrote a job for a lost one)--> pending
 *
 * Who may send (the delivery lease: lease_token, lease_expires_at) and whose turn it is (callbacks
 * of one movement go out in creation order) are not lifecycle: the claim in
 * src/persistence/callbacks.ts decides them. The machine decides what an attempt, a redrive or a
 * requeue does to the row; src/callbacks/lifecycle.ts runs it and persistence writes its result.
 */

export const CALLBACK_MACHINE_ID = 'ferry.callback_delivery';
export const CALLBACK_MACHINE_VERSION = '1';

/** As `callback_outbox.status` has them. */
export const callbackStates = ['pending', 'sent', 'dlq'] as const;
export type CallbackState = (typeof callbackStates)[number];

/** The row's mutable lifecycle columns (times as ISO 8601). */
export interface CallbackContext {
  attempts: number;
  maxAttempts: number;
  nextAttemptAt: string;
  redriveCount: number;
  lastAttemptAt: string | null;
  lastError: string | null;
  lastStatusCode: number | null;
  sentAt: string | null;
  strandedRequeuedAt: string | null;
}

export type CallbackEvent =
  /** The receiver answered 2xx. */
  | { type: 'DELIVERED'; at: string; statusCode: number }
  /**
   * The attempt did not get a 2xx (non-2xx, network error, timeout, refused address), or was not
   * sent at all because its destination refuses it (disabled, no secret): that failure is not
   * retriable, retrying would not change it.
   */
  | { type: 'DELIVERY_FAILED'; at: string; retriable: boolean; statusCode: number | null; error: string }
  /** An operator asked for the callback to be delivered again (same body, timestamp and nonce). */
  | { type: 'REDRIVEN'; at: string }
  /** The stranded-callback sweep wrote a job for this overdue callback. */
  | { type: 'STRANDED_REQUEUED'; at: string };

export type CallbackEventType = CallbackEvent['type'];

export function initialCallbackContext(input: { maxAttempts: number; nextAttemptAt: string }): CallbackContext {
  return {
    attempts: 0,
    maxAttempts: input.maxAttempts,
    nextAttemptAt: input.nextAttemptAt,
    redriveCount: 0,
    lastAttemptAt: null,
    lastError: null,
    lastStatusCode: null,
    sentAt: null,
    strandedRequeuedAt: null,
  };
}

/** The wait before the next attempt, after `attemptsMade` failed ones: 2, 4, 8, ... up to 64 s. */
export function retryDelaySeconds(attemptsMade: number): number {
  return 2 ** Math.min(attemptsMade, 6);
}

const plusSeconds = (at: string, seconds: number) => new Date(Date.parse(at) + seconds * 1000).toISOString();

/** The rules, as plain predicates (the machine's guards). */
export const callbackRules = {
  // A destination that refuses the callback refuses every retry too: dead letter at once.
  failureIsFinal: (_c: CallbackContext, e: CallbackEvent) => e.type === 'DELIVERY_FAILED' && !e.retriable,
  // This failed attempt was the last of max_attempts.
  attemptsExhausted: (c: CallbackContext, e: CallbackEvent) => e.type === 'DELIVERY_FAILED' && c.attempts + 1 >= c.maxAttempts,
} as const;
export type CallbackRule = keyof typeof callbackRules;

const guard =
  (rule: CallbackRule) =>
  ({ context, event }: { context: CallbackContext; event: CallbackEvent }) =>
    callbackRules[rule](context, event);

export const callbackMachine = setup({
  types: {
    context: {} as CallbackContext,
    events: {} as CallbackEvent,
    input: {} as CallbackContext,
  },
  guards: {
    failureIsFinal: guard('failureIsFinal'),
    attemptsExhausted: guard('attemptsExhausted'),
  },
  actions: {
    recordSuccess: assign(({ context, event }) => {
      if (event.type !== 'DELIVERED') return {};
      return { attempts: context.attempts + 1, sentAt: event.at, lastAttemptAt: event.at, lastStatusCode: event.statusCode };
    }),
    recordFailure: assign(({ context, event }) => {
      if (event.type !== 'DELIVERY_FAILED') return {};
      return { attempts: context.attempts + 1, lastAttemptAt: event.at, lastError: event.error, lastStatusCode: event.statusCode };
    }),
    // Runs after recordFailure: attempts already counts the attempt that just failed.
    scheduleRetry: assign({ nextAttemptAt: ({ context, event }) => plusSeconds(event.at, retryDelaySeconds(context.attempts)) }),
    redrive: assign({
      attempts: 0,
      nextAttemptAt: ({ event }) => event.at,
      redriveCount: ({ context }) => context.redriveCount + 1,
    }),
    recordStrandedRequeue: assign({ strandedRequeuedAt: ({ event }) => event.at }),
  },
}).createMachine({
  id: CALLBACK_MACHINE_ID,
  version: CALLBACK_MACHINE_VERSION,
  context: ({ input }) => input,
  initial: 'pending',
  states: {
    pending: {
      on: {
        DELIVERED: { target: 'sent', actions: 'recordSuccess' },
        DELIVERY_FAILED: [
          { guard: 'failureIsFinal', target: 'dlq', actions: 'recordFailure' },
          { guard: 'attemptsExhausted', target: 'dlq', actions: 'recordFailure' },
          { actions: ['recordFailure', 'scheduleRetry'] },
        ],
        REDRIVEN: { actions: 'redrive' },
        STRANDED_REQUEUED: { actions: 'recordStrandedRequeue' },
      },
    },
    sent: { type: 'final' },
    dlq: {
      on: {
        REDRIVEN: { target: 'pending', actions: 'redrive' },
      },
    },
  },
});

export type CallbackMachine = typeof callbackMachine;
