import { createRoute } from '@hono/zod-openapi';
import { sweepStatuses } from '../../actors/sweeps.ts';
import { listHeartbeats } from '../../persistence/heartbeats.ts';
import { permitted } from '../auth.ts';
import { resourceApp, type V3Context } from './context.ts';
import { WorkersSchema, bearerSecurity, commonErrors, jsonResponse } from './schemas.ts';

const tags = ['Workers'];

const workersRoute = createRoute({
  method: 'get',
  path: '/workers',
  tags,
  summary: "Every sweep's last run, duration, outcome and next due time (from pg-boss's job records), and the hot loops' heartbeats",
  security: bearerSecurity,
  ...permitted('read'),
  responses: { 200: jsonResponse(WorkersSchema, 'The sweeps and the hot loops of every process'), ...commonErrors },
});

const iso = (d: Date) => new Date(d).toISOString();

export function workerRoutes(ctx: V3Context) {
  const app = resourceApp();
  app.openapi(workersRoute, async (c) => {
    const { boss } = ctx.runtime();
    const [sweeps, beats] = await Promise.all([sweepStatuses({ pool: ctx.pool, boss, config: ctx.config }), listHeartbeats(ctx.pool)]);
    // Only the hot loops beat: rows of the sidecar loops an earlier version ran are history.
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
    return c.json({ sweeps, loops }, 200);
  });
  return app;
}
