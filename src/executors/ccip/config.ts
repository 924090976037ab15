import { z } from 'zod';
import { ADDRESS, bool, count, seconds, type ConfigField } from '../../config-schemas.ts';

/** Environment variable name -> config key, with its schema: the stranded-send reaper (docs/ccip-lane.md, "Stranded sends") and ccip_drift. */
export const ccipVariables = {
  FERRY_CCIP_STRANDED_REAPER_ENABLED: ['ccipStrandedReaperEnabled', bool.default(true)],
  FERRY_CCIP_STRANDED_REAPER_INTERVAL_SECONDS: ['ccipStrandedReaperIntervalSeconds', seconds(60)],
  FERRY_CCIP_STRANDED_REAPER_BATCH_SIZE: ['ccipStrandedReaperBatchSize', count(50)],
  // ccip_drift (docs/ccip-lane.md, "Drift"): the Routers' lanes and the token pools read on chain and compared with the section.
  FERRY_CCIP_DRIFT_ENABLED: ['ccipDriftEnabled', bool.default(true)],
  FERRY_CCIP_DRIFT_INTERVAL_SECONDS: ['ccipDriftIntervalSeconds', seconds(900)],
  FERRY_CCIP_DRIFT_TIMEOUT_MS: ['ccipDriftTimeoutMs', count(10_000)],
} as const satisfies Record<string, ConfigField>;

/**
 * The CCIP lane's configuration (docs/ccip-lane.md): the `ccip` section of the configuration file.
 * Each entry is one of the EVM lane's chains with its CCIP chain selector, its Router (where sends
 * start) and its OffRamp (where messages to it are executed, read by the delivery observer). A chain
 * selector is a uint64 (Ethereum 5009297550715157269): written as a quoted decimal string, since a
 * YAML or JSON number loses precision above 2^53.
 */
const SELECTOR = z
  .union([z.string().regex(/^[0-9]{1,20}$/, 'a decimal uint64'), z.number().int().positive().max(Number.MAX_SAFE_INTEGER)])
  .transform((v) => String(BigInt(v)))
  .refine((v) => BigInt(v) > 0n && BigInt(v) < 2n ** 64n, 'a chain selector is a non-zero uint64');

export const CcipChainSchema = z
  .object({
    /** The chain; one of evm.chains. */
    chain_id: z.number().int().positive(),
    /** Its CCIP chain selector (chain-selectors' selectors.yml). */
    selector: SELECTOR,
    /** The Router: getFee, isChainSupported and ccipSend are called on it; it pulls the tokens sent. */
    router: z.string().regex(ADDRESS, 'a 0x-prefixed 20-byte address'),
    /** The OffRamp executing messages to this chain: the delivery observer reads the execution state there. Unset: deliveries to this chain cannot be observed. */
    off_ramp: z.string().regex(ADDRESS, 'a 0x-prefixed 20-byte address').optional(),
    /**
     * The chain's TokenAdminRegistry, where the OnRamp looks up each token's pool: ccip_drift reads
     * getPool(token) there and compares it with token_pools. Unset: the pools are not checked there.
     */
    token_admin_registry: z.string().regex(ADDRESS, 'a 0x-prefixed 20-byte address').optional(),
    /**
     * The token pool of each token of ccip.tokens on this chain (by symbol), as the operator
     * reviewed it: the Router pays the tokens sent into it. ccip_drift checks it is the registry's
     * pool for the token, that it is the token's (getToken) and that it supports every other chain
     * of the section (isSupportedChain). Unset: no pool is checked.
     */
    token_pools: z.record(z.string().min(1).max(64), z.string().regex(ADDRESS, 'a 0x-prefixed 20-byte address')).optional(),
  })
  .strict();

export const CcipSchema = z
  .object({
    chains: z.array(CcipChainSchema).min(1),
    /** Tokens the lane moves, by their symbol in evm.tokens (on the source and on the destination chain). */
    tokens: z.array(z.string().min(1).max(64)).min(1),
    /**
     * Tokens a send may pay its fee in instead of native coin (config.fee_token), by their symbol in
     * evm.tokens (LINK): the Router pulls getFee() of it with transferFrom, so a plan pays it after a
     * fee approval node (exec.ccip.fee_approval) allows the Router the cap. Empty: native only.
     */
    fee_tokens: z.array(z.string().min(1).max(64)).default([]),
    /** Seconds until the delivery observer looks again on the destination chain. */
    poll_seconds: z.number().positive().default(5),
    /**
     * Seconds after the send's block after which an unexecuted message is reported late
     * (CCIP_DELIVERY_LATE): the node keeps observing, since the fee is paid and the tokens left the
     * source; sending again would pay twice.
     */
    delivery_timeout_seconds: z.number().positive().default(1800),
    /**
     * Seconds after which a send with no successful execution is stranded: the reaper of the core
     * group asks a person (ccip_stranded_reaper). Chainlink's smart execution gives up after
     * 8 h, when manual execution opens; the default is that.
     */
    stranded_after_seconds: z.number().positive().default(8 * 3600),
    /** Blocks scanned per eth_getLogs request when looking for ExecutionStateChanged. */
    log_block_range: z.number().int().positive().default(5000),
  })
  .strict();
export type CcipConfig = z.output<typeof CcipSchema>;
export type CcipChain = CcipConfig['chains'][number];

/** The `ccip` section: optional (none configured, no executors registered). */
export const CcipSectionSchema = CcipSchema.optional();

/** Cross-checks with the EVM lane's section: each chain configured, one entry and one selector per chain, each token listed with decimals on each chain. */
export function refineCcip(file: Readonly<Record<string, unknown>>, ctx: z.RefinementCtx): void {
  const c = file.ccip as CcipConfig | undefined;
  if (!c) return;
  const evm = file.evm as { chains?: Array<{ chain_id: number }>; tokens?: Array<{ chain_id: number; symbol: string; decimals?: number }> } | undefined;
  const selectors = new Set<string>();
  const chains = new Set<number>();
  c.chains.forEach((ch, i) => {
    if (selectors.has(ch.selector)) ctx.addIssue({ code: 'custom', path: ['ccip', 'chains', i, 'selector'], message: `selector ${ch.selector} is listed twice` });
    selectors.add(ch.selector);
    if (chains.has(ch.chain_id)) ctx.addIssue({ code: 'custom', path: ['ccip', 'chains', i, 'chain_id'], message: `chain ${ch.chain_id} is listed twice` });
    chains.add(ch.chain_id);
    if (!evm?.chains?.some((e) => e.chain_id === ch.chain_id)) {
      ctx.addIssue({ code: 'custom', path: ['ccip', 'chains', i, 'chain_id'], message: `chain ${ch.chain_id} is not in evm.chains` });
      return;
    }
    for (const symbol of Object.keys(ch.token_pools ?? {})) {
      if (!c.tokens.includes(symbol)) ctx.addIssue({ code: 'custom', path: ['ccip', 'chains', i, 'token_pools', symbol], message: `${symbol} is not one of ccip.tokens` });
    }
    for (const symbol of c.fee_tokens ?? []) {
      if (c.tokens.includes(symbol)) ctx.addIssue({ code: 'custom', path: ['ccip', 'fee_tokens'], message: `${symbol} is both sent and a fee token: the Router would pull both from one allowance` });
      const token = evm.tokens?.find((t) => t.chain_id === ch.chain_id && t.symbol === symbol);
      if (!token) ctx.addIssue({ code: 'custom', path: ['ccip', 'fee_tokens'], message: `${symbol} is not listed in evm.tokens for chain ${ch.chain_id}` });
    }
    for (const symbol of c.tokens) {
      const token = evm.tokens?.find((t) => t.chain_id === ch.chain_id && t.symbol === symbol);
      if (!token) ctx.addIssue({ code: 'custom', path: ['ccip', 'tokens'], message: `${symbol} is not listed in evm.tokens for chain ${ch.chain_id}` });
      else if (token.decimals === undefined) ctx.addIssue({ code: 'custom', path: ['ccip', 'tokens'], message: `evm.tokens lists ${symbol} on chain ${ch.chain_id} without its decimals` });
    }
  });
}
