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
  /** loop (hot loop), queue (pg-boss consumer: callback delivery), sweep. Default loop. */
  kind?: 'loop' | 'queue' | 'sweep';
  /** Whether this process's configuration enables the worker. Default true. */
  enabled?: boolean;
  interval_seconds?: number | null;
  /** This beat follows a run (last_run_at moves); false for the row written at start. Default true. */
  ran?: boolean;
}

/** One row per worker per process: which workers are expected to run, and when they last did. */
export async function upsertHeartbeat(db: Queryable, h: Heartbeat): Promise<void> {
  await db.query(
    `INSERT INTO worker_heartbeats (process_id, worker_name, hostname, pid, group_name, status, loop_runs,
                                    consecutive_errors, last_error, kind, enabled, interval_seconds, last_run_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, CASE WHEN $13::boolean THEN now() END)
     ON CONFLICT (process_id, worker_name) DO UPDATE
        SET status = EXCLUDED.status, loop_runs = EXCLUDED.loop_runs,
            consecutive_errors = EXCLUDED.consecutive_errors, last_error = EXCLUDED.last_error,
            kind = EXCLUDED.kind, enabled = EXCLUDED.enabled, interval_seconds = EXCLUDED.interval_seconds,
            last_run_at = coalesce(EXCLUDED.last_run_at, worker_heartbeats.last_run_at),
            last_beat_at = now()`,
    [
      h.process_id,
      h.worker_name,
      h.hostname,
      h.pid,
      h.group_name,
      h.status,
      h.loop_runs,
      h.consecutive_errors,
      h.last_error,
      h.kind ?? 'loop',
      h.enabled ?? true,
      h.interval_seconds ?? null,
      h.ran ?? true,
    ],
  );
}

export type HeartbeatRow = Required<Omit<Heartbeat, 'ran'>> & { started_at: Date; last_beat_at: Date; last_run_at: Date | null };

export async function listHeartbeats(db: Queryable): Promise<HeartbeatRow[]> {
  const { rows } = await db.query('SELECT * FROM worker_heartbeats ORDER BY process_id, worker_name');
  return rows;
}
