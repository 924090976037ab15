import { boundText, RESULT_BOUNDS, wellFormedJson, type Executor, type Signer } from '../executors/protocol.ts';
import type { Logger } from 'pino';
import type { ExecutorRegistry, SignerRegistry } from '../executors/registry.ts';
import { withTransaction, type Pool } from '../persistence/db.ts';
import {
  canonicalEvmAddress,
  markOrphanExecutors,
  markOrphanSigners,
  saveExecutorHealth,
  saveSignerHealth,
  type HealthState,
  type ObservedIdentity,
} from '../persistence/registry.ts';

export interface HealthRefreshOptions {
  /** Per health() call; a check that does not answer in time counts as down. Default 10 s. */
  timeoutMs?: number;
  /** Gets one warn line per executor or signer found down (an exchange, a chain, a KMS...). */
  log?: Logger;
}

export interface HealthRefreshReport {
  executors: Array<{ executor_key: string; health_state: HealthState }>;
  signers: Array<{ signer_key: string; health_state: HealthState; observed: ObservedIdentity['kind'] }>;
  orphaned: { executors: string[]; signers: string[] };
}

interface Probe {
  state: HealthState;
  detail: Record<string, unknown>;
  result: Record<string, unknown> | null;
}

/**
 * One health sweep: calls health() on every registered executor and signer (all at once, each
 * bounded by a timeout, with no transaction open), then writes the roster in one short transaction:
 * up when health() answers (unless it says `ok: false`), down when it throws or times out, unknown
 * when the implementation has no health(). For a signer whose health reports `signer_address`, the
 * validated lowercase address becomes the observed identity; rows whose implementation is no longer
 * registered become orphans.
 */
export async function refreshRegistryHealth(
  pool: Pool,
  executors: ExecutorRegistry,
  signers: SignerRegistry,
  opts: HealthRefreshOptions = {},
): Promise<HealthRefreshReport> {
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const executorList = executors.all();
  const signerList = signers.all();
  const [executorProbes, signerProbes] = await Promise.all([
    Promise.all(executorList.map((e) => probe(e, timeoutMs))),
    Promise.all(signerList.map((s) => probe(s, timeoutMs))),
  ]);

  const executorRows = executorList.map((e: Executor, i) => ({
    executor_key: e.executorKey,
    lane: e.lane,
    health_state: executorProbes[i].state,
    health_detail: executorProbes[i].detail,
  }));
  const signerRows = signerList.map((s: Signer, i) => {
    const p = signerProbes[i];
    const observed = observedIdentity(p);
    const detail = observed.kind === 'clear' ? { ...p.detail, identity_error: 'signer_address is not a nonzero EVM address' } : p.detail;
    return { signer_key: s.signerKey, health_state: p.state, health_detail: detail, observed };
  });

  // Down is worth a person's attention at every check: nodes bound to it wait or fail meanwhile.
  for (const r of executorRows) if (r.health_state === 'down') opts.log?.warn({ executor_key: r.executor_key, lane: r.lane, health: r.health_detail }, 'executor down');
  for (const r of signerRows) if (r.health_state === 'down') opts.log?.warn({ signer_key: r.signer_key, health: r.health_detail }, 'signer down');

  const checkedAt = new Date();
  const orphaned = await withTransaction(pool, async (client) => {
    await saveExecutorHealth(client, executorRows, checkedAt);
    const orphanExecutors = await markOrphanExecutors(client, executors.keys());
    await saveSignerHealth(client, signerRows, checkedAt);
    const orphanSigners = await markOrphanSigners(client, signers.keys());
    return { executors: orphanExecutors, signers: orphanSigners };
  });

  return {
    executors: executorRows.map((r) => ({ executor_key: r.executor_key, health_state: r.health_state })),
    signers: signerRows.map((r) => ({ signer_key: r.signer_key, health_state: r.health_state, observed: r.observed.kind })),
    orphaned,
  };
}

async function probe(target: { health?: () => Promise<Record<string, unknown> | null> }, timeoutMs: number): Promise<Probe> {
  if (typeof target.health !== 'function') return { state: 'unknown', detail: { reason: 'health() not implemented' }, result: null };
  let timer: NodeJS.Timeout | undefined;
  try {
    const call = Promise.resolve().then(() => target.health!());
    // A hung check is abandoned, not awaited: swallow its late failure so it cannot go unhandled.
    call.catch(() => {});
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new HealthTimeoutError(timeoutMs)), timeoutMs);
    });
    const result = await Promise.race([call, timeout]);
    const detail = jsonSafe(result ?? {});
    if (result && result.ok === false) return { state: 'down', detail, result };
    return { state: 'up', detail, result: result ?? null };
  } catch (err) {
    const code = (err as { code?: unknown })?.code;
    return {
      state: 'down',
      detail: {
        // Without URLs: a client's error names the endpoint it called, and an RPC or exchange URL may
        // carry an API key. This text is stored, shown by GET /v3/executors and logged.
        error: boundText(withoutUrls(err instanceof Error ? err.message : String(err)), RESULT_BOUNDS.detailChars),
        ...(typeof code === 'string' ? { code: boundText(code, RESULT_BOUNDS.codeChars) } : {}),
      },
      result: null,
    };
  } finally {
    clearTimeout(timer);
  }
}

function observedIdentity(p: Probe): ObservedIdentity {
  if (p.state !== 'up' || !p.result || !Object.hasOwn(p.result, 'signer_address')) return { kind: 'keep' };
  const address = canonicalEvmAddress(p.result.signer_address);
  return address === null ? { kind: 'clear' } : { kind: 'set', address };
}

function withoutUrls(text: string): string {
  return text.replace(/\b[a-z][a-z0-9+.-]*:\/\/[^\s"'<>]+/gi, '[url]');
}

class HealthTimeoutError extends Error {
  readonly code = 'HEALTH_CHECK_TIMEOUT';
  constructor(ms: number) {
    super(`health check did not answer within ${ms} ms`);
  }
}

// health() answers are free-form; keep what JSON can hold (bigints as strings) and drop the rest.
// A remote host's answer is stored and shown by GET /v3/executors: one over the bound of an
// executor result's JSON fields (RESULT_BOUNDS) is replaced by its size.
function jsonSafe(value: Record<string, unknown>): Record<string, unknown> {
  try {
    const text = JSON.stringify(value, (_k, v) => (typeof v === 'bigint' ? v.toString() : v));
    const bytes = Buffer.byteLength(text ?? '', 'utf8');
    if (bytes > RESULT_BOUNDS.jsonBytes) return { oversized: true, bytes };
    const out = wellFormedJson(JSON.parse(text)) as Record<string, unknown>;
    return out && typeof out === 'object' && !Array.isArray(out) ? out : { value: out };
  } catch {
    return { unserializable: true };
  }
}
