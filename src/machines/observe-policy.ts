/**
 * When to look at a submitted node again. Pure policy: the executor's retry_after_seconds wins,
 * otherwise the per-action_type default of the reference runtime; never more than 600 s, so an
 * observation timeout is detected at most one backoff late.
 */
export const DEFAULT_OBSERVE_INTERVALS: Readonly<Record<string, number>> = {
  cex_withdrawal_status: 5,
  cex_deposit_status: 10,
  destination_chain_receive_observe: 10,
  destination_chain_finality_observe: 15,
  protocol_observe: 15,
  cctp_attestation: 15,
  cctp_mint_status: 5,
  ccip_delivery: 60,
  debridge_fulfillment: 30,
};
export const FALLBACK_OBSERVE_INTERVAL = 10;
export const MAX_OBSERVE_BACKOFF_SECONDS = 600;

export function observeDelaySeconds(actionType: string, retryAfterSeconds: number | null | undefined): number {
  const chosen = retryAfterSeconds ?? DEFAULT_OBSERVE_INTERVALS[actionType] ?? FALLBACK_OBSERVE_INTERVAL;
  return Math.min(Math.max(chosen, 0), MAX_OBSERVE_BACKOFF_SECONDS);
}

export function addSeconds(at: string, seconds: number): string {
  return new Date(Date.parse(at) + seconds * 1000).toISOString();
}

/** True when a positive observe_seconds budget has run out since the attempt started. */
export function observationTimedOut(timeoutPolicy: Record<string, unknown>, startedAt: string | null, now: string): boolean {
  const budget = Number(timeoutPolicy.observe_seconds ?? 0);
  if (!startedAt || !Number.isFinite(budget) || budget <= 0) return false;
  return Date.parse(now) - Date.parse(startedAt) > budget * 1000;
}
