import type { LaneDefinition } from '../lane.ts';
import { CexSectionSchema } from './config.ts';

/** The CEX lane (docs/cex-lane.md): withdrawals from exchange accounts through ccxt, and their observes. */
export const cexLane: LaneDefinition<Record<never, never>, { cex: typeof CexSectionSchema }> = {
  name: 'cex',
  summary: 'withdrawals from exchange accounts (ccxt) and their withdrawal and deposit observes',
  docs: 'docs/cex-lane.md',
  env: {},
  fileSections: { cex: CexSectionSchema },
  executorKeys: ['exec.cex.withdrawal_action', 'exec.cex.withdrawal_observe', 'exec.cex.deposit_observe'],
  signerKeys: [],
  recoveryPriority: 3,
  observeIntervals: [
    { executorKey: 'exec.cex.withdrawal_observe', defaultSeconds: 5, setBy: 'the lane (withdrawals)' },
    { executorKey: 'exec.cex.deposit_observe', defaultSeconds: 10, setBy: 'the lane (deposits)' },
  ],
  async register(ctx) {
    const { createCexLane } = await import('./index.ts');
    // The exchange accounts of the config file (cex.accounts), if any.
    return createCexLane(ctx.config.file.cex.accounts, ctx.executors, { env: ctx.env });
  },
  sweeps: [],
  templates: [{ key: 'cex_to_chain', summary: 'withdraw from the exchange, see it on chain, sweep it to the treasury (sandbox)' }],
};
