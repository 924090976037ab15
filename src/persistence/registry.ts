import { isAddress } from 'viem';
import { NotFoundError, ValidationError } from '../errors.ts';
import type { Queryable } from './db.ts';

/**
 * executor_registry and signer_registry: the persisted roster of executors and signers, their last
 * health check, and for signers the two halves of identity evidence. The health sweep is the only
 * writer of health and of observed_signer_address; setExpectedSignerIdentity (an admin action) is
 * the only writer of expected_signer_address. Posture is derived on read, never stored.
 */

export type HealthState = 'up' | 'down' | 'unknown';
export type RegistryStatus = 'active' | 'orphan';
export type IdentityPosture = 'match' | 'mismatch' | 'unenrolled' | 'unobserved';

export interface ExecutorRosterRow {
  executor_key: string;
  lane: string;
  status: RegistryStatus;
  health_state: HealthState;
  health_detail: Record<string, unknown>;
  last_health_checked_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

export interface SignerRosterRow {
  signer_key: string;
  status: RegistryStatus;
  health_state: HealthState;
  health_detail: Record<string, unknown>;
  last_health_checked_at: Date | null;
  observed_signer_address: string | null;
  expected_signer_address: string | null;
  expected_set_by: string | null;
  expected_set_at: Date | null;
  identity_posture: IdentityPosture;
  created_at: Date;
  updated_at: Date;
}

export interface ExecutorHealthWrite {
  executor_key: string;
  lane: string;
  health_state: HealthState;
  health_detail: Record<string, unknown>;
}

/**
 * What this check learned about a signer's identity: `set` a new observation, `clear` it (the
 * signer answered with an address that is not one), or `keep` the previous one (nothing observed).
 */
export type ObservedIdentity = { kind: 'set'; address: string } | { kind: 'clear' } | { kind: 'keep' };

export interface SignerHealthWrite {
  signer_key: string;
  health_state: HealthState;
  health_detail: Record<string, unknown>;
  observed: ObservedIdentity;
}

/** A nonzero 0x EVM address in canonical lowercase, or null when the value is not one. */
export function canonicalEvmAddress(value: unknown): string | null {
  if (typeof value !== 'string' || !isAddress(value, { strict: false })) return null;
  const lower = value.toLowerCase();
  return /^0x0{40}$/.test(lower) ? null : lower;
}

export function identityPosture(expected: string | null, observed: string | null): IdentityPosture {
  if (expected === null) return 'unenrolled';
  if (observed === null) return 'unobserved';
  return expected === observed ? 'match' : 'mismatch';
}

/** Inserts or updates the executors' rows (status back to active), in key order. */
export async function saveExecutorHealth(db: Queryable, rows: ExecutorHealthWrite[], checkedAt: Date): Promise<void> {
  if (rows.length === 0) return;
  const sorted = [...rows].sort((a, b) => a.executor_key.localeCompare(b.executor_key));
  await db.query(
    `INSERT INTO executor_registry AS r (executor_key, lane, status, health_state, health_detail, last_health_checked_at, updated_at)
     SELECT x.executor_key, x.lane, 'active', x.health_state, x.health_detail, $2, now()
       FROM jsonb_to_recordset($1::jsonb) AS x(executor_key text, lane text, health_state text, health_detail jsonb)
     ON CONFLICT (executor_key) DO UPDATE SET
       lane = EXCLUDED.lane, status = 'active', health_state = EXCLUDED.health_state,
       health_detail = EXCLUDED.health_detail, last_health_checked_at = EXCLUDED.last_health_checked_at, updated_at = now()`,
    [JSON.stringify(sorted), checkedAt],
  );
}

/** Inserts or updates the signers' rows (status back to active), in key order; never touches expected_*. */
export async function saveSignerHealth(db: Queryable, rows: SignerHealthWrite[], checkedAt: Date): Promise<void> {
  if (rows.length === 0) return;
  const sorted = [...rows]
    .sort((a, b) => a.signer_key.localeCompare(b.signer_key))
    .map((r) => ({
      signer_key: r.signer_key,
      health_state: r.health_state,
      health_detail: r.health_detail,
      observe_mode: r.observed.kind,
      observed_address: r.observed.kind === 'set' ? r.observed.address : null,
    }));
  await db.query(
    `WITH x AS (
       SELECT * FROM jsonb_to_recordset($1::jsonb)
         AS x(signer_key text, health_state text, health_detail jsonb, observe_mode text, observed_address text))
     INSERT INTO signer_registry AS r (signer_key, status, health_state, health_detail, last_health_checked_at, observed_signer_address, updated_at)
     SELECT x.signer_key, 'active', x.health_state, x.health_detail, $2, x.observed_address, now() FROM x
     ON CONFLICT (signer_key) DO UPDATE SET
       status = 'active', health_state = EXCLUDED.health_state, health_detail = EXCLUDED.health_detail,
       last_health_checked_at = EXCLUDED.last_health_checked_at, updated_at = now(),
       observed_signer_address = CASE
         WHEN (SELECT x.observe_mode FROM x WHERE x.signer_key = EXCLUDED.signer_key) = 'keep' THEN r.observed_signer_address
         ELSE EXCLUDED.observed_signer_address END`,
    [JSON.stringify(sorted), checkedAt],
  );
}

/** Marks executors no longer registered in this runtime as orphans; returns their keys. */
export async function markOrphanExecutors(db: Queryable, registeredKeys: string[]): Promise<string[]> {
  const { rows } = await db.query<{ executor_key: string }>(
    `UPDATE executor_registry SET status = 'orphan', updated_at = now()
      WHERE status <> 'orphan' AND NOT (executor_key = ANY($1::text[]))
      RETURNING executor_key`,
    [registeredKeys],
  );
  return rows.map((r) => r.executor_key).sort();
}

/**
 * Marks signers no longer registered as orphans and forgets their observed identity (nothing is
 * observing it any more); the enrolled expectation stays. Returns their keys.
 */
export async function markOrphanSigners(db: Queryable, registeredKeys: string[]): Promise<string[]> {
  const { rows } = await db.query<{ signer_key: string }>(
    `UPDATE signer_registry SET status = 'orphan', observed_signer_address = NULL, updated_at = now()
      WHERE status <> 'orphan' AND NOT (signer_key = ANY($1::text[]))
      RETURNING signer_key`,
    [registeredKeys],
  );
  return rows.map((r) => r.signer_key).sort();
}

const executorColumns = `executor_key, lane, status, health_state, health_detail, last_health_checked_at, created_at, updated_at`;
const signerColumns = `signer_key, status, health_state, health_detail, last_health_checked_at, observed_signer_address,
  expected_signer_address, expected_set_by, expected_set_at, created_at, updated_at`;

export async function listExecutors(db: Queryable): Promise<ExecutorRosterRow[]> {
  const { rows } = await db.query<ExecutorRosterRow>(`SELECT ${executorColumns} FROM executor_registry ORDER BY executor_key`);
  return rows;
}

export async function listSigners(db: Queryable): Promise<SignerRosterRow[]> {
  const { rows } = await db.query<Omit<SignerRosterRow, 'identity_posture'>>(`SELECT ${signerColumns} FROM signer_registry ORDER BY signer_key`);
  return rows.map(withPosture);
}

/**
 * Enrols the address a signer is expected to sign as; the sole writer of expected_signer_address.
 * @throws ValidationError unless address is a nonzero 0x EVM address; NotFoundError for an unknown signer.
 */
export async function setExpectedSignerIdentity(
  db: Queryable,
  signerKey: string,
  address: string,
  setBy: string,
): Promise<SignerRosterRow> {
  const canonical = canonicalEvmAddress(address);
  if (canonical === null) {
    throw new ValidationError('expected signer address must be a nonzero 0x-prefixed EVM address', { field: 'address' });
  }
  const { rows } = await db.query<Omit<SignerRosterRow, 'identity_posture'>>(
    `UPDATE signer_registry SET expected_signer_address = $2, expected_set_by = $3, expected_set_at = now(), updated_at = now()
      WHERE signer_key = $1 RETURNING ${signerColumns}`,
    [signerKey, canonical, setBy],
  );
  if (rows.length === 0) throw new NotFoundError('signer', signerKey);
  return withPosture(rows[0]);
}

function withPosture(row: Omit<SignerRosterRow, 'identity_posture'>): SignerRosterRow {
  return { ...row, identity_posture: identityPosture(row.expected_signer_address, row.observed_signer_address) };
}
