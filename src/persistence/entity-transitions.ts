import type { Client } from './db.ts';
import type { NewTransition } from './movements.ts';

/** Entities whose transitions are logged one at a time by their service (src/durable/row-machine.ts). */
export type EntityTransitionType = 'template_proposal' | 'credential_proposal' | 'policy_proposal' | 'standing_order';

/** An entity's row of `transitions`: a movement's transition without request and node, at the service's time. */
export interface NewEntityTransition extends Omit<NewTransition, 'entity_type' | 'request_id' | 'node_key'> {
  at: string;
}

export async function appendEntityTransition(client: Client, entityType: EntityTransitionType, t: NewEntityTransition): Promise<void> {
  await client.query(
    `INSERT INTO transitions (machine_id, machine_version, entity_type, entity_id, request_id, node_key, seq,
                              from_state, to_state, event_type, event_payload, actor, at)
     VALUES ($1, $2, $3, $4, NULL, NULL, $5, $6, $7, $8, $9::jsonb, $10, $11)`,
    [t.machine_id, t.machine_version, entityType, t.entity_id, t.seq, t.from_state, t.to_state, t.event_type, JSON.stringify(t.event_payload), t.actor, t.at],
  );
}
