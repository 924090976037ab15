import { isUuid } from '../ids.ts';
import { log } from '../log.ts';
import { writeAudit } from '../persistence/audit.ts';
import { withTransaction, type Pool } from '../persistence/db.ts';
import { pgbossJobState } from '../persistence/pgboss-jobs.ts';

/**
 * Changes made through the pg-boss dashboard (retry, cancel, resume or delete a job, send a job,
 * edit queues and schedules), recorded as what happened, not as what was asked.
 *
 * The dashboard writes pg-boss's tables over its own connections, so Ferry cannot put the audit
 * record in the dashboard's transaction. It records after the dashboard answered: for a job action
 * it reads the job's state before and after, and the record says `applied` only when the job went
 * to the state the action makes (cancelled, created, retry, gone) from another one; otherwise
 * `refused` (the dashboard answers 200 with "could not be cancelled" when pg-boss changed nothing).
 * Other changes Ferry cannot check: they are recorded `unverified` with the dashboard's status.
 * A record that cannot be written after the change is logged at error with everything it held.
 */
export interface DashboardAction {
  /** `principal:<id>` of whoever acts. */
  actor: string;
  /** `job.retry`, `job.cancel`, ... for a job; `change` for anything else. */
  action: string;
  queue: string | null;
  jobId: string | null;
  /** The dashboard path the change was posted to (under /dashboard). */
  path: string;
  intent: string | null;
}

export type DashboardOutcome = 'applied' | 'refused' | 'failed' | 'unverified';

/** The state each job action leaves a job in; null: the job is gone. */
const TARGET: Record<string, string | null> = {
  'job.cancel': 'cancelled',
  'job.resume': 'created',
  'job.retry': 'retry',
  'job.delete': null,
};

/** What a job action did, from the job's state before and after it (undefined: not a job action). */
export function jobActionOutcome(action: string, before: string | null, after: string | null): 'applied' | 'refused' | undefined {
  if (!(action in TARGET)) return undefined;
  const target = TARGET[action];
  return before !== null && before !== target && after === target ? 'applied' : 'refused';
}

/**
 * Runs one dashboard change (`run` passes it to the dashboard) and writes its audit record with the
 * outcome. A `run` that throws is recorded `failed` (unless the job shows the change happened).
 */
export async function performDashboardAction(pool: Pool, schema: string, a: DashboardAction, run: () => Promise<Response>): Promise<Response> {
  const job = a.action in TARGET && a.queue && a.jobId && isUuid(a.jobId) ? { queue: a.queue, id: a.jobId } : null;
  const stateOf = () => (job ? pgbossJobState(pool, schema, job.queue, job.id) : Promise.resolve(null));
  const before = await stateOf();
  let res: Response | undefined;
  let thrown: unknown;
  try {
    res = await run();
  } catch (err) {
    thrown = err;
  }
  const after = await stateOf();
  const checked = jobActionOutcome(a.action, before, after);
  const status = res?.status ?? 500;
  const outcome: DashboardOutcome =
    checked === 'applied' ? 'applied' : thrown !== undefined || status >= 500 ? 'failed' : (checked ?? (status >= 400 ? 'refused' : 'unverified'));
  const details = {
    queue: a.queue,
    job_id: a.jobId,
    intent: a.intent,
    path: a.path,
    outcome,
    status: res?.status ?? null,
    ...(a.action in TARGET ? { state_before: before, state_after: after } : {}),
  };
  const entry = { actor: a.actor, action: `dashboard.${a.action}`, entity_type: a.jobId ? 'pgboss_job' : 'pgboss', entity_id: a.jobId, details };
  try {
    await withTransaction(pool, (client) => writeAudit(client, entry));
  } catch (err) {
    // The change already happened (or was refused): the answer stands, the lost record is loud.
    log.error({ err, audit: entry }, 'dashboard change not recorded in the audit log');
  }
  if (thrown !== undefined) throw thrown;
  return res!;
}
