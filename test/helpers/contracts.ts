import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import solc from 'solc';
import { createWalletClient, http, type Abi, type Address, type Hex, type PublicClient } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { ANVIL_DEV_KEY, localChainForFile, type LocalChain } from './anvil.ts';

/**
 * The Solidity test contracts (test/contracts/*.sol), compiled with the pinned `solc` npm package.
 * Compiling takes seconds, so the output is cached under .tmp/solc/ keyed by the hash of the
 * source and the compiler version: a changed contract recompiles, an unchanged one is read back.
 */

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const CONTRACTS = join(ROOT, 'test', 'contracts');
const CACHE = join(ROOT, '.tmp', 'solc');

export interface CompiledContract {
  abi: Abi;
  bytecode: Hex;
}

/** Every contract of one source file in test/contracts, by contract name. */
export function compileContracts(file = 'TestToken.sol'): Record<string, CompiledContract> {
  const source = readFileSync(join(CONTRACTS, file), 'utf8');
  const version = solc.version();
  // cancun: what every chain the lane targets runs, anvil included.
  const settings = { evmVersion: 'cancun', optimizer: { enabled: true, runs: 200 }, outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object'] } } };
  const key = createHash('sha256').update(version).update(JSON.stringify(settings)).update(file).update('\0').update(source).digest('hex').slice(0, 16);
  const cached = join(CACHE, `${file}.${key}.json`);
  try {
    return JSON.parse(readFileSync(cached, 'utf8')) as Record<string, CompiledContract>;
  } catch {
    // not compiled yet
  }
  const input = {
    language: 'Solidity',
    sources: { [file]: { content: source } },
    settings,
  };
  const output = JSON.parse(solc.compile(JSON.stringify(input))) as {
    errors?: Array<{ severity: string; formattedMessage: string }>;
    contracts: Record<string, Record<string, { abi: Abi; evm: { bytecode: { object: string } } }>>;
  };
  const errors = (output.errors ?? []).filter((e) => e.severity === 'error');
  if (errors.length) throw new Error(`solc: ${errors.map((e) => e.formattedMessage).join('\n')}`);
  const out: Record<string, CompiledContract> = {};
  for (const [name, c] of Object.entries(output.contracts[file] ?? {})) out[name] = { abi: c.abi, bytecode: `0x${c.evm.bytecode.object}` };
  mkdirSync(CACHE, { recursive: true });
  // Written whole, then renamed: a parallel test file never reads half a cache entry.
  const tmp = `${cached}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(out));
  renameSync(tmp, cached);
  return out;
}

export type TokenContract = 'TestToken' | 'RevertingToken' | 'SilentToken';

export interface DeployedToken {
  address: Address;
  abi: Abi;
  decimals: number;
}

/** Deploys a test token from `deployerKey` and waits for its receipt. */
export async function deployToken(
  chain: PublicClient,
  rpcUrl: string,
  deployerKey: Hex,
  opts: { contract?: TokenContract; name?: string; symbol?: string; decimals?: number } = {},
): Promise<DeployedToken> {
  const compiled = compileContracts()[opts.contract ?? 'TestToken'];
  if (!compiled) throw new Error(`no contract ${opts.contract}`);
  const wallet = walletFor(chain, rpcUrl, deployerKey);
  const decimals = opts.decimals ?? 6;
  const hash = await wallet.deployContract({
    abi: compiled.abi,
    bytecode: compiled.bytecode,
    args: [opts.name ?? 'Test USD Coin', opts.symbol ?? 'USDC', decimals],
    chain: null,
  });
  const receipt = await chain.waitForTransactionReceipt({ hash, pollingInterval: 50, timeout: 30_000 });
  if (!receipt.contractAddress) throw new Error('deployment produced no contract');
  return { address: receipt.contractAddress.toLowerCase() as Address, abi: compiled.abi, decimals };
}

/** Sends one contract call from `key` and waits until it is mined (throws when it reverts). */
export async function sendCall(
  chain: PublicClient,
  rpcUrl: string,
  key: Hex,
  token: DeployedToken,
  functionName: string,
  args: readonly unknown[],
): Promise<Hex> {
  const wallet = walletFor(chain, rpcUrl, key);
  const hash = await wallet.writeContract({ address: token.address, abi: token.abi, functionName, args, chain: null } as never);
  const receipt = await chain.waitForTransactionReceipt({ hash, pollingInterval: 50, timeout: 30_000 });
  if (receipt.status !== 'success') throw new Error(`${functionName} reverted`);
  return hash;
}

export async function tokenBalance(chain: PublicClient, token: DeployedToken, owner: Address): Promise<bigint> {
  return (await chain.readContract({ address: token.address, abi: token.abi, functionName: 'balanceOf', args: [owner] })) as bigint;
}

function walletFor(chain: PublicClient, rpcUrl: string, key: Hex) {
  void chain;
  return createWalletClient({ account: privateKeyToAccount(key), transport: http(rpcUrl, { retryCount: 0 }) });
}

export interface UsdcChain extends LocalChain {
  /** A TestToken named USDC with 6 decimals, deployed by anvil's dev account. */
  usdc: DeployedToken;
}

/**
 * A fresh anvil for the whole test file with a test USDC deployed on it: started in before(), where
 * `ready` then receives the handles (and may do more, e.g. mine), and stopped in after().
 */
export function usdcChainForFile(ready: (local: UsdcChain) => void | Promise<void>): void {
  localChainForFile(async (local) => {
    const usdc = await deployToken(local.chain, local.anvil.url, ANVIL_DEV_KEY, { symbol: 'USDC', decimals: 6 });
    await ready({ ...local, usdc });
  });
}

/** A TestAggregator (test/contracts/PriceFeed.sol): Chainlink's AggregatorV3Interface, rounds written by the test. */
export interface DeployedAggregator {
  address: Address;
  abi: Abi;
  /** Writes the next round (updatedAt in seconds; answeredInRound 0: the round itself) and waits until it is mined. */
  setRound(answer: bigint, updatedAt: number, opts?: { startedAt?: number; answeredInRound?: bigint }): Promise<void>;
}

export async function deployAggregator(chain: PublicClient, rpcUrl: string, deployerKey: Hex, decimals = 8, description = 'ETH / USD'): Promise<DeployedAggregator> {
  const compiled = compileContracts('PriceFeed.sol').TestAggregator;
  if (!compiled) throw new Error('no contract TestAggregator');
  const wallet = walletFor(chain, rpcUrl, deployerKey);
  const hash = await wallet.deployContract({ abi: compiled.abi, bytecode: compiled.bytecode, args: [decimals, description], chain: null });
  const receipt = await chain.waitForTransactionReceipt({ hash, pollingInterval: 50, timeout: 30_000 });
  if (!receipt.contractAddress) throw new Error('deployment produced no contract');
  const address = receipt.contractAddress.toLowerCase() as Address;
  return {
    address,
    abi: compiled.abi,
    async setRound(answer, updatedAt, opts = {}) {
      const tx = await wallet.writeContract({
        address,
        abi: compiled.abi,
        functionName: 'setRound',
        args: [answer, BigInt(opts.startedAt ?? updatedAt), BigInt(updatedAt), opts.answeredInRound ?? 0n],
        chain: null,
      } as never);
      const r = await chain.waitForTransactionReceipt({ hash: tx, pollingInterval: 50, timeout: 30_000 });
      if (r.status !== 'success') throw new Error('setRound reverted');
    },
  };
}
