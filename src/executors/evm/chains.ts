import { createPublicClient, http, type PublicClient, type Transport } from 'viem';
import type { EvmChainConfig } from '../../config-file.ts';
import type { ExecutionContext } from '../protocol.ts';

/**
 * The EVM chains Ferry talks to: one viem PublicClient per configured chain, made here and only
 * here, so every JSON-RPC call of the lane goes through the same transport wrapper.
 *
 * An RPC URL is a secret (providers put the API key in its path or query), and viem's error
 * messages quote the URL ("URL: https://host/v3/KEY"). The wrapper rewrites every error the
 * transport throws (and its causes, stacks included) so that the URL, its path and its credentials
 * read `[rpc <chain label>]` before any executor, log line, health row or API answer can see it.
 */

export interface EvmChain {
  chainId: number;
  /** For messages: `chain 31337 (local)`. Never the URL. */
  label: string;
  client: PublicClient;
  /** Default confirmations, the transaction's own block included. */
  confirmations: number;
  /** `finalized`: completion waits for the chain's finalized block tag as well. */
  finality: 'confirmations' | 'finalized';
  /** Seconds until the observer looks again. */
  pollSeconds: number;
  config: EvmChainConfig;
}

export interface ChainClientOptions {
  /** Timeout of one JSON-RPC call, in milliseconds. */
  timeoutMs?: number;
  /** Names the RPC in error messages instead of its URL. */
  label?: string;
}

/**
 * A PublicClient over `rpcUrl` whose errors never carry the URL. One retry for a dropped
 * connection (resending the same signed bytes is harmless); no cached block number, since a
 * confirmation count must come from the head as it is now.
 */
export function createChainClient(rpcUrl: string, opts: ChainClientOptions = {}): PublicClient {
  return createPublicClient({ cacheTime: 0, transport: redactingTransport(rpcUrl, opts) });
}

function redactingTransport(rpcUrl: string, opts: ChainClientOptions): Transport {
  const inner = http(rpcUrl, { timeout: opts.timeoutMs ?? 10_000, retryCount: 1 });
  const scrub = urlScrubber(rpcUrl, `[rpc ${opts.label ?? 'endpoint'}]`);
  return ((params: Parameters<Transport>[0]) => {
    const transport = inner(params);
    const request = transport.request;
    return {
      ...transport,
      // The URL is transport configuration; keep it out of anything a caller may print.
      value: undefined,
      config: transport.config,
      request: (async (args: unknown, options?: unknown) => {
        try {
          return await (request as (a: unknown, o?: unknown) => Promise<unknown>)(args, options);
        } catch (err) {
          throw scrubError(err, scrub);
        }
      }) as typeof request,
    };
  }) as Transport;
}

/** Replaces every spelling of the URL, its path+query and its credentials in a text. */
export function urlScrubber(rpcUrl: string, replacement: string): (text: string) => string {
  const secrets = new Set<string>([rpcUrl, rpcUrl.replace(/\/+$/, '')]);
  try {
    const u = new URL(rpcUrl);
    secrets.add(u.href);
    secrets.add(u.href.replace(/\/+$/, ''));
    const tail = `${u.pathname}${u.search}`;
    if (tail.length > 1) {
      secrets.add(tail);
      secrets.add(decodeURIComponent(tail));
    }
    if (u.search.length > 1) secrets.add(u.search.slice(1));
    if (u.password) secrets.add(u.password).add(decodeURIComponent(u.password));
    if (u.username) secrets.add(u.username);
  } catch {
    // not a URL: only the literal text is scrubbed
  }
  // Longest first, so a full URL is replaced before its path.
  const list = [...secrets].filter((s) => s.length >= 2).sort((a, b) => b.length - a.length);
  return (text: string) => {
    let out = text;
    for (const s of list) out = out.split(s).join(replacement);
    return out;
  };
}

const TEXT_FIELDS = ['message', 'shortMessage', 'details', 'stack', 'url', 'docsPath'] as const;

/** Rewrites an error and its cause chain in place (class and codes kept, so callers still match on them). */
export function scrubError<E>(err: E, scrub: (text: string) => string): E {
  const seen = new Set<unknown>();
  let e: unknown = err;
  while (e && typeof e === 'object' && !seen.has(e)) {
    seen.add(e);
    const o = e as Record<string, unknown>;
    for (const f of TEXT_FIELDS) {
      const v = o[f];
      if (typeof v === 'string') {
        try {
          Object.defineProperty(o, f, { value: scrub(v), writable: true, configurable: true, enumerable: Object.prototype.propertyIsEnumerable.call(o, f) });
        } catch {
          // a frozen field: nothing to do
        }
      }
    }
    if (Array.isArray(o.metaMessages)) o.metaMessages = (o.metaMessages as unknown[]).map((m) => (typeof m === 'string' ? scrub(m) : m));
    e = o.cause;
  }
  return err;
}

export function chainLabel(c: Pick<EvmChainConfig, 'chain_id' | 'name'>): string {
  return `chain ${c.chain_id}${c.name ? ` (${c.name})` : ''}`;
}

export function chainFromConfig(c: EvmChainConfig): EvmChain {
  const label = chainLabel(c);
  return {
    chainId: c.chain_id,
    label,
    client: createChainClient(c.rpc_url, { timeoutMs: c.rpc_timeout_ms, label }),
    confirmations: c.confirmations,
    finality: c.finality,
    pollSeconds: c.poll_seconds,
    config: c,
  };
}

export type ChainChoice = { ok: true; chain: EvmChain } | { ok: false; code: string; detail: string };

/** The configured chains, by chain id. */
export class EvmChains {
  readonly #byId = new Map<number, EvmChain>();

  constructor(chains: Iterable<EvmChain>) {
    for (const c of chains) {
      if (this.#byId.has(c.chainId)) throw new Error(`chain ${c.chainId} is configured twice`);
      this.#byId.set(c.chainId, c);
    }
  }

  get(chainId: number): EvmChain | undefined {
    return this.#byId.get(chainId);
  }

  all(): EvmChain[] {
    return [...this.#byId.values()].sort((a, b) => a.chainId - b.chainId);
  }

  get size(): number {
    return this.#byId.size;
  }

  /**
   * The chain a node runs on: `chain_id` from its config, else from its executor or signer
   * binding; with none of them and one chain configured, that chain. Two sources that disagree
   * are a plan error, never a guess.
   */
  choose(ctx: Pick<ExecutionContext, 'node_config' | 'resolved_bindings'>): ChainChoice {
    const sources: Array<[string, unknown]> = [
      ['node config', ctx.node_config.chain_id],
      ['executor binding', ctx.resolved_bindings.executor?.chain_id],
      ['signer binding', ctx.resolved_bindings.signer?.chain_id],
    ];
    let chosen: { id: number; from: string } | null = null;
    for (const [from, raw] of sources) {
      if (raw === undefined || raw === null) continue;
      const id = typeof raw === 'string' && /^[0-9]+$/.test(raw) ? Number(raw) : raw;
      if (typeof id !== 'number' || !Number.isSafeInteger(id) || id <= 0) {
        return { ok: false, code: 'EVM_CHAIN_MISMATCH', detail: `the ${from}'s chain_id is not a positive integer` };
      }
      if (chosen && chosen.id !== id) {
        return { ok: false, code: 'EVM_CHAIN_MISMATCH', detail: `the ${chosen.from} names chain ${chosen.id}, the ${from} chain ${id}` };
      }
      chosen ??= { id, from };
    }
    if (!chosen) {
      const only = this.all();
      if (only.length === 1) return { ok: true, chain: only[0]! };
      return { ok: false, code: 'EVM_CHAIN_REQUIRED', detail: `${only.length} chains are configured: the node must name its chain_id` };
    }
    const chain = this.#byId.get(chosen.id);
    if (!chain) return { ok: false, code: 'EVM_CHAIN_NOT_CONFIGURED', detail: `chain ${chosen.id} is not configured` };
    return { ok: true, chain };
  }
}
