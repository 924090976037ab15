import type { Pool } from '../../persistence/db.ts';
import type { Executor } from '../protocol.ts';
import type { ExecutorRegistry } from '../registry.ts';
import { SIM_ACTION_KEY, SIM_OBSERVE_KEY, SimExecutor } from './sim-executor.ts';

export { SIM_ACTION_KEY, SIM_LANE, SIM_OBSERVE_KEY, SimExecutor } from './sim-executor.ts';
export { SimScriptSchema, type SimOutcome, type SimScript } from './script.ts';

/**
 * The simulation lane: `exec.sim.action` and `exec.sim.observe`, recording into the ledger through
 * `pool` (autocommit statements). Registers them in `registry` when one is given.
 */
export function createSimExecutors(pool: Pool, registry?: ExecutorRegistry): Executor[] {
  const executors = [new SimExecutor(SIM_ACTION_KEY, 'action', pool), new SimExecutor(SIM_OBSERVE_KEY, 'observe', pool)];
  if (registry) for (const e of executors) registry.register(e);
  return executors;
}
