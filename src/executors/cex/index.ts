import type { CexAccountConfig } from '../../config-file.ts';
import type { ExecutorRegistry } from '../registry.ts';
import { createCexAccount, type CexAccount, type ClientHooks } from './client.ts';
import { CexDepositObserveExecutor, CexWithdrawalObserveExecutor } from './observers.ts';
import { CexWithdrawalActionExecutor } from './withdrawal-action.ts';

export { CEX_LANE } from './common.ts';
export { createCexAccount, type CexAccount } from './client.ts';
export { classifyCexError, type CexFailure } from './errors.ts';
export { CEX_DEPOSIT_OBSERVE_KEY, CEX_WITHDRAWAL_OBSERVE_KEY, CexDepositObserveExecutor, CexWithdrawalObserveExecutor } from './observers.ts';
export { CEX_WITHDRAWAL_ACTION_KEY, CexWithdrawalActionExecutor } from './withdrawal-action.ts';

export interface CexLaneOptions {
  env?: NodeJS.ProcessEnv;
  hooks?: ClientHooks;
  /** Observe poll interval, in seconds (withdrawals default 5, deposits 10). */
  pollSeconds?: number;
  notFoundAfterSeconds?: number;
}

/**
 * The CEX lane for the configured exchange accounts (`cex.accounts` of the config file): the
 * withdrawal action, withdrawal observe and deposit observe executors, sharing one ccxt client per
 * account. Nothing is registered without accounts. Makes no call.
 * @throws ConfigError naming an account's key or secret variable when it is unset.
 */
export function createCexLane(
  entries: readonly CexAccountConfig[],
  registry?: ExecutorRegistry,
  opts: CexLaneOptions = {},
): { accounts: Map<string, CexAccount>; executors: [CexWithdrawalActionExecutor, CexWithdrawalObserveExecutor, CexDepositObserveExecutor] } | null {
  if (entries.length === 0) return null;
  const accounts = new Map(entries.map((e) => [e.key, createCexAccount(e, opts.env, opts.hooks)] as const));
  const executors = [
    new CexWithdrawalActionExecutor(accounts, { notFoundAfterSeconds: opts.notFoundAfterSeconds }),
    new CexWithdrawalObserveExecutor(accounts, { pollSeconds: opts.pollSeconds }),
    new CexDepositObserveExecutor(accounts, { pollSeconds: opts.pollSeconds }),
  ] as [CexWithdrawalActionExecutor, CexWithdrawalObserveExecutor, CexDepositObserveExecutor];
  if (registry) for (const e of executors) registry.register(e);
  return { accounts, executors };
}
