import { isUuid } from '../ids.ts';
import type { Queryable } from './db.ts';

/**
 * SQL for registered callback destinations and their signing secrets. Secret values are read only
 * by the delivery worker (secretsForDelivery) and returned only by the statements that create them;
 * every other read here leaves them out.
 */

export type DestinationStatus = 'active' | 'disabled';

export interface DestinationRow {
  id: string;
  name: string;
  url: string;
  status: DestinationStatus;
  /** Whether it also receives a callback on every node state change (migration 0350). */
  node_events: boolean;
  created_by: string;
  created_at: Date;
  disabled_by: string | null;
  disabled_at: Date | null;
  updated_at: Date;
  /** When the current secret was made (creation or last rotation). */
  secret_created_at: Date | null;
  /** When the last earlier secret still signing stops (the end of a rotation overlap); null when none does. */
  previous_secrets_expire_at: Date | null;
}

const DESTINATION_COLUMNS = `d.id, d.name, d.url, d.status, d.node_events, d.created_by, d.created_at, d.disabled_by, d.disabled_at, d.updated_at,
  (SELECT s.created_at FROM callback_destination_secrets s WHERE s.destination_id = d.id AND s.expires_at IS NULL) AS secret_created_at,
  (SELECT max(s.expires_at) FROM callback_destination_secrets s WHERE s.destination_id = d.id AND s.expires_at > now()) AS previous_secrets_expire_at`;

export async function insertDestination(db: Queryable, d: { name: string; url: string; createdBy: string; nodeEvents?: boolean }): Promise<{ id: string }> {
  const { rows } = await db.query<{ id: string }>(
    `INSERT INTO callback_destinations (name, url, created_by, node_events) VALUES ($1, $2, $3, $4)
     ON CONFLICT (name) DO NOTHING RETURNING id`,
    [d.name, d.url, d.createdBy, d.nodeEvents ?? false],
  );
  return rows[0];
}

/** Adds a destination's new current secret; earlier current ones must have been retired first. */
export async function insertSecret(db: Queryable, s: { destinationId: string; secret: string; createdBy: string }): Promise<void> {
  await db.query(`INSERT INTO callback_destination_secrets (destination_id, secret, created_by) VALUES ($1, $2, $3)`, [
    s.destinationId,
    s.secret,
    s.createdBy,
  ]);
}

/**
 * Ends the destination's signing secrets after `overlapSeconds`: the current one, and any earlier one
 * whose overlap would end later. Returns when the overlap ends.
 */
export async function retireSecrets(db: Queryable, destinationId: string, overlapSeconds: number): Promise<Date> {
  const { rows } = await db.query<{ ends: Date }>(
    `WITH ends AS (SELECT now() + make_interval(secs => $2) AS at)
     UPDATE callback_destination_secrets s
        SET expires_at = LEAST(COALESCE(s.expires_at, (SELECT at FROM ends)), (SELECT at FROM ends))
      WHERE s.destination_id = $1 AND (s.expires_at IS NULL OR s.expires_at > now())
     RETURNING (SELECT at FROM ends) AS ends`,
    [destinationId, overlapSeconds],
  );
  return rows[0]?.ends ?? new Date();
}

/** By id (a UUID) or by name. */
export async function findDestination(db: Queryable, ref: string, opts: { lock?: 'update' | 'share' } = {}): Promise<DestinationRow | null> {
  const byId = isUuid(ref);
  const lock = opts.lock === 'update' ? 'FOR UPDATE OF d' : opts.lock === 'share' ? 'FOR SHARE OF d' : '';
  const { rows } = await db.query<DestinationRow>(
    `SELECT ${DESTINATION_COLUMNS} FROM callback_destinations d WHERE ${byId ? 'd.id = $1::uuid' : 'd.name = $1'} ${lock}`,
    [ref],
  );
  return rows[0] ?? null;
}

/** Every destination, by name. */
export async function listDestinations(db: Queryable): Promise<DestinationRow[]> {
  const { rows } = await db.query<DestinationRow>(`SELECT ${DESTINATION_COLUMNS} FROM callback_destinations d ORDER BY d.name`);
  return rows;
}

export async function markDestinationDisabled(db: Queryable, id: string, actor: string): Promise<void> {
  await db.query(
    `UPDATE callback_destinations SET status = 'disabled', disabled_by = $2, disabled_at = now(), updated_at = now()
      WHERE id = $1 AND status = 'active'`,
    [id, actor],
  );
}

/**
 * Records, on a just-created movement (created without a callback_url), the destination it reports
 * to and that destination's URL, in one statement: a callback can never be written with the URL but
 * without the destination (which would sign it with the instance secret).
 */
export async function setMovementDestination(db: Queryable, movementId: string, destination: { id: string; url: string; node_events?: boolean }): Promise<void> {
  // write_version moves too: a writer holding the movement's rows from before must read the URL anew.
  await db.query(
    'UPDATE movement_requests SET callback_destination_id = $2, callback_url = $3, node_callbacks = $4, write_version = write_version + 1 WHERE id = $1',
    [movementId, destination.id, destination.url, destination.node_events ?? false],
  );
}

export interface DeliveryTarget {
  status: DestinationStatus;
  /** The secrets to sign with now, newest (the current one) first. */
  secrets: string[];
}

/** What a delivery to this destination signs with; null when the destination does not exist. */
export async function secretsForDelivery(db: Queryable, destinationId: string): Promise<DeliveryTarget | null> {
  const { rows } = await db.query<{ status: DestinationStatus; secrets: string[] | null }>(
    `SELECT d.status,
            (SELECT array_agg(s.secret ORDER BY s.created_at DESC, s.id DESC)
               FROM callback_destination_secrets s
              WHERE s.destination_id = d.id AND (s.expires_at IS NULL OR s.expires_at > now())) AS secrets
       FROM callback_destinations d WHERE d.id = $1`,
    [destinationId],
  );
  const row = rows[0];
  return row ? { status: row.status, secrets: row.secrets ?? [] } : null;
}
