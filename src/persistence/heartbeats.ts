import type { Queryable } from './db.ts';

export interface Heartbeat {
  process_id: string;
  worker_name: string;
  hostname: string;
  pid: number;
  group_name: 'core' | 'sidecar';
  status: string;
  loop_runs: number;
  consecutive_errors: number;
  last_error: string | null;
}

/** One row per worker per process: which workers are expected to run, and when they last did. */
export async function upsertHeartbeat(db: Queryable, h: Heartbeat): Promise<void> {
  await db.query(
    `INSERT INTO worker_heartbeats (process_id, worker_name, hostname, pid, group_name, status, loop_runs,
                                    consecutive_errors, last_error)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
     ON CONFLICT (process_id, worker_name) DO UPDATE
        SET status = EXCLUDED.status, loop_runs = EXCLUDED.loop_runs,
            consecutive_errors = EXCLUDED.consecutive_errors, last_error = EXCLUDED.last_error,
            last_beat_at = now()`,
    [h.process_id, h.worker_name, h.hostname, h.pid, h.group_name, h.status, h.loop_runs, h.consecutive_errors, h.last_error],
  );
}

export async function listHeartbeats(db: Queryable): Promise<(Heartbeat & { started_at: Date; last_beat_at: Date })[]> {
  const { rows } = await db.query('SELECT * FROM worker_heartbeats ORDER BY process_id, worker_name');
  return rows;
}
