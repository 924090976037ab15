import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { ChainHead } from './persistence/audit.ts';

/**
 * A signed audit checkpoint: the chain's head (sequence and hash) at a moment, signed with a key the
 * operator keeps away from the database (FERRY_AUDIT_CHECKPOINT_KEY). Kept outside the database, it
 * proves later that the chain still reaches that event unchanged: a history rewritten by someone
 * who could also recompute every hash (a database owner), or a removed tail, no longer matches it.
 *
 * File (JSON, format "ferry-audit-checkpoint/1"):
 *   { "format", "sequence": N, "hash": "sha256:...", "exported_at": ISO-8601 UTC,
 *     "key_id": "hmac-sha256:" + first 16 hex digits of SHA-256(key),
 *     "signature": lowercase hex HMAC-SHA256(key, format + "\n" + N + "\n" + hash + "\n" + exported_at) }
 */

export const CHECKPOINT_FORMAT = 'ferry-audit-checkpoint/1';

export interface AuditCheckpoint {
  format: typeof CHECKPOINT_FORMAT;
  sequence: number;
  hash: string;
  exported_at: string;
  key_id: string;
  signature: string;
}

export function checkpointKeyId(key: string): string {
  return 'hmac-sha256:' + createHash('sha256').update(key, 'utf8').digest('hex').slice(0, 16);
}

function signedText(c: Pick<AuditCheckpoint, 'sequence' | 'hash' | 'exported_at'>): string {
  return `${CHECKPOINT_FORMAT}\n${c.sequence}\n${c.hash}\n${c.exported_at}`;
}

function hmac(key: string, text: string): string {
  return createHmac('sha256', key).update(text, 'utf8').digest('hex');
}

export function signCheckpoint(head: ChainHead, key: string, at: Date): AuditCheckpoint {
  const body = { sequence: head.id, hash: head.hash, exported_at: at.toISOString() };
  return { format: CHECKPOINT_FORMAT, ...body, key_id: checkpointKeyId(key), signature: hmac(key, signedText(body)) };
}

export type CheckpointReading = { ok: true; checkpoint: AuditCheckpoint } | { ok: false; reason: string };

/** Parses a checkpoint file's text and checks its signature with `key`. */
export function readCheckpoint(text: string, key: string): CheckpointReading {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return { ok: false, reason: 'the checkpoint file is not JSON' };
  }
  const c = raw as Partial<AuditCheckpoint> | null;
  if (!c || typeof c !== 'object' || c.format !== CHECKPOINT_FORMAT) {
    return { ok: false, reason: `the checkpoint file is not a ${CHECKPOINT_FORMAT} checkpoint` };
  }
  if (
    !Number.isSafeInteger(c.sequence) ||
    (c.sequence as number) < 1 ||
    typeof c.hash !== 'string' ||
    !/^sha256:[0-9a-f]{64}$/.test(c.hash) ||
    typeof c.exported_at !== 'string' ||
    typeof c.signature !== 'string' ||
    !/^[0-9a-f]{64}$/.test(c.signature)
  ) {
    return { ok: false, reason: 'the checkpoint file is malformed (sequence, hash, exported_at or signature)' };
  }
  const checkpoint = c as AuditCheckpoint;
  if (checkpoint.key_id !== checkpointKeyId(key)) {
    return { ok: false, reason: `the checkpoint was signed with another key (${String(checkpoint.key_id)}, this key is ${checkpointKeyId(key)})` };
  }
  const expected = Buffer.from(hmac(key, signedText(checkpoint)), 'hex');
  if (!timingSafeEqual(expected, Buffer.from(checkpoint.signature, 'hex'))) {
    return { ok: false, reason: 'the checkpoint signature is wrong: the file was changed after it was signed' };
  }
  return { ok: true, checkpoint };
}
