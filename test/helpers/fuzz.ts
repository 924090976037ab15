/**
 * Malformed requests generated from the OpenAPI document: for every operation, a valid base request
 * (given by the test) and a seeded stream of mutations of it, each of which makes the request
 * invalid by construction (wrong credentials, an unknown or ill-typed field, a value outside its
 * schema, a body that is not JSON...), plus harmless header noise. The same seed gives the same
 * cases, so a failure names a case that can be replayed.
 */

import { prng } from '../../scripts/lib/prng.ts';

export { prng };

export interface JsonSchema {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  items?: JsonSchema;
  enum?: unknown[];
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  maxItems?: number;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  additionalProperties?: boolean | JsonSchema;
  $ref?: string;
}

export interface OperationDoc {
  method: string;
  /** The template, e.g. /v3/movements/{id}. */
  path: string;
  permission: string;
  params: Array<{ name: string; in: 'path' | 'query' | 'header'; schema: JsonSchema }>;
  body: JsonSchema | null;
}

/** Every operation of an OpenAPI document, with $refs of its bodies resolved. */
export function operationsOf(doc: any): OperationDoc[] {
  const resolve = (s: JsonSchema | undefined, depth = 0): JsonSchema | undefined => {
    if (!s || depth > 20) return s;
    if (s.$ref) return resolve(doc.components.schemas[s.$ref.replace('#/components/schemas/', '')], depth + 1);
    const out: JsonSchema = { ...s };
    if (s.properties) out.properties = Object.fromEntries(Object.entries(s.properties).map(([k, v]) => [k, resolve(v, depth + 1)!]));
    if (s.items) out.items = resolve(s.items, depth + 1);
    return out;
  };
  const ops: OperationDoc[] = [];
  for (const [path, item] of Object.entries<any>(doc.paths)) {
    // The service routes outside /v3 (/healthz, /readyz, /metrics) take no input.
    if (!path.startsWith('/v3/')) continue;
    for (const [method, op] of Object.entries<any>(item)) {
      ops.push({
        method: method.toUpperCase(),
        path,
        permission: op['x-ferry-permission'],
        params: (op.parameters ?? []).map((p: any) => ({ name: p.name, in: p.in, schema: resolve(p.schema) ?? {} })),
        body: resolve(op.requestBody?.content?.['application/json']?.schema) ?? null,
      });
    }
  }
  return ops;
}

/** What the test supplies per operation: values that would be accepted. */
export interface BaseRequest {
  /** Path parameter values (raw, encoded by the generator). */
  path: Record<string, string>;
  query?: Record<string, string>;
  body?: unknown;
  /**
   * True when a request that survives validation would still change nothing (the target is an
   * unknown entity or one in a final state). Operations that may change data without it get only
   * mutations that are invalid by construction, which is every mutation here anyway.
   */
  safeTarget?: boolean;
}

export interface FuzzCase {
  name: string;
  method: string;
  /** Path and query, already encoded as they go on the wire. */
  url: string;
  headers: Record<string, string>;
  body?: string;
  /** What the status must be, when the mutation decides it; otherwise any 4xx. */
  status?: number;
  code?: string;
}

export interface FuzzContext {
  /** A token of every role; the base requests use `admin`. */
  tokens: Record<string, string>;
  /** Which roles hold which permission. */
  grants: Record<string, readonly string[]>;
  revokedToken: string;
  maxBodyBytes: number;
}

type Rng = () => number;
const pick = <T>(rng: Rng, xs: readonly T[]): T => xs[Math.floor(rng() * xs.length)];
const int = (rng: Rng, lo: number, hi: number) => lo + Math.floor(rng() * (hi - lo + 1));

// Text that no Ferry pattern accepts (each has a character outside every key and id alphabet).
const HOSTILE_TEXT = [
  'ü',
  'Ω≈ç√',
  '💸',
  '\u{1F600}\u{1F600}',
  'ア',
  '\u202Eevil',
  'a b',
  '\t',
  'x\u0000y',
  '\u0000',
  '\ud800',
  '\udc00x',
  '<script>alert(1)</script>',
  "' OR '1'='1",
  '"; DROP TABLE movement_requests; --',
  '${jndi:ldap://x}',
  '../../etc/passwd',
  '%00',
  '\\',
  '{}',
  '[]',
  'null',
  '\r\n',
  '\uFEFF',
  'é'.repeat(300),
];

const NON_DECIMAL = ['x', '1.5', '-1', '0', '1e3', '0x10', '+5', ' 5', '5 ', '١٢', '99999999999999999999999', '1e400', 'NaN', 'Infinity', '-0', '00000000000000000000001', ''];

/** A value of the wrong JSON type for a schema of definite type `type`. */
function wrongType(rng: Rng, type: string): unknown {
  const byType: Record<string, unknown[]> = {
    string: [1, -1, 0, 1.5, 1e300, true, false, null, [], {}, ['a'], { a: 'b' }],
    integer: ['1', 'one', true, null, [], {}, 1.5, 1e300, -1e300, [1], { n: 1 }],
    number: ['1', true, null, [], {}, [1]],
    boolean: ['true', 1, 0, null, [], {}, 'yes'],
    object: ['x', 1, true, null, [], [{}], ''],
    array: ['x', 1, true, null, {}, { 0: 'a' }],
  };
  return pick(rng, byType[type] ?? [Symbol.for('never')]);
}

function definiteType(s: JsonSchema): string | null {
  return typeof s.type === 'string' && !s.anyOf && !s.oneOf ? s.type : null;
}

/** A value that breaks a constraint of a string, integer or enum schema, or null when there is none to break. */
function violating(rng: Rng, s: JsonSchema): { value: unknown; what: string } | null {
  const options: Array<() => { value: unknown; what: string }> = [];
  if (s.enum) options.push(() => ({ value: pick(rng, ['nope', 'Pending', '', ' ', 'ü', 'COMPLETED ', 'null']), what: 'not in the enum' }));
  if (s.type === 'string') {
    if (s.maxLength !== undefined) {
      const n = s.maxLength + int(rng, 1, Math.min(20_000, s.maxLength * 4 + 10));
      options.push(() => ({ value: pick(rng, ['x', 'é', '💸']).repeat(n), what: `longer than ${s.maxLength}` }));
    }
    if ((s.minLength ?? 0) >= 1) options.push(() => ({ value: '', what: 'empty' }));
    if (s.pattern) {
      // Only text the pattern really refuses (some hostile text is printable ASCII that a loose pattern takes).
      const re = new RegExp(s.pattern);
      const refused = HOSTILE_TEXT.filter((t) => !re.test(t));
      if (refused.length) options.push(() => ({ value: pick(rng, refused), what: 'outside the pattern' }));
    }
  }
  if (s.type === 'integer' || s.type === 'number') {
    if (s.maximum !== undefined) options.push(() => ({ value: pick(rng, [s.maximum! + 1, 2 ** 53, 1e20, 1e308]), what: 'above the maximum' }));
    if (s.minimum !== undefined) options.push(() => ({ value: pick(rng, [s.minimum! - 1, -(2 ** 53), -1e308]), what: 'below the minimum' }));
    if (s.type === 'integer') options.push(() => ({ value: pick(rng, [1.5, 0.1, 2 ** 53 + 0.5, 1e-7]), what: 'fractional' }));
  }
  return options.length ? pick(rng, options)() : null;
}

/** Every place in a body a mutation can aim at: paths into the value with their schemas. */
function targets(schema: JsonSchema, value: unknown, at: Array<string | number> = [], depth = 0): Array<{ at: Array<string | number>; schema: JsonSchema; parent: JsonSchema }> {
  const out: Array<{ at: Array<string | number>; schema: JsonSchema; parent: JsonSchema }> = [];
  if (depth > 3 || value === null || typeof value !== 'object') return out;
  if (Array.isArray(value)) {
    if (schema.items) {
      value.forEach((v, i) => {
        out.push({ at: [...at, i], schema: schema.items!, parent: schema });
        out.push(...targets(schema.items!, v, [...at, i], depth + 1));
      });
    }
    return out;
  }
  for (const [k, s] of Object.entries(schema.properties ?? {})) {
    out.push({ at: [...at, k], schema: s, parent: schema });
    const v = (value as Record<string, unknown>)[k];
    if (v !== undefined) out.push(...targets(s, v, [...at, k], depth + 1));
  }
  return out;
}

function setAt(root: unknown, at: Array<string | number>, value: unknown): unknown {
  const copy = structuredClone(root);
  let cur: any = copy;
  for (const k of at.slice(0, -1)) cur = cur[k];
  const last = at[at.length - 1];
  if (value === REMOVE) delete cur[last];
  else cur[last] = value;
  return copy;
}
const REMOVE = Symbol('remove');

/** The object at `at` (the body itself for []), which must exist and be an object, for adding a key. */
function objectAt(root: unknown, at: Array<string | number>): Record<string, unknown> | null {
  let cur: any = root;
  for (const k of at) cur = cur?.[k];
  return cur && typeof cur === 'object' && !Array.isArray(cur) ? cur : null;
}

const EXTRA_KEYS = ['surprise', '__proto__', 'constructor', 'prototype', 'toString', 'ü', '💸', '', ' ', 'a'.repeat(500), 'id', 'state', 'admin', '$where'];
const INVALID_JSON = ['{', '{"a": ', '{} x', "{'a': 1}", '[1,]', '{"a":1,}', 'NaN', 'undefined', '{"a": 01}', '{"a":"\\x"}', 'nul', '"open', '{"a" 1}', '{{}}', ']', '\u0000', '{"a":"b"', '{"\ud800":1', '//{}'];
const NOT_JSON_TYPES = ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/xml', 'application/jsonx', 'text/json', 'application/octet-stream', 'image/png', 'application/json-seq', 'text/html'];
const TOP_LEVEL = ['[]', '"s"', '1', 'true', 'false', 'null', '[{}]', '1e400', '-0', '""'];

const FAKE_TOKENS = (rng: Rng) => [
  `fy_${'A'.repeat(43)}`,
  `fy_${Array.from({ length: 43 }, () => pick(rng, [...'abcXYZ019_-'])).join('')}`,
  'letmein',
  'fy_',
  'fy_' + 'a'.repeat(4000),
  'null',
  'Bearer',
  '\u00e9\u00e8',
];

function encodePath(template: string, values: Record<string, string>, raw: Set<string>): string {
  return template.replace(/\{([^}]+)\}/g, (_, name: string) => (raw.has(name) ? values[name] : encodeText(values[name] ?? '')));
}

/** Percent-encodes text (unpaired surrogates as their raw bytes, which no decoder accepts). */
function encodeText(s: string): string {
  try {
    return encodeURIComponent(s);
  } catch {
    return s.replace(/[\ud800-\udfff]/g, '%ED%A0%80').replace(/[^A-Za-z0-9%_.~-]/g, (c) => encodeURIComponent(c));
  }
}

function queryString(q: Record<string, string>, raw: Set<string> = new Set()): string {
  const parts = Object.entries(q).map(([k, v]) => `${encodeText(k)}=${raw.has(k) ? v : encodeText(v)}`);
  return parts.length ? `?${parts.join('&')}` : '';
}

/** Header noise that must change nothing about how a request is judged. */
function noise(rng: Rng, headers: Record<string, string>): string {
  const kinds = [
    () => ((headers['x-request-id'] = pick(rng, ['', 'x'.repeat(3000), 'ü\u00ff', '../..', '\t', '{}'])), 'x-request-id'),
    () => ((headers.accept = pick(rng, ['*/*', 'text/html', 'application/xml', ';;;', 'x'.repeat(1000), 'text/event-stream'])), 'accept'),
    () => ((headers['user-agent'] = pick(rng, ['', '\u00e9\u00ff', 'x'.repeat(4000), '() { :; }; echo hi'])), 'user-agent'),
    () => ((headers['x-forwarded-for'] = pick(rng, ['127.0.0.1', '::1, 10.0.0.1', 'garbage', '1'.repeat(500)])), 'x-forwarded-for'),
    () => ((headers.cookie = pick(rng, ['ferry_dashboard=fds_x', '=;=;', 'a=' + 'b'.repeat(2000)])), 'cookie'),
    () => ((headers['accept-encoding'] = pick(rng, ['gzip', 'br;q=2', '*;q=-1'])), 'accept-encoding'),
    () => ((headers[`x-fuzz-${int(rng, 0, 99)}`] = 'v'.repeat(int(rng, 0, 4000))), 'extra header'),
  ];
  return pick(rng, kinds)();
}

/**
 * `count` cases spread over every operation, from `seed`. `base` gives each operation's valid
 * request; an operation without one throws (a new route must be added to the fuzzer's table).
 */
export function generateCases(ops: OperationDoc[], base: Record<string, BaseRequest>, ctx: FuzzContext, count: number, seed: number): FuzzCase[] {
  const rng = prng(seed);
  for (const op of ops) if (!base[`${op.method} ${op.path}`]) throw new Error(`no base request for ${op.method} ${op.path}`);
  const methodsOf = new Map<string, Set<string>>();
  for (const op of ops) methodsOf.set(op.path, (methodsOf.get(op.path) ?? new Set()).add(op.method));
  const cases: FuzzCase[] = [];
  for (let i = 0; i < count; i++) {
    const op = ops[i % ops.length];
    const b = base[`${op.method} ${op.path}`];
    const pathValues = { ...b.path };
    const rawPath = new Set<string>();
    // Without a prototype, so that a parameter named __proto__ is an own key like any other.
    const query: Record<string, string> = Object.assign(Object.create(null), b.query ?? {});
    const rawQuery = new Set<string>();
    let body: string | undefined = b.body === undefined ? undefined : JSON.stringify(b.body);
    // The caller is one that holds the permission (admin where it does, else the first role that
    // does: approving is not an admin's), so only the mutation can make the request wrong.
    const holder = ctx.grants.admin?.includes(op.permission) ? 'admin' : (Object.keys(ctx.grants).find((r) => ctx.grants[r].includes(op.permission)) ?? 'admin');
    const headers: Record<string, string> = { authorization: `Bearer ${ctx.tokens[holder]}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    let status: number | undefined;
    let code: string | undefined;
    let method = op.method;

    const pathParams = op.params.filter((p) => p.in === 'path');
    const queryParams = op.params.filter((p) => p.in === 'query');
    const lacking = Object.keys(ctx.grants).filter((r) => !ctx.grants[r].includes(op.permission));
    const families: Array<[string, () => string]> = [];
    families.push([
      'auth',
      () => {
        const how = int(rng, 0, 6);
        status = 401;
        code = 'UNAUTHENTICATED';
        if (how === 0) delete headers.authorization;
        else if (how === 1) headers.authorization = `Bearer ${ctx.revokedToken}`;
        else if (how === 2) headers.authorization = `Basic ${Buffer.from('admin:admin').toString('base64')}`;
        else if (how === 3) headers.authorization = `Bearer ${pick(rng, FAKE_TOKENS(rng))}`;
        else if (how === 4) headers.authorization = pick(rng, ['Bearer', 'Bearer ', `Bearer ${ctx.tokens.admin} extra`, `Token ${ctx.tokens.admin}`, ctx.tokens.admin, `Bearer\t${ctx.tokens.admin}x`]);
        else if (how === 5) headers.authorization = `Bearer ${ctx.tokens.admin.slice(0, -1)}${ctx.tokens.admin.endsWith('A') ? 'B' : 'A'}`;
        else headers.authorization = `Bearer ${ctx.tokens.admin.toUpperCase() === ctx.tokens.admin ? ctx.tokens.admin.toLowerCase() : ctx.tokens.admin.toUpperCase()}`;
        return `authorization ${how}`;
      },
    ]);
    const otherMethods = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'].filter((m) => !methodsOf.get(op.path)!.has(m));
    families.push([
      'method',
      () => {
        method = pick(rng, otherMethods);
        if (method === 'GET') body = undefined;
        // The path is a route's, the method is not one of its: 405 with Allow.
        status = 405;
        code = 'METHOD_NOT_ALLOWED';
        return method;
      },
    ]);
    if (lacking.length) {
      families.push([
        'role',
        () => {
          const role = pick(rng, lacking);
          headers.authorization = `Bearer ${ctx.tokens[role]}`;
          status = 403;
          code = 'FORBIDDEN';
          return role;
        },
      ]);
    }
    if (pathParams.length) {
      families.push([
        'path',
        () => {
          const p = pick(rng, pathParams);
          const s = p.schema;
          const kind = int(rng, 0, 3);
          if (s.type === 'integer' && kind < 2) pathValues[p.name] = pick(rng, NON_DECIMAL.filter(Boolean));
          else if (kind === 0 && s.maxLength !== undefined) pathValues[p.name] = 'p'.repeat(s.maxLength + int(rng, 1, 3000));
          else if (kind === 1) {
            rawPath.add(p.name);
            pathValues[p.name] = pick(rng, ['%', '%zz', '%E0%A4%A', '%ED%A0%80', '%00', '%2e%2e', '%2F', '..%2F..', '%C0%AF', '%FF%FE']);
          } else if (kind === 2) pathValues[p.name] = `fz-${pick(rng, HOSTILE_TEXT)}`;
          // A well-formed name or id of nothing that exists.
          else pathValues[p.name] = s.type === 'integer' ? String(int(rng, 10_000, 2_000_000_000)) : pick(rng, ['00000000-0000-4000-8000-00000000dead', 'zz-no-such-thing', 'fz0']);
          return `${p.name}=${JSON.stringify(pathValues[p.name]).slice(0, 60)}`;
        },
      ]);
    }
    if (queryParams.length) {
      families.push([
        'query-unknown',
        () => {
          const name = pick(rng, ['sort', 'offset', 'ü', '💸', 'LIMIT', 'limit ', 'a'.repeat(300), '__proto__', 'constructor', '$where', 'x[y]', 'state[]', 'flood']);
          if (name === 'flood') {
            // Hundreds of parameters (the URL stays under the server's header size limit).
            for (let n = int(rng, 100, 600); n > 0; n--) query[`f${n}`] = String(n);
            status = 400;
            code = 'VALIDATION_FAILED';
            return 'flood';
          }
          query[name] = pick(rng, ['1', '', 'ü', 'true']);
          status = 400;
          code = 'VALIDATION_FAILED';
          return name.slice(0, 40);
        },
      ]);
      families.push([
        'query-value',
        () => {
          const p = pick(rng, queryParams);
          const kind = int(rng, 0, 3);
          if (kind === 0) {
            // the same parameter twice
            rawQuery.add(p.name);
            query[p.name] = `${encodeText(query[p.name] ?? 'a')}&${encodeText(p.name)}=b`;
            return `${p.name} repeated`;
          }
          if (p.schema.type === 'integer') query[p.name] = pick(rng, NON_DECIMAL);
          else if (p.name === 'cursor') query[p.name] = pick(rng, ['%%%', '!!!!', 'ü💸', '*', Buffer.from('["x"]').toString('base64url'), Buffer.from('[1,2,3,4,5]').toString('base64url'), Buffer.from('{}').toString('base64url'), Buffer.from(JSON.stringify(['2026-02-30T00:00:00.000000Z', '00000000-0000-4000-8000-000000000000'])).toString('base64url'), 'c'.repeat(513), '']);
          else {
            const v = violating(rng, p.schema);
            query[p.name] = v ? String(v.value) : '';
          }
          // Raw percent junk decodes to some text: only where no free text is accepted.
          const closed = p.schema.type === 'integer' || p.schema.enum || p.schema.pattern || p.name === 'cursor';
          if (kind === 1 && closed && !rawQuery.has(p.name)) {
            rawQuery.add(p.name);
            query[p.name] = pick(rng, ['%', '%zz', '%ED%A0%80', '%00', '%FF']);
          }
          return `${p.name}=${JSON.stringify(query[p.name]).slice(0, 60)}`;
        },
      ]);
    }
    if (op.body) {
      const schema = op.body;
      const value = b.body;
      families.push([
        'body-json',
        () => {
          body = pick(rng, INVALID_JSON);
          status = 400;
          code = 'MALFORMED_JSON';
          return JSON.stringify(body).slice(0, 40);
        },
      ]);
      families.push([
        'body-content-type',
        () => {
          headers['content-type'] = pick(rng, NOT_JSON_TYPES);
          status = 415;
          code = 'UNSUPPORTED_MEDIA_TYPE';
          return headers['content-type'];
        },
      ]);
      families.push([
        'body-top-level',
        () => {
          body = pick(rng, TOP_LEVEL);
          return body;
        },
      ]);
      families.push([
        'body-extra-field',
        () => {
          const spots = [[] as Array<string | number>, ...targets(schema, value).filter((t) => t.schema.additionalProperties === false && objectAt(value, t.at)).map((t) => t.at)];
          const at = pick(rng, spots);
          const key = pick(rng, EXTRA_KEYS);
          const copy = structuredClone(value) as Record<string, unknown>;
          const obj = at.length ? objectAt(copy, at)! : copy;
          // defineProperty, so '__proto__' becomes an own key as JSON.parse makes it.
          Object.defineProperty(obj, key, { value: pick(rng, [1, 'x', null, {}, [], true]), enumerable: true, configurable: true, writable: true });
          body = JSON.stringify(copy);
          return `${at.join('.')}.${key.slice(0, 30)}`;
        },
      ]);
      const required = targets(schema, value).filter((t) => t.parent.required?.includes(String(t.at[t.at.length - 1])) && objectAt(value, t.at.slice(0, -1)) !== null);
      if (required.length) {
        families.push([
          'body-missing',
          () => {
            const t = pick(rng, required);
            body = JSON.stringify(setAt(value, t.at, REMOVE));
            return t.at.join('.');
          },
        ]);
      }
      const inside = (at: Array<string | number>) => {
        let cur: any = value;
        for (const k of at) cur = cur?.[k];
        return cur !== null && typeof cur === 'object';
      };
      const typed = targets(schema, value).filter((t) => definiteType(t.schema) && inside(t.at.slice(0, -1)));
      if (typed.length) {
        families.push([
          'body-type',
          () => {
            const t = pick(rng, typed);
            const v = wrongType(rng, definiteType(t.schema)!);
            body = JSON.stringify(setAt(value, t.at, v));
            return `${t.at.join('.')}=${JSON.stringify(v)?.slice(0, 30)}`;
          },
        ]);
      }
      const constrained = typed.filter((t) => violating(prng(0), t.schema) !== null);
      if (constrained.length) {
        families.push([
          'body-constraint',
          () => {
            const t = pick(rng, constrained);
            const v = violating(rng, t.schema)!;
            body = JSON.stringify(setAt(value, t.at, v.value));
            if (Buffer.byteLength(body) > ctx.maxBodyBytes) status = 413;
            return `${t.at.join('.')} ${v.what}`;
          },
        ]);
      }
      families.push([
        'body-deep',
        () => {
          // Nesting far beyond any limit, under the size limit: parsers and walkers must not recurse to death.
          const depth = pick(rng, [100, 1000, 10_000, 50_000]);
          const [open, close] = pick(rng, [['[', ']'], ['{"a":', '}']]);
          const nested = open.repeat(depth) + '1' + close.repeat(depth);
          const key = pick(rng, ['intent', 'config', 'surprise', 'input_params', 'nodes']);
          body = rng() < 0.3 ? nested : `{"${key}":${nested}}`;
          return `${depth} deep`;
        },
      ]);
      families.push([
        'body-huge',
        () => {
          body = JSON.stringify({ ...(value as object), pad: 'x'.repeat(ctx.maxBodyBytes + int(rng, 1, 4096)) });
          status = 413;
          code = 'PAYLOAD_TOO_LARGE';
          return 'over the limit';
        },
      ]);
      if (op.params.some((p) => p.in === 'header' && p.name === 'idempotency-key')) {
        families.push([
          'header-idempotency',
          () => {
            headers['idempotency-key'] = pick(rng, ['k'.repeat(201 + int(rng, 0, 3000)), 'k\u00e9y', '\u00ff', 'a\tb', '']);
            if (headers['idempotency-key'] === '') {
              // An empty key is no key: make the body invalid too.
              body = JSON.stringify({ ...(value as object), surprise: 1 });
            }
            return JSON.stringify(headers['idempotency-key']).slice(0, 30);
          },
        ]);
      }
    }
    // The huge body is slow to send; keep it rare.
    const weighted = families.filter(([f]) => f !== 'body-huge' || rng() < 0.1);
    const [family, apply] = pick(rng, weighted);
    const detail = apply();
    const extras: string[] = [];
    for (let n = int(rng, 0, 2); n > 0; n--) extras.push(noise(rng, headers));
    const url = encodePath(op.path, pathValues, rawPath) + queryString(query, rawQuery);
    cases.push({
      name: `#${i} ${op.method} ${op.path} ${family}: ${detail}${extras.length ? ` (+${extras.join(', ')})` : ''}`,
      method,
      url,
      headers,
      body,
      status,
      code,
    });
  }
  return cases;
}
