import assert from 'node:assert/strict';
import { test } from 'node:test';
import { deliverBatch, deliverMovementEvent } from '../src/durable/transition.ts';
import { TransitionConflictError } from '../src/errors.ts';
import { withTransaction, type Pool } from '../src/persistence/db.ts';
import { getMovement, getNode, nodesOfMovement, transitionsOfMovement } from '../src/persistence/movements.ts';
import type { LockedMovement } from '../src/persistence/group-commit.ts';
import { scratchDatabase } from './helpers/db.ts';
import { collectingDeps, seedMovement, singleNodeTemplate } from './helpers/fixtures.ts';
import { plan, simNode } from './helpers/runtime.ts';
import { waitFor } from './helpers/wait.ts';

/**
 * The movement write fence (migration 0200, persistence/group-commit.ts): a batch delivered over
 * rows its caller holds from its own last commit writes without the locking re-read, and is
 * refused whole when anything wrote the movement since, its nodes included.
 */

const opts = { actor: 'test', deps: collectingDeps() };

async function approved(pool: Pool, template = singleNodeTemplate('fence-single')): Promise<LockedMovement> {
  const { movement } = await seedMovement(pool, template);
  await withTransaction(pool, (c) => deliverMovementEvent(c, movement.id, { type: 'APPROVE', by: 'approver', at: new Date().toISOString() }, opts));
  return { movement: (await getMovement(pool, movement.id))!, nodes: await nodesOfMovement(pool, movement.id) };
}

/** An approved movement whose two roots a and b join at c. */
const twoRoots = (pool: Pool) =>
  approved(
    pool,
    plan('fence-two', [simNode('a', { outcome: 'COMPLETED' }), simNode('b', { outcome: 'COMPLETED' }), simNode('c', { outcome: 'COMPLETED' })], [
      { from: 'a', to: 'c' },
      { from: 'b', to: 'c' },
    ]),
  );

/** Counts the statements a callback sends on its client. */
async function counting<T>(pool: Pool, fn: (client: Parameters<Parameters<typeof withTransaction>[1]>[0]) => Promise<T>): Promise<{ result: T; statements: string[] }> {
  const statements: string[] = [];
  const result = await withTransaction(pool, async (client) => {
    const query = client.query.bind(client);
    (client as { query: unknown }).query = (...args: unknown[]) => {
      const first = args[0];
      statements.push(typeof first === 'string' ? first : String((first as { text?: string }).text));
      return (query as (...a: unknown[]) => unknown)(...args);
    };
    try {
      return await fn(client);
    } finally {
      (client as { query: unknown }).query = query;
    }
  });
  return { result, statements };
}

test('a batch over held rows writes without re-reading them, and every write moves the write_version', async (t) => {
  const db = await scratchDatabase(t);
  const held = await approved(db.pool);
  const node = held.nodes[0];
  const before = held.movement.write_version;
  const { result, statements } = await counting(db.pool, (c) =>
    deliverBatch(c, { nodes: [{ nodeId: node.id, event: { type: 'DISPATCH_CLAIMED', at: new Date().toISOString() }, lease: crypto.randomUUID() }] }, { ...opts, held: [held] }),
  );
  assert.equal(result.nodes[0] instanceof Error, false);
  assert.equal(statements.filter((s) => s.includes('FOR UPDATE')).length, 0, 'no locking re-read');
  assert.equal((await getNode(db.pool, node.id))!.node_state, 'PREPARING');
  // The node write moved its movement's fence, though the movement's own columns did not change.
  const after = (await getMovement(db.pool, held.movement.id))!;
  assert.ok(after.write_version > before);
  assert.equal(result.movementOf(held.movement.id).write_version, after.write_version, 'the batch returns the fence it left');

  // Without held rows the batch locks and re-reads, as before.
  const locked = await counting(db.pool, (c) => deliverBatch(c, { nodes: [{ nodeId: node.id, event: { type: 'PREPARED', signingRequired: false, at: new Date().toISOString() } }] }, opts));
  assert.equal(locked.statements.filter((s) => s.includes('FOR UPDATE')).length, 1);
});

test('held rows of a movement whose node another writer changed are refused whole: no row, no log entry, no artifact', async (t) => {
  const db = await scratchDatabase(t);
  // A writer that moves only the sibling must still fence the held rows out.
  const held = await twoRoots(db.pool);
  const a = held.nodes.find((n) => n.node_key === 'a')!;
  const b = held.nodes.find((n) => n.node_key === 'b')!;
  await withTransaction(db.pool, (c) => deliverBatch(c, { nodes: [{ nodeId: b.id, event: { type: 'DISPATCH_CLAIMED', at: new Date().toISOString() }, lease: crypto.randomUUID() }] }, opts));
  const log = (await transitionsOfMovement(db.pool, held.movement.id)).length;

  const artifact = {
    request_id: held.movement.id,
    request_node_id: a.id,
    attempt_no: 1,
    artifact_type: 'proof',
    artifact_digest: null,
    content_format: 'json',
    content_inline: '{}',
    content_uri: null,
    artifact_metadata: {},
  };
  await assert.rejects(
    withTransaction(db.pool, (c) =>
      deliverBatch(c, { nodes: [{ nodeId: a.id, event: { type: 'DISPATCH_CLAIMED', at: new Date().toISOString() }, lease: crypto.randomUUID(), artifacts: [artifact] }] }, { ...opts, held: [held] }),
    ),
    TransitionConflictError,
  );
  assert.equal((await getNode(db.pool, a.id))!.node_state, 'READY');
  assert.equal((await transitionsOfMovement(db.pool, held.movement.id)).length, log);
  const { rows } = await db.pool.query('SELECT count(*)::int AS n FROM artifacts WHERE request_node_id = $1', [a.id]);
  assert.equal(rows[0].n, 0);

  // Delivered again over rows read under the lock, the machines decide on what is there now:
  // b is in dispatch, so the serial-per-movement rule refuses a's claim.
  const again = await withTransaction(db.pool, (c) =>
    deliverBatch(c, { nodes: [{ nodeId: a.id, event: { type: 'DISPATCH_CLAIMED', at: new Date().toISOString() }, lease: crypto.randomUUID() }] }, opts),
  );
  assert.ok(again.nodes[0] instanceof Error);
});

test('a writer waiting on the movement lock is fenced out by the write committed while it waited', async (t) => {
  const db = await scratchDatabase(t);
  const held = await twoRoots(db.pool);
  const a = held.nodes.find((n) => n.node_key === 'a')!;
  const b = held.nodes.find((n) => n.node_key === 'b')!;
  const blocker = await db.pool.connect();
  try {
    await blocker.query('BEGIN');
    // Another dispatcher claims b, holding the movement row (as every writer does) until it commits.
    await deliverBatch(blocker, { nodes: [{ nodeId: b.id, event: { type: 'DISPATCH_CLAIMED', at: new Date().toISOString() }, lease: crypto.randomUUID() }] }, opts);
    // Its outcome is taken at once: on a loaded machine it may be refused before the assertion below runs.
    const stale = withTransaction(db.pool, (c) =>
      deliverBatch(c, { nodes: [{ nodeId: a.id, event: { type: 'DISPATCH_CLAIMED', at: new Date().toISOString() }, lease: crypto.randomUUID() }] }, { ...opts, held: [held] }),
    ).then(
      () => null,
      (err: unknown) => err,
    );
    // The blocker commits only once the stale writer waits for the movement's lock.
    await waitFor(
      'the stale writer to wait on the movement lock',
      async () => {
        const { rows } = await db.pool.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'");
        return rows[0].n > 0;
      },
      10_000,
      10,
    );
    await blocker.query('COMMIT');
    assert.ok((await stale) instanceof TransitionConflictError, 'the stale writer is refused');
  } finally {
    blocker.release();
  }
  // a's row never changed, so only the fence kept a second node of the movement out of dispatch.
  assert.equal((await getNode(db.pool, a.id))!.node_state, 'READY');
  assert.equal((await getNode(db.pool, b.id))!.node_state, 'PREPARING');
});
