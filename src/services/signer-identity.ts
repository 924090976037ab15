/**
 * The one home of an operator's "this signer must sign as this address" decision: the registry row
 * and its audit event in one transaction. The API route (and anything else that sets it) calls this.
 */
import { writeAudit } from '../persistence/audit.ts';
import { withTransaction, type Pool } from '../persistence/db.ts';
import { setExpectedSignerIdentity } from '../persistence/registry.ts';

export async function setSignerExpectedIdentity(pool: Pool, signerKey: string, address: string, actor: string) {
  return withTransaction(pool, async (client) => {
    const row = await setExpectedSignerIdentity(client, signerKey, address, actor);
    await writeAudit(client, {
      actor,
      action: 'signer.expected_identity.set',
      entity_type: 'signer',
      entity_id: signerKey,
      details: { expected_signer_address: row.expected_signer_address, identity_posture: row.identity_posture },
    });
    return row;
  });
}
