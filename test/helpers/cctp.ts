import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createWalletClient, http, maxUint256, pad, type Abi, type Address, type Hex, type PublicClient } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { stringify } from 'yaml';
import { startAttestationEmulator, type AttestationEmulator } from '../emulators/attestation.ts';
import { ANVIL_DEV_KEY, startLocalChain, TEST_FEE_CAP_WEI, type Anvil } from './anvil.ts';
import { compileContracts, deployToken, sendCall, type DeployedToken } from './contracts.ts';

/**
 * The CCTP v2 test contracts (test/contracts/Cctp.sol) on a local chain: a MessageTransmitterV2
 * trusting one attester, a TokenMessengerV2 on it, and the test USDC it burns and mints. Two such
 * deployments are linked both ways (remote messengers, token pairs) by linkCctp.
 */

export interface CctpDeployment {
  chainId: number;
  domain: number;
  rpcUrl: string;
  chain: PublicClient;
  token: DeployedToken;
  transmitter: { address: Address; abi: Abi };
  messenger: { address: Address; abi: Abi };
}

export async function deployCctp(
  chain: PublicClient,
  rpcUrl: string,
  deployerKey: Hex,
  opts: { domain: number; attester: Address; token?: DeployedToken },
): Promise<CctpDeployment> {
  const compiled = compileContracts('Cctp.sol');
  const token = opts.token ?? (await deployToken(chain, rpcUrl, deployerKey, { symbol: 'USDC', decimals: 6 }));
  const transmitter = await deploy(chain, rpcUrl, deployerKey, compiled.MessageTransmitterV2!, [opts.domain, opts.attester]);
  const messenger = await deploy(chain, rpcUrl, deployerKey, compiled.TokenMessengerV2!, [transmitter]);
  return {
    chainId: await chain.getChainId(),
    domain: opts.domain,
    rpcUrl,
    chain,
    token,
    transmitter: { address: transmitter, abi: compiled.MessageTransmitterV2!.abi },
    messenger: { address: messenger, abi: compiled.TokenMessengerV2!.abi },
  };
}

/** Each side accepts the other's messenger and mints its own token for the other's. */
export async function linkCctp(a: CctpDeployment, b: CctpDeployment, deployerKey: Hex): Promise<void> {
  for (const [here, there] of [
    [a, b],
    [b, a],
  ] as const) {
    await write(here, deployerKey, here.messenger, 'addRemoteTokenMessenger', [there.domain, pad(there.messenger.address)]);
    await write(here, deployerKey, here.messenger, 'linkTokenPair', [here.token.address, there.domain, pad(there.token.address)]);
  }
}

/** One call from `key` on a deployment's contract, waited for (throws when it reverts). */
export async function write(d: CctpDeployment, key: Hex, contract: { address: Address; abi: Abi }, functionName: string, args: readonly unknown[]): Promise<Hex> {
  const wallet = createWalletClient({ account: privateKeyToAccount(key), transport: http(d.rpcUrl, { retryCount: 0 }) });
  const hash = await wallet.writeContract({ address: contract.address, abi: contract.abi, functionName, args, chain: null } as never);
  const receipt = await d.chain.waitForTransactionReceipt({ hash, pollingInterval: 50, timeout: 30_000 });
  if (receipt.status !== 'success') throw new Error(`${functionName} reverted`);
  return hash;
}

async function deploy(chain: PublicClient, rpcUrl: string, key: Hex, c: { abi: Abi; bytecode: Hex }, args: readonly unknown[]): Promise<Address> {
  const wallet = createWalletClient({ account: privateKeyToAccount(key), transport: http(rpcUrl, { retryCount: 0 }) });
  const hash = await wallet.deployContract({ abi: c.abi, bytecode: c.bytecode, args, chain: null } as never);
  const receipt = await chain.waitForTransactionReceipt({ hash, pollingInterval: 50, timeout: 30_000 });
  if (!receipt.contractAddress) throw new Error('deployment produced no contract');
  return receipt.contractAddress.toLowerCase() as Address;
}

/** Two chains with CCTP, a hot wallet funded and approved on the source, an attestation emulator. */
export interface CctpWorld {
  source: CctpDeployment & { anvil: Anvil };
  destination: CctpDeployment & { anvil: Anvil };
  attesterKey: Hex;
  hotKey: Hex;
  hot: Address;
  iris: AttestationEmulator;
  stop(): Promise<void>;
}

export const SOURCE_CHAIN_ID = 31337;
export const DESTINATION_CHAIN_ID = 31338;
export const SOURCE_DOMAIN = 0;
export const DESTINATION_DOMAIN = 6;

export async function startCctpWorld(opts: { funding?: bigint; confirmations?: number } = {}): Promise<CctpWorld> {
  const attesterKey = generatePrivateKey();
  const attester = privateKeyToAccount(attesterKey).address;
  const [a, b] = await Promise.all([startLocalChain({ chainId: SOURCE_CHAIN_ID }), startLocalChain({ chainId: DESTINATION_CHAIN_ID })]);
  const source = { ...(await deployCctp(a.chain, a.anvil.url, ANVIL_DEV_KEY, { domain: SOURCE_DOMAIN, attester })), anvil: a.anvil };
  const destination = { ...(await deployCctp(b.chain, b.anvil.url, ANVIL_DEV_KEY, { domain: DESTINATION_DOMAIN, attester })), anvil: b.anvil };
  await linkCctp(source, destination, ANVIL_DEV_KEY);
  const hotKey = generatePrivateKey();
  const hot = privateKeyToAccount(hotKey).address.toLowerCase() as Address;
  for (const d of [source, destination]) await d.anvil.rpc('anvil_setBalance', [hot, '0xde0b6b3a7640000']);
  await sendCall(source.chain, source.rpcUrl, ANVIL_DEV_KEY, source.token, 'mint', [hot, opts.funding ?? 1_000_000_000n]);
  // The standing allowance the lane expects (docs/cctp-lane.md: the burn never approves).
  await sendCall(source.chain, source.rpcUrl, hotKey, source.token, 'approve', [source.messenger.address, maxUint256]);
  const iris = await startAttestationEmulator({
    sources: [source, destination].map((d) => ({ domain: d.domain, chain: d.chain, transmitter: d.transmitter.address })),
    attesterKey,
    confirmations: opts.confirmations ?? 2,
  });
  return {
    source,
    destination,
    attesterKey,
    hotKey,
    hot,
    iris,
    stop: async () => {
      await iris.stop();
      await Promise.all([a.anvil.stop(), b.anvil.stop()]);
    },
  };
}

/** The FERRY_CONFIG_FILE for the world: both chains with their cctp entries, the hot wallet on both, USDC on both (RPC and attestation service maybe behind proxies). */
export function cctpConfigFile(w: CctpWorld, opts: { rpc?: { source?: string; destination?: string }; attestationUrl?: string } = {}): string {
  const dir = mkdtempSync(join(tmpdir(), 'ferry-cctp-'));
  const path = join(dir, 'ferry.yaml');
  const chain = (d: CctpDeployment, rpc: string) => ({
    chain_id: d.chainId,
    rpc_url: rpc,
    poll_seconds: 0.2,
    max_fee_per_gas_cap_wei: TEST_FEE_CAP_WEI,
    cctp: { domain: d.domain, token_messenger: d.messenger.address, message_transmitter: d.transmitter.address },
  });
  const config = {
    evm: {
      chains: [chain(w.source, opts.rpc?.source ?? w.source.rpcUrl), chain(w.destination, opts.rpc?.destination ?? w.destination.rpcUrl)],
      signers: [{ key: 'hot', kind: 'local_key', private_key_env: 'CCTP_HOT_KEY', chains: [w.source.chainId, w.destination.chainId] }],
      tokens: [w.source, w.destination].map((d) => ({ chain_id: d.chainId, symbol: 'USDC', address: d.token.address, decimals: 6 })),
    },
    cctp: { attestation_url: opts.attestationUrl ?? w.iris.url, poll_seconds: 0.2, timeout_ms: 5000 },
  };
  writeFileSync(path, stringify(config));
  return path;
}

/** Every DepositForBurn the source messenger emitted, and every MessageReceived on the destination. */
export async function cctpEvents(w: CctpWorld) {
  const burns = await w.source.chain.getContractEvents({ address: w.source.messenger.address, abi: w.source.messenger.abi, eventName: 'DepositForBurn', fromBlock: 0n, toBlock: 'latest' });
  const mints = await w.destination.chain.getContractEvents({
    address: w.destination.transmitter.address,
    abi: w.destination.transmitter.abi,
    eventName: 'MessageReceived',
    fromBlock: 0n,
    toBlock: 'latest',
  });
  return { burns, mints };
}
