/**
 * The API benchmark's load: a deterministic mix of hostile and ordinary requests against a running
 * Ferry, and the resident memory of its process before, during and after. It answers one question:
 * does the API process keep memory that hostile traffic made it allocate (a leak), or does it only
 * reach a high-water mark and stay level when the same traffic comes again?
 */
import { readFileSync } from 'node:fs';

export interface ApiRequest {
  kind: string;
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: string;
  /** Read the first bytes of the answer, then abandon the connection (an event stream, say). */
  abandon?: boolean;
}

const BIG = 'x'.repeat(1_100_000);

/**
 * The request of index `i`. Kinds, in the proportions they are drawn: ordinary reads with a valid
 * token, bodies that are not JSON, bodies over the limit, wrong or missing credentials, unknown
 * routes and ids, bad query values, event streams dropped after their first bytes, huge headers.
 */
export function apiRequest(rand: () => number, token: string, movementId: string | null): ApiRequest {
  const auth = { authorization: `Bearer ${token}` };
  const json = { ...auth, 'content-type': 'application/json' };
  const r = rand();
  const id = movementId ?? '00000000-0000-4000-8000-000000000000';
  const junk = Math.floor(rand() * 1e9).toString(36);
  if (r < 0.2) return { kind: 'read', method: 'GET', path: rand() < 0.5 ? '/v3/movements?limit=20' : `/v3/movements/${id}`, headers: auth };
  if (r < 0.32) return { kind: 'bad_json', method: 'POST', path: '/v3/movements', headers: json, body: `{"template_key": ${junk}` };
  if (r < 0.4) return { kind: 'oversize', method: 'POST', path: '/v3/movements', headers: json, body: BIG };
  if (r < 0.52) return { kind: 'bad_token', method: 'GET', path: '/v3/movements', headers: { authorization: `Bearer ferry_${junk}` } };
  if (r < 0.6) return { kind: 'no_token', method: 'POST', path: `/v3/movements/${id}/approve`, headers: { 'content-type': 'application/json' }, body: '{}' };
  if (r < 0.7) return { kind: 'unknown_route', method: rand() < 0.5 ? 'GET' : 'DELETE', path: `/v3/${junk}/${junk}`, headers: auth };
  if (r < 0.8) return { kind: 'bad_query', method: 'GET', path: `/v3/movements?limit=${rand() < 0.5 ? '0x10' : '1e99'}&cursor=${junk}`, headers: auth };
  if (r < 0.88) return { kind: 'bad_body', method: 'POST', path: '/v3/movements', headers: json, body: JSON.stringify({ template_key: junk, intent: { n: junk }, extra: [junk] }) };
  if (r < 0.95) return { kind: 'stream_dropped', method: 'GET', path: `/inspect/movements/${id}/events`, headers: { ...auth, accept: 'text/event-stream' }, abandon: true };
  return { kind: 'huge_header', method: 'GET', path: '/v3/movements', headers: { ...auth, 'x-filler': 'y'.repeat(12_000) } };
}

export interface LoadResult {
  sent: number;
  byStatus: Record<string, number>;
  serverErrors: number;
  /** Requests the client could not complete (connection reset after an early 413, say). */
  transportErrors: number;
}

/** Sends `count` requests from `rand` with `concurrency` in flight. */
export async function driveApi(
  baseUrl: string,
  count: number,
  concurrency: number,
  rand: () => number,
  token: string,
  movementId: string | null,
): Promise<LoadResult> {
  const result: LoadResult = { sent: 0, byStatus: {}, serverErrors: 0, transportErrors: 0 };
  let next = 0;
  const one = async (req: ApiRequest) => {
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), 10_000);
    try {
      const res = await fetch(baseUrl + req.path, { method: req.method, headers: req.headers, body: req.body, signal: abort.signal });
      const status = String(res.status);
      result.byStatus[status] = (result.byStatus[status] ?? 0) + 1;
      if (res.status >= 500) result.serverErrors++;
      if (req.abandon && res.body) {
        const reader = res.body.getReader();
        await reader.read();
        await reader.cancel();
      } else {
        await res.arrayBuffer();
      }
    } catch {
      result.transportErrors++;
    } finally {
      clearTimeout(timer);
      result.sent++;
    }
  };
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        next++;
        await one(apiRequest(rand, token, movementId));
      }
    }),
  );
  return result;
}

/** The resident set size of a process in MB, from /proc (Linux); NaN elsewhere or once it exited. */
export function rssMb(pid: number): number {
  try {
    return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN) / 1024;
  } catch {
    return NaN;
  }
}

/**
 * The V8 heap in use and the memory held outside it (Buffers, ArrayBuffers), in MB, from Ferry's own
 * /metrics (prom-client's default process metrics).
 */
export async function heapUsedMb(baseUrl: string, token: string): Promise<{ heap: number; external: number }> {
  const text = await (await fetch(`${baseUrl}/metrics`, { headers: { authorization: `Bearer ${token}` } })).text();
  const read = (name: string) => {
    const m = new RegExp(`^${name}\\s+([\\d.e+]+)`, 'm').exec(text);
    return m ? Number(m[1]) / 1024 / 1024 : NaN;
  };
  return { heap: read('nodejs_heap_size_used_bytes'), external: read('nodejs_external_memory_bytes') };
}
