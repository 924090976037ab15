import { z } from 'zod';
import { ADDRESS } from '../../config-schemas.ts';

/**
 * The Hyperliquid lane's configuration (docs/hyperliquid-lane.md): the `hyperliquid` section of the
 * configuration file. A top-up is a USDC transfer to the Bridge2 address on the chain standing for
 * Arbitrum (one of the EVM lane's chains), credited by Hyperliquid to the sending address; the info
 * API is where the credit is read.
 */
export const HyperliquidSchema = z
  .object({
    /** The chain the bridge lives on (Arbitrum One is 42161); one of evm.chains. */
    chain_id: z.number().int().positive(),
    /** The Bridge2 address deposits are sent to (Arbitrum One: 0x2df1c51e09aecf9cacb7bc98cb1742757f163df7). */
    bridge: z.string().regex(ADDRESS, 'a 0x-prefixed 20-byte address'),
    /** The info API's URL, POST with a JSON body (https://api.hyperliquid.xyz/info). */
    info_url: z.string().url(),
    /** The symbol of the deposited token in evm.tokens for chain_id (native USDC). */
    token: z.string().min(1).max(64).default('USDC'),
    /** Seconds until the credit observer asks again. */
    poll_seconds: z.number().positive().default(5),
    /** Timeout of one info API request, in milliseconds. */
    timeout_ms: z.number().int().positive().default(10_000),
  })
  .strict();
export type HyperliquidConfig = z.output<typeof HyperliquidSchema>;

/** The `hyperliquid` section: optional (none configured, no executors registered). */
export const HyperliquidSectionSchema = HyperliquidSchema.optional();

/** Hyperliquid never credits a deposit under 5 USDC, and the funds are lost (Bridge2 docs). In token units. */
export const HYPERLIQUID_MIN_DEPOSIT = 5n;

/**
 * Cross-checks with the EVM lane's section: the bridge's chain is configured and the token is listed
 * for it with its decimals (the signer's expected effect takes decimals from the configuration only).
 */
export function refineHyperliquid(file: Readonly<Record<string, unknown>>, ctx: z.RefinementCtx): void {
  const hl = file.hyperliquid as HyperliquidConfig | undefined;
  if (!hl) return;
  const evm = file.evm as { chains?: Array<{ chain_id: number }>; tokens?: Array<{ chain_id: number; symbol: string; decimals?: number }> } | undefined;
  if (!evm?.chains?.some((c) => c.chain_id === hl.chain_id)) {
    ctx.addIssue({ code: 'custom', path: ['hyperliquid', 'chain_id'], message: `chain ${hl.chain_id} is not in evm.chains` });
    return;
  }
  const token = evm.tokens?.find((t) => t.chain_id === hl.chain_id && t.symbol === hl.token);
  if (!token) ctx.addIssue({ code: 'custom', path: ['hyperliquid', 'token'], message: `${hl.token} is not listed in evm.tokens for chain ${hl.chain_id}` });
  else if (token.decimals === undefined) ctx.addIssue({ code: 'custom', path: ['hyperliquid', 'token'], message: `evm.tokens lists ${hl.token} on chain ${hl.chain_id} without its decimals` });
}
