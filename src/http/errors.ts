/**
 * The one place where a thrown error becomes an HTTP response. Every error body has the same shape,
 * `{"error": {"code", "message", "details"}}`, and its status comes from the code (src/errors.ts).
 * Route authors validate input with `validate()` (or an OpenAPI route, whose failures reach
 * `validationHook`), so bad input is always a 4xx with a machine-readable code, never a 500.
 */
import type { Context, ErrorHandler, Hono, MiddlewareHandler, NotFoundHandler } from 'hono';
import { HTTPException } from 'hono/http-exception';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { z } from 'zod';
import { FerryError, errorStatus, type ErrorCode } from '../errors.ts';
import { log } from '../log.ts';

export interface ErrorBody {
  error: { code: ErrorCode; message: string; details: Record<string, unknown> };
}

/** The parts of a request `validate()` can check. */
export type ValidationTarget = 'json' | 'query' | 'param' | 'header';

export interface ValidationIssue {
  /** Dotted path to the offending value inside the target ("" for the target itself). */
  path: string;
  message: string;
}

const targetNames: Record<string, string> = {
  json: 'request body',
  form: 'request body',
  query: 'query string',
  param: 'path parameters',
  header: 'request headers',
  cookie: 'cookies',
};

function formatPath(path: readonly PropertyKey[]): string {
  return path.map((p) => String(p)).join('.');
}

/** A VALIDATION_FAILED error whose message names the first problem and whose details list them all. */
export function validationError(target: string, issues: ValidationIssue[]): FerryError {
  const first = issues[0];
  const where = first && first.path ? `${first.path}: ` : '';
  const more = issues.length > 1 ? ` (and ${issues.length - 1} more)` : '';
  return new FerryError('VALIDATION_FAILED', `Invalid ${targetNames[target] ?? target}: ${where}${first?.message ?? 'invalid'}${more}`, {
    target,
    issues,
  });
}

function zodIssues(error: z.core.$ZodError): ValidationIssue[] {
  return error.issues.map((i) => ({ path: formatPath(i.path), message: i.message }));
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

/**
 * Keys present in the input that did not survive parsing. Zod strips unknown keys silently; Ferry
 * refuses them instead, so a misspelt field is an error rather than a value quietly ignored. Open
 * maps (z.record, z.looseObject) keep their keys and therefore pass.
 */
export function unknownFields(input: unknown, output: unknown, path: PropertyKey[] = []): ValidationIssue[] {
  const found: ValidationIssue[] = [];
  if (Array.isArray(input) && Array.isArray(output)) {
    // A transform that filters or reorders makes positions meaningless; only compare like with like.
    if (input.length === output.length) input.forEach((v, i) => found.push(...unknownFields(v, output[i], [...path, i])));
  } else if (isPlainObject(input) && isPlainObject(output)) {
    for (const key of Object.keys(input)) {
      if (!Object.hasOwn(output, key)) found.push({ path: formatPath([...path, key]), message: 'unknown field' });
      else found.push(...unknownFields(input[key], output[key], [...path, key]));
    }
  }
  return found;
}

const jsonMediaType = /^application\/([\w.-]+\+)?json$/i;

async function readJsonBody(c: Context): Promise<unknown> {
  const text = await c.req.text();
  if (text.trim() === '') return undefined;
  const mediaType = (c.req.header('content-type') ?? '').split(';')[0].trim();
  if (!jsonMediaType.test(mediaType)) {
    throw new FerryError('UNSUPPORTED_MEDIA_TYPE', 'Request body must be JSON (Content-Type: application/json)', {
      content_type: mediaType || null,
    });
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new FerryError('MALFORMED_JSON', `Request body is not valid JSON: ${(err as Error).message}`);
  }
}

function flatQuery(c: Context): Record<string, string | string[]> {
  return Object.fromEntries(Object.entries(c.req.queries()).map(([k, v]) => [k, v.length === 1 ? v[0] : v]));
}

async function rawInput(c: Context, target: ValidationTarget): Promise<unknown> {
  switch (target) {
    case 'json':
      return readJsonBody(c);
    case 'query':
      return flatQuery(c);
    case 'param':
      return c.req.param();
    case 'header':
      return c.req.header();
  }
}

/** Parses a raw value against a schema, refusing both invalid values and unknown fields. */
export async function parseInput<S extends z.ZodType>(target: ValidationTarget, schema: S, value: unknown): Promise<z.output<S>> {
  const result = await schema.safeParseAsync(value);
  if (!result.success) throw validationError(target, zodIssues(result.error));
  // Headers always carry more than a route asks for; unknown ones are normal there.
  if (target !== 'header') {
    const extra = unknownFields(value, result.data);
    if (extra.length) throw validationError(target, extra);
  }
  return result.data;
}

type ValidatedInput<T extends ValidationTarget, S extends z.ZodType> = {
  in: { [K in T]: z.input<S> };
  out: { [K in T]: z.output<S> };
};

/**
 * Middleware that validates one part of the request and makes the result available as
 * `c.req.valid(target)`. Bad JSON -> 400 MALFORMED_JSON, a non-JSON body -> 415, wrong types,
 * missing or unknown fields -> 400 VALIDATION_FAILED with every issue in details.
 */
export function validate<T extends ValidationTarget, S extends z.ZodType>(
  target: T,
  schema: S,
): MiddlewareHandler<any, string, ValidatedInput<T, S>> {
  return async (c, next) => {
    const data = await parseInput(target, schema, await rawInput(c, target));
    c.req.addValidatedData(target, data as {});
    await next();
  };
}

/**
 * The default hook for OpenAPIHono apps: a failed validation becomes VALIDATION_FAILED, and unknown
 * fields are refused just as `validate()` refuses them. Mounted sub-apps inherit it from the root app.
 */
export async function validationHook(
  result: { success: true; data: unknown; target: string } | { success: false; error: z.core.$ZodError; target: string },
  c: Context,
): Promise<void> {
  const target = result.target;
  if (!result.success) throw validationError(target, zodIssues(result.error));
  if (target === 'json' || target === 'query') {
    // The JSON body was already parsed by the route's validator; hono caches it, so this is no re-read.
    const raw = target === 'json' ? await c.req.json().catch(() => undefined) : flatQuery(c);
    const extra = unknownFields(raw, result.data);
    if (extra.length) throw validationError(target, extra);
  }
}

/** Codes for the statuses hono and its middleware raise as HTTPException. */
const codeForStatus: Partial<Record<number, ErrorCode>> = {
  400: 'BAD_REQUEST',
  401: 'UNAUTHENTICATED',
  403: 'FORBIDDEN',
  404: 'NOT_FOUND',
  405: 'METHOD_NOT_ALLOWED',
  408: 'REQUEST_TIMEOUT',
  413: 'PAYLOAD_TOO_LARGE',
  415: 'UNSUPPORTED_MEDIA_TYPE',
  429: 'RATE_LIMITED',
  503: 'SERVICE_UNAVAILABLE',
  504: 'UPSTREAM_TIMEOUT',
};

/** Response headers an HTTPException may carry that the client needs (e.g. how to authenticate). */
const forwardedHeaders = ['www-authenticate', 'retry-after', 'allow'];

/**
 * PostgreSQL SQLSTATEs meaning "the database is not there right now" (connection exceptions,
 * administrator shutdown, too many connections): the client should retry, so 503, not 500.
 */
function isDatabaseUnavailable(err: unknown): boolean {
  const code = (err as { code?: unknown })?.code;
  if (typeof code !== 'string' || !(err instanceof Error) || !('severity' in err)) return false;
  return code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03' || code === '53300';
}

/** A statement the server cancelled because it ran past the pool's statement_timeout (SQLSTATE 57014). */
function isStatementTimeout(err: unknown): boolean {
  if (!(err instanceof Error) || !('severity' in err)) return false;
  return (err as { code?: unknown }).code === '57014' && /statement timeout/i.test(err.message);
}

export interface ClassifiedError {
  error: FerryError;
  status: number;
  headers: Headers;
  /** True when the cause is ours, not the client's: it is logged with its stack. */
  internal: boolean;
}

/** Turns anything thrown while serving a request into the FerryError the client will see. */
export function classifyError(err: unknown): ClassifiedError {
  const headers = new Headers();
  if (err instanceof FerryError) {
    return { error: err, status: err.httpStatus, headers, internal: err.httpStatus >= 500 };
  }
  if (err instanceof z.core.$ZodError) {
    const error = new FerryError('VALIDATION_FAILED', 'Invalid input', { issues: zodIssues(err) });
    return { error, status: error.httpStatus, headers, internal: false };
  }
  if (err instanceof HTTPException) {
    const status = err.status;
    // hono's own validator reports unparsable JSON this way.
    const malformed = status === 400 && /malformed json/i.test(err.message);
    const code: ErrorCode = malformed ? 'MALFORMED_JSON' : (codeForStatus[status] ?? (status >= 500 ? 'INTERNAL' : 'BAD_REQUEST'));
    const message = err.message || (status >= 500 ? 'Internal error' : `Request failed with status ${status}`);
    if (err.res) for (const name of forwardedHeaders) {
      const value = err.res.headers.get(name);
      if (value) headers.set(name, value);
    }
    return { error: new FerryError(code, message, {}, { cause: err }), status, headers, internal: status >= 500 };
  }
  if (isStatementTimeout(err)) {
    const error = new FerryError('DATABASE_TIMEOUT', 'The database did not finish this request within the API statement timeout; retry later', {}, { cause: err });
    return { error, status: error.httpStatus, headers, internal: true };
  }
  if (isDatabaseUnavailable(err)) {
    const error = new FerryError('DATABASE_UNAVAILABLE', 'The database is unavailable; retry later', {}, { cause: err });
    return { error, status: error.httpStatus, headers, internal: true };
  }
  // Unknown failures keep their message out of the response: it may hold internals.
  const error = new FerryError('INTERNAL', 'Internal error', {}, { cause: err });
  return { error, status: error.httpStatus, headers, internal: true };
}

function requestIdOf(c: Context): string | undefined {
  return (c.var as { requestId?: string }).requestId;
}

export const onError: ErrorHandler = (err, c) => {
  const { error, status, headers, internal } = classifyError(err);
  const requestId = requestIdOf(c);
  if (internal) {
    log.error({ err, code: error.code, method: c.req.method, path: c.req.path, request_id: requestId }, 'request failed');
  }
  const details = error.code === 'INTERNAL' && requestId ? { ...error.details, request_id: requestId } : error.details;
  const body: ErrorBody = { error: { code: error.code, message: error.message, details } };
  const res = c.json(body, status as ContentfulStatusCode);
  headers.forEach((value, name) => res.headers.set(name, value));
  return res;
};

export const notFound: NotFoundHandler = (c) => {
  const body: ErrorBody = {
    error: {
      code: 'NOT_FOUND',
      message: `No route for ${c.req.method} ${c.req.path}`,
      details: { method: c.req.method, path: c.req.path },
    },
  };
  return c.json(body, errorStatus.NOT_FOUND);
};

/** Installs the error and not-found handlers on an app (the root app; mounted apps inherit them). */
export function installErrorHandling(app: Hono<any, any, any>): void {
  app.onError(onError);
  app.notFound(notFound);
}
