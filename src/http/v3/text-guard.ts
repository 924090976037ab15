import type { Context } from 'hono';
import { createMiddleware } from 'hono/factory';
import { FerryError } from '../../errors.ts';
import { inexactNumbers } from '../../plan/exact-json.ts';
import { validationError, type ValidationIssue, type ValidationTarget } from '../errors.ts';

/**
 * PostgreSQL cannot store every string JSON can carry: text and jsonb refuse NUL (U+0000), and jsonb
 * refuses an unpaired UTF-16 surrogate ("\ud800"). Such input would otherwise reach the database and
 * fail there as a 500, after other work in the transaction. This guard refuses it up front as 400
 * VALIDATION_FAILED naming where it was, for the path, the query string and JSON bodies alike.
 *
 * It is also where every /v3 JSON body is first read as text, so it refuses numbers the parse would
 * round (422 INEXACT_NUMBER): the one place where the digits the client sent are still known.
 */

const MESSAGE = 'text must not contain NUL characters or unpaired UTF-16 surrogates';

const UNPAIRED_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

export function isStorableText(s: string): boolean {
  return !s.includes('\u0000') && !UNPAIRED_SURROGATE.test(s);
}

/** Every key and string value in a parsed JSON value that cannot be stored, by dotted path. Iterative. */
export function unstorableText(value: unknown, limit = 20): ValidationIssue[] {
  const found: ValidationIssue[] = [];
  const stack: Array<[unknown, string]> = [[value, '']];
  while (stack.length > 0 && found.length < limit) {
    const [item, path] = stack.pop()!;
    if (typeof item === 'string') {
      if (!isStorableText(item)) found.push({ path, message: MESSAGE });
    } else if (Array.isArray(item)) {
      item.forEach((child, i) => stack.push([child, path ? `${path}.${i}` : String(i)]));
    } else if (item !== null && typeof item === 'object') {
      for (const [key, child] of Object.entries(item)) {
        const at = path ? `${path}.${key}` : key;
        if (!isStorableText(key)) found.push({ path: at, message: `key: ${MESSAGE}` });
        stack.push([child, at]);
      }
    }
  }
  return found;
}

function refuse(target: ValidationTarget, issues: ValidationIssue[]): never {
  throw validationError(target, issues);
}

async function jsonBodyOf(c: Context): Promise<unknown> {
  if (!/^application\/([\w.-]+\+)?json\b/i.test(c.req.header('content-type') ?? '')) return undefined;
  const text = await c.req.text();
  if (text.trim() === '') return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    // Not JSON: the route's validator answers MALFORMED_JSON.
    return undefined;
  }
  refuseInexactNumbers(text);
  return value;
}

/**
 * Amounts are decimal strings end to end: a number JSON.parse would round (12345678901234567890,
 * 0.10000000000000000001) is refused here, where the text is still at hand, naming where it was,
 * rather than stored, shown and hashed as another number.
 */
function refuseInexactNumbers(text: string): void {
  const found = inexactNumbers(text);
  if (found.length === 0) return;
  const [first] = found;
  const field = first!.path || '(body)';
  throw new FerryError(
    'INEXACT_NUMBER',
    `${field} is the JSON number ${first!.source.slice(0, 80)}, which cannot be kept exactly (JSON numbers are doubles: at most 15-17 significant digits, whole numbers up to 2^53-1); send it as a string, e.g. "${first!.source.slice(0, 80)}"`,
    { field, rule: 'inexact_number', source: first!.source.slice(0, 200), problems: found.map((f) => ({ field: f.path || '(body)', source: f.source.slice(0, 200) })) },
  );
}

export const refuseUnstorableText = createMiddleware(async (c, next) => {
  let path: string | null = null;
  try {
    path = decodeURIComponent(c.req.path);
  } catch {
    // A malformed escape never matches a route parameter as text; routing answers it.
  }
  if (path !== null && !isStorableText(path)) refuse('param', [{ path: '', message: MESSAGE }]);

  const queryIssues: ValidationIssue[] = [];
  for (const [key, values] of Object.entries(c.req.queries())) {
    if (!isStorableText(key) || values.some((v) => !isStorableText(v))) queryIssues.push({ path: key, message: MESSAGE });
  }
  if (queryIssues.length) refuse('query', queryIssues);

  if (c.req.method !== 'GET' && c.req.method !== 'HEAD') {
    const bodyIssues = unstorableText(await jsonBodyOf(c));
    if (bodyIssues.length) refuse('json', bodyIssues);
  }
  await next();
});
