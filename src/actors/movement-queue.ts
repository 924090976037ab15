import type { Job, PgBoss } from 'pg-boss';
import { z } from 'zod';
import { FerryError, type ErrorCode } from '../errors.ts';
import { can } from '../services/permissions.ts';
import { log as rootLog, type Logger } from '../log.ts';
import { movementQueueMessagesTotal } from '../metrics.ts';
import { principalActor } from '../persistence/principals.ts';
import { activeTokenByName } from '../persistence/tokens.ts';
import { ensureQueue, type QueueDefinition } from './boss.ts';
import { createInputOf, createMovement, type MovementServiceDeps } from '../services/movements.ts';

/**
 * Queue-fed movements: other systems place movement requests on a pg-boss queue instead of calling
 * the API. The consumer creates each one exactly as `POST /v3/movements` does (same validation,
 * idempotency, four-eyes and audit, through the movement service); what differs is how failures are
 * answered, since nobody waits for a response:
 *
 * - a message that can never succeed (it does not parse, names an unknown template or principal,
 *   the principal may not create movements, its intent does not match the template's intent schema
 *   or a node's token, the key was used for another body) is copied to the
 *   dead-letter queue with its reason, and its job completes: retrying would change nothing;
 * - anything else (the database is unreachable, the runtime is stopping) fails the job, and pg-boss
 *   retries it with backoff, then dead-letters it after `retryLimit` attempts.
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
  /**
   * The name of an active API token whose role may create movements; the token's principal is the
   * movement's requester.
   */
  requested_by: z.string().min(1).max(64),
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
  'CALLBACK_DESTINATION_UNKNOWN',
  'CALLBACK_DESTINATION_DISABLED',
]);

export const movementQueueDefinitions: ReadonlyArray<[string, QueueDefinition]> = [
  [MOVEMENT_QUEUE_DLQ, { policy: 'standard', deleteAfterSeconds: 30 * 86_400 }],
  [
    MOVEMENT_QUEUE,
    {
      policy: 'standard',
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
export async function consumeMovementRequest(deps: MovementServiceDeps, boss: PgBoss, job: Pick<Job<unknown>, 'id' | 'data'>): Promise<QueueOutcome> {
  try {
    const message = MovementRequestMessage.safeParse(job.data);
    if (!message.success) {
      const issue = message.error.issues[0]!;
      throw new FerryError('VALIDATION_FAILED', `${issue.path.join('.') || 'message'}: ${issue.message}`, { issues: message.error.issues.length });
    }
    const m = message.data;
    const token = await activeTokenByName(deps.pool, m.requested_by);
    if (!token) throw new FerryError('FORBIDDEN', `requested_by ${JSON.stringify(m.requested_by)} is not an active token`);
    if (!can(token.role, 'movement.create')) {
      throw new FerryError('FORBIDDEN', `${token.name} (role ${token.role}) may not create movements`);
    }
    // The movement is the token's principal's, exactly as if that token had called the API.
    const created = await createMovement(deps, createInputOf(m, principalActor(token.principalId), m.idempotency_key));
    const outcome = created.replayed ? 'replayed' : 'created';
    movementQueueMessagesTotal.inc({ outcome });
    return { outcome, movement_id: created.request.id };
  } catch (err) {
    if (!(err instanceof FerryError) || !PERMANENT.has(err.code)) {
      movementQueueMessagesTotal.inc({ outcome: 'retried' });
      throw err;
    }
    const reason = { code: err.code, message: err.message, details: err.details };
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
  deps: () => MovementServiceDeps;
  concurrency: number;
  pollingIntervalSeconds?: number;
  log?: Logger;
}): Promise<MovementQueueConsumer> {
  const log = (opts.log ?? rootLog).child({ component: 'movement-queue', worker: 'movement_queue' });
  await ensureMovementQueues(opts.boss);
  await opts.boss.work(
    MOVEMENT_QUEUE,
    { batchSize: 1, localConcurrency: opts.concurrency, pollingIntervalSeconds: opts.pollingIntervalSeconds ?? 1 },
    async ([job]) => {
      const result = await consumeMovementRequest(opts.deps(), opts.boss, job!).catch((err: unknown) => {
        log.warn({ job_id: job!.id, err }, 'movement request failed; pg-boss retries it');
        throw err;
      });
      if (result.outcome === 'dead_lettered') log.warn({ job_id: job!.id, reason: result.reason }, 'movement request dead-lettered');
      else log.info({ job_id: job!.id, ...result }, 'movement request taken from the queue');
      return result;
    },
  );
  return { stop: () => opts.boss.offWork(MOVEMENT_QUEUE) };
}

/** Places one message on the queue (the `ferry queue send` command, other systems' clients). */
export async function sendMovementRequest(boss: PgBoss, message: MovementRequestMessage): Promise<string> {
  const parsed = MovementRequestMessage.parse(message);
  await ensureMovementQueues(boss);
  const id = await boss.send(MOVEMENT_QUEUE, parsed);
  if (!id) throw new FerryError('SERVICE_UNAVAILABLE', 'the movement queue did not accept the message');
  return id;
}
