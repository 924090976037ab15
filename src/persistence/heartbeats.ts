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
  await upsertHeartbeats(db, [h]);
}

/**
 * Many workers' rows in one statement (a process's roster flushes its due refreshes together). A
 * worker appears once per call: the roster keeps the latest row per worker.
 */
export async function upsertHeartbeats(db: Queryable, rows: readonly Heartbeat[]): Promise<void> {
  if (rows.length === 0) return;
  const col = <T>(f: (h: Heartbeat) => T) => rows.map(f);
  await db.query(
    `INSERT INTO worker_heartbeats (process_id, worker_name, hostname, pid, group_name, status, loop_runs,
                                    consecutive_errors, last_error, kind, enabled, interval_seconds, last_run_at,
                                    network_class, live_actors, restarts)
     SELECT r.process_id, r.worker_name, r.hostname, r.pid, r.group_name, r.status, r.loop_runs,
            r.consecutive_errors, r.last_error, r.kind, r.enabled, r.interval_seconds,
            CASE WHEN r.ran THEN now() END, r.network_class, r.live_actors, r.restarts
       FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::text[], $6::text[], $7::bigint[], $8::int[],
                   $9::text[], $10::text[], $11::boolean[], $12::float8[], $13::boolean[], $14::text[], $15::int[], $16::int[])
            AS r(process_id, worker_name, hostname, pid, group_name, status, loop_runs, consecutive_errors,
                 last_error, kind, enabled, interval_seconds, ran, network_class, live_actors, restarts)
     ON CONFLICT (process_id, worker_name) DO UPDATE
        SET status = EXCLUDED.status, loop_runs = EXCLUDED.loop_runs,
            consecutive_errors = EXCLUDED.consecutive_errors, last_error = EXCLUDED.last_error,
            kind = EXCLUDED.kind, enabled = EXCLUDED.enabled, interval_seconds = EXCLUDED.interval_seconds,
            last_run_at = coalesce(EXCLUDED.last_run_at, worker_heartbeats.last_run_at),
            network_class = EXCLUDED.network_class, live_actors = EXCLUDED.live_actors, restarts = EXCLUDED.restarts,
            last_beat_at = now()`,
    [
      col((h) => h.process_id),
      col((h) => h.worker_name),
      col((h) => h.hostname),
      col((h) => h.pid),
      col((h) => h.group_name),
      col((h) => h.status),
      col((h) => h.loop_runs),
      col((h) => h.consecutive_errors),
      col((h) => h.last_error),
      col((h) => h.kind ?? 'loop'),
      col((h) => h.enabled ?? true),
      col((h) => h.interval_seconds ?? null),
      col((h) => h.ran ?? true),
      col((h) => h.network_class ?? 'default'),
      col((h) => h.live_actors ?? null),
      col((h) => h.restarts ?? 0),
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
