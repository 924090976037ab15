import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InvalidTemplateError } from '../src/errors.ts';
import { withTransaction } from '../src/persistence/db.ts';
import {
  getTemplate,
  getTemplateVersion,
  getTemplateVersionById,
  listTemplates,
  listTemplateVersions,
  saveTemplate,
} from '../src/persistence/templates.ts';
import { compilePlan, graphHash } from '../src/plan/compile.ts';
import { parseTemplateDefinition, type TemplateDefinition } from '../src/plan/template-schema.ts';
import { testDatabase } from './helpers/db.ts';

const { pool } = await testDatabase();

function bridge(key: string, overrides: (d: TemplateDefinition) => void = () => {}): TemplateDefinition {
  const d = parseTemplateDefinition({
    template_key: key,
    description: 'burn, attest, mint',
    nodes: [
      {
        node_key: 'mint',
        node_kind: 'action',
        action_type: 'cctp_mint',
        executor_binding: { executor_key: 'exec.cctp.mint', chain: 'base' },
        signer_binding: 'signer.local',
        config: { message: '$ref:attest.message', attestation: '$ref:attest.attestation' },
        timeout_policy: { observe_seconds: 900 },
      },
      { node_key: 'burn', node_kind: 'action', action_type: 'cctp_burn', executor_binding: 'exec.cctp.burn', retryable: true },
      {
        node_key: 'attest',
        node_kind: 'observe',
        action_type: 'cctp_attestation',
        executor_binding: 'exec.cctp.attest',
        config: { tx: '$ref:burn.txid' },
      },
    ],
    edges: [
      { from: 'burn', to: 'attest' },
      { from: 'attest', to: 'mint' },
    ],
    risk_controls: { max_amount: '10000' },
  });
  overrides(d);
  return d;
}

const save = (d: TemplateDefinition, by = 'alice') => withTransaction(pool, (client) => saveTemplate(client, d, by));

async function count(sql: string, params: unknown[] = []): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM (${sql}) AS q`, params);
  return rows[0].n;
}

test('saving a template writes version 1 with its nodes, edges and definition', async () => {
  const d = bridge('cctp.v1');
  const first = await save(d);
  assert.equal(first.created, true);
  assert.equal(first.template.template_key, 'cctp.v1');
  assert.equal(first.template.latest_version, 1);
  assert.equal(first.template.description, 'burn, attest, mint');
  assert.equal(first.template.created_by, 'alice');

  const v = first.version;
  assert.equal(v.version, 1);
  assert.equal(v.template_key, 'cctp.v1');
  assert.equal(v.template_id, first.template.id);
  assert.equal(v.graph_hash, graphHash(d));
  assert.deepEqual(v.risk_controls, { max_amount: '10000' });
  assert.equal(v.created_by, 'alice');
  assert.ok(v.created_at instanceof Date);
  // Positions follow the topological order, not the order nodes were written in.
  assert.deepEqual(
    v.nodes.map((n) => [n.node_key, n.position]),
    [
      ['burn', 0],
      ['attest', 1],
      ['mint', 2],
    ],
  );
  const byKey = Object.fromEntries(v.nodes.map((n) => [n.node_key, n]));
  assert.equal(byKey.burn.retryable, true);
  assert.equal(byKey.mint.retryable, false);
  assert.deepEqual(byKey.mint.executor_binding, { executor_key: 'exec.cctp.mint', chain: 'base' });
  assert.equal(byKey.burn.executor_binding, 'exec.cctp.burn');
  assert.equal(byKey.mint.signer_binding, 'signer.local');
  assert.equal(byKey.burn.signer_binding, null);
  assert.deepEqual(byKey.mint.timeout_policy, { observe_seconds: 900 });
  assert.deepEqual(byKey.burn.config, {});
  assert.match(byKey.burn.plan_node_id, /^[0-9a-f-]{36}$/);
  assert.deepEqual(v.edges, [
    { from: 'attest', to: 'mint' },
    { from: 'burn', to: 'attest' },
  ]);

  const { rows } = await pool.query('SELECT definition, (SELECT signer_binding IS NULL FROM plan_nodes WHERE template_version_id = $1 AND node_key = $2) AS null_signer FROM template_versions WHERE id = $1', [v.id, 'burn']);
  assert.deepEqual(rows[0].definition, JSON.parse(JSON.stringify(d)));
  assert.equal(rows[0].null_signer, true, 'an absent signer binding is SQL NULL, not JSON null');
});

test('the same graph does not make a new version; a changed graph does; description alone does not', async () => {
  const v1 = await save(bridge('cctp.versions'));
  assert.equal(v1.created, true);

  // Same graph, written with keys and nodes in another order.
  const again = await save(bridge('cctp.versions', (d) => d.nodes.reverse()), 'bob');
  assert.equal(again.created, false);
  assert.equal(again.version.id, v1.version.id);
  assert.equal(again.version.version, 1);
  assert.equal(again.version.created_by, 'alice');
  assert.deepEqual(again.timeout_policy_not_applied, []);

  const described = await save(bridge('cctp.versions', (d) => (d.description = 'new wording')));
  assert.equal(described.created, false);
  assert.equal(described.version.version, 1);
  assert.equal(described.template.description, 'new wording');
  assert.equal((await getTemplate(pool, 'cctp.versions'))!.description, 'new wording');

  // timeout_policy is outside the graph hash: no new version, and the caller is told it was not applied.
  const retimed = await save(
    bridge('cctp.versions', (d) => {
      d.nodes[0].timeout_policy = { observe_seconds: 60 };
      delete d.description;
    }),
  );
  assert.equal(retimed.created, false);
  assert.deepEqual(retimed.timeout_policy_not_applied, ['mint']);
  assert.deepEqual(retimed.version.nodes.find((n) => n.node_key === 'mint')!.timeout_policy, { observe_seconds: 900 });

  // A definition without a description leaves the stored one alone.
  const changed = await save(
    bridge('cctp.versions', (d) => {
      d.nodes[1].retryable = false;
      delete d.description;
    }),
  );
  assert.equal(changed.created, true);
  assert.equal(changed.version.version, 2);
  assert.notEqual(changed.version.graph_hash, v1.version.graph_hash);
  assert.equal(changed.template.latest_version, 2);
  assert.equal(changed.template.description, 'new wording');

  // Going back to the first graph finds version 1 again; the latest stays 2.
  const back = await save(bridge('cctp.versions'));
  assert.equal(back.created, false);
  assert.equal(back.version.version, 1);
  assert.equal(back.template.latest_version, 2);
  assert.equal(await count('SELECT 1 FROM template_versions tv JOIN plan_templates pt ON pt.id = tv.template_id WHERE pt.template_key = $1', ['cctp.versions']), 2);
});

test('getTemplateVersion returns the latest, a specific version, or null', async () => {
  await save(bridge('cctp.lookup'));
  const v2 = await save(bridge('cctp.lookup', (d) => (d.risk_controls = { max_amount: '5' })));

  const latest = await getTemplateVersion(pool, 'cctp.lookup');
  assert.equal(latest!.version, 2);
  assert.equal(latest!.id, v2.version.id);
  assert.deepEqual(latest!.risk_controls, { max_amount: '5' });
  const first = await getTemplateVersion(pool, 'cctp.lookup', 1);
  assert.equal(first!.version, 1);
  assert.deepEqual(first!.risk_controls, { max_amount: '10000' });
  assert.equal(await getTemplateVersion(pool, 'cctp.lookup', 3), null);
  assert.equal(await getTemplateVersion(pool, 'no.such.template'), null);
  assert.equal(await getTemplateVersion(pool, 'no.such.template', 1), null);

  assert.deepEqual(await getTemplateVersionById(pool, v2.version.id), latest);
  assert.equal(await getTemplateVersionById(pool, '00000000-0000-0000-0000-000000000000'), null);

  assert.deepEqual(
    (await listTemplateVersions(pool, 'cctp.lookup')).map((v) => v.version),
    [2, 1],
  );
  assert.deepEqual(await listTemplateVersions(pool, 'no.such.template'), []);
  assert.equal(await getTemplate(pool, 'no.such.template'), null);
  const listed = (await listTemplates(pool)).find((t) => t.template_key === 'cctp.lookup');
  assert.equal(listed!.latest_version, 2);
  assert.equal(listed!.description, 'burn, attest, mint');
  const keys = (await listTemplates(pool)).map((t) => t.template_key);
  assert.deepEqual(keys, [...keys].sort());
});

test('a stored version compiles to the same hash as the definition it came from', async () => {
  const { version } = await save(bridge('cctp.compile'));
  const plan = compilePlan(version, { amount: '5', asset: 'USDC' });
  assert.deepEqual(
    plan.nodes.map((n) => n.node_key),
    ['burn', 'attest', 'mint'],
  );
  assert.deepEqual(plan.initial_frontier, ['burn']);
  assert.equal(plan.nodes[0].plan_node_id, version.nodes[0].plan_node_id);
  assert.equal(plan.nodes[0].retryable, true);

  // A second save under another key has other row ids but the same graph: same hash for the same intent.
  const other = await save(bridge('cctp.compile.copy'));
  const copy = compilePlan({ ...other.version, template_key: 'cctp.compile' }, { asset: 'USDC', amount: '5' });
  assert.equal(copy.compiled_plan_hash, plan.compiled_plan_hash);
});

test('an invalid template is refused before anything is written', async () => {
  const cyclic = bridge('cctp.cyclic', (d) => d.edges.push({ from: 'mint', to: 'burn' }));
  await assert.rejects(save(cyclic), (e: unknown) => e instanceof InvalidTemplateError && e.details.rule === 'CYCLE');
  assert.equal(await getTemplate(pool, 'cctp.cyclic'), null);

  const catalog = { hasExecutor: (k: string) => k !== 'exec.cctp.attest', hasSigner: () => true };
  await assert.rejects(
    withTransaction(pool, (client) => saveTemplate(client, bridge('cctp.unbound'), 'alice', catalog)),
    (e: unknown) => e instanceof InvalidTemplateError && e.details.rule === 'UNKNOWN_EXECUTOR_BINDING' && /"attest"/.test(e.message),
  );
  assert.equal(await getTemplate(pool, 'cctp.unbound'), null);
  const saved = await withTransaction(pool, (client) =>
    saveTemplate(client, bridge('cctp.bound'), 'alice', { hasExecutor: () => true, hasSigner: () => true }),
  );
  assert.equal(saved.created, true);
});

test('ten concurrent saves of the same new graph create exactly one version', async () => {
  const results = await Promise.all(Array.from({ length: 10 }, (_, i) => save(bridge('cctp.race'), `writer-${i}`)));
  assert.equal(results.filter((r) => r.created).length, 1);
  assert.equal(new Set(results.map((r) => r.version.id)).size, 1);
  assert.ok(results.every((r) => r.version.version === 1));
  const versionId = results[0].version.id;
  assert.equal(await count('SELECT 1 FROM plan_templates WHERE template_key = $1', ['cctp.race']), 1);
  assert.equal(await count('SELECT 1 FROM template_versions WHERE template_id = $1', [results[0].template.id]), 1);
  assert.equal(await count('SELECT 1 FROM plan_nodes WHERE template_version_id = $1', [versionId]), 3);
  assert.equal(await count('SELECT 1 FROM plan_edges WHERE template_version_id = $1', [versionId]), 2);
});

test('ten concurrent saves of the same changed graph of an existing template create exactly one version', async () => {
  await save(bridge('cctp.race2'));
  const changed = () => bridge('cctp.race2', (d) => (d.risk_controls = { max_amount: '1' }));
  const results = await Promise.all(Array.from({ length: 10 }, () => save(changed())));
  assert.equal(results.filter((r) => r.created).length, 1);
  assert.ok(results.every((r) => r.version.version === 2 && r.version.id === results[0].version.id));
  assert.equal(await count('SELECT 1 FROM template_versions WHERE template_id = $1', [results[0].template.id]), 2);
});

test('concurrent saves of different graphs get consecutive version numbers', async () => {
  const results = await Promise.all(
    Array.from({ length: 8 }, (_, i) => save(bridge('cctp.many', (d) => (d.risk_controls = { max_amount: String(i + 1) })))),
  );
  assert.ok(results.every((r) => r.created));
  assert.deepEqual(
    results.map((r) => r.version.version).sort((a, b) => a - b),
    [1, 2, 3, 4, 5, 6, 7, 8],
  );
  assert.equal((await getTemplate(pool, 'cctp.many'))!.latest_version, 8);
});
