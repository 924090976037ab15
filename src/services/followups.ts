import { enqueueCallback } from '../callbacks/outbox.ts';
import type { FerryConfig } from '../config.ts';
import { writeAudit } from '../persistence/audit.ts';
import { withTransaction, type Pool, type Queryable } from '../persistence/db.ts';
import { listWaitingTooLong, unsurfacedWaiting, type WaitingListRow, type WaitingMovement, type WaitingReason } from '../persistence/followups.ts';
import { getMovement } from '../persistence/movements.ts';
import { insertAttention } from '../persistence/notifications.ts';

/**
 * Capital transfer follow-up: movements that have waited in a non-terminal state past their
 * template's age (FERRY_CAPITAL_TRANSFER_FOLLOWUP_AFTER_SECONDS[_BY_TEMPLATE]) are surfaced once per
 * waiting episode, in one transaction each: a `waiting_too_long` attention event (which the
 * notification dispatcher sends to the operator channels), a `movement.waiting_too_long` audit event
 * and, for a movement with a callback receiver, a `request_attention` callback. The movement itself
 * is not changed: a person decides what to do about it.
 */

type FollowupConfig = Pick<FerryConfig, 'followupAfterSeconds' | 'followupAfterByTemplate' | 'callbackMaxAttempts'>;

const REASON_TEXT: Record<WaitingReason, (w: WaitingMovement) => string> = {
  approval_not_given: () => 'approval not given',
  manual_gate_untouched: (w) => `manual gate ${w.node_key} untouched`,
  node_observed_too_long: (w) => `node ${w.node_key} observed too long`,
  waiting_in_state: (w) => `waiting in ${w.request_state}`,
};

export function waitingSummary(w: WaitingMovement): string {
  return `movement ${w.movement_id} (${w.template_key}) waiting too long: ${REASON_TEXT[w.reason](w)} since ${new Date(w.since).toISOString()}`;
}

export async function followUpWaitingMovements(deps: { pool: Pool; config: FollowupConfig }, opts: { batchSize: number }): Promise<{ surfaced: number }> {
  const waiting = await unsurfacedWaiting(deps.pool, { byTemplate: deps.config.followupAfterByTemplate, defaultSeconds: deps.config.followupAfterSeconds, limit: opts.batchSize });
  let surfaced = 0;
  for (const w of waiting) {
    const wrote = await withTransaction(deps.pool, async (client) => {
      const event = await insertAttention(client, {
        kind: 'waiting_too_long',
        sourceKey: w.source_key,
        dedupKey: `waiting_too_long:${w.movement_id}`,
        movementId: w.movement_id,
        summary: waitingSummary(w),
        details: { reason: w.reason, node_key: w.node_key, request_state: w.request_state, since: new Date(w.since).toISOString(), age_seconds: w.age_seconds },
      });
      // Another run surfaced it first: nothing more to write.
      if (!event) return false;
      await writeAudit(client, {
        actor: 'worker:capital_transfer_followup',
        action: 'movement.waiting_too_long',
        entity_type: 'movement',
        entity_id: w.movement_id,
        details: { reason: w.reason, node_key: w.node_key, request_state: w.request_state, since: new Date(w.since).toISOString(), age_seconds: w.age_seconds },
      });
      const movement = await getMovement(client, w.movement_id);
      if (movement?.callback_url) {
        await enqueueCallback(client, {
          movement,
          eventType: 'request_attention',
          nodeKey: w.node_key,
          occurredAt: new Date().toISOString(),
          maxAttempts: deps.config.callbackMaxAttempts,
        });
      }
      return true;
    });
    if (wrote) surfaced++;
  }
  return { surfaced };
}

/** The "waiting too long" list: movements still in a wait that was surfaced. */
export async function waitingTooLong(db: Queryable, config: Pick<FerryConfig, 'followupAfterSeconds' | 'followupAfterByTemplate'>, limit = 200): Promise<WaitingListRow[]> {
  return listWaitingTooLong(db, { byTemplate: config.followupAfterByTemplate, defaultSeconds: config.followupAfterSeconds, limit });
}
