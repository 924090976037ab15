import type { Job, PgBoss } from 'pg-boss';
import { z } from 'zod';
import type { FerryConfig } from '../config.ts';
import { FerryError, type ErrorCode } from '../errors.ts';
import { log as rootLog, type Logger } from '../log.ts';
import { movementQueueMessagesTotal } from '../metrics.ts';
import { writeAudit } from '../persistence/audit.ts';
import { principalActor } from '../persistence/principals.ts';
import { ensureQueue, passingWakeUps, registerQueueWorkers, unregisterQueueWorkers, type QueueDefinition } from '../actors/boss.ts';
import { createInputOf, createMovement, type MovementServiceDeps } from '../services/movements.ts';
import { unauthenticatedOrder, verifyMovementOrder } from '../services/queue-credentials.ts';

/**
 * Queue-fed movements: other systems place movement requests on a pg-boss queue instead of calling
 * the API. The consumer creates each one exactly as `POST /v3/movements` does (same validation,
 * idempotency, four-eyes and audit, through the movement service); what differs is how failures are
 * answered, since nobody waits for a response:
 *
 * - a message that can never succeed (it does not parse, is not signed by a queue credential of
 *   the principal it names, was signed too long before it was queued, names an unknown template,
 *   its intent does not match the template's intent schema or a node's token, the key was used for
 *   another body) is copied to the dead-letter queue with its reason, and its job completes:
 *   retrying would change nothing. A refused signature or age is audited too;
 * - anything else (the database is unreachable, the runtime is stopping) fails the job, and pg-boss
 *   retries it with backoff, then dead-letters it after `retryLimit` attempts.
 *
 * Who asks is proven, not named: an order is signed with the Ed25519 key of a queue credential
 * bound to one principal (src/services/queue-credentials.ts), over its canonical JSON, and carries
 * when it was signed (`issued_at`). Its age is taken against the job's creation, not the time it is
 * consumed, so pg-boss's own retries of a job stay valid while a copy queued later does not; within
 * the window a copy carries the same idempotency key and returns the first movement.
 *
 * Delivery is at least once: a consumer that dies after the movement committed and before the job
 * completed runs the message again, and the idempotency key (required here) returns the movement
 * the first run created.
 */

export const MOVEMENT_QUEUE = 'ferry-movement-requests';
export const MOVEMENT_QUEUE_DLQ = 'ferry-movement-requests-dlq';

const printable = (max: number) => z.string().min(1).max(max).regex(/^[\x20-\x7e]+$/, 'printable ASCII');

/** One message: the body of POST /v3/movements, plus who asks and the idempotency key. */
export const MovementRequestMessage = z.strictObject({
  template_key: z.string().min(1).max(128),
  template_version: z.number().int().min(1).max(2_147_483_647).optional(),
  intent: z.record(z.string(), z.unknown()),
  input_params: z.record(z.string(), z.unknown()).optional(),
  callback_url: z.string().min(1).max(2048).optional(),
  /** A registered callback destination (name or id), instead of callback_url. */
  callback_destination: z.string().min(1).max(100).optional(),
  /** Required: the queue delivers at least once, and this makes a repeat return the first movement. */
  idempotency_key: printable(200),
  /** The name of the principal who asks: the movement's requester. It must be the signing credential's. */
  requested_by: z.string().min(1).max(64),
  /** When the order was signed; it must be queued within FERRY_QUEUE_ORDER_MAX_AGE_SECONDS. */
  issued_at: z.iso.datetime({ offset: true }),
  /** The queue credential whose key signed it. */
  credential_id: z.uuid(),
  /** Ed25519 over "ferry.movement-order.v1\n" + the canonical JSON of every other field, base64url. */
  signature: z.string().min(1).max(200),
});
export type MovementRequestMessage = z.infer<typeof MovementRequestMessage>;

/** Codes that mean the message itself is wrong; any other failure is worth a retry. */
const PERMANENT: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'VALIDATION_FAILED',
  'BAD_REQUEST',
  'INVALID_TEMPLATE',
  'INTENT_INVALID',
  'INEXACT_NUMBER',
  'NOT_FOUND',
  'FORBIDDEN',
  'IDEMPOTENCY_KEY_REUSED',
  'CALLBACK_HOST_NOT_ALLOWED',
  'CALLBACK_ADDRESS_NOT_ALLOWED',
  'CALLBACK_DESTINATION_UNKNOWN',
  'CALLBACK_DESTINATION_DISABLED',
  'QUEUE_ORDER_UNAUTHENTICATED',
  'QUEUE_ORDER_EXPIRED',
]);

/** Refusals that say who may not act: audited, since someone wrote an order in another's name. */
const AUDITED: ReadonlySet<ErrorCode> = new Set<ErrorCode>(['QUEUE_ORDER_UNAUTHENTICATED', 'QUEUE_ORDER_EXPIRED']);
const CONSUMER = 'worker:movement_queue';
// An order may be signed a little after its job was created (the signer's clock ahead of the database's).
const CLOCK_SKEW_MS = 60_000;

export type MovementQueueDeps = MovementServiceDeps & {
  config: MovementServiceDeps['config'] & Partial<Pick<FerryConfig, 'queueOrderMaxAgeSeconds'>>;
};

/** Whether an order signed at `issuedAt` may have been queued at `queuedAt`; a QUEUE_ORDER_EXPIRED otherwise. */
function assertFresh(issuedAt: string, queuedAt: Date, maxAgeSeconds: number): void {
  const age = queuedAt.getTime() - Date.parse(issuedAt);
  if (age > maxAgeSeconds * 1000 || age < -CLOCK_SKEW_MS) {
    throw new FerryError('QUEUE_ORDER_EXPIRED', `the movement order was signed at ${issuedAt}, outside the ${maxAgeSeconds} s window before it was queued`, {
      issued_at: issuedAt,
      queued_at: queuedAt.toISOString(),
      max_age_seconds: maxAgeSeconds,
    });
  }
}

export const movementQueueDefinitions: ReadonlyArray<[string, QueueDefinition]> = [
  [MOVEMENT_QUEUE_DLQ, { policy: 'standard', deleteAfterSeconds: 30 * 86_400 }],
  [
    MOVEMENT_QUEUE,
    {
      policy: 'standard',
      // A message placed through pg-boss wakes a consumer at once (src/actors/boss.ts, "Waking").
      notify: true,
      retryLimit: 10,
      retryDelay: 2,
      retryBackoff: true,
      retryDelayMax: 300,
      expireInSeconds: 120,
      deleteAfterSeconds: 7 * 86_400,
      deadLetter: MOVEMENT_QUEUE_DLQ,
    },
  ],
];

export async function ensureMovementQueues(boss: PgBoss): Promise<void> {
  for (const [name, def] of movementQueueDefinitions) await ensureQueue(boss, name, def);
}

export type QueueOutcome =
  | { outcome: 'created' | 'replayed'; movement_id: string }
  | { outcome: 'dead_lettered'; reason: { code: string; message: string; details?: Record<string, unknown> } };

/**
 * Handles one message. Returns what happened (stored as the job's output) or throws for a failure
 * worth retrying.
 */
export async function consumeMovementRequest(
  deps: MovementQueueDeps,
  boss: PgBoss,
  job: Pick<Job<unknown>, 'id' | 'data'> & { createdOn?: Date },
): Promise<QueueOutcome> {
  try {
    // An order without its signature is refused as unauthenticated, whatever else is wrong with it.
    const data = job.data;
    if (data !== null && typeof data === 'object' && !Array.isArray(data)) {
      const fields = data as Record<string, unknown>;
      if (typeof fields.signature !== 'string' || typeof fields.credential_id !== 'string') throw unauthenticatedOrder('unsigned', fields);
    }
    const message = MovementRequestMessage.safeParse(data);
    if (!message.success) {
      const issue = message.error.issues[0]!;
      throw new FerryError('VALIDATION_FAILED', `${issue.path.join('.') || 'message'}: ${issue.message}`, { issues: message.error.issues.length });
    }
    // The signature over exactly what arrived (job.data, not the parsed copy), then its age.
    const m = message.data;
    const signer = await verifyMovementOrder(deps.pool, job.data as typeof m);
    assertFresh(m.issued_at, job.createdOn ? new Date(job.createdOn) : new Date(), deps.config.queueOrderMaxAgeSeconds ?? 300);
    // The movement is the signing credential's principal's, exactly as if it had called the API.
    const created = await createMovement(deps, createInputOf(m, principalActor(signer.principalId), m.idempotency_key));
    const outcome = created.replayed ? 'replayed' : 'created';
    movementQueueMessagesTotal.inc({ outcome });
    return { outcome, movement_id: created.movement.id };
  } catch (err) {
    if (!(err instanceof FerryError) || !PERMANENT.has(err.code)) {
      movementQueueMessagesTotal.inc({ outcome: 'retried' });
      throw err;
    }
    const reason = { code: err.code, message: err.message, details: err.details };
    if (AUDITED.has(err.code)) {
      await writeAudit(deps.pool, { actor: CONSUMER, action: 'movement_queue.order_refused', entity_type: 'queue_job', entity_id: job.id, details: reason });
    }
    await boss.send(MOVEMENT_QUEUE_DLQ, { message: job.data, reason, source_job_id: job.id });
    movementQueueMessagesTotal.inc({ outcome: 'dead_lettered' });
    return { outcome: 'dead_lettered', reason };
  }
}

export interface MovementQueueConsumer {
  stop(): Promise<void>;
}

export async function startMovementQueue(opts: {
  boss: PgBoss;
  deps: () => MovementQueueDeps;
  concurrency: number;
  /** The backstop poll (FERRY_MOVEMENT_QUEUE_POLL_SECONDS); a message's NOTIFY wakes a consumer. Default 30 s. */
  pollingIntervalSeconds?: number;
  log?: Logger;
}): Promise<MovementQueueConsumer> {
  const log = (opts.log ?? rootLog).child({ component: 'movement-queue', worker: 'movement_queue' });
  await ensureMovementQueues(opts.boss);
  const workId = await opts.boss.work(
    MOVEMENT_QUEUE,
    // With metadata: the job's createdOn is what an order's age is measured against.
    { batchSize: 1, localConcurrency: opts.concurrency, pollingIntervalSeconds: opts.pollingIntervalSeconds ?? 30, includeMetadata: true },
    // A message's NOTIFY woke one consumer; it wakes the next (src/actors/boss.ts, "Waking").
    passingWakeUps(opts.boss, MOVEMENT_QUEUE, async ([job]: Job<unknown>[]) => {
      const result = await consumeMovementRequest(opts.deps(), opts.boss, job!).catch((err: unknown) => {
        log.warn({ job_id: job!.id, err }, 'movement request failed; pg-boss retries it');
        throw err;
      });
      if (result.outcome === 'dead_lettered') log.warn({ job_id: job!.id, reason: result.reason }, 'movement request dead-lettered');
      else log.info({ job_id: job!.id, ...result }, 'movement request taken from the queue');
      return result;
    }),
  );
  registerQueueWorkers(opts.boss, MOVEMENT_QUEUE, workId);
  return {
    stop: () => {
      unregisterQueueWorkers(opts.boss, MOVEMENT_QUEUE);
      return opts.boss.offWork(MOVEMENT_QUEUE);
    },
  };
}

/** Places one message on the queue (the `ferry queue send` command, other systems' clients). */
export async function sendMovementRequest(boss: PgBoss, message: MovementRequestMessage): Promise<string> {
  const parsed = MovementRequestMessage.parse(message);
  await ensureMovementQueues(boss);
  const id = await boss.send(MOVEMENT_QUEUE, parsed);
  if (!id) throw new FerryError('SERVICE_UNAVAILABLE', 'the movement queue did not accept the message');
  return id;
}
