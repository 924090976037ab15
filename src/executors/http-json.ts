import { Agent, request, type Dispatcher } from 'undici';
import { FatalMovementError, TemporaryMovementError } from './errors.ts';

/**
 * The JSON-over-HTTP client both remote proxies (executor, signer) use. It turns the transport's
 * failures into the two movement error kinds:
 * - temporary: the peer could not be reached, timed out, or answered 408 / 429 / 5xx;
 * - fatal: the peer refused the request (other 4xx) or answered something that is not JSON.
 * Every error says in `details.may_have_acted` whether the peer may have acted on the request: for
 * a submit that decides between "try again" and "ask the provider what happened".
 */

export interface JsonHttpClientOptions {
  /** http(s) base URL; endpoint paths are appended to it (a path prefix is kept). */
  baseUrl: string;
  /** Sent as `Authorization: Bearer <token>` when set. */
  token?: string;
  /** Connect, response-headers and body timeout, each; default 30 s. */
  timeoutMs?: number;
  /** Prefix of the error codes, e.g. REMOTE_EXECUTOR -> REMOTE_EXECUTOR_UNREACHABLE. */
  codePrefix: string;
  /** Largest answer body read, in bytes; default DEFAULT_ANSWER_MAX_BYTES. */
  maxAnswerBytes?: number;
  /** Code of the error for a 2xx answer over maxAnswerBytes; default <prefix>_ANSWER_TOO_LARGE. */
  tooLargeCode?: string;
  /** Headers that authenticate one request's exact body (Ferry's host request signature); called for every POST. */
  signHeaders?: (input: { method: string; path: string; body: string }) => Record<string, string>;
}

/** 1 MiB: far above any honest protocol answer, far below what would flood the transition log. */
export const DEFAULT_ANSWER_MAX_BYTES = 1024 * 1024;

export interface JsonResponse {
  status: number;
  /** Parsed body; undefined for an empty body (e.g. 204). */
  json: unknown;
}

// The request certainly never reached the peer: nothing to reconcile.
const notDeliveredCodes = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);
const MAX_BODY_EXCERPT = 500;

export class JsonHttpClient {
  readonly baseUrl: string;
  readonly #token: string | undefined;
  readonly #timeoutMs: number;
  readonly #prefix: string;
  readonly #agent: Agent;
  readonly #maxBytes: number;
  readonly #tooLargeCode: string;
  readonly #signHeaders: JsonHttpClientOptions['signHeaders'];

  constructor(opts: JsonHttpClientOptions) {
    let url: URL;
    try {
      url = new URL(opts.baseUrl);
    } catch {
      throw new TypeError(`invalid base URL ${JSON.stringify(opts.baseUrl)}`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new TypeError(`base URL must be http(s): ${opts.baseUrl}`);
    this.baseUrl = opts.baseUrl.replace(/\/+$/, '');
    this.#token = opts.token;
    this.#timeoutMs = opts.timeoutMs ?? 30_000;
    this.#prefix = opts.codePrefix;
    this.#maxBytes = opts.maxAnswerBytes ?? DEFAULT_ANSWER_MAX_BYTES;
    this.#tooLargeCode = opts.tooLargeCode ?? `${opts.codePrefix}_ANSWER_TOO_LARGE`;
    this.#agent = new Agent({ connect: { timeout: this.#timeoutMs } });
    this.#signHeaders = opts.signHeaders;
  }

  /** GET /health: the peer's JSON object, null for an empty answer; anything else is <prefix>_INVALID_RESPONSE. */
  async health(who: string): Promise<Record<string, unknown> | null> {
    const res = await this.call('GET', '/health');
    if (res.json === undefined || res.json === null) return null;
    if (typeof res.json !== 'object' || Array.isArray(res.json)) {
      throw new FatalMovementError(`${this.#prefix}_INVALID_RESPONSE`, `${who} /health did not answer a JSON object`);
    }
    return res.json as Record<string, unknown>;
  }

  /** Performs one call; resolves only for a 2xx answer with an empty or JSON body. */
  async call(method: 'GET' | 'POST', path: string, body?: unknown): Promise<JsonResponse> {
    const headers: Record<string, string> = { accept: 'application/json' };
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (this.#token) headers.authorization = `Bearer ${this.#token}`;
    const target = `${this.baseUrl}${path}`;
    // The exact bytes sent are the bytes signed.
    const text = body === undefined ? undefined : JSON.stringify(body);
    if (this.#signHeaders && method === 'POST') Object.assign(headers, this.#signHeaders({ method, path, body: text ?? '' }));

    let status: number;
    let answer: BoundedBody;
    let retryAfter: string | string[] | undefined;
    try {
      const res = await request(target, {
        method,
        headers,
        body: text,
        dispatcher: this.#agent,
        headersTimeout: this.#timeoutMs,
        bodyTimeout: this.#timeoutMs,
      });
      status = res.statusCode;
      retryAfter = res.headers['retry-after'];
      answer = await readBounded(res.body, res.headers['content-length'], this.#maxBytes);
    } catch (err) {
      const code = transportCode(err);
      const delivered = !notDeliveredCodes.has(code);
      throw new TemporaryMovementError(
        delivered ? `${this.#prefix}_CONNECTION_LOST` : `${this.#prefix}_UNREACHABLE`,
        `${method} ${target} failed: ${err instanceof Error ? err.message : String(err)}`,
        // No `cause`: the transport's errno (ECONNREFUSED, ...) is the peer's, and must never be read
        // as Ferry's own database trouble (databaseTroubleCause walks causes); it is in transport_code.
        { transport_code: code, may_have_acted: delivered },
      );
    }

    // An error answer only lends an excerpt to the message, so an oversized one keeps its status.
    const answerText = answer.text;
    const excerpt = answerText.slice(0, MAX_BODY_EXCERPT);
    // 408 and 429 turn the request away unprocessed; a 5xx may come from a handler that failed midway.
    if (status === 408 || status === 429 || status >= 500) {
      const details: Record<string, unknown> = { status, body: excerpt, may_have_acted: status >= 500 };
      const seconds = retryAfterSeconds(retryAfter);
      if (seconds !== null) details.retry_after_seconds = seconds;
      throw new TemporaryMovementError(`${this.#prefix}_UNAVAILABLE`, `${method} ${target} answered ${status}`, details);
    }
    if (status < 200 || status >= 300) {
      throw new FatalMovementError(`${this.#prefix}_REJECTED`, `${method} ${target} answered ${status}: ${excerpt}`, {
        status,
        body: excerpt,
        may_have_acted: false,
      });
    }
    if (answer.overLimit) {
      // Refused, not truncated: a cut JSON document is no answer. The peer may have acted (submit).
      throw new FatalMovementError(this.#tooLargeCode, `${method} ${target} answered more than ${this.#maxBytes} bytes`, {
        status,
        limit_bytes: this.#maxBytes,
        may_have_acted: true,
      });
    }
    if (answerText.trim() === '') return { status, json: undefined };
    try {
      return { status, json: JSON.parse(answerText) };
    } catch {
      throw new FatalMovementError(`${this.#prefix}_INVALID_RESPONSE`, `${method} ${target} answered ${status} with a body that is not JSON`, {
        status,
        body: excerpt,
        may_have_acted: true,
      });
    }
  }

  async close(): Promise<void> {
    await this.#agent.close();
  }
}

interface BoundedBody {
  /** What was read, at most the limit. */
  text: string;
  /** The body was longer than the limit (announced or read); reading stopped there. */
  overLimit: boolean;
}

/**
 * Reads a body up to `maxBytes` and stops there: an answer announced longer is not read at all,
 * one that streams past the limit is cut off (the connection is destroyed, nothing more is buffered).
 */
async function readBounded(body: Dispatcher.ResponseData['body'], contentLength: string | string[] | undefined, maxBytes: number): Promise<BoundedBody> {
  const announced = Number(Array.isArray(contentLength) ? contentLength[0] : contentLength);
  if (Number.isFinite(announced) && announced > maxBytes) {
    body.destroy();
    return { text: '', overLimit: true };
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    const buf = chunk as Buffer;
    if (size + buf.length > maxBytes) {
      chunks.push(buf.subarray(0, maxBytes - size));
      body.destroy();
      return { text: Buffer.concat(chunks).toString('utf8'), overLimit: true };
    }
    chunks.push(buf);
    size += buf.length;
  }
  return { text: Buffer.concat(chunks).toString('utf8'), overLimit: false };
}

function transportCode(err: unknown): string {
  for (let e: unknown = err, depth = 0; e && depth < 4; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return code;
  }
  return 'UNKNOWN';
}

/** Retry-After in its delay-seconds form; the HTTP-date form is rare from APIs and is ignored. */
function retryAfterSeconds(header: string | string[] | undefined): number | null {
  const value = Array.isArray(header) ? header[0] : header;
  if (value === undefined || !/^\d+$/.test(value.trim())) return null;
  return Number(value.trim());
}
