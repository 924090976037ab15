import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { FerryError, InvalidTemplateError, ValidationError } from '../src/errors.ts';
import { canonicalJson, sha256Tagged } from '../src/plan/canonical-json.ts';
import { compilePlan, executorKeyOf, graphHash, signerKeyOf, type TemplateVersionRecord } from '../src/plan/compile.ts';
import { parseTemplateDefinition, type TemplateDefinition } from '../src/plan/template-schema.ts';
import { validateTemplate, validateTemplateStructure, type BindingCatalog } from '../src/plan/validate.ts';

const run = promisify(execFile);

const catalog: BindingCatalog = {
  hasExecutor: (key) => key.startsWith('exec.'),
  hasSigner: (key) => key === 'signer.local',
};

function node(key: string, extra: Record<string, unknown> = {}) {
  return { node_key: key, node_kind: 'action', action_type: 'sim_transfer', executor_binding: 'exec.sim.action', ...extra };
}

function def(nodes: unknown[], edges: Array<[string, string]>, extra: Record<string, unknown> = {}): TemplateDefinition {
  return parseTemplateDefinition({ template_key: 'test.plan', nodes, edges: edges.map(([from, to]) => ({ from, to })), ...extra });
}

/** a -> b, a -> c, b -> d, c -> d; d reads a value from a (an ancestor, not a direct predecessor). */
function diamond(): TemplateDefinition {
  return def(
    [
      node('d', { node_kind: 'observe', action_type: 'finality', config: { tx: '$ref:a.txid', confirmations: 3 }, timeout_policy: { observe_seconds: 600 } }),
      node('c', { signer_binding: { signer_key: 'signer.local', chain: 'base' }, retryable: true }),
      node('b', { executor_binding: { executor_key: 'exec.cex.withdraw', exchange: 'upbit' } }),
      node('a', { config: { amount: '100' } }),
    ],
    [
      ['a', 'b'],
      ['a', 'c'],
      ['b', 'd'],
      ['c', 'd'],
    ],
    { risk_controls: { max_amount: '1000' } },
  );
}

/** An in-memory saved version, as the persistence layer would return it. */
function asVersion(d: TemplateDefinition, id = 'version-1'): TemplateVersionRecord {
  return {
    id,
    template_id: 'template-1',
    template_key: d.template_key,
    version: 1,
    graph_hash: graphHash(d),
    risk_controls: d.risk_controls ?? {},
    created_by: 'test',
    created_at: new Date(0),
    nodes: d.nodes.map((n, i) => ({
      plan_node_id: `node-${n.node_key}`,
      node_key: n.node_key,
      node_kind: n.node_kind,
      action_type: n.action_type,
      executor_binding: n.executor_binding as TemplateVersionRecord['nodes'][number]['executor_binding'],
      signer_binding: (n.signer_binding ?? null) as TemplateVersionRecord['nodes'][number]['signer_binding'],
      config: n.config ?? {},
      timeout_policy: n.timeout_policy ?? {},
      retryable: n.retryable,
      position: i,
    })),
    edges: d.edges,
  };
}

/** Asserts validation refuses d with rule, and that the message names every node in mentions. */
function assertRefused(d: TemplateDefinition, rule: string, mentions: string[], known: BindingCatalog = catalog): InvalidTemplateError {
  let caught: unknown;
  try {
    validateTemplate(d, known);
  } catch (e) {
    caught = e;
  }
  assert.ok(caught instanceof InvalidTemplateError, `expected InvalidTemplateError, got ${String(caught)}`);
  assert.equal(caught.code, 'INVALID_TEMPLATE');
  assert.equal(caught.httpStatus, 422);
  assert.equal(caught.details.rule, rule, caught.message);
  for (const m of mentions) assert.match(caught.message, new RegExp(`"${m}"|\\b${m}\\b`), `message should name ${m}: ${caught.message}`);
  return caught;
}

/** Rebuilds a value with every object's keys in reverse order. */
function reverseKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(reverseKeys);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).reverse().map(([k, v]) => [k, reverseKeys(v)]));
  }
  return value;
}

test('canonical JSON sorts keys at every depth, keeps array order and has no whitespace', () => {
  assert.equal(canonicalJson({ b: { d: 1, c: [3, 1, 2] }, a: 'x', u: undefined }), '{"a":"x","b":{"c":[3,1,2],"d":1}}');
  assert.equal(canonicalJson({ é: 1, z: 2, Z: 3, a: 4 }), '{"Z":3,"a":4,"z":2,"é":1}');
  const expected = 'sha256:' + createHash('sha256').update('{"a":[2,1],"b":{"c":null}}').digest('hex');
  assert.equal(sha256Tagged({ b: { c: null }, a: [2, 1] }), expected);
  assert.match(sha256Tagged({}), /^sha256:[0-9a-f]{64}$/);
  assert.throws(() => canonicalJson({ a: Number.NaN }), /\$\.a/);
  assert.throws(() => canonicalJson({ a: 1n }), TypeError);
  const deep = JSON.parse('['.repeat(500) + ']'.repeat(500));
  assert.throws(() => canonicalJson(deep), /nested more than/);
});

test('a cyclic plan is refused and the message walks the cycle', () => {
  const d = def([node('a'), node('b'), node('c'), node('start')], [
    ['start', 'a'],
    ['a', 'b'],
    ['b', 'c'],
    ['c', 'a'],
  ]);
  const err = assertRefused(d, 'CYCLE', ['a', 'b', 'c']);
  assert.match(err.message, /a -> b -> c -> a/);
  assert.deepEqual(err.details.node_keys, ['a', 'b', 'c']);
});

test('a $ref to a node that is not a predecessor is refused, naming both nodes', () => {
  const d = diamond();
  d.nodes.find((n) => n.node_key === 'c')!.config = { tx: '$ref:b.txid' };
  const err = assertRefused(d, 'REF_NOT_PREDECESSOR', ['c', 'b']);
  assert.match(err.message, /\$ref:b\.txid/);
  assert.deepEqual(err.details.node_keys, ['b', 'c']);

  // Downstream and missing nodes are not predecessors either; a transitive ancestor is fine.
  const down = diamond();
  down.nodes.find((n) => n.node_key === 'a')!.config = { tx: '$ref:d.txid' };
  assertRefused(down, 'REF_NOT_PREDECESSOR', ['a', 'd']);
  const missing = diamond();
  missing.nodes.find((n) => n.node_key === 'b')!.config = { tx: '$ref:ghost.txid' };
  assertRefused(missing, 'REF_NOT_PREDECESSOR', ['b', 'ghost']);
  const own = diamond();
  own.nodes.find((n) => n.node_key === 'b')!.config = { tx: '$ref:b.txid' };
  assertRefused(own, 'REF_NOT_PREDECESSOR', ['b']);
  assert.doesNotThrow(() => validateTemplate(diamond(), catalog));
});

test('malformed and nested references are refused as REF_MALFORMED', () => {
  for (const bad of ['$ref:a', '$ref:a.', '$ref:.txid', '$ref:a.tx id', '$ref:']) {
    const d = diamond();
    d.nodes.find((n) => n.node_key === 'd')!.config = { tx: bad };
    const err = assertRefused(d, 'REF_MALFORMED', ['d']);
    assert.match(err.message, /\$ref:<node_key>\.<field>/);
  }
  const nested = diamond();
  nested.nodes.find((n) => n.node_key === 'd')!.config = { route: { hops: ['$ref:a.txid'] } };
  const err = assertRefused(nested, 'REF_MALFORMED', ['d']);
  assert.match(err.message, /route\.hops\[0\]/);
  assert.match(err.message, /top-level/);
});

test('an unknown executor or signer binding is refused, naming the node and the key', () => {
  const d = diamond();
  d.nodes.find((n) => n.node_key === 'b')!.executor_binding = { executor_key: 'nope.withdraw', exchange: 'upbit' };
  const err = assertRefused(d, 'UNKNOWN_EXECUTOR_BINDING', ['b']);
  assert.match(err.message, /nope\.withdraw/);

  const s = diamond();
  s.nodes.find((n) => n.node_key === 'a')!.signer_binding = 'signer.kms';
  assertRefused(s, 'UNKNOWN_SIGNER_BINDING', ['a']);
  // The structural check alone does not consult the registries.
  assert.doesNotThrow(() => validateTemplateStructure(d));
});

test('a node without an executor binding is refused', () => {
  for (const binding of [undefined, null, '', '  ', { exchange: 'upbit' }]) {
    const d = diamond();
    d.nodes.find((n) => n.node_key === 'c')!.executor_binding = binding as never;
    assertRefused(d, 'MISSING_EXECUTOR_BINDING', ['c']);
  }
});

test('an empty plan is refused', () => {
  const err = assertRefused(def([], []), 'EMPTY_PLAN', ['test.plan']);
  assert.match(err.message, /no nodes/);
});

test('duplicate node keys are refused', () => {
  const err = assertRefused(def([node('a'), node('b'), node('a')], [['a', 'b']]), 'DUPLICATE_NODE_KEY', ['a']);
  assert.match(err.message, /2 times/);
});

test('an edge to an undefined node is refused', () => {
  const err = assertRefused(def([node('a'), node('b')], [['a', 'b'], ['b', 'zed']]), 'UNKNOWN_NODE_KEY', ['zed']);
  assert.match(err.message, /b -> zed/);
});

test('self edges and repeated edges are refused', () => {
  assertRefused(def([node('a'), node('b')], [['a', 'b'], ['b', 'b']]), 'SELF_EDGE', ['b']);
  assertRefused(def([node('a'), node('b')], [['a', 'b'], ['a', 'b']]), 'DUPLICATE_EDGE', ['a', 'b']);
});

test('a node cut off from the rest of the plan is refused', () => {
  const err = assertRefused(def([node('a'), node('b'), node('c'), node('lonely')], [['a', 'b'], ['b', 'c']]), 'UNREACHABLE', ['lonely']);
  assert.deepEqual(err.details.node_keys, ['lonely']);
  // Two separate chains: the smaller one is named.
  assertRefused(def([node('a'), node('b'), node('c'), node('x'), node('y')], [['a', 'b'], ['b', 'c'], ['x', 'y']]), 'UNREACHABLE', ['x', 'y']);
  // A single node on its own is a valid plan.
  assert.doesNotThrow(() => validateTemplate(def([node('only')], []), catalog));
});

test('every problem of a pass is listed in details.problems', () => {
  const d = def([node('a', { executor_binding: null }), node('a'), node('b', { config: { x: '$ref:nope' } })], [['a', 'b']]);
  const err = assertRefused(d, 'DUPLICATE_NODE_KEY', ['a']);
  const rules = (err.details.problems as Array<{ rule: string }>).map((p) => p.rule).sort();
  assert.deepEqual(rules, ['DUPLICATE_NODE_KEY', 'MISSING_EXECUTOR_BINDING', 'REF_MALFORMED']);
  assert.match(err.message, /2 more problems/);
});

test('the schema refuses unknown fields, bad keys and oversized input cleanly', () => {
  const base = { template_key: 'ok', nodes: [node('a')], edges: [] };
  const refuses = (input: unknown, path: RegExp) =>
    assert.throws(
      () => parseTemplateDefinition(input),
      (e: unknown) => e instanceof ValidationError && e.code === 'VALIDATION_FAILED' && path.test(e.message),
    );
  refuses({ ...base, colour: 'red' }, /colour/);
  refuses({ ...base, nodes: [{ ...node('a'), colour: 'red' }] }, /colour/);
  refuses({ ...base, edges: [{ from: 'a', to: 'b', weight: 1 }] }, /weight/);
  refuses({ ...base, template_key: 'Upper' }, /template_key/);
  refuses({ ...base, nodes: [node('a.b')] }, /node_key/);
  refuses({ ...base, nodes: [node('a', { node_kind: 'teleport' })] }, /node_kind/);
  refuses({ ...base, nodes: [node('a', { retryable: 'yes' })] }, /retryable/);
  refuses({ ...base, nodes: Array.from({ length: 201 }, (_, i) => node(`n${i}`)) }, /200/);
  refuses({ ...base, nodes: [node('a', { config: { x: JSON.parse('['.repeat(10_000) + ']'.repeat(10_000)) } })] }, /nested/);
  refuses({ ...base, nodes: [node('a', { config: { x: Number.NaN } })] }, /config/);
  refuses('not an object', /root/);

  const parsed = parseTemplateDefinition({ template_key: 'ok', nodes: [node('a')] });
  assert.equal(parsed.nodes[0].retryable, false);
  assert.deepEqual(parsed.edges, []);
});

test('binding keys are read from strings and objects', () => {
  assert.equal(executorKeyOf('exec.sim.action'), 'exec.sim.action');
  assert.equal(executorKeyOf({ executor_key: 'exec.cex', mode: 'live' }), 'exec.cex');
  assert.equal(executorKeyOf({ mode: 'live' }), null);
  assert.equal(signerKeyOf(null), null);
  assert.equal(signerKeyOf(undefined), null);
  assert.equal(signerKeyOf({ signer_key: 'signer.local' }), 'signer.local');
});

test('a diamond compiles in deterministic topological order with frontier, predecessors and successors', () => {
  const plan = compilePlan(asVersion(diamond()), { asset: 'USDC', amount: '100' }, { note: 'x' }, catalog);
  assert.deepEqual(
    plan.nodes.map((n) => n.node_key),
    ['a', 'b', 'c', 'd'],
  );
  assert.deepEqual(plan.initial_frontier, ['a']);
  const byKey = Object.fromEntries(plan.nodes.map((n) => [n.node_key, n]));
  assert.deepEqual(byKey.a.predecessors, []);
  assert.deepEqual(byKey.a.successors, ['b', 'c']);
  assert.deepEqual(byKey.d.predecessors, ['b', 'c']);
  assert.deepEqual(byKey.d.successors, []);
  assert.equal(byKey.c.retryable, true);
  assert.equal(byKey.a.retryable, false);
  assert.deepEqual(byKey.c.signer_binding, { signer_key: 'signer.local', chain: 'base' });
  assert.equal(byKey.a.signer_binding, null);
  assert.deepEqual(byKey.d.timeout_policy, { observe_seconds: 600 });
  assert.equal(byKey.b.plan_node_id, 'node-b');
  assert.equal(plan.template_key, 'test.plan');
  assert.equal(plan.template_version, 1);
  assert.equal(plan.template_version_id, 'version-1');
  assert.deepEqual(plan.risk_controls, { max_amount: '1000' });
  assert.match(plan.compiled_plan_hash, /^sha256:[0-9a-f]{64}$/);
  assert.equal(plan.graph_hash, graphHash(diamond()));

  // Ties go to the smaller key, whatever the order nodes were written in.
  const wide = compilePlan(
    asVersion(def([node('z'), node('m'), node('b'), node('a')], [['z', 'a'], ['m', 'a'], ['b', 'z']])),
    {},
  );
  assert.deepEqual(
    wide.nodes.map((n) => n.node_key),
    ['b', 'm', 'z', 'a'],
  );
  assert.deepEqual(wide.initial_frontier, ['b', 'm']);
  // A node unblocked later still goes before a waiting node with a larger key.
  const late = compilePlan(asVersion(def([node('x'), node('m'), node('b'), node('a')], [['b', 'a'], ['a', 'x'], ['m', 'x']])), {});
  assert.deepEqual(
    late.nodes.map((n) => n.node_key),
    ['b', 'a', 'm', 'x'],
  );
});

test('the graph hash ignores key order, node order, description and timeout_policy, and nothing else', () => {
  const base = graphHash(diamond());
  const shuffled = parseTemplateDefinition(reverseKeys({ ...diamond(), nodes: [...diamond().nodes].reverse(), edges: [...diamond().edges].reverse() }));
  assert.equal(graphHash(shuffled), base);

  const retimed = diamond();
  retimed.nodes.forEach((n) => (n.timeout_policy = { observe_seconds: 5 }));
  retimed.description = 'new words';
  assert.equal(graphHash(retimed), base);

  const changes: Array<(d: TemplateDefinition) => void> = [
    (d) => (d.nodes[0].config = { ...d.nodes[0].config, confirmations: 4 }),
    (d) => (d.nodes[0].action_type = 'other'),
    (d) => (d.nodes[1].retryable = false),
    (d) => (d.nodes[1].signer_binding = null),
    (d) => (d.nodes[2].executor_binding = 'exec.cex.withdraw'),
    (d) => (d.risk_controls = { max_amount: '999' }),
    (d) => d.edges.pop(),
  ];
  for (const change of changes) {
    const d = diamond();
    change(d);
    assert.notEqual(graphHash(d), base, String(change));
  }
});

test('the compiled plan hash depends on intent and params, not on key order or timeouts', () => {
  const intent = { asset: 'USDC', amount: '100', route: { from: 'base', to: 'arbitrum' } };
  const a = compilePlan(asVersion(diamond()), intent, { slippage_bps: 5 });
  const b = compilePlan(asVersion(diamond(), 'another-id'), reverseKeys(intent) as typeof intent, { slippage_bps: 5 });
  assert.equal(a.compiled_plan_hash, b.compiled_plan_hash);

  const retimed = diamond();
  retimed.nodes.forEach((n) => (n.timeout_policy = { observe_seconds: 1 }));
  assert.equal(compilePlan(asVersion(retimed), intent, { slippage_bps: 5 }).compiled_plan_hash, a.compiled_plan_hash);

  assert.notEqual(compilePlan(asVersion(diamond()), { ...intent, amount: '101' }, { slippage_bps: 5 }).compiled_plan_hash, a.compiled_plan_hash);
  assert.notEqual(compilePlan(asVersion(diamond()), intent, { slippage_bps: 6 }).compiled_plan_hash, a.compiled_plan_hash);
  assert.notEqual(compilePlan({ ...asVersion(diamond()), version: 2 }, intent, { slippage_bps: 5 }).compiled_plan_hash, a.compiled_plan_hash);
});

test('compiling refuses bad intents and versions whose stored graph drifted', () => {
  assert.throws(() => compilePlan(asVersion(diamond()), [] as never), (e: unknown) => e instanceof FerryError && e.code === 'VALIDATION_FAILED');
  assert.throws(() => compilePlan(asVersion(diamond()), { amount: Number.POSITIVE_INFINITY }), /intent/);
  assert.throws(() => compilePlan(asVersion(diamond()), {}, { when: new Date() }), /input_params/);

  const drifted = asVersion(diamond());
  drifted.nodes[0].config = { tx: '$ref:a.txid', confirmations: 0 };
  assert.throws(
    () => compilePlan(drifted, {}),
    (e: unknown) => e instanceof InvalidTemplateError && e.details.rule === 'GRAPH_HASH_DRIFT',
  );
  const unregistered = asVersion(diamond());
  assert.throws(
    () => compilePlan(unregistered, {}, {}, { hasExecutor: () => false, hasSigner: () => true }),
    (e: unknown) => e instanceof InvalidTemplateError && e.details.rule === 'UNKNOWN_EXECUTOR_BINDING',
  );
});

test('the same template and intent give the same hash in separate processes', async () => {
  const compileUrl = new URL('../src/plan/compile.ts', import.meta.url).href;
  const schemaUrl = new URL('../src/plan/template-schema.ts', import.meta.url).href;
  // The child builds the version the same way asVersion does, from JSON given on the command line.
  const script = `
    const { compilePlan, graphHash } = await import(${JSON.stringify(compileUrl)});
    const { parseTemplateDefinition } = await import(${JSON.stringify(schemaUrl)});
    const [defJson, intentJson] = process.argv.slice(-2);
    const d = parseTemplateDefinition(JSON.parse(defJson));
    const version = { id: 'v', template_id: 't', template_key: d.template_key, version: 1, graph_hash: graphHash(d),
      risk_controls: d.risk_controls ?? {}, created_by: 'x', created_at: new Date(0), edges: d.edges,
      nodes: d.nodes.map((n, i) => ({ plan_node_id: 'p' + process.pid + i, node_key: n.node_key, node_kind: n.node_kind,
        action_type: n.action_type, executor_binding: n.executor_binding, signer_binding: n.signer_binding ?? null,
        config: n.config ?? {}, timeout_policy: n.timeout_policy ?? {}, retryable: n.retryable, position: i })) };
    process.stdout.write(compilePlan(version, JSON.parse(intentJson), {}).compiled_plan_hash);
  `;
  const intent = { asset: 'USDC', amount: '100', destination: { chain: 'base', address: '0xabc' } };
  const hashIn = async (defValue: unknown, intentValue: unknown) => {
    const { stdout } = await run(process.execPath, [
      '--import',
      'tsx',
      '--input-type=module',
      '--eval',
      script,
      JSON.stringify(defValue),
      JSON.stringify(intentValue),
    ]);
    return stdout.trim();
  };
  const [first, second] = await Promise.all([hashIn(diamond(), intent), hashIn(reverseKeys(diamond()), reverseKeys(intent))]);
  const here = compilePlan(asVersion(diamond()), intent, {}).compiled_plan_hash;
  assert.match(first, /^sha256:[0-9a-f]{64}$/);
  assert.equal(first, second);
  assert.equal(first, here);
});
