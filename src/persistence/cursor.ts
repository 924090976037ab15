import { ValidationError } from '../errors.ts';
import { isUuid } from '../ids.ts';

/**
 * Opaque page cursors over (created_at, id). created_at travels at microsecond precision as text
 * (to_char(created_at AT TIME ZONE 'UTC', CURSOR_AT_FORMAT) in the query): a JS Date would round it
 * to milliseconds and could skip or repeat rows created within the same millisecond.
 */
export const CURSOR_AT_SQL = `to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

export { isUuid } from '../ids.ts';

export function encodeCursor(at: string, id: string): string {
  return Buffer.from(JSON.stringify([at, id])).toString('base64url');
}

/** The position a cursor names; anything this API did not hand out is a 400 naming the field. */
export function decodeCursor(cursor: string): { at: string; id: string } {
  const invalid = () => new ValidationError('cursor is not one this API returned', { field: 'cursor' });
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw invalid();
  }
  if (!Array.isArray(parsed) || parsed.length !== 2) throw invalid();
  const [at, id] = parsed;
  if (typeof at !== 'string' || !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/.test(at)) throw invalid();
  // Rejects impossible dates (2026-02-30) that the pattern lets through and Postgres would refuse.
  const ms = Date.parse(at);
  if (Number.isNaN(ms) || new Date(ms).toISOString() !== `${at.slice(0, 23)}Z`) throw invalid();
  if (typeof id !== 'string' || !isUuid(id)) throw invalid();
  return { at, id };
}
