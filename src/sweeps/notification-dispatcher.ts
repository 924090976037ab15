import { request } from 'undici';
import { deliveryErrorClass, destinationPolicy, literalRefusal, type DestinationPolicy } from '../callbacks/destinations.ts';
import { webhookHeaders } from '../callbacks/signing.ts';
import type { FerryConfig, NotifyChannel } from '../config.ts';
import type { Logger } from '../log.ts';
import { decideNotification, type NotificationContext, type NotificationEvent, type NotificationState } from '../machines/notification-delivery-machine.ts';
import { channelsToDeliver } from '../services/operator-channels.ts';
import { withTransaction, type Pool } from '../persistence/db.ts';
import {
  attemptsLastMinute,
  dbNow,
  deliveryContext,
  dueDeliveries,
  fanOut,
  ingestAudit,
  ingestDeadLetters,
  ingestSignerMismatches,
  ingestStaleBalances,
  ingestTransitions,
  writeDelivery,
  type DeliveryRow,
  type DueDelivery,
} from '../persistence/notifications.ts';
import { runBudget } from '../run-budget.ts';

/**
 * notification_dispatcher: tells operators about attention events on their channels. One run:
 *
 *   1. records new attention events from their sources (the transition log, the audit log, the
 *      callback dead-letter queue, stale balances, signer identities), each once;
 *   2. gives every channel (configured in FERRY_NOTIFY_CHANNELS, or made through the API and
 *      enabled: src/services/operator-channels.ts) a delivery row per new event, suppressed when the channel
 *      said the same thing (dedup_key) within its deduplication window;
 *   3. sends each channel's due deliveries, at most its rate limit per minute, and records each
 *      outcome through the notification machine (delivered, or retried after a backoff until
 *      max_attempts, then failed).
 *
 * The run is a sweep (one at a time in the cluster), so an attempt needs no lease: it reads the row,
 * calls with no lock held, and writes its outcome fenced by the attempt count it read. Channel URLs
 * and secrets never reach a log line or a stored error: errors are recorded as classes.
 */

export interface NotificationDeps {
  pool: Pool;
  config: Pick<FerryConfig, 'notifyChannels' | 'balanceStaleThresholdSeconds' | 'callbackAllowedHosts' | 'callbackAllowedNetworks'>;
  log: Logger;
  /** Which addresses channels may reach (default: the callback rules, FERRY_CALLBACK_ALLOWED_*). */
  destinations?: DestinationPolicy;
}

export interface NotificationRun {
  recorded: number;
  pending: number;
  suppressed: number;
  delivered: number;
  failed: number;
  retried: number;
  rate_limited: number;
  budget_exhausted: boolean;
}

const policies = new WeakMap<object, DestinationPolicy>();
function policyFor(deps: NotificationDeps): DestinationPolicy {
  if (deps.destinations) return deps.destinations;
  let p = policies.get(deps.config);
  if (!p) {
    p = destinationPolicy(deps.config);
    policies.set(deps.config, p);
  }
  return p;
}

export async function runNotificationDispatcher(deps: NotificationDeps, opts: { batchSize: number; maxRunMs: number }): Promise<NotificationRun> {
  const budget = runBudget(opts.maxRunMs);
  const out: NotificationRun = { recorded: 0, pending: 0, suppressed: 0, delivered: 0, failed: 0, retried: 0, rate_limited: 0, budget_exhausted: false };
  const limit = opts.batchSize;
  out.recorded = await withTransaction(deps.pool, async (client) => {
    let n = await ingestTransitions(client, limit * 10);
    n += await ingestAudit(client, limit * 10);
    n += await ingestDeadLetters(client, limit);
    n += await ingestStaleBalances(client, deps.config.balanceStaleThresholdSeconds, limit);
    n += await ingestSignerMismatches(client, limit);
    return n;
  });
  // The configured channels and the enabled ones made through the API (a configured name wins).
  const channels = await channelsToDeliver(deps.pool, deps.config, deps.log);
  for (const ch of channels) {
    const f = await withTransaction(deps.pool, (client) => fanOut(client, { name: ch.name, maxAttempts: ch.max_attempts, dedupSeconds: ch.dedup_seconds }, limit));
    out.pending += f.pending;
    out.suppressed += f.suppressed;
  }
  for (const ch of channels) {
    if (budget.spent()) {
      out.budget_exhausted = true;
      break;
    }
    const room = ch.rate_limit_per_minute - (await attemptsLastMinute(deps.pool, ch.name));
    const due = await dueDeliveries(deps.pool, ch.name, Math.min(limit, Math.max(room, 0) + 1));
    if (due.length > Math.max(room, 0)) out.rate_limited += due.length - Math.max(room, 0);
    for (const d of due.slice(0, Math.max(room, 0))) {
      if (budget.spent()) {
        out.budget_exhausted = true;
        break;
      }
      const result = await send(ch, d, policyFor(deps));
      const at = (await dbNow(deps.pool)).toISOString();
      const event: NotificationEvent = result.ok
        ? { type: 'DELIVERED', at, statusCode: result.statusCode }
        : { type: 'DELIVERY_FAILED', at, statusCode: result.statusCode, error: result.error };
      const decided = decide(d, event);
      if (!decided) continue;
      const written = await writeDelivery(deps.pool, d.id, d.attempts, decided.to, decided.context);
      if (!written) continue;
      if (decided.to === 'delivered') out.delivered++;
      else if (decided.to === 'failed') {
        out.failed++;
        deps.log.warn({ worker: 'notification_dispatcher', channel: ch.name, delivery_id: d.id, attempts: decided.context.attempts, error: decided.context.lastError }, 'operator notification failed');
      } else out.retried++;
    }
  }
  return out;
}

function decide(row: DeliveryRow, event: NotificationEvent): { to: NotificationState; context: NotificationContext } | null {
  return decideNotification(row.status, deliveryContext(row), event);
}

/** The body a channel receives: the signed JSON of a generic webhook, or a Slack-style {text}. */
export function notificationBody(ch: NotifyChannel, d: DueDelivery): string {
  const e = d.event;
  if (ch.kind === 'slack') return JSON.stringify({ text: `Ferry attention (${e.kind}): ${e.summary}` });
  return JSON.stringify({
    notification_id: d.id,
    attention_id: String(e.id),
    kind: e.kind,
    summary: e.summary,
    movement_id: e.movement_id,
    details: e.details,
    occurred_at: new Date(e.created_at).toISOString(),
  });
}

type SendResult = { ok: true; statusCode: number } | { ok: false; statusCode: number | null; error: string };

async function send(ch: NotifyChannel, d: DueDelivery, policy: DestinationPolicy): Promise<SendResult> {
  const body = notificationBody(ch, d);
  const blocked = literalRefusal(policy, new URL(ch.url));
  if (blocked) return { ok: false, statusCode: null, error: `destination_blocked (${blocked})` };
  const headers: Record<string, string> = { 'content-type': 'application/json', 'user-agent': 'ferry-notifications' };
  // Standard Webhooks signing, as callbacks: webhook-id is the delivery id (the same on every retry).
  if (ch.kind === 'webhook' && ch.secret) Object.assign(headers, webhookHeaders([ch.secret], d.id, Math.floor(Date.now() / 1000), body));
  try {
    const res = await request(ch.url, {
      method: 'POST',
      headers,
      body,
      signal: AbortSignal.timeout(ch.timeout_ms),
      headersTimeout: ch.timeout_ms,
      bodyTimeout: ch.timeout_ms,
      dispatcher: policy.dispatcher,
    });
    await res.body.dump({ limit: 64 * 1024 }).catch(() => {});
    if (res.statusCode >= 200 && res.statusCode < 300) return { ok: true, statusCode: res.statusCode };
    return { ok: false, statusCode: res.statusCode, error: `HTTP ${res.statusCode}` };
  } catch (err) {
    const cls = deliveryErrorClass(err);
    return { ok: false, statusCode: null, error: cls === 'timeout' ? `timeout after ${ch.timeout_ms} ms` : cls };
  }
}
