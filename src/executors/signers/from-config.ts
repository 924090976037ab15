import { ConfigError } from '../../config.ts';
import type { EvmSignerConfig } from '../../config-file.ts';
import { AwsKmsEvmSigner } from './aws-kms-evm.ts';
import type { SignerPolicyOptions } from './evm-policy.ts';
import { LocalPrivateKeySignerEvm } from './local-private-key-evm.ts';
import { typedDataAllowlist } from './typed-data-policy.ts';

export type EvmSignerFromConfig = LocalPrivateKeySignerEvm | AwsKmsEvmSigner;

/**
 * The signer one `evm.signers[]` entry describes, with its chains and executor allowlist: kind
 * local_key reads its key from the environment variable the entry names; kind aws_kms reads its
 * credentials the same way and talks only to the configured endpoint and region. Makes no call:
 * a KMS signer's address is read at start by src/executors/evm/kms-hook.ts (getAddress()).
 * @throws ConfigError naming the variable (never its value) when a variable is unset or unusable.
 */
export function createSignerFromConfig(entry: EvmSignerConfig, env: NodeJS.ProcessEnv = process.env, policy: SignerPolicyOptions = {}): EvmSignerFromConfig {
  const scope = { chains: entry.chains, executors: entry.executors, typedData: typedDataAllowlist(entry.typed_data), ...policy };
  const required = (name: string): string => {
    const value = env[name];
    if (value === undefined || value === '') throw new ConfigError(name, `is not set (evm.signers ${entry.key} needs it)`);
    return value;
  };
  if (entry.kind === 'local_key') {
    const variable = entry.private_key_env!;
    try {
      return new LocalPrivateKeySignerEvm({ signerKey: entry.key, privateKey: required(variable), ...scope });
    } catch (err) {
      if (err instanceof ConfigError) throw err;
      throw new ConfigError(variable, '(value hidden): is not a 0x-prefixed 32-byte secp256k1 key');
    }
  }
  const kms = entry.kms!;
  return new AwsKmsEvmSigner({
    signerKey: entry.key,
    keyId: kms.key_id,
    region: kms.region,
    endpoint: kms.endpoint,
    // Static keys when the entry names their variables; else the SDK's default credential chain.
    credentials:
      kms.access_key_id_env && kms.secret_access_key_env
        ? {
            accessKeyId: required(kms.access_key_id_env),
            secretAccessKey: required(kms.secret_access_key_env),
            ...(kms.session_token_env ? { sessionToken: required(kms.session_token_env) } : {}),
          }
        : undefined,
    timeoutMs: kms.timeout_ms,
    ...scope,
  });
}
