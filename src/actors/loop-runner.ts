import type { Logger } from '../log.ts';

/**
 * The loop every worker runs: call `run`, which returns how many items it handled; sleep for the
 * interval (plus or minus jitter, at least 100 ms) or until woken; repeat until the signal aborts.
 * A run that handled items is followed at once by another, so a backlog drains at full speed and
 * the interval only paces an idle worker.
 *
 * A failing run is logged and counted; from the fifth consecutive failure on, the loop backs off
 * min(2^n, 60) seconds. A WorkerCrash thrown by `run` ends the loop abnormally: the supervisor then
 * decides whether the process goes on. So does a loop with `crashAfter` whose runs failed that many
 * times in a row with errors `tolerated` does not excuse: a worker wedged by something a restart may
 * clear (a broken connection state, a bug on one code path) must not sit in a live process whose
 * heartbeats look healthy while movements wait.
 */

export const MAX_CONSECUTIVE_ERRORS = 5;
export const MAX_BACKOFF_SECONDS = 60;

export class WorkerCrash extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'WorkerCrash';
  }
}

/**
 * Wakes a sleeping loop early (a NOTIFY arrived): a wake-up wakes every loop sleeping on the waker,
 * and one that arrives while none sleeps is kept for the next.
 */
export class Waker {
  #pending = false;
  #sleepers = new Set<() => void>();

  wake(): void {
    if (this.#sleepers.size === 0) {
      this.#pending = true;
      return;
    }
    for (const done of [...this.#sleepers]) done();
  }

  /** Resolves after ms, on wake(), or on abort, whichever comes first. */
  sleep(ms: number, signal: AbortSignal): Promise<void> {
    if (this.#pending || signal.aborted) {
      this.#pending = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        this.#sleepers.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal.addEventListener('abort', done, { once: true });
      this.#sleepers.add(done);
    });
  }
}

export interface LoopStats {
  runs: number;
  consecutiveErrors: number;
  lastError: string | null;
  lastItems: number;
}

export interface LoopSpec {
  name: string;
  intervalMs: number;
  jitterMs?: number;
  run: () => Promise<number>;
  waker?: Waker;
  /**
   * Crash (a WorkerCrash) after this many failed runs in a row, counting only errors that
   * `tolerated` does not excuse (Ferry's own database being away: a restart would not help).
   * Undefined or 0: never.
   */
  crashAfter?: number;
  tolerated?: (err: unknown) => boolean;
  /** Called after every run, for heartbeats and metrics; must not throw. */
  onRun?: (stats: LoopStats, durationMs: number, error: unknown) => void;
}

export function backoffSeconds(consecutiveErrors: number): number {
  return Math.min(2 ** consecutiveErrors, MAX_BACKOFF_SECONDS);
}

export async function runLoop(spec: LoopSpec, signal: AbortSignal, log: Logger): Promise<void> {
  const waker = spec.waker ?? new Waker();
  const stats: LoopStats = { runs: 0, consecutiveErrors: 0, lastError: null, lastItems: 0 };
  let untoleratedInARow = 0;
  while (!signal.aborted) {
    const started = performance.now();
    let error: unknown = null;
    try {
      stats.lastItems = await spec.run();
      stats.consecutiveErrors = 0;
      untoleratedInARow = 0;
    } catch (err) {
      if (err instanceof WorkerCrash) throw err;
      error = err;
      stats.lastItems = 0;
      stats.consecutiveErrors++;
      stats.lastError = err instanceof Error ? err.message : String(err);
      untoleratedInARow = spec.tolerated?.(err) ? 0 : untoleratedInARow + 1;
      log.error({ worker: spec.name, err, consecutive_errors: stats.consecutiveErrors }, 'worker run failed');
      if (spec.crashAfter && untoleratedInARow >= spec.crashAfter) {
        spec.onRun?.(stats, performance.now() - started, error);
        throw new WorkerCrash(`${spec.name} failed ${untoleratedInARow} runs in a row: ${stats.lastError}`, { cause: err });
      }
    }
    stats.runs++;
    spec.onRun?.(stats, performance.now() - started, error);
    if (signal.aborted) break;
    if (stats.consecutiveErrors >= MAX_CONSECUTIVE_ERRORS) {
      await waker.sleep(backoffSeconds(stats.consecutiveErrors) * 1000, signal);
    } else if (stats.lastItems > 0 && !error) {
      // Drain: yield to the event loop, then go again.
      await new Promise((r) => setImmediate(r));
    } else {
      const jitter = spec.jitterMs ? (Math.random() * 2 - 1) * spec.jitterMs : 0;
      await waker.sleep(Math.max(100, spec.intervalMs + jitter), signal);
    }
  }
}
