import assert from 'node:assert/strict';
import { dispatchOne } from '../../src/actors/dispatcher.ts';
import type { WorkerDeps } from '../../src/actors/execution.ts';
import { observeBatch } from '../../src/actors/observer.ts';
import { recoverBatch } from '../../src/actors/recovery.ts';
import { defaultRegistries } from '../../src/actors/runtime.ts';
import { deliverNodeEvent, deliverMovementEvent } from '../../src/durable/transition.ts';
import { loadConfig } from '../../src/config.ts';
import { log } from '../../src/log.ts';
import { createPool, withTransaction, type Pool } from '../../src/persistence/db.ts';
import { getMovement, nodesOfMovement } from '../../src/persistence/movements.ts';
import { TEST_FEE_CAP_WEI } from './anvil.ts';
import { collectingDeps, seedMovement } from './fixtures.ts';
import { exited, spawnWorker } from './processes.ts';
import { waitFor } from './wait.ts';
import type { TemplateDefinitionInput } from '../../src/plan/template-schema.ts';

/** Runtime deps for driving the workers step by step in a test (no loops, no timers). */
export function runtimeDeps(pool: Pool, env: Record<string, string> = {}): WorkerDeps & { seen: ReturnType<typeof collectingDeps>['seen'] } {
  // The simulated provider's own pool, as in the runtime (it idles out on its own when a file ends).
  const providerPool = createPool((pool as unknown as { options: { connectionString: string } }).options.connectionString, 4, 'ferry-sim-provider', {
    allowExitOnIdle: true,
    namedStatements: true,
  });
  const { executors, signers } = defaultRegistries(providerPool);
  const transitions = collectingDeps();
  return {
    pool,
    // The fee cap of a chain the (absent) configuration file does not list: the signers' chains in tests.
    config: loadConfig({ FERRY_DATA_DIR: '.ferry/test-runtime', FERRY_EVM_MAX_FEE_PER_GAS_CAP_WEI: TEST_FEE_CAP_WEI, ...env }),
    executors,
    signers,
    transitions,
    log: log.child({ test: true }),
    seen: transitions.seen,
  };
}

export async function approvedMovement(deps: WorkerDeps, template: TemplateDefinitionInput, intent?: Record<string, unknown>) {
  // A callback URL makes the transition function emit callbacks, which the collecting deps record.
  const { movement } = await seedMovement(deps.pool, template, { createdBy: 'requester', intent, callbackUrl: 'http://127.0.0.1:9/callbacks' });
  await withTransaction(deps.pool, (c) =>
    deliverMovementEvent(c, movement.id, { type: 'APPROVE', by: 'approver', at: new Date().toISOString() }, { actor: 'approver', deps: deps.transitions }),
  );
  return movement.id;
}

/**
 * Dispatches until no node is ready, as one dispatch slot would; returns how many were dispatched.
 * Bounded: a node that is ready again after every dispatch fails the test instead of spinning.
 */
export async function dispatchUntilIdle(deps: WorkerDeps, max = 1000): Promise<number> {
  for (let n = 0; n < max; n++) if (!(await dispatchOne(deps))) return n;
  throw new Error(`still a node to dispatch after ${max} dispatches`);
}

/** Runs the dispatch, observation and recovery steps until nothing moves (bounded). */
export async function drain(deps: WorkerDeps, rounds = 50): Promise<void> {
  for (let i = 0; i < rounds; i++) {
    let moved = await dispatchUntilIdle(deps);
    moved += await observeBatch(deps);
    moved += await recoverBatch(deps);
    if (moved === 0) return;
  }
}

export async function snapshot(pool: Pool, movementId: string) {
  const movement = (await getMovement(pool, movementId))!;
  const nodes = await nodesOfMovement(pool, movementId);
  return { movement, nodes, byKey: Object.fromEntries(nodes.map((n) => [n.node_key, n])) };
}

export function simNode(key: string, sim: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  return { node_key: key, node_kind: 'action', action_type: 'sim_action', executor_binding: 'exec.sim.action', config: { sim }, ...extra };
}

export function plan(key: string, nodes: Record<string, unknown>[], edges: { from: string; to: string }[] = []): TemplateDefinitionInput {
  return { template_key: key, nodes, edges } as TemplateDefinitionInput;
}

/**
 * Moves a time column of every node of these movements `seconds` into the past: what the test would
 * otherwise sleep for (a grace period, an observation budget) has then elapsed.
 */
export async function backdateNodes(pool: Pool, movementIds: string[], column: 'started_at' | 'updated_at' | 'next_observe_at', seconds: number): Promise<void> {
  await pool.query(`UPDATE request_nodes SET ${column} = ${column} - make_interval(secs => $2) WHERE request_id = ANY($1::uuid[])`, [movementIds, seconds]);
}

/**
 * Runs a worker process on `url` until the movement is COMPLETED, FAILED or MANUAL_INTERVENTION,
 * then stops it with SIGTERM (it must exit cleanly, with code 0). Resolves with the final snapshot.
 */
export async function finishInWorker(url: string, pool: Pool, movementId: string, env: Record<string, string>) {
  const worker = spawnWorker(url, env);
  try {
    return await waitFor('the movement to finish', async () => {
      const s = await snapshot(pool, movementId);
      return ['COMPLETED', 'FAILED', 'MANUAL_INTERVENTION'].includes(s.movement.request_state) ? s : null;
    });
  } finally {
    worker.kill('SIGTERM');
    assert.equal((await exited(worker)).code, 0, 'the worker stops cleanly on SIGTERM');
  }
}

/**
 * The first steps of a dispatch, as a dispatcher that then died would have committed them:
 * ['DISPATCH_CLAIMED'] leaves the node PREPARING, ['DISPATCH_CLAIMED', 'PREPARED'] SUBMITTING
 * (with no submit made).
 */
export async function dispatchByHand(deps: WorkerDeps, movementId: string, nodeId: string, steps: ('DISPATCH_CLAIMED' | 'PREPARED')[]): Promise<void> {
  await withTransaction(deps.pool, async (c) => {
    const o = { actor: 'test', deps: deps.transitions };
    const at = new Date().toISOString();
    await deliverMovementEvent(c, movementId, { type: 'DISPATCH_STARTED' }, o);
    for (const step of steps) {
      await deliverNodeEvent(c, nodeId, step === 'PREPARED' ? { type: 'PREPARED', signingRequired: false, at } : { type: 'DISPATCH_CLAIMED', at }, o);
    }
  });
}
