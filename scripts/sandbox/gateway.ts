import { createPublicClient, createWalletClient, http, type Abi, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { startGatewayApi, type GatewayApiEmulator } from '../../test/emulators/gateway-api.ts';
import { compileContracts, deployToken } from '../../test/helpers/contracts.ts';
import type { SandboxChain, SandboxComponent, SandboxContext } from './component.ts';

export interface SandboxGatewayOptions {
  source: () => SandboxChain;
  destination: () => SandboxChain;
  sourceDomain: number;
  destinationDomain: number;
  /** Deploys the contracts on both chains (a funded development account). */
  deployerKey: Hex;
  /** The hot wallet: it deposits on the source, signs the burn intent and mints on the destination. */
  hotWallet: { signerKey: string };
  /** The token's symbol (USDC); a chain without it listed gets a test token of its own. */
  symbol: string;
  /** The emulated API's base fee per burn, in base units (Circle publishes one per source chain). */
  baseFee: bigint;
}

/**
 * Circle Gateway between two sandbox chains (docs/gateway-lane.md): a GatewayWallet and a
 * GatewayMinter (test/contracts/Gateway.sol) on each, supporting the chain's USDC, and the emulated
 * Gateway API (test/emulators/gateway-api.ts) with its own burn and attestation signers. Adds the
 * `gateway` section, the hot wallet's destination chain and its typed data (BurnIntent for
 * exec.gateway.intent) to Ferry's configuration.
 */
export function sandboxGateway(opts: SandboxGatewayOptions): SandboxComponent {
  let api: GatewayApiEmulator | undefined;
  return {
    name: 'gateway (GatewayWallet and GatewayMinter on both chains, Gateway API emulator)',
    async start(ctx: SandboxContext) {
      const compiled = compileContracts('Gateway.sol');
      const burnSignerKey = generatePrivateKey();
      const attestationSignerKey = generatePrivateKey();
      const burnSigner = privateKeyToAccount(burnSignerKey).address;
      const attester = privateKeyToAccount(attestationSignerKey).address;
      const feeRecipient = privateKeyToAccount(generatePrivateKey()).address;
      const deployer = privateKeyToAccount(opts.deployerKey);
      const sides = [];
      for (const [chain, domain] of [
        [opts.source(), opts.sourceDomain],
        [opts.destination(), opts.destinationDomain],
      ] as const) {
        const client = createPublicClient({ transport: http(chain.rpcUrl, { retryCount: 0 }) });
        const wallet = createWalletClient({ account: deployer, transport: http(chain.rpcUrl, { retryCount: 0 }) });
        const wait = (hash: Hex) => client.waitForTransactionReceipt({ hash, pollingInterval: 100, timeout: 60_000 });
        const deploy = async (c: { abi: Abi; bytecode: Hex }, args: readonly unknown[]) => (await wait(await wallet.deployContract({ abi: c.abi, bytecode: c.bytecode, args, chain: null } as never))).contractAddress!.toLowerCase() as Address;
        const call = async (address: Address, abi: Abi, functionName: string, args: readonly unknown[]) => void (await wait(await wallet.writeContract({ address, abi, functionName, args, chain: null } as never)));
        let listed = ctx.config.tokens.find((t) => t.chain_id === chain.chainId && t.symbol === opts.symbol);
        if (!listed) {
          const token = await deployToken(client, chain.rpcUrl, opts.deployerKey, { name: 'USD Coin', symbol: opts.symbol, decimals: 6 });
          listed = { chain_id: chain.chainId, symbol: opts.symbol, address: token.address, decimals: 6 };
          ctx.config.tokens.push(listed);
        }
        const token = String(listed.address).toLowerCase() as Address;
        const gatewayWallet = await deploy(compiled.TestGatewayWallet!, [domain, burnSigner, feeRecipient]);
        const minter = await deploy(compiled.TestGatewayMinter!, [domain, attester]);
        await call(gatewayWallet, compiled.TestGatewayWallet!.abi, 'addSupportedToken', [token]);
        await call(minter, compiled.TestGatewayMinter!.abi, 'addSupportedToken', [token]);
        await wait(await wallet.sendTransaction({ to: burnSigner, value: 10n ** 18n, chain: null } as never));
        sides.push({ domain, chain: client, rpcUrl: chain.rpcUrl, chainId: chain.chainId, wallet: gatewayWallet, minter, token, baseFee: opts.baseFee });
      }
      const signer = ctx.config.signers.find((s) => s.key === opts.hotWallet.signerKey);
      if (!signer) throw new Error(`signer ${opts.hotWallet.signerKey} is not configured`);
      signer.chains = [...new Set([...(signer.chains as number[]), ...sides.map((s) => s.chainId)])];
      signer.typed_data = [...((signer.typed_data as unknown[]) ?? []), { executor: 'exec.gateway.intent', primary_types: ['BurnIntent'] }];
      api = await startGatewayApi({ sides, burnSignerKey, attestationSignerKey });
      ctx.sections.gateway = { api_url: api.url, token: opts.symbol, chains: sides.map((s) => ({ chain_id: s.chainId, domain: s.domain, wallet: s.wallet, minter: s.minter })), poll_seconds: 1 };
      ctx.facts.gateway = {
        api_url: api.url,
        source: { chain_id: sides[0]!.chainId, domain: sides[0]!.domain, wallet: sides[0]!.wallet, token: sides[0]!.token },
        destination: { chain_id: sides[1]!.chainId, domain: sides[1]!.domain, minter: sides[1]!.minter, token: sides[1]!.token },
      };
    },
    async stop() {
      await api?.stop();
    },
  };
}
