import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DEMO_AUTHOR, DEMO_TEMPLATE_KEY, demoTemplate, demoTemplateWanted, installDemoTemplate, setUpDemo } from '../src/demo/template.ts';
import { listTemplateVersions, getTemplateVersion } from '../src/persistence/templates.ts';
import { defaultRegistries } from '../src/actors/runtime.ts';
import { validateTemplate } from '../src/plan/validate.ts';
import { scratchDatabase } from './helpers/db.ts';
import { approvedMovement, backdateNodes, drain, runtimeDeps, snapshot } from './helpers/runtime.ts';

/** The demo template a first start installs: once, only when wanted, and it runs to completion. */

test('wanted on the embedded database by default, on an external one only when asked', () => {
  assert.equal(demoTemplateWanted({ demoTemplate: undefined }, 'embedded'), true);
  assert.equal(demoTemplateWanted({ demoTemplate: undefined }, 'external'), false);
  assert.equal(demoTemplateWanted({ demoTemplate: true }, 'external'), true);
  assert.equal(demoTemplateWanted({ demoTemplate: false }, 'embedded'), false);
});

test('installed once, even by processes starting together, and left alone afterwards', async (t) => {
  const db = await scratchDatabase(t);
  const results = await Promise.all(Array.from({ length: 5 }, () => installDemoTemplate(db.pool)));
  assert.equal(results.filter((r) => r === 'installed').length, 1);
  assert.equal(await installDemoTemplate(db.pool), 'present');
  const versions = await listTemplateVersions(db.pool, DEMO_TEMPLATE_KEY);
  assert.equal(versions.length, 1);
  assert.equal(versions[0].created_by, DEMO_AUTHOR);
});

test('FERRY_DEMO_TEMPLATE=false installs nothing; true installs on an external database', async (t) => {
  const db = await scratchDatabase(t);
  await setUpDemo({ pool: db.pool, config: { demoTemplate: false }, database: 'embedded' });
  assert.equal(await getTemplateVersion(db.pool, DEMO_TEMPLATE_KEY), null);
  await setUpDemo({ pool: db.pool, config: { demoTemplate: undefined }, database: 'external' });
  assert.equal(await getTemplateVersion(db.pool, DEMO_TEMPLATE_KEY), null);
  await setUpDemo({ pool: db.pool, config: { demoTemplate: true }, database: 'external' });
  assert.ok(await getTemplateVersion(db.pool, DEMO_TEMPLATE_KEY));
});

test('the demo is withdraw -> observe deposit -> sweep on the sim lane, and it completes', async (t) => {
  const def = demoTemplate();
  assert.equal(def.template_key, DEMO_TEMPLATE_KEY);
  assert.deepEqual(def.nodes.map((n) => [n.node_key, n.node_kind, n.executor_binding]), [
    ['withdraw', 'action', 'exec.sim.action'],
    ['observe_deposit', 'observe', 'exec.sim.observe'],
    ['sweep', 'action', 'exec.sim.action'],
  ]);
  const db = await scratchDatabase(t);
  const deps = runtimeDeps(db.pool);
  const { executors, signers } = defaultRegistries(db.pool);
  validateTemplate(def, { hasExecutor: (k) => executors.has(k), hasSigner: (k) => signers.has(k) });

  const id = await approvedMovement(deps, def);
  await drain(deps);
  // The simulated deposit is not there at the first look: its next look falls due a second later.
  assert.equal((await snapshot(db.pool, id)).byKey.observe_deposit.node_state, 'OBSERVING');
  await backdateNodes(db.pool, [id], 'next_observe_at', 5);
  await drain(deps);
  const s = await snapshot(db.pool, id);
  assert.equal(s.movement.request_state, 'COMPLETED');
  for (const key of ['withdraw', 'observe_deposit', 'sweep']) assert.equal(s.byKey[key].node_state, 'COMPLETED', key);
  // The deposit check went through the observer, so the visualizer shows it waiting on the provider.
  const { rows } = await db.pool.query(`SELECT to_state FROM transitions WHERE entity_id = $1 ORDER BY seq`, [s.byKey.observe_deposit.id]);
  assert.ok(rows.some((r) => r.to_state === 'SUBMITTED'));
  assert.ok(rows.some((r) => r.to_state === 'OBSERVING'));
});
