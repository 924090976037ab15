import cluster, { type Worker } from 'node:cluster';
import { fileURLToPath } from 'node:url';
import type { Logger } from '../log.ts';

/**
 * Runs N worker processes on this machine with node:cluster. A worker that exits abnormally (its
 * core group died, or it was killed) is replaced after a short pause; Postgres holds all the
 * state, so the new one simply continues. stop() sends SIGTERM and waits for all of them.
 */
export interface WorkerCluster {
  stop(): Promise<void>;
  pids(): number[];
}

const WORKER_ENTRY = fileURLToPath(new URL('../worker.ts', import.meta.url));
/** Pause before replacing a worker process that exited, so one that dies at start cannot spin. */
const REPLACEMENT_DELAY_MS = 1000;

export function startWorkerCluster(count: number, env: NodeJS.ProcessEnv, log: Logger): WorkerCluster {
  cluster.setupPrimary({ exec: WORKER_ENTRY, execArgv: process.execArgv, silent: false });
  const workers = new Set<Worker>();
  let stopping = false;

  const fork = () => {
    const w = cluster.fork(env);
    workers.add(w);
    w.on('exit', (code, signal) => {
      workers.delete(w);
      if (stopping) return;
      log.warn({ pid: w.process.pid, code, signal }, 'worker process exited; starting a replacement');
      setTimeout(() => !stopping && fork(), REPLACEMENT_DELAY_MS).unref();
    });
  };
  for (let i = 0; i < count; i++) fork();

  return {
    pids: () => [...workers].map((w) => w.process.pid!).filter(Boolean),
    async stop() {
      stopping = true;
      await Promise.all(
        [...workers].map(
          (w) =>
            new Promise<void>((resolve) => {
              w.once('exit', () => resolve());
              w.process.kill('SIGTERM');
            }),
        ),
      );
    },
  };
}
