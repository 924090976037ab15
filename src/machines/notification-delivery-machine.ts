import { assign, setup, transition as xstateTransition } from 'xstate';

/**
 * The delivery lifecycle of one operator notification (one `notification_deliveries` row: one
 * attention event for one channel). Pure: the attempt's outcome and its time arrive in the event.
 *
 *   pending --DELIVERED (a 2xx)--> delivered
 *   pending --DELIVERY_FAILED (attempts exhausted)--> failed
 *   pending --DELIVERY_FAILED (otherwise)--> pending, next attempt after the backoff
 *   pending --CHANNEL_CLOSED (the channel was disabled or deleted)--> failed, never sent
 *
 * A row the channel's deduplication window covers is written 'suppressed' and never moves. Which
 * rows are due, and how many a channel's rate limit lets through, is the dispatcher's choice
 * (src/sweeps/notification-dispatcher.ts), not lifecycle.
 */

export const NOTIFICATION_MACHINE_ID = 'ferry.notification_delivery';
export const NOTIFICATION_MACHINE_VERSION = '1';

export const notificationStates = ['pending', 'delivered', 'failed', 'suppressed'] as const;
export type NotificationState = (typeof notificationStates)[number];

export interface NotificationContext {
  attempts: number;
  maxAttempts: number;
  nextAttemptAt: string;
  lastAttemptAt: string | null;
  lastError: string | null;
  lastStatusCode: number | null;
  deliveredAt: string | null;
}

export type NotificationEvent =
  | { type: 'DELIVERED'; at: string; statusCode: number }
  | { type: 'DELIVERY_FAILED'; at: string; statusCode: number | null; error: string }
  /** An operator disabled or deleted the channel: what it had not sent yet is not sent later. */
  | { type: 'CHANNEL_CLOSED'; at: string; reason: 'channel_disabled' | 'channel_deleted' };

/** The wait before the next attempt after `attemptsMade` failed ones: 2, 4, 8, ... up to 64 s. */
export function notificationRetrySeconds(attemptsMade: number): number {
  return 2 ** Math.min(attemptsMade, 6);
}

const plusSeconds = (at: string, s: number) => new Date(Date.parse(at) + s * 1000).toISOString();

export const notificationMachine = setup({
  types: { context: {} as NotificationContext, events: {} as NotificationEvent, input: {} as NotificationContext },
  guards: {
    attemptsExhausted: ({ context, event }) => event.type === 'DELIVERY_FAILED' && context.attempts + 1 >= context.maxAttempts,
  },
  actions: {
    recordSuccess: assign(({ context, event }) =>
      event.type === 'DELIVERED' ? { attempts: context.attempts + 1, deliveredAt: event.at, lastAttemptAt: event.at, lastStatusCode: event.statusCode } : {},
    ),
    recordFailure: assign(({ context, event }) =>
      event.type === 'DELIVERY_FAILED' ? { attempts: context.attempts + 1, lastAttemptAt: event.at, lastError: event.error, lastStatusCode: event.statusCode } : {},
    ),
    recordClosed: assign(({ event }) => (event.type === 'CHANNEL_CLOSED' ? { lastError: event.reason, nextAttemptAt: event.at } : {})),
    // After recordFailure: attempts already counts the failed attempt.
    scheduleRetry: assign({ nextAttemptAt: ({ context, event }) => plusSeconds(event.at, notificationRetrySeconds(context.attempts)) }),
  },
}).createMachine({
  id: NOTIFICATION_MACHINE_ID,
  version: NOTIFICATION_MACHINE_VERSION,
  context: ({ input }) => input,
  initial: 'pending',
  states: {
    pending: {
      on: {
        DELIVERED: { target: 'delivered', actions: 'recordSuccess' },
        DELIVERY_FAILED: [
          { guard: 'attemptsExhausted', target: 'failed', actions: 'recordFailure' },
          { actions: ['recordFailure', 'scheduleRetry'] },
        ],
        CHANNEL_CLOSED: { target: 'failed', actions: 'recordClosed' },
      },
    },
    delivered: { type: 'final' },
    failed: { type: 'final' },
    suppressed: { type: 'final' },
  },
});

/** What the machine makes of `event` for a row in `status` with `context`; null when the state does not take it. */
export function decideNotification(
  status: NotificationState,
  context: NotificationContext,
  event: NotificationEvent,
): { to: NotificationState; context: NotificationContext } | null {
  const snapshot = notificationMachine.resolveState({ value: status, context });
  if (!snapshot.can(event)) return null;
  const [next] = xstateTransition(notificationMachine, snapshot, event);
  return { to: next.value as NotificationState, context: next.context };
}
