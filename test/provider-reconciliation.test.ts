import assert from 'node:assert/strict';
import { test } from 'node:test';
import { reconcileWithProviders } from '../src/sweeps/provider-reconciliation.ts';
import { confirmResolution, listResolutions, proposeResolution } from '../src/services/resolutions.ts';
import { listDrifts } from '../src/persistence/reconciliation-drifts.ts';
import { transitionsOfEntity } from '../src/persistence/movements.ts';
import { scratchDatabase } from './helpers/db.ts';
import { approvedMovement, drain, plan, runtimeDeps, simNode, snapshot } from './helpers/runtime.ts';

/**
 * Reconciliation with evidence: the simulated provider's ledger is asked (inspect(), read-only)
 * about settled nodes. A node set to FAILED behind Ferry's back while the ledger shows its submit
 * is reported as drift; it is repaired through the node machine only with auto-repair on.
 */

async function audits(pool: import('pg').Pool, action: string) {
  const { rows } = await pool.query(`SELECT entity_id, details FROM audit_outbox WHERE action = $1 ORDER BY id`, [action]);
  return rows as { entity_id: string; details: Record<string, unknown> }[];
}

test('a node FAILED behind Ferry\'s back while the provider completed it is reported, and repaired only with the setting on', async (t) => {
  const db = await scratchDatabase(t);
  const off = runtimeDeps(db.pool);
  const on = runtimeDeps(db.pool, { FERRY_RECONCILIATION_AUTO_REPAIR: 'true' });
  assert.equal(off.config.reconciliationAutoRepair, false, 'repair is off by default');

  const template = plan('evidence-me', [simNode('pay', {})]);
  const tamperedId = await approvedMovement(off, template);
  const honestId = await approvedMovement(off, template);
  await drain(off);
  for (const id of [tamperedId, honestId]) assert.equal((await snapshot(db.pool, id)).movement.request_state, 'COMPLETED');

  const first = await reconcileWithProviders(off);
  assert.equal(first.checked, 2);
  assert.equal(first.drifted, 0, 'what the provider says agrees with the rows');
  assert.equal((await reconcileWithProviders(off)).checked, 0, 'a node is not asked again until it changes or the recheck period passes');

  const node = (await snapshot(db.pool, tamperedId)).byKey.pay;
  await db.pool.query(`UPDATE request_nodes SET node_state = 'FAILED', updated_at = now() WHERE id = $1`, [node.id]);

  // Setting off: reported, audited, counted; nothing repaired.
  const reported = await reconcileWithProviders(off);
  assert.deepEqual(
    { checked: reported.checked, drifted: reported.drifted, repaired: reported.repaired, byClass: reported.byClass },
    { checked: 1, drifted: 1, repaired: 0, byClass: { failed_but_provider_completed: 1 } },
  );
  assert.equal((await snapshot(db.pool, tamperedId)).byKey.pay.node_state, 'FAILED', 'not repaired with the setting off');
  const open = await listDrifts(db.pool, { open: true, limit: 10 });
  assert.equal(open.length, 1);
  assert.equal(open[0].request_node_id, node.id);
  assert.equal(open[0].drift_class, 'failed_but_provider_completed');
  assert.equal(open[0].stored_state, 'FAILED');
  assert.equal(open[0].provider_state, 'COMPLETED');
  const found = await audits(db.pool, 'reconciliation.provider_drift');
  assert.deepEqual(found.map((a) => [a.entity_id, a.details.drift_class]), [[node.id, 'failed_but_provider_completed']]);

  // Setting on (the node is due again: its check is backdated past the recheck period).
  await db.pool.query(`UPDATE request_nodes SET provider_checked_at = now() - interval '2 hours' WHERE id = $1`, [node.id]);
  const repaired = await reconcileWithProviders(on);
  assert.equal(repaired.drifted, 1);
  assert.equal(repaired.repaired, 1);
  const after = (await snapshot(db.pool, tamperedId)).byKey.pay;
  assert.equal(after.node_state, 'COMPLETED');
  const last = (await transitionsOfEntity(db.pool, node.id)).at(-1)!;
  assert.equal(last.event_type, 'RECONCILED');
  assert.equal(last.from_state, 'FAILED');
  assert.equal(last.actor, 'worker:reconciliation');
  assert.equal((last.event_payload as { driftClass: string }).driftClass, 'failed_but_provider_completed');
  assert.equal((await listDrifts(db.pool, { open: true, limit: 10 })).length, 0, 'the drift is closed');
  const [closed] = await listDrifts(db.pool, { open: false, limit: 10 });
  assert.equal(closed.repaired_by, 'worker:reconciliation');
  assert.equal((await audits(db.pool, 'reconciliation.repaired')).length, 1);
  assert.equal(found.length, (await audits(db.pool, 'reconciliation.provider_drift')).length, 'a drift seen again is not audited twice');
});

test('an UNKNOWN node the provider knows about: a movement in MANUAL_INTERVENTION goes on after the repair', async (t) => {
  const db = await scratchDatabase(t);
  const off = runtimeDeps(db.pool);
  const on = runtimeDeps(db.pool, { FERRY_RECONCILIATION_AUTO_REPAIR: 'true' });
  // Submit answers UNKNOWN and asks for a person; the simulated ledger recorded the submit anyway.
  const template = plan('evidence-unknown', [
    simNode('pay', { submit: [{ next_state: 'UNKNOWN', error_code: 'SIM_LOST_ACK', manual_intervention_required: true }] }),
    simNode('after', {}),
  ], [{ from: 'pay', to: 'after' }]);
  const id = await approvedMovement(off, template);
  await drain(off);
  const stuck = await snapshot(db.pool, id);
  assert.equal(stuck.movement.request_state, 'MANUAL_INTERVENTION');
  assert.equal(stuck.byKey.pay.node_state, 'UNKNOWN');

  const reported = await reconcileWithProviders(off);
  assert.deepEqual(reported.byClass, { unknown_but_provider_knows: 1 });
  assert.equal((await snapshot(db.pool, id)).movement.request_state, 'MANUAL_INTERVENTION');
  // The node is a person's: the provider was only inspected, never asked to recover.
  const calls = async (call: string) =>
    (await db.pool.query(`SELECT count(*)::int AS n FROM sim_side_effects WHERE request_node_id = $1 AND call = $2`, [stuck.byKey.pay.id, call])).rows[0].n;
  assert.equal(await calls('inspect'), 1);
  assert.equal(await calls('recover'), 0, 'reconciliation never calls recover()');

  // An operator proposes a retry meanwhile; the repair settles the node first.
  const proposal = await proposeResolution(off, id, { actor: 'token:alice', nodeKey: 'pay', resolution: 'retry', reason: 'looks lost' });
  await db.pool.query(`UPDATE request_nodes SET provider_checked_at = NULL WHERE request_id = $1`, [id]);
  assert.equal((await reconcileWithProviders(on)).repaired, 1);
  // The proposal no longer applies: the machines refuse it, and it is marked refused.
  await assert.rejects(confirmResolution(off, id, proposal.id, { actor: 'token:bob' }), (e: any) => e.code === 'INVALID_TRANSITION' && e.details.reason === 'RESOLUTION_REFUSED');
  const [refused] = await listResolutions(off, id);
  assert.equal(refused.status, 'refused');
  assert.equal(refused.confirmed_by, 'token:bob');
  const resumed = await snapshot(db.pool, id);
  assert.equal(resumed.byKey.pay.node_state, 'COMPLETED');
  assert.equal(resumed.movement.request_state, 'EXECUTING');
  await drain(off);
  assert.equal((await snapshot(db.pool, id)).movement.request_state, 'COMPLETED');
});

test('a COMPLETED node the provider calls failed is reported but never repaired; a provider that throws is no answer, not drift', async (t) => {
  const db = await scratchDatabase(t);
  const on = runtimeDeps(db.pool, { FERRY_RECONCILIATION_AUTO_REPAIR: 'true' });
  // Submits complete; inspect() (what reconciliation asks) is scripted to contradict or to throw.
  const contradicted = await approvedMovement(on, plan('evidence-contradicts', [simNode('pay', { inspect: ['FAILED'] })]));
  const silent = await approvedMovement(on, plan('evidence-throws', [simNode('pay', { inspect: ['throw_temporary'] })]));
  await drain(on);
  for (const id of [contradicted, silent]) assert.equal((await snapshot(db.pool, id)).movement.request_state, 'COMPLETED');

  const report = await reconcileWithProviders(on);
  assert.equal(report.checked, 1);
  assert.equal(report.unanswered, 1);
  assert.deepEqual(report.byClass, { completed_but_provider_failed: 1 });
  assert.equal(report.repaired, 0, 'COMPLETED is final: reported for an operator, not repaired');
  assert.equal((await snapshot(db.pool, contradicted)).byKey.pay.node_state, 'COMPLETED');
  const drifts = await listDrifts(db.pool, { open: true, limit: 10 });
  assert.deepEqual(drifts.map((d) => [d.request_id, d.drift_class]), [[contradicted, 'completed_but_provider_failed']]);
});

test('a run reads its candidates\' movements, nodes and artifacts once for all of them, not per node', async (t) => {
  const db = await scratchDatabase(t);
  const deps = runtimeDeps(db.pool);
  const template = plan('evidence-many', [simNode('pay', {}), simNode('settle', {})], [{ from: 'pay', to: 'settle' }]);
  for (let i = 0; i < 8; i++) await approvedMovement(deps, template);
  await drain(deps);
  const reads: string[] = [];
  const query = db.pool.query;
  db.pool.query = ((...args: unknown[]) => {
    const text = typeof args[0] === 'string' ? args[0] : String((args[0] as { text?: string }).text);
    if (/^SELECT \* FROM (movement_requests|request_nodes|artifacts) /.test(text)) reads.push(text);
    return (query as (...a: unknown[]) => unknown).apply(db.pool, args);
  }) as typeof db.pool.query;
  try {
    const report = await reconcileWithProviders(deps);
    assert.equal(report.checked, 16);
    assert.equal(report.drifted, 0);
  } finally {
    db.pool.query = query;
  }
  assert.equal(reads.length, 3, `reads for 16 nodes: ${reads.map((r) => r.slice(0, 60)).join(' | ')}`);
});
