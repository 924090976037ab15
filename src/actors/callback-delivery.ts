import type { Job, PgBoss } from 'pg-boss';
import { request } from 'undici';
import { deliveryErrorClass, literalRefusal, type DestinationPolicy } from '../callbacks/destinations.ts';
import { callbackJobId, parseCallbackJobData, type CallbackQueue } from '../callbacks/jobs.ts';
import { deliveryHeaders } from '../callbacks/signing.ts';
import { recordAttemptOutcome, recordStrandedRequeues, type AttemptResult } from '../callbacks/lifecycle.ts';
import { secretsForDelivery } from '../persistence/callback-destinations.ts';
import { log as rootLog, type Logger } from '../log.ts';
import { callbackDeliveriesTotal } from '../metrics.ts';
import {
  claimCallback,
  listStrandedCallbacks,
  nextPendingCallback,
  type AttemptRef,
  type CallbackRow,
} from '../persistence/callbacks.ts';
import { transactionNow, withTransaction, type Pool, type Queryable } from '../persistence/db.ts';
import { QUEUES, passingWakeUps, registerQueueWorkers, unregisterQueueWorkers, wakeQueueAt } from './boss.ts';
import { runBudget } from '../run-budget.ts';

/**
 * Callback delivery. Each pg-boss job on ferry-callbacks asks for one delivery attempt:
 *
 *   1. claim: one autocommitted UPDATE takes a lease on the outbox row (lease token + expiry). It
 *      succeeds only for a pending row, for the attempt the job was written for, with no live lease
 *      and no older pending callback of the same request (callbacks reach a receiver in order);
 *   2. POST the stored body, signed, with no transaction open and no row lock held;
 *   3. in one transaction: record the outcome (only if our lease token is still on the row; the
 *      callback machine decides the row's next status, attempts and schedule, see
 *      src/callbacks/lifecycle.ts), and write the follow-up job: the next attempt after a failure,
 *      or, once the row is final, the next pending callback of the same request.
 *
 * Why a lease and not "the pg-boss job is the only claimant": a callback can legitimately have more
 * than one job for the same attempt (the sweep's safety-net job, a wake-up from an earlier callback,
 * a pg-boss retry after a crash), and a redrive starts a new attempt while an old job may still run.
 * The lease makes the row itself the single source of who may send, whatever the jobs do; it expires
 * on its own (timeout + 30 s), so a worker dying mid-call only delays the callback.
 */

export type DeliveryOutcome = 'sent' | 'retry' | 'dlq' | 'skipped';

export interface CallbackDeliveryDeps {
  pool: Pool;
  secret: string;
  timeoutMs: number;
  /** Where follow-up jobs go. Without it, follow-ups are left to the stranded-callback sweep. */
  queue?: CallbackQueue;
  log?: Logger;
  /** Which addresses callbacks may reach; its dispatcher sends them (see src/callbacks/destinations.ts). */
  destinations: DestinationPolicy;
  /** Also send the legacy signature headers (FERRY_CALLBACK_LEGACY_HEADERS). Default true. */
  legacyHeaders?: boolean;
}

/** Adds callback delivery jobs through pg-boss, on the caller's client (inside its transaction). */
export function createCallbackQueue(boss: PgBoss): CallbackQueue {
  return {
    async enqueue(client: Queryable, job) {
      const id = callbackJobId(job);
      const data = { callbackId: job.callbackId, attempts: job.attempts, redriveCount: job.redriveCount };
      const sent = await boss.send(QUEUES.callbacks, data, {
        id,
        ...(job.startAfter ? { startAfter: job.startAfter } : {}),
        db: { executeSql: (text: string, values?: unknown[]) => client.query(text, values as unknown[]) },
      });
      // A retry due later is not announced when it falls due: this process wakes its workers then.
      if (sent !== null && job.startAfter) wakeQueueAt(boss, QUEUES.callbacks, new Date(job.startAfter));
      return sent !== null;
    },
  };
}

/** A delivery's lease outlasts its HTTP timeout by this much, so a slow success is not taken twice. */
const LEASE_MARGIN_SECONDS = 30;

function leaseSeconds(timeoutMs: number): number {
  return Math.ceil(timeoutMs / 1000) + LEASE_MARGIN_SECONDS;
}

type PostResult = AttemptResult;

/**
 * The signature headers of one attempt (src/callbacks/signing.ts): Standard Webhooks headers signed
 * with the destination's secrets (two during a rotation's overlap), or the instance secret for a raw
 * callback_url; with legacyHeaders, also Ferry-Signature and the nonce (and, for a raw callback_url,
 * the v3 headers). A disabled destination is not sent to: a failure that is not retriable.
 */
async function signedHeaders(
  row: CallbackRow,
  body: Buffer,
  deps: CallbackDeliveryDeps,
): Promise<{ headers: Record<string, string> } | { refused: string }> {
  const signing = { callbackId: row.id, body, attemptTime: Math.floor(Date.now() / 1000), legacy: deps.legacyHeaders ?? true, nonce: row.callback_nonce };
  if (!row.destination_id) {
    return { headers: deliveryHeaders({ ...signing, secrets: [deps.secret], v3: { secret: deps.secret, timestamp: row.callback_timestamp } }) };
  }
  const target = await secretsForDelivery(deps.pool, row.destination_id);
  if (!target || target.status !== 'active') return { refused: 'destination_disabled' };
  if (target.secrets.length === 0) return { refused: 'destination_without_secret' };
  return { headers: deliveryHeaders({ ...signing, secrets: target.secrets }) };
}

async function post(row: CallbackRow, deps: CallbackDeliveryDeps): Promise<PostResult> {
  const body = Buffer.from(row.payload_body, 'utf8');
  const signed = await signedHeaders(row, body, deps);
  if ('refused' in signed) return { ok: false, statusCode: null, error: signed.refused, retriable: false };
  const blocked = literalRefusal(deps.destinations, new URL(row.callback_url));
  if (blocked) return { ok: false, statusCode: null, error: `destination_blocked (${blocked})`, retriable: true };
  try {
    // undici's request() never follows redirects: a 3xx is a failed attempt, like any non-2xx.
    const res = await request(row.callback_url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'user-agent': 'ferry-callbacks',
        ...signed.headers,
      },
      body,
      signal: AbortSignal.timeout(deps.timeoutMs),
      headersTimeout: deps.timeoutMs,
      bodyTimeout: deps.timeoutMs,
      dispatcher: deps.destinations.dispatcher,
    });
    // The response body is not used; drain it (bounded) so the connection can be reused.
    await res.body.dump({ limit: 64 * 1024 }).catch(() => {});
    if (res.statusCode >= 200 && res.statusCode < 300) return { ok: true, statusCode: res.statusCode };
    return { ok: false, statusCode: res.statusCode, error: `HTTP ${res.statusCode}`, retriable: true };
  } catch (err) {
    const cls = deliveryErrorClass(err);
    return { ok: false, statusCode: null, error: cls === 'timeout' ? `timeout after ${deps.timeoutMs} ms` : cls, retriable: true };
  }
}

/**
 * One delivery attempt for one callback. `expect` names the attempt a job was written for; without
 * it the current attempt is delivered now, whatever its schedule (tests, operator tools).
 */
export async function deliverCallbackOnce(
  deps: CallbackDeliveryDeps,
  callbackId: string,
  expect?: AttemptRef,
): Promise<DeliveryOutcome> {
  const outcome = await attemptDelivery(deps, callbackId, expect);
  callbackDeliveriesTotal.inc({ outcome });
  return outcome;
}

async function attemptDelivery(deps: CallbackDeliveryDeps, callbackId: string, expect?: AttemptRef): Promise<DeliveryOutcome> {
  const log = (deps.log ?? rootLog).child({ component: 'callback-delivery', worker: 'callback_delivery', callback_id: callbackId });
  const claim = await claimCallback(deps.pool, callbackId, { leaseSeconds: leaseSeconds(deps.timeoutMs), expect });
  if (!claim.row) {
    log.debug({ reason: claim.skipped }, 'callback delivery skipped');
    return 'skipped';
  }
  const claimed = claim.row;
  const result = await post(claimed, deps);

  return withTransaction(deps.pool, async (client) => {
    // Locks the row for this short transaction; the HTTP call is over.
    const row = await recordAttemptOutcome(client, claimed.id, claimed.lease_token as string, result);
    if (!row) {
      // The lease ran out and another worker took the row: its outcome is the one that counts.
      log.warn({ result }, 'callback lease lost before the outcome was recorded');
      return 'skipped';
    }
    const ctx = { movement_id: row.request_id, event_type: row.event_type, attempts: row.attempts, status: row.status };
    if (row.status === 'pending') {
      await deps.queue?.enqueue(client, {
        callbackId: row.id,
        attempts: row.attempts,
        redriveCount: row.redrive_count,
        startAfter: row.next_attempt_at,
      });
      log.info({ ...ctx, error: row.last_error, next_attempt_at: row.next_attempt_at }, 'callback attempt failed; retry scheduled');
      return 'retry';
    }
    await wakeNextOfMovement(client, row, deps.queue);
    if (row.status === 'sent') {
      log.info({ ...ctx, status_code: row.last_status_code }, 'callback sent');
      return 'sent';
    }
    log.warn({ ...ctx, error: row.last_error }, 'callback moved to dlq after its last attempt');
    return 'dlq';
  });
}

/** The finished callback was holding back the next one of its request (if any); give it its turn. */
async function wakeNextOfMovement(client: Queryable, finished: CallbackRow, queue?: CallbackQueue): Promise<void> {
  if (!queue) return;
  const next = await nextPendingCallback(client, finished.request_id);
  if (!next) return;
  await queue.enqueue(client, {
    callbackId: next.id,
    attempts: next.attempts,
    redriveCount: next.redrive_count,
    startAfter: next.next_attempt_at,
    extraKey: `after:${finished.id}:${finished.redrive_count}`,
  });
}

/**
 * Safety net: writes a job for every pending callback whose turn it is and that is overdue by more
 * than overdueSeconds (its job was lost, failed for good, or was never written). Harmless when the
 * job was merely late: the extra job finds the attempt done or leased and does nothing.
 * Returns how many jobs were written.
 */
export async function requeueStrandedCallbacks(
  pool: Pool,
  queue: CallbackQueue,
  opts: { overdueSeconds?: number; limit?: number } = {},
): Promise<number> {
  return (await sweepStrandedCallbacks(pool, queue, opts)).written;
}

export interface StrandedSweepReport {
  written: number;
  budgetExhausted: boolean;
}

/**
 * The stranded-callback sweep with its run budget: at most `limit` rows, and no new row once
 * maxRunMs (0 = unlimited, measured on `now`) has passed. Each row it writes a job for is marked,
 * so the next run goes on with the rows this one did not reach.
 */
export async function sweepStrandedCallbacks(
  pool: Pool,
  queue: CallbackQueue,
  opts: { overdueSeconds?: number; limit?: number; maxRunMs?: number; now?: () => number } = {},
): Promise<StrandedSweepReport> {
  const limit = opts.limit ?? 500;
  const budget = runBudget(opts.maxRunMs ?? 0, opts.now);
  return withTransaction(pool, async (client) => {
    const stranded = await listStrandedCallbacks(client, { overdueSeconds: opts.overdueSeconds ?? 60, limit });
    // One id per callback, attempt and minute: two sweepers in the same minute write one job.
    const minute = Math.floor(Date.now() / 60_000);
    const report: StrandedSweepReport = { written: 0, budgetExhausted: stranded.length >= limit };
    const requeued: CallbackRow[] = [];
    for (const row of stranded) {
      if (budget.spent()) {
        report.budgetExhausted = true;
        break;
      }
      const added = await queue.enqueue(client, {
        callbackId: row.id,
        attempts: row.attempts,
        redriveCount: row.redrive_count,
        extraKey: `sweep:${minute}`,
      });
      requeued.push(row);
      if (added) report.written++;
    }
    // Each row the sweep reached is marked (STRANDED_REQUEUED), so the next run goes on with the others.
    await recordStrandedRequeues(client, requeued, (await transactionNow(client)).toISOString());
    return report;
  });
}

export interface StartCallbackDeliveryOptions {
  boss: PgBoss;
  pool: Pool;
  secret: string;
  timeoutMs: number;
  log?: Logger;
  /** Deliveries in flight at once in this process (FERRY_CALLBACK_BATCH_SIZE). Default 5. */
  concurrency?: number;
  /**
   * How often an idle worker polls for jobs (FERRY_CALLBACK_DISPATCH_INTERVAL_SECONDS): the backstop,
   * since a new job's NOTIFY wakes a worker (src/actors/boss.ts). Default 30 s (pg-boss minimum 0.5 s).
   */
  pollingIntervalSeconds?: number;
  destinations: DestinationPolicy;
  /** Also send the legacy signature headers (FERRY_CALLBACK_LEGACY_HEADERS). Default true. */
  legacyHeaders?: boolean;
  /** Called after each delivery attempt with the error it threw (null when none): the worker roster. */
  onRun?: (error: unknown) => void;
}

export interface CallbackDelivery {
  queue: CallbackQueue;
  /** Stops taking new jobs and waits for in-flight deliveries to finish. */
  stop(): Promise<void>;
}

/**
 * Registers the delivery worker on this process's pg-boss. The stranded-callback safety net is a
 * sweep of its own (callback_stranded_sweep in src/sweeps/sweeps.ts).
 */
export async function startCallbackDelivery(opts: StartCallbackDeliveryOptions): Promise<CallbackDelivery> {
  const log = (opts.log ?? rootLog).child({ component: 'callback-delivery' });
  const queue = createCallbackQueue(opts.boss);
  const deps: CallbackDeliveryDeps = {
    pool: opts.pool,
    secret: opts.secret,
    timeoutMs: opts.timeoutMs,
    queue,
    log: opts.log ?? rootLog,
    destinations: opts.destinations,
    legacyHeaders: opts.legacyHeaders,
  };

  const workId = await opts.boss.work(
    QUEUES.callbacks,
    {
      batchSize: 1,
      localConcurrency: opts.concurrency ?? 5,
      pollingIntervalSeconds: opts.pollingIntervalSeconds ?? 30,
    },
    // The job's NOTIFY woke one worker; it wakes the next (src/actors/boss.ts, "Waking").
    passingWakeUps(opts.boss, QUEUES.callbacks, async (jobs: Job<unknown>[]) => {
      for (const job of jobs) {
        const data = parseCallbackJobData(job.data);
        if (!data) {
          log.error({ job_id: job.id, data: job.data }, 'malformed callback job ignored');
          continue;
        }
        // A throw (database unreachable) fails the job; pg-boss retries it with backoff.
        try {
          await deliverCallbackOnce(deps, data.callbackId, data);
          opts.onRun?.(null);
        } catch (err) {
          opts.onRun?.(err);
          throw err;
        }
      }
    }),
  );

  registerQueueWorkers(opts.boss, QUEUES.callbacks, workId);

  return {
    queue,
    async stop() {
      unregisterQueueWorkers(opts.boss, QUEUES.callbacks);
      await opts.boss.offWork(QUEUES.callbacks);
    },
  };
}
