import { ConfigError } from '../../config-schemas.ts';
import type { ConfigFile } from '../../config-file.ts';
import type { Logger } from '../../log.ts';
import { EvmChains } from '../evm/chains.ts';
import { feeBumpOfChain, type EvmLane } from '../evm/index.ts';
import type { EvmNonceManager } from '../evm/nonces.ts';
import { EvmChainRouter } from '../evm/router.ts';
import type { ExecutorRegistry } from '../registry.ts';
import { GatewayApiClient } from './api.ts';
import { GATEWAY_APPROVE_KEY, GATEWAY_DEPOSIT_KEY, GATEWAY_INTENT_KEY, GATEWAY_LANE, GATEWAY_MINT_KEY } from './common.ts';
import type { GatewayConfig } from './config.ts';
import { GatewayIntentExecutor } from './intent.ts';
import { GatewayMintExecutor } from './mint.ts';
import { GatewayBurnObserver, GatewayDepositObserver } from './observers.ts';
import { GatewayApproveExecutor, GatewayDepositExecutor } from './wallet.ts';

export * from './common.ts';
export * from './codec.ts';
export { GatewayApiClient } from './api.ts';

/**
 * The Gateway lane on the EVM lane's chains and wallets: approve, deposit, burn intent and mint
 * (one executor per chain of the gateway section and wallet) and the deposit-credit and burn
 * observers. Registers nothing without a `gateway` section. Makes no call.
 * @throws ConfigError when a chain of the section is not one of the EVM lane's.
 */
export function registerGatewayLane(
  file: ConfigFile & { gateway?: GatewayConfig },
  evm: EvmLane | null,
  registry: ExecutorRegistry,
  deps: { log: Logger; nonces?: EvmNonceManager | null },
): { executorKeys: string[]; api: GatewayApiClient } | null {
  const g = file.gateway;
  if (!g) return null;
  const chains = g.chains.map((ch) => {
    const chain = evm?.chains.get(ch.chain_id);
    if (!evm || !chain) throw new ConfigError('FERRY_CONFIG_FILE', `gateway.chains: chain ${ch.chain_id} is not a chain of the EVM lane`);
    return chain;
  });
  const nonces = deps.nonces ?? null;
  const api = new GatewayApiClient(g);
  const served = new EvmChains(chains);
  const tx = (ch: (typeof chains)[number]) => ({ nonces, feeBump: { ...feeBumpOfChain(ch.config), limits: evm!.replacements } });
  const route = (executorKey: string, make: ConstructorParameters<typeof EvmChainRouter>[0]['make']) => new EvmChainRouter({ executorKey, lane: GATEWAY_LANE, chains: served, wallets: evm!.wallets, make });
  const executors = [
    route(GATEWAY_APPROVE_KEY, (ch, from) => new GatewayApproveExecutor({ chain: ch, from: from!, tokens: file.evm.tokens, gateway: g, ...tx(ch) })),
    route(GATEWAY_DEPOSIT_KEY, (ch, from) => new GatewayDepositExecutor({ chain: ch, from: from!, tokens: file.evm.tokens, gateway: g, ...tx(ch) })),
    route(GATEWAY_INTENT_KEY, (ch, from) => new GatewayIntentExecutor({ chain: ch, from: from!, tokens: file.evm.tokens, gateway: g, api })),
    route(GATEWAY_MINT_KEY, (ch, from) => new GatewayMintExecutor({ chain: ch, from: from!, gateway: g, ...tx(ch) })),
    new GatewayDepositObserver(g, file.evm.tokens, api),
    new GatewayBurnObserver(g, evm!.chains),
  ];
  for (const e of executors) registry.register(e);
  const keys = executors.map((e) => e.executorKey);
  deps.log.info({ chains: g.chains.map((ch) => ({ chain_id: ch.chain_id, domain: ch.domain })), executors: keys }, 'gateway lane configured');
  return { executorKeys: keys, api };
}
