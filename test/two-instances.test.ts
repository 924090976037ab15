import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { DEMO_TEMPLATE_KEY } from '../src/demo/template.ts';
import { listHeartbeats } from '../src/persistence/heartbeats.ts';
import { createToken } from '../src/persistence/tokens.ts';
import { countMovementsByState } from '../scripts/lib/bench-queries.ts';
import { assertAllCompletedExactlyOnce } from './helpers/cluster.ts';
import { scratchDatabase } from './helpers/db.ts';
import { listeningUrl, spawnFerry, type ChildFerry } from './helpers/ferry-process.ts';
import { callApi } from './helpers/http.ts';
import { waitFor } from './helpers/wait.ts';

/** Dispatch claims this instance's process made, from its /metrics (ferry_claims_total). */
async function claimsCounted(url: string, token: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${token}` } })).text();
  let total = 0;
  for (const m of text.matchAll(/^ferry_claims_total\{([^}]*)\}\s+(\d+)/gm)) if (/worker="dispatcher"/.test(m[1])) total += Number(m[2]);
  return total;
}

/**
 * Two Ferry installations that know nothing of each other (two `npm start`s, each with its own
 * port, data folder and in-process workers, not one cluster under a primary) on one database.
 * Both install the demo template at the same moment; movements created through one are approved
 * through the other; all complete, each node is claimed and submitted once, and both instances'
 * workers carried part of the work.
 */
test('two separate Ferry instances on one database share the work and never submit a node twice', async (t) => {
  const db = await scratchDatabase(t);
  const instances: ChildFerry[] = [];
  t.after(async () => {
    for (const f of instances) f.child.kill('SIGTERM');
    await Promise.all(instances.map((f) => f.exit));
  });
  for (let i = 0; i < 2; i++) {
    instances.push(
      spawnFerry({
        DATABASE_URL: db.url,
        FERRY_DATA_DIR: mkdtempSync(join(tmpdir(), `ferry-instance-${i}-`)),
        FERRY_DEMO_TEMPLATE: 'true',
        // Each instance fits its own pools; together they stay far below the server's limit.
        FERRY_DB_POOL_MAX: '6',
        FERRY_PGBOSS_POOL_MAX: '2',
      }),
    );
  }
  const urls = await Promise.all(instances.map((f) => listeningUrl(f, 120_000)));
  assert.notEqual(urls[0], urls[1]);

  const token = async (role: string, n: number) => (await createToken(db.pool, { name: `${role}-${n}`, role })).token;
  const requesters = [await token('requester', 0), await token('requester', 1)];
  const approvers = [await token('approver', 0), await token('approver', 1)];
  const admin = await token('admin', 0);

  // The same template installed by both at once: one version, whichever instance won.
  const templates = await callApi(urls[0], 'GET', `/v3/templates/${DEMO_TEMPLATE_KEY}`, admin);
  assert.equal(templates.status, 200, JSON.stringify(templates.body));

  const COUNT = 20;
  const ids: string[] = [];
  for (let n = 0; n < COUNT; n++) {
    const via = n % 2;
    const created = await callApi(urls[via], 'POST', '/v3/movements', requesters[via], { template_key: DEMO_TEMPLATE_KEY, intent: { asset: 'USDC', amount: String(n + 1) } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const m = created.body.movement;
    // Approved through the other instance: it reads what the first one wrote.
    const approved = await callApi(urls[1 - via], 'POST', `/v3/movements/${m.id}/approve`, approvers[1 - via], { compiled_plan_hash: m.compiled_plan_hash });
    assert.equal(approved.status, 200, JSON.stringify(approved.body));
    ids.push(m.id);
  }

  await waitFor('every movement to complete', async () => {
    const states = await countMovementsByState(db.pool, ids);
    return states.COMPLETED === COUNT;
  }, 180_000, 200);
  await assertAllCompletedExactlyOnce(db.pool, ids);

  // Both instances' workers heartbeat, and each claimed part of the nodes: its own /metrics
  // counts the claims its process made, and together they make one claim per node.
  const pids = new Set((await listHeartbeats(db.pool)).map((b) => b.pid));
  for (const f of instances) assert.ok(pids.has(f.child.pid!), `instance with pid ${f.child.pid} heartbeats (seen: ${[...pids].join(', ')})`);
  const claims = await Promise.all(urls.map((u) => claimsCounted(u, admin)));
  for (const n of claims) assert.ok(n > 0, `claims per instance: ${claims.join(', ')}`);
});
