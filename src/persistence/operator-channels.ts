import type { Queryable } from './db.ts';

/**
 * SQL for operator channels made through the API (migration 0380). The secret column is read only
 * by channelsForDelivery (the notification dispatcher); every other read leaves it out and says
 * only whether one is set.
 */

export type ChannelKind = 'webhook' | 'slack';

export interface OperatorChannelRow {
  id: string;
  name: string;
  kind: ChannelKind;
  url: string;
  rate_limit_per_minute: number;
  dedup_seconds: number;
  max_attempts: number;
  timeout_ms: number;
  enabled: boolean;
  has_secret: boolean;
  secret_set_at: Date | null;
  created_by: string;
  created_at: Date;
  updated_by: string;
  updated_at: Date;
}

export interface ChannelSettings {
  url: string;
  rate_limit_per_minute: number;
  dedup_seconds: number;
  max_attempts: number;
  timeout_ms: number;
  enabled: boolean;
}

const COLUMNS = `id, name, kind, url, rate_limit_per_minute, dedup_seconds, max_attempts, timeout_ms, enabled,
  secret IS NOT NULL AS has_secret, secret_set_at, created_by, created_at, updated_by, updated_at`;

/** Inserts a channel unless the name is taken; null when it is. */
export async function insertChannel(
  db: Queryable,
  c: ChannelSettings & { name: string; kind: ChannelKind; secret: string | null; actor: string },
): Promise<OperatorChannelRow | null> {
  const { rows } = await db.query<OperatorChannelRow>(
    `INSERT INTO operator_channels (name, kind, url, secret, secret_set_at, rate_limit_per_minute, dedup_seconds, max_attempts, timeout_ms, enabled, created_by, updated_by)
     VALUES ($1, $2, $3, $4, CASE WHEN $4::text IS NULL THEN NULL ELSE now() END, $5, $6, $7, $8, $9, $10, $10)
     ON CONFLICT (name) DO NOTHING RETURNING ${COLUMNS}`,
    [c.name, c.kind, c.url, c.secret, c.rate_limit_per_minute, c.dedup_seconds, c.max_attempts, c.timeout_ms, c.enabled, c.actor],
  );
  return rows[0] ?? null;
}

export async function findChannel(db: Queryable, name: string, opts: { lock?: boolean } = {}): Promise<OperatorChannelRow | null> {
  const { rows } = await db.query<OperatorChannelRow>(`SELECT ${COLUMNS} FROM operator_channels WHERE name = $1 ${opts.lock ? 'FOR UPDATE' : ''}`, [name]);
  return rows[0] ?? null;
}

export async function listChannels(db: Queryable): Promise<OperatorChannelRow[]> {
  const { rows } = await db.query<OperatorChannelRow>(`SELECT ${COLUMNS} FROM operator_channels ORDER BY name`);
  return rows;
}

/** Writes a channel's settings (and a new secret when given: `undefined` keeps the stored one). */
export async function updateChannel(db: Queryable, name: string, s: ChannelSettings & { secret?: string; actor: string }): Promise<OperatorChannelRow> {
  const { rows } = await db.query<OperatorChannelRow>(
    `UPDATE operator_channels
        SET url = $2, rate_limit_per_minute = $3, dedup_seconds = $4, max_attempts = $5, timeout_ms = $6, enabled = $7,
            secret = COALESCE($8::text, secret), secret_set_at = CASE WHEN $8::text IS NULL THEN secret_set_at ELSE now() END,
            updated_by = $9, updated_at = now()
      WHERE name = $1 RETURNING ${COLUMNS}`,
    [name, s.url, s.rate_limit_per_minute, s.dedup_seconds, s.max_attempts, s.timeout_ms, s.enabled, s.secret ?? null, s.actor],
  );
  return rows[0];
}

export async function deleteChannel(db: Queryable, name: string): Promise<void> {
  await db.query('DELETE FROM operator_channels WHERE name = $1', [name]);
}

/** The enabled channels with their secrets, for the notification dispatcher only. */
export async function channelsForDelivery(db: Queryable): Promise<Array<OperatorChannelRow & { secret: string | null }>> {
  const { rows } = await db.query<OperatorChannelRow & { secret: string | null }>(
    `SELECT ${COLUMNS}, secret FROM operator_channels WHERE enabled ORDER BY name`,
  );
  return rows;
}
