/**
 * The plan hash as an approver's tools recompute it: Ferry's canonical JSON is RFC 8785 (checked
 * against the `canonicalize` package, an independent JCS implementation), a lone surrogate is refused
 * by the canonicaliser itself, and compiled_plan_hash is the hash of the `hashed_plan` Ferry serves.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import canonicalize from 'canonicalize';
import { canonicalJson, NotJsonError, sha256Tagged } from '../src/plan/canonical-json.ts';
import { appForFile } from './helpers/app.ts';
import { callerFor, expectStatus } from './helpers/http.ts';
import { makeTemplateLive } from './helpers/templates.ts';
import { createTokens } from './helpers/tokens.ts';

// First, before any test starts: the runtime's stop hook must be registered while the file is set up.
const { db, app } = await appForFile({ FERRY_DATA_DIR: '.ferry/test-plan-canonical' }, { workers: false });
const tokens = await createTokens(db.pool, { requester: 'requester', approver: 'approver', operator: 'operator' });
const call = callerFor(app, tokens);
const template = {
  template_key: 'hashed-plan',
  nodes: [
    { node_key: 'a', node_kind: 'action', action_type: 'sim_action', executor_binding: 'exec.sim.action', config: { note: 'first' } },
    { node_key: 'b', node_kind: 'action', action_type: 'sim_action', executor_binding: 'exec.sim.action' },
  ],
  edges: [{ from: 'a', to: 'b' }],
};
await makeTemplateLive(app, db.pool, template, { proposer: tokens.operator.token, approver: tokens.approver.token });

/** What an approver's tool does with the served object: JCS, UTF-8, SHA-256, "sha256:" + hex. */
function recompute(value: unknown): string {
  return `sha256:${createHash('sha256').update(canonicalize(value)!, 'utf8').digest('hex')}`;
}

const values: unknown[] = [
  // RFC 8785 section 3.2.2's example, and its sorting example (section 3.2.3).
  { numbers: [333333333.33333329, 1e30, 4.5, 2e-3, 0.000000000000000000000000001], string: '\u20ac$\u000f\u000aA\'\u0042\u0022\u005c\\"\/', literals: [null, true, false] },
  { '\u20ac': 'Euro Sign', '\r': 'Carriage Return', '\ufb33': 'Hebrew Letter Dalet With Dagesh', '1': 'One', '\ud83d\ude00': 'Emoji: Grinning Face', '\u0080': 'Control', '\u00f6': 'Latin Small Letter O With Diaeresis' },
  // Numbers at the edges of ECMAScript's shortest form.
  [0, -0, 1, -1, 0.1, 1e21, 1e-7, 123456789012345680000, 5e-324, 1.7976931348623157e308, 9007199254740991, 0.000001],
  // Escapes, non-ASCII, nesting, empty containers.
  { a: { c: [1, { z: 'x', y: '\u0000\u001f\u007f\u2028\u2029' }], b: [] }, '': {}, A: 'é中😀' },
  'plain string',
  null,
  true,
];

test('canonical JSON is RFC 8785: the same bytes as the canonicalize package', () => {
  for (const v of values) assert.equal(canonicalJson(v), canonicalize(v), JSON.stringify(v));
  // The RFC's own expected output for its section 3.2.2 example.
  assert.equal(
    canonicalJson(values[0]),
    '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}',
  );
  assert.equal(sha256Tagged(values[3]), recompute(values[3]));
});

test('a lone surrogate is refused by the canonicaliser, in a value or a key', () => {
  for (const bad of ['\ud800', 'a\udc00b', '\udbff\ud800', 'end\ud83d']) {
    assert.throws(() => canonicalJson({ memo: bad }), (e: unknown) => e instanceof NotJsonError && /lone surrogate/.test(e.message) && e.path === '$.memo', JSON.stringify(bad));
    assert.throws(() => canonicalJson({ [bad]: 1 }), NotJsonError);
    assert.throws(() => sha256Tagged([bad]), NotJsonError);
  }
  assert.equal(canonicalJson('\ud83d\ude00'), '"😀"', 'a surrogate pair is one character and fine');
});

test('compiled_plan_hash is the hash of the served hashed_plan, recomputed with canonicalize; the hash approves', async () => {
  const intent = { amount: '12.5', route: { via: ['sim'], 'é': true }, note: 'Zürich 😀' };
  const preview = await call('POST', `/v3/templates/${template.template_key}/compile`, 'requester', { intent });
  expectStatus(preview, 200);
  assert.equal(recompute(preview.body.hashed_plan), preview.body.compiled_plan_hash, 'the compile preview');

  const created = await call('POST', '/v3/movements', 'requester', { template_key: template.template_key, intent });
  expectStatus(created, 201);
  const shown = await call('GET', `/v3/movements/${created.body.movement.id}`, 'approver');
  expectStatus(shown, 200);
  const m = shown.body.movement;
  assert.equal(m.compiled_plan_hash, preview.body.compiled_plan_hash, 'the same intent, the same hash');
  assert.equal(recompute(m.hashed_plan), m.compiled_plan_hash, 'the served object hashes to the served hash');
  assert.notEqual(recompute(m.compiled_plan), m.compiled_plan_hash, 'compiled_plan alone is not what is hashed');
  // What the object holds, as docs/templates.md says.
  assert.deepEqual(Object.keys(m.hashed_plan).sort(), ['graph_hash', 'input_params', 'intent', 'nodes', 'template_key', 'template_version']);
  assert.deepEqual(m.hashed_plan.intent, intent);
  assert.deepEqual(
    m.hashed_plan.nodes.map((n: unknown[]) => [n[0], n[6]]),
    [['a', []], ['b', ['a']]],
    '[node_key, node_kind, action_type, executor_binding, signer_binding, config, predecessors] in plan order',
  );
  assert.deepEqual(m.hashed_plan.nodes[0].slice(0, 6), ['a', 'action', 'sim_action', 'exec.sim.action', null, { note: 'first' }]);

  const approved = await call('POST', `/v3/movements/${m.id}/approve`, 'approver', { compiled_plan_hash: recompute(m.hashed_plan) });
  expectStatus(approved, 200);
});
