/**
 * `npm run bench -- --api N`: the API process under hostile traffic. Starts `src/main.ts` (API and
 * workers in one process, as `npm start` runs it) on the scratch database, lets it settle, then
 * sends N requests of the mix in api-load.ts twice over (two rounds of the same seeded traffic),
 * and reads the process's resident memory and V8 heap after each round has settled.
 *
 * A leak grows with the traffic: the second round ends higher than the first by about as much as the
 * first added. A high-water mark (allocator pages, V8's grown heap limit) does not: the second round
 * ends level with the first. The JSON line carries api_rss_mb_idle, api_rss_mb_peak,
 * api_rss_mb_after (after both rounds), api_rss_mb_after_round1, the V8 heap in use at the same
 * points (api_heap_mb_*, from /metrics) and the status counts; a 5xx fails the run. With
 * --heap-snapshots the process also writes a heap snapshot (after a full collection) when idle and
 * after each round, and the retained sizes are printed (api_heap_retained_mb_*) with the largest
 * constructors: the leak check itself.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createPool } from '../../src/persistence/db.ts';
import { createToken } from '../../src/persistence/tokens.ts';
import { driveApi, heapUsedMb, rssMb, type LoadResult } from './api-load.ts';
import { prng } from './prng.ts';
import { summarizeSnapshot, takeSnapshot, type SnapshotSummary } from './heap-snapshot.ts';
import { benchTemplate, createMovements } from './load.ts';
import { exited, waitFor } from './processes.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const round = (x: number) => Math.round(x * 10) / 10;

export async function runApiBench(
  url: string,
  opts: { requests: number; concurrency: number; settleMs?: number; heapSnapshots?: boolean },
): Promise<Record<string, unknown>> {
  const settleMs = opts.settleMs ?? 5000;
  const pool = createPool(url, 2, 'ferry-bench');
  const { token } = await createToken(pool, { name: 'bench-admin', role: 'admin' });
  const [movementId] = await createMovements(pool, benchTemplate(), 1, 1);
  await pool.end();

  const dataDir = mkdtempSync(join(tmpdir(), 'ferry-bench-api-'));
  const snapshotDir = join(dataDir, 'snapshots');
  mkdirSync(snapshotDir);
  const snapshotFlags = opts.heapSnapshots ? ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${snapshotDir}`] : [];
  const snapshots: SnapshotSummary[] = [];
  const snapshot = async () => {
    if (!opts.heapSnapshots) return;
    const path = await takeSnapshot(child.pid!, snapshotDir);
    snapshots.push(summarizeSnapshot(path));
    rmSync(path);
  };
  const child = spawn(process.execPath, [...snapshotFlags, '--import', 'tsx', 'src/main.ts'], {
    env: { ...process.env, DATABASE_URL: url, PORT: '0', HOST: '127.0.0.1', FERRY_DATA_DIR: dataDir, FERRY_LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  try {
    let baseUrl: string | undefined;
    child.stdout!.setEncoding('utf8');
    child.stdout!.on('data', (chunk: string) => {
      for (const line of chunk.split('\n')) {
        const m = /ferry listening on (http:\/\/[^"\s]+)/.exec(line);
        if (m) baseUrl = m[1];
      }
    });
    const base = await waitFor('the API process to listen', () => {
      if (child.exitCode !== null) throw new Error('the API process exited while starting');
      return baseUrl;
    }, 120_000, 100);

    await sleep(settleMs);
    const idle = rssMb(child.pid!);
    const heapIdle = await heapUsedMb(base, token);
    await snapshot();
    let peak = idle;
    const sampler = setInterval(() => (peak = Math.max(peak, rssMb(child.pid!) || 0)), 200);
    sampler.unref();

    const rounds: LoadResult[] = [];
    const after: number[] = [];
    const heapAfter: Array<{ heap: number; external: number }> = [];
    for (let round = 0; round < 2; round++) {
      rounds.push(await driveApi(base, opts.requests, opts.concurrency, prng(42), token, movementId));
      await sleep(settleMs);
      after.push(rssMb(child.pid!));
      heapAfter.push(await heapUsedMb(base, token));
      await snapshot();
    }
    clearInterval(sampler);
    const byStatus: Record<string, number> = {};
    for (const r of rounds) for (const [s, n] of Object.entries(r.byStatus)) byStatus[s] = (byStatus[s] ?? 0) + n;
    const serverErrors = rounds.reduce((n, r) => n + r.serverErrors, 0);
    const transportErrors = rounds.reduce((n, r) => n + r.transportErrors, 0);
    const result = {
      api_requests: opts.requests * 2,
      api_concurrency: opts.concurrency,
      api_rss_mb_idle: round(idle),
      api_rss_mb_peak: round(peak),
      api_rss_mb_after_round1: round(after[0]),
      api_rss_mb_after: round(after[1]),
      api_heap_mb_idle: round(heapIdle.heap),
      api_heap_mb_after_round1: round(heapAfter[0].heap),
      api_heap_mb_after: round(heapAfter[1].heap),
      api_external_mb_after: round(heapAfter[1].external),
      ...(snapshots.length === 3
        ? {
            api_heap_retained_mb_idle: snapshots[0].retainedMb,
            api_heap_retained_mb_after_round1: snapshots[1].retainedMb,
            api_heap_retained_mb_after: snapshots[2].retainedMb,
          }
        : {}),
      api_5xx: serverErrors,
      api_transport_errors: transportErrors,
      api_statuses: byStatus,
    };
    console.log(`API requests         ${result.api_requests} (two rounds of ${opts.requests}, ${opts.concurrency} in flight)`);
    console.log(`statuses             ${Object.entries(byStatus).map(([s, n]) => `${s}: ${n}`).join(', ')}; transport errors ${transportErrors}`);
    console.log(`API RSS              idle ${result.api_rss_mb_idle} MB, peak ${result.api_rss_mb_peak} MB, after round 1 ${result.api_rss_mb_after_round1} MB, after round 2 ${result.api_rss_mb_after} MB`);
    console.log(`API heap in use      idle ${result.api_heap_mb_idle} MB, after round 1 ${result.api_heap_mb_after_round1} MB, after round 2 ${result.api_heap_mb_after} MB (outside the heap: ${result.api_external_mb_after} MB)`);
    if (snapshots.length === 3) {
      console.log(`retained after GC    idle ${snapshots[0].retainedMb} MB, after round 1 ${snapshots[1].retainedMb} MB, after round 2 ${snapshots[2].retainedMb} MB (heap snapshots)`);
      for (const [label, s] of [['idle', snapshots[0]], ['after', snapshots[2]]] as const) {
        console.log(`  largest ${label.padEnd(6)}   ${s.top.map((t) => `${t.name} ${t.mb} MB`).join(', ')}`);
      }
    }
    return result;
  } finally {
    child.kill('SIGTERM');
    await exited(child);
    rmSync(dataDir, { recursive: true, force: true });
  }
}
