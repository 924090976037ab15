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
  // Each chain's messenger and transmitter are contracts; the transmitter is of the configured
  // domain, and the messenger's transmitter is the configured one.
  registryBaselines(file) {
    const chains = ((file.evm ?? {}) as { chains?: Array<{ chain_id: number; cctp?: { domain: number; token_messenger: string; message_transmitter: string } }> }).chains ?? [];
    return chains.flatMap((c) => {
      if (!c.cctp) return [];
      const base = `evm.chains[${c.chain_id}].cctp`;
      const messenger = { chainId: c.chain_id, subject: `${base}.token_messenger`, address: c.cctp.token_messenger };
      const transmitter = { chainId: c.chain_id, subject: `${base}.message_transmitter`, address: c.cctp.message_transmitter };
      return [
        { ...messenger, property: 'code' as const, expected: 'code' },
        { ...messenger, property: { name: 'localMessageTransmitter()', signature: 'function localMessageTransmitter() view returns (address)' }, expected: c.cctp.message_transmitter.toLowerCase() },
        { ...transmitter, property: 'code' as const, expected: 'code' },
        { ...transmitter, property: { name: 'localDomain()', signature: 'function localDomain() view returns (uint32)' }, expected: String(c.cctp.domain) },
      ];
    });
  },
  templates: [{ key: 'cctp_bridge', summary: 'burn on one chain, wait for the attestation, mint on the other (sandbox)' }],
};
