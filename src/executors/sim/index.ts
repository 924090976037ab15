import type { Pool } from '../../persistence/db.ts';
import type { Executor } from '../protocol.ts';
import type { ExecutorRegistry } from '../registry.ts';
import { LedgerBatcher } from './ledger-batcher.ts';
import { SIM_ACTION_KEY, SIM_OBSERVE_KEY, SimExecutor } from './sim-executor.ts';

export { SIM_ACTION_KEY, SIM_LANE, SIM_OBSERVE_KEY, SimExecutor } from './sim-executor.ts';
export { SimScriptSchema, type SimOutcome, type SimScript } from './script.ts';

/**
 * The simulation lane: `exec.sim.action` and `exec.sim.observe`, recording into the ledger through
 * `pool` (autocommit statements, calls that arrive together sharing one commit). Registers them in `registry` when one is given.
 */
export function createSimExecutors(pool: Pool, registry?: ExecutorRegistry): Executor[] {
  // One ledger writer for the lane: calls of both executors share its group commits.
  const ledger = new LedgerBatcher(pool);
  const executors = [new SimExecutor(SIM_ACTION_KEY, 'action', pool, ledger), new SimExecutor(SIM_OBSERVE_KEY, 'observe', pool, ledger)];
  if (registry) for (const e of executors) registry.register(e);
  return executors;
}
