import { createHash } from 'node:crypto';
import type { Queryable } from '../persistence/db.ts';

/**
 * The delivery job for a callback. A job names the attempt it was written for (attempts and
 * redrive_count as they were then); the worker does nothing for a job whose attempt has passed.
 */
export interface CallbackJobData {
  callbackId: string;
  attempts: number;
  redriveCount: number;
}

export interface CallbackJobRequest extends CallbackJobData {
  /** When the job becomes runnable; omitted = now. */
  startAfter?: Date;
  /**
   * Omitted for the attempt's own job (on creation, after a failed attempt, after a redrive). Extra
   * jobs for the same attempt (a wake-up when an earlier callback of the movement finished, a
   * safety-net sweep) pass a key so they do not collide with it.
   */
  extraKey?: string;
}

/** Where delivery jobs are written; enqueue runs on the caller's client, inside its transaction. */
export interface CallbackQueue {
  /** Resolves false when a job with the same id already exists (nothing was written). */
  enqueue(client: Queryable, job: CallbackJobRequest): Promise<boolean>;
}

// Fixed namespace for Ferry's callback job ids (RFC 4122 name-based ids, version 5).
const NAMESPACE = Buffer.from('6f2b0a52c41e4d7a9b3e1f60d2c8a7e5', 'hex');

/**
 * Deterministic job id: writing the same job twice (a retried transaction, two sweepers in the same
 * minute) inserts it once, because the queue ignores an id it already holds.
 */
export function callbackJobId(job: CallbackJobData & { extraKey?: string }): string {
  const name = `callback:${job.callbackId}:${job.redriveCount}:${job.attempts}${job.extraKey ? `:${job.extraKey}` : ''}`;
  const b = createHash('sha1').update(NAMESPACE).update(name).digest().subarray(0, 16);
  b[6] = (b[6] & 0x0f) | 0x50;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** Job data comes back from the queue as JSON; anything else is not ours to deliver. */
export function parseCallbackJobData(data: unknown): CallbackJobData | null {
  if (typeof data !== 'object' || data === null) return null;
  const { callbackId, attempts, redriveCount } = data as Record<string, unknown>;
  if (typeof callbackId !== 'string') return null;
  if (!Number.isInteger(attempts) || !Number.isInteger(redriveCount)) return null;
  return { callbackId, attempts: attempts as number, redriveCount: redriveCount as number };
}
