import { createPublicClient, createWalletClient, http, maxUint256, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { startCcipOffRamp, type CcipExecutor } from '../../test/emulators/ccip-offramp.ts';
import { deployCcipSide, wireCcip } from '../../test/helpers/ccip.ts';
import { sendCall } from '../../test/helpers/contracts.ts';
import type { SandboxChain, SandboxComponent, SandboxContext } from './component.ts';

export interface SandboxCcipOptions {
  source: () => SandboxChain;
  destination: () => SandboxChain;
  /** The chains' CCIP selectors (any distinct uint64s; the sandbox uses Ethereum's and Arbitrum's). */
  sourceSelector: bigint;
  destinationSelector: bigint;
  /** Deploys and wires the contracts on both chains (a funded development account). */
  deployerKey: Hex;
  /** The hot wallet: it sends on the source (its standing allowance to the Router is given here). */
  hotWallet: { signerKey: string; key: Hex };
  /** The token the lane moves: locked on the source, minted on the destination. */
  token: { name: string; symbol: string; decimals: number };
  /** Minted to the hot wallet on the source, in base units. */
  funding: bigint;
  /** LINK minted to the hot wallet on the source, in juels: it pays the fee of a send in LINK (`ccip.fee_tokens`). */
  linkFunding: bigint;
}

/**
 * CCIP between two sandbox chains (docs/ccip-lane.md): on each the CCIP 1.6 test contracts
 * (test/contracts/Ccip.sol: Router, OnRamp with its fees, token pool, TokenAdminRegistry, OffRamp)
 * and the token, wired both ways; the hot wallet funded on the source with its allowance to the
 * Router; and the emulated execution (test/emulators/ccip-offramp.ts) carrying each message from
 * an OnRamp to the other chain's OffRamp. Adds the token on both chains, the hot wallet's destination
 * chain and the `ccip` section (with the registries and pools, so ccip_drift checks them) to Ferry's
 * configuration.
 */
export function sandboxCcip(opts: SandboxCcipOptions): SandboxComponent {
  let executor: CcipExecutor | undefined;
  return {
    name: 'ccip (Router, OnRamp, pools and OffRamp on both chains, execution emulator)',
    async start(ctx: SandboxContext) {
      const transmitterKey = generatePrivateKey();
      const transmitter = privateKeyToAccount(transmitterKey).address;
      const deployer = privateKeyToAccount(opts.deployerKey);
      const sides: Array<Awaited<ReturnType<typeof deployCcipSide>>> = [];
      for (const [chain, selector, mints] of [
        [opts.source(), opts.sourceSelector, false],
        [opts.destination(), opts.destinationSelector, true],
      ] as const) {
        const client = createPublicClient({ transport: http(chain.rpcUrl, { retryCount: 0 }) });
        const side = await deployCcipSide({ chain: client, rpcUrl: chain.rpcUrl, chainId: chain.chainId, selector }, { mints, token: opts.token, deployerKey: opts.deployerKey });
        // The emulated execution pays for its transactions on both chains.
        const wallet = createWalletClient({ account: deployer, transport: http(chain.rpcUrl, { retryCount: 0 }) });
        const fund = await wallet.sendTransaction({ to: transmitter, value: 10n ** 18n, chain: null } as never);
        await client.waitForTransactionReceipt({ hash: fund, pollingInterval: 100, timeout: 60_000 });
        ctx.config.tokens.push({ chain_id: chain.chainId, symbol: opts.token.symbol, address: side.token.address, decimals: opts.token.decimals });
        // LINK, the fee token a send may pay in (its rate is set on the OnRamp by wireCcip).
        ctx.config.tokens.push({ chain_id: chain.chainId, symbol: 'LINK', address: side.link.address, decimals: 18 });
        sides.push(side);
      }
      const [a, b] = sides as [(typeof sides)[0], (typeof sides)[0]];
      await wireCcip(a, b, transmitter, opts.deployerKey);
      await wireCcip(b, a, transmitter, opts.deployerKey);
      const hot = privateKeyToAccount(opts.hotWallet.key).address;
      await sendCall(a.chain, a.rpcUrl, opts.deployerKey, a.token, 'mint', [hot, opts.funding]);
      // No standing LINK allowance: a send paying in LINK approves its cap to the Router in its own fee approval node.
      await sendCall(a.chain, a.rpcUrl, opts.deployerKey, a.link, 'mint', [hot, opts.linkFunding]);
      // The standing allowance the lane expects (the Router pulls the amount into the pool; the lane never approves).
      await sendCall(a.chain, a.rpcUrl, opts.hotWallet.key, a.token, 'approve', [a.router.address, maxUint256]);
      const signer = ctx.config.signers.find((s) => s.key === opts.hotWallet.signerKey);
      if (!signer) throw new Error(`signer ${opts.hotWallet.signerKey} is not configured`);
      signer.chains = [...new Set([...(signer.chains as number[]), b.chainId])];
      executor = startCcipOffRamp({
        sides: sides.map((d) => ({ selector: d.selector, chain: d.chain, rpcUrl: d.rpcUrl, onRamp: d.onRamp.address, offRamp: d.offRamp.address })),
        transmitterKey,
        pollMs: 500,
      });
      ctx.sections.ccip = {
        chains: sides.map((d) => ({
          chain_id: d.chainId,
          selector: d.selector.toString(),
          router: d.router.address,
          off_ramp: d.offRamp.address,
          token_admin_registry: d.registry.address,
          token_pools: { [opts.token.symbol]: d.pool.address },
        })),
        tokens: [opts.token.symbol],
        fee_tokens: ['LINK'],
        poll_seconds: 1,
      };
      const facts = (d: (typeof sides)[0]) => ({ chain_id: d.chainId, selector: d.selector.toString(), router: d.router.address, off_ramp: d.offRamp.address, token: d.token.address, pool: d.pool.address, link: d.link.address });
      ctx.facts.ccip = { source: facts(a), destination: facts(b) };
    },
    async stop() {
      await executor?.stop();
    },
  };
}
