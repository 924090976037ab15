import type { EvmLaneState } from '../evm/lane.ts';
import type { LaneDefinition } from '../lane.ts';
import { CcipSectionSchema, refineCcip } from './config.ts';

/** The CCIP lane (docs/ccip-lane.md): Chainlink CCIP token sends through the Router, the delivery read from the destination OffRamp by messageId. */
export const ccipLane: LaneDefinition<Record<never, never>, { ccip: typeof CcipSectionSchema }> = {
  name: 'ccip',
  summary: 'Tokens across chains with Chainlink CCIP: getFee and ccipSend on the source Router, the execution state read on the destination OffRamp by messageId',
  docs: 'docs/ccip-lane.md',
  requires: ['evm'],
  env: {},
  fileSections: { ccip: CcipSectionSchema },
  refineFile: refineCcip,
  executorKeys: ['exec.ccip.send', 'exec.observe.ccip_delivery'],
  signerKeys: [],
  observeIntervals: [{ executorKey: 'exec.observe.ccip_delivery', defaultSeconds: 5, setBy: 'ccip.poll_seconds' }],
  async register(ctx) {
    const { registerCcipLane } = await import('./index.ts');
    const evm = (ctx.lanes.evm ?? null) as EvmLaneState | null;
    return registerCcipLane(ctx.config.file, evm?.lane ?? null, ctx.executors, { log: ctx.log, nonces: evm?.nonces ?? null });
  },
  sweeps: [],
  templates: [{ key: 'ccip_send', summary: 'send a token through the CCIP Router on one chain, then wait for its execution on the other (sandbox)' }],
};
