import { erc20Abi, getAddress, isAddress } from 'viem';
import { BalanceFetchError } from '../../balances/errors.ts';
import type { BalanceFetcher, EvmChainClients, FetchedBalance } from '../../balances/fetchers.ts';
import type { BalanceTarget } from '../../balances/watch.ts';
import type { EvmTokenConfig } from '../../config-file.ts';
import { toBaseUnits } from '../evm/amounts.ts';
import { GatewayApiClient } from './api.ts';
import { GATEWAY_LANE } from './common.ts';
import type { GatewayConfig } from './config.ts';

/**
 * Gateway balances in the balance snapshots (docs/balances.md): each `gateway.watch` depositor on
 * each domain of `gateway.chains`, as Gateway's API counts it (`POST /v1/balances`: the available
 * balance, finalized deposits only), the way production reads it. Chain `gateway:<domain>`, so an
 * API that does not answer marks only Gateway balances; asset the chain's token address.
 */

export const GATEWAY_FETCHER = 'gateway';
export const gatewayChainKey = (domain: number): string => `gateway:${domain}`;

/** The watch plan's Gateway entries from the `gateway` section (none without one, or without `watch`). */
export function gatewayBalanceTargets(file: Readonly<Record<string, unknown>>): BalanceTarget[] {
  const g = file.gateway as GatewayConfig | undefined;
  if (!g || g.watch.length === 0) return [];
  const tokens = ((file.evm as { tokens?: EvmTokenConfig[] } | undefined)?.tokens ?? []).filter((t) => t.symbol === g.token);
  const targets: BalanceTarget[] = [];
  for (const ch of g.chains) {
    const token = tokens.find((t) => t.chain_id === ch.chain_id);
    // refineGateway requires the token with its decimals on every chain of the section.
    if (!token || token.decimals === undefined || !isAddress(token.address, { strict: false })) continue;
    for (const w of g.watch) {
      targets.push({
        chain: gatewayChainKey(ch.domain),
        wallet: w.depositor.toLowerCase(),
        asset: token.address.toLowerCase(),
        lane: GATEWAY_LANE,
        fetcher: GATEWAY_FETCHER,
        symbol: g.token,
        label: w.label ?? null,
        chainId: ch.chain_id,
        token: { address: getAddress(token.address), decimals: token.decimals },
        gateway: { apiUrl: g.api_url, timeoutMs: g.request_timeout_ms, domain: ch.domain },
      });
    }
  }
  return targets;
}

/**
 * Asks the API for one depositor on one domain and reads its answer strictly: the token asked, one
 * entry of that domain and depositor, a decimal string with no more fractional digits than the
 * token has. The scale is the configured decimals, which the chain's token contract must confirm
 * (read once per process, as the erc20 fetcher does), so a balance is never shown at the wrong one.
 */
export class GatewayBalanceFetcher implements BalanceFetcher {
  readonly kind = GATEWAY_FETCHER;
  readonly #apis = new Map<string, GatewayApiClient>();
  readonly #confirmed = new Set<string>();
  constructor(private readonly clients: EvmChainClients) {}

  async fetch(target: BalanceTarget): Promise<FetchedBalance> {
    const g = target.gateway;
    if (!g || !target.token || target.chainId === undefined || target.token.decimals === undefined) {
      throw new BalanceFetchError('FETCH_FAILED', `${target.chain}/${target.wallet} has no Gateway domain or token`);
    }
    const decimals = target.token.decimals;
    await this.#confirmDecimals(target.chainId, target.token.address, decimals, target.symbol);

    const api = this.#api(g.apiUrl, g.timeoutMs);
    const answer = await api.balances(target.wallet, g.domain);
    if (answer.kind === 'unavailable') throw new BalanceFetchError('GATEWAY_API_UNAVAILABLE', `the Gateway API did not answer for domain ${g.domain}`);
    if (answer.kind === 'refused') throw new BalanceFetchError('GATEWAY_API_REFUSED', `the Gateway API refused the balance of domain ${g.domain} (${answer.status})`);
    const body = answer.body as { token?: unknown; balances?: unknown };
    if (body?.token !== 'USDC' || !Array.isArray(body.balances)) throw new BalanceFetchError('GATEWAY_ANSWER_INVALID', 'the answer is not {token: "USDC", balances: [...]}');
    const entries = (body.balances as Array<{ domain?: unknown; depositor?: unknown; balance?: unknown }>).filter(
      (b) => b?.domain === g.domain && typeof b.depositor === 'string' && b.depositor.toLowerCase() === target.wallet,
    );
    if (entries.length !== 1) throw new BalanceFetchError('GATEWAY_ANSWER_INVALID', `the answer holds ${entries.length} balances of the depositor on domain ${g.domain}, not one`);
    const text = entries[0]!.balance;
    const amount = typeof text === 'string' ? toBaseUnits(text, decimals) : null;
    if (!amount || !amount.ok) throw new BalanceFetchError('GATEWAY_ANSWER_INVALID', `the balance on domain ${g.domain} is not a decimal string of at most ${decimals} fractional digits`);
    return { amount: amount.value, decimals };
  }

  #api(apiUrl: string, timeoutMs: number): GatewayApiClient {
    const key = `${apiUrl}\u0000${timeoutMs}`;
    let api = this.#apis.get(key);
    if (!api) {
      api = new GatewayApiClient({ api_url: apiUrl, request_timeout_ms: timeoutMs });
      this.#apis.set(key, api);
    }
    return api;
  }

  async #confirmDecimals(chainId: number, token: `0x${string}`, configured: number, symbol: string | null): Promise<void> {
    const key = `${chainId}:${token.toLowerCase()}`;
    if (this.#confirmed.has(key)) return;
    const client = await this.clients.client(chainId);
    const onChain = await client.readContract({ address: token, abi: erc20Abi, functionName: 'decimals' });
    if (onChain !== configured) {
      throw new BalanceFetchError('TOKEN_DECIMALS_MISMATCH', `token ${symbol ?? token} on chain ${chainId}: configured with ${configured} decimals, the contract says ${onChain}`);
    }
    this.#confirmed.add(key);
  }
}
