import { createPublicClient, http, type Address } from 'viem';
import { startHyperliquidInfo, type HyperliquidInfoEmulator } from '../../test/emulators/hyperliquid-info.ts';
import type { SandboxChain, SandboxComponent, SandboxContext } from './component.ts';

export interface SandboxHyperliquidOptions {
  chain: () => SandboxChain;
  /** The deposited token's symbol on the chain (deployed by the stablecoin component). */
  symbol: string;
  /** The bridge address deposits go to (given placeholder code: Bridge2 runs none for a deposit). */
  bridge: Address;
}

/**
 * Hyperliquid on the sandbox chain, standing in for Arbitrum: the emulated info API
 * (test/emulators/hyperliquid-info.ts) crediting USDC transfers of at least 5 USDC to the bridge
 * address to their sender. Adds the `hyperliquid` section to Ferry's configuration.
 */
export function sandboxHyperliquid(opts: SandboxHyperliquidOptions): SandboxComponent {
  let info: HyperliquidInfoEmulator | undefined;
  return {
    name: 'hyperliquid (info API emulator)',
    async start(ctx: SandboxContext) {
      const chain = opts.chain();
      const listed = ctx.config.tokens.find((t) => t.chain_id === chain.chainId && t.symbol === opts.symbol);
      if (!listed) throw new Error(`no ${opts.symbol} token on chain ${chain.chainId}: start the stablecoin first`);
      const client = createPublicClient({ transport: http(chain.rpcUrl, { retryCount: 0 }) });
      // Bridge2 is a contract on Arbitrum: a placeholder code (a lone STOP) stands for it here, so the
      // registry baseline of the lane (the bridge has code, verify_drift) holds as it does there. An
      // ERC-20 transfer to it runs none of it.
      await fetch(chain.rpcUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'anvil_setCode', params: [opts.bridge, '0x00'] }) });
      info = await startHyperliquidInfo({ chain: client, token: listed.address as Address, bridge: opts.bridge, decimals: Number(listed.decimals ?? 6), creditDelayMs: 2000 });
      ctx.sections.hyperliquid = { chain_id: chain.chainId, bridge: opts.bridge, info_url: info.url, token: opts.symbol, poll_seconds: 1 };
      ctx.facts.hyperliquid = { info_url: info.url, bridge: opts.bridge };
    },
    async stop() {
      await info?.stop();
    },
  };
}
