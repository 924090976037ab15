import { writeAudit } from '../persistence/audit.ts';
import { withTransaction, type Pool } from '../persistence/db.ts';

/**
 * Changes made through the pg-boss dashboard (retry, cancel, resume or delete a job, send a job,
 * edit queues and schedules). The dashboard writes pg-boss's tables over its own connections, so
 * Ferry cannot put the audit record in the same transaction; it records the request before passing
 * it on, and a request whose record cannot be written is not passed on.
 */
export interface DashboardAction {
  /** `token:<id>` of whoever acts. */
  actor: string;
  /** `job.retry`, `job.cancel`, ... for a job; `change` for anything else. */
  action: string;
  queue: string | null;
  jobId: string | null;
  /** The dashboard path the change was posted to (under /dashboard). */
  path: string;
  intent: string | null;
}

export async function recordDashboardAction(pool: Pool, a: DashboardAction): Promise<void> {
  await withTransaction(pool, (client) =>
    writeAudit(client, {
      actor: a.actor,
      action: `dashboard.${a.action}`,
      entity_type: a.jobId ? 'pgboss_job' : 'pgboss',
      entity_id: a.jobId,
      details: { queue: a.queue, job_id: a.jobId, intent: a.intent, path: a.path },
    }),
  );
}
