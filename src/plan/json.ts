import { z } from 'zod';

export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

/** Deep enough for any real config or intent, shallow enough that recursion over it is safe. */
export const MAX_JSON_DEPTH = 32;

/**
 * True when value is plain JSON (finite numbers, no undefined, functions or class instances) nested
 * at most maxDepth levels. Iterative on purpose: a hostile, deeply nested body must be refused, not
 * overflow the stack of whoever walks it first.
 */
export function isBoundedJson(value: unknown, maxDepth = MAX_JSON_DEPTH): value is JsonValue {
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length > 0) {
    const [item, depth] = stack.pop()!;
    if (item === null || typeof item === 'string' || typeof item === 'boolean') continue;
    if (typeof item === 'number') {
      if (!Number.isFinite(item)) return false;
      continue;
    }
    if (typeof item !== 'object' || depth >= maxDepth) return false;
    if (Array.isArray(item)) {
      for (const child of item) stack.push([child, depth + 1]);
      continue;
    }
    const proto = Object.getPrototypeOf(item);
    if (proto !== Object.prototype && proto !== null) return false;
    for (const child of Object.values(item)) stack.push([child, depth + 1]);
  }
  return true;
}

export const jsonValueSchema = z.custom<JsonValue>((v) => isBoundedJson(v), {
  message: `must be a JSON value nested at most ${MAX_JSON_DEPTH} levels deep`,
});

export const jsonObjectSchema = z.record(z.string().max(200), jsonValueSchema);
