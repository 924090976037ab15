import { SimBalanceFetcher } from '../../balances/fetchers.ts';
import type { LaneDefinition } from '../lane.ts';
import { SimSectionSchema } from './config.ts';
import { createSimExecutors } from './index.ts';

/**
 * The simulation lane: scripted outcomes recorded in the sim ledger (docs/design.md). Its executors
 * are built in: every registry has them, configured or not.
 */
export const simLane: LaneDefinition<Record<never, never>, { sim: typeof SimSectionSchema }> = {
  name: 'sim',
  summary: 'scripted providers recorded in the sim ledger, for demos and tests',
  docs: 'docs/lanes.md#the-simulation-lane',
  env: {},
  fileSections: { sim: SimSectionSchema },
  executorKeys: ['exec.sim.action', 'exec.sim.observe'],
  signerKeys: [],
  observeIntervals: [{ executorKey: 'exec.sim.observe', defaultSeconds: 1, setBy: 'the node script (retry_after_seconds)' }],
  builtIn(providerPool, executors) {
    createSimExecutors(providerPool, executors);
  },
  register() {
    // Built in (builtIn above): nothing depends on the configuration.
    return null;
  },
  sweeps: [],
  balanceFetchers: () => [new SimBalanceFetcher()],
  templates: [{ key: 'demo.withdraw-sweep', summary: 'withdraw, observe the deposit, sweep (src/demo/)' }],
};
