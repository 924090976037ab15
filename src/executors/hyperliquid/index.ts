import { ConfigError } from '../../config-schemas.ts';
import type { ConfigFile } from '../../config-file.ts';
import type { Logger } from '../../log.ts';
import { EvmChains } from '../evm/chains.ts';
import { feeBumpOfChain, type EvmLane } from '../evm/index.ts';
import type { EvmNonceManager } from '../evm/nonces.ts';
import { EvmChainRouter } from '../evm/router.ts';
import type { ExecutorRegistry } from '../registry.ts';
import { HYPERLIQUID_LANE, HYPERLIQUID_TOPUP_KEY } from './common.ts';
import type { HyperliquidConfig } from './config.ts';
import { HyperliquidCreditObserver } from './credit.ts';
import { HyperliquidInfoClient } from './info.ts';
import { HyperliquidTopupExecutor } from './topup.ts';

export { HYPERLIQUID_CREDIT_KEY, HYPERLIQUID_LANE, HYPERLIQUID_TOPUP_KEY } from './common.ts';
export { HyperliquidCreditObserver } from './credit.ts';
export { HyperliquidInfoClient, parseDecimal } from './info.ts';
export { HyperliquidTopupExecutor } from './topup.ts';

/**
 * The Hyperliquid lane on the EVM lane's chain and wallets: `exec.hyperliquid.topup` (one executor
 * per wallet, on the bridge's chain only) and `exec.observe.hyperliquid_credit`. Registers nothing
 * without a `hyperliquid` section. Makes no call.
 * @throws ConfigError when the bridge's chain is not one of the EVM lane's.
 */
export function registerHyperliquidLane(
  file: ConfigFile & { hyperliquid?: HyperliquidConfig },
  evm: EvmLane | null,
  registry: ExecutorRegistry,
  deps: { log: Logger; nonces?: EvmNonceManager | null },
): { executorKeys: string[] } | null {
  const hl = file.hyperliquid;
  if (!hl) return null;
  const chain = evm?.chains.get(hl.chain_id);
  if (!evm || !chain) throw new ConfigError('FERRY_CONFIG_FILE', `hyperliquid.chain_id: chain ${hl.chain_id} is not a chain of the EVM lane`);
  const nonces = deps.nonces ?? null;
  const info = new HyperliquidInfoClient(hl);
  const topup = new EvmChainRouter({
    executorKey: HYPERLIQUID_TOPUP_KEY,
    lane: HYPERLIQUID_LANE,
    // The bridge's chain only: a node naming another chain is refused before anything is prepared.
    chains: new EvmChains([chain]),
    wallets: evm.wallets,
    make: (c, from) =>
      new HyperliquidTopupExecutor({ chain: c, from: from!, tokens: file.evm.tokens, nonces, feeBump: { ...feeBumpOfChain(c.config), limits: evm.replacements }, hyperliquid: hl, info }),
  });
  const credit = new HyperliquidCreditObserver(hl, info);
  for (const e of [topup, credit]) registry.register(e);
  deps.log.info({ chain_id: hl.chain_id, bridge: hl.bridge, executors: [topup.executorKey, credit.executorKey] }, 'hyperliquid lane configured');
  return { executorKeys: [topup.executorKey, credit.executorKey] };
}
