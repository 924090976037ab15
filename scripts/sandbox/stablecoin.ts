import { createPublicClient, http, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { deployToken, sendCall } from '../../test/helpers/contracts.ts';
import type { SandboxChain, SandboxComponent, SandboxContext } from './component.ts';

export interface StablecoinOptions {
  chain: () => SandboxChain;
  symbol: string;
  decimals: number;
  /** Pays for the deployment and mints (a funded development account of the chain). */
  deployerKey: Hex;
  /** The hot wallet Ferry sends from: its signer key, the variable holding its key, the key. */
  hotWallet: { signerKey: string; keyEnv: string; key: Hex };
  /** Minted to the hot wallet, in base units. */
  funding: bigint;
}

/**
 * The test stablecoin (test/contracts/TestToken.sol, compiled with solc) deployed on a chain, the
 * hot wallet funded with it, and both listed for Ferry: the token in evm.tokens, the wallet as a
 * local_key signer whose key Ferry reads from `hotWallet.keyEnv`.
 */
export function stablecoin(opts: StablecoinOptions): SandboxComponent {
  return {
    name: `${opts.symbol} token`,
    async start(ctx: SandboxContext) {
      const chain = opts.chain();
      const client = createPublicClient({ transport: http(chain.rpcUrl, { retryCount: 0 }) });
      const token = await deployToken(client, chain.rpcUrl, opts.deployerKey, { symbol: opts.symbol, name: `Sandbox ${opts.symbol}`, decimals: opts.decimals });
      const hot = privateKeyToAccount(opts.hotWallet.key).address;
      await sendCall(client, chain.rpcUrl, opts.deployerKey, token, 'mint', [hot, opts.funding]);
      ctx.config.tokens.push({ chain_id: chain.chainId, symbol: opts.symbol, address: token.address, decimals: opts.decimals });
      if (!ctx.config.signers.some((s) => s.key === opts.hotWallet.signerKey)) {
        ctx.config.signers.push({ key: opts.hotWallet.signerKey, kind: 'local_key', private_key_env: opts.hotWallet.keyEnv, chains: [chain.chainId] });
      }
      ctx.ferryEnv[opts.hotWallet.keyEnv] = opts.hotWallet.key;
      ctx.facts[`token_${opts.symbol}`] = { chain_id: chain.chainId, address: token.address, decimals: opts.decimals };
      ctx.facts.hot_wallet = hot.toLowerCase();
    },
  };
}
