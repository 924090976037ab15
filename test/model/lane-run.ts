/**
 * Model-based random runs of the real system on the lanes beyond ERC-20 (test/model/random-run.ts
 * has that one): CCTP (two anvil chains, the CCTP test contracts, the attestation emulator) and the
 * CEX lane (the Binance emulator, through ccxt). A seeded schedule drawn from the model's alphabet
 * (people approve; a process is SIGKILLed, at a random moment or at a chosen step of a lane, or is
 * SIGSTOPped; a provider is down, slow, refuses, stops answering; PostgreSQL restarts) is executed
 * against real worker processes and an embedded PostgreSQL of the run's own. Each worker talks to
 * every provider through a proxy of its own (test/helpers/fault-proxy.ts), so a kill "at the burn's
 * broadcast" kills the very process that broadcast.
 *
 * Afterwards the providers, not Ferry's tables, say what happened (the chains' events, the
 * exchange's ledger), and the tables are held against them and against the model's rules (S1, S3,
 * S4, S5, L1); each lane's check is in its own file (cctp-run.ts, cex-run.ts). A violation comes
 * with the seed, the schedule and the trace of what fired when, so the seed replays the faults.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { prng } from '../../scripts/lib/prng.ts';
import { reconcileMovement } from '../../src/sweeps/reconciliation.ts';
import { deliverMovementEvent } from '../../src/durable/transition.ts';
import { createPool, withTransaction, type Pool } from '../../src/persistence/db.ts';
import { startEmbeddedPostgres, type EmbeddedServer } from '../../src/persistence/embedded.ts';
import { migrate } from '../../src/persistence/migrate.ts';
import { getMovement, nodesOfMovement, transitionsOfMovement, type NodeRow } from '../../src/persistence/movements.ts';
import { prepareDatabase } from '../../src/persistence/roles.ts';
import { collectingDeps } from '../helpers/fixtures.ts';
import { freePort } from '../helpers/net.ts';
import { exited, spawnWorker } from '../helpers/processes.ts';
import { waitFor } from '../helpers/wait.ts';

/** Faults every lane has: a process killed at a random moment, a process stopped, the database restarted. */
export type CommonFault = 'crash' | 'stall' | 'database';

export interface FaultSpec {
  /** When the fault may start (ms into the run): [lo, hi] as fractions of the horizon. */
  window: [number, number];
  /** Its length (a stall's, an outage's; a kill's down time) in ms: [lo, hi]. */
  ms: [number, number];
  /** Says what the step does, for the schedule. */
  describe(step: FaultStep): string;
}

export type FaultStep = { at: number; kind: string; worker: number; ms: number };
export type Step = { at: number; kind: 'approve'; movement: number } | FaultStep;

export const COMMON_FAULTS: Record<CommonFault, FaultSpec> = {
  crash: { window: [0.05, 1], ms: [0, 1500], describe: (s) => `SIGKILL worker ${s.worker}, back after ${s.ms} ms` },
  // Past the SUBMITTING grace (1 s) and the nonce reaper's stuck limit (3 s), below the CEX lane's
  // not-found grace (the timing assumption of docs/design.md).
  stall: { window: [0.05, 1], ms: [1500, 4000], describe: (s) => `SIGSTOP worker ${s.worker} for ${s.ms} ms` },
  database: { window: [0.15, 1], ms: [500, 2500], describe: (s) => `PostgreSQL stops, back after ${s.ms} ms` },
};

export interface LaneRunOptions<K extends string> {
  seed: number;
  movements: number;
  workers: number;
  /** How many of each fault the schedule holds (kinds left out: none). */
  faults: Partial<Record<CommonFault | K, number>>;
  /** The span over which approvals and faults are spread. Default 10 s. */
  horizonMs?: number;
  /**
   * A planted fault the check must report (the lane says which): a bug in the worker processes, or
   * effects added on the providers once the run is over, after which the check runs a second time
   * (its violations in `planted`, the run's own in `violations`).
   */
  plant?: string;
}

export interface LaneRunReport {
  lane: string;
  seed: number;
  /** The options the run was made with (with the seed, they replay its schedule). */
  options: Omit<LaneRunOptions<string>, 'seed'>;
  schedule: string[];
  /** What fired when: the faults as they were injected, the approvals, the kills at a lane's step. */
  trace: string[];
  states: Record<string, number>;
  /** Faults injected, by kind (an armed kill that found no step to fire at is not counted). */
  faults: Record<string, number>;
  /** The lane's effects as its provider records them (burns, mints, withdrawals). */
  effects: Record<string, number>;
  violations: string[];
  /** Workers that exited without being killed (and were started again): not a violation, but worth a look. */
  selfExits: number;
  /** With an after-run plant: what the second check reported. */
  planted?: string[];
  ms: number;
  workerTail: string;
}

/** One movement of a run, as the lane created it and as the model expects it to end. */
export interface RunMovement {
  id: string;
  /** COMPLETED, or the terminal state and node error the model predicts (e.g. an amount the network cannot carry). */
  expect: { state: 'COMPLETED' } | { state: 'FAILED'; node: string; errorCode: string };
  describe: string;
}

/** What the harness hands a lane while the run goes on. */
export interface RunContext {
  pool(): Pool;
  /** SIGKILLs worker `w` and brings it back after `downMs`; false when it is stopped or already dead (nothing done). */
  kill(w: number, downMs: number, why: string): boolean;
  /** A line of the trace, stamped with the time into the run. */
  note(line: string): void;
  faultInjected(kind: string): void;
}

export interface LaneInstance {
  movements: RunMovement[];
  /** The environment of worker `w` (its config file names its own proxies). */
  env(w: number): Record<string, string>;
  /** Modules the workers load first (a planted bug). */
  preload?: string[];
  /** Injects a lane fault; false when it could not be (nothing to fire at). */
  inject(step: FaultStep, ctx: RunContext): Promise<void> | void;
  /** Disarms what inject() armed (kills waiting for a step), once the schedule is done. */
  disarm(): void;
  /** The providers' records held against the rows: the violations, and the effects counted. */
  check(rows: MovementRows[]): Promise<{ violations: string[]; effects: Record<string, number> }>;
  /** Adds the planted effects on the providers, after the first check (an after-run plant). */
  plantAfter?(): Promise<void>;
  stop(): Promise<void>;
}

export interface MovementRows {
  movement: RunMovement;
  state: string;
  nodes: NodeRow[];
  byKey: Record<string, NodeRow>;
}

export interface LaneDefinition<K extends string> {
  name: string;
  faults: Record<K, FaultSpec>;
  /** Environment every worker of the lane gets (intervals, graces). */
  env: Record<string, string>;
  setup(pool: Pool, opts: LaneRunOptions<K>, workers: number): Promise<LaneInstance>;
}

/** The run's schedule, from the seed alone: approvals in the first half, faults in their windows. */
export function laneSchedule<K extends string>(lane: LaneDefinition<K>, opts: LaneRunOptions<K>): Step[] {
  const rand = prng(opts.seed);
  const horizon = opts.horizonMs ?? 10_000;
  const between = (lo: number, hi: number) => Math.round(lo + rand() * (hi - lo));
  const specs: Record<string, FaultSpec> = { ...COMMON_FAULTS, ...lane.faults };
  const steps: Step[] = [];
  for (let m = 0; m < opts.movements; m++) steps.push({ at: between(0, horizon / 2), kind: 'approve', movement: m });
  // In a fixed order of kinds, so a seed means the same schedule whatever order the options list them in.
  for (const kind of Object.keys(specs).sort()) {
    const n = (opts.faults as Record<string, number | undefined>)[kind] ?? 0;
    const spec = specs[kind]!;
    for (let i = 0; i < n; i++) {
      steps.push({ at: between(spec.window[0] * horizon, spec.window[1] * horizon), kind, worker: between(0, opts.workers - 1), ms: between(spec.ms[0], spec.ms[1]) });
    }
  }
  return steps.sort((a, b) => a.at - b.at || a.kind.localeCompare(b.kind));
}

export function describeStep<K extends string>(lane: LaneDefinition<K>, s: Step): string {
  if (s.kind === 'approve') return `+${s.at} ms approve movement ${(s as { movement: number }).movement}`;
  const spec = ({ ...COMMON_FAULTS, ...lane.faults } as Record<string, FaultSpec>)[s.kind]!;
  return `+${s.at} ms ${s.kind}: ${spec.describe(s as FaultStep)}`;
}

/** Worker settings of every lane run: short intervals and graces, so recovery acts within the run. */
export const RUN_ENV: Record<string, string> = {
  FERRY_SUBMITTING_GRACE_SECONDS: '2',
  FERRY_SUBMITTING_GRACE_SECONDS_BY_LANE: 'evm=1,cctp=1,cex=1',
  FERRY_NODE_RECOVERY_INTERVAL_SECONDS: '0.5',
  FERRY_NODE_DISPATCH_INTERVAL_SECONDS: '0.2',
  FERRY_EVM_NONCE_REAPER_INTERVAL_SECONDS: '1',
  FERRY_EVM_NONCE_STUCK_SECONDS: '3',
  FERRY_LEASE_TTL_SECONDS: '3',
  FERRY_DB_POOL_MAX: '6',
  FERRY_WORKER_POOL_MAX: '6',
  FERRY_LOG_LEVEL: 'warn',
};

const TERMINAL = new Set(['COMPLETED', 'FAILED', 'CANCELLED', 'REJECTED', 'EXPIRED', 'MANUAL_INTERVENTION']);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function laneRun<K extends string>(lane: LaneDefinition<K>, opts: LaneRunOptions<K>): Promise<LaneRunReport> {
  const started = Date.now();
  const steps = laneSchedule(lane, opts);
  const violations: string[] = [];
  const trace: string[] = [];
  const faults: Record<string, number> = {};
  const dataDir = mkdtempSync(join(tmpdir(), `ferry-${lane.name}-run-`));
  const port = await freePort();
  let server: EmbeddedServer = await startEmbeddedPostgres({ dataDir, port });
  const url = server.appUrl;
  await prepareDatabase({ ownerUrl: server.url, appUrl: url, setup: true, migrate: (owner) => migrate(owner) });
  let pool: Pool = createPool(url, 4);
  let t0 = Date.now();
  const note = (line: string) => void trace.push(`+${Date.now() - t0} ms ${line}`);

  let instance: LaneInstance | null = null;
  const workers: ChildProcess[] = [];
  const stopped = new Set<number>();
  const pending: Promise<unknown>[] = [];
  let tail = '';
  let finishing = false;
  let selfExits = 0;
  try {
    instance = await lane.setup(pool, opts, opts.workers);
    const inst = instance;
    const killed = new WeakSet<ChildProcess>();
    const spawn = (w: number): ChildProcess => {
      const child = spawnWorker(url, { ...RUN_ENV, ...lane.env, ...inst.env(w) }, { output: 'pipe', preload: inst.preload });
      child.stdout!.setEncoding('utf8').on('data', (chunk: string) => void (tail = (tail + `[w${w}] ` + chunk).slice(-20_000)));
      // The supervisor's part: a worker that exits on its own (it could not reach the database while
      // starting) is started again, as a process manager would.
      child.once('exit', (code, signal) => {
        if (finishing || killed.has(child) || workers[w] !== child) return;
        selfExits++;
        note(`worker ${w} exited on its own (${signal ?? `code ${code}`}); started again`);
        pending.push(sleep(500).then(() => void (workers[w] === child && !finishing && (workers[w] = spawn(w)))));
      });
      return child;
    };
    for (let w = 0; w < opts.workers; w++) workers.push(spawn(w));
    // The schedule's clock starts once every worker is up (a worker takes seconds to start).
    await waitFor(
      'the workers to start',
      async () => (await pool.query(`SELECT count(DISTINCT pid)::int AS n FROM worker_heartbeats WHERE pid = ANY($1::int[])`, [workers.map((c) => c.pid)])).rows[0].n >= opts.workers,
      { timeoutMs: 90_000, everyMs: 200 },
    );
    const ctx: RunContext = {
      pool: () => pool,
      note,
      faultInjected: (kind) => void (faults[kind] = (faults[kind] ?? 0) + 1),
      kill: (w, downMs, why) => {
        const child = workers[w]!;
        if (finishing || stopped.has(w) || child.exitCode !== null || child.signalCode !== null) return false;
        killed.add(child);
        child.kill('SIGKILL');
        note(`SIGKILL worker ${w} (${why}), back after ${downMs} ms`);
        pending.push(
          exited(child)
            .then(() => sleep(downMs))
            .then(() => {
              if (workers[w] === child && !finishing) workers[w] = spawn(w);
            }),
        );
        return true;
      },
    };
    const approveLater: number[] = [];
    const approve = async (m: number) => {
      try {
        await withTransaction(pool, (c) => deliverMovementEvent(c, inst.movements[m]!.id, { type: 'APPROVE', by: 'approver', at: new Date().toISOString() }, { actor: 'approver', deps: collectingDeps() }));
        note(`approved movement ${m}`);
      } catch {
        // The database is down: approve once it is back.
        approveLater.push(m);
      }
    };

    t0 = Date.now();
    for (const step of steps) {
      const wait = t0 + step.at - Date.now();
      if (wait > 0) await sleep(wait);
      if (step.kind === 'approve') {
        await approve((step as { movement: number }).movement);
        continue;
      }
      const f = step as FaultStep;
      switch (f.kind) {
        case 'crash': {
          const child = workers[f.worker]!;
          if (stopped.has(f.worker) || child.exitCode !== null || child.signalCode !== null) break;
          ctx.faultInjected('crash');
          ctx.kill(f.worker, f.ms, 'crash');
          break;
        }
        case 'stall': {
          const child = workers[f.worker]!;
          if (stopped.has(f.worker) || child.exitCode !== null || child.signalCode !== null) break;
          ctx.faultInjected('stall');
          stopped.add(f.worker);
          child.kill('SIGSTOP');
          note(`SIGSTOP worker ${f.worker} for ${f.ms} ms`);
          pending.push(sleep(f.ms).then(() => (child.kill('SIGCONT'), stopped.delete(f.worker), note(`SIGCONT worker ${f.worker}`))));
          break;
        }
        case 'database':
          ctx.faultInjected('database');
          note(`PostgreSQL stops for ${f.ms} ms`);
          await pool.end().catch(() => {});
          await server.stop();
          await sleep(f.ms);
          server = await startEmbeddedPostgres({ dataDir, port });
          pool = createPool(url, 4);
          note('PostgreSQL is back');
          break;
        default:
          await inst.inject(f, ctx);
      }
    }
    // The last outages and stalls run out; kills still armed wait for a step a little longer.
    const faultsEnd = Math.max(0, ...steps.filter((s) => s.kind !== 'approve').map((s) => s.at + (s as FaultStep).ms));
    await sleep(Math.max(0, faultsEnd - (Date.now() - t0)));
    for (const m of approveLater.splice(0)) await approve(m);
    if (approveLater.length > 0) violations.push(`could not approve movements ${approveLater.join(', ')} after the faults`);

    // L1: with the faults over, every movement ends.
    const ids = inst.movements.map((m) => m.id);
    const ended = await waitFor(
      'every movement to end after the faults',
      async () => {
        const states = await Promise.all(ids.map(async (id) => (await getMovement(pool, id))?.request_state ?? 'MISSING'));
        return states.every((s) => TERMINAL.has(s)) ? states : null;
      },
      { timeoutMs: 120_000, everyMs: 250 },
    ).catch((err: Error) => {
      violations.push(`L1: ${err.message}`);
      return null;
    });
    finishing = true;
    inst.disarm();
    await Promise.all(pending);

    const rows: MovementRows[] = [];
    const states: Record<string, number> = {};
    for (const [i, m] of inst.movements.entries()) {
      const row = (await getMovement(pool, m.id))!;
      const nodes = await nodesOfMovement(pool, m.id);
      const log = await transitionsOfMovement(pool, m.id);
      const state = ended?.[i] ?? row.request_state;
      states[state] = (states[state] ?? 0) + 1;
      const name = `movement ${i} (${m.describe}, ${m.id})`;
      const byKey = Object.fromEntries(nodes.map((n) => [n.node_key, n]));
      rows.push({ movement: m, state, nodes, byKey });
      const summary = nodes.map((n) => `${n.node_key} ${n.node_state} ${n.error_code ?? ''}`.trim()).join(', ');
      if (state === 'COMPLETED') {
        for (const n of nodes) if (n.node_state !== 'COMPLETED' && n.node_state !== 'SKIPPED') violations.push(`S4: ${name} is COMPLETED with node ${n.node_key} ${n.node_state}`);
      }
      if (m.expect.state === 'COMPLETED' && state !== 'COMPLETED') {
        violations.push(`L1: ${name} ended ${state} (${summary}), the model expects COMPLETED: the providers answered in the end and nobody refused`);
      }
      if (m.expect.state === 'FAILED') {
        const n = byKey[m.expect.node];
        if (state !== 'FAILED' || n?.error_code !== m.expect.errorCode) violations.push(`L1: ${name} ended ${state} (${summary}), the model expects FAILED with ${m.expect.node} ${m.expect.errorCode}`);
      }
      for (const d of reconcileMovement(row, nodes, log)) violations.push(`S5: ${name}: ${JSON.stringify(d)}`);
    }
    const checked = await inst.check(rows);
    violations.push(...checked.violations);
    let planted: string[] | undefined;
    if (inst.plantAfter) {
      await inst.plantAfter();
      planted = (await inst.check(rows)).violations;
    }
    const { seed: _seed, ...options } = opts;
    return {
      lane: lane.name,
      seed: opts.seed,
      options,
      schedule: steps.map((s) => describeStep(lane, s)),
      trace,
      states,
      faults,
      effects: checked.effects,
      violations,
      selfExits,
      ...(planted ? { planted } : {}),
      ms: Date.now() - started,
      workerTail: tail,
    };
  } finally {
    finishing = true;
    instance?.disarm();
    for (const w of workers) {
      w.kill('SIGCONT');
      w.kill('SIGTERM');
    }
    await Promise.all(workers.map((w) => Promise.race([exited(w), sleep(15_000).then(() => w.kill('SIGKILL'))])));
    await Promise.allSettled(pending);
    await instance?.stop().catch(() => {});
    await pool.end().catch(() => {});
    await server.stop().catch(() => {});
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** A report in a few lines: the figures; with violations, the seed's schedule, its trace and the violations. */
export function formatLaneRun(r: LaneRunReport): string {
  const kinds = Object.entries(r.faults)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, n]) => `${k} ${n}`)
    .join(', ');
  const total = Object.values(r.faults).reduce((a, b) => a + b, 0);
  const effects = Object.entries(r.effects)
    .map(([k, n]) => `${n} ${k}`)
    .join(', ');
  const head = `${r.lane} seed ${r.seed}: ${Object.entries(r.states).map(([s, n]) => `${n} ${s}`).join(', ')}; ${effects}; ${total} faults (${kinds || 'none'}); violations: ${r.violations.length}${r.selfExits > 0 ? `; ${r.selfExits} worker(s) exited on their own and were started again` : ''}; ${(r.ms / 1000).toFixed(1)} s`;
  if (r.violations.length === 0) return head;
  const replay = [`  replay: seed ${r.seed} with ${JSON.stringify(r.options)}`, `    (a run as CI and verify make it: npm run verify -- --lane ${r.lane} --random 1 --seed ${r.seed})`];
  return [head, ...replay, '  schedule:', ...r.schedule.map((s) => `    ${s}`), '  trace:', ...r.trace.map((s) => `    ${s}`), '  violations:', ...r.violations.map((v) => `    ${v}`)].join('\n');
}
