import { hostname } from 'node:os';
import type { FerryConfig } from '../config.ts';
import type { Logger } from '../log.ts';
import type { Pool } from '../persistence/db.ts';
import { markProcessStopped, upsertHeartbeats, type Heartbeat } from '../persistence/heartbeats.ts';
import type { LoopStats } from './loop-runner.ts';

/**
 * The roster of one process's workers in worker_heartbeats (GET /v3/workers, `ferry workers`):
 * every hot loop, the callback delivery consumer and every sweep gets a row when the process starts,
 * with whether this configuration enables it and its interval, so a disabled worker is visible as
 * such and a worker that never ran is visible too; each run then refreshes its row (runs,
 * consecutive errors, last error, last run). Error texts are redacted before they are stored.
 *
 * Writes are batched: a change of a worker's status or error is written at once (one statement for
 * whatever changed in the same tick); the refresh of a row whose worker keeps running as before waits
 * up to HEARTBEAT_REFRESH_MS and goes with the other due refreshes, so a busy process writes its whole
 * roster in one statement every few seconds rather than one per worker run.
 */

export interface RosterEntry {
  name: string;
  group: 'core' | 'sidecar';
  kind: 'loop' | 'queue' | 'sweep';
  enabled: boolean;
  intervalSeconds: number | null;
}

/** A worker's row is refreshed at least this often while nothing else about it changes. */
export const HEARTBEAT_REFRESH_MS = 5000;
const MAX_ERROR_CHARS = 500;

/**
 * An error text with what may be a secret taken out: the configuration's own secrets, credentials
 * in URLs, bearer tokens and Ferry API tokens, 32-byte hex keys, and `password=`-style pairs.
 */
export function redactSecrets(text: string, secrets: readonly (string | undefined | null)[] = []): string {
  let out = text;
  for (const s of secrets) if (s && s.length >= 4) out = out.split(s).join('[redacted]');
  out = out
    .replace(/([a-z][a-z0-9+.-]*:\/\/)[^\s/@:]*:[^\s/@]*@/gi, '$1[redacted]@')
    .replace(/\bBearer\s+[A-Za-z0-9._~+/=-]+/g, 'Bearer [redacted]')
    // Ferry's own secrets by their prefixes: API tokens (fy_), destination secrets (whsec_, earlier fcs_), dashboard sessions (fds_).
    .replace(/\b(?:fy|fcs|fds)_[A-Za-z0-9_-]{16,}/g, '[redacted]')
    .replace(/\bwhsec_[A-Za-z0-9+/=]{16,}/g, '[redacted]')
    .replace(/\b0x[0-9a-fA-F]{64}\b/g, '[redacted]')
    .replace(/\b(password|passwd|pwd|secret|token|api[_-]?key|apikey|signature)(["']?\s*[=:]\s*["']?)[^\s&"',;]+/gi, '$1$2[redacted]');
  return out.length > MAX_ERROR_CHARS ? `${out.slice(0, MAX_ERROR_CHARS)}…` : out;
}

/** The secrets a configuration holds, for redactSecrets. */
export function configSecrets(config: Pick<FerryConfig, 'callbackSecret' | 'evmSignerKey' | 'databaseUrl'>): string[] {
  const out: string[] = [];
  if (config.callbackSecret) out.push(config.callbackSecret);
  if (config.evmSignerKey) out.push(config.evmSignerKey);
  try {
    const password = config.databaseUrl ? decodeURIComponent(new URL(config.databaseUrl).password) : '';
    if (password) out.push(password);
  } catch {
    // not a URL: nothing to take from it
  }
  return out;
}

interface Tracked {
  entry: RosterEntry;
  stats: LoopStats;
  writtenAt: number;
  written: string;
  /** Set by the supervisor: crashed (a sidecar waiting for its restart, a core worker that died). */
  override: 'restarting' | 'crashed' | null;
  restarts: number;
}

export interface RosterOptions {
  /** FERRY_NETWORK_CLASS: the rows are this deployment's baseline. */
  networkClass?: string;
  /** The lease holder's live movement actors, written with its row. */
  liveActors?: () => number;
}

export class WorkerRoster {
  readonly #workers = new Map<string, Tracked>();
  readonly #host = hostname();
  #stopped = false;
  /** Rows waiting for the next write, the latest per worker. */
  readonly #pending = new Map<string, Heartbeat>();
  #soon: NodeJS.Immediate | null = null;
  #later: NodeJS.Timeout | null = null;
  /** Writes go one after another, so an older row never lands after a newer one. */
  #writing: Promise<void> = Promise.resolve();

  constructor(
    readonly pool: Pool,
    readonly processId: string,
    readonly log: Logger,
    readonly secrets: readonly string[] = [],
    readonly options: RosterOptions = {},
  ) {}

  /**
   * Writes every worker's row at start: a loop 'starting' until its first run, a sweep 'scheduled'
   * (pg-boss hands each run to one process of the cluster), a queue consumer 'starting' until
   * `started`; 'disabled' when its switch is off.
   */
  async seed(entries: RosterEntry[]): Promise<void> {
    const rows: Heartbeat[] = [];
    for (const entry of entries) {
      const stats: LoopStats = { runs: 0, consecutiveErrors: 0, lastError: null, lastItems: 0 };
      this.#workers.set(entry.name, { entry, stats, writtenAt: 0, written: '', override: null, restarts: 0 });
      const status = !entry.enabled ? 'disabled' : entry.kind === 'sweep' ? 'scheduled' : 'starting';
      rows.push(this.#row(entry, stats, status, false));
    }
    await upsertHeartbeats(this.pool, rows).catch((err) => this.log.warn({ err, workers: rows.length }, 'heartbeat write failed'));
  }

  /** A queue consumer is polling: it runs whenever a job arrives, so it is running before its first job. */
  started(name: string): void {
    const t = this.#workers.get(name);
    if (t) this.#beat(t);
  }

  /** The supervisor's word on a worker: a sidecar waiting for its restart, or a worker that died. */
  supervised(name: string, event: 'crashed' | 'restarting' | 'restarted'): void {
    const t = this.#workers.get(name);
    if (!t) return;
    if (event === 'restarted') {
      t.restarts++;
      t.override = null;
    } else {
      t.override = event;
    }
    t.writtenAt = 0;
    this.#beat(t);
  }

  /** At a clean stop: every row of this process says 'stopped'. */
  async stopped(): Promise<void> {
    this.#stopped = true;
    if (this.#soon) clearImmediate(this.#soon);
    if (this.#later) clearTimeout(this.#later);
    this.#pending.clear();
    await this.#writing;
    await markProcessStopped(this.pool, this.processId).catch((err) => this.log.warn({ err }, 'could not mark the workers stopped'));
  }

  /** After a hot loop's run, with the loop's own counters. */
  loopRan(name: string, stats: LoopStats): void {
    const t = this.#workers.get(name);
    if (!t) return;
    t.stats = { ...stats };
    this.#beat(t);
  }

  /** After a run of a queue consumer or a sweep: the roster keeps its counters. */
  ran(name: string, error: unknown): void {
    const t = this.#workers.get(name);
    if (!t) return;
    t.stats.runs++;
    if (error) {
      t.stats.consecutiveErrors++;
      t.stats.lastError = error instanceof Error ? error.message : String(error);
    } else {
      t.stats.consecutiveErrors = 0;
    }
    this.#beat(t);
  }

  #beat(t: Tracked): void {
    if (this.#stopped) return;
    const status = t.override ?? (t.stats.consecutiveErrors > 0 ? 'failing' : 'running');
    const key = `${status}|${t.stats.consecutiveErrors}|${t.stats.lastError ?? ''}|${t.restarts}`;
    const now = Date.now();
    const changed = key !== t.written;
    if (!changed && now - t.writtenAt < HEARTBEAT_REFRESH_MS) return;
    t.written = key;
    t.writtenAt = now;
    this.#pending.set(t.entry.name, this.#row(t.entry, t.stats, status, t.stats.runs > 0, t.restarts));
    if (changed) this.#soon ??= setImmediate(() => this.#flush());
    else if (!this.#later) {
      this.#later = setTimeout(() => this.#flush(), HEARTBEAT_REFRESH_MS);
      this.#later.unref();
    }
  }

  /** Everything waiting, in one statement. */
  #flush(): void {
    if (this.#soon) clearImmediate(this.#soon);
    if (this.#later) clearTimeout(this.#later);
    this.#soon = this.#later = null;
    if (this.#stopped || this.#pending.size === 0) return;
    const rows = [...this.#pending.values()];
    this.#pending.clear();
    this.#writing = this.#writing.then(() =>
      upsertHeartbeats(this.pool, rows).catch((err) => this.log.warn({ err, workers: rows.map((r) => r.worker_name) }, 'heartbeat write failed')),
    );
  }

  #row(entry: RosterEntry, stats: LoopStats, status: string, ran: boolean, restarts = 0): Heartbeat {
    return {
      process_id: this.processId,
      worker_name: entry.name,
      hostname: this.#host,
      pid: process.pid,
      group_name: entry.group,
      status,
      loop_runs: stats.runs,
      consecutive_errors: stats.consecutiveErrors,
      last_error: stats.lastError === null ? null : redactSecrets(stats.lastError, this.secrets),
      kind: entry.kind,
      enabled: entry.enabled,
      interval_seconds: entry.intervalSeconds,
      ran,
      network_class: this.options.networkClass ?? 'default',
      live_actors: entry.name === 'lease_holder' && this.options.liveActors ? this.options.liveActors() : null,
      restarts,
    };
  }
}
