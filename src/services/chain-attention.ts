import { enqueueCallback } from '../callbacks/outbox.ts';
import { writeAudit } from '../persistence/audit.ts';
import { withTransaction, type Pool } from '../persistence/db.ts';
import { markDisagreementReported } from '../persistence/evm-nonces.ts';
import { getMovement } from '../persistence/movements.ts';

/**
 * Raising attention for a chain state disagreement the EVM nonce reaper found (docs/evm-lane.md,
 * "Chain state disagreements"): in one transaction the rows are marked reported (once per row), an
 * `evm.nonce_disagreement` audit event names the wallet, what the chain says and which nonces and
 * movements wait, and every waiting movement with a callback receiver gets a `request_attention`
 * callback (delivered by the stranded-callback sweep, as the reaper holds no delivery queue).
 */
export interface NonceDisagreement {
  kind: 'nonce_gap' | 'reservation_ahead';
  chainId: number;
  sender: string;
  /** The chain's count of mined transactions of the sender (its next nonce to mine). */
  chainLatest: number;
  /** The chain's pending count (mined plus what its mempool holds in order). */
  chainPending: number;
  /** Ferry's lowest open nonce for the wallet. */
  lowestOpen: number | null;
  rows: { id: number; nonce: number; status: string; request_id: string | null; request_node_id: string }[];
  detail: string;
}

export async function raiseNonceDisagreement(pool: Pool, d: NonceDisagreement, opts: { callbackMaxAttempts: number }): Promise<{ movements: string[] }> {
  const movements = [...new Set(d.rows.map((r) => r.request_id).filter((id): id is string => id !== null))];
  await withTransaction(pool, async (client) => {
    await markDisagreementReported(client, d.rows.map((r) => r.id));
    await writeAudit(client, {
      actor: 'worker:evm_nonce_reaper',
      action: 'evm.nonce_disagreement',
      entity_type: 'evm_wallet',
      entity_id: `${d.chainId}:${d.sender}`,
      details: {
        kind: d.kind,
        chain_id: d.chainId,
        sender: d.sender,
        chain_latest_nonce: d.chainLatest,
        chain_pending_nonce: d.chainPending,
        lowest_open_nonce: d.lowestOpen,
        nonces: d.rows.map((r) => ({ nonce: r.nonce, status: r.status, movement_id: r.request_id, node_id: r.request_node_id })),
        movements,
        detail: d.detail,
      },
    });
    const at = new Date().toISOString();
    for (const id of movements) {
      const movement = await getMovement(client, id);
      if (!movement?.callback_url) continue;
      await enqueueCallback(client, { movement, eventType: 'request_attention', occurredAt: at, maxAttempts: opts.callbackMaxAttempts });
    }
  });
  return { movements };
}
