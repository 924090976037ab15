import { ConfigError } from '../../config-schemas.ts';
import type { ConfigFile } from '../../config-file.ts';
import type { Logger } from '../../log.ts';
import { EvmChains } from '../evm/chains.ts';
import { feeBumpOfChain, type EvmLane } from '../evm/index.ts';
import type { EvmNonceManager } from '../evm/nonces.ts';
import { EvmChainRouter } from '../evm/router.ts';
import type { ExecutorRegistry } from '../registry.ts';
import { USDT0_LANE, USDT0_SEND_KEY } from './common.ts';
import type { Usdt0Config } from './config.ts';
import { Usdt0CreditObserver } from './credit.ts';
import { Usdt0SendExecutor } from './send.ts';

export { USDT0_CREDIT_KEY, USDT0_LANE, USDT0_SEND_KEY } from './common.ts';
export { Usdt0CreditObserver } from './credit.ts';
export { Usdt0SendExecutor } from './send.ts';
export { addressToBytes32, decodeSend, encodeSend, oftAbi, SEND_SELECTOR, SEND_SIGNATURE } from './oft.ts';

/**
 * The USDT0 lane on the EVM lane's chains and wallets: `exec.usdt0.send` (one executor per chain
 * with a usdt0 deployment and wallet) and `exec.observe.usdt0_credit`. Registers nothing without a
 * `usdt0` section. Makes no call.
 * @throws ConfigError when a deployment's chain is not one of the EVM lane's.
 */
export function registerUsdt0Lane(
  file: ConfigFile & { usdt0?: Usdt0Config },
  evm: EvmLane | null,
  registry: ExecutorRegistry,
  deps: { log: Logger; nonces?: EvmNonceManager | null },
): { executorKeys: string[] } | null {
  const u = file.usdt0;
  if (!u) return null;
  const chains = u.deployments.map((d) => {
    const chain = evm?.chains.get(d.chain_id);
    if (!evm || !chain) throw new ConfigError('FERRY_CONFIG_FILE', `usdt0.deployments: chain ${d.chain_id} is not a chain of the EVM lane`);
    return chain;
  });
  const nonces = deps.nonces ?? null;
  const send = new EvmChainRouter({
    executorKey: USDT0_SEND_KEY,
    lane: USDT0_LANE,
    // The deployments' chains only: a node naming another chain is refused before anything is prepared.
    chains: new EvmChains(chains),
    wallets: evm!.wallets,
    make: (c, from) => new Usdt0SendExecutor({ chain: c, from: from!, tokens: file.evm.tokens, nonces, feeBump: { ...feeBumpOfChain(c.config), limits: evm!.replacements }, usdt0: u }),
  });
  const credit = new Usdt0CreditObserver(u, evm!.chains);
  for (const e of [send, credit]) registry.register(e);
  deps.log.info({ deployments: u.deployments.map((d) => ({ chain_id: d.chain_id, eid: d.eid })), executors: [send.executorKey, credit.executorKey] }, 'usdt0 lane configured');
  return { executorKeys: [send.executorKey, credit.executorKey] };
}
