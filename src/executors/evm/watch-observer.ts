import type { ExecutionContext, ExecutionResult, Executor, PreparedAction } from '../protocol.ts';
import { parseWatch, pinnedWatch } from '../watch.ts';
import type { EvmChain, EvmChains } from './chains.ts';
import { failed, manual, preparedWatch, result } from './tx-lifecycle.ts';

/**
 * The skeleton the lanes' observation executors share (the gateway lane's deposit credit and burn,
 * usdt0's credit, ccip's delivery): a watch derived from the node's config and its predecessor's
 * provider_refs, prepared as the payload of a prepared action (no side effect, so submit only
 * starts watching), and every observe and recover reading it back from the attempt. A lane writes
 * what differs: how the watch is derived (`spec`, `start`), what it must hold (`isWatch`), and how
 * one observation reads the provider (`observeWatch`). The codes are the lane's prefix plus
 * `_OBSERVE_SPEC_INVALID` (the prepared watch does not read back), `_NO_PREPARED_ACTION` (observed
 * with none) and `_NOTHING_SENT` (recovered with none: back to READY).
 */

export type WatchSpec<T> = { ok: true; value: T } | { ok: false; code: string; detail: string };

export abstract class WatchObserver<S, W extends object> implements Executor {
  abstract readonly executorKey: string;
  abstract readonly lane: string;
  /** The lane's code prefix (`USDT0`), the prepared action id's prefix (`usdt0-credit`) and what the watch is called in messages (`credit watch`). */
  protected abstract readonly watchNames: { prefix: string; kind: string; noun: string };

  /** What the node asks to watch, from its config and provider_context; a failure fails the node. */
  protected abstract spec(ctx: ExecutionContext): WatchSpec<S>;
  /** The watch prepared from the spec (a start block read from the chain, say), or the result that stands instead. */
  protected abstract start(spec: S): Promise<{ ok: true; watch: W } | { ok: false; result: ExecutionResult }>;
  /** The fields a watch read back must hold. */
  protected abstract isWatch(w: Record<string, unknown>): boolean;
  /** One observation of a pinned watch. */
  protected abstract observeWatch(ctx: ExecutionContext, w: W): Promise<ExecutionResult>;
  /** Seconds until the next look. */
  protected abstract poll(): number;
  abstract health(): Promise<Record<string, unknown>>;

  async preflight(ctx: ExecutionContext): Promise<ExecutionResult | null> {
    const s = this.spec(ctx);
    return s.ok ? null : failed(s.code, s.detail);
  }

  async prepare(ctx: ExecutionContext): Promise<ExecutionResult> {
    const s = this.spec(ctx);
    if (!s.ok) return failed(s.code, s.detail);
    const started = await this.start(s.value);
    if (!started.ok) return started.result;
    return preparedWatch(ctx, this.watchNames.kind, JSON.stringify(started.watch), { ...(started.watch as Record<string, unknown>) });
  }

  async submit(_ctx: ExecutionContext, prepared: PreparedAction): Promise<ExecutionResult> {
    const w = this.parse(prepared.payload);
    if (!w) return failed(`${this.watchNames.prefix}_OBSERVE_SPEC_INVALID`, 'the prepared watch cannot be read');
    return result({ next_state: 'SUBMITTED', provider_state: 'watching', provider_refs: { ...(w as Record<string, unknown>) }, retry_after_seconds: this.poll() });
  }

  async observe(ctx: ExecutionContext): Promise<ExecutionResult> {
    const w = this.pinned(ctx);
    if (!w) return manual(`${this.watchNames.prefix}_NO_PREPARED_ACTION`, `the attempt has no prepared ${this.watchNames.noun}`);
    return this.observeWatch(ctx, w);
  }

  async recover(ctx: ExecutionContext): Promise<ExecutionResult> {
    if (!this.pinned(ctx)) return result({ next_state: 'READY', error_code: `${this.watchNames.prefix}_NOTHING_SENT`, error_detail: `a ${this.watchNames.noun} has no side effect` });
    return this.observe(ctx);
  }

  /** A watch has no side effect: recover() only reads already. */
  inspect(ctx: ExecutionContext): Promise<ExecutionResult> {
    return this.recover(ctx);
  }

  protected parse(payload: string | null): W | null {
    return parseWatch<W>(payload, (w) => this.isWatch(w));
  }

  protected pinned(ctx: ExecutionContext): W | null {
    return pinnedWatch(ctx, (p) => this.parse(p));
  }
}

/** The block a search for the watched event starts at: the chain's head less `lookback` (the event may come before the watch). */
export async function watchStartBlock(chain: EvmChain, lookback: bigint): Promise<number> {
  const head = await chain.client.getBlockNumber();
  return Number(head > lookback ? head - lookback : 0n);
}

/** Runs `get` over [from, head] in ranges of `range` blocks (the RPC's eth_getLogs limit), in order. */
export async function scanBlocks<T>(from: bigint, head: bigint, range: number, get: (fromBlock: bigint, toBlock: bigint) => Promise<readonly T[]>): Promise<T[]> {
  const found: T[] = [];
  const step = BigInt(range);
  for (let start = from; start <= head; start += step) {
    const end = start + step - 1n < head ? start + step - 1n : head;
    found.push(...(await get(start, end)));
  }
  return found;
}

/** Seconds since the send's source block when past the delivery timeout; null: not late, or not known. */
export async function secondsLate(chains: EvmChains, w: { source_chain_id: number | null; source_block_number: number | null; delivery_timeout_seconds: number }): Promise<number | null> {
  if (w.source_chain_id === null || w.source_block_number === null) return null;
  const source = chains.get(w.source_chain_id);
  if (!source) return null;
  try {
    const block = await source.client.getBlock({ blockNumber: BigInt(w.source_block_number) });
    const age = Math.floor(Date.now() / 1000) - Number(block.timestamp);
    return age > w.delivery_timeout_seconds ? age : null;
  } catch {
    return null;
  }
}
