import { createPublicClient, http, type PublicClient } from 'viem';
import type { EvmChainConfig } from '../config-file.ts';

/**
 * The JSON-RPC client the balance fetchers use for one chain, made from its configuration entry.
 * One function, so the lane's shared chain clients can take its place: no retries beyond one (a
 * fetch that fails is simply tried again on the next interval) and no cached answers.
 */
export type BalanceChain = Pick<EvmChainConfig, 'chain_id' | 'rpc_url'> & Partial<Pick<EvmChainConfig, 'rpc_timeout_ms'>>;

export function balanceClientFor(chain: BalanceChain): PublicClient {
  return createPublicClient({
    cacheTime: 0,
    transport: http(chain.rpc_url, { timeout: chain.rpc_timeout_ms ?? 10_000, retryCount: 1 }),
  });
}
