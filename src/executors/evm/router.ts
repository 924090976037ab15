import type { Address } from 'viem';
import type { ExecutionContext, ExecutionResult, Executor, PreparedAction, SubmitOptions } from '../protocol.ts';
import type { EvmChain, EvmChains } from './chains.ts';
import { EVM_LANE } from './native-transfer.ts';
import { errorDetail } from './rpc-errors.ts';
import { failed, manual } from './tx-lifecycle.ts';

/** A hot wallet: a registered signer, its address, and the chains it may sign for. */
export interface EvmWallet {
  signerKey: string;
  address: Address;
  chains: readonly number[];
}

export interface EvmRouterOptions {
  executorKey: string;
  chains: EvmChains;
  /** Signing executors: the wallets by signer key (the node's signer binding picks one). Observe-only: null. */
  wallets: ReadonlyMap<string, EvmWallet> | null;
  /** The lane the entry reports (default `evm`; the CCTP lane's entries say `cctp`). */
  lane?: string;
  /** The executor for one chain (and sender); made once per pair, on first use. */
  make: (chain: EvmChain, from: Address | null) => Executor;
}

/**
 * One registry entry per EVM executor key, serving every configured chain: each call goes to the
 * executor of the node's chain (node config `chain_id`, else the binding's, else the only chain)
 * and, for executors that sign, of the wallet its signer binding names. A node the configuration
 * cannot place fails before anything is prepared, with a code saying why.
 */
export class EvmChainRouter implements Executor {
  readonly executorKey: string;
  readonly lane: string;
  readonly #opts: EvmRouterOptions;
  readonly #instances = new Map<string, Executor>();

  constructor(opts: EvmRouterOptions) {
    this.executorKey = opts.executorKey;
    this.lane = opts.lane ?? EVM_LANE;
    this.#opts = opts;
  }

  /** The executor serving a node, or why there is none. */
  target(ctx: Pick<ExecutionContext, 'node_config' | 'resolved_bindings'>): { ok: true; executor: Executor } | { ok: false; code: string; detail: string } {
    const chosen = this.#opts.chains.choose(ctx);
    if (!chosen.ok) return chosen;
    const chain = chosen.chain;
    let from: Address | null = null;
    if (this.#opts.wallets) {
      const signerKey = ctx.resolved_bindings.signer?.signer_key;
      if (!signerKey) return { ok: false, code: 'MISSING_SIGNER_BINDING', detail: `${this.executorKey} signs: the node needs a signer binding` };
      const wallet = this.#opts.wallets.get(signerKey);
      if (!wallet) return { ok: false, code: 'EVM_SIGNER_NOT_CONFIGURED', detail: `signer ${signerKey} is not an EVM wallet of this configuration` };
      if (!wallet.chains.includes(chain.chainId)) {
        return { ok: false, code: 'EVM_SIGNER_CHAIN_NOT_ALLOWED', detail: `signer ${signerKey} may not sign for ${chain.label}` };
      }
      from = wallet.address;
    }
    const key = `${chain.chainId}:${from ?? '-'}`;
    let executor = this.#instances.get(key);
    if (!executor) {
      executor = this.#opts.make(chain, from);
      this.#instances.set(key, executor);
    }
    return { ok: true, executor };
  }

  async preflight(ctx: ExecutionContext): Promise<ExecutionResult | null> {
    const t = this.target(ctx);
    return t.ok ? t.executor.preflight(ctx) : failed(t.code, t.detail);
  }

  async prepare(ctx: ExecutionContext): Promise<ExecutionResult> {
    const t = this.target(ctx);
    return t.ok ? t.executor.prepare(ctx) : failed(t.code, t.detail);
  }

  async submit(ctx: ExecutionContext, prepared: PreparedAction, opts: SubmitOptions): Promise<ExecutionResult> {
    const t = this.target(ctx);
    return t.ok ? t.executor.submit(ctx, prepared, opts) : failed(t.code, t.detail);
  }

  // After submit, a node the configuration no longer places is an operator's question.
  async observe(ctx: ExecutionContext): Promise<ExecutionResult> {
    const t = this.target(ctx);
    return t.ok ? t.executor.observe(ctx) : manual(t.code, t.detail);
  }

  async recover(ctx: ExecutionContext): Promise<ExecutionResult> {
    const t = this.target(ctx);
    return t.ok ? t.executor.recover(ctx) : manual(t.code, t.detail);
  }

  async inspect(ctx: ExecutionContext): Promise<ExecutionResult> {
    const t = this.target(ctx);
    return t.ok ? t.executor.inspect(ctx) : manual(t.code, t.detail);
  }

  async cancel(ctx: ExecutionContext): Promise<ExecutionResult> {
    const t = this.target(ctx);
    if (!t.ok) return manual(t.code, t.detail);
    if (!t.executor.cancel) return failed('CANCEL_NOT_SUPPORTED', `${t.executor.executorKey} does not offer cancel`);
    return t.executor.cancel(ctx);
  }

  async preSubmitCheck(ctx: ExecutionContext, prepared?: PreparedAction): Promise<void> {
    const t = this.target(ctx);
    if (t.ok) await t.executor.preSubmitCheck?.(ctx, prepared);
  }

  /** One row per chain: its head, or why it does not answer (never its URL). Down when any chain is. */
  async health(): Promise<Record<string, unknown>> {
    const chains = await Promise.all(
      this.#opts.chains.all().map(async (c) => {
        try {
          const [chainId, block] = await Promise.all([c.client.getChainId(), c.client.getBlockNumber()]);
          if (chainId !== c.chainId) return { chain_id: c.chainId, ok: false, error: `the RPC serves chain ${chainId}` };
          return { chain_id: c.chainId, ok: true, block_number: Number(block) };
        } catch (err) {
          return { chain_id: c.chainId, ok: false, error: errorDetail(err) };
        }
      }),
    );
    const wallets = this.#opts.wallets ? [...this.#opts.wallets.values()].map((w) => ({ signer_key: w.signerKey, address: w.address, chains: w.chains })) : undefined;
    return { ok: chains.every((c) => c.ok), executor_key: this.executorKey, lane: this.lane, chains, ...(wallets ? { wallets } : {}) };
  }

  async close(): Promise<void> {
    for (const e of this.#instances.values()) await e.close?.().catch(() => {});
  }
}
