import assert from 'node:assert/strict';
import { test } from 'node:test';
import pg from 'pg';
import { reconcileBatch } from '../src/sweeps/reconciliation.ts';
import { scratchDatabase } from './helpers/db.ts';
import { approvedMovement, drain, plan, runtimeDeps, simNode, snapshot } from './helpers/runtime.ts';

/**
 * Reconciliation replays every movement's transition log through the machines and compares the
 * result with the stored rows: consistent movements pass, a state written around the machines or a
 * log row removed behind Ferry's back is reported as drift, in the audit log and the metrics.
 */

async function driftAudits(pool: import('pg').Pool) {
  const { rows } = await pool.query(
    `SELECT entity_id, details FROM audit_outbox WHERE action = 'reconciliation.drift' ORDER BY id`,
  );
  return rows as { entity_id: string; details: { node_key: string | null; seq: number | null; reason: string } }[];
}

test('movements run by the runtime replay exactly; tampering is reported as drift', async (t) => {
  const db = await scratchDatabase(t);
  const deps = runtimeDeps(db.pool);
  const template = plan('reconcile-me', [
    simNode('pay', {}),
    { ...simNode('confirm', { submit: ['SUBMITTED'], observe: [{ next_state: 'OBSERVING', retry_after_seconds: 0 }, 'COMPLETED'] }), node_kind: 'observe' },
  ], [{ from: 'pay', to: 'confirm' }]);
  const ids = [await approvedMovement(deps, template), await approvedMovement(deps, template), await approvedMovement(deps, template)];
  await drain(deps);
  for (const id of ids) assert.equal((await snapshot(db.pool, id)).movement.request_state, 'COMPLETED');

  const first = await reconcileBatch(deps);
  assert.deepEqual(first, { checked: 3, drifted: 0, budgetExhausted: false });
  assert.deepEqual(await driftAudits(db.pool), []);
  assert.equal((await reconcileBatch(deps)).checked, 0, 'unchanged movements are not checked again');

  // The mark is the checked snapshot's time, the same on the movement and on every node it covered.
  const marks = await db.pool.query(
    `SELECT r.reconciled_at AS movement_mark, n.reconciled_at AS node_mark, n.xmin::text AS xmin, n.node_key
       FROM movement_requests r JOIN request_nodes n ON n.request_id = r.id WHERE r.id = $1`,
    [ids[0]],
  );
  for (const m of marks.rows) assert.equal(m.node_mark.getTime(), m.movement_mark.getTime(), m.node_key);
  const xminBefore = Object.fromEntries(marks.rows.map((m) => [m.node_key, m.xmin]));

  // A state written around the machines.
  const tampered = (await snapshot(db.pool, ids[0])).byKey.confirm;
  await db.pool.query(`UPDATE request_nodes SET node_state = 'FAILED', updated_at = now() WHERE id = $1`, [tampered.id]);
  // A log row removed behind Ferry's back (the table refuses deletes; an owner can switch that off).
  const victim = (await snapshot(db.pool, ids[1])).byKey.pay;
  await db.pool.query('ALTER TABLE transitions DISABLE TRIGGER transitions_append_only');
  await db.pool.query(`DELETE FROM transitions WHERE entity_id = $1 AND seq = 2`, [victim.id]);
  await db.pool.query('ALTER TABLE transitions ENABLE TRIGGER transitions_append_only');
  await db.pool.query(`UPDATE movement_requests SET updated_at = now() WHERE id = $1`, [ids[1]]);

  const second = await reconcileBatch(deps);
  assert.deepEqual(second, { checked: 2, drifted: 2, budgetExhausted: false });
  const after = await db.pool.query(`SELECT node_key, xmin::text AS xmin FROM request_nodes WHERE request_id = $1`, [ids[0]]);
  const xminAfter = Object.fromEntries(after.rows.map((m) => [m.node_key, m.xmin]));
  assert.equal(xminAfter.pay, xminBefore.pay, 'a node marked since its last change is not rewritten');
  assert.notEqual(xminAfter.confirm, xminBefore.confirm, 'the changed node carries the new mark');
  const audits = await driftAudits(db.pool);
  assert.equal(audits.length, 2);
  const byEntity = Object.fromEntries(audits.map((a) => [a.entity_id, a.details]));
  assert.equal(byEntity[tampered.id].node_key, 'confirm');
  assert.match(byEntity[tampered.id].reason, /stored FAILED, the log replays to COMPLETED/);
  assert.equal(byEntity[victim.id].node_key, 'pay');
  assert.equal(byEntity[victim.id].seq, 3);
  assert.match(byEntity[victim.id].reason, /expected transition 2, found 3/);
});

/** Counts the statements the pool's checked-out clients send while `fn` runs. */
async function countingStatements<T>(pool: import('pg').Pool, fn: () => Promise<T>): Promise<{ value: T; statements: number }> {
  let statements = 0;
  const connect = pool.connect.bind(pool);
  // pool.query checks out through connect(callback): those pass through (reconciliation's own
  // statements all run on clients it checks out itself).
  (pool as { connect: unknown }).connect = async (cb?: unknown) => {
    if (cb) return (connect as (cb: unknown) => void)(cb);
    const client = await connect();
    const query = client.query.bind(client);
    (client as { query: unknown }).query = (...args: unknown[]) => {
      statements++;
      return (query as (...a: unknown[]) => unknown)(...args);
    };
    (client as { release: unknown }).release = ((release) => (err?: Error) => {
      (client as { query: unknown }).query = query;
      return release(err);
    })(client.release.bind(client));
    return client;
  };
  try {
    const value = await fn();
    return { value, statements };
  } finally {
    (pool as { connect: unknown }).connect = connect;
  }
}

test('movements are checked a chunk per snapshot: statements per chunk, not per movement', async (t) => {
  const db = await scratchDatabase(t);
  const deps = runtimeDeps(db.pool);
  const template = plan('reconcile-many', [simNode('pay', {}), simNode('settle', {})], [{ from: 'pay', to: 'settle' }]);
  const ids: string[] = [];
  for (let i = 0; i < 30; i++) ids.push(await approvedMovement(deps, template));
  await drain(deps);
  // Two chunks of at most 25: each one read transaction (BEGIN, SET, 3 reads, now, COMMIT) and one
  // marking transaction (BEGIN, one statement, COMMIT); per movement it would be eleven each.
  const { value, statements } = await countingStatements(db.pool, () => reconcileBatch({ ...deps, config: { ...deps.config, reconciliationBatchSize: 50 } }));
  assert.deepEqual(value, { checked: 30, drifted: 0, budgetExhausted: false });
  assert.ok(statements <= 2 * 10, `statements for 30 movements: ${statements}`);
  const due = await db.pool.query(`SELECT count(*)::int AS n FROM movement_requests WHERE reconciled_at IS NULL OR reconciled_at < updated_at`);
  assert.equal(due.rows[0].n, 0);
  assert.equal((await reconcileBatch(deps)).checked, 0);
});

test('a movement whose row a writer holds is checked but not marked: it stays due, and nothing waits for the writer', async (t) => {
  const db = await scratchDatabase(t);
  const deps = runtimeDeps(db.pool);
  const template = plan('reconcile-held', [simNode('pay', {})], []);
  const held = await approvedMovement(deps, template);
  const free = await approvedMovement(deps, template);
  await drain(deps);
  // The held movement's node is written around the machines: drift, audited by the run that marks it.
  await db.pool.query(`UPDATE request_nodes SET node_state = 'FAILED', updated_at = now() WHERE request_id = $1`, [held]);
  // A connection of its own: the scratch pool is small, and the writer stands for another process.
  const writer = new pg.Client({ connectionString: db.url });
  writer.on('error', () => {}); // the scratch database's teardown may end it first
  await writer.connect();
  t.after(() => writer.end().catch(() => {}));
  await writer.query('BEGIN');
  await writer.query('SELECT 1 FROM movement_requests WHERE id = $1 FOR UPDATE', [held]);
  const first = await reconcileBatch(deps);
  assert.equal(first.checked, 2);
  const marks = await db.pool.query(`SELECT id, reconciled_at FROM movement_requests WHERE id = ANY($1::uuid[])`, [[held, free]]);
  const byId = Object.fromEntries(marks.rows.map((r) => [r.id, r.reconciled_at]));
  assert.equal(byId[held], null, 'the held movement stays due');
  assert.ok(byId[free] instanceof Date, 'the other one is marked');
  assert.deepEqual(await driftAudits(db.pool), [], 'no drift audited for a movement left unmarked');
  await writer.query('ROLLBACK');
  const second = await reconcileBatch(deps);
  assert.deepEqual(second, { checked: 1, drifted: 1, budgetExhausted: false });
  assert.equal((await driftAudits(db.pool)).length, 1, 'audited once, by the run that marked it');
  assert.equal((await reconcileBatch(deps)).checked, 0);
  assert.equal((await driftAudits(db.pool)).length, 1);
  const nodes = await db.pool.query(`SELECT count(*)::int AS n FROM request_nodes WHERE reconciled_at IS NULL`);
  assert.equal(nodes.rows[0].n, 0, 'its nodes were marked with it');
});
