import { z } from 'zod';
import { ADDRESS } from '../../config-schemas.ts';

/**
 * The Circle Gateway lane's configuration (docs/gateway-lane.md): the `gateway` section of the
 * configuration file. Each entry is one of the EVM lane's chains with its Gateway domain (the CCTP
 * domain id), its GatewayWallet (deposits, the unified balance, burns) and its GatewayMinter
 * (mints); the API is Circle's (https://gateway-api.circle.com, or the testnet's).
 */
export const GatewayChainSchema = z
  .object({
    /** The chain; one of evm.chains. */
    chain_id: z.number().int().positive(),
    /** Its Gateway domain (Ethereum 0, Avalanche 1, OP 2, Arbitrum 3, Base 6, Polygon PoS 7, ...). */
    domain: z.number().int().min(0).max(0xffffffff),
    /** The GatewayWallet: approved as the spender, deposit is called on it; the burn intent's sourceContract. */
    wallet: z.string().regex(ADDRESS, 'a 0x-prefixed 20-byte address'),
    /** The GatewayMinter: gatewayMint is called on it; the burn intent's destinationContract. */
    minter: z.string().regex(ADDRESS, 'a 0x-prefixed 20-byte address'),
  })
  .strict();

export const GatewaySchema = z
  .object({
    /** The Gateway API's base URL (no trailing path): /v1/balances and /v1/transfer are called under it. */
    api_url: z.string().url(),
    /** The token moved (USDC), by its symbol in evm.tokens on each chain of the section. */
    token: z.string().min(1).max(64).default('USDC'),
    chains: z.array(GatewayChainSchema).min(1),
    /** Seconds until an observer (deposit credit, burn) looks again. */
    poll_seconds: z.number().positive().default(5),
    /** Milliseconds an API call may take before it is abandoned (a transfer is then asked again with the same signed intent). */
    request_timeout_ms: z.number().int().positive().default(15_000),
    /** Source-chain blocks a burn intent stays valid after it is prepared (its maxBlockHeight is the head plus this). */
    intent_validity_blocks: z.number().int().positive().max(10_000_000).default(50_400),
    /** Blocks scanned per eth_getLogs request when looking for GatewayBurned. */
    log_block_range: z.number().int().positive().default(5000),
    /** Depositors whose Gateway balance the balance snapshots watch, on each domain of `chains` (docs/balances.md). */
    watch: z
      .array(
        z
          .object({
            depositor: z.string().regex(ADDRESS, 'a 0x-prefixed 20-byte address'),
            label: z.string().min(1).max(64).optional(),
          })
          .strict(),
      )
      .default([]),
  })
  .strict();
export type GatewayConfig = z.output<typeof GatewaySchema>;
export type GatewayChain = GatewayConfig['chains'][number];

/** The `gateway` section: optional (none configured, no executors registered). */
export const GatewaySectionSchema = GatewaySchema.optional();

/** Cross-checks with the EVM lane's section: each chain configured once, one entry per domain, the token listed with decimals on each chain. */
export function refineGateway(file: Readonly<Record<string, unknown>>, ctx: z.RefinementCtx): void {
  const g = file.gateway as GatewayConfig | undefined;
  if (!g) return;
  const evm = file.evm as { chains?: Array<{ chain_id: number }>; tokens?: Array<{ chain_id: number; symbol: string; decimals?: number }> } | undefined;
  const domains = new Set<number>();
  const chains = new Set<number>();
  g.chains.forEach((ch, i) => {
    if (domains.has(ch.domain)) ctx.addIssue({ code: 'custom', path: ['gateway', 'chains', i, 'domain'], message: `domain ${ch.domain} is listed twice` });
    domains.add(ch.domain);
    if (chains.has(ch.chain_id)) ctx.addIssue({ code: 'custom', path: ['gateway', 'chains', i, 'chain_id'], message: `chain ${ch.chain_id} is listed twice` });
    chains.add(ch.chain_id);
    if (!evm?.chains?.some((e) => e.chain_id === ch.chain_id)) {
      ctx.addIssue({ code: 'custom', path: ['gateway', 'chains', i, 'chain_id'], message: `chain ${ch.chain_id} is not in evm.chains` });
      return;
    }
    const token = evm.tokens?.find((t) => t.chain_id === ch.chain_id && t.symbol === g.token);
    if (!token) ctx.addIssue({ code: 'custom', path: ['gateway', 'token'], message: `${g.token} is not listed in evm.tokens for chain ${ch.chain_id}` });
    else if (token.decimals === undefined) ctx.addIssue({ code: 'custom', path: ['gateway', 'token'], message: `evm.tokens lists ${g.token} on chain ${ch.chain_id} without its decimals` });
  });
}
