import type { EvmLaneState } from '../evm/lane.ts';
import type { LaneDefinition } from '../lane.ts';
import { HyperliquidSectionSchema, refineHyperliquid } from './config.ts';

/** The Hyperliquid lane (docs/hyperliquid-lane.md): USDC top-ups through Bridge2, credited as the info API shows. */
export const hyperliquidLane: LaneDefinition<Record<never, never>, { hyperliquid: typeof HyperliquidSectionSchema }> = {
  name: 'hyperliquid',
  summary: "USDC top-ups of a Hyperliquid account: a Bridge2 deposit on Arbitrum, then the credit read from the info API",
  docs: 'docs/hyperliquid-lane.md',
  requires: ['evm'],
  env: {},
  fileSections: { hyperliquid: HyperliquidSectionSchema },
  refineFile: refineHyperliquid,
  executorKeys: ['exec.hyperliquid.topup', 'exec.observe.hyperliquid_credit'],
  signerKeys: [],
  observeIntervals: [{ executorKey: 'exec.observe.hyperliquid_credit', defaultSeconds: 5, setBy: 'hyperliquid.poll_seconds' }],
  async register(ctx) {
    const { registerHyperliquidLane } = await import('./index.ts');
    const evm = (ctx.lanes.evm ?? null) as EvmLaneState | null;
    return registerHyperliquidLane(ctx.config.file, evm?.lane ?? null, ctx.executors, { log: ctx.log, nonces: evm?.nonces ?? null });
  },
  sweeps: [],
  // Bridge2 is a contract on its chain.
  registryBaselines(file) {
    const hl = (file.hyperliquid ?? null) as { chain_id: number; bridge: string } | null;
    return hl ? [{ chainId: hl.chain_id, subject: 'hyperliquid.bridge', address: hl.bridge, property: 'code' as const, expected: 'code' }] : [];
  },
  templates: [{ key: 'hyperliquid_topup', summary: 'deposit USDC to Hyperliquid through Bridge2, then wait for the credit (sandbox)' }],
};
