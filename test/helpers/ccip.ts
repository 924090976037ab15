import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createWalletClient, encodeAbiParameters, http, maxUint256, type Abi, type Address, type Hex, type PublicClient } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { stringify } from 'yaml';
import { startCcipOffRamp, type CcipExecutor } from '../emulators/ccip-offramp.ts';
import { ANVIL_DEV_KEY, startLocalChain, TEST_FEE_CAP_WEI, type Anvil } from './anvil.ts';
import { compileContracts, deployToken, sendCall, type DeployedToken } from './contracts.ts';

/**
 * The CCIP 1.6 test contracts (test/contracts/Ccip.sol) on two local chains, each with a Router, an
 * OnRamp (fees, extraArgs rules, pools), a token pool and an OffRamp, wired both ways: the source's
 * pool locks the token, the destination's mints it (each chain's OnRamp finds its pool through the
 * chain's TokenAdminRegistry); the emulated execution (test/emulators/ccip-offramp.ts)
 * carries messages from an OnRamp to the other chain's OffRamp. Selectors are Ethereum's and
 * Arbitrum's (chain-selectors).
 */

export const SOURCE_CHAIN_ID = 31337;
export const DESTINATION_CHAIN_ID = 31338;
export const SOURCE_SELECTOR = 5009297550715157269n;
export const DESTINATION_SELECTOR = 4949039107694359620n;
/** The test OnRamps' fee: 0.0002 ETH per message, 0.00005 ETH per token amount, 1 gwei per byte of data and per unit of gas limit. */
export const BASE_FEE_WEI = 200_000_000_000_000n;
export const FEE_PER_TOKEN_WEI = 50_000_000_000_000n;
export const FEE_PER_BYTE_WEI = 1_000_000_000n;
export const FEE_PER_GAS_WEI = 1_000_000_000n;
/** A cap the quoted fee stays under in these tests (0.001 ETH). */
export const FEE_CAP_WEI = '1000000000000000';
/** LINK costs 1/200 of native in the test FeeQuoter: 200 LINK base units per wei of fee... times 1e18/1e18. */
export const LINK_RATE = 200n * 10n ** 18n;

type Contract = { address: Address; abi: Abi };

export interface CcipDeployment {
  chainId: number;
  selector: bigint;
  rpcUrl: string;
  chain: PublicClient;
  anvil: Anvil;
  token: DeployedToken;
  link: DeployedToken;
  weth: DeployedToken;
  router: Contract;
  onRamp: Contract;
  pool: Contract;
  /** The TokenAdminRegistry the OnRamp looks the token's pool up in. */
  registry: Contract;
  offRamp: Contract;
}

export interface CcipWorld {
  source: CcipDeployment;
  destination: CcipDeployment;
  executor: CcipExecutor;
  hotKey: Hex;
  hot: Address;
  compiled: ReturnType<typeof compileContracts>;
  stop(): Promise<void>;
}

export async function deployCcipContract(d: Pick<CcipDeployment, 'chain' | 'rpcUrl'>, c: { abi: Abi; bytecode: Hex }, args: readonly unknown[], key: Hex = ANVIL_DEV_KEY): Promise<Address> {
  const wallet = createWalletClient({ account: privateKeyToAccount(key), transport: http(d.rpcUrl, { retryCount: 0 }) });
  const hash = await wallet.deployContract({ abi: c.abi, bytecode: c.bytecode, args, chain: null } as never);
  const receipt = await d.chain.waitForTransactionReceipt({ hash, pollingInterval: 50, timeout: 30_000 });
  if (!receipt.contractAddress) throw new Error('deployment produced no contract');
  return receipt.contractAddress.toLowerCase() as Address;
}

/** One call from `key` (anvil's dev key by default), waited for (throws when it reverts). */
export async function writeCcip(d: Pick<CcipDeployment, 'chain' | 'rpcUrl'>, contract: Contract, functionName: string, args: readonly unknown[], key: Hex = ANVIL_DEV_KEY, value?: bigint): Promise<Hex> {
  const wallet = createWalletClient({ account: privateKeyToAccount(key), transport: http(d.rpcUrl, { retryCount: 0 }) });
  const hash = await wallet.writeContract({ address: contract.address, abi: contract.abi, functionName, args, chain: null, ...(value !== undefined ? { value } : {}) } as never);
  const receipt = await d.chain.waitForTransactionReceipt({ hash, pollingInterval: 50, timeout: 30_000 });
  if (receipt.status !== 'success') throw new Error(`${functionName} reverted`);
  return hash;
}

/**
 * The CCIP test contracts on one chain that runs already (the sandbox's, or a test's anvil): the
 * token the lane moves (minted by the destination's pool, locked by the source's), LINK and WETH,
 * the Router, the OnRamp, the token pool, the TokenAdminRegistry and the OffRamp, deployed by `deployerKey`.
 */
export async function deployCcipSide(
  side: { chain: PublicClient; rpcUrl: string; chainId: number; selector: bigint },
  opts: { mints: boolean; token?: { name: string; symbol: string; decimals: number }; deployerKey?: Hex },
): Promise<Omit<CcipDeployment, 'anvil'>> {
  const compiled = compileContracts('Ccip.sol');
  const key = opts.deployerKey ?? ANVIL_DEV_KEY;
  const token = await deployToken(side.chain, side.rpcUrl, key, opts.token ?? { name: 'USD Coin', symbol: 'USDC', decimals: 6 });
  const link = await deployToken(side.chain, side.rpcUrl, key, { name: 'ChainLink Token', symbol: 'LINK', decimals: 18 });
  const weth = await deployToken(side.chain, side.rpcUrl, key, { name: 'Wrapped Ether', symbol: 'WETH', decimals: 18 });
  const router = await deployCcipContract(side, compiled.TestCcipRouter!, [weth.address], key);
  const onRamp = await deployCcipContract(side, compiled.TestCcipOnRamp!, [side.selector, router], key);
  const pool = await deployCcipContract(side, compiled.TestCcipTokenPool!, [token.address, opts.mints], key);
  const offRamp = await deployCcipContract(side, compiled.TestCcipOffRamp!, [side.selector], key);
  const registry = await deployCcipContract(side, compiled.TestCcipTokenAdminRegistry!, [], key);
  const c = (address: Address, name: string) => ({ address, abi: compiled[name]!.abi });
  return {
    chainId: side.chainId,
    selector: side.selector,
    rpcUrl: side.rpcUrl,
    chain: side.chain,
    token,
    link,
    weth,
    router: c(router, 'TestCcipRouter'),
    onRamp: c(onRamp, 'TestCcipOnRamp'),
    pool: c(pool, 'TestCcipTokenPool'),
    registry: c(registry, 'TestCcipTokenAdminRegistry'),
    offRamp: c(offRamp, 'TestCcipOffRamp'),
  };
}

async function deployStack(chainId: number, selector: bigint, mints: boolean): Promise<CcipDeployment> {
  const { anvil, chain } = await startLocalChain({ chainId });
  return { ...(await deployCcipSide({ chain, rpcUrl: anvil.url, chainId, selector }, { mints })), anvil };
}

type Side = Omit<CcipDeployment, 'anvil'>;

/** Wires `from`'s Router, OnRamp, registry and pool to `to`'s OffRamp and pool (calls from `deployerKey`, anvil's dev key by default). */
export async function wireCcip(from: Side, to: Side, transmitter: Address, deployerKey: Hex = ANVIL_DEV_KEY): Promise<void> {
  const wire = (d: Side, contract: Contract, fn: string, args: readonly unknown[]) => writeCcip(d, contract, fn, args, deployerKey);
  await wire(from, from.router, 'setOnRamp', [to.selector, from.onRamp.address]);
  await wire(from, from.onRamp, 'setDestConfig', [to.selector, true, false, 3_000_000, BASE_FEE_WEI, FEE_PER_BYTE_WEI, FEE_PER_TOKEN_WEI, FEE_PER_GAS_WEI]);
  await wire(from, from.onRamp, 'setFeeTokenRate', [from.weth.address, 10n ** 18n]);
  await wire(from, from.onRamp, 'setFeeTokenRate', [from.link.address, LINK_RATE]);
  await wire(from, from.onRamp, 'setPool', [to.selector, from.token.address, from.pool.address, to.token.address]);
  await wire(from, from.registry, 'setPool', [from.token.address, from.pool.address]);
  await wire(from, from.onRamp, 'setTokenAdminRegistry', [from.registry.address]);
  await wire(from, from.pool, 'setSupportedChain', [to.selector, true]);
  await wire(to, to.offRamp, 'setSource', [from.selector, encodeAbiParameters([{ type: 'address' }], [from.onRamp.address])]);
  await wire(to, to.offRamp, 'setTransmitter', [transmitter]);
  await wire(to, to.offRamp, 'setPool', [to.token.address, to.pool.address]);
  await wire(to, to.pool, 'setOffRamp', [to.offRamp.address]);
}

export async function startCcipWorld(opts: { funding?: bigint; delayMs?: number } = {}): Promise<CcipWorld> {
  const [source, destination] = await Promise.all([deployStack(SOURCE_CHAIN_ID, SOURCE_SELECTOR, false), deployStack(DESTINATION_CHAIN_ID, DESTINATION_SELECTOR, true)]);
  const transmitterKey = generatePrivateKey();
  const transmitter = privateKeyToAccount(transmitterKey).address;
  // Both ways: every pair of configured chains is a lane the configuration asserts (ccip_drift).
  await wireCcip(source, destination, transmitter);
  await wireCcip(destination, source, transmitter);
  const hotKey = generatePrivateKey();
  const hot = privateKeyToAccount(hotKey).address.toLowerCase() as Address;
  for (const d of [source, destination]) {
    await d.anvil.rpc('anvil_setBalance', [transmitter, '0xde0b6b3a7640000']);
    await d.anvil.rpc('anvil_setBalance', [hot, '0xde0b6b3a7640000']);
  }
  await sendCall(source.chain, source.rpcUrl, ANVIL_DEV_KEY, source.token, 'mint', [hot, opts.funding ?? 1_000_000_000n]);
  // The standing allowance the lane expects (the Router pulls the amount into the pool; the lane never approves).
  await sendCall(source.chain, source.rpcUrl, hotKey, source.token, 'approve', [source.router.address, maxUint256]);
  const executor = startCcipOffRamp({
    sides: [source, destination].map((d) => ({ selector: d.selector, chain: d.chain, rpcUrl: d.rpcUrl, onRamp: d.onRamp.address, offRamp: d.offRamp.address })),
    transmitterKey,
    delayMs: opts.delayMs ?? 0,
    pollMs: 100,
  });
  return {
    source,
    destination,
    executor,
    hotKey,
    hot,
    compiled: compileContracts('Ccip.sol'),
    stop: async () => {
      await executor.stop();
      await Promise.all([source.anvil.stop(), destination.anvil.stop()]);
    },
  };
}

/** The FERRY_CONFIG_FILE for the world: both chains, the hot wallet on both, USDC on both, the ccip section. */
export function ccipConfigFile(w: CcipWorld, opts: { rpc?: { source?: string; destination?: string }; ccip?: Record<string, unknown> } = {}): string {
  const dir = mkdtempSync(join(tmpdir(), 'ferry-ccip-'));
  const path = join(dir, 'ferry.yaml');
  const chain = (d: CcipDeployment, rpc: string) => ({ chain_id: d.chainId, rpc_url: rpc, poll_seconds: 0.2, max_fee_per_gas_cap_wei: TEST_FEE_CAP_WEI });
  const config = {
    evm: {
      chains: [chain(w.source, opts.rpc?.source ?? w.source.rpcUrl), chain(w.destination, opts.rpc?.destination ?? w.destination.rpcUrl)],
      signers: [{ key: 'hot', kind: 'local_key', private_key_env: 'CCIP_HOT_KEY', chains: [w.source.chainId, w.destination.chainId] }],
      tokens: [w.source, w.destination].flatMap((d) => [
        { chain_id: d.chainId, symbol: 'USDC', address: d.token.address, decimals: 6 },
        { chain_id: d.chainId, symbol: 'LINK', address: d.link.address, decimals: 18 },
      ]),
    },
    ccip: {
      chains: [w.source, w.destination].map((d) => ({
        chain_id: d.chainId,
        selector: d.selector.toString(),
        router: d.router.address,
        off_ramp: d.offRamp.address,
        token_admin_registry: d.registry.address,
        token_pools: { USDC: d.pool.address },
      })),
      tokens: ['USDC'],
      poll_seconds: 0.2,
      ...opts.ccip,
    },
  };
  writeFileSync(path, stringify(config));
  return path;
}

/** Every CCIPMessageSent on the source OnRamp and every ExecutionStateChanged on the destination OffRamp. */
export async function ccipEvents(w: CcipWorld) {
  const sent = await w.source.chain.getContractEvents({ address: w.source.onRamp.address, abi: w.source.onRamp.abi, eventName: 'CCIPMessageSent', fromBlock: 0n, toBlock: 'latest' });
  const executed = await w.destination.chain.getContractEvents({ address: w.destination.offRamp.address, abi: w.destination.offRamp.abi, eventName: 'ExecutionStateChanged', fromBlock: 0n, toBlock: 'latest' });
  return { sent, executed };
}
