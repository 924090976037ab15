export { balanceClientFor, type BalanceChain } from './clients.ts';
export { BalanceFetchError, balanceErrorCode, type BalanceErrorCode } from './errors.ts';
export {
  BalanceFetcherRegistry,
  Erc20BalanceFetcher,
  EvmChainClients,
  EvmNativeBalanceFetcher,
  SimBalanceFetcher,
  createBalanceFetchers,
  type BalanceFetcher,
  type FetchedBalance,
} from './fetchers.ts';
export {
  balanceSweepOptions,
  createBalanceSnapshotDeps,
  runBalanceSnapshotSweep,
  type BalanceSweepDeps,
  type BalanceSweepOptions,
  type BalanceSweepResult,
} from './sweep.ts';
export { NATIVE_ASSET, SIM_CHAIN, buildWatchPlan, chainIdOf, evmChainKey, type BalanceTarget, type WatchPlan } from './watch.ts';
