import { erc20Abi, type PublicClient } from 'viem';
import { balanceClientFor, type BalanceChain } from './clients.ts';
import { BalanceFetchError } from './errors.ts';
import { NATIVE_DECIMALS, type BalanceTarget } from './watch.ts';

/**
 * The balance fetcher registry: one fetcher per kind of balance (`evm_native`, `erc20`, `sim`). A
 * watched entry names its fetcher; a fetcher answers one entry's balance in base units, or throws
 * (a BalanceFetchError naming its class, or an upstream error that errors.ts classifies).
 */

export interface FetchedBalance {
  amount: bigint;
  decimals: number;
}

export interface BalanceFetcher {
  readonly kind: string;
  fetch(target: BalanceTarget): Promise<FetchedBalance>;
}

export class BalanceFetcherRegistry {
  readonly #fetchers = new Map<string, BalanceFetcher>();

  register(fetcher: BalanceFetcher): this {
    this.#fetchers.set(fetcher.kind, fetcher);
    return this;
  }

  get(kind: string): BalanceFetcher | undefined {
    return this.#fetchers.get(kind);
  }

  kinds(): string[] {
    return [...this.#fetchers.keys()];
  }
}

/**
 * One client per configured chain, made on first use. Before its first answer is trusted, the
 * endpoint must say it serves the configured chain id (an RPC URL pointing at another chain would
 * otherwise report that chain's balances under this one's name).
 */
export class EvmChainClients {
  #chains = new Map<number, BalanceChain>();
  readonly #clients = new Map<number, PublicClient>();
  readonly #verified = new Set<number>();

  constructor(
    chains: Map<number, BalanceChain> = new Map(),
    private readonly factory: (chain: BalanceChain) => PublicClient = balanceClientFor,
  ) {
    this.update(chains);
  }

  /** Takes a new set of chains (the legacy chain joins once its id is known). */
  update(chains: Map<number, BalanceChain>): void {
    this.#chains = new Map(chains);
  }

  async client(chainId: number): Promise<PublicClient> {
    const chain = this.#chains.get(chainId);
    if (!chain) throw new BalanceFetchError('FETCH_FAILED', `chain ${chainId} is not configured`);
    let client = this.#clients.get(chainId);
    if (!client) {
      client = this.factory(chain);
      this.#clients.set(chainId, client);
    }
    if (!this.#verified.has(chainId)) {
      const served = await client.getChainId();
      if (served !== chainId) throw new BalanceFetchError('CHAIN_MISMATCH', `the RPC endpoint of chain ${chainId} serves chain ${served}`);
      this.#verified.add(chainId);
    }
    return client;
  }
}

function requireChain(target: BalanceTarget): number {
  if (target.chainId === undefined) throw new BalanceFetchError('FETCH_FAILED', `${target.chain} is not an EVM chain`);
  return target.chainId;
}

/** The native coin: eth_getBalance at the latest block, 18 decimals. */
export class EvmNativeBalanceFetcher implements BalanceFetcher {
  readonly kind = 'evm_native';
  constructor(private readonly clients: EvmChainClients) {}

  async fetch(target: BalanceTarget): Promise<FetchedBalance> {
    const client = await this.clients.client(requireChain(target));
    const amount = await client.getBalance({ address: target.wallet as `0x${string}` });
    return { amount, decimals: NATIVE_DECIMALS };
  }
}

/**
 * An ERC-20 token: balanceOf(wallet), with decimals() read from the contract once per process. When
 * the configuration gives decimals, the contract must agree, or the balance is refused rather than
 * shown at the wrong scale.
 */
export class Erc20BalanceFetcher implements BalanceFetcher {
  readonly kind = 'erc20';
  readonly #decimals = new Map<string, number>();
  constructor(private readonly clients: EvmChainClients) {}

  async fetch(target: BalanceTarget): Promise<FetchedBalance> {
    const chainId = requireChain(target);
    if (!target.token) throw new BalanceFetchError('FETCH_FAILED', `${target.asset} has no token contract`);
    const client = await this.clients.client(chainId);
    const token = target.token.address;
    const cacheKey = `${chainId}:${token.toLowerCase()}`;
    let decimals = this.#decimals.get(cacheKey);
    if (decimals === undefined) {
      decimals = await client.readContract({ address: token, abi: erc20Abi, functionName: 'decimals' });
      this.#decimals.set(cacheKey, decimals);
    }
    if (target.token.decimals !== undefined && target.token.decimals !== decimals) {
      throw new BalanceFetchError(
        'TOKEN_DECIMALS_MISMATCH',
        `token ${target.symbol ?? token} on chain ${chainId}: configured with ${target.token.decimals} decimals, the contract says ${decimals}`,
      );
    }
    const amount = await client.readContract({
      address: token,
      abi: erc20Abi,
      functionName: 'balanceOf',
      args: [target.wallet as `0x${string}`],
    });
    return { amount, decimals };
  }
}

/**
 * The simulation lane keeps no balances of its own (its ledger records calls, not money), so its
 * fetcher answers what `sim.balances` in the configuration file scripts, failures included.
 */
export class SimBalanceFetcher implements BalanceFetcher {
  readonly kind = 'sim';

  async fetch(target: BalanceTarget): Promise<FetchedBalance> {
    if (!target.sim) throw new BalanceFetchError('FETCH_FAILED', `${target.wallet}/${target.asset} has no sim script`);
    if (target.sim.fail) throw new BalanceFetchError('SIM_SCRIPTED_FAILURE', `scripted failure for ${target.wallet}/${target.asset}`);
    return { amount: target.sim.amountBaseUnits, decimals: target.sim.decimals };
  }
}

/**
 * The fetchers of a list of lanes over one set of chain clients (each lane's balanceFetchers,
 * src/executors/<lane>/lane.ts): by default every lane's (evm_native and erc20 of the EVM lane, sim).
 */
export function createBalanceFetchers(
  clients: EvmChainClients,
  lanes: ReadonlyArray<{ balanceFetchers?(clients: EvmChainClients): BalanceFetcher[] }>,
): BalanceFetcherRegistry {
  const registry = new BalanceFetcherRegistry();
  for (const lane of lanes) for (const fetcher of lane.balanceFetchers?.(clients) ?? []) registry.register(fetcher);
  return registry;
}
