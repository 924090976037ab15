import { ContractFunctionExecutionError, type Address } from 'viem';
import { ConfigError } from '../../config.ts';
import type { ConfigFile, EvmChainConfig, EvmSignerConfig } from '../../config-file.ts';
import type { Logger } from '../../log.ts';
import type { ExecutorRegistry, SignerRegistry } from '../registry.ts';
import { remoteEvmWallets } from '../remote-config.ts';
import { feeCapsOf, replacementLimitsOf, type ChainHeadReader, type ReplacementLimits } from '../signers/evm-policy.ts';
import { FatalMovementError } from '../errors.ts';
import { LocalPrivateKeySignerEvm } from '../signers/local-private-key-evm.ts';
import { typedDataAllowlist, type TokenNonceReader } from '../signers/typed-data-policy.ts';
import { chainFromConfig, createChainClient, EvmChains, type EvmChain } from './chains.ts';
import { EVM_ERC20_TRANSFER_KEY, EvmErc20TransferExecutor } from './erc20-transfer.ts';
import { createAwsKmsEvmSigners, type ConfiguredEvmSigner } from './kms-hook.ts';
import { EVM_NATIVE_TRANSFER_KEY, EvmNativeTransferExecutor, type EvmNativeTransferOptions } from './native-transfer.ts';
import type { EvmNonceManager } from './nonces.ts';
import { EVM_BALANCE_OBSERVE_KEY, EVM_FINALITY_OBSERVE_KEY, EvmBalanceObserver, EvmFinalityObserver } from './observe.ts';
import { EvmChainRouter, type EvmWallet } from './router.ts';
import { errorDetail } from './rpc-errors.ts';

export { EvmNonceManager, type EvmNonceWallet, type NonceAttempt } from './nonces.ts';
export { EVM_LANE, EVM_NATIVE_TRANSFER_KEY, EvmNativeTransferExecutor, NATIVE_TRANSFER_GAS, type EvmNativeTransferOptions } from './native-transfer.ts';
export { EVM_ERC20_TRANSFER_KEY, EvmErc20TransferExecutor } from './erc20-transfer.ts';
export { EVM_BALANCE_OBSERVE_KEY, EVM_FINALITY_OBSERVE_KEY, EvmBalanceObserver, EvmFinalityObserver } from './observe.ts';
export { EvmChainRouter, type EvmWallet } from './router.ts';
export { EvmChains, chainFromConfig, createChainClient, type EvmChain } from './chains.ts';

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
 * The native-transfer executor for one RPC and one local key, and that signer (tests and tools).
 * Registers both when registries are given.
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
  // The reaper's gap filler is signed only under a fee cap: the lane's, when it has one.
  opts.nonces?.registerWallet({ address: executor.from, client: executor.client, signer, feeCapWei: opts.feeBump?.capWei ?? null });
  if (registries) {
    registries.executors.register(executor);
    registries.signers.register(signer);
  }
  return { executor, signer };
}

/** What the lane needs from Ferry's configuration (the file, plus the legacy single-chain variables). */
export interface EvmLaneConfig {
  file: ConfigFile;
  evmRpcUrl?: string;
  evmSignerKey?: string;
  evmConfirmations?: number;
  evmMaxReplacements?: number;
  evmMaxFeeBumpFactor?: number;
  evmMaxFeePerGasCapWei?: string;
}

export interface EvmLane {
  chains: EvmChains;
  wallets: Map<string, EvmWallet>;
  executorKeys: string[];
  /** What the signers allow a replacement (their fee bumpers stop there too). */
  replacements: ReplacementLimits;
}

const PRIVATE_KEY = /^0x[0-9a-fA-F]{64}$/;

/**
 * Builds the EVM lane from the configuration and registers it: one chain client per chain, the
 * signers of evm.signers (a local_key entry's key read from its environment variable now; a
 * missing or malformed one stops start naming the signer and the variable, never the value), and
 * one executor per key serving every chain. The legacy variables FERRY_EVM_RPC_URL and
 * FERRY_EVM_SIGNER_KEY become one more chain (its id asked with eth_chainId) and the signer
 * `evm_local`. Registers nothing when no chain is configured.
 * @throws ConfigError naming the variable or the entry.
 */
export async function registerEvmLane(
  config: EvmLaneConfig,
  registries: { executors: ExecutorRegistry; signers: SignerRegistry },
  deps: {
    env: NodeJS.ProcessEnv;
    log: Logger;
    pollSeconds?: number;
    /** The shared nonce manager: every signing executor reserves its nonces there, and every (chain, wallet) is registered for the nonce reaper. */
    nonces?: EvmNonceManager | null;
  },
): Promise<EvmLane | null> {
  const evm = config.file.evm;
  const chainList: EvmChain[] = evm.chains.map(chainFromConfig);
  const signerEntries: Array<{ entry: EvmSignerConfig; index: number }> = evm.signers.map((entry, index) => ({ entry, index }));
  const wallets = new Map<string, EvmWallet>();
  const replacements = replacementLimitsOf(config);
  // Each signer's own fee caps: the chains of this configuration (a signer host's own, there).
  const feeCaps = feeCapsOf(evm);

  if (config.evmRpcUrl && config.evmSignerKey) {
    if (config.evmMaxFeePerGasCapWei === undefined) {
      throw new ConfigError('FERRY_EVM_MAX_FEE_PER_GAS_CAP_WEI', 'is required with FERRY_EVM_RPC_URL and FERRY_EVM_SIGNER_KEY');
    }
    const legacy = await legacyChain(config.evmRpcUrl, config.evmConfirmations ?? 1, deps.pollSeconds, config.evmMaxFeePerGasCapWei);
    feeCaps.set(legacy.chainId, BigInt(config.evmMaxFeePerGasCapWei));
    if (chainList.some((c) => c.chainId === legacy.chainId)) {
      throw new ConfigError('FERRY_EVM_RPC_URL', `serves chain ${legacy.chainId}, which FERRY_CONFIG_FILE also lists; configure it in one place`);
    }
    if (evm.signers.some((s) => s.key === EVM_LOCAL_SIGNER_KEY)) {
      throw new ConfigError('FERRY_EVM_SIGNER_KEY', `defines signer ${EVM_LOCAL_SIGNER_KEY}, which FERRY_CONFIG_FILE also lists`);
    }
    chainList.push(legacy);
    const signer = new LocalPrivateKeySignerEvm({ signerKey: EVM_LOCAL_SIGNER_KEY, privateKey: config.evmSignerKey, chains: [legacy.chainId], replacements, feeCaps });
    registries.signers.register(signer);
    wallets.set(EVM_LOCAL_SIGNER_KEY, { signerKey: EVM_LOCAL_SIGNER_KEY, address: signer.address as Address, chains: [legacy.chainId] });
  }
  if (chainList.length === 0) return null;
  const chains = new EvmChains(chainList);
  // A permit's nonce, read by the signer side itself (typed-data-policy.ts): never the executor's word.
  const tokenNonces = tokenNonceReader(chains);
  // A chain's head, read by the signer side itself (a Gateway burn intent's maxBlockHeight, typed-data-policy.ts).
  const chainHeads = chainHeadReader(chains);

  for (const { entry, index } of signerEntries) {
    if (entry.kind !== 'local_key') continue;
    const variable = entry.private_key_env!;
    const where = `evm.signers[${index}] (${entry.key})`;
    const value = deps.env[variable];
    if (value === undefined || value === '') throw new ConfigError('FERRY_CONFIG_FILE', `${where}: environment variable ${variable} is not set`);
    if (!PRIVATE_KEY.test(value)) throw new ConfigError('FERRY_CONFIG_FILE', `${where}: environment variable ${variable} does not hold 0x and 64 hex digits (value hidden)`);
    let signer: LocalPrivateKeySignerEvm;
    try {
      signer = new LocalPrivateKeySignerEvm({
        signerKey: entry.key,
        privateKey: value,
        chains: entry.chains,
        executors: entry.executors,
        replacements,
        feeCaps,
        typedData: typedDataAllowlist(entry.typed_data),
        tokenNonces,
        chainHeads,
      });
    } catch {
      throw new ConfigError('FERRY_CONFIG_FILE', `${where}: environment variable ${variable} does not hold a valid secp256k1 key (value hidden)`);
    }
    registries.signers.register(signer);
    wallets.set(entry.key, { signerKey: entry.key, address: signer.address as Address, chains: entry.chains });
  }
  const kms: ConfiguredEvmSigner[] = await createAwsKmsEvmSigners(
    signerEntries.filter((s) => s.entry.kind === 'aws_kms').map((s) => s.entry),
    { env: deps.env, log: deps.log, policy: { replacements, feeCaps, tokenNonces, chainHeads } },
  );
  for (const k of kms) {
    registries.signers.register(k.signer);
    wallets.set(k.entry.key, { signerKey: k.entry.key, address: k.address.toLowerCase() as Address, chains: k.entry.chains });
  }

  // Remote signers with an address and chains (remote.signers): wallets whose keys live in a signer host.
  for (const w of remoteEvmWallets(config.file.remote)) {
    const unknown = w.chains.find((id) => !chains.get(id));
    if (unknown !== undefined) throw new ConfigError('FERRY_CONFIG_FILE', `remote.signers (${w.signerKey}): chain ${unknown} is not in evm.chains`);
    if (wallets.has(w.signerKey)) throw new ConfigError('FERRY_CONFIG_FILE', `remote.signers (${w.signerKey}): evm.signers also lists this key`);
    wallets.set(w.signerKey, w);
  }

  const tokens = evm.tokens;
  const nonces = deps.nonces ?? null;
  // The reaper may have to fill a gap of any (chain, wallet) pair, before any executor was made.
  if (nonces) {
    for (const wallet of wallets.values()) {
      const signer = registries.signers.get({ signer_key: wallet.signerKey });
      for (const id of wallet.chains) {
        const chain = chains.get(id);
        if (!chain) continue;
        nonces.registerWallet({ address: wallet.address, client: chain.client, signer, chainId: chain.chainId, feeCapWei: feeBumpOfChain(chain.config)?.capWei ?? null });
      }
    }
  }
  const routers = [
    new EvmChainRouter({
      executorKey: EVM_NATIVE_TRANSFER_KEY,
      chains,
      wallets,
      make: (chain, from) =>
        new EvmNativeTransferExecutor({
          client: chain.client,
          from: from!,
          confirmations: chain.confirmations,
          pollSeconds: chain.pollSeconds,
          nonces,
          feeBump: { ...feeBumpOfChain(chain.config), limits: replacements },
        }),
    }),
    new EvmChainRouter({
      executorKey: EVM_ERC20_TRANSFER_KEY,
      chains,
      wallets,
      make: (chain, from) => new EvmErc20TransferExecutor({ chain, from: from!, tokens, nonces, feeBump: { ...feeBumpOfChain(chain.config), limits: replacements } }),
    }),
    new EvmChainRouter({ executorKey: EVM_BALANCE_OBSERVE_KEY, chains, wallets: null, make: (chain) => new EvmBalanceObserver(chain, tokens) }),
    new EvmChainRouter({ executorKey: EVM_FINALITY_OBSERVE_KEY, chains, wallets: null, make: (chain) => new EvmFinalityObserver(chain) }),
  ];
  for (const r of routers) registries.executors.register(r);
  deps.log.info(
    { chains: chains.all().map((c) => c.chainId), signers: [...wallets.keys()], executors: routers.map((r) => r.executorKey) },
    'evm lane configured',
  );
  return { chains, wallets, executorKeys: routers.map((r) => r.executorKey), replacements };
}

/** The chain behind FERRY_EVM_RPC_URL, its id asked at start. */
async function legacyChain(rpcUrl: string, confirmations: number, pollSeconds = 1, capWei?: string): Promise<EvmChain> {
  const label = 'FERRY_EVM_RPC_URL';
  const client = createChainClient(rpcUrl, { label });
  let chainId: number;
  try {
    chainId = await client.getChainId();
  } catch (err) {
    throw new ConfigError('FERRY_EVM_RPC_URL', `did not answer eth_chainId at start: ${errorDetail(err)}`);
  }
  const config: EvmChainConfig = {
    chain_id: chainId,
    rpc_url: rpcUrl,
    confirmations,
    finality: 'confirmations',
    poll_seconds: pollSeconds,
    rpc_timeout_ms: 10_000,
    fee_bump_percent: 20,
    ...(capWei === undefined ? {} : { max_fee_per_gas_cap_wei: capWei }),
  };
  return { chainId, label: `chain ${chainId}`, client, confirmations, finality: 'confirmations', pollSeconds, config };
}

/** The fee policy of a chain entry of the configuration file, as executor options. */
export function feeBumpOfChain(chain: { fee_bump_after_seconds?: number; fee_bump_percent: number; max_fee_per_gas_cap_wei?: string }): EvmNativeTransferOptions['feeBump'] {
  return {
    afterSeconds: chain.fee_bump_after_seconds,
    percent: chain.fee_bump_percent,
    capWei: chain.max_fee_per_gas_cap_wei === undefined ? null : BigInt(chain.max_fee_per_gas_cap_wei),
  };
}

const NONCES_ABI = [{ type: 'function', name: 'nonces', stateMutability: 'view', inputs: [{ name: 'owner', type: 'address' }], outputs: [{ name: '', type: 'uint256' }] }] as const;

/** nonces(owner) of an EIP-2612 token on a configured chain; a chain Ferry has no RPC for cannot be read (refused). */
/** A chain's latest block number through the EVM lane's RPC of it; a chain without one cannot be judged (refused). */
export function chainHeadReader(chains: EvmChains): ChainHeadReader {
  return async (chainId) => {
    const chain = chains.get(chainId);
    if (!chain) throw new FatalMovementError('SIGNER_POLICY_VIOLATION', `no RPC for chain ${chainId} to judge the burn intent's maxBlockHeight by`, { rule: 'gateway_max_block_height' });
    return chain.client.getBlockNumber();
  };
}

export function tokenNonceReader(chains: EvmChains): TokenNonceReader {
  return async (chainId, token, owner) => {
    const chain = chains.get(chainId);
    if (!chain) throw new FatalMovementError('SIGNER_POLICY_VIOLATION', `no RPC for chain ${chainId} to read the permit's nonce from, and the plan pins none`, { rule: 'nonce_unverified' });
    try {
      return await chain.client.readContract({ address: token, abi: NONCES_ABI, functionName: 'nonces', args: [owner] });
    } catch (err) {
      // A token that answers no nonces() takes no permit; an RPC that did not answer is tried again.
      if (err instanceof ContractFunctionExecutionError) throw new FatalMovementError('SIGNER_POLICY_VIOLATION', `token ${token} on chain ${chainId} does not answer nonces(owner): it takes no EIP-2612 permit`, { rule: 'nonce_unverified' });
      throw err;
    }
  };
}
