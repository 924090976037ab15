import { sweepStatuses } from '../../sweeps/sweeps.ts';
import { listHeartbeats, type HeartbeatRow } from '../../persistence/heartbeats.ts';
import { leasesByOwner } from '../../persistence/leases.ts';
import { resourceApp, type V3Context } from './context.ts';
import { WorkersQuery, WorkersSchema } from './schemas.ts';
import { readRoute } from './route.ts';

const tags = ['Workers'];

const workersRoute = readRoute({
  operationId: 'listWorkers',
  path: '/workers',
  tags,
  summary: "Every sweep's last run and next due time (from pg-boss's job records), every worker of every process of one network class, and per process its groups, live movement actors and leases",
  request: { query: WorkersQuery },
  answer: WorkersSchema,
  shows: 'The sweeps, the workers and the processes',
});

const iso = (d: Date) => new Date(d).toISOString();
/** Statuses of an enabled worker that is doing its job. */
const UP = new Set(['running', 'scheduled']);

type Leases = Map<string, { live: number; expired: number }>;

/** Per process: alive, stopped or gone, its groups' expected against running workers, its actors and leases. */
export function processViews(beats: HeartbeatRow[], leases: Leases, goneAfterSeconds: number, now = Date.now()) {
  const byProcess = new Map<string, HeartbeatRow[]>();
  for (const b of beats) byProcess.set(b.process_id, [...(byProcess.get(b.process_id) ?? []), b]);
  return [...byProcess.entries()].map(([processId, rows]) => {
    const last = Math.max(...rows.map((r) => new Date(r.last_beat_at).getTime()));
    const stopped = rows.every((r) => r.status === 'stopped');
    const state = stopped ? 'stopped' : now - last > goneAfterSeconds * 1000 ? 'gone' : 'alive';
    const group = (name: 'core' | 'sidecar') => {
      const expected = rows.filter((r) => r.group_name === name && r.enabled);
      const down = expected.filter((r) => state !== 'alive' || !UP.has(r.status));
      return { expected: expected.length, running: expected.length - down.length, not_running: down.map((r) => r.worker_name) };
    };
    const holder = rows.find((r) => r.worker_name === 'lease_holder');
    const first = rows[0];
    return {
      process_id: processId,
      hostname: first.hostname,
      pid: first.pid,
      network_class: first.network_class,
      state: state as 'alive' | 'stopped' | 'gone',
      started_at: iso(new Date(Math.min(...rows.map((r) => new Date(r.started_at).getTime())))),
      last_beat_at: iso(new Date(last)),
      // Measured on the clock that decides `state`, so a reader's own clock cannot skew it.
      last_beat_age_seconds: Math.max(0, Math.floor((now - last) / 1000)),
      groups: { core: group('core'), sidecar: group('sidecar') },
      live_actors: holder ? (state === 'alive' ? (holder.live_actors ?? 0) : 0) : null,
      leases: leases.get(processId) ?? { live: 0, expired: 0 },
    };
  });
}

export function workerRoutes(ctx: V3Context) {
  const app = resourceApp();
  app.openapi(workersRoute, async (c) => {
    const { boss } = ctx.runtime();
    const asked = c.req.valid('query').network_class ?? ctx.config.networkClass;
    const networkClass = asked === 'all' ? undefined : asked;
    const [sweeps, beats, leases] = await Promise.all([
      sweepStatuses({ pool: ctx.pool, boss, config: ctx.config }),
      listHeartbeats(ctx.pool, networkClass),
      leasesByOwner(ctx.pool),
    ]);
    // `loops`: the hot loops' rows as before; `workers`: every worker of every process.
    const loops = beats
      .filter((b) => b.group_name === 'core')
      .map((b) => ({
        process_id: b.process_id,
        worker_name: b.worker_name,
        hostname: b.hostname,
        pid: b.pid,
        status: b.status,
        loop_runs: Number(b.loop_runs),
        consecutive_errors: b.consecutive_errors,
        last_error: b.last_error,
        started_at: iso(b.started_at),
        last_beat_at: iso(b.last_beat_at),
      }));
    const workers = beats.map((b) => ({
      process_id: b.process_id,
      hostname: b.hostname,
      pid: b.pid,
      worker_name: b.worker_name,
      kind: b.kind,
      group: b.group_name,
      enabled: b.enabled,
      interval_seconds: b.interval_seconds === null ? null : Number(b.interval_seconds),
      status: b.status,
      network_class: b.network_class,
      restarts: b.restarts,
      runs: Number(b.loop_runs),
      consecutive_errors: b.consecutive_errors,
      last_error: b.last_error,
      last_run_at: b.last_run_at ? iso(b.last_run_at) : null,
      started_at: iso(b.started_at),
      last_beat_at: iso(b.last_beat_at),
    }));
    return c.json({ sweeps, loops, workers, processes: processViews(beats, leases, ctx.config.workerGoneAfterSeconds) }, 200);
  });
  return app;
}
