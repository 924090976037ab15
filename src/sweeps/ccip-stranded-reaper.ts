import type { Logger } from '../log.ts';
import { writeAudit } from '../persistence/audit.ts';
import { unsurfacedStrandedSends } from '../persistence/ccip-stranded.ts';
import { withTransaction, type Pool } from '../persistence/db.ts';
import { insertAttention } from '../persistence/notifications.ts';

/**
 * ccip_stranded_reaper (the CCIP lane's sweep, docs/ccip-lane.md "Stranded sends"): a CCIP send
 * whose delivery node has not resolved (SUBMITTED, OBSERVING or UNKNOWN) more than
 * `afterSeconds` after its watch started is stranded: the fee is paid and the tokens left the
 * source, and the message is not executed. Each is surfaced once, in one transaction: a
 * `ccip_stranded` attention event (which the notification dispatcher sends to the operator
 * channels) and a `movement.ccip_stranded` audit event. Nothing else changes: the node keeps
 * observing, nothing is sent again (Chainlink's manual execution is a person's decision).
 */
export async function runCcipStrandedReaper(
  deps: { pool: Pool; log: Logger; executorKey: string; afterSeconds: number },
  opts: { batchSize: number; maxRunMs: number },
): Promise<{ surfaced: number; budget_exhausted: boolean }> {
  const started = Date.now();
  const stranded = await unsurfacedStrandedSends(deps.pool, { executorKey: deps.executorKey, afterSeconds: deps.afterSeconds, limit: opts.batchSize });
  let surfaced = 0;
  for (const s of stranded) {
    if (opts.maxRunMs > 0 && Date.now() - started > opts.maxRunMs) return { surfaced, budget_exhausted: true };
    const details = {
      node_key: s.node_key,
      node_state: s.node_state,
      message_id: s.message_id,
      destination_chain_id: s.destination_chain_id,
      since: new Date(s.started_at).toISOString(),
      age_seconds: s.age_seconds,
      threshold_seconds: deps.afterSeconds,
    };
    const wrote = await withTransaction(deps.pool, async (client) => {
      const event = await insertAttention(client, {
        kind: 'ccip_stranded',
        sourceKey: `ccip_stranded:${s.node_id}`,
        dedupKey: `ccip_stranded:${s.movement_id}`,
        movementId: s.movement_id,
        summary: `movement ${s.movement_id} (${s.template_key}): CCIP message ${s.message_id ?? '(unknown)'} not executed ${s.age_seconds} s after its send; the fee is paid and the tokens left the source; manual execution may be needed`,
        details,
      });
      if (!event) return false;
      await writeAudit(client, { actor: 'worker:ccip_stranded_reaper', action: 'movement.ccip_stranded', entity_type: 'movement', entity_id: s.movement_id, details });
      return true;
    });
    if (wrote) {
      surfaced++;
      deps.log.warn({ movement_id: s.movement_id, node_key: s.node_key, message_id: s.message_id, age_seconds: s.age_seconds }, 'ccip send stranded: attention raised');
    }
  }
  return { surfaced, budget_exhausted: false };
}
