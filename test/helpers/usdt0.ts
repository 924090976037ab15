import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createWalletClient, http, maxUint256, pad, type Abi, type Address, type Hex, type PublicClient } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { stringify } from 'yaml';
import { startLzRelayer, type LzRelayer } from '../emulators/lz-relayer.ts';
import { ANVIL_DEV_KEY, startLocalChain, TEST_FEE_CAP_WEI, type Anvil } from './anvil.ts';
import { compileContracts, deployToken, sendCall, type DeployedToken } from './contracts.ts';

/**
 * The LayerZero OFT v2 test contracts (test/contracts/Oft.sol) on two local chains: on the source an
 * OFT adapter locking a test USDT0 (as on Ethereum), on the destination an OFT minting and burning
 * its own (as elsewhere), each behind a test EndpointV2 with its eid, peers set both ways, and the
 * emulated relayer delivering packets between them.
 */

export const SOURCE_CHAIN_ID = 31337;
export const DESTINATION_CHAIN_ID = 31338;
export const SOURCE_EID = 30101;
export const DESTINATION_EID = 30110;
/** The test endpoints' fee: 0.0001 ETH per packet plus 1 gwei per byte of message and options. */
export const BASE_FEE_WEI = 100_000_000_000_000n;
export const FEE_PER_BYTE_WEI = 1_000_000_000n;
/** A cap the quoted fee stays under in these tests (0.001 ETH). */
export const FEE_CAP_WEI = '1000000000000000';

export interface OftDeployment {
  chainId: number;
  eid: number;
  rpcUrl: string;
  chain: PublicClient;
  anvil: Anvil;
  token: DeployedToken;
  endpoint: { address: Address; abi: Abi };
  oft: { address: Address; abi: Abi };
}

export interface Usdt0World {
  source: OftDeployment;
  destination: OftDeployment;
  relayer: LzRelayer;
  hotKey: Hex;
  hot: Address;
  stop(): Promise<void>;
}

async function deploy(chain: PublicClient, rpcUrl: string, c: { abi: Abi; bytecode: Hex }, args: readonly unknown[]): Promise<Address> {
  const wallet = createWalletClient({ account: privateKeyToAccount(ANVIL_DEV_KEY), transport: http(rpcUrl, { retryCount: 0 }) });
  const hash = await wallet.deployContract({ abi: c.abi, bytecode: c.bytecode, args, chain: null } as never);
  const receipt = await chain.waitForTransactionReceipt({ hash, pollingInterval: 50, timeout: 30_000 });
  if (!receipt.contractAddress) throw new Error('deployment produced no contract');
  return receipt.contractAddress.toLowerCase() as Address;
}

/** One call from `key` (anvil's dev key by default), waited for (throws when it reverts). */
export async function writeOft(d: OftDeployment, contract: { address: Address; abi: Abi }, functionName: string, args: readonly unknown[], key: Hex = ANVIL_DEV_KEY): Promise<Hex> {
  const wallet = createWalletClient({ account: privateKeyToAccount(key), transport: http(d.rpcUrl, { retryCount: 0 }) });
  const hash = await wallet.writeContract({ address: contract.address, abi: contract.abi, functionName, args, chain: null } as never);
  const receipt = await d.chain.waitForTransactionReceipt({ hash, pollingInterval: 50, timeout: 30_000 });
  if (receipt.status !== 'success') throw new Error(`${functionName} reverted`);
  return hash;
}

async function deployOft(chainId: number, eid: number, burnMint: boolean): Promise<OftDeployment> {
  const compiled = compileContracts('Oft.sol');
  const { anvil, chain } = await startLocalChain({ chainId });
  const token = await deployToken(chain, anvil.url, ANVIL_DEV_KEY, { name: 'USDT0', symbol: 'USDT0', decimals: 6 });
  const endpoint = await deploy(chain, anvil.url, compiled.TestEndpointV2!, [eid, BASE_FEE_WEI, FEE_PER_BYTE_WEI]);
  const oft = await deploy(chain, anvil.url, compiled.TestOFT!, [token.address, endpoint, burnMint]);
  return { chainId, eid, rpcUrl: anvil.url, chain, anvil, token, endpoint: { address: endpoint, abi: compiled.TestEndpointV2!.abi }, oft: { address: oft, abi: compiled.TestOFT!.abi } };
}

export async function startUsdt0World(opts: { funding?: bigint; delayMs?: number } = {}): Promise<Usdt0World> {
  const [source, destination] = await Promise.all([deployOft(SOURCE_CHAIN_ID, SOURCE_EID, false), deployOft(DESTINATION_CHAIN_ID, DESTINATION_EID, true)]);
  await writeOft(source, source.oft, 'setPeer', [DESTINATION_EID, pad(destination.oft.address)]);
  await writeOft(destination, destination.oft, 'setPeer', [SOURCE_EID, pad(source.oft.address)]);
  const relayerKey = generatePrivateKey();
  const relayerAddress = privateKeyToAccount(relayerKey).address;
  const hotKey = generatePrivateKey();
  const hot = privateKeyToAccount(hotKey).address.toLowerCase() as Address;
  for (const d of [source, destination]) {
    await writeOft(d, d.endpoint, 'setRelayer', [relayerAddress]);
    await d.anvil.rpc('anvil_setBalance', [relayerAddress, '0xde0b6b3a7640000']);
    await d.anvil.rpc('anvil_setBalance', [hot, '0xde0b6b3a7640000']);
  }
  await sendCall(source.chain, source.rpcUrl, ANVIL_DEV_KEY, source.token, 'mint', [hot, opts.funding ?? 1_000_000_000n]);
  // The standing allowance the lane expects (the OFT adapter pulls the amount; the lane never approves).
  await sendCall(source.chain, source.rpcUrl, hotKey, source.token, 'approve', [source.oft.address, maxUint256]);
  const relayer = startLzRelayer({
    sides: [source, destination].map((d) => ({ eid: d.eid, chain: d.chain, rpcUrl: d.rpcUrl, endpoint: d.endpoint.address })),
    relayerKey,
    delayMs: opts.delayMs ?? 0,
    pollMs: 100,
  });
  return {
    source,
    destination,
    relayer,
    hotKey,
    hot,
    stop: async () => {
      await relayer.stop();
      await Promise.all([source.anvil.stop(), destination.anvil.stop()]);
    },
  };
}

/** The FERRY_CONFIG_FILE for the world: both chains, the hot wallet on both, USDT0 on both, the usdt0 deployments. */
export function usdt0ConfigFile(w: Usdt0World, opts: { rpc?: { source?: string; destination?: string }; usdt0?: Record<string, unknown> } = {}): string {
  const dir = mkdtempSync(join(tmpdir(), 'ferry-usdt0-'));
  const path = join(dir, 'ferry.yaml');
  const chain = (d: OftDeployment, rpc: string) => ({ chain_id: d.chainId, rpc_url: rpc, poll_seconds: 0.2, max_fee_per_gas_cap_wei: TEST_FEE_CAP_WEI });
  const config = {
    evm: {
      chains: [chain(w.source, opts.rpc?.source ?? w.source.rpcUrl), chain(w.destination, opts.rpc?.destination ?? w.destination.rpcUrl)],
      signers: [{ key: 'hot', kind: 'local_key', private_key_env: 'USDT0_HOT_KEY', chains: [w.source.chainId, w.destination.chainId] }],
      tokens: [w.source, w.destination].map((d) => ({ chain_id: d.chainId, symbol: 'USDT0', address: d.token.address, decimals: 6 })),
    },
    usdt0: {
      deployments: [w.source, w.destination].map((d) => ({ chain_id: d.chainId, eid: d.eid, oft: d.oft.address, token: 'USDT0' })),
      poll_seconds: 0.2,
      ...opts.usdt0,
    },
  };
  writeFileSync(path, stringify(config));
  return path;
}

/** Every OFTSent on the source OFT and every OFTReceived on the destination OFT. */
export async function oftEvents(w: Usdt0World) {
  const sent = await w.source.chain.getContractEvents({ address: w.source.oft.address, abi: w.source.oft.abi, eventName: 'OFTSent', fromBlock: 0n, toBlock: 'latest' });
  const received = await w.destination.chain.getContractEvents({ address: w.destination.oft.address, abi: w.destination.oft.abi, eventName: 'OFTReceived', fromBlock: 0n, toBlock: 'latest' });
  return { sent, received };
}
