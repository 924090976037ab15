import { sweepStatuses } from '../../actors/sweeps.ts';
import { listHeartbeats } from '../../persistence/heartbeats.ts';
import { resourceApp, type V3Context } from './context.ts';
import { WorkersSchema } from './schemas.ts';
import { readRoute } from './route.ts';

const tags = ['Workers'];

const workersRoute = readRoute({
  operationId: 'listWorkers',
  path: '/workers',
  tags,
  summary: "Every sweep's last run, duration, outcome and next due time (from pg-boss's job records), and the hot loops' heartbeats",
  answer: WorkersSchema,
  shows: 'The sweeps and the hot loops of every process',
});

const iso = (d: Date) => new Date(d).toISOString();

export function workerRoutes(ctx: V3Context) {
  const app = resourceApp();
  app.openapi(workersRoute, async (c) => {
    const { boss } = ctx.runtime();
    const [sweeps, beats] = await Promise.all([sweepStatuses({ pool: ctx.pool, boss, config: ctx.config }), listHeartbeats(ctx.pool)]);
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
      runs: Number(b.loop_runs),
      consecutive_errors: b.consecutive_errors,
      last_error: b.last_error,
      last_run_at: b.last_run_at ? iso(b.last_run_at) : null,
      started_at: iso(b.started_at),
      last_beat_at: iso(b.last_beat_at),
    }));
    return c.json({ sweeps, loops, workers }, 200);
  });
  return app;
}
