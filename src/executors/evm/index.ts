import type { ExecutorRegistry, SignerRegistry } from '../registry.ts';
import { LocalPrivateKeySignerEvm } from '../signers/local-private-key-evm.ts';
import { EvmNativeTransferExecutor, type EvmNativeTransferOptions } from './native-transfer.ts';
import type { EvmNonceManager } from './nonces.ts';

export { EvmNonceManager, type EvmWallet, type NonceAttempt } from './nonces.ts';
export { EVM_LANE, EVM_NATIVE_TRANSFER_KEY, EvmNativeTransferExecutor, NATIVE_TRANSFER_GAS, type EvmNativeTransferOptions } from './native-transfer.ts';

export const EVM_LOCAL_SIGNER_KEY = 'evm_local';

export interface EvmLaneOptions {
  rpcUrl: string;
  /** 0x-prefixed 32-byte key. Development only: it is held in process memory. */
  signerPrivateKey: string;
  confirmations?: number;
  pollSeconds?: number;
  signerKey?: string;
  /** The shared nonce manager; the lane's wallet is registered with it for the nonce reaper. */
  nonces?: EvmNonceManager;
  /** Fee bumping and the fee cap (a chain's fee_bump_after_seconds, fee_bump_percent, max_fee_per_gas_cap_wei). */
  feeBump?: EvmNativeTransferOptions['feeBump'];
}

/**
 * The EVM lane with a local key: the native-transfer executor sending from the signer's own
 * address, and that signer. Registers both when registries are given.
 */
export function createEvmLane(
  opts: EvmLaneOptions,
  registries?: { executors: ExecutorRegistry; signers: SignerRegistry },
): { executor: EvmNativeTransferExecutor; signer: LocalPrivateKeySignerEvm } {
  const signer = new LocalPrivateKeySignerEvm({ signerKey: opts.signerKey ?? EVM_LOCAL_SIGNER_KEY, privateKey: opts.signerPrivateKey });
  const executor = new EvmNativeTransferExecutor({
    rpcUrl: opts.rpcUrl,
    from: signer.address,
    confirmations: opts.confirmations,
    pollSeconds: opts.pollSeconds,
    nonces: opts.nonces,
    feeBump: opts.feeBump,
  });
  opts.nonces?.registerWallet({ address: executor.from, client: executor.client, signer });
  if (registries) {
    registries.executors.register(executor);
    registries.signers.register(signer);
  }
  return { executor, signer };
}

/** The fee policy of a chain entry of the configuration file, as executor options. */
export function feeBumpOfChain(chain: { fee_bump_after_seconds?: number; fee_bump_percent: number; max_fee_per_gas_cap_wei?: string }): EvmNativeTransferOptions['feeBump'] {
  return {
    afterSeconds: chain.fee_bump_after_seconds,
    percent: chain.fee_bump_percent,
    capWei: chain.max_fee_per_gas_cap_wei === undefined ? null : BigInt(chain.max_fee_per_gas_cap_wei),
  };
}
