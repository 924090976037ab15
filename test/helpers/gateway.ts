import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createWalletClient, http, type Abi, type Address, type Hex, type PublicClient } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { stringify } from 'yaml';
import { startGatewayApi, type GatewayApiEmulator } from '../emulators/gateway-api.ts';
import { ANVIL_DEV_KEY, startLocalChain, TEST_FEE_CAP_WEI, type Anvil } from './anvil.ts';
import { compileContracts, deployToken, sendCall, type DeployedToken } from './contracts.ts';

/**
 * Circle Gateway on two local chains (test/contracts/Gateway.sol): on each a test USDC, a
 * GatewayWallet and a GatewayMinter (the same pair on every chain, as Circle deploys them), with
 * the emulated Gateway API (test/emulators/gateway-api.ts) burning on the source with its burn
 * signer and attesting for the destination's minter. Domains are Ethereum's (0) and Base's (6).
 */

export const SOURCE_CHAIN_ID = 31337;
export const DESTINATION_CHAIN_ID = 31338;
export const SOURCE_DOMAIN = 0;
export const DESTINATION_DOMAIN = 6;
/** The emulated API's base fee on each domain: 0.01 USDC. */
export const BASE_FEE = 10_000n;
/** A max fee the tests approve: 0.5 USDC. */
export const MAX_FEE = '0.5';

type Contract = { address: Address; abi: Abi };

export interface GatewaySide {
  chainId: number;
  domain: number;
  rpcUrl: string;
  chain: PublicClient;
  anvil: Anvil;
  token: DeployedToken;
  wallet: Contract;
  minter: Contract;
}

export interface GatewayWorld {
  source: GatewaySide;
  destination: GatewaySide;
  api: GatewayApiEmulator;
  hotKey: Hex;
  hot: Address;
  feeRecipient: Address;
  stop(): Promise<void>;
}

async function deploy(d: { chain: PublicClient; rpcUrl: string }, c: { abi: Abi; bytecode: Hex }, args: readonly unknown[]): Promise<Address> {
  const wallet = createWalletClient({ account: privateKeyToAccount(ANVIL_DEV_KEY), transport: http(d.rpcUrl, { retryCount: 0 }) });
  const hash = await wallet.deployContract({ abi: c.abi, bytecode: c.bytecode, args, chain: null } as never);
  const receipt = await d.chain.waitForTransactionReceipt({ hash, pollingInterval: 50, timeout: 30_000 });
  if (!receipt.contractAddress) throw new Error('deployment produced no contract');
  return receipt.contractAddress.toLowerCase() as Address;
}

/** One call from `key` (anvil's dev key by default), waited for (throws when it reverts). */
export async function writeGateway(d: { chain: PublicClient; rpcUrl: string }, contract: Contract, functionName: string, args: readonly unknown[], key: Hex = ANVIL_DEV_KEY): Promise<Hex> {
  const wallet = createWalletClient({ account: privateKeyToAccount(key), transport: http(d.rpcUrl, { retryCount: 0 }) });
  const hash = await wallet.writeContract({ address: contract.address, abi: contract.abi, functionName, args, chain: null } as never);
  const receipt = await d.chain.waitForTransactionReceipt({ hash, pollingInterval: 50, timeout: 30_000 });
  if (receipt.status !== 'success') throw new Error(`${functionName} reverted`);
  return hash;
}

async function side(chainId: number, domain: number, burnSigner: Address, attester: Address, feeRecipient: Address): Promise<GatewaySide> {
  const compiled = compileContracts('Gateway.sol');
  const { anvil, chain } = await startLocalChain({ chainId });
  const d = { chain, rpcUrl: anvil.url };
  const token = await deployToken(chain, anvil.url, ANVIL_DEV_KEY, { name: 'USD Coin', symbol: 'USDC', decimals: 6 });
  const wallet = { address: await deploy(d, compiled.TestGatewayWallet!, [domain, burnSigner, feeRecipient]), abi: compiled.TestGatewayWallet!.abi };
  const minter = { address: await deploy(d, compiled.TestGatewayMinter!, [domain, attester]), abi: compiled.TestGatewayMinter!.abi };
  await writeGateway(d, wallet, 'addSupportedToken', [token.address]);
  await writeGateway(d, minter, 'addSupportedToken', [token.address]);
  return { chainId, domain, rpcUrl: anvil.url, chain, anvil, token, wallet, minter };
}

export async function startGatewayWorld(opts: { funding?: bigint } = {}): Promise<GatewayWorld> {
  const burnSignerKey = generatePrivateKey();
  const attestationSignerKey = generatePrivateKey();
  const burnSigner = privateKeyToAccount(burnSignerKey).address;
  const attester = privateKeyToAccount(attestationSignerKey).address;
  const feeRecipient = privateKeyToAccount(generatePrivateKey()).address.toLowerCase() as Address;
  const [source, destination] = await Promise.all([
    side(SOURCE_CHAIN_ID, SOURCE_DOMAIN, burnSigner, attester, feeRecipient),
    side(DESTINATION_CHAIN_ID, DESTINATION_DOMAIN, burnSigner, attester, feeRecipient),
  ]);
  const hotKey = generatePrivateKey();
  const hot = privateKeyToAccount(hotKey).address.toLowerCase() as Address;
  for (const d of [source, destination]) {
    await d.anvil.rpc('anvil_setBalance', [burnSigner, '0xde0b6b3a7640000']);
    await d.anvil.rpc('anvil_setBalance', [hot, '0xde0b6b3a7640000']);
  }
  await sendCall(source.chain, source.rpcUrl, ANVIL_DEV_KEY, source.token, 'mint', [hot, opts.funding ?? 1_000_000_000n]);
  const api = await startGatewayApi({
    sides: [source, destination].map((d) => ({ domain: d.domain, chain: d.chain, rpcUrl: d.rpcUrl, wallet: d.wallet.address, minter: d.minter.address, token: d.token.address, baseFee: BASE_FEE })),
    burnSignerKey,
    attestationSignerKey,
  });
  return {
    source,
    destination,
    api,
    hotKey,
    hot,
    feeRecipient,
    stop: async () => {
      await api.stop();
      await Promise.all([source.anvil.stop(), destination.anvil.stop()]);
    },
  };
}

/** The FERRY_CONFIG_FILE for the world: both chains, the hot wallet on both (its typed data: burn intents), USDC on both, the gateway section. */
export function gatewayConfigFile(w: GatewayWorld, opts: { rpc?: { source?: string; destination?: string }; gateway?: Record<string, unknown>; apiUrl?: string } = {}): string {
  const dir = mkdtempSync(join(tmpdir(), 'ferry-gateway-'));
  const path = join(dir, 'ferry.yaml');
  const chain = (d: GatewaySide, rpc: string) => ({ chain_id: d.chainId, rpc_url: rpc, poll_seconds: 0.2, max_fee_per_gas_cap_wei: TEST_FEE_CAP_WEI });
  const config = {
    evm: {
      chains: [chain(w.source, opts.rpc?.source ?? w.source.rpcUrl), chain(w.destination, opts.rpc?.destination ?? w.destination.rpcUrl)],
      signers: [
        {
          key: 'hot',
          kind: 'local_key',
          private_key_env: 'GATEWAY_HOT_KEY',
          chains: [w.source.chainId, w.destination.chainId],
          typed_data: [{ executor: 'exec.gateway.intent', primary_types: ['BurnIntent'] }],
        },
      ],
      tokens: [w.source, w.destination].map((d) => ({ chain_id: d.chainId, symbol: 'USDC', address: d.token.address, decimals: 6 })),
    },
    gateway: {
      api_url: opts.apiUrl ?? w.api.url,
      token: 'USDC',
      chains: [w.source, w.destination].map((d) => ({ chain_id: d.chainId, domain: d.domain, wallet: d.wallet.address, minter: d.minter.address })),
      poll_seconds: 0.2,
      ...opts.gateway,
    },
  };
  writeFileSync(path, stringify(config));
  return path;
}

/** Every Deposited and GatewayBurned on the source wallet and every AttestationUsed on the destination minter. */
export async function gatewayEvents(w: GatewayWorld) {
  const range = { fromBlock: 0n, toBlock: 'latest' } as const;
  const deposited = await w.source.chain.getContractEvents({ address: w.source.wallet.address, abi: w.source.wallet.abi, eventName: 'Deposited', ...range });
  const burned = await w.source.chain.getContractEvents({ address: w.source.wallet.address, abi: w.source.wallet.abi, eventName: 'GatewayBurned', ...range });
  const minted = await w.destination.chain.getContractEvents({ address: w.destination.minter.address, abi: w.destination.minter.abi, eventName: 'AttestationUsed', ...range });
  return { deposited, burned, minted };
}
