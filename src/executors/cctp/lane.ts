import type { LaneDefinition } from '../lane.ts';
import type { EvmLaneState } from '../evm/lane.ts';
import { CctpSectionSchema } from './config.ts';

/** The CCTP v2 lane (docs/cctp-lane.md): burn, attestation, mint, on the EVM lane's chains with a cctp entry. */
export const cctpLane: LaneDefinition<Record<never, never>, { cctp: typeof CctpSectionSchema }> = {
  name: 'cctp',
  summary: "USDC across chains with Circle's CCTP v2: burn, attestation, mint",
  docs: 'docs/cctp-lane.md',
  requires: ['evm'],
  env: {},
  fileSections: { cctp: CctpSectionSchema },
  // A chain's CCTP deployment is written in its EVM chain entry (src/executors/cctp/config.ts).
  nestedFields: [{ section: 'evm', list: 'chains', field: 'cctp' }],
  executorKeys: ['exec.cctp.burn', 'exec.cctp.mint', 'exec.observe.cctp_attestation'],
  signerKeys: [],
  recoveryPriority: 1,
  observeIntervals: [{ executorKey: 'exec.observe.cctp_attestation', defaultSeconds: 5, setBy: 'cctp.poll_seconds' }],
  async register(ctx) {
    const { registerCctpLane } = await import('./index.ts');
    // On the EVM lane's chains that have a cctp entry.
    const evm = (ctx.lanes.evm ?? null) as EvmLaneState | null;
    return registerCctpLane(ctx.config.file, evm?.lane ?? null, ctx.executors, { log: ctx.log, nonces: evm?.nonces ?? null });
  },
  sweeps: [],
  templates: [{ key: 'cctp_bridge', summary: 'burn on one chain, wait for the attestation, mint on the other (sandbox)' }],
};
