import { createPublicClient, createWalletClient, http, parseAbi, parseUnits, type Address, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { erc20Payout, startBinanceEmulator, type BinanceEmulator } from '../../test/emulators/binance.ts';
import type { SandboxChain, SandboxComponent, SandboxContext } from './component.ts';
import { cexToChainTemplate } from './templates.ts';

export interface ExchangeOptions {
  chain: () => SandboxChain;
  /** The token the exchange pays out (already deployed by the stablecoin component, fact `token_<symbol>`). */
  symbol: string;
  decimals: number;
  /** Mints the token to the exchange's hot wallet (the token's deployer). */
  deployerKey: Hex;
  /** The exchange's own hot wallet on the chain, which pays withdrawals; needs gas money. */
  hotWalletKey: Hex;
  /** Tokens minted to the hot wallet, and the account's balance at the exchange, in token units. */
  funding: string;
  /** The exchange account as Ferry knows it, and its (sandbox, public) API credentials. */
  account: { key: string; apiKey: string; apiSecret: string; keyEnv: string; secretEnv: string };
  /** Ferry's receiving wallet (a local_key signer) and the treasury the cex_to_chain sweep pays. */
  receiving: { signerKey: string; keyEnv: string; key: Hex };
  treasury: Address;
  confirmations: number;
  /**
   * A deposit to the account that no movement makes, sent once the emulator runs (token units), and
   * the venues Ferry's cex_transfer_ingest then reads: it records the deposit and raises attention.
   * The emulator credits a plain value transfer to its deposit address as a deposit of `symbol`.
   */
  foreignDeposit?: string;
}

const MINT_ABI = parseAbi(['function mint(address to, uint256 amount)']);

/**
 * An exchange for the sandbox: the Binance emulator of the tests on loopback, paying withdrawals
 * of `symbol` from its hot wallet on the sandbox chain. Ferry gets it as the cex.accounts entry
 * `account.key` (credentials through environment variables), the receiving wallet as a signer,
 * and the `cex_to_chain` template (withdraw -> withdrawal observe -> deposit on chain -> sweep).
 */
export function exchangeEmulator(opts: ExchangeOptions): SandboxComponent & { emulator(): BinanceEmulator } {
  let emulator: BinanceEmulator | undefined;
  return {
    name: `exchange emulator (${opts.account.key})`,
    async start(ctx: SandboxContext) {
      const chain = opts.chain();
      const token = ctx.facts[`token_${opts.symbol}`] as { address: Address } | undefined;
      if (!token) throw new Error(`token ${opts.symbol} is not deployed`);
      const hot = privateKeyToAccount(opts.hotWalletKey).address;
      const client = createPublicClient({ transport: http(chain.rpcUrl, { retryCount: 0 }) });
      const deployer = createWalletClient({ account: privateKeyToAccount(opts.deployerKey), transport: http(chain.rpcUrl, { retryCount: 0 }) });
      const minted = await deployer.writeContract({ chain: null, address: token.address, abi: MINT_ABI, functionName: 'mint', args: [hot, parseUnits(opts.funding, opts.decimals)] });
      await client.waitForTransactionReceipt({ hash: minted, pollingInterval: 200, timeout: 60_000 });

      emulator = await startBinanceEmulator({
        apiKey: opts.account.apiKey,
        apiSecret: opts.account.apiSecret,
        rpcUrl: chain.rpcUrl,
        depositAddress: hot,
        coins: [{ coin: opts.symbol, network: 'ETH', decimals: opts.decimals, withdrawFee: '0', withdrawMin: '1', withdrawMax: opts.funding, withdrawIntegerMultiple: '0.000001' }],
        balances: { [opts.symbol]: opts.funding },
        payout: erc20Payout(chain.rpcUrl, opts.hotWalletKey, token.address),
      });
      ctx.cex ??= { accounts: [] };
      ctx.cex.accounts.push({
        key: opts.account.key,
        exchange: 'binance',
        base_url: emulator.url,
        api_key_env: opts.account.keyEnv,
        api_secret_env: opts.account.secretEnv,
        networks: { ethereum: 'ETH' },
      });
      ctx.ferryEnv[opts.account.keyEnv] = opts.account.apiKey;
      ctx.ferryEnv[opts.account.secretEnv] = opts.account.apiSecret;

      const receiving = privateKeyToAccount(opts.receiving.key).address;
      if (!ctx.config.signers.some((s) => s.key === opts.receiving.signerKey)) {
        ctx.config.signers.push({ key: opts.receiving.signerKey, kind: 'local_key', private_key_env: opts.receiving.keyEnv, chains: [chain.chainId] });
      }
      ctx.ferryEnv[opts.receiving.keyEnv] = opts.receiving.key;
      ctx.templates.push(
        cexToChainTemplate({
          chainId: chain.chainId,
          account: opts.account.key,
          network: 'ethereum',
          token: opts.symbol,
          decimals: opts.decimals,
          receiving: { address: receiving, signerKey: opts.receiving.signerKey },
          treasury: opts.treasury,
          confirmations: opts.confirmations,
        }),
      );
      ctx.facts.exchange = { url: emulator.url, account: opts.account.key, hot_wallet: hot.toLowerCase(), balance: opts.funding };
      if (opts.foreignDeposit) {
        const sent = await deployer.sendTransaction({ chain: null, to: hot, value: parseUnits(opts.foreignDeposit, opts.decimals) });
        await client.waitForTransactionReceipt({ hash: sent, pollingInterval: 200, timeout: 60_000 });
        ctx.facts.foreign_deposit = { venue: opts.account.key, amount: opts.foreignDeposit, tx_id: sent };
        // Read every 10 s (the default is every 5 minutes), so the sandbox shows it soon.
        ctx.ferryEnv.FERRY_CEX_TRANSFER_INGEST_VENUES = opts.account.key;
        ctx.ferryEnv.FERRY_CEX_TRANSFER_INGEST_INTERVAL_SECONDS = '10';
      }
      ctx.facts.receiving_wallet = receiving.toLowerCase();
      ctx.facts.treasury = opts.treasury.toLowerCase();
    },
    async stop() {
      await emulator?.stop();
    },
    emulator: () => {
      if (!emulator) throw new Error('the exchange emulator is not started');
      return emulator;
    },
  };
}
