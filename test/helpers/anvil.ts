import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { after, before } from 'node:test';
import { createPublicClient, http, type Address, type PublicClient } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { freePort } from './net.ts';
import { waitFor } from './wait.ts';

/**
 * A real local EVM node (anvil from the @foundry-rs/anvil package) on 127.0.0.1, for the EVM lane
 * tests. It listens on a free loopback port, mines a block per transaction, and is stopped by the
 * caller (usually in after()).
 */

/** anvil's first default development account: funded with 10000 ETH on every fresh anvil. */
export const ANVIL_DEV_KEY = '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80' as const;
export const ANVIL_DEV_ADDRESS = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266' as const;
export const ANVIL_CHAIN_ID = 31337;
/**
 * The fee cap (maxFeePerGas, wei) the test configurations give a chain a signer signs for: 500 gwei,
 * far above what anvil asks, so only a test about the cap meets it.
 */
export const TEST_FEE_CAP_WEI = '500000000000';

export interface Anvil {
  url: string;
  port: number;
  /** One JSON-RPC call; throws on a JSON-RPC error. */
  rpc<T = unknown>(method: string, params?: unknown[]): Promise<T>;
  /** Mines `blocks` empty blocks. */
  mine(blocks?: number): Promise<void>;
  stop(): Promise<void>;
}

export async function startAnvil(opts: { chainId?: number; port?: number; blockTimeSeconds?: number } = {}): Promise<Anvil> {
  const port = opts.port ?? (await freePort());
  const url = `http://127.0.0.1:${port}`;
  const child = spawn(
    anvilBinary(),
    [
      ...['--host', '127.0.0.1', '--port', String(port), '--chain-id', String(opts.chainId ?? ANVIL_CHAIN_ID), '--silent'],
      // A block every N seconds instead of one per transaction (the sandbox: confirmations advance on their own).
      ...(opts.blockTimeSeconds ? ['--block-time', String(opts.blockTimeSeconds)] : []),
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
  let exitedEarly = false;
  child.once('exit', () => (exitedEarly = true));

  const rpc = async <T>(method: string, params: unknown[] = []): Promise<T> => {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
    });
    const body = (await res.json()) as { result?: T; error?: { message: string } };
    if (body.error) throw new Error(`${method}: ${body.error.message}`);
    return body.result as T;
  };

  // Ready once it answers eth_chainId; bounded so a broken binary fails the test instead of hanging.
  try {
    await waitFor(`anvil to answer on ${url}`, async () => {
      if (exitedEarly) throw new Error(`anvil exited before answering: ${stderr}`);
      return rpc('eth_chainId').then(
        () => true,
        () => false,
      );
    }, 15_000);
  } catch (err) {
    child.kill('SIGKILL');
    throw new Error(`${(err as Error).message}: ${stderr}`);
  }

  return {
    url,
    port,
    rpc,
    mine: async (blocks = 1) => void (await rpc('anvil_mine', [`0x${blocks.toString(16)}`])),
    stop: () => stop(child),
  };
}

export interface LocalChain {
  anvil: Anvil;
  /** A viem client on it that never retries: a failed call fails the test at once. */
  chain: PublicClient;
}

/** A fresh anvil and a client on it, for a test file's before() (the caller stops anvil in after()). */
export async function startLocalChain(opts: Parameters<typeof startAnvil>[0] = {}): Promise<LocalChain> {
  const anvil = await startAnvil(opts);
  return { anvil, chain: createPublicClient({ transport: http(anvil.url, { retryCount: 0 }) }) };
}

/**
 * A fresh anvil for the whole test file: started in before() (then `ready` runs, e.g. to keep the
 * handles and deploy contracts) and stopped in after().
 */
export function localChainForFile(ready: (local: LocalChain) => void | Promise<void>, opts: Parameters<typeof startAnvil>[0] = {}): void {
  let local: LocalChain | undefined;
  before(async () => {
    local = await startLocalChain(opts);
    await ready(local);
  });
  after(async () => {
    await local?.anvil.stop();
  });
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  await exited;
}

/** The platform binary itself when installed (a signal then reaches anvil, not a wrapper). */
function anvilBinary(): string {
  const require = createRequire(import.meta.url);
  const arch = process.arch === 'x64' ? 'amd64' : process.arch;
  try {
    const pkg = require.resolve(`@foundry-rs/anvil-${process.platform}-${arch}/package.json`);
    const bin = join(dirname(pkg), 'bin', 'anvil');
    if (existsSync(bin)) return bin;
  } catch {
    // fall through to the package's launcher
  }
  return join(dirname(require.resolve('@foundry-rs/anvil/package.json')), 'bin.mjs');
}


/** A new address nobody holds the key of: a recipient with nothing yet. */
export function freshAddress(): Address {
  return privateKeyToAccount(generatePrivateKey()).address;
}
