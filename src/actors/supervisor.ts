import type { Logger } from '../log.ts';
import { runLoop, type LoopSpec } from './loop-runner.ts';

/**
 * Runs the workers in two groups, as the reference runtime does. Core (dispatcher, observer,
 * recovery): if one exits abnormally the whole core group is stopped and `done` rejects, so the
 * process exits non-zero and its supervisor restarts it. Sidecar (callbacks sweep, expiry, health,
 * audit...): a crash is logged and everything else goes on.
 */
export interface WorkerGroups {
  core: LoopSpec[];
  sidecar: LoopSpec[];
}

export interface Supervision {
  /** Resolves after a clean stop(); rejects when the core group failed. */
  done: Promise<void>;
  stop(): Promise<void>;
  /** Names of sidecar workers that crashed and are no longer running. */
  crashedSidecars(): string[];
}

export function superviseWorkers(groups: WorkerGroups, log: Logger): Supervision {
  const coreAbort = new AbortController();
  const sidecarAbort = new AbortController();
  const crashed: string[] = [];
  let failure: unknown = null;

  const core = groups.core.map((spec) =>
    runLoop(spec, coreAbort.signal, log).catch((err) => {
      if (!failure) {
        failure = err;
        log.fatal({ worker: spec.name, err }, 'core worker died; stopping the core group');
      }
      coreAbort.abort();
      sidecarAbort.abort();
      throw err;
    }),
  );
  const sidecar = groups.sidecar.map((spec) =>
    runLoop(spec, sidecarAbort.signal, log).catch((err) => {
      crashed.push(spec.name);
      log.error({ worker: spec.name, err }, 'sidecar worker crashed; the others go on');
    }),
  );

  const done = Promise.allSettled([...core, ...sidecar]).then(() => {
    if (failure) throw failure;
  });
  // Callers that never await `done` must not see an unhandled rejection.
  done.catch(() => {});
  return {
    done,
    crashedSidecars: () => [...crashed],
    async stop() {
      coreAbort.abort();
      sidecarAbort.abort();
      await Promise.allSettled([...core, ...sidecar]);
    },
  };
}
