/**
 * The Workers view of /ui, in a real browser (Debian's Chromium driven by playwright-core). Ferry runs
 * with its worker runtime in this process, so one process is alive with its core and sidecar groups.
 * Beside it the test writes the heartbeat rows of two more processes, as a worker roster writes them:
 * one alive with a core worker still starting, a sidecar the supervisor is restarting, a failing
 * one, a disabled one, three live movement actors and leases on movements (two live, one expired);
 * one whose beats are five minutes old. The page must say, per process, what GET /v3/workers says:
 * its state and heartbeat age, expected against running per group with the others named, its actors
 * and its leases; and the sweeps' last run and next due time. Then the first of those processes stops
 * cleanly and the page shows it stopped; leaving the view or signing out ends its reads.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { markProcessStopped, upsertHeartbeats, type Heartbeat } from '../src/persistence/heartbeats.ts';
import { browserAvailable, browserFixture, openBrowser, screenshot } from './helpers/browser.ts';
import { ferryForFile } from './helpers/ferry.ts';
import { seedMovement, singleNodeTemplate } from './helpers/fixtures.ts';
import { callApi } from './helpers/http.ts';
import { createTokens } from './helpers/tokens.ts';
import { waitFor } from './helpers/wait.ts';

if (browserAvailable('the workers view in /ui')) await browserTests();

async function browserTests() {
  // Registered first: the browser closes before Ferry stops and the database is dropped.
  const held = browserFixture();
  const { db, ferry, runtime } = await ferryForFile({}, { runtime: 'workers' });
  const real = runtime!.processId;
  const tokens = await createTokens(db.pool, { viewer: 'viewer' });
  const base = ferry.url;
  const workersApi = async () => {
    const r = await callApi(base, 'GET', '/v3/workers', tokens.viewer.token);
    assert.equal(r.status, 200, r.text);
    return r.body as { processes: any[]; workers: any[]; sweeps: any[] };
  };

  // Another process's roster, written as the roster writes it. Its host name is markup: the page
  // must show it as text.
  const OTHER = 'ops-a:4242:1a2b3c4d';
  const HOST = '<img src="x">ops-a';
  const row = (process_id: string, hostname: string, pid: number, worker_name: string, group_name: 'core' | 'sidecar', status: string, extra: Partial<Heartbeat> = {}): Heartbeat => ({
    process_id, worker_name, hostname, pid, group_name, status, loop_runs: 4, consecutive_errors: 0, last_error: null, kind: 'loop', enabled: true, interval_seconds: 1, ...extra,
  });
  await upsertHeartbeats(db.pool, [
    row(OTHER, HOST, 4242, 'lease_holder', 'core', 'running', { live_actors: 3 }),
    row(OTHER, HOST, 4242, 'node_recovery', 'core', 'starting', { loop_runs: 0, ran: false }),
    row(OTHER, HOST, 4242, 'callback_dispatcher', 'sidecar', 'restarting', { kind: 'queue', restarts: 2 }),
    row(OTHER, HOST, 4242, 'executor_health', 'sidecar', 'failing', { kind: 'sweep', consecutive_errors: 3, last_error: 'provider said no' }),
    row(OTHER, HOST, 4242, 'expiration_checker', 'sidecar', 'scheduled', { kind: 'sweep' }),
    row(OTHER, HOST, 4242, 'verify_drift', 'sidecar', 'disabled', { kind: 'sweep', enabled: false }),
  ]);
  // A process that died: its beats are five minutes old (backdated, no waiting).
  const OLD = 'ops-b:77:9f8e7d6c';
  await upsertHeartbeats(db.pool, [row(OLD, 'ops-b', 77, 'lease_holder', 'core', 'running', { live_actors: 2 }), row(OLD, 'ops-b', 77, 'node_recovery', 'core', 'running')]);
  await db.pool.query("UPDATE worker_heartbeats SET last_beat_at = now() - interval '5 minutes', started_at = now() - interval '1 hour' WHERE process_id = $1", [OLD]);
  // Leases the other process holds: two live, one expired. No next_work_at, so no lease holder takes them.
  for (const [i, expiry] of ['1 hour', '1 hour', '-1 minute'].entries()) {
    const m = await seedMovement(db.pool, singleNodeTemplate(`workers-ui-${i}`));
    await db.pool.query(
      "UPDATE movement_requests SET request_state = 'EXECUTING', next_work_at = NULL, lease_owner = $2, lease_expires_at = now() + $3::interval WHERE id = $1",
      [m.movement.id, OTHER, expiry],
    );
  }

  // This process is alive with every enabled worker of its core group running.
  await waitFor('this process to report its core group running', async () => {
    const p = (await workersApi()).processes.find((x) => x.process_id === real);
    return p?.state === 'alive' && p.groups.core.expected > 0 && p.groups.core.running === p.groups.core.expected;
  }, 60_000, 200);

  const browser = await openBrowser(base);
  held.browser = browser;
  const { page, offsite, errors } = browser;
  const requests: { url: string; at: number }[] = [];
  page.on('request', (r) => requests.push({ url: r.url(), at: Date.now() }));
  const rowOf = (id: string) => page.locator(`#worker-processes tbody tr[data-process-id="${id}"]`);
  const text = async (selector: string) => ((await page.locator(selector).textContent()) ?? '').trim();

  /** What the page shows for one process, cell by cell. */
  const shown = async (id: string) => {
    const tr = rowOf(id);
    const cell = async (css: string) => ((await tr.locator(css).textContent()) ?? '').trim();
    const group = async (name: string) => ({
      count: await cell(`td.g-${name} .count`),
      expected: await tr.locator(`td.g-${name}`).getAttribute('data-expected'),
      running: await tr.locator(`td.g-${name}`).getAttribute('data-running'),
      not_running: await tr.locator(`td.g-${name} .not-running`).evaluateAll((els) => els.map((e) => `${e.getAttribute('data-worker')} ${e.getAttribute('data-status')}`)),
    });
    return {
      cells: await tr.locator('td').evaluateAll((els) => els.slice(0, 4).map((e) => e.textContent)),
      state: await tr.getAttribute('data-state'),
      age: await tr.locator('td.state').getAttribute('data-age'),
      core: await group('core'),
      sidecar: await group('sidecar'),
      actors: await cell('td.actors'),
      leases: await cell('td.leases'),
    };
  };
  /** What the page should show for a process GET /v3/workers returned, with its workers' statuses. */
  const expectedOf = (p: any, workers: any[]) => {
    const statusOf = (w: string) => (p.state === 'alive' ? workers.find((x) => x.process_id === p.process_id && x.worker_name === w)?.status : p.state);
    const group = (name: 'core' | 'sidecar') => ({
      count: `${p.groups[name].running}/${p.groups[name].expected} running`,
      expected: String(p.groups[name].expected),
      running: String(p.groups[name].running),
      not_running: p.groups[name].not_running.map((w: string) => `${w} ${statusOf(w)}`),
    });
    return {
      cells: [p.process_id, p.hostname, String(p.pid), p.network_class],
      state: p.state,
      age: String(p.last_beat_age_seconds),
      core: group('core'),
      sidecar: group('sidecar'),
      actors: p.live_actors === null ? '-' : String(p.live_actors),
      leases: `${p.leases.live} live, ${p.leases.expired} expired`,
    };
  };
  /** Waits until the page shows process `id` as the API describes it (the page polls; rows move). */
  const matchesApi = async (id: string) => {
    let last = '';
    try {
      return await waitFor(`the page to show process ${id} as GET /v3/workers does`, async () => {
        const answer = await workersApi();
        const p = answer.processes.find((x) => x.process_id === id);
        if (!p || (await rowOf(id).count()) !== 1) return null;
        const want = expectedOf(p, answer.workers);
        const got = await shown(id);
        // The heartbeat age moves every second: equal when read together, within a poll otherwise.
        const { age: wantAge, ...wantRest } = want;
        const { age: gotAge, ...gotRest } = got;
        last = JSON.stringify({ want, got });
        const close = Math.abs(Number(wantAge) - Number(gotAge)) <= 10;
        return close && JSON.stringify(wantRest) === JSON.stringify(gotRest) ? { p, got } : null;
      }, 30_000, 250);
    } catch (err) {
      throw new Error(`${(err as Error).message}: ${last}`);
    }
  };

  test('the Workers view shows each process as GET /v3/workers does: state, groups, actors and leases; and the sweeps', async () => {
    await page.goto(`${base}/ui#/workers`);
    await page.locator('#token-input').fill(tokens.viewer.token);
    await page.locator('#login-form button').click();
    await rowOf(real).waitFor();
    assert.equal(await page.locator('#view-workers').getAttribute('class'), 'current');
    assert.equal(await page.locator('#workers-side').isVisible(), true);
    assert.equal(await page.locator('#movements-side').isHidden(), true);

    // This process: alive, its groups as the API counts them, its lease holder's actors.
    const mine = await matchesApi(real);
    assert.equal(mine.got.state, 'alive');
    assert.equal(mine.got.cells[2], String(process.pid), 'the runtime in this process');
    assert.ok(Number(mine.got.core.expected) >= 2, 'the lease holder and recovery');
    assert.notEqual(mine.got.actors, '-', 'the actor runtime has a lease holder');
    assert.match(await text(`#worker-processes tr[data-process-id="${real}"] td.state`), /^alive beat \d+ s ago$/);

    // The other process, as its rows say: the starting, restarting and failing workers are named.
    const other = await matchesApi(OTHER);
    assert.deepEqual(other.got, {
      cells: [OTHER, HOST, '4242', 'default'],
      state: 'alive',
      age: other.got.age,
      core: { count: '1/2 running', expected: '2', running: '1', not_running: ['node_recovery starting'] },
      sidecar: { count: '1/3 running', expected: '3', running: '1', not_running: ['callback_dispatcher restarting', 'executor_health failing'] },
      actors: '3',
      leases: '2 live, 1 expired',
    });
    assert.deepEqual(other.p.leases, { live: 2, expired: 1 });
    assert.equal(await page.locator('#worker-processes img').count(), 0, 'a host name is text, never markup');
    // The dead process is gone, and not shown until asked for.
    assert.equal(await rowOf(OLD).count(), 0);
    assert.equal(await text('#workers-hidden'), '1 stopped or gone process not shown');

    // The sweeps: one row per sweep the API lists, with its last outcome and next due time.
    const { sweeps } = await workersApi();
    await waitFor('the sweeps table', async () => (await page.locator('#sweeps tbody tr').count()) === sweeps.length);
    assert.deepEqual(await page.locator('#sweeps tbody tr').evaluateAll((els) => els.map((e) => e.getAttribute('data-name'))), sweeps.map((s) => s.name));
    const due = sweeps.find((s) => s.enabled && s.next_due_at);
    assert.ok(due, JSON.stringify(sweeps));
    const dueText = await page.evaluate(`new Date(${JSON.stringify(due.next_due_at)}).toLocaleString()`);
    await waitFor(`${due.name}'s next due time`, async () => (await text(`#sweeps tr[data-name="${due.name}"] td.next-due`)) === dueText);
    const ran = await waitFor('a sweep that ran, in the API and on the page', async () => {
      const s = (await workersApi()).sweeps.find((x) => x.last_run);
      if (!s) return null;
      const outcome = await page.locator(`#sweeps tr[data-name="${s.name}"]`).getAttribute('data-outcome');
      return outcome === s.last_run.outcome ? s : null;
    }, 60_000, 250);
    assert.match(await text(`#sweeps tr[data-name="${ran.name}"] td.last-run`), /\d/);
    await screenshot(page, 'workers.png', true);
  });

  test('the view follows the rows: more actors, a clean stop, a process gone', async () => {
    // The page's poll brings a changed count without a reload.
    await db.pool.query("UPDATE worker_heartbeats SET live_actors = 5, last_beat_at = now() WHERE process_id = $1 AND worker_name = 'lease_holder'", [OTHER]);
    await waitFor('the page to show five actors', async () => (await text(`#worker-processes tr[data-process-id="${OTHER}"] td.actors`)) === '5');

    // A clean stop: the process leaves the default view, and shows stopped with nothing running.
    await markProcessStopped(db.pool, OTHER);
    await waitFor('the stopped process to leave the view', async () => (await rowOf(OTHER).count()) === 0);
    assert.equal(await text('#workers-hidden'), '2 stopped or gone processes not shown');
    await page.locator('#workers-all').check();
    const stopped = await matchesApi(OTHER);
    assert.equal(stopped.got.state, 'stopped');
    assert.deepEqual(stopped.got.core, { count: '0/2 running', expected: '2', running: '0', not_running: ['lease_holder stopped', 'node_recovery stopped'] });
    assert.equal(stopped.got.sidecar.count, '0/3 running');
    assert.equal(stopped.got.actors, '0');
    assert.match(await text(`#worker-processes tr[data-process-id="${OTHER}"] td.state`), /^stopped beat \d+ s ago$/);

    const gone = await matchesApi(OLD);
    assert.equal(gone.got.state, 'gone');
    assert.ok(Number(gone.got.age) >= 300, `heartbeat age ${gone.got.age}`);
    assert.match(await text(`#worker-processes tr[data-process-id="${OLD}"] td.state`), /^gone beat 5 min ago$/);
    assert.deepEqual(gone.got.core, { count: '0/2 running', expected: '2', running: '0', not_running: ['lease_holder gone', 'node_recovery gone'] });
    assert.equal(gone.got.actors, '0', 'a gone process runs no actors');
    // Still alive beside them.
    assert.equal((await shown(real)).state, 'alive');
  });

  test('leaving the view ends its reads; signing out clears it', async () => {
    const workersReads = (since: number) => requests.filter((r) => r.at >= since && new URL(r.url).pathname === '/v3/workers').length;
    // Open, the view is read by the page's poll.
    const openedAt = Date.now();
    await waitFor('a poll of the workers view', async () => workersReads(openedAt) > 0, 15_000, 100);
    await page.locator('#view-movements').click();
    await page.locator('#workers').waitFor({ state: 'hidden' });
    const leftAt = Date.now();
    // The next poll reads the movement list, not the workers.
    await page.waitForRequest((r) => new URL(r.url()).pathname === '/inspect/movements', { timeout: 15_000 });
    assert.equal(workersReads(leftAt), 0, 'no read of /v3/workers once the view is left');

    await page.locator('#view-workers').click();
    await rowOf(real).waitFor();
    await page.locator('#sign-out').click();
    await page.locator('#login:not([hidden])').waitFor();
    assert.deepEqual(await page.locator('#worker-processes tbody tr, #sweeps tbody tr').evaluateAll((els) => els.map((e) => e.outerHTML)), []);
    assert.equal(await text('#workers-meta'), '');

    assert.deepEqual(offsite, [], 'the page loaded nothing from elsewhere');
    assert.deepEqual(errors, [], 'no script error');
  });
}
