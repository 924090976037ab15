import { z } from '@hono/zod-openapi';
import { deliveriesOf, listAttention } from '../../persistence/notifications.ts';
import { waitingTooLong } from '../../services/followups.ts';
import { resourceApp, type V3Context } from './context.ts';
import { isoTime } from './schemas.ts';
import { readRoute } from './route.ts';
import { pageLimit } from '../query.ts';

/**
 * /v3/attention: what the operator should hear about. The attention events the notification
 * dispatcher recorded (with each channel's delivery of them), and the movements waiting too long
 * (capital_transfer_followup). Reads only.
 */

const tags = ['Attention'];
const UUID = { format: 'uuid' } as const;
export const attentionKinds = ['manual_intervention', 'node_failed_after_side_effect', 'drift', 'signer_identity_mismatch', 'balance_stale', 'callback_dlq', 'waiting_too_long', 'ccip_stranded', 'registry_drift'] as const;

const DeliverySchema = z
  .object({
    id: z.string().openapi(UUID),
    channel: z.string(),
    status: z.enum(['pending', 'delivered', 'failed', 'suppressed']),
    attempts: z.number().int(),
    max_attempts: z.number().int(),
    next_attempt_at: isoTime,
    last_attempt_at: isoTime.nullable(),
    last_error: z.string().nullable().openapi({ description: 'An error class (connection_refused, timeout, HTTP 503, ...), never the channel URL' }),
    last_status_code: z.number().int().nullable(),
    delivered_at: isoTime.nullable(),
  })
  .openapi('NotificationDelivery');

const AttentionSchema = z
  .object({
    id: z.string(),
    kind: z.enum(attentionKinds),
    summary: z.string(),
    movement_id: z.string().nullable(),
    dedup_key: z.string(),
    details: z.record(z.string(), z.unknown()),
    created_at: isoTime,
    deliveries: z.array(DeliverySchema),
  })
  .openapi('AttentionEvent');

const AttentionQuery = z.object({
  kind: z.enum(attentionKinds).optional().openapi({ param: { name: 'kind', in: 'query' } }),
  limit: pageLimit(500, 100),
});

const WaitingSchema = z
  .object({
    movement_id: z.string().openapi(UUID),
    template_key: z.string(),
    request_state: z.string(),
    reason: z.enum(['approval_not_given', 'manual_gate_untouched', 'node_observed_too_long', 'waiting_in_state']),
    node_key: z.string().nullable(),
    waiting_since: isoTime,
    age_seconds: z.number().int().openapi({ description: "The template's age past which a wait is too long" }),
    surfaced_at: isoTime,
  })
  .openapi('WaitingMovement');

const WaitingQuery = z.object({
  limit: pageLimit(500, 200),
});

const listRoute = readRoute({
  operationId: 'listAttentionEvents',
  path: '/attention',
  tags,
  summary: 'Recent attention events, newest first, with their deliveries to the operator channels',
  request: { query: AttentionQuery },
  answer: z.object({ events: z.array(AttentionSchema) }).openapi('AttentionEventList'),
  shows: 'The newest attention events',
});

const waitingRoute = readRoute({
  operationId: 'listWaitingTooLong',
  path: '/attention/waiting-too-long',
  tags,
  summary: 'Movements waiting in a non-terminal state past their template age, surfaced and still waiting',
  request: { query: WaitingQuery },
  answer: z.object({ movements: z.array(WaitingSchema) }).openapi('WaitingMovementList'),
  shows: 'The movements waiting too long, longest wait first',
});

const iso = (d: Date | null) => (d ? new Date(d).toISOString() : null);

export function attentionRoutes(ctx: V3Context) {
  const app = resourceApp();
  app.openapi(listRoute, async (c) => {
    const q = c.req.valid('query');
    const events = await listAttention(ctx.pool, { kind: q.kind, limit: q.limit });
    const deliveries = await deliveriesOf(ctx.pool, { limit: 2000 });
    return c.json(
      {
        events: events.map((e) => ({
          id: String(e.id),
          kind: e.kind,
          summary: e.summary,
          movement_id: e.movement_id,
          dedup_key: e.dedup_key,
          details: e.details,
          created_at: e.created_at.toISOString(),
          deliveries: deliveries
            .filter((d) => String(d.attention_id) === String(e.id))
            .map((d) => ({
              id: d.id,
              channel: d.channel,
              status: d.status,
              attempts: d.attempts,
              max_attempts: d.max_attempts,
              next_attempt_at: d.next_attempt_at.toISOString(),
              last_attempt_at: iso(d.last_attempt_at),
              last_error: d.last_error,
              last_status_code: d.last_status_code,
              delivered_at: iso(d.delivered_at),
            })),
        })),
      },
      200,
    );
  });
  app.openapi(waitingRoute, async (c) => {
    const q = c.req.valid('query');
    const rows = await waitingTooLong(ctx.pool, ctx.config, q.limit);
    return c.json(
      {
        movements: rows.map((w) => ({
          movement_id: w.movement_id,
          template_key: w.template_key,
          request_state: w.request_state,
          reason: w.reason,
          node_key: w.node_key,
          waiting_since: new Date(w.since).toISOString(),
          age_seconds: Number(w.age_seconds),
          surfaced_at: new Date(w.surfaced_at).toISOString(),
        })),
      },
      200,
    );
  });
  return app;
}
