/**
 * A movement actor's artifacts in memory (src/actors/artifact-cache.ts): read once for the rows it
 * holds, carried past its own commits with what they stored (and not what a refused item carried),
 * and read again whenever another writer came between, so a context never misses an artifact that
 * another writer stored.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { test } from 'node:test';
import { ArtifactCache, versionsOf } from '../src/actors/artifact-cache.ts';
import { deliverBatch, deliverHeld, type NodeItem } from '../src/durable/transition.ts';
import { inlineArtifact, insertArtifacts, type NewArtifact } from '../src/persistence/artifacts.ts';
import { withTransaction, type Queryable } from '../src/persistence/db.ts';
import type { LockedMovement } from '../src/persistence/group-commit.ts';
import { readMovements } from '../src/persistence/leases.ts';
import { scratchDatabase } from './helpers/db.ts';
import { approvedMovement, plan, runtimeDeps, simNode } from './helpers/runtime.ts';

const proof = (node: { id: string; request_id: string }, digest: string): NewArtifact =>
  inlineArtifact(node, 1, { type: 'proof', digest, format: 'json', content: null, metadata: {} });
const digests = (rows: NewArtifact[]) => rows.map((a) => a.artifact_digest).sort();

test('read once per held version, carried past own commits, read again after another writer', async (t) => {
  const db = await scratchDatabase(t);
  const deps = runtimeDeps(db.pool);
  const id = await approvedMovement(deps, plan('cache-two', [simNode('a', {}), simNode('b', {})], [{ from: 'a', to: 'b' }]));
  let reads = 0;
  const counting: Queryable = { query: ((...args: Parameters<typeof db.pool.query>) => (reads++, db.pool.query(...args))) as typeof db.pool.query };
  const opts = { actor: 'test', deps: deps.transitions };

  let [held] = await readMovements(db.pool, [id]);
  const a = held.nodes.find((n) => n.node_key === 'a')!;
  const b = held.nodes.find((n) => n.node_key === 'b')!;
  // Stored before the rows were read (as a movement's earlier holder would have).
  await insertArtifacts(db.pool, [proof(a, 'before')]);
  const cache = new ArtifactCache();
  assert.deepEqual(digests(await cache.of(counting, [held])), ['before']);
  assert.equal(reads, 1);
  await cache.of(counting, [held]);
  assert.equal(reads, 1, 'the same version is not read twice');

  // The holder's own commit: what its accepted item stored joins the entry; the refused item's does not.
  const commitOwn = async (rows: LockedMovement, items: NodeItem[]) => {
    const result = await deliverHeld(db.pool, { nodes: items }, { ...opts, held: [rows] });
    cache.committed(versionsOf([rows]), items, result);
    return { movement: result.movementOf(id), nodes: result.nodesOf(id) };
  };
  held = await commitOwn(held, [
    { nodeId: a.id, event: { type: 'DISPATCH_CLAIMED', at: new Date().toISOString() }, lease: randomUUID(), artifacts: [proof(a, 'own')] },
    // b waits for a: the machine refuses its claim, and the artifact it carried is never stored.
    { nodeId: b.id, event: { type: 'DISPATCH_CLAIMED', at: new Date().toISOString() }, lease: randomUUID(), artifacts: [proof(b, 'refused')] },
  ]);
  assert.deepEqual(digests(await cache.of(counting, [held])), ['before', 'own']);
  assert.equal(reads, 1, 'carried past its own commit without a read');
  const stored = await db.pool.query('SELECT artifact_digest FROM artifacts WHERE request_id = $1 ORDER BY artifact_digest', [id]);
  assert.deepEqual(stored.rows.map((r) => r.artifact_digest), ['before', 'own'], 'the cache holds what the table holds');

  // Another writer (an operator's service, recovery) stores an artifact with a transition of its own.
  await withTransaction(db.pool, (c) =>
    deliverBatch(c, { nodes: [{ nodeId: a.id, event: { type: 'PREPARED', signingRequired: false, at: new Date().toISOString() }, artifacts: [proof(a, 'other')] }] }, opts),
  );
  // The holder's rows are older now: a fresh read of them finds the entry's version stale and reads again.
  const [fresh] = await readMovements(db.pool, [id]);
  assert.equal(Number(fresh.movement.write_version), Number(held.movement.write_version) + 1);
  assert.deepEqual(digests(await cache.of(counting, [fresh])), ['before', 'other', 'own']);
  assert.equal(reads, 2);

  // A commit that had to be written under the lock after another writer (its version moved by more
  // than one) forgets the entry instead of carrying it.
  const stale = fresh;
  await db.pool.query('UPDATE movement_requests SET write_version = write_version + 2 WHERE id = $1', [id]);
  const [later] = await readMovements(db.pool, [id]);
  cache.committed(versionsOf([stale]), [], { nodes: [], movements: [], claimed: [], nodesOf: () => later.nodes, movementOf: () => later.movement });
  await cache.of(counting, [later]);
  assert.equal(reads, 3, 'read again after a jump of the version');
});
