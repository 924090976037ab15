/**
 * Hostile and mistaken input across every /v3 route: bad JSON, wrong types, unknown fields, missing
 * or bad credentials, the wrong role, huge bodies, unknown ids and transitions the machines refuse.
 * Every one must be a 4xx with an error code in the one error shape, and none may change the
 * database: the main tables are checksummed before and after.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { refreshRegistryHealth } from '../src/sweeps/executor-health.ts';
import { startRuntime, type Runtime } from '../src/actors/runtime.ts';
import { loadConfig } from '../src/config.ts';
import { LOOPBACK_NETWORKS } from './helpers/destinations.ts';
import { createApp } from '../src/http/app.ts';
import { log } from '../src/log.ts';
import { createToken, revokeToken } from '../src/persistence/tokens.ts';
import { testDatabase } from './helpers/db.ts';
import { generateCases, operationsOf, type BaseRequest, type FuzzCase } from './helpers/fuzz.ts';
import { callApi, serveApp } from './helpers/http.ts';
import { makeTemplateLive } from './helpers/templates.ts';
import { can, permissions } from '../src/services/permissions.ts';

let runtime: Runtime | undefined;
after(async () => {
  await runtime?.stop();
});

const db = await testDatabase();
// The fixtures' callback URLs are loopback ones (never delivered: workers are off); allowed, as an operator would.
// It sends hundreds of bad credentials, all from one (in-process) address: what it checks is each
// route's own answer to them (401), so the per-address throttle, tested in auth-middleware.test.ts,
// is raised out of its way here rather than exempting anything in the code.
const env = {
  FERRY_DATA_DIR: '.ferry/test-api-malformed',
  FERRY_LOG_LEVEL: 'silent',
  FERRY_CALLBACK_ALLOWED_NETWORKS: LOOPBACK_NETWORKS,
  FERRY_AUTH_FAILURE_LIMIT: '1000000',
  // A configured operator channel: the API cannot change it, so a valid change of it is refused.
  FERRY_NOTIFY_CHANNELS: JSON.stringify([{ name: 'fuzz-cfg', kind: 'slack', url: 'http://127.0.0.1:9/services/x' }]),
};
const config = loadConfig(env);
// Workers off: nothing in the background may touch the tables between the two checksums.
runtime = await startRuntime({ pool: db.pool, config, databaseUrl: db.url, log, workers: false });
const app = createApp({ pool: db.pool, config, runtime });
const restricted = createApp({ pool: db.pool, config: loadConfig({ ...env, FERRY_CALLBACK_ALLOWED_HOSTS: 'callbacks.example.com' }), runtime });

const roles = ['viewer', 'requester', 'approver', 'operator', 'admin'] as const;
type Role = (typeof roles)[number];
const tokens = {} as Record<Role, { id: string; token: string }>;
for (const role of roles) tokens[role] = await createToken(db.pool, { name: `${role}-m`, role });
const approver2 = await createToken(db.pool, { name: 'approver-m2', role: 'approver' });
const revoked = await createToken(db.pool, { name: 'revoked-m', role: 'admin' });
await revokeToken(db.pool, revoked.id);

/** Sets up a fixture: the call must succeed; its body. */
async function call(method: string, path: string, token: string, body?: unknown, target = app) {
  const r = await callApi(target, method, path, token, body);
  assert.ok(r.status < 300, `${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

// ---------------------------------------------------------------------------------------------
// Fixtures in every state the refusals need.

const template = {
  template_key: 'shape',
  nodes: [
    { node_key: 'a', node_kind: 'action', action_type: 'sim_action', executor_binding: 'exec.sim.action' },
    { node_key: 'b', node_kind: 'action', action_type: 'sim_action', executor_binding: 'exec.sim.action' },
  ],
  edges: [{ from: 'a', to: 'b' }],
};
// Live through the proposal workflow (proposed, approved by a second token, finalized).
await makeTemplateLive(app, db.pool, template, { proposer: tokens.operator.token, approver: tokens.approver.token });
const newMovement = async (who: Role, n: number, extra: Record<string, unknown> = {}) =>
  (await call('POST', '/v3/movements', tokens[who].token, { template_key: 'shape', intent: { n }, ...extra })).movement;

const pending = await newMovement('requester', 1);
const ownedByAdmin = await newMovement('admin', 2);
// The admin's principal also holds an approver token: approving is a grant of its own, and four-eyes
// still refuses it on the admin's own movement.
const adminAsApprover = await createToken(db.pool, { name: 'admin-m.approver', role: 'approver', principal: 'admin-m' });
const approved = await newMovement('requester', 3, { callback_url: 'http://127.0.0.1:9/cb' });
await call('POST', `/v3/movements/${approved.id}/approve`, tokens.approver.token, { compiled_plan_hash: approved.compiled_plan_hash });
const rejected = await newMovement('requester', 4);
await call('POST', `/v3/movements/${rejected.id}/reject`, tokens.approver.token, {});
const cancelled = await newMovement('requester', 5);
await call('POST', `/v3/movements/${cancelled.id}/cancel`, tokens.requester.token, {});
await refreshRegistryHealth(db.pool, runtime.deps.executors, runtime.deps.signers);
const { rows: cbRows } = await db.pool.query<{ id: string }>(`SELECT id FROM callback_outbox WHERE request_id = $1`, [approved.id]);
const sentCallback = cbRows[0].id;
await db.pool.query(`UPDATE callback_outbox SET status = 'sent', sent_at = now() WHERE id = $1`, [sentCallback]);

// Targets for the operations added with principals, proposals, destinations and resolutions: each
// one refuses a valid request anyway (a finalized proposal, a disabled destination, a revoked token).
const finalizedProposal = (await call('GET', '/v3/template-proposals?template_key=shape', tokens.viewer.token)).proposals[0];
const destination = (await call('POST', '/v3/callback-destinations', tokens.operator.token, { name: 'fuzz-target', url: 'http://127.0.0.1:9/cb' })).destination;
await call('POST', `/v3/callback-destinations/${destination.id}/disable`, tokens.operator.token, {});

// A credential proposal decided already (rejected): confirming or rejecting it again is refused.
const decidedCredential = (await call('POST', '/v3/principals', tokens.admin.token, { name: 'fuzz-principal' })).proposal;
await call('POST', `/v3/credential-proposals/${decidedCredential.id}/reject`, tokens.admin.token, {});
// Policy: an open address book proposal and an open rule set proposal (a valid proposal for the
// same subject is refused as already open), and a rejected one (every decision on it is refused).
const fuzzEntry = { name: 'fuzz-cold', network: 'ethereum', address: `0x${'c'.repeat(40)}`, owner: 'treasury', kind: 'internal' };
const fuzzRules = { rules: [{ id: 'default', action: { type: 'allow' } }] };
await call('POST', '/v3/policy/address-book', tokens.operator.token, fuzzEntry);
await call('POST', '/v3/policy/rules', tokens.operator.token, fuzzRules);
const decidedPolicy = await call('POST', '/v3/policy/address-book', tokens.operator.token, { ...fuzzEntry, name: 'fuzz-rejected', address: `0x${'d'.repeat(40)}` });
await call('POST', `/v3/policy/proposals/${decidedPolicy.id}/reject`, tokens.approver.token, { reason: 'no' });
// A revoked standing order: every decision on it is refused.
const revokedOrder = (
  await db.pool.query(
    `INSERT INTO standing_orders (name, template_key, intent, asset, destinations, max_per_run, max_per_window, window_seconds, trigger,
                                  expires_at, machine_id, machine_version, order_state, proposed_by, required_approvals)
     VALUES ('fuzz-order', 'shape', '{}', 'USDC', ARRAY['fuzz-cold'], 1, 1, 3600, '{"kind":"schedule","schedule":{"cron":"0 * * * *"},"amount":"1"}',
             now() + interval '1 day', 'ferry.standing_order', '1', 'REVOKED', 'principal:00000000-0000-4000-8000-000000000009', 1)
     RETURNING id`,
  )
).rows[0] as { id: string };
const fuzzOrder = {
  name: 'fuzz-new-order',
  template_key: 'shape',
  asset: 'USDC',
  destinations: ['fuzz-cold'],
  max_per_run: '1',
  max_per_window: '1',
  window_seconds: 3600,
  trigger: { kind: 'schedule', schedule: { cron: '0 * * * *' }, amount: '1' },
  expires_at: '2099-01-01T00:00:00Z',
};
const UNKNOWN = '00000000-0000-4000-8000-000000000000';
const HASH = `sha256:${'0'.repeat(64)}`;

// ---------------------------------------------------------------------------------------------
// The table.

interface Case {
  name: string;
  method: string;
  path: string;
  /** Bearer token; null sends no Authorization header. */
  token?: string | null;
  authorization?: string;
  /** A JSON value to send, or raw text with `raw`. */
  body?: unknown;
  raw?: string;
  contentType?: string;
  headers?: Record<string, string>;
  status?: number;
  code?: string;
  target?: typeof app;
}

interface Route {
  method: string;
  path: string;
  permission: string;
  /** A body that would be accepted (used where only the credentials should be wrong). */
  body?: unknown;
}

const routes: Route[] = [
  { method: 'POST', path: '/v3/templates', permission: 'template.write', body: template },
  { method: 'GET', path: '/v3/templates', permission: 'read' },
  { method: 'GET', path: '/v3/templates/shape', permission: 'read' },
  { method: 'GET', path: '/v3/templates/shape/versions/1', permission: 'read' },
  { method: 'POST', path: '/v3/templates/shape/compile', permission: 'read', body: { intent: {} } },
  { method: 'POST', path: '/v3/movements', permission: 'movement.create', body: { template_key: 'shape', intent: {} } },
  { method: 'GET', path: '/v3/movements', permission: 'read' },
  { method: 'GET', path: `/v3/movements/${pending.id}`, permission: 'read' },
  { method: 'GET', path: `/v3/movements/${pending.id}/transitions`, permission: 'read' },
  { method: 'POST', path: `/v3/movements/${pending.id}/approve`, permission: 'movement.approve', body: { compiled_plan_hash: pending.compiled_plan_hash } },
  { method: 'POST', path: `/v3/movements/${pending.id}/reject`, permission: 'movement.approve', body: {} },
  { method: 'POST', path: `/v3/movements/${pending.id}/cancel`, permission: 'movement.cancel', body: {} },
  { method: 'POST', path: `/v3/movements/${pending.id}/resume`, permission: 'movement.operate', body: {} },
  { method: 'POST', path: `/v3/movements/${pending.id}/retry`, permission: 'movement.operate', body: { node_key: 'a' } },
  { method: 'GET', path: '/v3/executors', permission: 'read' },
  { method: 'GET', path: '/v3/signers', permission: 'read' },
  { method: 'PUT', path: '/v3/signers/noop/expected-identity', permission: 'signer.identity', body: { address: `0x${'1'.repeat(40)}` } },
  { method: 'GET', path: '/v3/callbacks', permission: 'read' },
  { method: 'POST', path: `/v3/callbacks/${sentCallback}/redrive`, permission: 'callback.redrive', body: {} },
  { method: 'GET', path: '/v3/audit-events', permission: 'read' },
];

// Which permissions each role holds, from the one policy (src/http/auth.ts; test/auth-middleware.test.ts
// checks that policy against a copy written out by hand).
const grants = Object.fromEntries(roles.map((role) => [role, permissions.filter((p) => can(role, p))])) as Record<Role, string[]>;

const cases: Case[] = [];
const add = (c: Case) => cases.push(c);
const bodyRoutes = routes.filter((r) => r.body !== undefined);

// Credentials: every route, four ways of not being authenticated.
for (const r of routes) {
  const base = { method: r.method, path: r.path, body: r.body, status: 401, code: 'UNAUTHENTICATED' };
  add({ ...base, name: `${r.method} ${r.path}: no Authorization`, token: null });
  add({ ...base, name: `${r.method} ${r.path}: unknown token`, token: `fy_${'A'.repeat(43)}` });
  add({ ...base, name: `${r.method} ${r.path}: not a token`, token: 'letmein' });
  add({ ...base, name: `${r.method} ${r.path}: Basic scheme`, token: null, authorization: `Basic ${Buffer.from('admin:admin').toString('base64')}` });
  add({ ...base, name: `${r.method} ${r.path}: revoked token`, token: revoked.token });
}

// Roles: every role without the route's permission.
for (const r of routes) {
  for (const role of roles) {
    if (grants[role].includes(r.permission)) continue;
    add({ name: `${r.method} ${r.path}: role ${role}`, method: r.method, path: r.path, token: tokens[role].token, body: r.body, status: 403, code: 'FORBIDDEN' });
  }
}

// Bodies that are not JSON, or not JSON at all.
const huge = JSON.stringify({ intent: { blob: 'x'.repeat(config.maxBodyBytes + 1024) } });
for (const r of bodyRoutes) {
  // A token allowed the route, so what is refused is the body: admin's, or an approver's for decisions.
  const base = { method: r.method, path: r.path, token: grants.admin.includes(r.permission) ? tokens.admin.token : tokens.approver.token };
  add({ ...base, name: `${r.path}: truncated JSON`, raw: '{"a": ', status: 400, code: 'MALFORMED_JSON' });
  add({ ...base, name: `${r.path}: trailing garbage`, raw: '{} x', status: 400, code: 'MALFORMED_JSON' });
  add({ ...base, name: `${r.path}: single quotes`, raw: "{'a': 1}", status: 400, code: 'MALFORMED_JSON' });
  add({ ...base, name: `${r.path}: text/plain`, raw: 'hello', contentType: 'text/plain', status: 415, code: 'UNSUPPORTED_MEDIA_TYPE' });
  add({ ...base, name: `${r.path}: form body`, raw: 'a=1', contentType: 'application/x-www-form-urlencoded', status: 415, code: 'UNSUPPORTED_MEDIA_TYPE' });
  add({ ...base, name: `${r.path}: huge body`, raw: huge, status: 413, code: 'PAYLOAD_TOO_LARGE' });
  add({ ...base, name: `${r.path}: JSON array`, body: [r.body], status: 400, code: 'VALIDATION_FAILED' });
  add({ ...base, name: `${r.path}: JSON string`, body: 'approve', status: 400, code: 'VALIDATION_FAILED' });
  add({ ...base, name: `${r.path}: unknown field`, body: { ...(r.body as object), surprise: true }, status: 400, code: 'VALIDATION_FAILED' });
}

const admin = tokens.admin.token;
const v = (name: string, method: string, path: string, body: unknown, status = 400, code = 'VALIDATION_FAILED', token = admin) =>
  add({ name, method, path, body, status, code, token });
const deep = (levels: number): unknown => (levels === 0 ? 'leaf' : { d: deep(levels - 1) });

// Templates: shapes, then plan rules (422).
const node = template.nodes[0];
v('template: missing nodes', 'POST', '/v3/templates', { template_key: 'x' });
v('template: nodes not a list', 'POST', '/v3/templates', { template_key: 'x', nodes: {} });
v('template: uppercase key', 'POST', '/v3/templates', { ...template, template_key: 'Shape' });
v('template: key too long', 'POST', '/v3/templates', { ...template, template_key: 'k'.repeat(200) });
v('template: unknown node kind', 'POST', '/v3/templates', { ...template, nodes: [{ ...node, node_kind: 'teleport' }] });
v('template: unknown node field', 'POST', '/v3/templates', { ...template, nodes: [{ ...node, colour: 'red' }] });
v('template: retryable as string', 'POST', '/v3/templates', { ...template, nodes: [{ ...node, retryable: 'yes' }] });
v('template: edges not a list', 'POST', '/v3/templates', { ...template, edges: 'a->b' });
v('template: edge with unknown field', 'POST', '/v3/templates', { ...template, edges: [{ from: 'a', to: 'b', weight: 1 }] });
v('template: node key with a dot', 'POST', '/v3/templates', { ...template, nodes: [{ ...node, node_key: 'a.b' }], edges: [] });
v('template: too many nodes', 'POST', '/v3/templates', {
  template_key: 'many',
  nodes: Array.from({ length: 201 }, (_, i) => ({ ...node, node_key: `n${i}` })),
  edges: [],
});
v('template: description too long', 'POST', '/v3/templates', { ...template, description: 'd'.repeat(2001) });
v('template: config nested too deep', 'POST', '/v3/templates', { ...template, nodes: [{ ...node, config: { x: deep(40) } }, template.nodes[1]] });
const rule = (name: string, def: unknown, ruleCode: string) => {
  add({ name: `template rule ${ruleCode}: ${name}`, method: 'POST', path: '/v3/templates', token: admin, body: def, status: 422, code: 'INVALID_TEMPLATE' });
};
const two = template.nodes;
rule('no nodes', { template_key: 'empty', nodes: [] }, 'EMPTY_PLAN');
rule('cycle', { template_key: 'cyc', nodes: two, edges: [{ from: 'a', to: 'b' }, { from: 'b', to: 'a' }] }, 'CYCLE');
rule('self edge', { template_key: 'self', nodes: two, edges: [{ from: 'a', to: 'a' }, { from: 'a', to: 'b' }] }, 'SELF_EDGE');
rule('edge to unknown node', { template_key: 'ghost', nodes: two, edges: [{ from: 'a', to: 'zz' }] }, 'UNKNOWN_NODE_KEY');
rule('disconnected', { template_key: 'apart', nodes: two, edges: [] }, 'UNREACHABLE');
rule('duplicate node', { template_key: 'dup', nodes: [node, node], edges: [] }, 'DUPLICATE_NODE_KEY');
rule('unknown executor', { template_key: 'noexec', nodes: [{ ...node, executor_binding: 'exec.none' }], edges: [] }, 'UNKNOWN_EXECUTOR_BINDING');
rule('unknown signer', { template_key: 'nosign', nodes: [{ ...node, signer_binding: 'hsm-9' }], edges: [] }, 'UNKNOWN_SIGNER_BINDING');
rule('missing executor', { template_key: 'noexec2', nodes: [{ ...node, executor_binding: null }], edges: [] }, 'MISSING_EXECUTOR_BINDING');
rule('malformed ref', { template_key: 'badref', nodes: [node, { ...two[1], config: { to: '$ref:a' } }], edges: [{ from: 'a', to: 'b' }] }, 'REF_MALFORMED');
rule('ref to a successor', { template_key: 'fwdref', nodes: [{ ...node, config: { to: '$ref:b.addr' } }, two[1]], edges: [{ from: 'a', to: 'b' }] }, 'REF_NOT_PREDECESSOR');

// Compile previews.
const compile = '/v3/templates/shape/compile';
v('compile: no intent', 'POST', compile, {});
v('compile: intent is a list', 'POST', compile, { intent: [1, 2] });
v('compile: intent is a string', 'POST', compile, { intent: 'send it' });
v('compile: input_params is null', 'POST', compile, { intent: {}, input_params: null });
v('compile: version zero', 'POST', compile, { intent: {}, template_version: 0 });
v('compile: version is text', 'POST', compile, { intent: {}, template_version: 'latest' });
v('compile: version is numeric text', 'POST', compile, { intent: {}, template_version: '1' });
v('compile: intent nested too deep', 'POST', compile, { intent: deep(40) });
v('compile: unknown template', 'POST', '/v3/templates/nope/compile', { intent: {} }, 404, 'NOT_FOUND');
v('compile: unknown version', 'POST', compile, { intent: {}, template_version: 9 }, 404, 'NOT_FOUND');
v('compile: bad key in path', 'POST', '/v3/templates/NOPE!/compile', { intent: {} });

// Movement creation.
const mv = '/v3/movements';
const req = tokens.requester.token;
v('create: no template_key', 'POST', mv, { intent: {} }, 400, 'VALIDATION_FAILED', req);
v('create: template_key is a number', 'POST', mv, { template_key: 7, intent: {} }, 400, 'VALIDATION_FAILED', req);
v('create: no intent', 'POST', mv, { template_key: 'shape' }, 400, 'VALIDATION_FAILED', req);
v('create: intent null', 'POST', mv, { template_key: 'shape', intent: null }, 400, 'VALIDATION_FAILED', req);
v('create: intent is a list', 'POST', mv, { template_key: 'shape', intent: [] }, 400, 'VALIDATION_FAILED', req);
v('create: version negative', 'POST', mv, { template_key: 'shape', intent: {}, template_version: -1 }, 400, 'VALIDATION_FAILED', req);
v('create: version fractional', 'POST', mv, { template_key: 'shape', intent: {}, template_version: 1.5 }, 400, 'VALIDATION_FAILED', req);
v('create: version as text', 'POST', mv, { template_key: 'shape', intent: {}, template_version: '1' }, 400, 'VALIDATION_FAILED', req);
v('create: input_params is a list', 'POST', mv, { template_key: 'shape', intent: {}, input_params: [1] }, 400, 'VALIDATION_FAILED', req);
v('create: callback_url not a URL', 'POST', mv, { template_key: 'shape', intent: {}, callback_url: 'not a url' }, 400, 'VALIDATION_FAILED', req);
v('create: callback_url ftp', 'POST', mv, { template_key: 'shape', intent: {}, callback_url: 'ftp://127.0.0.1/x' }, 400, 'VALIDATION_FAILED', req);
v('create: callback_url with spaces around', 'POST', mv, { template_key: 'shape', intent: {}, callback_url: ' http://127.0.0.1:9/cb ' }, 400, 'VALIDATION_FAILED', req);
v('create: callback_url with a tab inside', 'POST', mv, { template_key: 'shape', intent: {}, callback_url: 'http://127.0.0.1:9/c\tb' }, 400, 'VALIDATION_FAILED', req);
v('create: callback_url port 0', 'POST', mv, { template_key: 'shape', intent: {}, callback_url: 'http://127.0.0.1:0/cb' }, 400, 'VALIDATION_FAILED', req);
v('create: callback_url with credentials', 'POST', mv, { template_key: 'shape', intent: {}, callback_url: 'http://user:pw@127.0.0.1:9/cb' }, 400, 'VALIDATION_FAILED', req);
v('create: callback_url too long', 'POST', mv, { template_key: 'shape', intent: {}, callback_url: `http://127.0.0.1/${'p'.repeat(2100)}` }, 400, 'VALIDATION_FAILED', req);
v('create: intent key too long', 'POST', mv, { template_key: 'shape', intent: { ['k'.repeat(300)]: 1 } }, 400, 'VALIDATION_FAILED', req);
v('create: intent nested too deep', 'POST', mv, { template_key: 'shape', intent: deep(40) }, 400, 'VALIDATION_FAILED', req);
v('create: unknown template', 'POST', mv, { template_key: 'nope', intent: {} }, 404, 'NOT_FOUND', req);
v('create: unknown version', 'POST', mv, { template_key: 'shape', intent: {}, template_version: 7 }, 404, 'NOT_FOUND', req);
add({
  name: 'create: callback host not allowed',
  method: 'POST',
  path: mv,
  token: req,
  body: { template_key: 'shape', intent: {}, callback_url: 'https://evil.example.net/cb' },
  status: 422,
  code: 'CALLBACK_HOST_NOT_ALLOWED',
  target: restricted,
});
add({
  name: 'create: callback address private, outside the allowed networks',
  method: 'POST',
  path: mv,
  token: req,
  body: { template_key: 'shape', intent: {}, callback_url: 'http://10.0.0.1/cb' },
  status: 422,
  code: 'CALLBACK_ADDRESS_NOT_ALLOWED',
});
add({ name: 'create: Idempotency-Key too long', method: 'POST', path: mv, token: req, body: { template_key: 'shape', intent: {} }, headers: { 'Idempotency-Key': 'k'.repeat(201) }, status: 400, code: 'VALIDATION_FAILED' });
add({ name: 'create: Idempotency-Key reused with another body', method: 'POST', path: mv, token: req, body: { template_key: 'shape', intent: { other: true } }, headers: { 'Idempotency-Key': 'fixture-key' }, status: 409, code: 'IDEMPOTENCY_KEY_REUSED' });

// Decisions.
const at = (m: { id: string }, verb: string) => `/v3/movements/${m.id}/${verb}`;
const appr = tokens.approver.token;
v('approve: no hash', 'POST', at(pending, 'approve'), {}, 400, 'VALIDATION_FAILED', appr);
v('approve: hash without prefix', 'POST', at(pending, 'approve'), { compiled_plan_hash: '0'.repeat(64) }, 400, 'VALIDATION_FAILED', appr);
v('approve: hash upper case', 'POST', at(pending, 'approve'), { compiled_plan_hash: `sha256:${'A'.repeat(64)}` }, 400, 'VALIDATION_FAILED', appr);
v('approve: hash is a number', 'POST', at(pending, 'approve'), { compiled_plan_hash: 42 }, 400, 'VALIDATION_FAILED', appr);
v('approve: stale hash', 'POST', at(pending, 'approve'), { compiled_plan_hash: HASH }, 409, 'STALE_PLAN_HASH', appr);
v('approve: own movement, by another token of the creator', 'POST', at(ownedByAdmin, 'approve'), { compiled_plan_hash: ownedByAdmin.compiled_plan_hash }, 403, 'FOUR_EYES_VIOLATION', adminAsApprover.token);
v('approve: twice by the same token', 'POST', at(approved, 'approve'), { compiled_plan_hash: approved.compiled_plan_hash }, 409, 'ALREADY_APPROVED', appr);
v('approve: already approved movement', 'POST', at(approved, 'approve'), { compiled_plan_hash: approved.compiled_plan_hash }, 409, 'INVALID_TRANSITION', approver2.token);
v('approve: rejected movement', 'POST', at(rejected, 'approve'), { compiled_plan_hash: rejected.compiled_plan_hash }, 409, 'INVALID_TRANSITION', appr);
v('approve: cancelled movement', 'POST', at(cancelled, 'approve'), { compiled_plan_hash: cancelled.compiled_plan_hash }, 409, 'INVALID_TRANSITION', appr);
v('approve: unknown movement', 'POST', `/v3/movements/${UNKNOWN}/approve`, { compiled_plan_hash: HASH }, 404, 'NOT_FOUND', appr);
v('approve: malformed id', 'POST', '/v3/movements/12345/approve', { compiled_plan_hash: HASH }, 400, 'VALIDATION_FAILED', appr);
v('approve: id too long', 'POST', `/v3/movements/${'a'.repeat(101)}/approve`, { compiled_plan_hash: HASH }, 400, 'VALIDATION_FAILED', appr);
v('reject: reason is a number', 'POST', at(pending, 'reject'), { reason: 5 }, 400, 'VALIDATION_FAILED', appr);
v('reject: empty reason', 'POST', at(pending, 'reject'), { reason: '' }, 400, 'VALIDATION_FAILED', appr);
v('reject: reason too long', 'POST', at(pending, 'reject'), { reason: 'r'.repeat(2001) }, 400, 'VALIDATION_FAILED', appr);
v('reject: approved movement', 'POST', at(approved, 'reject'), {}, 409, 'INVALID_TRANSITION', appr);
v('reject: rejected movement', 'POST', at(rejected, 'reject'), {}, 409, 'INVALID_TRANSITION', appr);
v('reject: unknown movement', 'POST', `/v3/movements/${UNKNOWN}/reject`, {}, 404, 'NOT_FOUND', appr);
v('cancel: reason is a list', 'POST', at(pending, 'cancel'), { reason: ['x'] }, 400, 'VALIDATION_FAILED', req);
v('cancel: cancelled movement', 'POST', at(cancelled, 'cancel'), {}, 409, 'INVALID_TRANSITION', req);
v('cancel: rejected movement', 'POST', at(rejected, 'cancel'), {}, 409, 'INVALID_TRANSITION', req);
v('cancel: unknown movement', 'POST', `/v3/movements/${UNKNOWN}/cancel`, {}, 404, 'NOT_FOUND', req);
const op = tokens.operator.token;
v('resume: pending movement', 'POST', at(pending, 'resume'), {}, 409, 'INVALID_TRANSITION', op);
v('resume: approved movement', 'POST', at(approved, 'resume'), {}, 409, 'INVALID_TRANSITION', op);
v('resume: cancelled movement', 'POST', at(cancelled, 'resume'), {}, 409, 'INVALID_TRANSITION', op);
v('resume: unknown movement', 'POST', `/v3/movements/${UNKNOWN}/resume`, {}, 404, 'NOT_FOUND', op);
v('retry: no node_key', 'POST', at(pending, 'retry'), {}, 400, 'VALIDATION_FAILED', op);
v('retry: node_key with spaces', 'POST', at(pending, 'retry'), { node_key: 'a b' }, 400, 'VALIDATION_FAILED', op);
v('retry: node_key is a number', 'POST', at(pending, 'retry'), { node_key: 1 }, 400, 'VALIDATION_FAILED', op);
v('retry: unknown node', 'POST', at(pending, 'retry'), { node_key: 'zz' }, 404, 'NOT_FOUND', op);
v('retry: blocked node', 'POST', at(pending, 'retry'), { node_key: 'a' }, 409, 'INVALID_TRANSITION', op);
v('retry: ready node of an approved movement', 'POST', at(approved, 'retry'), { node_key: 'a' }, 409, 'INVALID_TRANSITION', op);
v('retry: cancelled node', 'POST', at(cancelled, 'retry'), { node_key: 'b' }, 409, 'INVALID_TRANSITION', op);
v('retry: unknown movement', 'POST', `/v3/movements/${UNKNOWN}/retry`, { node_key: 'a' }, 404, 'NOT_FOUND', op);

// Registry.
const ident = '/v3/signers/noop/expected-identity';
v('identity: no address', 'PUT', ident, {});
v('identity: not hex', 'PUT', ident, { address: `0x${'g'.repeat(40)}` });
v('identity: too short', 'PUT', ident, { address: '0x1234' });
v('identity: a number', 'PUT', ident, { address: 1234 });
v('identity: zero address', 'PUT', ident, { address: `0x${'0'.repeat(40)}` });
v('identity: unknown signer', 'PUT', '/v3/signers/ghost/expected-identity', { address: `0x${'1'.repeat(40)}` }, 404, 'NOT_FOUND');
v('identity: signer key too long', 'PUT', `/v3/signers/${'s'.repeat(201)}/expected-identity`, { address: `0x${'1'.repeat(40)}` });

// Callbacks.
v('redrive: already sent', 'POST', `/v3/callbacks/${sentCallback}/redrive`, {}, 409, 'CALLBACK_NOT_REDRIVABLE', op);
v('redrive: unknown callback', 'POST', `/v3/callbacks/${UNKNOWN}/redrive`, {}, 404, 'NOT_FOUND', op);
v('redrive: malformed id', 'POST', '/v3/callbacks/not-an-id/redrive', {}, 400, 'VALIDATION_FAILED', op);

// Text PostgreSQL cannot store (NUL, unpaired surrogates), wherever it hides.
const nodeWith = (extra: Record<string, unknown>) => ({ ...template, template_key: 'nul', nodes: [{ ...node, ...extra }], edges: [] });
v('text: NUL in a template description', 'POST', '/v3/templates', { ...nodeWith({}), description: 'a\u0000b' });
v('text: NUL in node config', 'POST', '/v3/templates', nodeWith({ config: { to: 'x\u0000' } }));
v('text: unpaired surrogate in node config', 'POST', '/v3/templates', nodeWith({ config: { to: '\ud800' } }));
v('text: NUL in an intent value', 'POST', mv, { template_key: 'shape', intent: { memo: '\u0000' } }, 400, 'VALIDATION_FAILED', req);
v('text: NUL in an intent key', 'POST', mv, { template_key: 'shape', intent: { 'a\u0000': 1 } }, 400, 'VALIDATION_FAILED', req);
v('text: NUL deep in input_params', 'POST', mv, { template_key: 'shape', intent: {}, input_params: { a: [{ b: ['\u0000'] }] } }, 400, 'VALIDATION_FAILED', req);
v('text: unpaired low surrogate in intent', 'POST', mv, { template_key: 'shape', intent: { s: 'x\udc00' } }, 400, 'VALIDATION_FAILED', req);
v('text: NUL in callback_url', 'POST', mv, { template_key: 'shape', intent: {}, callback_url: 'http://127.0.0.1/\u0000' }, 400, 'VALIDATION_FAILED', req);
v('text: NUL in a reject reason', 'POST', at(pending, 'reject'), { reason: 'no\u0000' }, 400, 'VALIDATION_FAILED', tokens.approver.token);
v('text: NUL in a cancel reason', 'POST', at(pending, 'cancel'), { reason: '\u0000' }, 400, 'VALIDATION_FAILED', req);
v('text: NUL in compile intent', 'POST', compile, { intent: { a: '\u0000' } });
v('text: NUL in a signer key', 'PUT', '/v3/signers/no%00op/expected-identity', { address: `0x${'1'.repeat(40)}` });
v('text: NUL in a movement id', 'GET', `/v3/movements/${UNKNOWN}%00`, undefined);
v('text: NUL in an audit filter', 'GET', '/v3/audit-events?entity_type=%00', undefined);
v('text: NUL in an audit entity id', 'GET', '/v3/audit-events?entity_id=a%00', undefined);
v('text: NUL in a query key', 'GET', '/v3/movements?st%00ate=1', undefined);
v('text: unpaired surrogate in a cursor', 'GET', '/v3/callbacks?cursor=%ED%A0%80', undefined);

// Query strings and ids in paths.
const get = (name: string, path: string, status = 400, code = 'VALIDATION_FAILED') => add({ name, method: 'GET', path, token: tokens.viewer.token, status, code });
const badCursor = Buffer.from(JSON.stringify(['2026-02-30T00:00:00.000000Z', UNKNOWN])).toString('base64url');
get('movements: unknown state', '/v3/movements?state=DONE');
get('movements: state lower case', '/v3/movements?state=completed');
get('movements: limit zero', '/v3/movements?limit=0');
get('movements: limit too large', '/v3/movements?limit=201');
get('movements: limit not a number', '/v3/movements?limit=ten');
get('movements: limit fractional', '/v3/movements?limit=1.5');
// Number() would read each of these as an integer; only plain decimal digits are one.
for (const [what, raw] of [['hex', '0x10'], ['exponent', '1e1'], ['plus sign', '%2B5'], ['trailing .0', '5.0'], ['leading space', '%205'], ['empty', '']]) {
  get(`movements: limit ${what}`, `/v3/movements?limit=${raw}`);
  get(`audit: limit ${what}`, `/v3/audit-events?limit=${raw}`);
}
get('templates: version in hex', '/v3/templates/shape/versions/0x1');
get('templates: version with exponent', '/v3/templates/shape/versions/1e0');
get('movements: garbage cursor', '/v3/movements?cursor=%%%');
get('movements: forged cursor', `/v3/movements?cursor=${badCursor}`);
get('movements: unknown parameter', '/v3/movements?sort=desc');
get('movements: bad template key', '/v3/movements?template_key=NOT%20A%20KEY');
get('movements: repeated state', '/v3/movements?state=REJECTED&state=EXPIRED');
get('movement: unknown id', `/v3/movements/${UNKNOWN}`, 404, 'NOT_FOUND');
get('movement: malformed id', '/v3/movements/abc', 400, 'VALIDATION_FAILED');
get('movement: SQL in id', "/v3/movements/1'%20OR%20'1'='1", 400, 'VALIDATION_FAILED');
get('transitions: unknown movement', `/v3/movements/${UNKNOWN}/transitions`, 404, 'NOT_FOUND');
get('transitions: malformed id', '/v3/movements/abc/transitions', 400, 'VALIDATION_FAILED');
get('transitions: cursor not a number', `/v3/movements/${pending.id}/transitions?cursor=abc`);
// Cursors are opaque everywhere: a bare transition or event id is none, nor is another kind's.
get('transitions: a bare transition id', `/v3/movements/${pending.id}/transitions?cursor=12`);
get('transitions: a movement cursor', `/v3/movements/${pending.id}/transitions?cursor=${badCursor}`);
get('audit: a bare event id', '/v3/audit-events?cursor=12');
get('proposals: forged cursor', `/v3/template-proposals?cursor=${badCursor}`);
get('transitions: limit too large', `/v3/movements/${pending.id}/transitions?limit=5000`);
get('transitions: unknown parameter', `/v3/movements/${pending.id}/transitions?after=3`);
get('templates: bad key', '/v3/templates/Not_Lower');
get('templates: unknown key', '/v3/templates/absent', 404, 'NOT_FOUND');
get('template version: zero', '/v3/templates/shape/versions/0');
get('template version: text', '/v3/templates/shape/versions/latest');
get('template version: unknown', '/v3/templates/shape/versions/99', 404, 'NOT_FOUND');
get('template version: unknown template', '/v3/templates/absent/versions/1', 404, 'NOT_FOUND');
get('callbacks: unknown status', '/v3/callbacks?status=failed');
get('callbacks: limit too large', '/v3/callbacks?limit=1000');
get('callbacks: bad cursor', '/v3/callbacks?cursor=nonsense');
get('callbacks: unknown parameter', '/v3/callbacks?request=1');
get('audit: unknown order', '/v3/audit-events?order=sideways');
get('audit: limit zero', '/v3/audit-events?limit=0');
get('audit: cursor not a number', '/v3/audit-events?cursor=abc');
get('audit: unknown parameter', '/v3/audit-events?since=yesterday');
get('unknown route under /v3', '/v3/no-such-resource', 404, 'NOT_FOUND');
add({ name: 'DELETE a movement', method: 'DELETE', path: `/v3/movements/${pending.id}`, token: admin, status: 405, code: 'METHOD_NOT_ALLOWED' });
add({ name: 'PATCH a template', method: 'PATCH', path: '/v3/templates/shape', token: admin, body: {}, status: 405, code: 'METHOD_NOT_ALLOWED' });

// The Idempotency-Key reuse case needs its first use recorded before the checksum is taken.
await app.request(mv, {
  method: 'POST',
  headers: { authorization: `Bearer ${req}`, 'content-type': 'application/json', 'Idempotency-Key': 'fixture-key' },
  body: JSON.stringify({ template_key: 'shape', intent: { first: true } }),
});

// ---------------------------------------------------------------------------------------------

const TABLES = [
  'plan_templates',
  'template_versions',
  'plan_nodes',
  'plan_edges',
  'movement_requests',
  'request_nodes',
  'transitions',
  'artifacts',
  'callback_outbox',
  'audit_outbox',
  'audit_events',
  'executor_registry',
  'signer_registry',
  'sim_side_effects',
];

/**
 * Row count and a digest of every row of each table: the ones above and every other table of the
 * schema (so a new table is covered without being listed); api_tokens without last_used_at (bumped
 * by reads).
 */
async function checksum(): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const { rows: all } = await db.pool.query<{ name: string }>(
    `SELECT tablename AS name FROM pg_tables WHERE schemaname = 'public' AND tablename NOT IN ('pgmigrations', 'api_tokens') ORDER BY 1`,
  );
  for (const table of new Set([...TABLES, ...all.map((r) => r.name)])) {
    const { rows } = await db.pool.query<{ n: number; digest: string | null }>(
      `SELECT count(*)::int AS n, md5(string_agg(t::text, '|' ORDER BY t::text)) AS digest FROM ${table} t`,
    );
    out[table] = `${rows[0].n}:${rows[0].digest}`;
  }
  const tokensRow = await db.pool.query<{ digest: string }>(
    `SELECT md5(string_agg(concat_ws(',', id, name, role, token_hash, created_at, revoked_at), '|' ORDER BY id)) AS digest FROM api_tokens`,
  );
  out.api_tokens = tokensRow.rows[0].digest;
  const jobs = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM pgboss.job`);
  out['pgboss.job'] = String(jobs.rows[0].n);
  return out;
}

async function request(c: Case): Promise<Response> {
  const headers: Record<string, string> = { ...c.headers };
  if (c.authorization) headers.authorization = c.authorization;
  else if (c.token) headers.authorization = `Bearer ${c.token}`;
  let body: string | undefined;
  if (c.raw !== undefined) body = c.raw;
  else if (c.body !== undefined) body = JSON.stringify(c.body);
  if (body !== undefined) headers['content-type'] = c.contentType ?? 'application/json';
  return (c.target ?? app).request(c.path, { method: c.method, headers, body });
}

test(`${cases.length} malformed requests: every one a 4xx with an error code, and the database unchanged`, async (t) => {
  assert.ok(cases.length >= 200, `at least 200 cases (${cases.length})`);
  const before = await checksum();
  const failures: string[] = [];
  for (const c of cases) {
    const res = await request(c);
    const text = await res.text();
    let body: any;
    try {
      body = JSON.parse(text);
    } catch {
      failures.push(`${c.name}: ${res.status}, body is not JSON: ${text.slice(0, 80)}`);
      continue;
    }
    const code = body?.error?.code;
    const shapeOk =
      body && Object.keys(body).length === 1 && typeof code === 'string' && typeof body.error.message === 'string' &&
      body.error.details !== null && typeof body.error.details === 'object';
    if (res.status < 400 || res.status >= 500) failures.push(`${c.name}: status ${res.status} (${code}: ${body?.error?.message})`);
    else if (!shapeOk) failures.push(`${c.name}: error body has the wrong shape: ${text.slice(0, 120)}`);
    else if (c.status !== undefined && res.status !== c.status) failures.push(`${c.name}: status ${res.status}, expected ${c.status} (${code}: ${body.error.message})`);
    else if (c.code !== undefined && code !== c.code) failures.push(`${c.name}: code ${code}, expected ${c.code} (${body.error.message})`);
  }
  assert.deepEqual(failures, []);
  assert.deepEqual(await checksum(), before, 'no malformed request changed the database');
  t.diagnostic(`${cases.length} cases`);
});

test('the refusals did not block valid work: the same routes still accept good input', async () => {
  const moved = await call('POST', at(pending, 'approve'), tokens.approver.token, { compiled_plan_hash: pending.compiled_plan_hash });
  assert.equal(moved.movement.state, 'APPROVED');
  // Text outside ASCII, surrogate pairs included, is ordinary input.
  const intent = { memo: 'Überweisung 💸 für Q3', 'clé': 'ß' };
  const created = await call('POST', mv, req, { template_key: 'shape', intent });
  assert.deepEqual(created.movement.intent, intent);
});

// ---------------------------------------------------------------------------------------------
// Generated cases: every operation of the OpenAPI document, mutated from a valid base request by a
// seeded generator (test/helpers/fuzz.ts), sent over real HTTP with a bounded pool.

// Fixed, so every run sends the same cases; FERRY_FUZZ_SEED and FERRY_FUZZ_CASES explore others by hand.
const FUZZ_SEED = Number(process.env.FERRY_FUZZ_SEED ?? 0x5eed_f022);
const FUZZ_CASES = Number(process.env.FERRY_FUZZ_CASES ?? 5500);
const FUZZ_CONCURRENCY = 16;

/**
 * A valid request per operation. Where a valid request would change something, the target is one
 * that refuses it anyway (a final state, an unknown signer, a callback already sent), so even a
 * mutation that failed to invalidate the request could not change the database.
 */
const fuzzBase: Record<string, BaseRequest> = {
  'POST /v3/templates': { path: {}, body: template },
  'GET /v3/templates': { path: {} },
  'GET /v3/templates/{key}': { path: { key: 'shape' } },
  'GET /v3/templates/{key}/versions/{version}': { path: { key: 'shape', version: '1' } },
  'POST /v3/templates/{key}/compile': { path: { key: 'shape' }, body: { intent: { n: 1 }, input_params: {}, template_version: 1 } },
  'POST /v3/movements': { path: {}, body: { template_key: 'shape', intent: { n: 1 }, input_params: {}, template_version: 1, callback_url: 'http://127.0.0.1:9/cb' } },
  'GET /v3/movements': { path: {}, query: { state: 'PENDING_APPROVAL', template_key: 'shape', limit: '5' } },
  'GET /v3/movements/{id}': { path: { id: pending.id } },
  'GET /v3/movements/{id}/transitions': { path: { id: pending.id }, query: { limit: '5' } },
  'POST /v3/movements/{id}/approve': { path: { id: rejected.id }, body: { compiled_plan_hash: rejected.compiled_plan_hash }, safeTarget: true },
  'POST /v3/movements/{id}/reject': { path: { id: rejected.id }, body: { reason: 'no' }, safeTarget: true },
  'POST /v3/movements/{id}/cancel': { path: { id: cancelled.id }, body: { reason: 'no' }, safeTarget: true },
  'POST /v3/movements/{id}/resume': { path: { id: cancelled.id }, body: {}, safeTarget: true },
  'POST /v3/movements/{id}/retry': { path: { id: cancelled.id }, body: { node_key: 'a' }, safeTarget: true },
  'GET /v3/executors': { path: {} },
  'GET /v3/signers': { path: {} },
  'PUT /v3/signers/{signer_key}/expected-identity': { path: { signer_key: 'ghost' }, body: { address: `0x${'1'.repeat(40)}` }, safeTarget: true },
  'GET /v3/callbacks': { path: {}, query: { status: 'sent', movement_id: approved.id, limit: '5' } },
  'POST /v3/callbacks/{id}/redrive': { path: { id: sentCallback }, body: {}, safeTarget: true },
  'GET /v3/audit-events': { path: {}, query: { order: 'desc', entity_type: 'movement', limit: '5' } },
  'GET /v3/workers': { path: {} },
  'GET /v3/balances': { path: {}, query: { chain: 'sim', limit: '5' } },
  'GET /v3/attention': { path: {}, query: { kind: 'drift', limit: '5' } },
  'GET /v3/attention/waiting-too-long': { path: {}, query: { limit: '5' } },
  // Operator channels: a valid create or change of a configured channel's name is refused; the delete's target does not exist.
  'GET /v3/operator-channels': { path: {} },
  'GET /v3/operator-channels/{name}': { path: { name: 'fuzz-cfg' } },
  'POST /v3/operator-channels': { path: {}, body: { name: 'fuzz-cfg', kind: 'slack', url: 'http://127.0.0.1:9/services/x' }, safeTarget: true },
  'PATCH /v3/operator-channels/{name}': { path: { name: 'fuzz-cfg' }, body: { rate_limit_per_minute: 5 }, safeTarget: true },
  'DELETE /v3/operator-channels/{name}': { path: { name: 'nobody-here' }, safeTarget: true },
  'GET /v3/cex-transfers': { path: {}, query: { venue: 'ex1', limit: '5' } },
  'GET /v3/registry-drift': { path: {}, query: { lane: 'evm', state: 'all', limit: '5' } },
  'GET /v3/balances/history': { path: {}, query: { chain: 'sim', address: 'nobody', asset: 'USDC', bucket: 'hour', limit: '5' } },
  'GET /v3/template-proposals': { path: {}, query: { state: 'FINALIZED', template_key: 'shape', limit: '5' } },
  'GET /v3/template-proposals/{id}': { path: { id: finalizedProposal.id } },
  'POST /v3/template-proposals/{id}/approve': { path: { id: finalizedProposal.id }, body: {}, safeTarget: true },
  'POST /v3/template-proposals/{id}/challenge': { path: { id: finalizedProposal.id }, body: { reason: 'no' }, safeTarget: true },
  'POST /v3/template-proposals/{id}/withdraw': { path: { id: finalizedProposal.id }, body: {}, safeTarget: true },
  // An existing name: a valid request is refused as a duplicate.
  'POST /v3/principals': { path: {}, body: { name: 'admin-m', kind: 'person' }, safeTarget: true },
  'GET /v3/principals': { path: {}, query: { include_disabled: 'true' } },
  'POST /v3/principals/{principal}/disable': { path: { principal: 'nobody-here' }, body: {}, safeTarget: true },
  'POST /v3/tokens': { path: {}, body: { principal: 'nobody-here', role: 'viewer' }, safeTarget: true },
  'GET /v3/tokens': { path: {}, query: { principal: 'admin-m', include_revoked: 'true' } },
  'POST /v3/tokens/{token}/revoke': { path: { token: 'revoked-m' }, body: {}, safeTarget: true },
  'GET /v3/credential-proposals': { path: {}, query: { state: 'REJECTED', limit: '5' } },
  'GET /v3/credential-proposals/{id}': { path: { id: decidedCredential.id } },
  'POST /v3/credential-proposals/{id}/confirm': { path: { id: decidedCredential.id }, body: {}, safeTarget: true },
  'POST /v3/credential-proposals/{id}/reject': { path: { id: decidedCredential.id }, body: { reason: 'no' }, safeTarget: true },
  'POST /v3/callback-destinations': { path: {}, body: { name: 'fuzz-target', url: 'http://127.0.0.1:9/cb' }, safeTarget: true },
  'GET /v3/callback-destinations': { path: {} },
  'GET /v3/callback-destinations/{id}': { path: { id: destination.id } },
  'POST /v3/callback-destinations/{id}/rotate-secret': { path: { id: destination.id }, body: { overlap_seconds: 60 }, safeTarget: true },
  'POST /v3/callback-destinations/{id}/disable': { path: { id: UNKNOWN }, body: {}, safeTarget: true },
  'GET /v3/reconciliation': { path: {}, query: { state: 'all' } },
  'GET /v3/movements/{id}/resolutions': { path: { id: cancelled.id } },
  'POST /v3/movements/{id}/resolutions': { path: { id: cancelled.id }, body: { node_key: 'a', resolution: 'fail', reason: 'no' }, safeTarget: true },
  'POST /v3/movements/{id}/resolutions/{resolution_id}/confirm': { path: { id: cancelled.id, resolution_id: UNKNOWN }, body: {}, safeTarget: true },
  'GET /v3/policy/address-book': { path: {} },
  'POST /v3/policy/address-book': { path: {}, body: fuzzEntry, safeTarget: true },
  'POST /v3/policy/address-book/{name}/remove': { path: { name: 'fuzz-cold' }, body: {}, safeTarget: true },
  'GET /v3/policy/rules': { path: {} },
  'POST /v3/policy/rules': { path: {}, body: fuzzRules, safeTarget: true },
  'GET /v3/policy/proposals': { path: {}, query: { limit: '5' } },
  'GET /v3/policy/proposals/{id}': { path: { id: decidedPolicy.id } },
  'POST /v3/policy/proposals/{id}/approve': { path: { id: decidedPolicy.id }, body: {}, safeTarget: true },
  'POST /v3/policy/proposals/{id}/challenge': { path: { id: decidedPolicy.id }, body: { reason: 'no' }, safeTarget: true },
  'POST /v3/policy/proposals/{id}/reject': { path: { id: decidedPolicy.id }, body: { reason: 'no' }, safeTarget: true },
  'POST /v3/policy/proposals/{id}/withdraw': { path: { id: decidedPolicy.id }, body: {}, safeTarget: true },
  'POST /v3/policy/proposals/{id}/finalize': { path: { id: decidedPolicy.id }, body: {}, safeTarget: true },
  'POST /v3/policy/test': { path: {}, body: { template_key: 'shape', intent: { n: 1 } } },
  // Standing orders: a valid order whose destination is not (yet) in the book is refused; the revoked order takes nothing.
  'GET /v3/standing-orders': { path: {}, query: { limit: '5' } },
  'GET /v3/standing-orders/{id}': { path: { id: revokedOrder.id } },
  'POST /v3/standing-orders': { path: {}, body: fuzzOrder, safeTarget: true },
  'POST /v3/standing-orders/{id}/approve': { path: { id: revokedOrder.id }, body: {}, safeTarget: true },
  'POST /v3/standing-orders/{id}/reject': { path: { id: revokedOrder.id }, body: { reason: 'no' }, safeTarget: true },
  'POST /v3/standing-orders/{id}/pause': { path: { id: revokedOrder.id }, body: {}, safeTarget: true },
  'POST /v3/standing-orders/{id}/resume': { path: { id: revokedOrder.id }, body: {}, safeTarget: true },
  'POST /v3/standing-orders/{id}/revoke': { path: { id: revokedOrder.id }, body: {}, safeTarget: true },
  // A cancelled movement's node: a valid request is refused (not a gate, not running).
  'POST /v3/movements/{id}/gates/{node_key}/confirm': { path: { id: cancelled.id, node_key: 'a' }, body: { note: 'checked' }, safeTarget: true },
  'POST /v3/movements/{id}/gates/{node_key}/skip': { path: { id: cancelled.id, node_key: 'a' }, body: { reason: 'not needed' }, safeTarget: true },
};

test(`${FUZZ_CASES} generated malformed requests over HTTP across every OpenAPI operation: each a 4xx with a code, the database unchanged`, async (t) => {
  const doc = await (await app.request('/openapi.json')).json();
  const ops = operationsOf(doc);
  assert.ok(ops.length >= 20, `the document lists the operations (${ops.length})`);
  const fuzzCases = generateCases(ops, fuzzBase, { tokens: Object.fromEntries(roles.map((r) => [r, tokens[r].token])), grants, revokedToken: revoked.token, maxBodyBytes: config.maxBodyBytes }, FUZZ_CASES, FUZZ_SEED);
  assert.equal(fuzzCases.length, FUZZ_CASES);
  assert.deepEqual(generateCases(ops, fuzzBase, { tokens: Object.fromEntries(roles.map((r) => [r, tokens[r].token])), grants, revokedToken: revoked.token, maxBodyBytes: config.maxBodyBytes }, 50, FUZZ_SEED), fuzzCases.slice(0, 50), 'the same seed gives the same cases');
  for (const op of ops) assert.ok(fuzzCases.some((c) => c.name.includes(` ${op.method} ${op.path} `)), `${op.method} ${op.path} is fuzzed`);

  const { url: base, stop } = await serveApp(app);
  const before = await checksum();
  const failures: string[] = [];
  const statuses = new Map<number, number>();
  const started = Date.now();
  const byFamily = new Map<string, number>();
  const one = async (c: FuzzCase) => {
    const t0 = Date.now();
    const family = / (\S+): /.exec(c.name.slice(c.name.indexOf('/')))?.[1] ?? '?';
    try {
      await send(c);
    } finally {
      byFamily.set(family, (byFamily.get(family) ?? 0) + Date.now() - t0);
    }
  };
  const send = async (c: FuzzCase) => {
    let res: Response;
    try {
      res = await fetch(base + c.url, { method: c.method, headers: c.headers, body: c.body });
    } catch (err) {
      failures.push(`${c.name}: the request failed: ${(err as Error).message}`);
      return;
    }
    const text = await res.text();
    statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
    let body: any;
    try {
      body = JSON.parse(text);
    } catch {
      failures.push(`${c.name}: ${res.status}, body is not JSON: ${text.slice(0, 80)}`);
      return;
    }
    const code = body?.error?.code;
    if (res.status < 400 || res.status >= 500) failures.push(`${c.name}: status ${res.status} (${code}: ${body?.error?.message})`);
    else if (typeof code !== 'string' || !/^[A-Z_]+$/.test(code) || typeof body.error.message !== 'string') failures.push(`${c.name}: no error code: ${text.slice(0, 120)}`);
    else if (c.status !== undefined && res.status !== c.status) failures.push(`${c.name}: status ${res.status}, expected ${c.status} (${code}: ${body.error.message})`);
    else if (c.code !== undefined && code !== c.code) failures.push(`${c.name}: code ${code}, expected ${c.code} (${body.error.message})`);
  };
  try {
    let next = 0;
    await Promise.all(
      Array.from({ length: FUZZ_CONCURRENCY }, async () => {
        while (next < fuzzCases.length) await one(fuzzCases[next++]);
      }),
    );
  } finally {
    await stop();
  }
  const elapsed = Date.now() - started;
  assert.deepEqual(failures.slice(0, 40), [], `${failures.length} of ${fuzzCases.length} cases failed`);
  assert.deepEqual(await checksum(), before, 'no generated request changed the database');
  t.diagnostic(`${fuzzCases.length} cases in ${elapsed} ms; statuses ${JSON.stringify(Object.fromEntries([...statuses].sort()))}`);
  t.diagnostic(`request time by family (ms, summed over the pool): ${JSON.stringify(Object.fromEntries([...byFamily].sort((a, b) => b[1] - a[1])))}`);
});
