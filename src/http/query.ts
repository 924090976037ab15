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
