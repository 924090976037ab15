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
  /** The deployment the process serves (FERRY_NETWORK_CLASS). Default 'default'. */
  network_class?: string;
  /** The lease holder's live movement actors; null for every other worker. */
  live_actors?: number | null;
  /** How often the supervisor restarted this worker in this process. Default 0. */
  restarts?: number;
}

/** One row per worker per process: which workers are expected to run, and when they last did. */
export async function upsertHeartbeat(db: Queryable, h: Heartbeat): Promise<void> {
  await db.query(
    `INSERT INTO worker_heartbeats (process_id, worker_name, hostname, pid, group_name, status, loop_runs,
                                    consecutive_errors, last_error, kind, enabled, interval_seconds, last_run_at,
                                    network_class, live_actors, restarts)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, CASE WHEN $13::boolean THEN now() END, $14, $15, $16)
     ON CONFLICT (process_id, worker_name) DO UPDATE
        SET status = EXCLUDED.status, loop_runs = EXCLUDED.loop_runs,
            consecutive_errors = EXCLUDED.consecutive_errors, last_error = EXCLUDED.last_error,
            kind = EXCLUDED.kind, enabled = EXCLUDED.enabled, interval_seconds = EXCLUDED.interval_seconds,
            last_run_at = coalesce(EXCLUDED.last_run_at, worker_heartbeats.last_run_at),
            network_class = EXCLUDED.network_class, live_actors = EXCLUDED.live_actors, restarts = EXCLUDED.restarts,
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
      h.network_class ?? 'default',
      h.live_actors ?? null,
      h.restarts ?? 0,
    ],
  );
}

export type HeartbeatRow = Required<Omit<Heartbeat, 'ran'>> & { started_at: Date; last_beat_at: Date; last_run_at: Date | null };

/** Every worker row, or those of one network class, by process and worker name. */
export async function listHeartbeats(db: Queryable, networkClass?: string): Promise<HeartbeatRow[]> {
  const { rows } = networkClass
    ? await db.query('SELECT * FROM worker_heartbeats WHERE network_class = $1 ORDER BY process_id, worker_name', [networkClass])
    : await db.query('SELECT * FROM worker_heartbeats ORDER BY process_id, worker_name');
  return rows;
}

/** A clean stop: every row of the process says so, and is no longer expected to beat. */
export async function markProcessStopped(db: Queryable, processId: string): Promise<void> {
  await db.query("UPDATE worker_heartbeats SET status = 'stopped', live_actors = CASE WHEN live_actors IS NULL THEN NULL ELSE 0 END, last_beat_at = now() WHERE process_id = $1", [processId]);
}
