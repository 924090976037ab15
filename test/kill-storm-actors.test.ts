// @test-runs-alone: 2 worker processes on the actor runtime, 400 movements, a SIGKILL every second.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runKillStorm } from './helpers/cluster.ts';
import { scratchDatabase } from './helpers/db.ts';

/**
 * The kill storm on the actor runtime: two worker processes lease the
 * movements and drive them as movement actors while one of them is killed with SIGKILL every
 * second (the actor runtime gets through a batch fast), up to 20 times, and replaced. A killed holder's leases
 * expire and the survivors take the movements over; a node the dead holder left in SUBMITTING is
 * never submitted again by them, but resolved by recovery, which asks the provider. Every movement
 * completes with exactly one submit per node.
 */
const MOVEMENTS = 400;
/** Then the storm ends and the survivors finish: on a loaded machine a worker takes longer than a
 * second to start, and an endless storm at this rate left little time to do anything (382 s in CI). */
const MAX_KILLS = 20;
const ENV = {
  FERRY_LEASE_TTL_SECONDS: '2',
  FERRY_SUBMITTING_GRACE_SECONDS: '5',
  FERRY_SUBMITTING_GRACE_SECONDS_BY_LANE: 'sim=5',
  FERRY_NODE_RECOVERY_INTERVAL_SECONDS: '0.5',
  FERRY_NODE_DISPATCH_INTERVAL_SECONDS: '0.2',
  FERRY_NODE_RECOVERY_BATCH_SIZE: '200',
  FERRY_LEASE_MAX_MOVEMENTS: '50',
  FERRY_DB_POOL_MAX: '6',
};

test(`${MOVEMENTS} movements on 2 actor-runtime processes, a worker SIGKILLed every second: all complete, one submit per node`, async (t) => {
  const db = await scratchDatabase(t);
  const ids = await runKillStorm(db, MOVEMENTS, ENV, 2, 1000, MAX_KILLS);
  // Nothing is left leased: a settled movement's lease goes with its last write, even when its
  // holder was killed, and SIGTERM hands every other lease back.
  const { rows } = await db.pool.query('SELECT count(*)::int AS n FROM movement_requests WHERE id = ANY($1::uuid[]) AND lease_owner IS NOT NULL', [ids]);
  assert.equal(rows[0].n, 0);
});
