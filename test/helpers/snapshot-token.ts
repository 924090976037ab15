import { readFileSync } from 'node:fs';
import { createWalletClient, http, publicActions, type Abi, type Address, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';

/**
 * The tiny ERC-20 of test/fixtures/snapshot-token.sol, deployed from its precompiled bytecode
 * (test/fixtures/snapshot-token.json, compiled once with solc 0.8.37): the deployer holds `supply`.
 */
const artifact = JSON.parse(readFileSync(new URL('../fixtures/snapshot-token.json', import.meta.url), 'utf8')) as { abi: Abi; bytecode: Hex };

export const snapshotTokenAbi = artifact.abi;

export async function deploySnapshotToken(rpcUrl: string, deployerKey: Hex, decimals: number, supply: bigint): Promise<Address> {
  const client = createWalletClient({ account: privateKeyToAccount(deployerKey), transport: http(rpcUrl) }).extend(publicActions);
  const chainId = await client.getChainId();
  const hash = await client.deployContract({
    abi: artifact.abi,
    bytecode: artifact.bytecode,
    args: [decimals, supply],
    chain: { id: chainId, name: 'test', nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 }, rpcUrls: { default: { http: [rpcUrl] } } },
  });
  const receipt = await client.waitForTransactionReceipt({ hash, pollingInterval: 50, timeout: 20_000 });
  if (receipt.status !== 'success' || !receipt.contractAddress) throw new Error('token deployment failed');
  return receipt.contractAddress;
}

/** Sends `value` base units of the token from the key's account to `to`, and waits for the receipt. */
export async function transferSnapshotToken(rpcUrl: string, key: Hex, token: Address, to: Address, value: bigint): Promise<void> {
  const client = createWalletClient({ account: privateKeyToAccount(key), transport: http(rpcUrl) }).extend(publicActions);
  const chainId = await client.getChainId();
  const hash = await client.writeContract({
    address: token,
    abi: artifact.abi,
    functionName: 'transfer',
    args: [to, value],
    chain: { id: chainId, name: 'test', nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 }, rpcUrls: { default: { http: [rpcUrl] } } },
  });
  const receipt = await client.waitForTransactionReceipt({ hash, pollingInterval: 50, timeout: 20_000 });
  if (receipt.status !== 'success') throw new Error('token transfer failed');
}
