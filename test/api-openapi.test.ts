/**
 * The published contract: /openapi.json lists every /v3 route the app serves, its references
 * resolve, and /docs is a working Swagger UI served entirely by Ferry (no CDN).
 */
// First on purpose: the plan schemas are built before @hono/zod-openapi is loaded, as happens when a
// process imports the plan modules before the HTTP layer. The API must still build and validate.
import '../src/plan/template-schema.ts';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { loadConfig } from '../src/config.ts';
import { createApp } from '../src/http/app.ts';
import { can, permissions } from '../src/services/permissions.ts';
import { createToken, revokeToken, roles } from '../src/persistence/tokens.ts';
import { testDatabase } from './helpers/db.ts';

const db = await testDatabase();
// No runtime: the documents must not depend on it, and changes must say it is missing.
// The permission matrix sends a revoked and an expired token to every operation from one in-process
// address; it checks each operation's answer (401), so the per-address throttle is raised out of its way.
const app = createApp({ pool: db.pool, config: loadConfig({ FERRY_DATA_DIR: '.ferry/test-api-openapi', FERRY_AUTH_FAILURE_LIMIT: '1000000' }) });

const expectedOperations = [
  'post /v3/templates',
  'get /v3/templates',
  'get /v3/templates/{key}',
  'get /v3/templates/{key}/versions/{version}',
  'post /v3/templates/{key}/compile',
  'post /v3/movements',
  'get /v3/movements',
  'get /v3/movements/{id}',
  'get /v3/movements/{id}/transitions',
  'post /v3/movements/{id}/approve',
  'post /v3/movements/{id}/reject',
  'post /v3/movements/{id}/cancel',
  'post /v3/movements/{id}/resume',
  'post /v3/movements/{id}/retry',
  'get /v3/executors',
  'get /v3/signers',
  'get /v3/standing-orders',
  'get /v3/standing-orders/{id}',
  'put /v3/signers/{signer_key}/expected-identity',
  'get /v3/callbacks',
  'post /v3/callbacks/{id}/redrive',
  'post /v3/callback-destinations',
  'get /v3/callback-destinations',
  'get /v3/callback-destinations/{id}',
  'post /v3/callback-destinations/{id}/rotate-secret',
  'post /v3/callback-destinations/{id}/disable',
  'get /v3/audit-events',
  // Operator notifications and movements waiting too long.
  'get /v3/attention',
  'get /v3/attention/waiting-too-long',
  // Operator channels (admin only).
  'get /v3/operator-channels',
  'post /v3/operator-channels',
  'get /v3/operator-channels/{name}',
  'patch /v3/operator-channels/{name}',
  'delete /v3/operator-channels/{name}',
  'get /v3/workers',
  'get /v3/balances',
  'get /v3/balances/history',
  'get /v3/cex-transfers',
  'get /v3/registry-drift',
  'get /v3/template-proposals',
  'get /v3/template-proposals/{id}',
  'post /v3/template-proposals/{id}/approve',
  'post /v3/template-proposals/{id}/challenge',
  'post /v3/template-proposals/{id}/withdraw',
  'get /v3/policy/address-book',
  'post /v3/policy/address-book',
  'post /v3/policy/address-book/{name}/remove',
  'get /v3/policy/rules',
  'post /v3/policy/rules',
  'get /v3/policy/proposals',
  'get /v3/policy/proposals/{id}',
  'post /v3/policy/proposals/{id}/approve',
  'post /v3/policy/proposals/{id}/challenge',
  'post /v3/policy/proposals/{id}/reject',
  'post /v3/policy/proposals/{id}/withdraw',
  'post /v3/policy/proposals/{id}/finalize',
  'post /v3/policy/test',
  'post /v3/principals',
  'get /v3/principals',
  'post /v3/principals/{principal}/disable',
  'post /v3/standing-orders',
  'post /v3/standing-orders/{id}/approve',
  'post /v3/standing-orders/{id}/pause',
  'post /v3/standing-orders/{id}/reject',
  'post /v3/standing-orders/{id}/resume',
  'post /v3/standing-orders/{id}/revoke',
  'post /v3/tokens',
  'get /v3/tokens',
  'post /v3/tokens/{token}/revoke',
  'get /v3/credential-proposals',
  'get /v3/credential-proposals/{id}',
  'post /v3/credential-proposals/{id}/confirm',
  'post /v3/credential-proposals/{id}/reject',
  // Reconciliation drifts and manual-intervention resolutions.
  'get /v3/reconciliation',
  'get /v3/movements/{id}/resolutions',
  'post /v3/movements/{id}/resolutions',
  'post /v3/movements/{id}/resolutions/{resolution_id}/confirm',
  // Manual gates.
  'post /v3/movements/{id}/gates/{node_key}/confirm',
  'post /v3/movements/{id}/gates/{node_key}/skip',
];

async function fetchDoc(): Promise<any> {
  const res = await app.request('/openapi.json');
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /application\/json/);
  return JSON.parse(await res.text());
}

function operations(doc: any): string[] {
  const out: string[] = [];
  for (const [path, item] of Object.entries<Record<string, unknown>>(doc.paths)) {
    for (const method of Object.keys(item)) if (['get', 'post', 'put', 'patch', 'delete'].includes(method)) out.push(`${method} ${path}`);
  }
  return out.sort();
}

test('the OpenAPI 3.1 document is JSON, served without a token, and lists every /v3 route', async () => {
  const doc = await fetchDoc();
  assert.equal(doc.openapi, '3.1.0');
  assert.equal(doc.info.title, 'Ferry API');
  assert.deepEqual(operations(doc).filter((o) => o.includes(' /v3/')), [...expectedOperations].sort());

  // Every /v3 route the app actually serves is in the document (none was registered outside OpenAPI).
  const served = new Set(
    app.routes
      .filter((r) => r.path.startsWith('/v3/') && r.method !== 'ALL')
      .map((r) => `${r.method.toLowerCase()} ${r.path.replace(/:([A-Za-z_]+)/g, '{$1}')}`),
  );
  assert.deepEqual([...served].sort(), [...expectedOperations].sort());
});

test('every operation requires the bearer token and documents the error shape; every $ref resolves', async () => {
  const doc = await fetchDoc();
  assert.deepEqual(doc.components.securitySchemes.bearerAuth, { type: 'http', scheme: 'bearer', description: doc.components.securitySchemes.bearerAuth.description });
  for (const op of expectedOperations) {
    const [method, path] = op.split(' ');
    const operation = doc.paths[path][method];
    assert.deepEqual(operation.security, [{ bearerAuth: [] }], op);
    assert.ok(operation.responses['401'], `${op} documents 401`);
    assert.ok(operation.summary, `${op} has a summary`);
    const okStatus = Object.keys(operation.responses).find((s) => s.startsWith('2'));
    assert.ok(okStatus, `${op} documents its success`);
    for (const [status, response] of Object.entries<any>(operation.responses)) {
      if (Number(status) >= 400) assert.equal(response.content['application/json'].schema.$ref, '#/components/schemas/Error', `${op} ${status}`);
    }
    for (const param of operation.parameters ?? []) {
      if (param.in === 'path') assert.ok(path.includes(`{${param.name}}`), `${op} path parameter ${param.name}`);
    }
  }
  // The strict request schemas are published as strict.
  assert.equal(doc.components.schemas.CreateMovementRequest.additionalProperties, false);
  assert.equal(doc.components.schemas.TemplateDefinition.additionalProperties, false);
  assert.deepEqual(doc.components.schemas.ApproveRequest.required, ['compiled_plan_hash']);

  const refs: string[] = [];
  const walk = (v: unknown) => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === 'object') {
      for (const [k, child] of Object.entries(v)) {
        if (k === '$ref' && typeof child === 'string') refs.push(child);
        else walk(child);
      }
    }
  };
  walk(doc);
  assert.ok(refs.length > 20);
  for (const ref of refs) {
    const [, kind, name] = /^#\/components\/([^/]+)\/(.+)$/.exec(ref) ?? [];
    assert.ok(kind && doc.components[kind]?.[name], `${ref} resolves`);
  }
});

test('one paging scheme: every paged list takes limit and an opaque cursor and answers next_cursor', async () => {
  const doc = await fetchDoc();
  const paged = expectedOperations.filter((op) => {
    const [method, path] = op.split(' ');
    return (doc.paths[path][method].parameters ?? []).some((p: any) => p.in === 'query' && p.name === 'cursor');
  });
  assert.deepEqual(paged.sort(), [
    'get /v3/audit-events',
    'get /v3/balances',
    'get /v3/callbacks',
    'get /v3/movements',
    'get /v3/movements/{id}/transitions',
    'get /v3/template-proposals',
  ]);
  for (const op of paged) {
    const [method, path] = op.split(' ');
    const operation = doc.paths[path][method];
    const params = new Map<string, any>(operation.parameters.filter((p: any) => p.in === 'query').map((p: any) => [p.name, p]));
    assert.equal(params.get('limit')?.schema.type, 'integer', `${op} limit`);
    assert.equal(params.get('cursor')?.schema.type, 'string', `${op} cursor`);
    const ref: string = operation.responses['200'].content['application/json'].schema.$ref;
    const page = doc.components.schemas[ref.split('/').pop()!];
    assert.deepEqual(page.properties.next_cursor.type, ['string', 'null'], `${op} next_cursor`);
    assert.ok(page.required.includes('next_cursor'), `${op} next_cursor is always there`);
  }
  // The transition a page shows is the one /inspect shows: no state before an entity's creation is null.
  assert.deepEqual(doc.components.schemas.Transition.properties.from_state.type, ['string', 'null']);
});

test('a route\'s own error answers are kept beside the common ones', async () => {
  const doc = await fetchDoc();
  const approve = doc.paths['/v3/movements/{id}/approve'].post.responses;
  assert.match(approve['403'].description, /FOUR_EYES_VIOLATION/);
  assert.match(approve['409'].description, /STALE_PLAN_HASH/);
  assert.ok(approve['400'] && approve['503'], 'and the common ones are there too');
  assert.match(doc.paths['/v3/movements/{id}/cancel'].post.responses['403'].description, /NOT_MOVEMENT_OWNER/);
});

test('/docs serves Swagger UI and every asset it loads from Ferry itself', async () => {
  const res = await app.request('/docs');
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /text\/html/);
  const html = await res.text();
  assert.doesNotMatch(html, /https?:\/\//, 'no external URL: the page works offline');
  const assets = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]);
  assert.ok(assets.includes('/docs/assets/swagger-ui-bundle.js'));
  assert.ok(assets.includes('/docs/assets/swagger-ui.css'));

  const dist = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
  for (const asset of assets) {
    const r = await app.request(asset);
    assert.equal(r.status, 200, asset);
    const bytes = Buffer.from(await r.arrayBuffer());
    const name = asset.split('/').pop()!;
    if (name === 'docs-init.js') {
      assert.match(bytes.toString('utf8'), /url: "\/openapi\.json"/);
      assert.match(bytes.toString('utf8'), /validatorUrl: null/, 'no outside validator is called');
      assert.doesNotMatch(bytes.toString('utf8'), /https?:\/\//);
      assert.match(r.headers.get('content-type') ?? '', /javascript/);
    } else {
      assert.ok(bytes.equals(await readFile(join(dist, name))), `${asset} is the packaged file`);
    }
  }
  assert.equal((await app.request('/docs/assets/package.json')).status, 404);
  assert.equal((await app.request('/docs/assets/..%2F..%2Fpackage.json')).status, 404);
  const missing = await app.request('/docs/assets/index.html');
  assert.equal(missing.status, 404);
  assert.equal(((await missing.json()) as any).error.code, 'NOT_FOUND');
});

test('without the runtime, reads work and changes answer 503 with a code', async () => {
  const viewer = await createToken(db.pool, { name: 'viewer', role: 'viewer' });
  const admin = await createToken(db.pool, { name: 'admin', role: 'admin' });
  const list = await app.request('/v3/movements', { headers: { authorization: `Bearer ${viewer.token}` } });
  assert.equal(list.status, 200);
  assert.deepEqual(await list.json(), { movements: [], next_cursor: null });
  const create = await app.request('/v3/movements', {
    method: 'POST',
    headers: { authorization: `Bearer ${admin.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ template_key: 'any', intent: {} }),
  });
  assert.equal(create.status, 503);
  assert.equal(((await create.json()) as any).error.code, 'SERVICE_UNAVAILABLE');

  // Input is still validated first, with the template schema built before the OpenAPI layer loaded.
  const post = (body: unknown) =>
    app.request('/v3/templates', {
      method: 'POST',
      headers: { authorization: `Bearer ${admin.token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  const bad = await post({ template_key: 'x', nodes: [], colour: 'red' });
  assert.equal(bad.status, 400);
  assert.equal(((await bad.json()) as any).error.code, 'VALIDATION_FAILED');
  const good = await post({ template_key: 'x', nodes: [{ node_key: 'a', node_kind: 'action', action_type: 'sim_action', executor_binding: 'exec.sim.action' }] });
  assert.equal(good.status, 503);
});

test('every operation names its permission (x-ferry-permission), and the server enforces exactly that for every role', async () => {
  const doc = await fetchDoc();
  const tokens: Record<string, string> = {};
  for (const role of roles) tokens[role] = (await createToken(db.pool, { name: `matrix-${role}`, role })).token;
  const revoked = await createToken(db.pool, { name: 'matrix-revoked', role: 'admin' });
  await revokeToken(db.pool, revoked.id);
  // Expired a second ago (created with an expiry, then backdated): refused exactly like a revoked one.
  const expired = await createToken(db.pool, { name: 'matrix-expired', role: 'admin', expiresAt: new Date(Date.now() + 3_600_000) });
  await db.pool.query(`UPDATE api_tokens SET expires_at = now() - interval '1 second' WHERE id = $1`, [expired.id]);
  const ids = {
    id: '00000000-0000-4000-8000-000000000000',
    key: 'matrix.none',
    version: '1',
    signer_key: 'none',
    principal: 'matrix-nobody',
    token: 'matrix-none',
    resolution_id: '00000000-0000-4000-8000-000000000001',
  };

  let checked = 0;
  for (const [path, item] of Object.entries<Record<string, any>>(doc.paths)) {
    // /healthz and /readyz are public, /metrics needs read (test/metrics-endpoint.test.ts).
    if (!path.startsWith('/v3/')) continue;
    for (const [method, op] of Object.entries<any>(item)) {
      const permission = op['x-ferry-permission'];
      assert.ok((permissions as readonly string[]).includes(permission), `${method} ${path} names a known permission: ${permission}`);
      const url = path.replace(/\{(\w+)\}/g, (_, name: keyof typeof ids) => ids[name]);
      const call = (token?: string) =>
        app.request(url, {
          method: method.toUpperCase(),
          headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(method === 'get' ? {} : { 'content-type': 'application/json' }) },
          ...(method === 'get' ? {} : { body: '{}' }),
        });
      const refusedMessages = new Set<string>();
      for (const token of [undefined, revoked.token, expired.token]) {
        const res = await call(token);
        assert.equal(res.status, 401, `${method} ${path} without a valid token`);
        refusedMessages.add(((await res.json()) as any).error.message);
      }
      assert.equal(refusedMessages.size, 1, `${method} ${path}: no token, a revoked and an expired one get one answer`);
      for (const role of roles) {
        const res = await call(tokens[role]);
        const body = res.status === 403 ? ((await res.json()) as any) : null;
        if (can(role, permission)) assert.notEqual(body?.error.code, 'FORBIDDEN', `${role} may ${method} ${path} (${permission})`);
        else assert.equal(body?.error.code, 'FORBIDDEN', `${role} may not ${method} ${path} (${permission}); got ${res.status}`);
        checked++;
      }
    }
  }
  assert.equal(checked, expectedOperations.length * roles.length);
});
