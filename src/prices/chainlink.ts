import { createPublicClient, http, type Address, type PublicClient } from 'viem';
import type { ConfigFile, PriceFeedConfig } from '../config-file.ts';
import { priceKey, type PriceReading } from '../policy/rules.ts';
import type { PriceSource } from './price-source.ts';

/**
 * Prices from Chainlink-style data feeds (AggregatorV3Interface), read with viem: `decimals()` once
 * per feed and `latestRoundData()` per reading. The answer is checked the way Chainlink's data feed
 * documentation tells consumers to ("Check the timestamp of the latest answer", "Check for
 * L2 sequencer" aside, and the historical `answeredInRound` check):
 *
 * - `updatedAt` 0 is a round that has not completed: PRICE_ROUND_INCOMPLETE;
 * - `answeredInRound` below `roundId` is an answer carried over from an earlier round: PRICE_ROUND_INCOMPLETE;
 * - an answer of 0 or below is no price: PRICE_NOT_POSITIVE;
 * - an answer updated longer ago than the feed's heartbeat (configured per feed, as the feed's page
 *   on data.chain.link lists it) is stale: PRICE_STALE;
 * - an answer from more than a minute in the future (a clock, or a feed, that is wrong): PRICE_UNREADABLE;
 * - a feed whose decimals differ from the configured ones, an RPC endpoint that serves another
 *   chain, a call that fails or times out: PRICE_UNREADABLE.
 *
 * Nothing is cached but the decimals: every reading asks the chain.
 */

/** Chainlink's AggregatorV3Interface, the two functions read here. */
export const aggregatorV3Abi = [
  { type: 'function', name: 'decimals', stateMutability: 'view', inputs: [], outputs: [{ name: '', type: 'uint8' }] },
  {
    type: 'function',
    name: 'latestRoundData',
    stateMutability: 'view',
    inputs: [],
    outputs: [
      { name: 'roundId', type: 'uint80' },
      { name: 'answer', type: 'int256' },
      { name: 'startedAt', type: 'uint256' },
      { name: 'updatedAt', type: 'uint256' },
      { name: 'answeredInRound', type: 'uint80' },
    ],
  },
] as const;

/** How far in the future an answer's updatedAt may be (clock skew between Ferry and the chain). */
const FUTURE_TOLERANCE_SECONDS = 60n;

export interface ChainlinkOptions {
  /** The chain's client by chain id (throws when the chain is not configured). */
  clientFor: (chainId: number) => Promise<PublicClient>;
}

export class ChainlinkPriceSource implements PriceSource {
  readonly #feeds = new Map<string, PriceFeedConfig>();
  readonly #decimals = new Map<string, number>();

  constructor(
    feeds: readonly PriceFeedConfig[],
    private readonly opts: ChainlinkOptions,
  ) {
    for (const f of feeds) this.#feeds.set(priceKey(f.asset, f.currency), f);
  }

  async read(asset: string, currency: string, at: Date): Promise<PriceReading> {
    const feed = this.#feeds.get(priceKey(asset, currency));
    const where = feed ? `${feed.chain_id}:${feed.address.toLowerCase()}` : null;
    const refuse = (code: string, message: string): PriceReading => ({ ok: false, asset: asset.toUpperCase(), currency, code, message, feed: where });
    if (!feed) return refuse('PRICE_FEED_NOT_CONFIGURED', `no price feed of ${priceKey(asset, currency)} is configured (price_feeds)`);
    let decimals: number;
    let round: readonly [bigint, bigint, bigint, bigint, bigint];
    try {
      const client = await this.opts.clientFor(feed.chain_id);
      const address = feed.address as Address;
      decimals = this.#decimals.get(where!) ?? Number(await client.readContract({ address, abi: aggregatorV3Abi, functionName: 'decimals' }));
      if (feed.decimals !== undefined && decimals !== feed.decimals) {
        return refuse('PRICE_UNREADABLE', `the feed at ${where} answers with ${decimals} decimals, the configuration says ${feed.decimals}`);
      }
      this.#decimals.set(where!, decimals);
      round = await client.readContract({ address, abi: aggregatorV3Abi, functionName: 'latestRoundData' });
    } catch (err) {
      return refuse('PRICE_UNREADABLE', `the feed at ${where} could not be read: ${((err as Error).message ?? String(err)).split('\n')[0]}`);
    }
    const [roundId, answer, , updatedAt, answeredInRound] = round;
    if (updatedAt === 0n) return refuse('PRICE_ROUND_INCOMPLETE', `the latest round (${roundId}) of the feed at ${where} is not complete (updatedAt 0)`);
    if (answeredInRound < roundId) {
      return refuse('PRICE_ROUND_INCOMPLETE', `the latest round (${roundId}) of the feed at ${where} carries the answer of round ${answeredInRound}`);
    }
    if (answer <= 0n) return refuse('PRICE_NOT_POSITIVE', `the feed at ${where} answers ${answer}, not a price`);
    const now = BigInt(Math.floor(at.getTime() / 1000));
    const updated = new Date(Number(updatedAt) * 1000).toISOString();
    if (updatedAt > now + FUTURE_TOLERANCE_SECONDS) return refuse('PRICE_UNREADABLE', `the feed at ${where} answers as of ${updated}, in the future`);
    if (now - updatedAt > BigInt(feed.heartbeat_seconds)) {
      return refuse('PRICE_STALE', `the feed at ${where} was last updated at ${updated}, ${now - updatedAt} s ago, longer than its heartbeat of ${feed.heartbeat_seconds} s`);
    }
    return { ok: true, asset: asset.toUpperCase(), currency, answer: answer.toString(), decimals, round_id: roundId.toString(), updated_at: updated, feed: where! };
  }
}

/**
 * The price source of a configuration: its `price_feeds` read over its `evm.chains` RPC endpoints
 * (each checked, on first use, to serve the chain id it is configured for); null without feeds.
 */
export function priceSourceFromConfig(file: Pick<ConfigFile, 'price_feeds'> & { evm?: { chains: ReadonlyArray<{ chain_id: number; rpc_url: string; rpc_timeout_ms?: number }> } }): ChainlinkPriceSource | null {
  if (file.price_feeds.length === 0) return null;
  const chains = new Map((file.evm?.chains ?? []).map((c) => [c.chain_id, c]));
  const clients = new Map<number, Promise<PublicClient>>();
  const clientFor = (chainId: number): Promise<PublicClient> => {
    let client = clients.get(chainId);
    if (!client) {
      const chain = chains.get(chainId);
      if (!chain) return Promise.reject(new Error(`chain ${chainId} is not in evm.chains`));
      client = (async () => {
        // A price must come from the chain the feed is configured on: refuse an endpoint serving another.
        const c = createPublicClient({ cacheTime: 0, transport: http(chain.rpc_url, { timeout: Math.min(chain.rpc_timeout_ms ?? 5_000, 5_000), retryCount: 0 }) });
        const served = await c.getChainId();
        if (served !== chainId) throw new Error(`the RPC endpoint of chain ${chainId} serves chain ${served}`);
        return c;
      })();
      // A failed first look is tried again next time, not remembered.
      client.catch(() => clients.delete(chainId));
      clients.set(chainId, client);
    }
    return client;
  };
  return new ChainlinkPriceSource(file.price_feeds, { clientFor });
}

const bySource = new WeakMap<object, ChainlinkPriceSource | null>();

/** One price source per configuration file object (its decimals and clients shared by every caller in the process). */
export function priceSourceOf(file: (Pick<ConfigFile, 'price_feeds'> & object) | undefined): PriceSource | null {
  if (!file || !file.price_feeds) return null;
  if (!bySource.has(file)) bySource.set(file, priceSourceFromConfig(file as Parameters<typeof priceSourceFromConfig>[0]));
  return bySource.get(file) ?? null;
}
