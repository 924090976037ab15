import { EVM_ERC20_TRANSFER_KEY, EVM_FINALITY_OBSERVE_KEY } from '../../src/executors/evm/index.ts';

/**
 * `usdc.transfer`: send USDC from the sandbox hot wallet to intent.destination.address, then wait
 * until that transaction has `confirmations` blocks.
 */
export function usdcTransferTemplate(opts: { chainId: number; signerKey: string; confirmations: number }): Record<string, unknown> {
  return {
    template_key: 'usdc.transfer',
    description: 'Sandbox: an ERC-20 transfer of USDC from the hot wallet, then its finality check.',
    nodes: [
      {
        node_key: 'transfer',
        node_kind: 'action',
        action_type: 'erc20_transfer',
        executor_binding: EVM_ERC20_TRANSFER_KEY,
        signer_binding: { signer_key: opts.signerKey, chain_id: opts.chainId },
        config: { token: 'USDC', decimals: 6 },
      },
      {
        node_key: 'finality',
        node_kind: 'observe',
        action_type: 'chain_finality',
        executor_binding: { executor_key: EVM_FINALITY_OBSERVE_KEY, chain_id: opts.chainId },
        config: { tx_hash: '$ref:transfer.tx_hash', confirmations: opts.confirmations },
      },
    ],
    edges: [{ from: 'transfer', to: 'finality' }],
  };
}
