import { NotFoundError, ValidationError } from '../errors.ts';
import { isUuid } from '../ids.ts';
import type { Queryable } from './db.ts';

/**
 * Queue credentials: the public keys that verify queued movement orders, one principal each. Only
 * the public key is stored; the private key exists only with whoever the CLI showed it to.
 */

export interface QueueCredentialInfo {
  id: string;
  name: string;
  principal_id: string;
  principal_name: string;
  created_at: Date;
  revoked_at: Date | null;
}

/** A credential that may sign orders now: not revoked, its principal not disabled. */
export interface UsableQueueCredential {
  id: string;
  name: string;
  principalId: string;
  principalName: string;
  publicKey: string;
}

const INFO = `q.id, q.name, q.principal_id, p.name AS principal_name, q.created_at, q.revoked_at`;

export async function insertQueueCredential(
  client: Queryable,
  input: { name: string; principalId: string; publicKey: string },
): Promise<QueueCredentialInfo> {
  try {
    const { rows } = await client.query<QueueCredentialInfo>(
      `WITH q AS (INSERT INTO queue_credentials (name, principal_id, public_key) VALUES ($1, $2, $3) RETURNING *)
       SELECT ${INFO} FROM q JOIN principals p ON p.id = q.principal_id`,
      [input.name, input.principalId, input.publicKey],
    );
    return rows[0];
  } catch (err) {
    if ((err as { constraint?: string }).constraint === 'queue_credentials_active_name') {
      throw new ValidationError(`an active queue credential named ${input.name} already exists; revoke it or pick another name`, { field: 'name' });
    }
    throw err;
  }
}

/** The usable credential with this id; null when unknown, revoked or of a disabled principal (one answer for all). */
export async function usableQueueCredential(db: Queryable, id: string): Promise<UsableQueueCredential | null> {
  if (!isUuid(id)) return null;
  const { rows } = await db.query<UsableQueueCredential>(
    `SELECT q.id, q.name, q.principal_id AS "principalId", p.name AS "principalName", q.public_key AS "publicKey"
       FROM queue_credentials q JOIN principals p ON p.id = q.principal_id
      WHERE q.id = $1 AND q.revoked_at IS NULL AND p.disabled_at IS NULL`,
    [id],
  );
  return rows[0] ?? null;
}

export async function listQueueCredentials(db: Queryable, opts: { includeRevoked?: boolean } = {}): Promise<QueueCredentialInfo[]> {
  const { rows } = await db.query<QueueCredentialInfo>(
    `SELECT ${INFO} FROM queue_credentials q JOIN principals p ON p.id = q.principal_id
      WHERE $1::boolean OR q.revoked_at IS NULL ORDER BY q.created_at, q.id`,
    [opts.includeRevoked === true],
  );
  return rows;
}

export async function revokeQueueCredential(client: Queryable, idOrName: string): Promise<QueueCredentialInfo> {
  const byId = isUuid(idOrName);
  const { rows } = await client.query<QueueCredentialInfo>(
    `WITH q AS (UPDATE queue_credentials SET revoked_at = now()
                 WHERE revoked_at IS NULL AND ${byId ? 'id = $1::uuid' : 'name = $1'} RETURNING *)
     SELECT ${INFO} FROM q JOIN principals p ON p.id = q.principal_id`,
    [idOrName],
  );
  if (rows.length === 0) throw new NotFoundError('active queue credential', idOrName);
  return rows[0];
}
