import { z, type OpenAPIHono } from '@hono/zod-openapi';
import { movementStates } from '../../machines/movement-machine.ts';

/**
 * The callbacks Ferry sends, published in the OpenAPI document's `webhooks` section: the POST a
 * receiver gets, its Standard Webhooks headers (and, while FERRY_CALLBACK_LEGACY_HEADERS is on, the
 * older ones) and its body (src/callbacks/outbox.ts, buildCallbackPayload). Signing:
 * src/callbacks/signing.ts; receivers: docs/security.md, "Signatures, rotation and the replay window".
 */

const UUID = { format: 'uuid' } as const;
const time = z.string().openapi({ format: 'date-time' });

export const CallbackMovementSchema = z
  .object({
    id: z.string().openapi(UUID),
    template_key: z.string(),
    template_version: z.number().int(),
    compiled_plan_hash: z.string(),
    intent: z.record(z.string(), z.unknown()).openapi({ description: 'The intent as the movement was created with it' }),
    request_state: z.enum(movementStates),
    approval_status: z.enum(['pending', 'approved', 'rejected']),
    current_frontier: z.array(z.string()),
    created_at: time,
    updated_at: time,
  })
  .openapi('CallbackMovement', { description: 'The movement as it is after the change the callback reports' });

export const CallbackPayloadSchema = z
  .object({
    callback_id: z
      .string()
      .openapi({ ...UUID, description: 'The callback id, also the webhook-id header: the same on every retry and redrive of this callback, so dedupe on it' }),
    event_type: z.string().openapi({
      description:
        'request_<new state, lowercased> (request_executing, request_completed, ...), frontier_advanced (a node finished), request_attention (a node needs an operator), ' +
        'or, for a destination registered with node_events, node_<new node state, lowercased> (node_ready, node_submitted, node_completed, ...)',
      example: 'request_completed',
    }),
    request_id: z.string().openapi({ ...UUID, description: 'The movement id' }),
    request_state: z.enum(movementStates),
    node_key: z.string().optional().openapi({ description: 'Present only for an event about one node' }),
    node: z
      .object({
        node_id: z.string().openapi(UUID),
        node_key: z.string(),
        from_state: z.string(),
        node_state: z.string(),
        attempt_no: z.number().int(),
        error_code: z.string().nullable(),
      })
      .optional()
      .openapi('CallbackNode', { description: 'Node callbacks (node_<state>) only: the node change reported' }),
    occurred_at: time,
    movement: CallbackMovementSchema,
  })
  .openapi('CallbackPayload');

const headers = z.object({
  'webhook-id': z.string().openapi({ ...UUID, description: 'Standard Webhooks message id: the callback id (callback_id in the body)' }),
  'webhook-timestamp': z.string().openapi({ description: 'Unix seconds of this attempt (each retry is signed anew); refuse one more than 5 minutes off', example: '1764583200' }),
  'webhook-signature': z.string().openapi({
    description:
      'Space-separated `v1,<base64 HMAC-SHA256>` over `{webhook-id}.{webhook-timestamp}.{raw body}`, one per valid secret (two during a rotation overlap); ' +
      'the key is the base64-decoded part of the `whsec_` secret. Verify with any Standard Webhooks library.',
    example: 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
  }),
  'Ferry-Signature': z.string().optional().openapi({
    description: 'Legacy (FERRY_CALLBACK_LEGACY_HEADERS, on by default for this release, then removed): `t=<attempt time>,v1=<hex HMAC-SHA256 over t.body>[,v1=...]`',
  }),
  'X-Ferry-Callback-Nonce': z.string().optional().openapi({ description: 'Legacy: not signed by Ferry-Signature; dedupe on webhook-id instead' }),
  'X-Ferry-Callback-Timestamp': z.string().optional().openapi({ description: 'Legacy v3, raw callback_url only' }),
  'X-Ferry-Callback-Signature-Version': z.string().optional().openapi({ description: 'Legacy v3, raw callback_url only: `v3`' }),
  'X-Ferry-Callback-Signature': z.string().optional().openapi({ description: 'Legacy v3, raw callback_url only' }),
});

const registered = new WeakSet<object>();

/** Adds the webhooks to the app's OpenAPI registry (once per app). */
export function registerCallbackWebhooks(app: OpenAPIHono<any, any, any>): void {
  if (registered.has(app.openAPIRegistry)) return;
  registered.add(app.openAPIRegistry);
  app.openAPIRegistry.registerWebhook({
    method: 'post',
    path: 'movementCallback',
    operationId: 'movementCallback',
    tags: ['Callbacks'],
    // Ferry is the sender: the receiver checks webhook-signature, not a bearer token.
    security: [],
    summary: 'A movement changed: the callback Ferry POSTs to its callback_url or callback destination',
    description:
      'Sent after the transition that causes it commits; one movement\'s callbacks arrive in order. Retried with the same body and webhook-id ' +
      'until a 2xx answer (a 3xx is a failure; redirects are not followed), then dead-lettered until redriven.',
    request: {
      headers,
      body: { required: true, content: { 'application/json': { schema: CallbackPayloadSchema } } },
    },
    responses: {
      200: { description: 'Any 2xx: received' },
      '4XX': { description: 'Refused (a receiver that cannot verify the signature should answer 401): retried like any failure, then dead-lettered' },
      default: { description: 'Anything else (or no answer in FERRY_CALLBACK_TIMEOUT_MS): retried later' },
    },
  });
}
