import { decodeFunctionResult, encodeFunctionData, parseAbiItem, type AbiFunction, type Hex } from 'viem';
import type { FerryConfig } from '../config.ts';
import type { RegistryBaseline } from '../executors/lane.ts';
import { lanes as allLanes, type LaneList } from '../executors/lanes.ts';
import type { Logger } from '../log.ts';
import { registryChecksTotal } from '../metrics.ts';
import type { Pool } from '../persistence/db.ts';
import type { RegistryFactKey } from '../persistence/registry-drifts.ts';
import { forgetUnassertedRegistryFacts, recordRegistryAnswer, type RegistryAnswer } from '../services/registry-drift.ts';

/**
 * verify_drift (sidecar, every 6 hours by default; docs/operations.md "Registry drift"): every lane
 * of the list may declare registry baselines (`registryBaselines` of its definition), the on-chain
 * facts its configuration asserts: a token's contract has code and answers the configured decimals
 * and symbol, a CCTP transmitter answers the configured domain, an OFT's peers are the configured
 * deployments, a bridge has code. The sweep reads them on each chain (the chain's rpc_url of
 * evm.chains) and compares:
 *
 * - per chain, at most FERRY_VERIFY_DRIFT_RPC_CONCURRENCY calls at once; chains run side by side, so a
 *   chain that hangs delays no other;
 * - per lane and chain, FERRY_VERIFY_DRIFT_LANE_TIMEOUT_MS for all its reads: what has not answered
 *   by then is aborted and counts as unverified (RPC_TIMEOUT);
 * - an answer is read up to MAX_ANSWER_BYTES and no further; a failed call, an oversized or malformed
 *   answer is unverified (never drift, never a failed run). A revert or an empty answer is the
 *   chain's own answer: drift.
 *
 * A drift is recorded once per episode (registry_drifts): seen again, its last_seen moves; the chain
 * agreeing again resolves it (matched); a fact nothing asserts any more is resolved as unconfigured.
 * An unverified fact leaves its episode as it was. The first sighting writes a
 * `registry.drift_detected` audit event and a warning with `attention: registry_drift`.
 * The writes are the service's (src/services/registry-drift.ts); no transaction is open while a
 * chain is asked.
 */

/** The most of one JSON-RPC answer that is read (a token's symbol, a peer: a few hundred bytes). */
export const MAX_ANSWER_BYTES = 64 * 1024;
/** The longest observed text kept (a hostile symbol() is cut, its control characters escaped). */
const MAX_OBSERVED_CHARS = 200;

export interface VerifyDriftDeps {
  pool: Pool;
  config: FerryConfig;
  log: Logger;
  /** The lane list (tests: a list with or without a lane). */
  lanes?: LaneList;
  /**
   * A sweep of its own over some lanes (ccip_drift, with its lane alone): its name in logs and audit
   * events, and only those lanes' facts are forgotten when no longer asserted. Default: verify_drift
   * over the whole list, which forgets the facts of every lane the list no longer asserts.
   */
  worker?: string;
  onlyListedLanes?: boolean;
}

export interface VerifyDriftSettings {
  concurrency: number;
  laneTimeoutMs: number;
}

export interface VerifyDriftResult {
  chains: number;
  checked: number;
  match: number;
  drift: number;
  unverified: number;
  /** Drifts first seen by this run. */
  detected: number;
  /** Drifts this run resolved (matched, or no longer asserted). */
  resolved: number;
  /** Per chain: what could not be verified, and why (codes only). */
  unverified_by_chain: Record<string, Record<string, number>>;
  /**
   * Facts on chains without an rpc_url in evm.chains (reached through a remote host, or not at all):
   * not read here, and still asserted (their episodes are left as they are). By chain.
   */
  not_read: Record<string, number>;
}

interface Fact extends RegistryBaseline {
  lane: string;
}

type Answer = RegistryAnswer;

class Unverified extends Error {
  constructor(readonly code: string) {
    super(code);
  }
}

/** The baselines of every lane of the list that declares some, for this configuration file. */
export function registryFacts(config: FerryConfig, list: LaneList = allLanes): Fact[] {
  const file = config.file as unknown as Record<string, unknown>;
  return list.flatMap((lane) => (lane.registryBaselines?.(file) ?? []).map((b) => ({ ...b, lane: lane.name })));
}

const propertyName = (f: RegistryBaseline) => (f.property === 'code' || f.property === 'chain_id' ? f.property : f.property.name);
const keyOf = (f: Fact): RegistryFactKey => ({ lane: f.lane, chain_id: f.chainId, subject: f.subject, property: propertyName(f) });

export async function runVerifyDrift(deps: VerifyDriftDeps, s: VerifyDriftSettings): Promise<VerifyDriftResult> {
  const list = deps.lanes ?? allLanes;
  const worker = deps.worker ?? 'verify_drift';
  const facts = registryFacts(deps.config, list);
  const out: VerifyDriftResult = { chains: 0, checked: 0, match: 0, drift: 0, unverified: 0, detected: 0, resolved: 0, unverified_by_chain: {}, not_read: {} };
  const chains = ((deps.config.file as { evm?: { chains?: Array<{ chain_id: number; rpc_url: string }> } }).evm?.chains ?? []);
  const byChain = new Map<number, Fact[]>();
  for (const f of facts) {
    if (!chains.some((c) => c.chain_id === f.chainId)) out.not_read[String(f.chainId)] = (out.not_read[String(f.chainId)] ?? 0) + 1;
    else byChain.set(f.chainId, [...(byChain.get(f.chainId) ?? []), f]);
  }
  out.chains = byChain.size;

  // Every chain at once; within one, a bounded number of calls, and each lane its own deadline.
  const answered = await Promise.all(
    [...byChain].map(async ([chainId, list]) => {
      const rpcUrl = chains.find((c) => c.chain_id === chainId)!.rpc_url;
      const limit = limiter(s.concurrency);
      const lanes = [...new Set(list.map((f) => f.lane))];
      const perLane = await Promise.all(
        lanes.map(async (lane) => {
          const deadline = AbortSignal.timeout(s.laneTimeoutMs);
          const mine = list.filter((f) => f.lane === lane);
          return Promise.all(mine.map(async (f) => [f, await limit(() => readFact(rpcUrl, f, deadline))] as const));
        }),
      );
      return perLane.flat();
    }),
  );

  for (const [f, a] of answered.flat()) {
    out.checked++;
    out[a.outcome]++;
    registryChecksTotal.inc({ lane: f.lane, outcome: a.outcome });
    if (a.outcome === 'unverified') {
      const c = (out.unverified_by_chain[String(f.chainId)] ??= {});
      c[a.error_code!] = (c[a.error_code!] ?? 0) + 1;
    }
    const { detected, resolved } = await recordRegistryAnswer(deps.pool, { ...keyOf(f), address: f.address, expected: f.expected }, a, `worker:${worker}`);
    if (resolved) out.resolved++;
    if (detected) {
      out.detected++;
      deps.log.warn(
        { worker, attention: 'registry_drift', ...keyOf(f), expected: detected.expected, observed: detected.observed },
        'the chain contradicts the configuration',
      );
    }
  }

  // What the configuration no longer asserts.
  out.resolved += await forgetUnassertedRegistryFacts(deps.pool, facts.map(keyOf), { actor: `worker:${worker}`, ...(deps.onlyListedLanes ? { onlyLanes: list.map((l) => l.name) } : {}) });
  if (out.unverified > 0) deps.log.warn({ worker, unverified: out.unverified_by_chain }, 'some registry baselines could not be verified');
  return out;
}

/** One fact read on the chain; never throws. */
async function readFact(rpcUrl: string, f: Fact, deadline: AbortSignal): Promise<Answer> {
  try {
    const observed = await observe(rpcUrl, f, deadline);
    return { outcome: observed === f.expected ? 'match' : 'drift', observed, error_code: null };
  } catch (err) {
    const code = err instanceof Unverified ? err.code : deadline.aborted ? 'RPC_TIMEOUT' : 'RPC_ERROR';
    return { outcome: 'unverified', observed: null, error_code: code };
  }
}

async function observe(rpcUrl: string, f: Fact, deadline: AbortSignal): Promise<string> {
  if (f.property === 'code') {
    const code = await rpc(rpcUrl, 'eth_getCode', [f.address, 'latest'], deadline);
    // No code is `0x`; a single STOP byte (`0x00`) is code.
    return code === '0x' ? 'none' : 'code';
  }
  if (f.property === 'chain_id') {
    const id = await rpc(rpcUrl, 'eth_chainId', [], deadline);
    // The answer of an endpoint of another chain: every other fact read there is read on that chain.
    if (!/^0x[0-9a-fA-F]{1,16}$/.test(id)) throw new Unverified('RPC_ANSWER_MALFORMED');
    return BigInt(id).toString();
  }
  let fn: AbiFunction;
  try {
    fn = parseAbiItem(f.property.signature) as AbiFunction;
  } catch {
    throw new Unverified('BASELINE_UNREADABLE');
  }
  const data = encodeFunctionData({ abi: [fn], functionName: fn.name, args: (f.property.args ?? []) as never });
  let result: Hex;
  try {
    result = await rpc(rpcUrl, 'eth_call', [{ to: f.address, data }, 'latest'], deadline);
  } catch (err) {
    // A revert is the contract's own answer.
    if (err instanceof Reverted) return 'reverted';
    throw err;
  }
  if (result === '0x') return 'empty';
  try {
    return text(decodeFunctionResult({ abi: [fn], functionName: fn.name, data: result }));
  } catch {
    return `undecodable (${(result.length - 2) / 2} bytes)`;
  }
}

/** A call's answer in the baselines' words: decimal numbers, lowercase hex, printable text. */
function text(v: unknown): string {
  if (typeof v === 'bigint' || typeof v === 'number') return String(v);
  if (typeof v === 'boolean') return String(v);
  if (typeof v === 'string') {
    if (/^0x[0-9a-fA-F]*$/.test(v)) return v.toLowerCase().slice(0, MAX_OBSERVED_CHARS);
    // eslint-disable-next-line no-control-regex
    const printable = v.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029\ufffe\uffff]/gu, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
    return printable.length > MAX_OBSERVED_CHARS ? `${printable.slice(0, MAX_OBSERVED_CHARS)}...` : printable;
  }
  return 'undecodable';
}

class Reverted extends Error {}

/** One JSON-RPC call, bounded in time (the lane's deadline) and in size; the URL never appears in an error. */
async function rpc(url: string, method: string, params: unknown[], signal: AbortSignal): Promise<Hex> {
  if (signal.aborted) throw new Unverified('RPC_TIMEOUT');
  let res: Response;
  try {
    res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }), redirect: 'error', signal });
  } catch {
    throw new Unverified(signal.aborted ? 'RPC_TIMEOUT' : 'RPC_UNREACHABLE');
  }
  const body = await readBounded(res, signal);
  if (!res.ok) throw new Unverified(`RPC_HTTP_${res.status}`);
  let msg: { result?: unknown; error?: { code?: unknown; message?: unknown } };
  try {
    msg = JSON.parse(body);
  } catch {
    throw new Unverified('RPC_ANSWER_MALFORMED');
  }
  if (!msg || typeof msg !== 'object') throw new Unverified('RPC_ANSWER_MALFORMED');
  if (msg.error) {
    const m = typeof msg.error.message === 'string' ? msg.error.message : '';
    if (method === 'eth_call' && (msg.error.code === 3 || /revert/i.test(m))) throw new Reverted();
    throw new Unverified('RPC_ERROR');
  }
  if (typeof msg.result !== 'string' || !/^0x[0-9a-fA-F]*$/.test(msg.result)) throw new Unverified('RPC_ANSWER_MALFORMED');
  return msg.result as Hex;
}

async function readBounded(res: Response, signal: AbortSignal): Promise<string> {
  const announced = Number(res.headers.get('content-length'));
  if (Number.isFinite(announced) && announced > MAX_ANSWER_BYTES) {
    await res.body?.cancel().catch(() => {});
    throw new Unverified('RPC_ANSWER_TOO_LARGE');
  }
  if (!res.body) return '';
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > MAX_ANSWER_BYTES) {
        await reader.cancel().catch(() => {});
        throw new Unverified('RPC_ANSWER_TOO_LARGE');
      }
      chunks.push(value);
    }
  } catch (err) {
    if (err instanceof Unverified) throw err;
    throw new Unverified(signal.aborted ? 'RPC_TIMEOUT' : 'RPC_ERROR');
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** At most `n` of the calls given to it run at once; the rest wait their turn. */
function limiter(n: number) {
  let active = 0;
  const waiting: Array<() => void> = [];
  return async <T>(fn: () => Promise<T>): Promise<T> => {
    if (active >= n) await new Promise<void>((r) => waiting.push(r));
    active++;
    try {
      return await fn();
    } finally {
      active--;
      waiting.shift()?.();
    }
  };
}
