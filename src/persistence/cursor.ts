import { ValidationError } from '../errors.ts';
import { isUuid } from '../ids.ts';

/**
 * Opaque page cursors over (created_at, id). created_at travels at microsecond precision as text
 * (to_char(created_at AT TIME ZONE 'UTC', CURSOR_AT_FORMAT) in the query): a JS Date would round it
 * to milliseconds and could skip or repeat rows created within the same millisecond.
 */
export const CURSOR_AT_SQL = `to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

export { isUuid } from '../ids.ts';

/** A cursor is the page's last sort key, a tuple of values, as base64url JSON. */
export function encodeTupleCursor(parts: readonly unknown[]): string {
  return Buffer.from(JSON.stringify(parts)).toString('base64url');
}

export const invalidCursor = () => new ValidationError('cursor is not one this API returned', { field: 'cursor' });

/** The tuple a cursor holds, of the expected length; anything else is a 400 naming the field. */
export function decodeTupleCursor(cursor: string, length: number): unknown[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw invalidCursor();
  }
  if (!Array.isArray(parsed) || parsed.length !== length) throw invalidCursor();
  return parsed;
}

export function encodeCursor(at: string, id: string): string {
  return encodeTupleCursor([at, id]);
}

/** The position a cursor names; anything this API did not hand out is a 400 naming the field. */
export function decodeCursor(cursor: string): { at: string; id: string } {
  const invalid = invalidCursor;
  const [at, id] = decodeTupleCursor(cursor, 2);
  if (typeof at !== 'string' || !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/.test(at)) throw invalid();
  // Rejects impossible dates (2026-02-30) that the pattern lets through and Postgres would refuse.
  const ms = Date.parse(at);
  if (Number.isNaN(ms) || new Date(ms).toISOString() !== `${at.slice(0, 23)}Z`) throw invalid();
  if (typeof id !== 'string' || !isUuid(id)) throw invalid();
  return { at, id };
}

/**
 * One page from rows read with LIMIT limit + 1 (ordered by (created_at, id), created_at selected
 * as CURSOR_AT_SQL AS cursor_at): the first `limit` rows without cursor_at, and the cursor of the
 * next page when the extra row shows there is one.
 */
export function pageOf<R extends { cursor_at: string; id: string }>(rows: readonly R[], limit: number): { rows: Omit<R, 'cursor_at'>[]; nextCursor: string | null } {
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  const nextCursor = rows.length > limit && last ? encodeCursor(last.cursor_at, last.id) : null;
  return { rows: page.map(({ cursor_at: _c, ...row }) => row), nextCursor };
}
