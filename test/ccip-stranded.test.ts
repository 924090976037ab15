import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runCcipStrandedReaper } from '../src/sweeps/ccip-stranded-reaper.ts';
import { CCIP_DELIVERY_KEY } from '../src/executors/ccip/common.ts';
import { laneNamed } from '../src/executors/lanes.ts';
import { log } from '../src/log.ts';
import { listAuditEvents, promoteAuditBatch } from '../src/persistence/audit.ts';
import { listAttention } from '../src/persistence/notifications.ts';
import type { TemplateDefinitionInput } from '../src/plan/template-schema.ts';
import { ccipSendTemplate } from '../scripts/sandbox/templates.ts';
import { scratchDatabase } from './helpers/db.ts';
import { seedMovement } from './helpers/fixtures.ts';

/**
 * The stranded-send reaper of the CCIP lane, on real PostgreSQL: a delivery node still undecided
 * past ccip.stranded_after_seconds is surfaced once (a ccip_stranded attention event and an audit
 * event), and nothing about the movement changes; a younger one, a resolved one and one of another
 * executor are left alone. Rows are backdated; no chain is needed (the reaper reads only Ferry's
 * tables).
 */

const MESSAGE_ID = `0x${'ab'.repeat(32)}`;

async function movement(pool: import('../src/persistence/db.ts').Pool, key: string, delivery: { state: string; startedSecondsAgo: number }) {
  const t = ccipSendTemplate({ templateKey: key, sourceChainId: 31337, destinationChainId: 31338, signerKey: 'hot', maxFeeWei: '1000' }) as unknown as TemplateDefinitionInput;
  const { movement } = await seedMovement(pool, t, { intent: { asset: 'USDC', amount: '1', destination: { address: '0x00000000000000000000000000000000000000f6' } } });
  await pool.query(
    `UPDATE request_nodes SET node_state = $2, started_at = now() - make_interval(secs => $3), provider_refs = $4::jsonb WHERE request_id = $1 AND node_key = 'delivery'`,
    [movement.id, delivery.state, delivery.startedSecondsAgo, JSON.stringify({ message_id: MESSAGE_ID, destination_chain_id: 31338 })],
  );
  await pool.query(`UPDATE request_nodes SET node_state = 'COMPLETED' WHERE request_id = $1 AND node_key = 'send'`, [movement.id]);
  return movement.id as string;
}

test('ccip_stranded_reaper: a delivery undecided past the threshold is surfaced once (attention and audit), nothing else changes; younger, resolved and other nodes are left alone', async (t) => {
  const db = await scratchDatabase(t);
  const threshold = 3600;
  const stranded = await movement(db.pool, 'ccip-stranded-old', { state: 'OBSERVING', startedSecondsAgo: threshold + 60 });
  const unknown = await movement(db.pool, 'ccip-stranded-unknown', { state: 'UNKNOWN', startedSecondsAgo: threshold * 3 });
  const young = await movement(db.pool, 'ccip-stranded-young', { state: 'OBSERVING', startedSecondsAgo: threshold - 60 });
  const done = await movement(db.pool, 'ccip-stranded-done', { state: 'COMPLETED', startedSecondsAgo: threshold * 2 });
  const before = await db.pool.query(`SELECT id, node_state, row_version FROM request_nodes ORDER BY id`);

  const deps = { pool: db.pool, log, executorKey: CCIP_DELIVERY_KEY, afterSeconds: threshold };
  const first = await runCcipStrandedReaper(deps, { batchSize: 50, maxRunMs: 0 });
  assert.equal(first.surfaced, 2);
  const events = await listAttention(db.pool, { kind: 'ccip_stranded' });
  assert.deepEqual(events.map((e) => e.movement_id).sort(), [stranded, unknown].sort());
  const e = events.find((x) => x.movement_id === stranded)!;
  assert.match(e.summary, new RegExp(`CCIP message ${MESSAGE_ID} not executed`));
  assert.equal(e.details.message_id, MESSAGE_ID);
  assert.equal(e.details.threshold_seconds, threshold);
  assert.ok(!events.some((x) => x.movement_id === young || x.movement_id === done));

  // Once per node: a second run writes nothing.
  assert.equal((await runCcipStrandedReaper(deps, { batchSize: 50, maxRunMs: 0 })).surfaced, 0);
  assert.equal((await listAttention(db.pool, { kind: 'ccip_stranded' })).length, 2);
  while ((await promoteAuditBatch(db.pool)) > 0);
  const audits = await listAuditEvents(db.pool, { entity_type: 'movement', entity_id: stranded });
  assert.equal(audits.events.filter((a) => a.action === 'movement.ccip_stranded').length, 1);
  // The movement is not touched: the node keeps observing, nothing is sent again.
  assert.deepEqual((await db.pool.query(`SELECT id, node_state, row_version FROM request_nodes ORDER BY id`)).rows, before.rows);
  // Another executor's node with the same age is not the CCIP lane's.
  assert.equal((await runCcipStrandedReaper({ ...deps, executorKey: 'exec.observe.usdt0_credit' }, { batchSize: 50, maxRunMs: 0 })).surfaced, 0);
});

test('the reaper is the CCIP lane\'s core worker, on only with a ccip section', async () => {
  const worker = laneNamed('ccip')!.coreWorkers?.find((w) => w.name === 'ccip_stranded_reaper');
  assert.ok(worker);
  assert.equal(worker.variables.enabled, 'FERRY_CCIP_STRANDED_REAPER_ENABLED');
  assert.equal(worker.configured({ file: {} } as never), false);
  assert.equal(await worker.run({ pool: null as never, config: { file: {} } as never, log }, { batchSize: 1 }), 0);
});
