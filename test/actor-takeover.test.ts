/**
 * Takeover in the actor runtime, with real worker processes:
 *
 * - a holder SIGKILLed after the provider recorded the submit, before its answer: another process
 *   takes the lease once it expires, recovery asks the provider, and the node completes on its one
 *   submit;
 * - a holder SIGSTOPped at the same moment, past its lease's expiry, whose movement another process
 *   then finished: when it is continued, every write it tries is refused by the fence, and nothing
 *   about the movement changes.
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { after, test } from 'node:test';
import { scratchDatabase } from './helpers/db.ts';
import { exited, spawnWorker } from './helpers/processes.ts';
import { approvedMovement, plan, runtimeDeps, simNode, snapshot } from './helpers/runtime.ts';
import { waitFor } from './helpers/wait.ts';

const ENV = {
  FERRY_LEASE_TTL_SECONDS: '2',
  FERRY_SUBMITTING_GRACE_SECONDS_BY_LANE: 'sim=2',
  FERRY_NODE_RECOVERY_INTERVAL_SECONDS: '0.3',
  FERRY_NODE_DISPATCH_INTERVAL_SECONDS: '0.2',
};

const children: ChildProcess[] = [];
after(async () => {
  for (const c of children) {
    if (c.exitCode !== null || c.signalCode !== null) continue;
    c.kill('SIGCONT');
    c.kill('SIGKILL');
    await exited(c);
  }
});

/** The provider's record of the node's calls, by kind. */
async function calls(pool: import('pg').Pool, nodeId: string): Promise<Record<string, number>> {
  const { rows } = await pool.query<{ call: string; n: number }>('SELECT call, count(*)::int AS n FROM sim_side_effects WHERE request_node_id = $1 GROUP BY call', [nodeId]);
  return Object.fromEntries(rows.map((r) => [r.call, r.n]));
}

/** A one-node movement whose provider records every call and then takes `ackMs` to answer. */
async function slowMovement(pool: import('pg').Pool, key: string, ackMs: number) {
  const deps = runtimeDeps(pool);
  const id = await approvedMovement(deps, plan(key, [simNode('pay', { ack_latency_ms: ackMs })]));
  return { id, nodeId: (await snapshot(pool, id)).byKey.pay.id as string };
}

test('a holder SIGKILLed between the recorded submit and its answer: the next holder completes the node on its one submit', async (t) => {
  const db = await scratchDatabase(t);
  const { id, nodeId } = await slowMovement(db.pool, 'takeover-kill', 1500);
  const first = spawnWorker(db.url, ENV);
  children.push(first);
  await waitFor('the provider to record the submit', async () => (await calls(db.pool, nodeId)).submit === 1);
  first.kill('SIGKILL');
  await exited(first);
  const left = await snapshot(db.pool, id);
  assert.equal(left.byKey.pay.node_state, 'SUBMITTING', 'the kill left the attempt undecided');
  assert.ok(left.movement.lease_owner, 'and the movement leased to the dead process');

  const second = spawnWorker(db.url, ENV);
  children.push(second);
  const done = await waitFor('the movement to complete', async () => {
    const s = await snapshot(db.pool, id);
    return s.movement.request_state === 'COMPLETED' ? s : null;
  });
  second.kill('SIGTERM');
  assert.equal((await exited(second)).code, 0);
  assert.equal(done.byKey.pay.attempt_no, 1, 'no new attempt');
  assert.equal((await calls(db.pool, nodeId)).submit, 1, 'one submit, ever');
  const recovered = await db.pool.query("SELECT count(*)::int AS n FROM transitions WHERE entity_id = $1 AND event_type = 'RECOVERED' AND from_state = 'SUBMITTING'", [nodeId]);
  assert.equal(recovered.rows[0].n, 1, 'recovery asked the provider');
  assert.equal(done.movement.lease_owner, null, 'nothing is left leased');
});

test('a holder SIGSTOPped past its lease, whose movement another process finished: every late write is refused', async (t) => {
  const db = await scratchDatabase(t);
  const { id, nodeId } = await slowMovement(db.pool, 'takeover-stop', 1500);
  const paused = spawnWorker(db.url, { ...ENV, FERRY_LOG_LEVEL: 'debug' }, { output: 'pipe' });
  children.push(paused);
  let log = '';
  paused.stdout!.on('data', (d) => (log += d));
  await waitFor('the provider to record the submit', async () => (await calls(db.pool, nodeId)).submit === 1);
  paused.kill('SIGSTOP');

  const other = spawnWorker(db.url, ENV);
  children.push(other);
  const done = await waitFor('the other process to complete the movement', async () => {
    const s = await snapshot(db.pool, id);
    return s.movement.request_state === 'COMPLETED' ? s : null;
  });
  other.kill('SIGTERM');
  assert.equal((await exited(other)).code, 0);
  const before = await db.pool.query('SELECT count(*)::int AS n, max(id)::text AS last FROM transitions WHERE request_id = $1', [id]);

  // Continued: its submit's answer arrives, its write over the rows it held is refused, it reads
  // the rows again, finds the movement COMPLETED and lets it go.
  paused.kill('SIGCONT');
  await waitFor('the continued holder to let the movement go', () => log.includes(id) && /movement handed back|lease lost/.test(log) ? true : null);
  await waitFor('its actor to stop', () => (/"reason":"movement COMPLETED"|lease lost/.test(log) ? true : null));
  paused.kill('SIGTERM');
  assert.equal((await exited(paused)).code, 0, 'the continued process still stops cleanly');

  const afterRows = await db.pool.query('SELECT count(*)::int AS n, max(id)::text AS last FROM transitions WHERE request_id = $1', [id]);
  assert.deepEqual(afterRows.rows[0], before.rows[0], 'no transition was written after the continued holder woke');
  const final = await snapshot(db.pool, id);
  assert.equal(final.movement.request_state, 'COMPLETED');
  assert.equal(final.movement.write_version, done.movement.write_version, 'no write landed on the movement');
  assert.equal(final.byKey.pay.node_state, 'COMPLETED');
  assert.equal((await calls(db.pool, nodeId)).submit, 1, 'one submit, ever');
});
