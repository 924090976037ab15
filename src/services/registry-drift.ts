import { writeAudit } from '../persistence/audit.ts';
import { withTransaction, type Pool } from '../persistence/db.ts';
import {
  forgetUnassertedFacts,
  observeRegistryDrift,
  recordRegistryCheck,
  resolveRegistryDrift,
  type RegistryCheckOutcome,
  type RegistryDriftRow,
  type RegistryFactKey,
} from '../persistence/registry-drifts.ts';
import { insertAttention } from '../persistence/notifications.ts';

/**
 * Registry drift's writes (docs/operations.md "Registry drift"), one transaction each with its audit
 * event: an answer of the chain about one fact a lane's configuration asserts, and the facts nothing
 * asserts any more. The verify_drift sidecar (src/sweeps/verify-drift.ts) reads the chains and calls
 * these; no transaction is open while a chain is asked.
 */

const ACTOR = 'worker:verify_drift';

export interface RegistryAnswer {
  outcome: RegistryCheckOutcome;
  observed: string | null;
  error_code: string | null;
}

/**
 * Records the latest answer about a fact. A drift opens an episode (`registry.drift_detected`, the
 * first sighting only) or moves its last_seen; a match resolves the open one (`registry.drift_resolved`);
 * unverified changes no episode. Answers the episode first detected or resolved by this call.
 */
export async function recordRegistryAnswer(
  pool: Pool,
  fact: RegistryFactKey & { address: string; expected: string },
  answer: RegistryAnswer,
  actor: string = ACTOR,
): Promise<{ detected: RegistryDriftRow | null; resolved: RegistryDriftRow | null }> {
  const key: RegistryFactKey = { lane: fact.lane, chain_id: fact.chain_id, subject: fact.subject, property: fact.property };
  const address = fact.address.toLowerCase();
  return withTransaction(pool, async (client) => {
    await recordRegistryCheck(client, { ...key, address, expected: fact.expected, ...answer });
    if (answer.outcome === 'drift') {
      const { drift, detected } = await observeRegistryDrift(client, { ...key, address, expected: fact.expected, observed: answer.observed ?? '' });
      if (!detected) return { detected: null, resolved: null };
      await writeAudit(client, {
        actor,
        action: 'registry.drift_detected',
        entity_type: 'registry_drift',
        entity_id: String(drift.id),
        details: { ...key, address: drift.address, expected: drift.expected, observed: drift.observed },
      });
      // The operator channels hear of it (the notification dispatcher), once per episode.
      await insertAttention(client, {
        kind: 'registry_drift',
        sourceKey: `registry_drift:${drift.id}`,
        dedupKey: `registry_drift:${key.lane}:${key.chain_id}:${key.subject}:${key.property}`,
        summary: `registry drift on chain ${key.chain_id} (${key.lane}): ${key.subject} ${key.property} is ${JSON.stringify(drift.observed)}, the configuration says ${JSON.stringify(drift.expected)}`,
        details: { drift_id: drift.id, ...key, address: drift.address, expected: drift.expected, observed: drift.observed },
      });
      return { detected: drift, resolved: null };
    }
    if (answer.outcome === 'match') {
      const resolved = await resolveRegistryDrift(client, key);
      if (resolved) {
        await writeAudit(client, { actor, action: 'registry.drift_resolved', entity_type: 'registry_drift', entity_id: String(resolved.id), details: { ...key, resolution: 'matched' } });
      }
      return { detected: null, resolved };
    }
    return { detected: null, resolved: null };
  });
}

/**
 * Resolves (unconfigured) the open drifts of facts not in `asserted`, and forgets their latest
 * answers; with `onlyLanes`, only those lanes' facts. Answers how many were resolved.
 */
export async function forgetUnassertedRegistryFacts(pool: Pool, asserted: readonly RegistryFactKey[], opts: { onlyLanes?: readonly string[]; actor?: string } = {}): Promise<number> {
  return withTransaction(pool, async (client) => {
    const rows = await forgetUnassertedFacts(client, asserted, opts.onlyLanes ?? null);
    for (const r of rows) {
      await writeAudit(client, {
        actor: opts.actor ?? ACTOR,
        action: 'registry.drift_resolved',
        entity_type: 'registry_drift',
        entity_id: String(r.id),
        details: { lane: r.lane, chain_id: r.chain_id, subject: r.subject, property: r.property, resolution: 'unconfigured' },
      });
    }
    return rows.length;
  });
}
