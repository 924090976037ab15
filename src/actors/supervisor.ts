import type { Logger } from '../log.ts';
import { runLoop, type LoopSpec } from './loop-runner.ts';

/**
 * Runs the workers of one process in two groups, as the reference runtime does.
 *
 * - Core (the lease holder and its movement actors, recovery, the lanes' core workers):
 *   fail fast. If one of them dies (its loop ends with a WorkerCrash) the whole process stops
 *   working: every group is stopped and `done` rejects, so the process exits non-zero and whatever
 *   runs it starts it again. A core worker that cannot go on must not leave the others running
 *   half a runtime.
 * - Sidecar (the other in-process workers): a crash is logged and the worker is started again after
 *   a backoff of min(2^n, 60) seconds, n the crashes in a row; a sidecar that then ran for a minute
 *   without crashing starts counting from zero again. The rest of the process goes on meanwhile.
 *
 * The sweeps are pg-boss jobs, not loops of this process (sweeps.ts): a failed run is a failed job,
 * retried by the next one, which any process of the cluster may take.
 */
export interface WorkerGroups {
  core: LoopSpec[];
  sidecar: LoopSpec[];
}

export type SupervisionEvent = 'crashed' | 'restarting' | 'restarted';

export interface SupervisorOptions {
  /** Told of every crash and restart (the worker roster writes it to the worker's row). Must not throw. */
  onEvent?: (worker: string, event: SupervisionEvent) => void;
  /** The backoff before the n-th restart in a row, in ms. Default min(2^n, 60) s. */
  restartDelayMs?: (crashesInARow: number) => number;
  /** A sidecar that ran this long without crashing starts its count again. Default 60 s. */
  healthyAfterMs?: number;
}

export interface Supervision {
  /** Resolves after a clean stop(); rejects when the core group failed. */
  done: Promise<void>;
  stop(): Promise<void>;
  /** How often each sidecar worker was restarted (only those restarted at least once). */
  restarts(): Record<string, number>;
}

export const MAX_RESTART_DELAY_MS = 60_000;

export function restartDelayMs(crashesInARow: number): number {
  return Math.min(2 ** crashesInARow * 1000, MAX_RESTART_DELAY_MS);
}

export function superviseWorkers(groups: WorkerGroups, log: Logger, opts: SupervisorOptions = {}): Supervision {
  const abort = new AbortController();
  const restarts: Record<string, number> = {};
  const delay = opts.restartDelayMs ?? restartDelayMs;
  const healthyAfterMs = opts.healthyAfterMs ?? 60_000;
  const tell = (worker: string, event: SupervisionEvent) => {
    try {
      opts.onEvent?.(worker, event);
    } catch {
      // a listener's fault is not the worker's
    }
  };
  let failure: unknown = null;

  const core = groups.core.map((spec) =>
    runLoop(spec, abort.signal, log).catch((err) => {
      tell(spec.name, 'crashed');
      if (!failure) {
        failure = err;
        log.fatal({ worker: spec.name, err }, 'core worker died; stopping the process');
      }
      abort.abort();
      throw err;
    }),
  );

  /** Waits `ms` or until the supervision stops, whichever is first. */
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      if (abort.signal.aborted) return resolve();
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        abort.signal.removeEventListener('abort', done);
        resolve();
      }
      abort.signal.addEventListener('abort', done, { once: true });
    });

  const superviseSidecar = async (spec: LoopSpec): Promise<void> => {
    let inARow = 0;
    while (!abort.signal.aborted) {
      const started = performance.now();
      try {
        await runLoop(spec, abort.signal, log);
        return; // a clean end: the supervision stopped
      } catch (err) {
        if (abort.signal.aborted) return;
        inARow = performance.now() - started >= healthyAfterMs ? 1 : inARow + 1;
        const wait = delay(inARow);
        log.error({ worker: spec.name, err, crashes_in_a_row: inARow, restart_in_ms: wait }, 'sidecar worker crashed; restarting it after a backoff');
        tell(spec.name, 'restarting');
        await pause(wait);
        if (abort.signal.aborted) return;
        restarts[spec.name] = (restarts[spec.name] ?? 0) + 1;
        tell(spec.name, 'restarted');
      }
    }
  };
  const sidecar = groups.sidecar.map(superviseSidecar);

  const done = Promise.allSettled([...core, ...sidecar]).then(() => {
    if (failure) throw failure;
  });
  // Callers that never await `done` must not see an unhandled rejection.
  done.catch(() => {});
  return {
    done,
    restarts: () => ({ ...restarts }),
    async stop() {
      abort.abort();
      await Promise.allSettled([...core, ...sidecar]);
    },
  };
}
