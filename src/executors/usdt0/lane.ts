import type { EvmLaneState } from '../evm/lane.ts';
import type { LaneDefinition } from '../lane.ts';
import { refineUsdt0, Usdt0SectionSchema } from './config.ts';

/** The USDT0 lane (docs/usdt0-lane.md): LayerZero OFT v2 sends, credited on the destination chain as OFTReceived shows. */
export const usdt0Lane: LaneDefinition<Record<never, never>, { usdt0: typeof Usdt0SectionSchema }> = {
  name: 'usdt0',
  summary: 'USDT0 across chains with LayerZero OFT v2: quoteSend and send on one chain, the credit read by its GUID on the other',
  docs: 'docs/usdt0-lane.md',
  requires: ['evm'],
  env: {},
  fileSections: { usdt0: Usdt0SectionSchema },
  refineFile: refineUsdt0,
  executorKeys: ['exec.usdt0.send', 'exec.observe.usdt0_credit'],
  signerKeys: [],
  observeIntervals: [{ executorKey: 'exec.observe.usdt0_credit', defaultSeconds: 5, setBy: 'usdt0.poll_seconds' }],
  async register(ctx) {
    const { registerUsdt0Lane } = await import('./index.ts');
    const evm = (ctx.lanes.evm ?? null) as EvmLaneState | null;
    return registerUsdt0Lane(ctx.config.file, evm?.lane ?? null, ctx.executors, { log: ctx.log, nonces: evm?.nonces ?? null });
  },
  sweeps: [],
  // Each OFT is a contract whose peer for every other deployment's eid is that deployment's OFT.
  registryBaselines(file) {
    const deployments = ((file.usdt0 ?? null) as { deployments: Array<{ chain_id: number; eid: number; oft: string }> } | null)?.deployments ?? [];
    return deployments.flatMap((d) => {
      const at = { chainId: d.chain_id, subject: `usdt0.deployments[${d.eid}].oft`, address: d.oft };
      return [
        { ...at, property: 'code' as const, expected: 'code' },
        ...deployments
          .filter((p) => p.eid !== d.eid)
          .map((p) => ({
            ...at,
            property: { name: `peers(${p.eid})`, signature: 'function peers(uint32) view returns (bytes32)', args: [p.eid] },
            expected: `0x${p.oft.slice(2).toLowerCase().padStart(64, '0')}`,
          })),
      ];
    });
  },
  templates: [{ key: 'usdt0_send', summary: 'send USDT0 through its OFT on one chain, then wait for the credit on the other (sandbox)' }],
};
