import { startAnvil, TEST_FEE_CAP_WEI as SANDBOX_FEE_CAP_WEI, type Anvil } from '../../test/helpers/anvil.ts';
import type { SandboxChain, SandboxComponent, SandboxContext } from './component.ts';

/** A local EVM chain: anvil on loopback, a block every `blockTimeSeconds`, listed in evm.chains. */
export function localChain(opts: { chainId: number; name: string; port?: number; blockTimeSeconds?: number; confirmations?: number }): SandboxComponent & {
  chain(): SandboxChain;
  anvil(): Anvil;
} {
  let anvil: Anvil | undefined;
  let chain: SandboxChain | undefined;
  return {
    name: `chain ${opts.name} (${opts.chainId})`,
    async start(ctx: SandboxContext) {
      anvil = await startAnvil({ chainId: opts.chainId, port: opts.port, blockTimeSeconds: opts.blockTimeSeconds ?? 1 });
      chain = { chainId: opts.chainId, name: opts.name, rpcUrl: anvil.url };
      ctx.chains.push(chain);
      // Every chain a signer signs for needs a fee cap: 500 gwei, far above what anvil asks.
      ctx.config.chains.push({ chain_id: opts.chainId, name: opts.name, rpc_url: anvil.url, confirmations: opts.confirmations ?? 1, poll_seconds: 1, max_fee_per_gas_cap_wei: SANDBOX_FEE_CAP_WEI });
      ctx.facts[`chain_${opts.name}`] = { chain_id: opts.chainId, rpc_url: anvil.url };
    },
    async stop() {
      await anvil?.stop();
    },
    chain: () => {
      if (!chain) throw new Error(`chain ${opts.name} is not started`);
      return chain;
    },
    anvil: () => {
      if (!anvil) throw new Error(`chain ${opts.name} is not started`);
      return anvil;
    },
  };
}
