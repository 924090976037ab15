/**
 * The benchmark's honesty: its scratch database is dropped however the run ends (also on SIGINT and
 * SIGTERM, and stale ones from killed runs at the next start), and it never waits for movements
 * that cannot complete. A run ends when every movement has reached a state it will not leave by
 * itself, or when nothing progressed for the stall limit; anything but "all COMPLETED" is reported
 * with states and error codes, and the bench exits non-zero.
 */
import { randomBytes } from 'node:crypto';
import type { Pool } from '../../src/persistence/db.ts';
import { benchProgress, unfinishedNodes, type UnfinishedNodes } from './bench-report.ts';
import { databasesNamed, dropDatabase, dropDatabaseIfUnused } from './test-databases.ts';

export const SCRATCH_PREFIX = 'ferry_bench_';

/** A scratch database name that carries its creation time: ferry_bench_<unix seconds>_<random>. */
export function scratchDatabaseName(now = Date.now()): string {
  return `${SCRATCH_PREFIX}${Math.floor(now / 1000)}_${randomBytes(4).toString('hex')}`;
}

/** Seconds since a scratch database was created, from its name; null for a name without a time. */
export function scratchAgeSeconds(name: string, now = Date.now()): number | null {
  const m = /^ferry_bench_(\d{9,12})_[0-9a-f]+$/.exec(name);
  return m ? Math.floor(now / 1000) - Number(m[1]) : null;
}

/**
 * Drops scratch databases left by earlier runs that died without cleaning up: those older than
 * `maxAgeSeconds` by their name (forcefully: their run is long gone, or its orphaned workers are
 * still connected), and those named before names carried a time, when nobody uses them.
 */
export async function dropStaleScratchDatabases(adminUrl: string, maxAgeSeconds = 3600, now = Date.now()): Promise<string[]> {
  const dropped: string[] = [];
  for (const name of await databasesNamed(adminUrl, SCRATCH_PREFIX)) {
    const age = scratchAgeSeconds(name, now);
    if (age === null) {
      if (/^ferry_bench_[0-9a-f]{8}$/.test(name) && (await dropDatabaseIfUnused(adminUrl, name))) dropped.push(name);
    } else if (age > maxAgeSeconds) {
      await dropDatabase(adminUrl, name);
      dropped.push(name);
    }
  }
  return dropped;
}

/**
 * Runs `cleanup` once on SIGINT or SIGTERM, then exits with 128 + the signal's number. `remove`
 * takes the handlers away (for the normal end of a run, which cleans up itself); `signalled` tells
 * the run that the errors it now meets (its database is being dropped) are the signal's doing.
 */
export function cleanUpOnSignals(
  cleanup: () => Promise<void>,
  log: (line: string) => void = (l) => console.error(l),
): { remove(): void; signalled(): boolean } {
  let running = false;
  const handler = (signal: NodeJS.Signals) => {
    if (running) return;
    running = true;
    log(`bench: ${signal} received; stopping workers and dropping the scratch database`);
    cleanup()
      .catch((err) => log(`bench: cleanup failed: ${String(err)}`))
      .finally(() => process.exit(signal === 'SIGINT' ? 130 : 143));
  };
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
  return {
    remove() {
      process.off('SIGINT', handler);
      process.off('SIGTERM', handler);
    },
    signalled: () => running,
  };
}

/** Request states a movement does not leave without a person (or at all). */
export const END_STATES = new Set(['COMPLETED', 'FAILED', 'MANUAL_INTERVENTION', 'WAITING_MANUAL_ACTION', 'REJECTED', 'EXPIRED', 'CANCELLED']);

export type RunEnd =
  | { outcome: 'completed'; states: Record<string, number> }
  | { outcome: 'ended'; states: Record<string, number>; nodes: UnfinishedNodes[] }
  | { outcome: 'stalled'; states: Record<string, number>; nodes: UnfinishedNodes[]; stalledSeconds: number }
  | { outcome: 'workers-died'; states: Record<string, number>; nodes: UnfinishedNodes[] };

export interface WatchOptions {
  /** No new transition for this long ends the run as stalled. */
  stallMs: number;
  everyMs?: number;
  /** Checked on every poll: true ends the run (e.g. every worker process has exited). */
  workersGone?: () => boolean;
}

/** Polls the movements until all of them reached an end state, nothing progressed for the stall limit, or the workers are gone. */
export async function watchMovements(pool: Pool, ids: string[], opts: WatchOptions): Promise<RunEnd> {
  let lastTransitions = -1;
  let lastProgressAt = Date.now();
  for (;;) {
    const { states, transitions } = await benchProgress(pool, ids);
    const ended = Object.entries(states).reduce((sum, [state, n]) => sum + (END_STATES.has(state) ? n : 0), 0);
    if ((states.COMPLETED ?? 0) === ids.length) return { outcome: 'completed', states };
    if (ended === ids.length) return { outcome: 'ended', states, nodes: await unfinishedNodes(pool, ids) };
    if (transitions !== lastTransitions) {
      lastTransitions = transitions;
      lastProgressAt = Date.now();
    } else if (Date.now() - lastProgressAt >= opts.stallMs) {
      return { outcome: 'stalled', states, nodes: await unfinishedNodes(pool, ids), stalledSeconds: Math.round((Date.now() - lastProgressAt) / 1000) };
    }
    if (opts.workersGone?.()) return { outcome: 'workers-died', states, nodes: await unfinishedNodes(pool, ids) };
    await new Promise((r) => setTimeout(r, opts.everyMs ?? 200));
  }
}

const WHY: Record<Exclude<RunEnd['outcome'], 'completed'>, (end: RunEnd) => string> = {
  ended: () => 'not every movement completed',
  stalled: (end) => `no movement progressed for ${(end as { stalledSeconds: number }).stalledSeconds} s (the stall limit)`,
  'workers-died': () => 'every worker process exited',
};

/** The lines the bench prints when a run did not complete: why, movements per state, nodes per state and error code. */
export function describeRunEnd(end: RunEnd, total: number): string[] {
  if (end.outcome === 'completed') return [];
  const lines = [`bench: ${WHY[end.outcome](end)}; ${end.states.COMPLETED ?? 0} of ${total} movements completed`];
  lines.push('movements by state:');
  for (const [state, n] of Object.entries(end.states).sort(([a], [b]) => a.localeCompare(b))) lines.push(`  ${state.padEnd(22)} ${n}`);
  if (end.nodes.length > 0) {
    lines.push('nodes of the movements that did not complete, by movement state, node state and error code:');
    for (const r of end.nodes) {
      lines.push(`  ${r.request_state.padEnd(22)} ${r.node_state.padEnd(12)} ${(r.error_code ?? '-').padEnd(28)} ${r.n}`);
      if (r.sample_detail) lines.push(`      e.g. ${r.sample_detail}`);
    }
  }
  return lines;
}

/** The run's end as one JSON object (printed as the bench's last line when it did not complete). */
export function runEndJson(end: RunEnd, total: number): Record<string, unknown> {
  const errorCodes: Record<string, number> = {};
  for (const r of end.outcome === 'completed' ? [] : end.nodes) if (r.error_code) errorCodes[r.error_code] = (errorCodes[r.error_code] ?? 0) + r.n;
  return { outcome: end.outcome, movements: total, states: end.states, error_codes: errorCodes };
}
