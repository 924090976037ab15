import type { Address } from 'viem';
import { ConfigError } from '../config.ts';
import type { ConfigFile, RemoteExecutorConfig, RemoteSignerConfig } from '../config-file.ts';
import type { HostRequestSigner } from './host-requests.ts';
import type { ExecutorRegistry, SignerRegistry } from './registry.ts';
import { RemoteExecutorProxy } from './remote-proxy.ts';
import type { SignerPolicyOptions } from './signers/evm-policy.ts';
import { RemoteSignerProxy } from './signers/remote-proxy.ts';
import { typedDataAllowlist } from './signers/typed-data-policy.ts';

/**
 * The remote executors and signers of the configuration file (`remote.executors`,
 * `remote.signers`): one proxy each, registered under its key like a local implementation, so a
 * node binds `exec.evm.native_transfer` the same whether it runs here or in `ferry executor-host`.
 * A bearer token is read from the variable the entry names, now; an unset one stops start naming
 * the entry and the variable, never a value. With Ferry's host request key (FERRY_HOST_REQUEST_KEY)
 * every POST to them is signed, as `ferry executor-host` and `ferry signer-host` require. Makes no call.
 * @throws ConfigError naming the entry.
 */
export function registerRemoteExecutors(
  remote: ConfigFile['remote'] | undefined,
  executors: ExecutorRegistry,
  env: NodeJS.ProcessEnv,
  maxAnswerBytes?: number,
  requestSigner?: HostRequestSigner,
): RemoteExecutorProxy[] {
  return (remote?.executors ?? []).map((entry, i) => {
    const proxy = new RemoteExecutorProxy({
      executorKey: entry.key,
      baseUrl: entry.url,
      token: token(entry, `remote.executors[${i}]`, env),
      timeoutMs: entry.timeout_ms,
      lane: laneOf(entry.key),
      maxAnswerBytes,
      requestSigner,
    });
    add(() => executors.register(proxy), `remote.executors[${i}] (${entry.key})`, 'executor');
    return proxy;
  });
}

/** The signers half of the above (registered before the EVM lane, whose wallets may be remote signers). */
export function registerRemoteSigners(
  remote: ConfigFile['remote'] | undefined,
  signers: SignerRegistry,
  env: NodeJS.ProcessEnv,
  policy: SignerPolicyOptions = {},
  requestSigner?: HostRequestSigner,
): RemoteSignerProxy[] {
  return (remote?.signers ?? []).map((entry, i) => {
    const proxy = new RemoteSignerProxy({
      signerKey: entry.key,
      baseUrl: entry.url,
      token: token(entry, `remote.signers[${i}]`, env),
      timeoutMs: entry.timeout_ms,
      evmPolicy: entry.chains ? { chains: entry.chains, executors: entry.executors, typedData: typedDataAllowlist(entry.typed_data), ...policy } : undefined,
      requestSigner,
    });
    add(() => signers.register(proxy), `remote.signers[${i}] (${entry.key})`, 'signer');
    return proxy;
  });
}

/** The EVM wallets remote signers stand for (entries with address and chains): the EVM lane sends from them. */
export function remoteEvmWallets(remote: ConfigFile['remote'] | undefined): Array<{ signerKey: string; address: Address; chains: number[] }> {
  return (remote?.signers ?? [])
    .filter((s): s is RemoteSignerConfig & { address: string; chains: number[] } => s.address !== undefined && s.chains !== undefined)
    .map((s) => ({ signerKey: s.key, address: s.address.toLowerCase() as Address, chains: s.chains }));
}

function token(entry: RemoteExecutorConfig | RemoteSignerConfig, where: string, env: NodeJS.ProcessEnv): string | undefined {
  if (!entry.token_env) return undefined;
  const value = env[entry.token_env];
  if (value === undefined || value === '') throw new ConfigError('FERRY_CONFIG_FILE', `${where} (${entry.key}): environment variable ${entry.token_env} is not set`);
  return value;
}

function add(register: () => void, where: string, kind: string): void {
  try {
    register();
  } catch {
    throw new ConfigError('FERRY_CONFIG_FILE', `${where}: a local ${kind} already has this key; serve it in one place`);
  }
}

/** exec.<lane>.<name>: the lane the recovery arms and the per-lane grace see for this key. */
function laneOf(key: string): string {
  return key.split('.')[1] ?? 'remote';
}
