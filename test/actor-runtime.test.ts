import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { WorkerDeps } from '../src/actors/execution.ts';
import { GroupWriter } from '../src/actors/group-writer.ts';
import { LeaseHolder } from '../src/actors/lease-holder.ts';
import { recoverBatch } from '../src/actors/recovery.ts';
import { deliverHeld, deliverMovementEvent } from '../src/durable/transition.ts';
import { Wakeups } from '../src/actors/wakeups.ts';
import type { Executor, ExecutionContext, PreparedAction, SubmitOptions } from '../src/executors/protocol.ts';
import { ExecutorRegistry } from '../src/executors/registry.ts';
import { summarizeNodes } from '../src/machines/node-summary.ts';
import { claimsTotal } from '../src/metrics.ts';
import { withTransaction, type Pool } from '../src/persistence/db.ts';
import { acquireLeases, leasesOf, readMovements } from '../src/persistence/leases.ts';
import { TransitionConflictError } from '../src/errors.ts';
import { scratchDatabase } from './helpers/db.ts';
import { approvedMovement, backdateNodes, plan, runtimeDeps, simNode, snapshot } from './helpers/runtime.ts';
import { waitFor } from './helpers/wait.ts';

/**
 * The actor runtime in one process: a lease holder leases movements with due
 * work and runs each as a movement actor, which drives it in memory and writes over the rows it
 * holds, fenced by the movement's write_version.
 */

function holder(deps: WorkerDeps, owner: string, over: Partial<ConstructorParameters<typeof LeaseHolder>[1]> = {}): LeaseHolder {
  const h = new LeaseHolder(deps, { owner, ttlSeconds: 15, maxMovements: 500, holdMs: 5000, log: deps.log, ...over });
  // A wake after the test ended (its pool closed) finds nothing to do; the tests assert what the holder did.
  h.onWake(() => void h.acquire().catch(() => {}));
  h.start();
  return h;
}

async function submitsOf(pool: Pool, movementId: string): Promise<Map<string, number>> {
  const { rows } = await pool.query(
    `SELECT s.idempotency_key, count(*)::int AS n FROM sim_side_effects s JOIN request_nodes n ON n.id = s.request_node_id
      WHERE n.request_id = $1 AND s.call = 'submit' GROUP BY 1`,
    [movementId],
  );
  return new Map(rows.map((r) => [r.idempotency_key, r.n]));
}

const threeNodes = (key: string) =>
  plan(
    key,
    [simNode('a', {}), { ...simNode('b', {}), executor_binding: 'exec.sim.observe' }, simNode('c', {})],
    [
      { from: 'a', to: 'b' },
      { from: 'b', to: 'c' },
    ],
  );

const completed = (pool: Pool, id: string) => waitFor(`movement ${id} to complete`, async () => (await snapshot(pool, id)).movement.request_state === 'COMPLETED', 20_000, 10);

test('a leased movement runs as one actor to COMPLETED: one submit per node, no claim, and its lease handed back', async (t) => {
  const db = await scratchDatabase(t);
  const deps = runtimeDeps(db.pool);
  const id = await approvedMovement(deps, threeNodes('actor-three'));
  const h = holder(deps, 'test:holder:1', { maxMovements: 1 });
  t.after(() => h.stop());
  assert.equal(await h.acquire(), 1);
  await completed(db.pool, id);
  const s = await snapshot(db.pool, id);
  for (const n of s.nodes) assert.equal(n.node_state, 'COMPLETED');
  // With room left, an acquisition that found less than its room says there is nothing more now.
  const roomy = holder(deps, 'test:holder:roomy');
  t.after(() => roomy.stop());
  assert.equal(await roomy.acquire(), 0);
  const submits = await submitsOf(db.pool, id);
  assert.equal(submits.size, 3);
  for (const n of submits.values()) assert.equal(n, 1);
  await waitFor('the lease to be handed back', async () => (await leasesOf(db.pool, 'test:holder:1')).length === 0, 5000, 10);
  assert.equal(s.movement.next_work_at, null, 'a settled movement has no due work');
  // A second acquisition finds nothing: the movement is done.
  assert.equal(await h.acquire(), 0);
});

test("a movement actor writes its first node's claim with the node's SUBMITTING, in one commit, and each node submits once", async (t) => {
  const db = await scratchDatabase(t);
  const deps = runtimeDeps(db.pool);
  const id = await approvedMovement(deps, threeNodes('actor-first-claim'));
  const claimHits = async () => (await claimsTotal.get()).values.find((v) => v.labels.worker === 'dispatcher' && v.labels.result === 'hit')?.value ?? 0;
  const hitsBefore = await claimHits();
  const h = holder(deps, 'test:holder:claim', { maxMovements: 1 });
  t.after(() => h.stop());
  assert.equal(await h.acquire(), 1);
  await completed(db.pool, id);
  assert.equal((await claimHits()) - hitsBefore, 3, 'each claim counted once, when it was written');
  // Rows written by one transaction share its id (xmin).
  const { rows } = await db.pool.query(
    `SELECT entity_type, node_key, from_state, to_state, xmin::text AS tx FROM transitions WHERE request_id = $1 ORDER BY id`,
    [id],
  );
  const txOf = (entity: string, node: string | null, from: string, to: string) => {
    const r = rows.find((x) => x.entity_type === entity && x.node_key === node && x.from_state === from && x.to_state === to);
    assert.ok(r, `${entity} ${node ?? ''} ${from} -> ${to} in ${JSON.stringify(rows)}`);
    return r.tx;
  };
  const submitting = txOf('node', 'a', 'PREPARING', 'SUBMITTING');
  assert.equal(txOf('node', 'a', 'READY', 'PREPARING'), submitting, 'the claim commits with SUBMITTING');
  assert.equal(txOf('request', null, 'APPROVED', 'EXECUTING'), submitting, "the movement's DISPATCH_STARTED too");
  // A result that lets the next node start is written with that node's claim and SUBMITTING: one commit per node.
  assert.equal(txOf('node', 'a', 'SUBMITTING', 'COMPLETED'), txOf('node', 'b', 'PREPARING', 'SUBMITTING'), "a's result with b's SUBMITTING");
  assert.equal(txOf('node', 'b', 'READY', 'PREPARING'), txOf('node', 'b', 'PREPARING', 'SUBMITTING'));
  assert.equal(txOf('node', 'b', 'SUBMITTED', 'COMPLETED'), txOf('node', 'c', 'PREPARING', 'SUBMITTING'), "b's observed result with c's SUBMITTING");
  // b's first observation is due at once: it is asked before b's SUBMITTED is written, and both go in that commit.
  assert.equal(txOf('node', 'b', 'SUBMITTING', 'SUBMITTED'), txOf('node', 'b', 'SUBMITTED', 'COMPLETED'), "b's SUBMITTED with its observed result");
  assert.equal(new Set(rows.filter((r) => r.entity_type === 'node' && r.from_state !== '' && r.from_state !== 'BLOCKED').map((r) => r.tx)).size, 4, 'four writing commits for three nodes');
  const submits = await submitsOf(db.pool, id);
  assert.deepEqual([...submits.values()], [1, 1, 1]);
});

/** Each node transition of the movement with the transaction that wrote it (rows of one transaction share its xmin). */
async function nodeTransactions(pool: Pool, id: string): Promise<{ from: string; to: string; tx: string }[]> {
  const { rows } = await pool.query(
    `SELECT from_state AS from, to_state AS to, xmin::text AS tx FROM transitions WHERE request_id = $1 AND entity_type = 'node' AND seq > 0 ORDER BY id`,
    [id],
  );
  return rows;
}

async function callsOf(pool: Pool, id: string, call: string): Promise<number> {
  const { rows } = await pool.query(
    `SELECT count(*)::int AS n FROM sim_side_effects s JOIN request_nodes n ON n.id = s.request_node_id WHERE n.request_id = $1 AND s.call = $2`,
    [id, call],
  );
  return rows[0].n;
}

test('an observation due at once that says the provider is not done yet is written with the SUBMITTED; the next one, when due, completes the node', async (t) => {
  const db = await scratchDatabase(t);
  const deps = runtimeDeps(db.pool);
  const observeNode = { ...simNode('b', { observe: [{ next_state: 'OBSERVING', retry_after_seconds: 1 }, 'COMPLETED'] }), executor_binding: 'exec.sim.observe' };
  const id = await approvedMovement(deps, plan('actor-observing', [observeNode]));
  const h = holder(deps, 'test:holder:observing', { maxMovements: 1 });
  t.after(() => h.stop());
  assert.equal(await h.acquire(), 1);
  await completed(db.pool, id);
  const tx = await nodeTransactions(db.pool, id);
  const of = (from: string, to: string) => tx.find((r) => r.from === from && r.to === to)?.tx;
  assert.ok(of('SUBMITTING', 'SUBMITTED'), JSON.stringify(tx));
  assert.equal(of('SUBMITTING', 'SUBMITTED'), of('SUBMITTED', 'OBSERVING'), 'SUBMITTED and the first answer in one commit');
  assert.notEqual(of('OBSERVING', 'COMPLETED'), of('SUBMITTED', 'OBSERVING'), 'the second answer in a commit of its own');
  assert.equal(await callsOf(db.pool, id, 'submit'), 1);
  assert.equal(await callsOf(db.pool, id, 'observe'), 2);
});

test('a submit whose provider asks to be observed later is written at once, with no observation before it', async (t) => {
  const db = await scratchDatabase(t);
  const deps = runtimeDeps(db.pool);
  const observeNode = { ...simNode('b', { submit: [{ next_state: 'SUBMITTED', retry_after_seconds: 600 }] }), executor_binding: 'exec.sim.observe' };
  const id = await approvedMovement(deps, plan('actor-observe-later', [observeNode]));
  const h = holder(deps, 'test:holder:later', { maxMovements: 1 });
  t.after(() => h.stop());
  assert.equal(await h.acquire(), 1);
  await waitFor('the node to be SUBMITTED', async () => (await snapshot(db.pool, id)).byKey.b.node_state === 'SUBMITTED', 20_000, 10);
  assert.equal(await callsOf(db.pool, id, 'observe'), 0, 'nothing asked before its time');
  const next = (await snapshot(db.pool, id)).byKey.b.next_observe_at;
  assert.ok(next && new Date(next).getTime() > Date.now() + 500_000, `observed again in about ten minutes, not ${String(next)}`);
});

test('a lease says whether the movement\'s nodes hold artifacts; an actor over a fresh movement runs to COMPLETED without reading them', async (t) => {
  const db = await scratchDatabase(t);
  const deps = runtimeDeps(db.pool);
  const fresh = await approvedMovement(deps, plan('actor-fresh', [simNode('a', {})]));
  const used = await approvedMovement(deps, plan('actor-used', [simNode('a', {})]));
  const node = (await snapshot(db.pool, used)).nodes[0];
  await db.pool.query(
    `INSERT INTO artifacts (request_id, request_node_id, attempt_no, artifact_type, content_inline) VALUES ($1, $2, 1, 'prepared_action', '{}')`,
    [used, node.id],
  );
  const leased = await acquireLeases(db.pool, 'test:holder:artifacts', 5, 2);
  assert.deepEqual(new Map(leased.map((m) => [m.movement.id, m.noArtifacts])), new Map([[fresh, true], [used, false]]));

  // A movement actor over a fresh movement: the lease's answer stands in for the artifact read.
  const third = await approvedMovement(deps, threeNodes('actor-no-artifact-read'));
  const reads: string[] = [];
  const query = db.pool.query;
  db.pool.query = ((...args: unknown[]) => {
    const text = typeof args[0] === 'string' ? args[0] : String((args[0] as { text?: string }).text);
    if (/FROM artifacts/.test(text)) reads.push(text);
    return (query as (...a: unknown[]) => unknown).apply(db.pool, args);
  }) as typeof db.pool.query;
  t.after(() => void (db.pool.query = query));
  const h = holder(deps, 'test:holder:fresh', { maxMovements: 1 });
  t.after(() => h.stop());
  assert.equal(await h.acquire(), 1);
  await completed(db.pool, third);
  assert.deepEqual(reads, [], 'no read of artifacts: the actor knew there were none, and kept what it wrote');
});

test('a movement leased by one holder is not leased by another until the lease expires', async (t) => {
  const db = await scratchDatabase(t);
  const deps = runtimeDeps(db.pool);
  // b observes OBSERVING for a while (1 s between looks), so the movement stays leased and waiting.
  const id = await approvedMovement(
    deps,
    plan('actor-held', [simNode('a', {}), { ...simNode('b', { observe: [{ next_state: 'OBSERVING', retry_after_seconds: 1 }, 'COMPLETED'] }), executor_binding: 'exec.sim.observe' }], [{ from: 'a', to: 'b' }]),
  );
  const first = holder(deps, 'test:holder:a', { maxMovements: 1 });
  const second = holder(deps, 'test:holder:b');
  t.after(async () => {
    await first.stop();
    await second.stop();
  });
  assert.equal(await first.acquire(), 1);
  assert.equal(await second.acquire(), 0, 'held by the first');
  await completed(db.pool, id);
  const submits = await submitsOf(db.pool, id);
  assert.deepEqual([...submits.values()], [1, 1]);
});

test("a holder's write extends its own live lease; another owner's lease and an expired one are left as they are", async (t) => {
  const db = await scratchDatabase(t);
  const deps = runtimeDeps(db.pool);
  const ids = [];
  for (let i = 0; i < 3; i++) ids.push(await approvedMovement(deps, plan(`actor-renew-${i}`, [simNode('a', {})])));
  const [mine, theirs, expired] = ids;
  const owner = 'test:holder:renew';
  const leased = await acquireLeases(db.pool, owner, 5, 3);
  assert.equal(leased.length, 3);
  await db.pool.query("UPDATE movement_requests SET lease_owner = 'test:holder:other' WHERE id = $1", [theirs]);
  await db.pool.query("UPDATE movement_requests SET lease_expires_at = now() - interval '1 second' WHERE id = $1", [expired]);
  const before = await expiries(db.pool, ids);
  // Each node's claim, written over the rows the lease returned, by a writer that names its lease.
  const writer = { ...deps.transitions, lease: { owner, ttlSeconds: 600 } };
  for (const m of await readMovements(db.pool, ids)) {
    const node = m.nodes[0];
    await deliverHeld(db.pool, { nodes: [{ nodeId: node.id, event: { type: 'DISPATCH_CLAIMED', at: new Date().toISOString() }, lease: crypto.randomUUID() }] }, { actor: 'test', deps: writer, held: [m] });
  }
  const after = await expiries(db.pool, ids);
  assert.ok(after.get(mine)!.getTime() > Date.now() + 500_000, `own live lease extended: ${after.get(mine)!.toISOString()}`);
  assert.equal(after.get(theirs)!.getTime(), before.get(theirs)!.getTime(), "another owner's lease is not touched");
  assert.equal(after.get(expired)!.getTime(), before.get(expired)!.getTime(), 'an expired lease stays expired');
});

async function expiries(pool: Pool, ids: string[]): Promise<Map<string, Date>> {
  const { rows } = await pool.query<{ id: string; lease_expires_at: Date }>('SELECT id, lease_expires_at FROM movement_requests WHERE id = ANY($1::uuid[])', [ids]);
  return new Map(rows.map((r) => [r.id, r.lease_expires_at]));
}

test('a holder paused past its lease expiry, whose movement another process finished, has every late write refused', async (t) => {
  const db = await scratchDatabase(t);
  const base = runtimeDeps(db.pool);
  // The first holder's submit reaches the provider, then its process stalls before the result is written.
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let reached!: () => void;
  const stalled = new Promise<void>((r) => (reached = r));
  const real = base.executors.get('exec.sim.action' as never);
  const submit = async (ctx: ExecutionContext, prepared: PreparedAction, opts: SubmitOptions) => {
    const r = await real.submit(ctx, prepared, opts);
    reached();
    await gate;
    return r;
  };
  // Every other method is the real executor's, called on it (its private fields need the real `this`).
  const stalling = new Proxy(real, {
    get: (target, prop) => {
      if (prop === 'submit') return submit;
      const v = Reflect.get(target, prop, target);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  }) as Executor;
  const executors = new ExecutorRegistry();
  for (const e of base.executors.all()) executors.register(e.executorKey === real.executorKey ? stalling : e);
  const paused: WorkerDeps = { ...base, executors };
  const id = await approvedMovement(base, plan('actor-stalled', [simNode('a', {})]));

  // A long TTL: this holder does not renew during the test, as a stalled process would not.
  const a = holder(paused, 'test:holder:paused', { ttlSeconds: 3600, maxMovements: 1 });
  t.after(async () => {
    release();
    await a.stop();
  });
  assert.equal(await a.acquire(), 1);
  await stalled;
  // Its lease expires while its process is stalled.
  await db.pool.query(`UPDATE movement_requests SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, [id]);

  // Another holder finds nothing to take: a node in SUBMITTING is no holder's work (next_work_at
  // is null); recovery past the grace asks the provider and finishes the node.
  const b = holder(base, 'test:holder:other');
  t.after(() => b.stop());
  assert.equal(await b.acquire(), 0);
  assert.equal((await snapshot(db.pool, id)).byKey.a.node_state, 'SUBMITTING');
  await backdateNodes(db.pool, [id], 'updated_at', 3600);
  await backdateNodes(db.pool, [id], 'started_at', 3600);
  await recoverBatch(base);
  const settled = await snapshot(db.pool, id);
  assert.equal(settled.byKey.a.node_state, 'COMPLETED');
  const log = (await db.pool.query('SELECT count(*)::int AS n FROM transitions WHERE entity_id = $1', [settled.byKey.a.id])).rows[0].n;

  // The stalled process resumes: its result write is refused, and nothing changes.
  release();
  await waitFor('the stalled actor to stop', async () => a.movementIds.length === 0, 5000, 10);
  const after = await snapshot(db.pool, id);
  assert.equal(after.byKey.a.node_state, 'COMPLETED');
  assert.equal((await db.pool.query('SELECT count(*)::int AS n FROM transitions WHERE entity_id = $1', [after.byKey.a.id])).rows[0].n, log, 'no late transition');
  assert.deepEqual([...(await submitsOf(db.pool, id)).values()], [1], 'one submit');
});

test('a cancel delivered while a movement actor waits reaches it at once, and the actor hands the movement back', async (t) => {
  const db = await scratchDatabase(t);
  const deps = runtimeDeps(db.pool);
  // b's first prepare fails for now (retry in a few seconds): the actor waits in memory for it.
  const id = await approvedMovement(
    deps,
    plan('actor-cancel', [simNode('a', {}), simNode('b', { prepare: 'throw_temporary' }), simNode('c', {})], [
      { from: 'a', to: 'b' },
      { from: 'b', to: 'c' },
    ]),
  );
  const h = holder(deps, 'test:holder:cancel', { holdMs: 30_000, maxMovements: 1 });
  const wakeups = new Wakeups(db.url, { notices: (n) => h.notice(n) }, deps.log);
  await wakeups.start();
  t.after(async () => {
    await h.stop();
    await wakeups.stop();
  });
  assert.equal(await h.acquire(), 1);
  await waitFor('b to be deferred', async () => (await snapshot(db.pool, id)).byKey.b.dispatch_after !== null, 10_000, 10);
  const deferred = await snapshot(db.pool, id);
  assert.ok(deferred.byKey.b.dispatch_after!.getTime() > Date.now() + 1000, 'due again only in a few seconds');
  assert.deepEqual(h.movementIds, [id], 'the actor waits, holding the movement');

  await withTransaction(db.pool, (c) => deliverMovementEvent(c, id, { type: 'CANCEL', by: 'operator', summary: summarizeNodes(deferred.nodes) }, { actor: 'operator', deps: deps.transitions }));
  // Well before b is due: the notice pokes the actor, which reads the rows and stops.
  await waitFor('the actor to hand the cancelled movement back', async () => (await leasesOf(db.pool, 'test:holder:cancel')).length === 0 && h.movementIds.length === 0, 1000, 10);
  const s = await snapshot(db.pool, id);
  assert.equal(s.movement.request_state, 'CANCELLED');
  assert.equal(s.byKey.b.node_state, 'CANCELLED');
  assert.ok(Date.now() < deferred.byKey.b.dispatch_after!.getTime(), 'before b would have been dispatched');
});

test('stop with 100 live actors lets each finish its step and hands back every lease in one statement', async (t) => {
  const db = await scratchDatabase(t);
  const deps = runtimeDeps(db.pool);
  const ids: string[] = [];
  for (let i = 0; i < 100; i++) {
    ids.push(
      await approvedMovement(deps, plan(`actor-stop-${i}`, [simNode('a', {}), { ...simNode('b', { observe: [{ next_state: 'OBSERVING', retry_after_seconds: 4 }, 'COMPLETED'] }), executor_binding: 'exec.sim.observe' }], [{ from: 'a', to: 'b' }])),
    );
  }
  const h = holder(deps, 'test:holder:stop', { maxMovements: 100 });
  assert.equal(await h.acquire(), 100);
  await waitFor('every movement to wait on its observation', async () => {
    const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM request_nodes WHERE request_id = ANY($1::uuid[]) AND node_state = 'OBSERVING'`, [ids]);
    return rows[0].n === 100;
  }, 30_000, 20);
  assert.equal((await leasesOf(db.pool, 'test:holder:stop')).length, 100);
  let releases = 0;
  const query = db.pool.query.bind(db.pool);
  (db.pool as { query: unknown }).query = (...args: unknown[]) => {
    if (typeof args[0] === 'string' && args[0].startsWith('UPDATE movement_requests SET lease_owner = NULL')) releases++;
    return (query as (...a: unknown[]) => unknown)(...args);
  };
  try {
    await h.stop();
  } finally {
    (db.pool as { query: unknown }).query = query;
  }
  assert.equal((await leasesOf(db.pool, 'test:holder:stop')).length, 0, 'every lease handed back');
  assert.equal(releases, 1, 'in one statement');
  // Handed back, each is leasable at once by another holder (its next look is due in a few seconds).
  const other = holder(deps, 'test:holder:next', { maxMovements: 100 });
  t.after(() => other.stop());
  await db.pool.query(`UPDATE movement_requests SET next_work_at = now() WHERE id = ANY($1::uuid[])`, [ids]);
  assert.equal(await other.acquire(), 100);
});

test('the group writer merges writes that arrive while its flushes are busy, and a fenced-out one is refused alone', async (t) => {
  const db = await scratchDatabase(t);
  const deps = runtimeDeps(db.pool);
  const ids: string[] = [];
  for (let i = 0; i < 7; i++) ids.push(await approvedMovement(deps, plan(`group-${i}`, [simNode('a', {})])));
  const held = await readMovements(db.pool, ids);
  const groupStatements: string[] = [];
  const query = db.pool.query.bind(db.pool);
  (db.pool as { query: unknown }).query = (...args: unknown[]) => {
    const text = typeof args[0] === 'string' ? args[0] : (args[0] as { text?: string }).text;
    if (text?.startsWith('WITH rw AS')) groupStatements.push(text);
    return (query as (...a: unknown[]) => unknown)(...args);
  };
  t.after(() => ((db.pool as { query: unknown }).query = query));
  const writer = new GroupWriter(db.pool, 1);
  const claim = (m: (typeof held)[number]) =>
    writer.write({ nodes: [{ nodeId: m.nodes[0].id, event: { type: 'DISPATCH_CLAIMED', at: new Date().toISOString() }, lease: crypto.randomUUID() }] }, { actor: 'test', deps: deps.transitions, held: [m] });

  // The first goes out at once; the four behind it go out together.
  const first = await Promise.all(held.slice(0, 5).map(claim));
  assert.equal(groupStatements.length, 2, 'two statements for five writes');
  for (const r of first) assert.equal(r.nodes[0] instanceof Error, false);
  for (const [i, r] of first.entries()) assert.equal(r.nodesOf(held[i].movement.id)[0].node_state, 'PREPARING');

  // Stale rows of the fifth movement (written above) ride with the sixth's fresh ones: the merged
  // write is refused, and each goes again on its own: the sixth is written, the fifth refused.
  groupStatements.length = 0;
  const occupying = claim(held[6]);
  const busy = claim(held[5]);
  const stale = claim(held[4]);
  const [, fresh, refused] = await Promise.allSettled([occupying, busy, stale]);
  assert.equal(groupStatements.length, 4, 'one alone, one merged and refused, then the two on their own');
  assert.equal(fresh.status, 'fulfilled');
  assert.equal(refused.status, 'rejected');
  assert.ok((refused as PromiseRejectedResult).reason instanceof TransitionConflictError);
  assert.equal((await snapshot(db.pool, ids[5])).byKey.a.node_state, 'PREPARING');
});
