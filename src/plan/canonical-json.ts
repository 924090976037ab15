import { createHash } from 'node:crypto';

/**
 * Canonical JSON, the JSON Canonicalization Scheme of RFC 8785 (JCS): object keys sorted by UTF-16
 * code unit (never by locale, so every process and machine agrees), no whitespace, arrays in their
 * given order, numbers in ECMAScript's shortest form (JSON.stringify: 1e+21, 1e-7, -0 as 0), strings
 * escaped as JSON.stringify does (only `"`, `\\` and control characters; \b \f \n \r \t, else
 * \u00xx). Hashes of plans are taken over these bytes, so two structurally equal values always hash
 * the same whatever order their keys arrived in. Checked against the `canonicalize` package and the
 * RFC's examples in test/plan-canonical.test.ts.
 *
 * A string (value or key) with a lone surrogate is refused, as RFC 8785 (section 3.2.2.2) requires:
 * it has no UTF-8 form, so no two implementations would hash it alike.
 *
 * Only JSON values are accepted. Values JSON.stringify would silently drop or change (undefined as a
 * top-level value, functions, symbols, bigint, NaN, Infinity) throw instead: a hash over a value that
 * does not survive a round trip through the database would not be reproducible. An undefined object
 * property is omitted, as it would be after storing and reading back the object.
 */
export function canonicalJson(value: unknown): string {
  return encode(value, '$', 0);
}

/** Recursion bound: anything deeper is refused rather than risking the stack. */
const MAX_DEPTH = 100;

/** "sha256:" + lowercase hex SHA-256 of the canonical JSON bytes (UTF-8). */
export function sha256Tagged(value: unknown): string {
  return 'sha256:' + createHash('sha256').update(canonicalJson(value), 'utf8').digest('hex');
}

export class NotJsonError extends TypeError {
  constructor(
    readonly path: string,
    what: string,
  ) {
    super(`${path} is ${what}, which has no canonical JSON form`);
    this.name = 'NotJsonError';
  }
}

/** Orders strings by UTF-16 code unit: the same result in every locale and process. */
export function compareCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** A high surrogate not followed by a low one, or a low one not preceded by a high one. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function jsonString(s: string, path: string): string {
  if (LONE_SURROGATE.test(s)) throw new NotJsonError(path, 'a string with a lone surrogate (not Unicode text)');
  return JSON.stringify(s);
}

function encode(value: unknown, path: string, depth: number): string {
  if (value === null) return 'null';
  if (depth > MAX_DEPTH) throw new NotJsonError(path, `nested more than ${MAX_DEPTH} levels deep`);
  switch (typeof value) {
    case 'string':
      return jsonString(value, path);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      if (!Number.isFinite(value)) throw new NotJsonError(path, String(value));
      return JSON.stringify(value);
    case 'object':
      break;
    default:
      throw new NotJsonError(path, `a ${typeof value}`);
  }
  if (Array.isArray(value)) {
    return '[' + value.map((item, i) => (item === undefined ? 'null' : encode(item, `${path}[${i}]`, depth + 1))).join(',') + ']';
  }
  const withToJson = value as { toJSON?: () => unknown };
  if (typeof withToJson.toJSON === 'function') return encode(withToJson.toJSON(), path, depth + 1);
  const record = value as Record<string, unknown>;
  const parts: string[] = [];
  for (const key of Object.keys(record).sort(compareCodeUnits)) {
    const item = record[key];
    if (item === undefined) continue;
    parts.push(jsonString(key, `${path} (a key)`) + ':' + encode(item, `${path}.${key}`, depth + 1));
  }
  return '{' + parts.join(',') + '}';
}
