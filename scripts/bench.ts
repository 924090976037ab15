/**
 * `npm run bench`: end-to-end throughput and latency of durable movements.
 *
 * 1. Measures the database's commit ceiling in this run: `concurrency` clients each doing
 *    single-row UPDATEs in autocommit for a few seconds (one durable commit each).
 * 2. Starts `processes` worker processes, creates `movements` movements of a 3-node sim plan
 *    (action -> observe -> action, zero latency), approves them all, and waits for completion.
 * 3. Prints a table, then one JSON line: movements, processes, movements_per_s, transitions_per_s,
 *    e2e_p50_ms, e2e_p99_ms, dispatch_p50_ms, dispatch_p99_ms (approve -> first submit),
 *    commit_ceiling_tps, ceiling_ratio (transitions_per_s / commit_ceiling_tps),
 *    queries_per_movement (statements the worker processes sent, all pools, from approval to the
 *    last completion), commits_per_movement (pg_stat_database.xact_commit of the bench database
 *    over the same span, approvals and the bench's own polling included), write_commits_per_movement
 *    (transaction ids assigned over the same span: only transactions that wrote, on any database of
 *    the server, the bench's approvals included), idle_statements_per_s (statements each worker
 *    process sends per second once nothing is left to do, all pools), critical_path_statements (the median, over
 *    PROBES movements approved one at a time after the run, of the statements the worker processes
 *    sent on their worker and simulation pools between a probe's approval and its completion; pg-boss
 *    and LISTEN excluded), worker_rss_mb_max.
 * Flags: --movements, --processes, --concurrency, --rate (approvals per second; default 0 = all at
 * once), --ceiling-seconds, --preload N (N finished movements, with nodes and transitions, inserted
 * before the run: claim cost must not grow with history), --stall-seconds (default 30), --failing N
 * and --stuck N (that many extra movements that cannot complete, to see the bench report them),
 * --trace (print the statements of the median probe's critical path).
 * --api N measures the API process instead (scripts/lib/api-bench.ts): two rounds of N hostile and
 * ordinary requests against `src/main.ts`, and its memory after each (api_rss_mb_after); with
 * --heap-snapshots also the heap it retains after a full collection, from heap snapshots.
 *
 * Database: BENCH_DATABASE_URL, else DATABASE_URL, else TEST_DATABASE_URL, else an embedded server.
 * A scratch database is created for the run and dropped afterwards, also on SIGINT/SIGTERM; stale
 * ones (older than an hour) are dropped at start. A run in which not every movement completes, or
 * nothing progresses for the stall limit, prints where the movements ended and why and exits 1
 * (see scripts/lib/bench-run.ts).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { runApiBench } from './lib/api-bench.ts';
import { faultyBenchTemplate } from './lib/bench-faults.ts';
import { cleanUpOnSignals, describeRunEnd, dropStaleScratchDatabases, runEndJson, scratchDatabaseName, watchMovements } from './lib/bench-run.ts';
import { approveMovements, benchTemplate, createMovements } from './lib/load.ts';
import { exited, spawnWorker, waitFor } from './lib/processes.ts';
import { createPool } from '../src/persistence/db.ts';
import { startEmbeddedPostgres, type EmbeddedServer } from '../src/persistence/embedded.ts';
import { migrate } from '../src/persistence/migrate.ts';
import {
  assignedTransactionIds,
  bumpCeilingRow,
  countMovementsByState,
  databaseCommits,
  dropCeilingTable,
  movementTimings,
  preloadFinishedMovements,
  prepareCeilingTable,
  transitionsBetween,
} from './lib/bench-queries.ts';
import { listHeartbeats } from '../src/persistence/heartbeats.ts';
import { log as rootLog } from '../src/log.ts';
import { createEmptyDatabase, dropDatabase, withDatabase } from './lib/test-databases.ts';

const { values } = parseArgs({
  options: {
    movements: { type: 'string', default: '1000' },
    processes: { type: 'string', default: '2' },
    concurrency: { type: 'string', default: '16' },
    'ceiling-seconds': { type: 'string', default: '3' },
    // Approvals per second; 0 approves everything at once (throughput under a backlog). A rate
    // below capacity measures dispatch latency without queueing in front of it.
    rate: { type: 'string', default: '0' },
    'stall-seconds': { type: 'string', default: '30' },
    failing: { type: 'string', default: '0' },
    stuck: { type: 'string', default: '0' },
    preload: { type: 'string', default: '0' },
    api: { type: 'string', default: '0' },
    'heap-snapshots': { type: 'boolean', default: false },
    trace: { type: 'boolean', default: false },
  },
});
const stallSeconds = Number(values['stall-seconds']);
const faults = { fail: Number(values.failing), stuck: Number(values.stuck) };
if (!(stallSeconds > 0) || !Number.isInteger(faults.fail) || !Number.isInteger(faults.stuck) || faults.fail < 0 || faults.stuck < 0) {
  console.error('--stall-seconds must be a positive number, --failing and --stuck whole numbers');
  process.exit(2);
}
const preload = Number(values.preload);
if (!Number.isInteger(preload) || preload < 0) {
  console.error('--preload must be a whole number of finished movements, 0 for none');
  process.exit(2);
}
const apiRequests = Number(values.api);
if (!Number.isInteger(apiRequests) || apiRequests < 0) {
  console.error('--api must be a whole number of requests per round, 0 for the movement run');
  process.exit(2);
}
const movements = Number(values.movements);
const processes = Number(values.processes);
const concurrency = Number(values.concurrency);
const ceilingSeconds = Number(values['ceiling-seconds']);
const rate = Number(values.rate);
if (!Number.isFinite(rate) || rate < 0) {
  console.error('--rate must be a number of approvals per second, 0 for all at once');
  process.exit(2);
}
for (const [k, v] of Object.entries({ movements, processes, concurrency, ceilingSeconds })) {
  if (!Number.isInteger(v) || v < 1) {
    console.error(`--${k} must be a positive whole number`);
    process.exit(2);
  }
}

const percentile = (xs: number[], p: number) => {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const round = (x: number, d = 1) => Math.round(x * 10 ** d) / 10 ** d;

async function commitCeiling(url: string): Promise<number> {
  const pool = createPool(url, concurrency, 'ferry-bench-ceiling');
  try {
    await prepareCeilingTable(pool, concurrency);
    let commits = 0;
    const until = Date.now() + ceilingSeconds * 1000;
    const started = performance.now();
    await Promise.all(
      Array.from({ length: concurrency }, async (_, i) => {
        while (Date.now() < until) {
          await bumpCeilingRow(pool, i + 1);
          commits++;
        }
      }),
    );
    const tps = commits / ((performance.now() - started) / 1000);
    await dropCeilingTable(pool);
    return tps;
  } finally {
    await pool.end();
  }
}

let signals: ReturnType<typeof cleanUpOnSignals> | undefined;

const PROBES = 5;
/** The pools whose statements are on a movement's critical path (pg-boss and LISTEN are not). */
const CRITICAL_POOLS = new Set(['ferry-worker', 'ferry-sim-provider']);

/**
 * Approves each probe alone on idle workers, waits for it to complete, then asks the workers for
 * their statement traces (query-counter.ts, SIGUSR2) and counts, per probe, the statements of the
 * critical pools sent between its approval and its completion.
 */
async function criticalPath(
  pool: ReturnType<typeof createPool>,
  probes: string[],
  workers: ReturnType<typeof spawnWorker>[],
  counters: string[],
  deps: Parameters<typeof approveMovements>[2],
): Promise<{ median: number; counts: number[]; trace: string[] }> {
  for (const id of probes) {
    await sleep(300);
    await approveMovements(pool, [id], deps, 1);
    await waitFor('a probe movement to complete', async () => (await countMovementsByState(pool, [id])).COMPLETED === 1, 30_000, 5);
  }
  for (const w of workers) w.kill('SIGUSR2');
  await sleep(500);
  const lines = counters.flatMap((f) => {
    try {
      return readFileSync(`${f}.trace`, 'utf8').split('\n');
    } catch {
      return [];
    }
  });
  const entries = lines.map((l) => l.split('\t')).filter((p) => p.length === 4 && CRITICAL_POOLS.has(p[1])).map(([t, app, text, ms]) => ({ t: Number(t), app, text, ms: Number(ms) }));
  const timings = await movementTimings(pool, probes);
  const per = timings.map((t) => {
    const from = t.approved_at.getTime();
    const to = t.completed_at!.getTime();
    const inside = entries.filter((e) => e.t >= from && e.t <= to).sort((a, b) => a.t - b.t);
    return { n: inside.length, trace: inside.map((e) => `+${(e.t - from).toFixed(1)} ms (${e.ms.toFixed(1)} ms) ${e.app}: ${e.text}`) };
  });
  const sorted = [...per].sort((a, b) => a.n - b.n);
  const mid = sorted[Math.floor(sorted.length / 2)];
  return { median: mid.n, counts: per.map((p) => p.n), trace: mid.trace };
}

const IDLE_SECONDS = 10;

/**
 * What an idle worker costs the database: with every movement finished, the statements the workers
 * send over IDLE_SECONDS (all pools, pg-boss and LISTEN included), per process and second, and
 * (for --trace) where they come from, grouped by pool and the first words of the statement.
 */
async function idleStatements(workers: ReturnType<typeof spawnWorker>[], counters: string[]): Promise<{ perProcessPerSecond: number; sources: string[] }> {
  // Let the last completions' follow-ups (callbacks, audit promotion) settle first.
  await sleep(3000);
  const from = Date.now();
  const q0 = sumCounters(counters);
  await sleep(IDLE_SECONDS * 1000);
  // The counter files are written twice a second.
  await sleep(600);
  const to = Date.now() - 600;
  const q1 = sumCounters(counters);
  for (const w of workers) w.kill('SIGUSR2');
  await sleep(500);
  const bySource = new Map<string, number>();
  for (const f of counters) {
    let lines: string[] = [];
    try {
      lines = readFileSync(`${f}.trace`, 'utf8').split('\n');
    } catch {
      // not written
    }
    for (const l of lines) {
      const [t, app, text] = l.split('\t');
      if (!text || Number(t) < from || Number(t) > to) continue;
      const key = `${app}: ${text.slice(0, 50)}`;
      bySource.set(key, (bySource.get(key) ?? 0) + 1);
    }
  }
  const sources = [...bySource.entries()].sort((a, b) => b[1] - a[1]).map(([k, n]) => `${round(n / IDLE_SECONDS / workers.length, 2)}/s ${k}`);
  return { perProcessPerSecond: round((q1 - q0) / IDLE_SECONDS / workers.length, 2), sources };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Statements counted by the workers' query-counter preload so far. */
function sumCounters(files: string[]): number {
  let total = 0;
  for (const f of files) {
    try {
      total += Number(readFileSync(f, 'utf8')) || 0;
    } catch {
      // not written yet
    }
  }
  return total;
}

/** The largest resident set size any worker reached, sampled from /proc every 250 ms. */
function sampleRss(pids: number[]) {
  let max = 0;
  const timer = setInterval(() => {
    for (const pid of pids) {
      try {
        const kb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
        max = Math.max(max, kb / 1024);
      } catch {
        // exited, or not Linux
      }
    }
  }, 250);
  // Never what keeps the bench alive: whatever way the run ends, it exits.
  timer.unref();
  return { stop: () => clearInterval(timer), maxMb: () => max };
}

async function main() {
  let embedded: EmbeddedServer | undefined;
  let server = process.env.BENCH_DATABASE_URL ?? process.env.DATABASE_URL ?? process.env.TEST_DATABASE_URL;
  if (!server) {
    embedded = await startEmbeddedPostgres({ dataDir: '.ferry/bench-data', port: 54349, database: 'postgres' });
    server = embedded.url;
  }
  const admin = withDatabase(server, 'postgres');
  for (const stale of await dropStaleScratchDatabases(admin)) console.error(`bench: dropped stale scratch database ${stale}`);
  const name = scratchDatabaseName();
  const workers: ReturnType<typeof spawnWorker>[] = [];
  let cleaning: Promise<void> | undefined;
  // Once, whether the run ends or a signal arrives (a signal during the end waits for the same cleanup).
  const cleanup = () =>
    (cleaning ??= (async () => {
      for (const w of workers) w.kill('SIGTERM');
      await Promise.all(workers.map(exited));
      await dropDatabase(admin, name).catch(() => {});
      rmSync(scratch, { recursive: true, force: true });
      await embedded?.stop();
    })());
  signals = cleanUpOnSignals(cleanup);
  await createEmptyDatabase(admin, name);
  console.error(`bench: scratch database ${name}`);
  const url = withDatabase(server, name);
  const scratch = mkdtempSync(join(tmpdir(), 'ferry-bench-'));
  try {
    await migrate(url);
    if (apiRequests > 0) {
      const result = await runApiBench(url, { requests: apiRequests, concurrency, heapSnapshots: values['heap-snapshots'] });
      console.log(JSON.stringify(result));
      if (result.api_5xx !== 0) process.exitCode = 1;
      return;
    }
    const ceiling = await commitCeiling(url);

    const pool = createPool(url, concurrency, 'ferry-bench');
    const ids = await createMovements(pool, benchTemplate(), movements, concurrency);
    if (faults.fail > 0) ids.push(...(await createMovements(pool, faultyBenchTemplate('fail'), faults.fail, concurrency)));
    if (faults.stuck > 0) ids.push(...(await createMovements(pool, faultyBenchTemplate('stuck'), faults.stuck, concurrency)));
    // Approved one at a time after the run, to count one movement's critical path alone.
    const probes = await createMovements(pool, benchTemplate(), PROBES, 1);
    if (preload > 0) await preloadFinishedMovements(pool, ids[0], preload);
    // The workers' connection budget counts the whole cluster: these workers and no API process.
    const workerEnv = { FERRY_LOG_LEVEL: 'warn', FERRY_WORKER_PROCESSES: String(processes), FERRY_API_PROCESSES: '0' };
    const counters = Array.from({ length: processes }, (_, i) => join(scratch, `queries-${i}`));
    for (let i = 0; i < processes; i++) {
      workers.push(spawnWorker(url, { ...workerEnv, FERRY_BENCH_QUERY_FILE: counters[i] }, { preload: ['./scripts/lib/query-counter.ts'] }));
    }
    const workerExited = () => workers.some((w) => w.exitCode !== null || w.signalCode !== null);
    await waitFor(
      'workers to start',
      async () => {
        if (workerExited()) throw new Error('a worker process exited while starting (its message is above)');
        return new Set((await listHeartbeats(pool)).map((h) => h.process_id)).size >= processes;
      },
      120_000,
      100,
    );
    const rss = sampleRss(workers.map((w) => w.pid!));
    // Statistics and counter files lag by up to a second.
    await sleep(1200);
    const queries0 = sumCounters(counters);
    const commits0 = await databaseCommits(pool, name);
    const xids0 = await assignedTransactionIds(pool);

    const started = performance.now();
    // The bench's own approvals: no callbacks, and no info line per transition on its output.
    const noCallbacks = { callbacks: async () => {}, log: rootLog.child({}, { level: 'silent' }) };
    if (rate > 0) {
      for (let i = 0; i < ids.length; i++) {
        const due = started + (i * 1000) / rate;
        const wait = due - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        void approveMovements(pool, [ids[i]], noCallbacks, 1);
      }
    } else {
      // A backlog approved at once: 25 approvals per commit, so the load generator is not the bottleneck.
      await approveMovements(pool, ids, noCallbacks, Math.min(concurrency, 4), 25);
    }
    const end = await watchMovements(pool, ids, { stallMs: stallSeconds * 1000, workersGone: () => workers.every((w) => w.exitCode !== null || w.signalCode !== null) });
    if (end.outcome !== 'completed') {
      rss.stop();
      for (const line of describeRunEnd(end, ids.length)) console.error(line);
      console.log(JSON.stringify(runEndJson(end, ids.length)));
      await pool.end();
      process.exitCode = 1;
      return;
    }
    const wall = (performance.now() - started) / 1000;
    await sleep(1200);
    const queries = sumCounters(counters) - queries0;
    const commits = (await databaseCommits(pool, name)) - commits0;
    const writeCommits = (await assignedTransactionIds(pool)) - xids0;
    const critical = await criticalPath(pool, probes, workers, counters, noCallbacks);
    const idle = await idleStatements(workers, counters);
    rss.stop();

    const timings = await movementTimings(pool, ids);
    const e2e = timings.map((t) => t.completed_at!.getTime() - t.approved_at.getTime());
    const dispatch = timings.filter((t) => t.first_submit_at).map((t) => t.first_submit_at!.getTime() - t.approved_at.getTime());
    const log = await transitionsBetween(pool, ids);
    await pool.end();

    const result = {
      movements,
      processes,
      movements_per_s: round(movements / wall),
      transitions_per_s: round(log.n / wall),
      e2e_p50_ms: round(percentile(e2e, 50)),
      e2e_p99_ms: round(percentile(e2e, 99)),
      dispatch_p50_ms: round(percentile(dispatch, 50)),
      dispatch_p99_ms: round(percentile(dispatch, 99)),
      commit_ceiling_tps: round(ceiling),
      ceiling_ratio: round(log.n / wall / ceiling, 3),
      queries_per_movement: round(queries / movements),
      commits_per_movement: round(commits / movements),
      write_commits_per_movement: round(writeCommits / movements),
      critical_path_statements: critical.median,
      idle_statements_per_s: idle.perProcessPerSecond,
      worker_rss_mb_max: round(rss.maxMb()),
      ...(preload > 0 ? { preloaded: preload } : {}),
    };
    console.log(`movements            ${movements} (${processes} worker processes, ${concurrency} load clients, ${rate > 0 ? `${rate} approvals/s` : 'approved at once'})`);
    console.log(`wall time            ${round(wall, 2)} s`);
    console.log(`movements/s          ${result.movements_per_s}`);
    console.log(`transitions/s        ${result.transitions_per_s} (${log.n} transitions)`);
    console.log(`e2e p50 / p99        ${result.e2e_p50_ms} / ${result.e2e_p99_ms} ms (approve -> COMPLETED)`);
    console.log(`dispatch p50 / p99   ${result.dispatch_p50_ms} / ${result.dispatch_p99_ms} ms (approve -> first submit)`);
    console.log(`commit ceiling       ${result.commit_ceiling_tps} tps (single-row UPDATE, ${concurrency} clients)`);
    console.log(`ceiling ratio        ${result.ceiling_ratio}`);
    console.log(`per movement         ${result.queries_per_movement} statements, ${result.commits_per_movement} commits (${result.write_commits_per_movement} writing)`);
    console.log(`critical path        ${result.critical_path_statements} worker statements (one movement alone, median of ${PROBES}: ${critical.counts.join(', ')})`);
    if (values.trace) for (const line of critical.trace) console.error(`  ${line}`);
    console.log(`idle                 ${result.idle_statements_per_s} statements/s per worker process (nothing to do, ${IDLE_SECONDS} s)`);
    if (values.trace) for (const line of idle.sources) console.error(`  ${line}`);
    console.log(`worker RSS max       ${result.worker_rss_mb_max} MB${preload > 0 ? ` (${preload} finished movements preloaded)` : ''}`);
    console.log(JSON.stringify(result));
  } finally {
    await cleanup();
    signals.remove();
  }
}

main().catch((err) => {
  // After SIGINT/SIGTERM the run fails as its database goes away; the signal handler exits.
  if (signals?.signalled()) return;
  console.error(err);
  process.exit(1);
});
