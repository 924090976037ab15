import { z } from 'zod';
import { ADDRESS } from '../../config-schemas.ts';

/**
 * The USDT0 lane's configuration (docs/usdt0-lane.md): the `usdt0` section of the configuration
 * file. Each deployment is one chain's OFT (an OFT adapter locking USDT on Ethereum, an OFT minting
 * and burning it elsewhere), on one of the EVM lane's chains, with its LayerZero endpoint id. A send
 * from one deployment to another expects the source OFT's peer for the destination eid to be the
 * destination deployment's OFT (checked on the chain before anything is signed).
 */
export const Usdt0DeploymentSchema = z
  .object({
    /** The chain the OFT lives on; one of evm.chains. */
    chain_id: z.number().int().positive(),
    /** Its LayerZero v2 endpoint id (Ethereum 30101, Arbitrum 30110, ...). */
    eid: z.number().int().positive().max(0xffffffff),
    /** The OFT (or OFT adapter) contract: `send` and `quoteSend` are called on it, OFTReceived is read from it. */
    oft: z.string().regex(ADDRESS, 'a 0x-prefixed 20-byte address'),
    /** The token it moves, by its symbol in evm.tokens for chain_id (its decimals come from there). */
    token: z.string().min(1).max(64).default('USDT0'),
  })
  .strict();

export const Usdt0Schema = z
  .object({
    deployments: z.array(Usdt0DeploymentSchema).min(1),
    /** Seconds until the credit observer looks again on the destination chain. */
    poll_seconds: z.number().positive().default(5),
    /**
     * Seconds after the send's block after which an undelivered packet is reported late
     * (USDT0_DELIVERY_LATE): the node keeps observing, since the tokens left the source and the
     * packet can still be delivered; sending again would pay twice.
     */
    delivery_timeout_seconds: z.number().positive().default(1800),
    /** Blocks scanned per eth_getLogs request when looking for OFTReceived. */
    log_block_range: z.number().int().positive().default(5000),
  })
  .strict();
export type Usdt0Config = z.output<typeof Usdt0Schema>;
export type Usdt0Deployment = Usdt0Config['deployments'][number];

/** The `usdt0` section: optional (none configured, no executors registered). */
export const Usdt0SectionSchema = Usdt0Schema.optional();

/** Cross-checks with the EVM lane's section: each deployment's chain is configured and its token listed with decimals. */
export function refineUsdt0(file: Readonly<Record<string, unknown>>, ctx: z.RefinementCtx): void {
  const u = file.usdt0 as Usdt0Config | undefined;
  if (!u) return;
  const evm = file.evm as { chains?: Array<{ chain_id: number }>; tokens?: Array<{ chain_id: number; symbol: string; decimals?: number }> } | undefined;
  const eids = new Set<number>();
  const chains = new Set<number>();
  u.deployments.forEach((d, i) => {
    if (eids.has(d.eid)) ctx.addIssue({ code: 'custom', path: ['usdt0', 'deployments', i, 'eid'], message: `eid ${d.eid} is listed twice` });
    eids.add(d.eid);
    if (chains.has(d.chain_id)) ctx.addIssue({ code: 'custom', path: ['usdt0', 'deployments', i, 'chain_id'], message: `chain ${d.chain_id} has two deployments` });
    chains.add(d.chain_id);
    if (!evm?.chains?.some((c) => c.chain_id === d.chain_id)) {
      ctx.addIssue({ code: 'custom', path: ['usdt0', 'deployments', i, 'chain_id'], message: `chain ${d.chain_id} is not in evm.chains` });
      return;
    }
    const token = evm.tokens?.find((t) => t.chain_id === d.chain_id && t.symbol === d.token);
    if (!token) ctx.addIssue({ code: 'custom', path: ['usdt0', 'deployments', i, 'token'], message: `${d.token} is not listed in evm.tokens for chain ${d.chain_id}` });
    else if (token.decimals === undefined) ctx.addIssue({ code: 'custom', path: ['usdt0', 'deployments', i, 'token'], message: `evm.tokens lists ${d.token} on chain ${d.chain_id} without its decimals` });
  });
}
