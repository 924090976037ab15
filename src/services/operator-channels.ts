import { decodeWebhookSecret, WEBHOOK_SECRET_PREFIX } from '../callbacks/signing.ts';
import { assertCallbackUrlAllowed } from '../callbacks/url-policy.ts';
import { NOTIFY_CHANNEL_NAME, type FerryConfig, type NotifyChannel } from '../config.ts';
import { FerryError, NotFoundError, ValidationError } from '../errors.ts';
import type { Logger } from '../log.ts';
import { decideNotification } from '../machines/notification-delivery-machine.ts';
import { writeAudit } from '../persistence/audit.ts';
import { transactionNow, withTransaction, type Pool, type Queryable } from '../persistence/db.ts';
import { deliveryContext, forgetChannelCursor, pendingDeliveriesOf, writeDelivery } from '../persistence/notifications.ts';
import {
  channelsForDelivery,
  deleteChannel as deleteChannelRow,
  findChannel,
  insertChannel,
  listChannels as listChannelRows,
  updateChannel as updateChannelRow,
  type ChannelKind,
  type ChannelSettings,
  type OperatorChannelRow,
} from '../persistence/operator-channels.ts';

/**
 * The operator channel service: the one place that creates, changes, disables and deletes the
 * operator channels made through the API (docs/operations.md, "Operator notifications"). Each write
 * is one transaction with its audit event. A channel's secret goes in and never comes out: it is in
 * no answer, no audit event and no log line; answers say only whether one is set and since when.
 * Channels of FERRY_NOTIFY_CHANNELS are listed beside them (source "config") and cannot be changed
 * here: their name is reserved, and a change of them is a change of configuration.
 */

export interface ChannelServiceDeps {
  pool: Pool;
  config: Pick<FerryConfig, 'notifyChannels' | 'callbackAllowedHosts' | 'callbackAllowedNetworks'>;
}

/** The defaults FERRY_NOTIFY_CHANNELS gives a channel (src/config.ts). */
export const CHANNEL_DEFAULTS = { rate_limit_per_minute: 30, dedup_seconds: 3600, max_attempts: 5, timeout_ms: 5000 } as const;
export const CHANNEL_LIMITS = {
  rate_limit_per_minute: [1, 10_000],
  dedup_seconds: [0, 30 * 86_400],
  max_attempts: [1, 100],
  timeout_ms: [100, 60_000],
} as const;

/** A channel as the API shows it, from either source. */
export interface ChannelView {
  name: string;
  kind: ChannelKind;
  source: 'config' | 'api';
  editable: boolean;
  url: string;
  enabled: boolean;
  rate_limit_per_minute: number;
  dedup_seconds: number;
  max_attempts: number;
  timeout_ms: number;
  has_secret: boolean;
  secret_set_at: string | null;
  created_by: string | null;
  created_at: string | null;
  updated_by: string | null;
  updated_at: string | null;
}

/**
 * The URL as answers show it: a Slack-style incoming webhook's path is its credential
 * (/services/T.../B.../token), so only its origin is shown; a webhook's URL without its query.
 */
export function shownUrl(kind: ChannelKind, url: string): string {
  try {
    const u = new URL(url);
    return kind === 'slack' ? `${u.origin}/…` : `${u.origin}${u.pathname}${u.search ? '?…' : ''}`;
  } catch {
    return '…';
  }
}

function configView(c: NotifyChannel): ChannelView {
  return {
    name: c.name,
    kind: c.kind,
    source: 'config',
    editable: false,
    url: shownUrl(c.kind, c.url),
    enabled: true,
    rate_limit_per_minute: c.rate_limit_per_minute,
    dedup_seconds: c.dedup_seconds,
    max_attempts: c.max_attempts,
    timeout_ms: c.timeout_ms,
    has_secret: c.secret !== undefined,
    secret_set_at: null,
    created_by: null,
    created_at: null,
    updated_by: null,
    updated_at: null,
  };
}

export function channelView(r: OperatorChannelRow): ChannelView {
  return {
    name: r.name,
    kind: r.kind,
    source: 'api',
    editable: true,
    url: shownUrl(r.kind, r.url),
    enabled: r.enabled,
    rate_limit_per_minute: r.rate_limit_per_minute,
    dedup_seconds: r.dedup_seconds,
    max_attempts: r.max_attempts,
    timeout_ms: r.timeout_ms,
    has_secret: r.has_secret,
    secret_set_at: r.secret_set_at ? r.secret_set_at.toISOString() : null,
    created_by: r.created_by,
    created_at: r.created_at.toISOString(),
    updated_by: r.updated_by,
    updated_at: r.updated_at.toISOString(),
  };
}

/** Every channel by name: the configured ones and those made through the API. */
export async function listChannels(deps: ChannelServiceDeps): Promise<ChannelView[]> {
  const configured = deps.config.notifyChannels.map(configView);
  const names = new Set(configured.map((c) => c.name));
  const made = (await listChannelRows(deps.pool)).filter((r) => !names.has(r.name)).map(channelView);
  return [...configured, ...made].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

export async function showChannel(deps: ChannelServiceDeps, name: string): Promise<ChannelView> {
  const configured = deps.config.notifyChannels.find((c) => c.name === name);
  if (configured) return configView(configured);
  const row = await findChannel(deps.pool, name);
  if (!row) throw new NotFoundError('operator channel', name);
  return channelView(row);
}

export interface NewChannel {
  actor: string;
  name: string;
  kind: ChannelKind;
  url: string;
  secret?: string;
  rate_limit_per_minute?: number;
  dedup_seconds?: number;
  max_attempts?: number;
  timeout_ms?: number;
  enabled?: boolean;
}

export async function createChannel(deps: ChannelServiceDeps, input: NewChannel): Promise<ChannelView> {
  if (!NOTIFY_CHANNEL_NAME.test(input.name)) {
    throw new ValidationError('name must be 1-63 lowercase letters, digits, "_", "." or "-", starting with a letter or digit', { field: 'name' });
  }
  if (input.kind !== 'webhook' && input.kind !== 'slack') throw new ValidationError('kind must be webhook or slack', { field: 'kind' });
  if (deps.config.notifyChannels.some((c) => c.name === input.name)) throw exists(input.name, 'config');
  const settings = checkedSettings(deps, {
    url: input.url,
    rate_limit_per_minute: input.rate_limit_per_minute ?? CHANNEL_DEFAULTS.rate_limit_per_minute,
    dedup_seconds: input.dedup_seconds ?? CHANNEL_DEFAULTS.dedup_seconds,
    max_attempts: input.max_attempts ?? CHANNEL_DEFAULTS.max_attempts,
    timeout_ms: input.timeout_ms ?? CHANNEL_DEFAULTS.timeout_ms,
    enabled: input.enabled ?? true,
  });
  checkSecret(input.kind, input.secret, true);
  return withTransaction(deps.pool, async (client) => {
    const row = await insertChannel(client, { ...settings, name: input.name, kind: input.kind, secret: input.secret ?? null, actor: input.actor });
    if (!row) throw exists(input.name, 'api');
    // A name used before (and deleted) starts afresh: at the newest attention event.
    await forgetChannelCursor(client, row.name);
    await audit(client, input.actor, 'operator_channel.create', row, { kind: row.kind, url_host: hostOf(row.url), ...settingsOf(row), secret_set: row.has_secret });
    return channelView(row);
  });
}

export interface ChannelChange {
  url?: string;
  secret?: string;
  rate_limit_per_minute?: number;
  dedup_seconds?: number;
  max_attempts?: number;
  timeout_ms?: number;
  enabled?: boolean;
}

/**
 * Changes a channel's settings. Disabling it settles its pending deliveries as failed
 * (channel_disabled): a disabled channel is sent nothing, then or later; enabling it again starts
 * it at the newest attention event. A change that changes nothing writes no audit event.
 */
export async function updateChannel(deps: ChannelServiceDeps, input: { actor: string; name: string; change: ChannelChange }): Promise<ChannelView> {
  refuseConfigured(deps, input.name);
  return withTransaction(deps.pool, async (client) => {
    const row = await findChannel(client, input.name, { lock: true });
    if (!row) throw new NotFoundError('operator channel', input.name);
    const c = input.change;
    const next = checkedSettings(deps, {
      url: c.url ?? row.url,
      rate_limit_per_minute: c.rate_limit_per_minute ?? row.rate_limit_per_minute,
      dedup_seconds: c.dedup_seconds ?? row.dedup_seconds,
      max_attempts: c.max_attempts ?? row.max_attempts,
      timeout_ms: c.timeout_ms ?? row.timeout_ms,
      enabled: c.enabled ?? row.enabled,
    });
    if (c.secret !== undefined) checkSecret(row.kind, c.secret, false);
    const changed = (Object.keys(next) as (keyof ChannelSettings)[]).filter((k) => next[k] !== row[k]);
    if (c.secret !== undefined) changed.push('secret' as keyof ChannelSettings);
    if (changed.length === 0) return channelView(row);
    const updated = await updateChannelRow(client, row.name, { ...next, secret: c.secret, actor: input.actor });
    if (row.enabled && !next.enabled) await closeDeliveries(client, row.name, 'channel_disabled');
    if (row.enabled !== next.enabled) await forgetChannelCursor(client, row.name);
    await audit(client, input.actor, next.enabled === row.enabled ? 'operator_channel.update' : next.enabled ? 'operator_channel.enable' : 'operator_channel.disable', updated, {
      changed,
      ...settingsOf(updated),
      ...(changed.includes('url') ? { url_host: hostOf(updated.url) } : {}),
    });
    return channelView(updated);
  });
}

/** Deletes a channel: its pending deliveries are settled as failed (channel_deleted); its past ones stay, under its name. */
export async function deleteChannel(deps: ChannelServiceDeps, input: { actor: string; name: string }): Promise<ChannelView> {
  refuseConfigured(deps, input.name);
  return withTransaction(deps.pool, async (client) => {
    const row = await findChannel(client, input.name, { lock: true });
    if (!row) throw new NotFoundError('operator channel', input.name);
    await closeDeliveries(client, row.name, 'channel_deleted');
    await forgetChannelCursor(client, row.name);
    await deleteChannelRow(client, row.name);
    await audit(client, input.actor, 'operator_channel.delete', row, { kind: row.kind });
    return channelView(row);
  });
}

/**
 * For the notification dispatcher: the channels to deliver to, with their secrets. The configured
 * ones, then the enabled API ones whose names configuration does not take (such a one is skipped
 * with a warning: the configured channel is the one delivered to).
 */
export async function channelsToDeliver(db: Queryable, config: Pick<FerryConfig, 'notifyChannels'>, log?: Logger): Promise<NotifyChannel[]> {
  const out: NotifyChannel[] = [...config.notifyChannels];
  const names = new Set(out.map((c) => c.name));
  for (const r of await channelsForDelivery(db)) {
    if (names.has(r.name)) {
      log?.warn({ worker: 'notification_dispatcher', channel: r.name }, 'operator channel made through the API has the name of a configured one; the configured one is used');
      continue;
    }
    out.push({
      name: r.name,
      kind: r.kind,
      url: r.url,
      ...(r.secret ? { secret: r.secret } : {}),
      rate_limit_per_minute: r.rate_limit_per_minute,
      dedup_seconds: r.dedup_seconds,
      max_attempts: r.max_attempts,
      timeout_ms: r.timeout_ms,
    });
  }
  return out;
}

function refuseConfigured(deps: ChannelServiceDeps, name: string): void {
  if (deps.config.notifyChannels.some((c) => c.name === name)) {
    throw new FerryError('OPERATOR_CHANNEL_READ_ONLY', `operator channel ${name} is configured in FERRY_NOTIFY_CHANNELS; change it there`, {
      name,
      source: 'config',
      rule: 'FERRY_NOTIFY_CHANNELS',
    });
  }
}

function exists(name: string, source: 'config' | 'api'): FerryError {
  return new FerryError('OPERATOR_CHANNEL_EXISTS', `an operator channel named ${name} exists${source === 'config' ? ' (in FERRY_NOTIFY_CHANNELS)' : ''}`, { name, source });
}

function checkedSettings(deps: ChannelServiceDeps, s: ChannelSettings): ChannelSettings {
  if (typeof s.url !== 'string' || s.url.length === 0 || s.url.length > 2048) throw new ValidationError('url must be an http(s) URL of at most 2048 characters', { field: 'url' });
  assertCallbackUrlAllowed(s.url, deps.config, 'url');
  for (const [field, [min, max]] of Object.entries(CHANNEL_LIMITS) as [keyof typeof CHANNEL_LIMITS, readonly [number, number]][]) {
    const v = s[field];
    if (!Number.isInteger(v) || v < min || v > max) throw new ValidationError(`${field} must be an integer from ${min} to ${max}`, { field, min, max });
  }
  if (typeof s.enabled !== 'boolean') throw new ValidationError('enabled must be true or false', { field: 'enabled' });
  return s;
}

/** A webhook channel signs with a Standard Webhooks secret (required at creation); a Slack-style one takes none. */
function checkSecret(kind: ChannelKind, secret: string | undefined, creating: boolean): void {
  if (kind === 'slack') {
    if (secret !== undefined) throw new ValidationError('a slack channel takes no secret: its URL carries its token', { field: 'secret' });
    return;
  }
  if (secret === undefined) {
    if (creating) throw new ValidationError('a webhook channel needs a secret (whsec_ + base64 of 24 to 64 bytes) to sign with', { field: 'secret' });
    return;
  }
  if (typeof secret !== 'string' || !secret.startsWith(WEBHOOK_SECRET_PREFIX) || decodeWebhookSecret(secret) === null) {
    // The value is not echoed: a mistyped secret is still a secret.
    throw new ValidationError('secret must be whsec_ + base64 of 24 to 64 bytes', { field: 'secret' });
  }
}

/** Settles the channel's pending deliveries through the notification machine (CHANNEL_CLOSED). */
async function closeDeliveries(client: Queryable, channel: string, reason: 'channel_disabled' | 'channel_deleted'): Promise<void> {
  const at = (await transactionNow(client)).toISOString();
  for (const d of await pendingDeliveriesOf(client, channel)) {
    const decided = decideNotification(d.status, deliveryContext(d), { type: 'CHANNEL_CLOSED', at, reason });
    if (decided) await writeDelivery(client, d.id, d.attempts, decided.to, decided.context);
  }
}

function settingsOf(r: OperatorChannelRow) {
  return { enabled: r.enabled, rate_limit_per_minute: r.rate_limit_per_minute, dedup_seconds: r.dedup_seconds, max_attempts: r.max_attempts, timeout_ms: r.timeout_ms };
}

function hostOf(url: string): string | null {
  try {
    return new URL(url).host;
  } catch {
    return null;
  }
}

function audit(client: Queryable, actor: string, action: string, r: OperatorChannelRow, details: Record<string, unknown>): Promise<number> {
  return writeAudit(client, { actor, action, entity_type: 'operator_channel', entity_id: r.id, details: { name: r.name, ...details } });
}
