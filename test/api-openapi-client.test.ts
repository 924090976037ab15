/**
 * The published OpenAPI document as outside tools read it: Redocly's linter finds no error in it,
 * and a client generated from it (openapi-typescript types, openapi-fetch calls) compiles under
 * strict TypeScript and creates, approves and reads a movement against a running Ferry, with nested
 * intent objects typed as JSON (not `Record<string, never>`) and every operation named.
 */
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { after, test } from 'node:test';
import openapiTS, { astToString } from 'openapi-typescript';
import { appForFile } from './helpers/app.ts';
import { expectStatus, callerFor, serveApp } from './helpers/http.ts';
import { makeTemplateLive } from './helpers/templates.ts';
import { createTokens } from './helpers/tokens.ts';

const require = createRequire(import.meta.url);
const root = join(dirname(new URL(import.meta.url).pathname), '..');
// Under the project, so the generated client resolves openapi-fetch from its node_modules.
const work = join(root, '.tmp', `openapi-client-${process.pid}`);
after(() => rm(work, { recursive: true, force: true }));

const { db, app } = await appForFile({ FERRY_DATA_DIR: '.ferry/test-api-openapi-client' }, { workers: false });
const tokens = await createTokens(db.pool, { requester: 'requester', approver: 'approver', operator: 'operator' });
const call = callerFor(app, tokens);
const template = {
  template_key: 'generated-client',
  nodes: [{ node_key: 'a', node_kind: 'action', action_type: 'sim_action', executor_binding: 'exec.sim.action' }],
};
await makeTemplateLive(app, db.pool, template, { proposer: tokens.operator.token, approver: tokens.approver.token });

async function servedDocument(): Promise<Record<string, any>> {
  const res = await app.request('/openapi.json');
  assert.equal(res.status, 200);
  return (await res.json()) as Record<string, any>;
}

/** Runs a package's command with this Node.js (the one Ferry needs), sending nothing out. */
function runBin(script: string, args: string[], cwd = work) {
  return spawnSync(process.execPath, [script, ...args], {
    cwd,
    encoding: 'utf8',
    timeout: 120_000,
    env: {
      ...process.env,
      REDOCLY_TELEMETRY: 'off',
      REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true',
      REDOCLY_SUPPRESS_NOTIFICATIONS: 'true',
      NO_COLOR: '1',
    },
  });
}

test('every operation has a unique operationId; the document names servers and a license', async () => {
  const doc = await servedDocument();
  const ids: string[] = [];
  for (const [path, item] of Object.entries<Record<string, any>>(doc.paths)) {
    for (const [method, op] of Object.entries<any>(item)) {
      assert.ok(typeof op.operationId === 'string' && op.operationId.length > 0, `${method} ${path} has an operationId`);
      ids.push(op.operationId);
    }
  }
  assert.ok(ids.length >= 49, `${ids.length} operations`);
  assert.equal(new Set(ids).size, ids.length, 'operationIds are unique');
  assert.deepEqual(doc.servers, [{ url: '/', description: 'The Ferry instance serving this document' }]);
  assert.equal(doc.info.license.name, 'Apache-2.0');
  for (const p of ['/healthz', '/readyz', '/metrics']) assert.ok(doc.paths[p]?.get, `${p} is documented`);
  assert.ok(doc.webhooks?.movementCallback?.post, 'the callback is documented under webhooks');
  const createOp = doc.paths['/v3/movements'].post;
  for (const status of ['500', 'default']) assert.ok(createOp.responses[status], `error answer ${status}`);
});

test('Redocly lint finds no error in the document', async () => {
  await mkdir(work, { recursive: true });
  const file = join(work, 'openapi.json');
  await writeFile(file, JSON.stringify(await servedDocument()));
  const cli = require.resolve('@redocly/cli/bin/cli.js');
  const run = runBin(cli, ['lint', file, '--format=json']);
  assert.equal(run.error, undefined, String(run.error));
  const report = JSON.parse(run.stdout.slice(run.stdout.indexOf('{')));
  const errors = (report.problems as Array<{ severity: string; ruleId: string; message: string; location?: Array<{ pointer: string }> }>)
    .filter((p) => p.severity === 'error')
    .map((p) => `${p.ruleId}: ${p.message} at ${p.location?.[0]?.pointer}`);
  assert.deepEqual(errors, [], 'no lint errors');
  assert.equal(run.status, 0, run.stderr);
});

test('a client generated with openapi-typescript and openapi-fetch creates, approves and reads a movement', async () => {
  await mkdir(work, { recursive: true });
  const types = astToString(await openapiTS((await servedDocument()) as Parameters<typeof openapiTS>[0] & object));
  await writeFile(join(work, 'schema.ts'), types);
  // Written as a user of the generated client would: it must compile under strict TypeScript.
  await writeFile(
    join(work, 'client.ts'),
    `import createClient from 'openapi-fetch';
import type { components, operations, paths } from './schema.ts';

type Json = components['schemas']['JsonValue'];
// Nested JSON is typed as JSON: with an any-JSON schema of bare types this object would not be assignable.
const nested: { route: { hops: Array<{ chain: string; amount: string }> }; tags: string[]; memo: null } = {
  route: { hops: [{ chain: 'sim', amount: '1.5' }] },
  tags: ['generated'],
  memo: null,
};
const asJson: Json = nested;
// Every operation has a name to call it by.
type Create = operations['createMovement'];
type Approve = operations['approveMovement'];
type Read = operations['getMovement'];
const names: Array<keyof operations> = ['createMovement', 'approveMovement', 'getMovement', 'listMovements'];

declare const process: { argv: string[] };
const [baseUrl, requester, approver] = process.argv.slice(2) as [string, string, string];
const as = (token: string) => createClient<paths>({ baseUrl, headers: { authorization: \`Bearer \${token}\` } });

const createBody: Create['requestBody'] extends { content: { 'application/json': infer B } } ? B : never = {
  template_key: 'generated-client',
  intent: { amount: '1', detail: asJson },
};
const created = await as(requester).POST('/v3/movements', { body: createBody });
if (!created.data) throw new Error('create failed: ' + JSON.stringify(created.error));
const movement = created.data.movement;
const approveBody: Approve['requestBody'] extends { content: { 'application/json': infer B } } ? B : never = {
  compiled_plan_hash: movement.compiled_plan_hash,
};
const approved = await as(approver).POST('/v3/movements/{id}/approve', { params: { path: { id: movement.id } }, body: approveBody });
if (!approved.data) throw new Error('approve failed: ' + JSON.stringify(approved.error));
const read = await as(requester).GET('/v3/movements/{id}', { params: { path: { id: movement.id } } });
if (!read.data) throw new Error('read failed: ' + JSON.stringify(read.error));
const got: Read['responses'][200]['content']['application/json'] = read.data;
const hops = (got.movement.intent.detail as typeof nested).route.hops;
// A typed error answer: the stable code of a bad id.
const bad = await as(requester).GET('/v3/movements/{id}', { params: { path: { id: 'not-a-uuid' } } });
console.log(JSON.stringify({
  id: movement.id,
  approval: got.movement.approval_status,
  hops,
  badStatus: bad.response.status,
  badCode: bad.error?.error.code,
  names,
}));
`,
  );
  await writeFile(
    join(work, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        strict: true,
        noEmit: true,
        target: 'es2022',
        module: 'nodenext',
        moduleResolution: 'nodenext',
        allowImportingTsExtensions: true,
        skipLibCheck: true,
        types: [],
        lib: ['es2022', 'dom'],
      },
      files: ['client.ts', 'schema.ts'],
    }),
  );
  await writeFile(join(work, 'package.json'), JSON.stringify({ type: 'module', private: true }));

  const tsc = runBin(require.resolve('typescript/bin/tsc'), ['-p', join(work, 'tsconfig.json')]);
  assert.equal(tsc.status, 0, `the generated client compiles:\n${tsc.stdout}${tsc.stderr}`);

  const { url, stop } = await serveApp(app);
  try {
    // Asynchronously: the server answering the client runs in this process.
    const run = await promisify(execFile)(process.execPath, ['--import', 'tsx', join(work, 'client.ts'), url, tokens.requester.token, tokens.approver.token], {
      cwd: root,
      encoding: 'utf8',
      timeout: 60_000,
    });
    const out = JSON.parse(run.stdout.trim().split('\n').at(-1)!);
    assert.equal(out.approval, 'approved');
    assert.deepEqual(out.hops, [{ chain: 'sim', amount: '1.5' }], 'nested intent survives the round trip');
    assert.deepEqual([out.badStatus, out.badCode], [400, 'VALIDATION_FAILED'], 'a non-UUID id is bad input, not a 404');
    const row = await call('GET', `/v3/movements/${out.id}`, 'requester');
    expectStatus(row, 200);
    assert.equal(row.body.movement.approval_status, 'approved');
  } finally {
    await stop();
  }
});

test('a non-UUID id is 400 VALIDATION_FAILED naming the parameter; another method on a route path is 405 with Allow', async () => {
  const bad = await call('GET', '/v3/movements/not-a-uuid', 'requester');
  expectStatus(bad, 400, 'VALIDATION_FAILED');
  assert.match(JSON.stringify(bad.body.error.details), /"id"/);
  expectStatus(await call('POST', '/v3/callbacks/123/redrive', 'operator', {}), 400, 'VALIDATION_FAILED');
  expectStatus(await call('GET', '/v3/movements/00000000-0000-4000-8000-000000000000', 'requester'), 404, 'NOT_FOUND');

  const send = (method: string, path: string) =>
    app.request(path, { method, headers: { authorization: `Bearer ${tokens.operator.token}`, 'content-type': 'application/json' }, body: method === 'PUT' ? '{}' : undefined });
  const del = await send('DELETE', '/v3/movements/00000000-0000-4000-8000-000000000000');
  assert.equal(del.status, 405);
  assert.equal(((await del.json()) as any).error.code, 'METHOD_NOT_ALLOWED');
  assert.equal(del.headers.get('allow'), 'GET, HEAD');
  const put = await send('PUT', '/v3/movements');
  assert.equal(put.status, 405);
  assert.equal(put.headers.get('allow'), 'GET, HEAD, POST');
  expectStatus(await call('DELETE', '/v3/no-such-thing', 'operator'), 404, 'NOT_FOUND');
  const anonymous = await app.request('/v3/movements/00000000-0000-4000-8000-000000000000', { method: 'DELETE' });
  assert.equal(anonymous.status, 401, 'an unauthenticated caller learns nothing about the paths');
});
