import { createPublicClient, createWalletClient, http, maxUint256, pad, type Abi, type Address, type Hex, type PublicClient } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { startLzRelayer, type LzRelayer } from '../../test/emulators/lz-relayer.ts';
import { compileContracts, deployToken, sendCall } from '../../test/helpers/contracts.ts';
import type { SandboxChain, SandboxComponent, SandboxContext } from './component.ts';

export interface SandboxUsdt0Options {
  source: () => SandboxChain;
  destination: () => SandboxChain;
  sourceEid: number;
  destinationEid: number;
  /** Deploys the contracts on both chains (a funded development account). */
  deployerKey: Hex;
  /** The hot wallet: it sends on the source (approving the OFT adapter once here). */
  hotWallet: { signerKey: string; key: Hex };
  /** USDT0 minted to the hot wallet on the source, in base units. */
  funding: bigint;
}

/**
 * USDT0 between two sandbox chains (docs/usdt0-lane.md): on each a test USDT0 (6 decimals), a test
 * EndpointV2 with its eid and a TestOFT (test/contracts/Oft.sol; an adapter locking on the source, a
 * mint/burn OFT on the destination), peers set both ways, the hot wallet funded and its standing
 * allowance to the adapter, and the emulated relayer (test/emulators/lz-relayer.ts) delivering the
 * packets. Adds both tokens, the hot wallet's destination chain and the `usdt0` section to Ferry's
 * configuration.
 */
export function sandboxUsdt0(opts: SandboxUsdt0Options): SandboxComponent {
  let relayer: LzRelayer | undefined;
  return {
    name: 'usdt0 (OFT contracts on both chains, LayerZero relayer emulator)',
    async start(ctx: SandboxContext) {
      const compiled = compileContracts('Oft.sol');
      const relayerKey = generatePrivateKey();
      const deployer = privateKeyToAccount(opts.deployerKey);
      const sides: Array<{ chain: SandboxChain; client: PublicClient; eid: number; token: Address; endpoint: Address; oft: { address: Address; abi: Abi } }> = [];
      for (const [chain, eid, burnMint] of [
        [opts.source(), opts.sourceEid, false],
        [opts.destination(), opts.destinationEid, true],
      ] as const) {
        const client = createPublicClient({ transport: http(chain.rpcUrl, { retryCount: 0 }) });
        const wallet = createWalletClient({ account: deployer, transport: http(chain.rpcUrl, { retryCount: 0 }) });
        const deploy = async (c: { abi: Abi; bytecode: Hex }, args: readonly unknown[]) => {
          const hash = await wallet.deployContract({ abi: c.abi, bytecode: c.bytecode, args, chain: null } as never);
          const receipt = await client.waitForTransactionReceipt({ hash, pollingInterval: 100, timeout: 60_000 });
          return receipt.contractAddress!.toLowerCase() as Address;
        };
        const call = async (address: Address, abi: Abi, functionName: string, args: readonly unknown[]) => {
          const hash = await wallet.writeContract({ address, abi, functionName, args, chain: null } as never);
          await client.waitForTransactionReceipt({ hash, pollingInterval: 100, timeout: 60_000 });
        };
        const token = await deployToken(client, chain.rpcUrl, opts.deployerKey, { name: 'USDT0', symbol: 'USDT0', decimals: 6 });
        // The endpoint's fee: 0.0001 ETH per packet plus 1 gwei per byte.
        const endpoint = await deploy(compiled.TestEndpointV2!, [eid, 100_000_000_000_000n, 1_000_000_000n]);
        const oft = await deploy(compiled.TestOFT!, [token.address, endpoint, burnMint]);
        await call(endpoint, compiled.TestEndpointV2!.abi, 'setRelayer', [privateKeyToAccount(relayerKey).address]);
        const fund = await wallet.sendTransaction({ to: privateKeyToAccount(relayerKey).address, value: 10n ** 18n, chain: null } as never);
        await client.waitForTransactionReceipt({ hash: fund, pollingInterval: 100, timeout: 60_000 });
        sides.push({ chain, client, eid, token: token.address, endpoint, oft: { address: oft, abi: compiled.TestOFT!.abi } });
        ctx.config.tokens.push({ chain_id: chain.chainId, symbol: 'USDT0', address: token.address, decimals: 6 });
        if (!burnMint) {
          await sendCall(client, chain.rpcUrl, opts.deployerKey, token, 'mint', [privateKeyToAccount(opts.hotWallet.key).address, opts.funding]);
          await sendCall(client, chain.rpcUrl, opts.hotWallet.key, token, 'approve', [oft, maxUint256]);
        }
      }
      const [a, b] = sides as [(typeof sides)[0], (typeof sides)[0]];
      for (const [here, there] of [
        [a, b],
        [b, a],
      ] as const) {
        const wallet = createWalletClient({ account: deployer, transport: http(here.chain.rpcUrl, { retryCount: 0 }) });
        const hash = await wallet.writeContract({ address: here.oft.address, abi: here.oft.abi, functionName: 'setPeer', args: [there.eid, pad(there.oft.address)], chain: null } as never);
        await here.client.waitForTransactionReceipt({ hash, pollingInterval: 100, timeout: 60_000 });
      }
      const signer = ctx.config.signers.find((s) => s.key === opts.hotWallet.signerKey);
      if (!signer) throw new Error(`signer ${opts.hotWallet.signerKey} is not configured`);
      signer.chains = [...new Set([...(signer.chains as number[]), b.chain.chainId])];
      relayer = startLzRelayer({ sides: sides.map((s) => ({ eid: s.eid, chain: s.client, rpcUrl: s.chain.rpcUrl, endpoint: s.endpoint })), relayerKey, pollMs: 500 });
      ctx.sections.usdt0 = { deployments: sides.map((s) => ({ chain_id: s.chain.chainId, eid: s.eid, oft: s.oft.address, token: 'USDT0' })), poll_seconds: 1 };
      ctx.facts.usdt0 = {
        source: { chain_id: a.chain.chainId, eid: a.eid, oft: a.oft.address, token: a.token },
        destination: { chain_id: b.chain.chainId, eid: b.eid, oft: b.oft.address, token: b.token },
      };
    },
    async stop() {
      await relayer?.stop();
    },
  };
}
