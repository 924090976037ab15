import type { EvmLaneState } from '../evm/lane.ts';
import type { LaneDefinition } from '../lane.ts';
import { GatewayBalanceFetcher, gatewayBalanceTargets } from './balances.ts';
import { GatewaySectionSchema, refineGateway, type GatewayConfig } from './config.ts';

/** The Circle Gateway lane (docs/gateway-lane.md): a unified USDC balance in the GatewayWallet, spent by EIP-712 burn intents attested by Gateway's API and minted by the GatewayMinter. */
export const gatewayLane: LaneDefinition<Record<never, never>, { gateway: typeof GatewaySectionSchema }> = {
  name: 'gateway',
  summary: "USDC across chains with Circle Gateway: approve and deposit into the GatewayWallet, an EIP-712 burn intent attested by Gateway's API, gatewayMint on the destination",
  docs: 'docs/gateway-lane.md',
  requires: ['evm'],
  env: {},
  fileSections: { gateway: GatewaySectionSchema },
  refineFile: refineGateway,
  executorKeys: ['exec.gateway.approve', 'exec.gateway.deposit', 'exec.gateway.intent', 'exec.gateway.mint', 'exec.observe.gateway_deposit', 'exec.observe.gateway_burn'],
  signerKeys: [],
  observeIntervals: [
    { executorKey: 'exec.observe.gateway_deposit', defaultSeconds: 5, setBy: 'gateway.poll_seconds' },
    { executorKey: 'exec.observe.gateway_burn', defaultSeconds: 5, setBy: 'gateway.poll_seconds' },
  ],
  async register(ctx) {
    const { registerGatewayLane } = await import('./index.ts');
    const evm = (ctx.lanes.evm ?? null) as EvmLaneState | null;
    return registerGatewayLane(ctx.config.file, evm?.lane ?? null, ctx.executors, { log: ctx.log, nonces: evm?.nonces ?? null });
  },
  sweeps: [],
  // Each chain's GatewayWallet and GatewayMinter are contracts.
  registryBaselines(file) {
    const g = file.gateway as GatewayConfig | undefined;
    if (!g) return [];
    return g.chains.flatMap((c) => [
      { chainId: c.chain_id, subject: `gateway.chains[${c.chain_id}].wallet`, address: c.wallet, property: 'code' as const, expected: 'code' },
      { chainId: c.chain_id, subject: `gateway.chains[${c.chain_id}].minter`, address: c.minter, property: 'code' as const, expected: 'code' },
    ]);
  },
  // Each `gateway.watch` depositor's balance on each domain, through the API (docs/balances.md).
  balanceTargets: gatewayBalanceTargets,
  balanceFetchers: (clients) => [new GatewayBalanceFetcher(clients)],
  templates: [{ key: 'gateway_transfer', summary: 'approve and deposit USDC into the GatewayWallet on one chain, a signed burn intent, then gatewayMint on the other (sandbox)' }],
};
