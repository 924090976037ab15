/**
 * Multi-process runs for the load tests: worker processes on one database, a batch of movements
 * approved and waited for, and the checks that every movement completed exactly once.
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { approveMovements, benchTemplate, createMovements } from '../../scripts/lib/load.ts';
import { countMovementsByState, exactlyOnceReport } from '../../scripts/lib/bench-queries.ts';
import type { Pool, Queryable } from '../../src/persistence/db.ts';
import { listHeartbeats } from '../../src/persistence/heartbeats.ts';
import { collectingDeps } from './fixtures.ts';
import { exited, spawnWorker } from './processes.ts';
import { waitFor } from './wait.ts';

export interface Cluster {
  /** The running worker processes; a test may replace entries (stop() stops whatever is in it). */
  workers: ChildProcess[];
  /** SIGTERM to every worker, resolves once all exited. */
  stop(): Promise<void>;
}

/**
 * Spawns `count` worker processes on `url` and waits until each wrote its heartbeat (read through
 * `pool`). A worker that exits before that (it refused to start) fails the wait; the others are
 * stopped then.
 */
export async function startWorkers(url: string, pool: Queryable, count: number, env: Record<string, string>): Promise<Cluster> {
  const workers = Array.from({ length: count }, () => spawnWorker(url, env));
  const stop = async () => {
    for (const w of workers) w.kill('SIGTERM');
    await Promise.all(workers.map(exited));
  };
  try {
    await waitFor(
      'the worker processes to start',
      async () => {
        if (workers.some((w) => w.exitCode !== null)) throw new Error('a worker process refused to start or died (its message is above)');
        return new Set((await listHeartbeats(pool)).map((h) => h.process_id)).size >= count;
      },
      120_000,
      200,
    );
  } catch (err) {
    await stop();
    throw err;
  }
  return { workers, stop };
}

/** Waits (10 minutes at most) until every movement is COMPLETED, FAILED or MANUAL_INTERVENTION. */
export function waitForAllFinished(pool: Queryable, ids: string[]): Promise<Record<string, number>> {
  return waitFor(
    'every movement to finish',
    async () => {
      const states = await countMovementsByState(pool, ids);
      const finished = (states.COMPLETED ?? 0) + (states.FAILED ?? 0) + (states.MANUAL_INTERVENTION ?? 0);
      return finished === ids.length ? states : null;
    },
    600_000,
    500,
  );
}

export interface RunOptions {
  /** The pool approvals go through (default: `pool`). */
  approvePool?: Pool;
  /** Approvals in flight at once (approveMovements' default when unset). */
  approveConcurrency?: number;
  /** Runs after the movements finished (or the wait failed), before the workers are stopped. */
  beforeStop?: () => Promise<void>;
}

/**
 * Approves the movements, waits until all of them finished and stops the cluster, also when the
 * approval or the wait failed. States are read through `pool`.
 */
export async function approveAndFinish(cluster: Cluster, pool: Pool, ids: string[], opts: RunOptions = {}): Promise<void> {
  try {
    await approveMovements(opts.approvePool ?? pool, ids, collectingDeps(), opts.approveConcurrency);
    await waitForAllFinished(pool, ids);
  } finally {
    await opts.beforeStop?.();
    await cluster.stop();
  }
}

/**
 * Every movement COMPLETED, and the ledger shows one claim and one submit per node of the
 * three-node bench plan, none retried.
 */
export async function assertAllCompletedExactlyOnce(pool: Queryable, ids: string[]): Promise<void> {
  assert.deepEqual(await countMovementsByState(pool, ids), { COMPLETED: ids.length });
  assert.deepEqual(await exactlyOnceReport(pool, ids), {
    nodes: ids.length * 3,
    submits: ids.length * 3,
    keysSubmittedTwice: 0,
    nodesClaimedTwice: 0,
    nodesWithRetries: 0,
  });
}

/**
 * Kills one worker of the cluster with SIGKILL every `everyMs` and spawns a replacement with `env`:
 * the longer-running of the workers that are up (wrote their heartbeat), so a replacement still
 * starting is not killed before it did anything. `stop()` ends the storm and says how many were killed.
 */
export function killStorm(
  cluster: Cluster,
  url: string,
  pool: Queryable,
  env: Record<string, string>,
  everyMs = 2000,
  maxKills = Number.POSITIVE_INFINITY,
): { stop(): Promise<number> } {
  const { workers } = cluster;
  let kills = 0;
  let stopped = false;
  const storm = (async () => {
    while (!stopped && kills < maxKills) {
      await new Promise((r) => setTimeout(r, everyMs));
      if (stopped) break;
      const up = new Set((await listHeartbeats(pool)).map((h) => h.pid));
      const victim = workers.findIndex((w) => up.has(w.pid!));
      if (victim < 0) continue;
      const child = workers[victim];
      child.kill('SIGKILL');
      await exited(child);
      kills++;
      workers.splice(victim, 1);
      workers.push(spawnWorker(url, env));
    }
  })();
  return {
    stop: async () => {
      stopped = true;
      await storm;
      return kills;
    },
  };
}

/** Each node of the movements has exactly one submit in the simulation ledger (none, or two, is listed). */
export async function assertOneSubmitPerNode(pool: Queryable, ids: string[]): Promise<void> {
  const { rows } = await pool.query(
    `SELECT n.id, count(s.id)::int AS submits FROM request_nodes n
       LEFT JOIN sim_side_effects s ON s.request_node_id = n.id AND s.call = 'submit'
      WHERE n.request_id = ANY($1::uuid[]) GROUP BY n.id HAVING count(s.id) <> 1`,
    [ids],
  );
  assert.deepEqual(rows, [], 'exactly one submit per node in the ledger');
}

/**
 * The kill storm run: `movements` of the three-node bench plan on 2 worker processes with `env`,
 * one of them SIGKILLed every `everyMs` and replaced (killStorm), until all are approved and finished
 * or `maxKills` were killed (a storm faster than a worker starts would otherwise leave the survivors
 * too little time to finish, and the run's length would depend on the machine's speed).
 * Checks that the storm killed at least `minKills`, that every movement completed, and that the
 * ledger has exactly one submit per node. Returns the movements' ids.
 */
export async function runKillStorm(
  db: { url: string; pool: Pool },
  movements: number,
  env: Record<string, string>,
  minKills: number,
  everyMs = 2000,
  maxKills = Number.POSITIVE_INFINITY,
): Promise<string[]> {
  const ids = await createMovements(db.pool, benchTemplate(), movements);
  const cluster = await startWorkers(db.url, db.pool, 2, env);
  const storm = killStorm(cluster, db.url, db.pool, env, everyMs, maxKills);
  let kills = 0;
  await approveAndFinish(cluster, db.pool, ids, {
    beforeStop: async () => {
      kills = await storm.stop();
    },
  });
  assert.ok(kills >= minKills, `workers were killed mid-run (${kills} kills)`);
  assert.deepEqual(await countMovementsByState(db.pool, ids), { COMPLETED: movements });
  const report = await exactlyOnceReport(db.pool, ids);
  assert.equal(report.nodes, movements * 3);
  assert.equal(report.keysSubmittedTwice, 0, 'no attempt submitted twice');
  await assertOneSubmitPerNode(db.pool, ids);
  return ids;
}
