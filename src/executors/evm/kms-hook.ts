import type { Address } from 'viem';
import type { EvmSignerConfig } from '../../config-file.ts';
import type { Logger } from '../../log.ts';
import { ConfigError } from '../../config.ts';
import type { Signer } from '../protocol.ts';
import type { SignerPolicyOptions } from '../signers/evm-policy.ts';
import { createSignerFromConfig } from '../signers/from-config.ts';

export interface KmsSignerHookDeps {
  env: NodeJS.ProcessEnv;
  log: Logger;
  policy?: SignerPolicyOptions;
}

export interface ConfiguredEvmSigner {
  signer: Signer;
  /** The EVM address the signer signs with (for KMS: derived from GetPublicKey). */
  address: Address;
  entry: EvmSignerConfig;
}

/**
 * The signers of `kind: aws_kms` entries of evm.signers (AwsKmsEvmSigner), each with the address
 * its KMS key signs as. The address is read with GetPublicKey now, at start: a wallet whose
 * address is unknown cannot be routed to, and a key that cannot be read is a configuration problem
 * the operator should see before any movement is dispatched.
 * @throws ConfigError naming the entry (never a credential) when a key cannot be read.
 */
export async function createAwsKmsEvmSigners(entries: readonly EvmSignerConfig[], deps: KmsSignerHookDeps): Promise<ConfiguredEvmSigner[]> {
  const out: ConfiguredEvmSigner[] = [];
  for (const entry of entries) {
    const signer = createSignerFromConfig(entry, deps.env, deps.policy);
    let address: Address;
    try {
      address = (await signer.getAddress()) as Address;
    } catch (err) {
      const code = (err as { code?: string }).code ?? 'SIGNER_KMS_UNAVAILABLE';
      throw new ConfigError('FERRY_CONFIG_FILE', `evm.signers ${entry.key}: could not read the address of its KMS key (${code})`);
    }
    deps.log.info({ signer: entry.key, address }, 'aws_kms signer ready');
    out.push({ signer, address, entry });
  }
  return out;
}
