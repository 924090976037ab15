import { z } from '@hono/zod-openapi';

/**
 * An integer in a query string or path: plain decimal digits only. `Number()` would also take
 * `0x10`, `1e1`, `+5`, `5.0` and ` 5`, each of which is a client bug worth a 400 rather than a guess.
 */
export function decimalInteger(min: number, max: number) {
  return z
    .string()
    .regex(/^[0-9]{1,10}$/, 'must be a plain decimal integer')
    .transform(Number)
    .pipe(z.number().int().min(min).max(max))
    .openapi({ type: 'integer', minimum: min, maximum: max });
}

/** The page size of every list route (/v3 and /inspect): 1..max, `def` when absent. */
export function pageLimit(max: number, def: number) {
  return decimalInteger(1, max).default(def).openapi({ description: `Page size, 1..${max}` });
}

/**
 * The page position of every list route: the opaque `next_cursor` of the previous page, passed back
 * as `cursor` (made and read by src/persistence/cursor.ts; one it did not make is a 400 naming it).
 */
export const pageCursor = z
  .string()
  .min(1)
  .max(512)
  .optional()
  .openapi({ description: "Opaque cursor from the previous page's next_cursor" });
