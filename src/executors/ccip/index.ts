import { ConfigError } from '../../config-schemas.ts';
import type { ConfigFile } from '../../config-file.ts';
import type { Logger } from '../../log.ts';
import { EvmChains } from '../evm/chains.ts';
import { feeBumpOfChain, type EvmLane } from '../evm/index.ts';
import type { EvmNonceManager } from '../evm/nonces.ts';
import { EvmChainRouter } from '../evm/router.ts';
import type { ExecutorRegistry } from '../registry.ts';
import { CCIP_FEE_APPROVAL_KEY, CCIP_LANE, CCIP_SEND_KEY } from './common.ts';
import type { CcipConfig } from './config.ts';
import { CcipDeliveryObserver } from './delivery.ts';
import { CcipFeeApprovalExecutor } from './fee-approval.ts';
import { CcipSendExecutor } from './send.ts';

export { CCIP_DELIVERY_KEY, CCIP_FEE_APPROVAL_KEY, CCIP_LANE, CCIP_SEND_KEY } from './common.ts';
export { CcipDeliveryObserver } from './delivery.ts';
export { CcipSendExecutor } from './send.ts';
export { CCIP_SEND_SELECTOR, CCIP_SEND_SIGNATURE, decodeCcipSend, decodeExtraArgsV2, encodeCcipSend, encodeExtraArgsV2, encodeReceiver, offRampAbi, onRampAbi, routerAbi } from './router.ts';

/**
 * The CCIP lane on the EVM lane's chains and wallets: `exec.ccip.send` (one executor per chain of
 * the ccip section with a wallet) and `exec.observe.ccip_delivery`. Registers nothing without a
 * `ccip` section. Makes no call.
 * @throws ConfigError when a chain of the section is not one of the EVM lane's.
 */
export function registerCcipLane(
  file: ConfigFile & { ccip?: CcipConfig },
  evm: EvmLane | null,
  registry: ExecutorRegistry,
  deps: { log: Logger; nonces?: EvmNonceManager | null },
): { executorKeys: string[] } | null {
  const c = file.ccip;
  if (!c) return null;
  const chains = c.chains.map((ch) => {
    const chain = evm?.chains.get(ch.chain_id);
    if (!evm || !chain) throw new ConfigError('FERRY_CONFIG_FILE', `ccip.chains: chain ${ch.chain_id} is not a chain of the EVM lane`);
    return chain;
  });
  const nonces = deps.nonces ?? null;
  const send = new EvmChainRouter({
    executorKey: CCIP_SEND_KEY,
    lane: CCIP_LANE,
    // The section's chains only: a node naming another chain is refused before anything is prepared.
    chains: new EvmChains(chains),
    wallets: evm!.wallets,
    make: (ch, from) => new CcipSendExecutor({ chain: ch, from: from!, tokens: file.evm.tokens, nonces, feeBump: { ...feeBumpOfChain(ch.config), limits: evm!.replacements }, ccip: c }),
  });
  // The approve of a fee token (LINK) to the Router, before a send paying its fee in it.
  const feeApproval = new EvmChainRouter({
    executorKey: CCIP_FEE_APPROVAL_KEY,
    lane: CCIP_LANE,
    chains: new EvmChains(chains),
    wallets: evm!.wallets,
    make: (ch, from) => new CcipFeeApprovalExecutor({ chain: ch, from: from!, tokens: file.evm.tokens, nonces, feeBump: { ...feeBumpOfChain(ch.config), limits: evm!.replacements }, ccip: c }),
  });
  const delivery = new CcipDeliveryObserver(c, evm!.chains);
  for (const e of [send, feeApproval, delivery]) registry.register(e);
  deps.log.info({ chains: c.chains.map((ch) => ({ chain_id: ch.chain_id, selector: ch.selector })), executors: [send.executorKey, feeApproval.executorKey, delivery.executorKey] }, 'ccip lane configured');
  return { executorKeys: [send.executorKey, feeApproval.executorKey, delivery.executorKey] };
}
