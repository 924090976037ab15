import type { PreparedAction } from '../executors/protocol.ts';

/**
 * A prepared action's `expires_at` (a quote, a fee estimate, an exchange's signed order that the
 * provider will refuse, or worse honour at a stale price, after it) is enforced by the dispatcher
 * twice: right before the signer is asked, and right before submit(). Past it, nothing is signed
 * or submitted: the node goes back to READY and is prepared again. Before sign the event is
 * DISPATCH_DEFERRED (no attempt started yet); before submit it is PRE_SUBMIT_CHECK_DEFERRED, which
 * abandons the attempt (its signature included), so the next dispatch is a new attempt. No
 * expires_at: the action does not expire.
 */

export const PREPARED_ACTION_EXPIRED = 'PREPARED_ACTION_EXPIRED';

/** How soon the node is dispatched again (prepared afresh); not at once, so an executor whose every action is already expired cannot spin the dispatcher. */
export const EXPIRED_RETRY_SECONDS = 1;

export interface PreparedExpiry {
  errorCode: typeof PREPARED_ACTION_EXPIRED;
  errorDetail: string;
}

/** Null while the action may still be used at `now`; the refusal to record once its expires_at has passed. */
export function preparedActionExpired(prepared: Pick<PreparedAction, 'prepared_action_id' | 'expires_at'>, step: 'sign' | 'submit', now = Date.now()): PreparedExpiry | null {
  if (prepared.expires_at === null || prepared.expires_at === undefined) return null;
  const expires = Date.parse(prepared.expires_at);
  // A timestamp the schema accepted but the runtime cannot read is treated as expired: never guessed valid.
  if (Number.isFinite(expires) && now < expires) return null;
  return {
    errorCode: PREPARED_ACTION_EXPIRED,
    errorDetail: `prepared action ${prepared.prepared_action_id} expired at ${prepared.expires_at}, before ${step}; it is prepared again`,
  };
}
