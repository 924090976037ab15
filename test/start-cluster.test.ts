import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { test } from 'node:test';
import { createPool } from '../src/persistence/db.ts';
import { listHeartbeats } from '../src/persistence/heartbeats.ts';
import { createEmptyDatabase, dropDatabase, withDatabase } from '../scripts/lib/test-databases.ts';
import { createToken } from '../src/persistence/tokens.ts';
import { callApi } from './helpers/http.ts';
import { exited } from './helpers/processes.ts';
import { waitFor, within } from './helpers/wait.ts';
import { makeTemplateLive } from './helpers/templates.ts';

/**
 * `npm start` with FERRY_WORKER_PROCESSES=2: the primary serves the API and runs no workers; two
 * worker processes under node:cluster run the movement to completion; SIGTERM stops them all.
 */
test('npm start with two worker processes runs a movement through the API to COMPLETED', async (t) => {
  const admin = process.env.FERRY_TEST_ADMIN_URL!;
  const name = `ferry_t_cluster_${randomBytes(3).toString('hex')}`;
  await createEmptyDatabase(admin, name);
  const url = withDatabase(admin, name);
  t.after(() => dropDatabase(admin, name));

  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    env: {
      ...process.env,
      DATABASE_URL: url,
      PORT: '0',
      FERRY_WORKER_PROCESSES: '2',
      FERRY_DATA_DIR: mkdtempSync(join(tmpdir(), 'ferry-cluster-')),
      FERRY_LOG_LEVEL: 'info',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let base = '';
  const lines = createInterface({ input: child.stdout! });
  const listening = new Promise<string>((resolve, reject) => {
    lines.on('line', (line) => {
      try {
        const l = JSON.parse(line);
        if (typeof l.msg === 'string' && l.msg.startsWith('ferry listening')) resolve(l.url);
      } catch {
        /* not a log line */
      }
    });
    child.once('exit', (code) => reject(new Error(`ferry exited with ${code} before listening`)));
  });
  const pool = createPool(url, 2);
  try {
    base = await within('ferry to listen', listening);
    const token = async (role: string) => (await createToken(pool, { name: `${role}-${randomBytes(2).toString('hex')}`, role })).token;
    const [adminToken, requester, approver] = [await token('admin'), await token('requester'), await token('approver')];
    const call = (path: string, bearer: string, body?: unknown) => callApi(base, body === undefined ? 'GET' : 'POST', path, bearer, body);
    const tplVersion = await makeTemplateLive(
      base,
      pool,
      {
        template_key: 'cluster-two-step',
        nodes: [
          { node_key: 'a', node_kind: 'action', action_type: 'sim_action', executor_binding: 'exec.sim.action' },
          { node_key: 'b', node_kind: 'observe', action_type: 'sim_observe', executor_binding: 'exec.sim.observe' },
        ],
        edges: [{ from: 'a', to: 'b' }],
      },
      { proposer: adminToken, approver },
    );
    assert.equal(tplVersion, 1);
    const created = await call('/v3/movements', requester, { template_key: 'cluster-two-step', intent: { asset: 'USDC', amount: '5' } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const m = created.body.movement;
    const approved = await call(`/v3/movements/${m.id}/approve`, approver, { compiled_plan_hash: m.compiled_plan_hash });
    assert.equal(approved.status, 200, JSON.stringify(approved.body));
    const done = await waitFor('the movement to complete', async () => {
      const r = await call(`/v3/movements/${m.id}`, adminToken);
      return r.body.movement.state === 'COMPLETED' ? r.body : null;
    });
    assert.equal(done.movement.state, 'COMPLETED');

    // Both worker processes heartbeat (the second may write its first row after the movement is done).
    const pids = await waitFor('two worker processes to heartbeat', async () => {
      const seen = new Set((await listHeartbeats(pool)).map((b) => b.pid));
      return seen.size >= 2 ? seen : null;
    });
    assert.equal(pids.size, 2, 'two worker processes heartbeat');
    assert.ok(!pids.has(child.pid!), 'the primary runs no worker loops');
  } finally {
    await pool.end();
    child.kill('SIGTERM');
    assert.equal((await exited(child)).code, 0, 'SIGTERM stops the primary and its workers cleanly');
  }
});
