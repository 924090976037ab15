/**
 * Intents are typed by their template: a template's intent schema is validated and hashed with the
 * plan, every intent is checked against it (and against the tokens the nodes fix) when a movement
 * is created, over the API and the movement queue alike, and a number JSON would round is refused
 * where the body is read instead of being stored as another number.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { consumeMovementRequest, ensureMovementQueues } from '../src/queue/movement-queue.ts';
import { planNodeFields } from '../src/plan/compile.ts';
import { compileOptionsOf } from '../src/services/movements.ts';
import { compilePlan, compiledPlanHash, graphHash } from '../src/plan/compile.ts';
import { inexactNumbers, isExact } from '../src/plan/exact-json.ts';
import { parseTemplateDefinition } from '../src/plan/template-schema.ts';
import type { TemplateVersionRecord } from '../src/plan/types.ts';
import { tokenIntentSchema, usdcTransferTemplate } from '../scripts/sandbox/templates.ts';
import { demoTemplate } from '../src/demo/template.ts';
import { appForFile } from './helpers/app.ts';
import { callApi, expectStatus, type Reply } from './helpers/http.ts';
import { makeTemplateLive } from './helpers/templates.ts';
import { createTokens } from './helpers/tokens.ts';

const { db, config, runtime, app } = await appForFile(
  { FERRY_DATA_DIR: '.ferry/test-intent-schema', FERRY_CALLBACK_SECRET: 'intent-schema-secret-0123456789' },
  { workers: false },
);
const tokens = await createTokens(db.pool, { requester: 'requester', approver: 'approver', operator: 'operator', viewer: 'viewer' });
const call = (method: string, path: string, who: keyof typeof tokens, body?: unknown): Promise<Reply> => callApi(app, method, path, tokens[who].token, body);
const live = (def: unknown) => makeTemplateLive(app, db.pool, def, { proposer: tokens.operator.token, approver: tokens.approver.token });

/** A raw body, for numbers JSON.stringify could not even write. */
async function postRaw(path: string, text: string): Promise<Reply> {
  const res = await app.request(path, {
    method: 'POST',
    headers: { authorization: `Bearer ${tokens.requester.token}`, 'content-type': 'application/json' },
    body: text,
  });
  const body = await res.text();
  return { status: res.status, text: body, body: body ? JSON.parse(body) : null };
}

const RECIPIENT = '0x' + 'ab'.repeat(20);
// The sandbox's usdc.transfer, on the simulation lane: the node still fixes USDC (config.token).
const simTransfer = (key: string, withSchema: boolean) => ({
  template_key: key,
  nodes: [
    { node_key: 'transfer', node_kind: 'action', action_type: 'erc20_transfer', executor_binding: 'exec.sim.action', config: { token: 'USDC', decimals: 6 } },
    { node_key: 'finality', node_kind: 'observe', action_type: 'chain_finality', executor_binding: 'exec.sim.observe', config: { tx_hash: '$ref:transfer.tx_hash' } },
  ],
  edges: [{ from: 'transfer', to: 'finality' }],
  ...(withSchema ? { intent_schema: tokenIntentSchema('USDC', 6, { destination: true }) } : {}),
});
await live(simTransfer('usdc.transfer', true));
await live(simTransfer('usdc.unschemed', false));

const movementCount = async () => (await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM movement_requests')).rows[0]!.n;

function expectRefused(r: Reply, code: string, field: string, rule: string, what: string): void {
  assert.equal(r.status, 422, `${what}: ${r.text}`);
  assert.equal(r.body.error.code, code, what);
  assert.equal(r.body.error.details.field, field, what);
  assert.equal(r.body.error.details.rule, rule, what);
}

test('the seven bad intents of the trial are each refused at creation, naming the field and the rule', async () => {
  const good = { asset: 'USDC', amount: '1', destination: { address: RECIPIENT } };
  const cases: Array<[string, Record<string, unknown>, string, string]> = [
    ['no destination', { asset: 'USDC', amount: '1' }, 'destination', 'required'],
    ['a negative amount', { ...good, amount: '-5' }, 'amount', 'format'],
    ['an amount that is not a number', { ...good, amount: 'abc' }, 'amount', 'format'],
    ['7 decimals on a 6-decimal token', { ...good, amount: '1.1234567' }, 'amount', 'decimals'],
    ['more than the template lets one movement move', { ...good, amount: '5000000' }, 'amount', 'max'],
    ['a short address', { ...good, destination: { address: '0x1234' } }, 'destination', 'format'],
    ['DAI on the usdc.transfer template', { ...good, asset: 'DAI' }, 'asset', 'allowed'],
  ];
  const before = await movementCount();
  for (const [what, intent, field, rule] of cases) {
    const r = await call('POST', '/v3/movements', 'requester', { template_key: 'usdc.transfer', intent });
    expectRefused(r, 'INTENT_INVALID', field, rule, what);
    assert.match(r.body.error.message, new RegExp(field), what);
    // The compile preview answers the same before anyone creates anything.
    const preview = await call('POST', '/v3/templates/usdc.transfer/compile', 'viewer', { intent });
    expectRefused(preview, 'INTENT_INVALID', field, rule, `${what} (preview)`);
  }
  assert.equal(await movementCount(), before, 'nothing was created, so nothing could be approved');
});

test('the other rules: zero, below the minimum, a bad checksum, the zero address, unknown fields, a JSON number amount', async () => {
  const good = { asset: 'USDC', amount: '1', destination: RECIPIENT };
  const mixed = '0x' + 'aB'.repeat(20);
  const cases: Array<[Record<string, unknown>, string, string]> = [
    [{ ...good, amount: '0' }, 'amount', 'positive'],
    [{ ...good, amount: '0.001' }, 'amount', 'min'],
    [{ ...good, amount: '01' }, 'amount', 'format'],
    [{ ...good, amount: '1e3' }, 'amount', 'format'],
    [{ ...good, amount: 1.5 }, 'amount', 'type'],
    [{ ...good, amount: 2 }, 'amount', 'type'],
    [{ ...good, destination: mixed }, 'destination', 'checksum'],
    [{ ...good, destination: '0x' + '0'.repeat(40) }, 'destination', 'zero_address'],
    [{ ...good, destination: { address: RECIPIENT, memo: 'x' } }, 'destination.memo', 'unknown_field'],
    [{ ...good, network: 'BSC' }, 'network', 'unknown_field'],
    [{ ...good, asset: 'usdc' }, 'asset', 'allowed'],
  ];
  for (const [intent, field, rule] of cases) {
    const r = await call('POST', '/v3/movements', 'requester', { template_key: 'usdc.transfer', intent });
    expectRefused(r, 'INTENT_INVALID', field, rule, JSON.stringify(intent));
  }
  const asNumber = await call('POST', '/v3/movements', 'requester', { template_key: 'usdc.transfer', intent: { ...good, amount: 1.5 } });
  assert.match(asNumber.body.error.details.hint, /decimal strings/);
  assert.ok(asNumber.body.error.details.problems.length >= 1);
});

test('a valid intent is accepted and its amount is stored, shown and hashed exactly as sent', async () => {
  const intent = { asset: 'USDC', amount: '999999.999999', destination: { address: RECIPIENT.toUpperCase().replace('0X', '0x') } };
  const preview = await call('POST', '/v3/templates/usdc.transfer/compile', 'viewer', { intent });
  expectStatus(preview, 200);
  const created = await call('POST', '/v3/movements', 'requester', { template_key: 'usdc.transfer', intent });
  expectStatus(created, 201);
  const shown = await call('GET', `/v3/movements/${created.body.movement.id}`, 'viewer');
  assert.deepEqual(shown.body.movement.intent, intent);
  assert.equal(shown.body.movement.compiled_plan_hash, preview.body.compiled_plan_hash);
  const stored = await db.pool.query<{ amount: string }>(`SELECT intent->>'amount' AS amount FROM movement_requests WHERE id = $1`, [created.body.movement.id]);
  assert.equal(stored.rows[0]!.amount, '999999.999999');
});

test('a node bound to USDC refuses an intent for DAI even without a schema; the same intent for USDC passes', async () => {
  const dai = await call('POST', '/v3/movements', 'requester', { template_key: 'usdc.unschemed', intent: { asset: 'DAI', amount: '1', destination: RECIPIENT } });
  expectRefused(dai, 'INTENT_INVALID', 'asset', 'asset_binding_mismatch', 'DAI on a USDC node');
  assert.equal(dai.body.error.details.node_key, 'transfer');
  assert.equal(dai.body.error.details.bound_token, 'USDC');
  const usdc = await call('POST', '/v3/movements', 'requester', { template_key: 'usdc.unschemed', intent: { asset: 'USDC', amount: '1', destination: RECIPIENT } });
  expectStatus(usdc, 201);
  // Without a schema the rest of today's behaviour stays: fields the executors do not read pass.
  const extra = await call('POST', '/v3/movements', 'requester', { template_key: 'usdc.unschemed', intent: { asset: 'USDC', amount: '1', note: 'x' } });
  expectStatus(extra, 201);
});

test('12345678901234567890 as a JSON number is refused naming the field; as a string it is kept exactly', async () => {
  const before = await movementCount();
  const asNumber = await postRaw('/v3/movements', '{"template_key":"usdc.unschemed","intent":{"asset":"USDC","amount":"1","reference":12345678901234567890}}');
  expectRefused(asNumber, 'INEXACT_NUMBER', 'intent.reference', 'inexact_number', 'the big integer');
  assert.equal(asNumber.body.error.details.source, '12345678901234567890');
  const amountNumber = await postRaw('/v3/movements', '{"template_key":"usdc.unschemed","intent":{"asset":"USDC","amount":12345678901234567890}}');
  expectRefused(amountNumber, 'INEXACT_NUMBER', 'intent.amount', 'inexact_number', 'the big amount');
  const float = await postRaw('/v3/movements', '{"template_key":"usdc.unschemed","intent":{"asset":"USDC","amount":"1"},"input_params":{"rate":0.10000000000000000001}}');
  expectRefused(float, 'INEXACT_NUMBER', 'input_params.rate', 'inexact_number', 'a float with more digits than a double');
  // A float amount is refused even on a template without a schema: amounts are decimal strings.
  const floatAmount = await postRaw('/v3/movements', '{"template_key":"usdc.unschemed","intent":{"asset":"USDC","amount":1.5}}');
  expectRefused(floatAmount, 'INTENT_INVALID', 'amount', 'type', 'a float amount');
  assert.equal(await movementCount(), before);

  const intent = { asset: 'USDC', amount: '12345678901234567890', reference: '12345678901234567890' };
  const created = await postRaw('/v3/movements', JSON.stringify({ template_key: 'usdc.unschemed', intent }));
  expectStatus(created, 201);
  assert.ok(created.text.includes('"amount":"12345678901234567890"'), 'answered as sent');
  const shown = await call('GET', `/v3/movements/${created.body.movement.id}`, 'viewer');
  assert.deepEqual(shown.body.movement.intent, intent);
  const row = (await db.pool.query(`SELECT intent, compiled_plan FROM movement_requests WHERE id = $1`, [created.body.movement.id])).rows[0];
  assert.deepEqual(row.intent, intent, 'stored as sent');
  const plan = row.compiled_plan;
  assert.equal(compiledPlanHash(plan, intent, {}), shown.body.movement.compiled_plan_hash, 'hashed over the exact string');
  assert.notEqual(compiledPlanHash(plan, { ...intent, amount: '12345678901234567000' }, {}), shown.body.movement.compiled_plan_hash);
  // Exact numbers still pass: 0.1 is what it says once parsed, and so is 2^53-1.
  const exact = await postRaw('/v3/movements', '{"template_key":"usdc.unschemed","intent":{"asset":"USDC","amount":"1"},"input_params":{"rate":0.1,"max":9007199254740991,"big":1e2}}');
  expectStatus(exact, 201);
});

test('a template whose intent schema is wrong is refused with the rule and a clear message', async () => {
  const withSchema = (intent_schema: unknown, key = 'bad.schema') => ({ ...simTransfer(key, false), intent_schema });
  const cases: Array<[unknown, number, string, RegExp]> = [
    [{ fields: { amount: { type: 'amount', decimals: 6, min: '10', max: '1' } } }, 422, 'INTENT_SCHEMA_INVALID', /min "10" above max "1"/],
    [{ fields: { amount: { type: 'amount', decimals: 2, min: '0.001' } } }, 422, 'INTENT_SCHEMA_INVALID', /more fractional digits/],
    [{ fields: { asset: { type: 'asset', allowed: ['USDC'] }, amount: { type: 'amount', decimals: { DAI: 18 } } } }, 422, 'INTENT_SCHEMA_INVALID', /one entry per allowed asset/],
    [{ fields: { a: { type: 'asset', allowed: ['USDC'] }, b: { type: 'asset', allowed: ['USDC'] } } }, 422, 'INTENT_SCHEMA_INVALID', /2 asset fields/],
    [{ fields: { asset: { type: 'asset', allowed: ['DAI'] } } }, 422, 'ASSET_BINDING_MISMATCH', /bound to USDC/],
    [{ fields: { amount: { type: 'money' } } }, 400, 'VALIDATION_FAILED', /intent_schema/],
    [{ fields: { amount: { type: 'amount', decimals: 6, min: '-1' } } }, 400, 'VALIDATION_FAILED', /intent_schema/],
    [{ fields: {} }, 400, 'VALIDATION_FAILED', /1 to 50 fields/],
    [{ fields: { destination: { type: 'evm_address', strict: true } } }, 400, 'VALIDATION_FAILED', /intent_schema/],
  ];
  for (const [schema, status, rule, message] of cases) {
    const r = await call('POST', '/v3/templates', 'operator', withSchema(schema));
    assert.equal(r.status, status, `${JSON.stringify(schema)}: ${r.text}`);
    if (status === 422) {
      assert.equal(r.body.error.code, 'INVALID_TEMPLATE');
      assert.equal(r.body.error.details.rule, rule, JSON.stringify(schema));
    }
    assert.match(r.body.error.message, message, JSON.stringify(schema));
  }
});

test('a proposal that adds a schema shows it in its diff, and the schema takes effect once the version is live', async () => {
  await live(simTransfer('diff.schema', false));
  const loose = await call('POST', '/v3/movements', 'requester', { template_key: 'diff.schema', intent: { asset: 'USDC', amount: '1', memo: 'x' } });
  expectStatus(loose, 201);
  const posted = await call('POST', '/v3/templates', 'operator', simTransfer('diff.schema', true));
  assert.equal(posted.status, 202, posted.text);
  const shown = await call('GET', `/v3/template-proposals/${posted.body.proposal.id}`, 'viewer');
  assert.equal(shown.body.diff.intent_schema.from, null);
  assert.deepEqual(Object.keys(shown.body.diff.intent_schema.to.fields).sort(), ['amount', 'asset', 'destination']);
  await live(simTransfer('diff.schema', true));
  const strict = await call('POST', '/v3/movements', 'requester', { template_key: 'diff.schema', intent: { asset: 'USDC', amount: '1', memo: 'x' } });
  expectRefused(strict, 'INTENT_INVALID', 'memo', 'unknown_field', 'the new version refuses what the old one took');
  const version = await call('GET', '/v3/templates/diff.schema/versions/2', 'viewer');
  assert.equal(version.body.intent_schema.fields.amount.decimals, 6);
});

test('the queue dead-letters an intent its template refuses, with the same code, field and rule', async () => {
  const deps = { pool: db.pool, config, transitions: runtime.deps.transitions };
  await ensureMovementQueues(runtime.boss);
  const { createToken } = await import('../src/persistence/tokens.ts');
  await createToken(db.pool, { name: 'queue-requester', role: 'requester' });
  // Orders on the queue are signed by a queue credential of the principal they name.
  const { createQueueCredential, signMovementOrder } = await import('../src/services/queue-credentials.ts');
  const { key } = await createQueueCredential(db.pool, { principal: 'queue-requester' }, 'cli:test');
  const base = { template_key: 'usdc.transfer', requested_by: 'queue-requester' };
  const cases: Array<[string, Record<string, unknown>, string, string, string]> = [
    ['usdc.transfer', { asset: 'DAI', amount: '1', destination: RECIPIENT }, 'INTENT_INVALID', 'asset', 'allowed'],
    ['usdc.transfer', { asset: 'USDC', amount: '1.1234567', destination: RECIPIENT }, 'INTENT_INVALID', 'amount', 'decimals'],
    ['usdc.unschemed', { asset: 'DAI', amount: '1' }, 'INTENT_INVALID', 'asset', 'asset_binding_mismatch'],
    // A queue message is JSON already parsed by the database driver: a rounded big integer is still caught.
    ['usdc.unschemed', { asset: 'USDC', amount: '1', reference: 12345678901234567890 }, 'INEXACT_NUMBER', 'intent.reference', 'unsafe_integer'],
  ];
  const before = await movementCount();
  for (const [i, [template_key, intent, code, field, rule]] of cases.entries()) {
    const data = { ...base, template_key, intent, idempotency_key: `intent-queue-${i}` };
    const out = await consumeMovementRequest(deps, runtime.boss, { id: `job-${i}`, data: signMovementOrder(data, key) });
    assert.equal(out.outcome, 'dead_lettered', JSON.stringify(intent));
    if (out.outcome !== 'dead_lettered') continue;
    assert.equal(out.reason.code, code);
    assert.equal(out.reason.details?.field, field);
    assert.equal(out.reason.details?.rule, rule);
  }
  assert.equal(await movementCount(), before);
  const ok = await consumeMovementRequest(deps, runtime.boss, {
    id: 'job-ok',
    data: signMovementOrder({ ...base, intent: { asset: 'USDC', amount: '2', destination: RECIPIENT }, idempotency_key: 'intent-queue-ok' }, key),
  });
  assert.equal(ok.outcome, 'created');
});

// ---------------------------------------------------------------------------------------------
// Pure: hashes and the number scan.

function versionOf(def: ReturnType<typeof parseTemplateDefinition>): TemplateVersionRecord {
  return {
    id: 'v1',
    template_id: 't1',
    template_key: def.template_key,
    version: 1,
    graph_hash: graphHash(def),
    risk_controls: {},
    intent_schema: def.intent_schema ?? null,
    created_by: 'test',
    created_at: new Date(0),
    nodes: def.nodes.map((n, i) => ({ plan_node_id: `p${i}`, position: i, ...planNodeFields(n) })),
    edges: def.edges,
  };
}

test('a template without a schema keeps the graph and plan hashes it had before schemas existed', () => {
  const def = parseTemplateDefinition({
    template_key: 'hash.stable',
    nodes: [
      { node_key: 'send', node_kind: 'action', action_type: 'erc20_transfer', executor_binding: 'exec.sim.action', config: { token: 'USDC', decimals: 6 } },
      { node_key: 'wait', node_kind: 'observe', action_type: 'chain_finality', executor_binding: 'exec.sim.observe', config: { tx_hash: '$ref:send.tx_hash' } },
    ],
    edges: [{ from: 'send', to: 'wait' }],
  });
  // Computed by the code before intent schemas were added.
  assert.equal(graphHash(def), 'sha256:93339c0cbb46e57c12f45785becf2af991bd9533d4544c25bbec4de3796308ef');
  const plan = compilePlan(versionOf(def), { asset: 'USDC', amount: '12.5', destination: { address: RECIPIENT } }, { note: 'n' });
  assert.equal(plan.compiled_plan_hash, 'sha256:a1d8812df4b6ddec89fa60b1ff2706a01f14788ab9bc4d446af6338e2d9735e8');

  // A schema is part of the graph: adding or changing it is a new graph; spelling out its defaults is not.
  const schema = { fields: { asset: { type: 'asset', allowed: ['USDC'] }, destination: { type: 'evm_address' } } };
  const withSchema = parseTemplateDefinition({ ...def, intent_schema: schema });
  assert.notEqual(graphHash(withSchema), graphHash(def));
  const explicit = parseTemplateDefinition({
    ...def,
    intent_schema: { fields: { asset: { type: 'asset', allowed: ['USDC'], required: true }, destination: { type: 'evm_address', checksum: 'if_mixed_case', required: true } } },
  });
  assert.equal(graphHash(explicit), graphHash(withSchema));
  const looser = parseTemplateDefinition({ ...def, intent_schema: { fields: { ...schema.fields, destination: { type: 'evm_address', required: false } } } });
  assert.notEqual(graphHash(looser), graphHash(withSchema));
  // A stored version whose schema was edited behind Ferry's back no longer compiles.
  const drifted = { ...versionOf(withSchema), intent_schema: looser.intent_schema };
  assert.throws(() => compilePlan(drifted, { asset: 'USDC' }), (e: any) => e.code === 'INVALID_TEMPLATE' && e.details.rule === 'GRAPH_HASH_DRIFT');
});

test('the templates Ferry ships declare schemas that accept their documented intents', () => {
  const demo = demoTemplate();
  assert.ok(demo.intent_schema, 'the demo template has a schema');
  compilePlan(versionOf(demo), { asset: 'USDC', amount: '100' });
  assert.throws(() => compilePlan(versionOf(demo), { asset: 'USDC', amount: '-1' }), (e: any) => e.code === 'INTENT_INVALID');
  const sandbox = parseTemplateDefinition(usdcTransferTemplate({ chainId: 31337, signerKey: 'hot', confirmations: 1 }));
  assert.ok(sandbox.intent_schema);
  compilePlan(versionOf(sandbox), { asset: 'USDC', amount: '25', destination: { address: RECIPIENT } });
  assert.throws(() => compilePlan(versionOf(sandbox), { asset: 'DAI', amount: '1', destination: { address: RECIPIENT } }), (e: any) => e.details?.rule === 'allowed');
});

test('decimals per asset: each asset has its own, and an amount without its asset is refused', () => {
  const def = parseTemplateDefinition({
    template_key: 'two.assets',
    nodes: [{ node_key: 'pay', node_kind: 'action', action_type: 'pay', executor_binding: 'exec.sim.action' }],
    intent_schema: {
      fields: { asset: { type: 'asset', allowed: ['USDC', 'DAI'], required: false }, amount: { type: 'amount', decimals: { USDC: 6, DAI: 18 }, max: '1000' } },
    },
  });
  const v = versionOf(def);
  compilePlan(v, { asset: 'DAI', amount: '1.123456789012345678' });
  const refused = (intent: Record<string, unknown>) => {
    try {
      compilePlan(v, intent);
    } catch (e: any) {
      return [e.details.field, e.details.rule];
    }
    return null;
  };
  assert.deepEqual(refused({ asset: 'USDC', amount: '1.1234567' }), ['amount', 'decimals']);
  assert.deepEqual(refused({ amount: '1.1234567' }), ['amount', 'decimals']);
  assert.deepEqual(refused({ asset: 'WBTC', amount: '1' }), ['asset', 'allowed']);
  assert.deepEqual(refused({ asset: 'DAI', amount: '1000.000000000000000001' }), ['amount', 'max']);
});

test('a token fixed by address is held to the intent through evm.tokens; a native transfer refuses a token', () => {
  const USDC_ADDRESS = '0x' + '11'.repeat(20);
  const options = compileOptionsOf({
    file: { evm: { tokens: [{ chain_id: 8453, symbol: 'USDC', address: USDC_ADDRESS, decimals: 6 }] } } as never,
  });
  const byAddress = parseTemplateDefinition({
    template_key: 'by.address',
    nodes: [{ node_key: 'send', node_kind: 'action', action_type: 'erc20_transfer', executor_binding: 'exec.evm.erc20_transfer', config: { chain_id: 8453, token: USDC_ADDRESS } }],
  });
  compilePlan(versionOf(byAddress), { asset: 'USDC', amount: '1' }, {}, undefined, options);
  assert.throws(
    () => compilePlan(versionOf(byAddress), { asset: 'DAI', amount: '1' }, {}, undefined, options),
    (e: any) => e.code === 'INTENT_INVALID' && e.details.rule === 'asset_binding_mismatch' && e.details.bound_token === USDC_ADDRESS,
  );
  // An address Ferry does not know is left to the executors: nothing to compare it with.
  compilePlan(versionOf(byAddress), { asset: 'DAI', amount: '1' });
  const native = parseTemplateDefinition({
    template_key: 'native',
    nodes: [{ node_key: 'pay', node_kind: 'action', action_type: 'native_transfer', executor_binding: 'exec.evm.native_transfer', config: { chain_id: 8453 } }],
  });
  compilePlan(versionOf(native), { asset: 'ETH', amount: '1' }, {}, undefined, options);
  // A balance observation of the chain's coin (`token: native`) takes the coin by any name, not a token.
  const watch = parseTemplateDefinition({
    template_key: 'watch.native',
    nodes: [{ node_key: 'watch', node_kind: 'observe', action_type: 'chain_balance', executor_binding: 'exec.observe.evm_balance', config: { chain_id: 8453, token: 'native' } }],
  });
  compilePlan(versionOf(watch), { asset: 'ETH', amount: '1' }, {}, undefined, options);
  assert.throws(() => compilePlan(versionOf(watch), { asset: 'USDC', amount: '1' }, {}, undefined, options), (e: any) => e.details?.rule === 'asset_binding_mismatch');
  assert.throws(
    () => compilePlan(versionOf(native), { asset: 'USDC', amount: '1' }, {}, undefined, options),
    (e: any) => e.code === 'INTENT_INVALID' && e.details.rule === 'asset_binding_mismatch' && e.details.bound_token === 'native',
  );
});

test('the number scan reports exactly the numbers JSON.parse would change, by path', () => {
  const text = '{"a":12345678901234567890,"b":[1,2.5,0.1,1.00000000000000000001],"c\\"d":{"e":9007199254740993},"f":9007199254740991,"g":-0,"h":1e400,"i":1e-400,"j":"12345678901234567890","k":[{"l":[3e2]}]}';
  assert.deepEqual(inexactNumbers(text), [
    { path: 'a', source: '12345678901234567890' },
    { path: 'b.3', source: '1.00000000000000000001' },
    { path: 'c"d.e', source: '9007199254740993' },
    { path: 'h', source: '1e400' },
    { path: 'i', source: '1e-400' },
  ]);
  assert.deepEqual(inexactNumbers('12345678901234567890'), [{ path: '', source: '12345678901234567890' }]);
  for (const exact of ['0', '-1', '1.5', '0.1', '1e21'.replace('21', '2'), '123.456', '9007199254740991', '-9007199254740991']) assert.ok(isExact(exact), exact);
  for (const inexact of ['9007199254740992', '1e21', '0.30000000000000000001', '-12345678901234567890']) assert.ok(!isExact(inexact), inexact);
  // A deep document is a loop, not a recursion.
  const deep = '['.repeat(100_000) + '1' + ']'.repeat(100_000);
  assert.deepEqual(inexactNumbers(deep), []);
});
