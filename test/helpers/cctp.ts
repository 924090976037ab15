import { createWalletClient, http, pad, type Abi, type Address, type Hex, type PublicClient } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { compileContracts, deployToken, type DeployedToken } from './contracts.ts';

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
