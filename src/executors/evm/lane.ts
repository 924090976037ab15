import { Erc20BalanceFetcher, EvmNativeBalanceFetcher } from '../../balances/fetchers.ts';
import { ConfigError } from '../../config-schemas.ts';
import type { LaneDefinition } from '../lane.ts';
import { EvmSectionSchema, EVM_SECRET_VARIABLES, evmVariables } from './config.ts';
import type { EvmLane } from './index.ts';
import type { EvmNonceManager } from './nonces.ts';

/** What the EVM lane's register() hands the lanes built on it (CCTP) and its sweep. */
export interface EvmLaneState {
  lane: EvmLane;
  /** The nonce manager its signing executors share, with this process's wallets (the nonce reaper's). */
  nonces: EvmNonceManager;
}

/** The EVM lane (docs/evm-lane.md): native and ERC-20 transfers, balance and finality observes, on every configured chain. */
export const evmLane: LaneDefinition<typeof evmVariables, { evm: typeof EvmSectionSchema }> = {
  name: 'evm',
  summary: 'native and ERC-20 transfers with balance and finality observes on EVM chains',
  docs: 'docs/evm-lane.md',
  env: evmVariables,
  secretVariables: EVM_SECRET_VARIABLES,
  checkConfig(values) {
    // A key that signs with no fee cap can be made to pay any fee: no start without one.
    if (values.evmRpcUrl && values.evmSignerKey && values.evmMaxFeePerGasCapWei === undefined) {
      throw new ConfigError('FERRY_EVM_MAX_FEE_PER_GAS_CAP_WEI', 'is required with FERRY_EVM_RPC_URL and FERRY_EVM_SIGNER_KEY: the most wei per gas the key may offer on that chain');
    }
  },
  fileSections: { evm: EvmSectionSchema },
  executorKeys: ['exec.evm.native_transfer', 'exec.evm.erc20_transfer', 'exec.observe.evm_balance', 'exec.observe.evm_finality'],
  signerKeys: ['evm_local'],
  recoveryPriority: 2,
  observeIntervals: [
    { executorKey: 'exec.observe.evm_balance', defaultSeconds: 1, setBy: 'evm.chains[].poll_seconds' },
    { executorKey: 'exec.observe.evm_finality', defaultSeconds: 1, setBy: 'evm.chains[].poll_seconds' },
  ],
  async register(ctx): Promise<EvmLaneState | null> {
    const { EvmNonceManager, registerEvmLane } = await import('./index.ts');
    // Nonce reservations use the providers' pool, never the runtime's (see EvmNonceManager).
    const nonces = new EvmNonceManager(ctx.providerPool);
    const lane = await registerEvmLane(ctx.config, ctx, { env: ctx.env, log: ctx.log, nonces });
    return lane ? { lane, nonces } : null;
  },
  sweeps: [
    {
      name: 'evm_nonce_reaper',
      summary: 'settles EVM nonce reservations the chain has passed; re-sends, fills or releases stuck nonces',
      variables: {
        enabled: 'FERRY_EVM_NONCE_REAPER_ENABLED',
        interval: 'FERRY_EVM_NONCE_REAPER_INTERVAL_SECONDS',
        batchSize: 'FERRY_EVM_NONCE_REAPER_BATCH_SIZE',
        budget: 'FERRY_EVM_NONCE_REAPER_MAX_RUN_MS',
      },
      async run(deps, s) {
        // A wallet whose signer this process lacks is skipped and left to a process that has it.
        const state = (deps.lanes?.evm ?? null) as EvmLaneState | null;
        if (!state) return { items: 0, budget_exhausted: false, skipped: 'no EVM lane in this process' };
        const { runEvmNonceReaper } = await import('../../sweeps/evm-nonce-reaper.ts');
        const r = await runEvmNonceReaper(
          {
            nonces: state.nonces,
            stuckSeconds: deps.config.evmNonceStuckSeconds,
            log: deps.log.child({ worker: 'evm_nonce_reaper' }),
            disagreement: { afterSeconds: deps.config.evmNonceDisagreementSeconds, callbackMaxAttempts: deps.config.callbackMaxAttempts },
          },
          { batchSize: s.batchSize ?? 20, maxRunMs: s.maxRunMs },
        );
        return {
          items: r.settled + r.rebroadcast + r.filled + r.released,
          budget_exhausted: r.budgetExhausted,
          wallets: r.wallets,
          settled: r.settled,
          rebroadcast: r.rebroadcast,
          filled: r.filled,
          released: r.released,
          pending: r.pending,
          disagreements: r.disagreements,
          skipped: r.skipped,
        };
      },
    },
  ],
  // Each listed token: a contract, with the configured decimals (when given) and symbol.
  registryBaselines(file) {
    const evm = (file.evm ?? {}) as { chains?: Array<{ chain_id: number }>; tokens?: Array<{ chain_id: number; symbol: string; address: string; decimals?: number }> };
    // Each chain's endpoint is that chain: an RPC URL of another chain would sign and read elsewhere.
    const chains = (evm.chains ?? []).map((c) => ({
      chainId: c.chain_id,
      subject: `evm.chains[${c.chain_id}]`,
      address: '0x0000000000000000000000000000000000000000',
      property: 'chain_id' as const,
      expected: String(c.chain_id),
    }));
    const tokens = evm.tokens ?? [];
    return [...chains, ...tokens.flatMap((t) => {
      const subject = `evm.tokens[${t.symbol}]`;
      const at = { chainId: t.chain_id, subject, address: t.address };
      return [
        { ...at, property: 'code' as const, expected: 'code' },
        ...(t.decimals === undefined ? [] : [{ ...at, property: { name: 'decimals()', signature: 'function decimals() view returns (uint8)' }, expected: String(t.decimals) }]),
        { ...at, property: { name: 'symbol()', signature: 'function symbol() view returns (string)' }, expected: t.symbol },
      ];
    })];
  },
  balanceFetchers: (clients) => [new EvmNativeBalanceFetcher(clients), new Erc20BalanceFetcher(clients)],
  templates: [{ key: 'usdc.transfer', summary: 'send USDC from a hot wallet, then wait for finality (sandbox)' }],
};
