import type { Address } from 'viem';
import type { EvmSignerConfig } from '../../config-file.ts';
import type { Logger } from '../../log.ts';
import type { Signer } from '../protocol.ts';

export interface KmsSignerHookDeps {
  env: NodeJS.ProcessEnv;
  log: Logger;
}

export interface ConfiguredEvmSigner {
  signer: Signer;
  /** The EVM address the signer signs with (for KMS: derived from GetPublicKey). */
  address: Address;
  entry: EvmSignerConfig;
}

/**
 * Hook for `kind: aws_kms` entries of evm.signers: builds their signers (AwsKmsEvmSigner) and
 * reports each one's address. Not built yet: it registers nothing and logs one warning naming
 * the entries, so a node bound to one fails with EVM_SIGNER_NOT_CONFIGURED.
 */
export async function createAwsKmsEvmSigners(entries: readonly EvmSignerConfig[], deps: KmsSignerHookDeps): Promise<ConfiguredEvmSigner[]> {
  if (entries.length > 0) {
    deps.log.warn({ signers: entries.map((e) => e.key) }, 'evm.signers of kind aws_kms are not supported yet; they are not registered');
  }
  return [];
}
