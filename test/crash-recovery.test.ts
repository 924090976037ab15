import assert from 'node:assert/strict';
import { test } from 'node:test';
import { deliverMovementEvent } from '../src/durable/transition.ts';
import { withTransaction } from '../src/persistence/db.ts';
import { scratchDatabase } from './helpers/db.ts';
import { collectingDeps } from './helpers/fixtures.ts';
import { exited, spawnWorker } from './helpers/processes.ts';
import { waitFor } from './helpers/wait.ts';
import { finishInWorker, plan, simNode, snapshot } from './helpers/runtime.ts';
import { seedMovement } from './helpers/fixtures.ts';

/**
 * A worker process is killed with SIGKILL right after a node was committed SUBMITTING: once
 * before the simulated provider received the submit, once after it did but before the answer
 * came back. On restart, recovery resolves the node by asking the provider; the attempt is never
 * submitted twice, and the movement finishes.
 */

const WORKER_ENV = {
  FERRY_SUBMITTING_GRACE_SECONDS_BY_LANE: 'sim=3',
  FERRY_NODE_RECOVERY_INTERVAL_SECONDS: '0.5',
  FERRY_NODE_DISPATCH_INTERVAL_SECONDS: '0.2',
};

async function submitsByKey(pool: import('pg').Pool, nodeId: string) {
  const { rows } = await pool.query(
    `SELECT idempotency_key, count(*)::int AS n FROM sim_side_effects WHERE request_node_id = $1 AND call = 'submit'
      GROUP BY idempotency_key ORDER BY idempotency_key`,
    [nodeId],
  );
  return Object.fromEntries(rows.map((r) => [r.idempotency_key, r.n]));
}

for (const when of ['before', 'after'] as const) {
  test(`SIGKILL ${when} the provider received the submit: recovered, submitted at most once per attempt, finished`, async (t) => {
    const db = await scratchDatabase(t);
    const deps = collectingDeps();
    // latency_ms delays the call before the provider records it; ack_latency_ms delays the answer
    // after. Both stay below the lane's SUBMITTING grace, as a real lane's submit timeout must.
    const sim = when === 'before' ? { latency_ms: 1500 } : { ack_latency_ms: 1500 };
    const { movement, nodes } = await seedMovement(db.pool, plan(`crash-${when}`, [simNode('pay', sim)]));
    const node = nodes[0];
    await withTransaction(db.pool, (c) =>
      deliverMovementEvent(c, movement.id, { type: 'APPROVE', by: 'approver', at: new Date().toISOString() }, { actor: 'approver', deps }),
    );

    const first = spawnWorker(db.url, WORKER_ENV);
    await waitFor('the node to be committed SUBMITTING', async () => (await snapshot(db.pool, movement.id)).byKey.pay.node_state === 'SUBMITTING');
    if (when === 'after') await waitFor('the provider to record the submit', async () => Object.keys(await submitsByKey(db.pool, node.id)).length === 1);
    first.kill('SIGKILL');
    assert.equal((await exited(first)).signal, 'SIGKILL');
    const stuck = (await snapshot(db.pool, movement.id)).byKey.pay;
    assert.equal(stuck.node_state, 'SUBMITTING', 'the kill left the attempt undecided');
    assert.equal(stuck.attempt_no, 1);

    // A second worker recovers the attempt and carries the movement to its end.
    const done = await finishInWorker(db.url, db.pool, movement.id, WORKER_ENV);
    assert.equal(done.movement.request_state, 'COMPLETED');

    const submits = await submitsByKey(db.pool, node.id);
    for (const [key, n] of Object.entries(submits)) assert.equal(n, 1, `attempt ${key} submitted once`);
    if (when === 'after') {
      // The provider had the submit: recovery found it and completed the node, no new attempt.
      assert.deepEqual(submits, { [`${node.id}:1`]: 1 });
      assert.equal(done.byKey.pay.attempt_no, 1);
    } else {
      // Nothing reached the provider under attempt 1: recovery proved it, attempt 2 submitted.
      assert.deepEqual(submits, { [`${node.id}:2`]: 1 });
      assert.equal(done.byKey.pay.attempt_no, 2);
    }
    const recovered = await db.pool.query(
      `SELECT count(*)::int AS n FROM transitions WHERE entity_id = $1 AND event_type = 'RECOVERED' AND from_state = 'SUBMITTING'`,
      [node.id],
    );
    assert.equal(recovered.rows[0].n, 1, 'recovery resolved the stuck attempt');
  });
}
