import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import type { PgBoss } from 'pg-boss';
import { callbackSink } from '../callbacks/outbox.ts';
import { resolveCallbackSecret } from '../callbacks/secret.ts';
import type { FerryConfig } from '../config.ts';
import { createEvmLane, EvmNonceManager, feeBumpOfChain } from '../executors/evm/index.ts';
import { ExecutorRegistry, SignerRegistry } from '../executors/registry.ts';
import { NoopSigner } from '../executors/signers/noop.ts';
import { createSimExecutors } from '../executors/sim/index.ts';
import type { Logger } from '../log.ts';
import { workerItemsTotal, workerRunSeconds, workerRunsTotal } from '../metrics.ts';
import { createPool, type Pool } from '../persistence/db.ts';
import { upsertHeartbeat } from '../persistence/heartbeats.ts';
import { promoteAudit } from './audit-promoter.ts';
import { startBoss, stopBoss } from './boss.ts';
import { createCallbackQueue, requeueStrandedCallbacks, startCallbackDelivery, type CallbackDelivery } from './callback-delivery.ts';
import { dispatchOne } from './dispatcher.ts';
import type { RuntimeDeps } from './execution.ts';
import { refreshRegistryHealth } from './executor-health.ts';
import { runEvmNonceReaper } from './evm-nonce-reaper.ts';
import { expirePendingRequests } from './expiry.ts';
import { Waker, type LoopSpec, type LoopStats } from './loop-runner.ts';
import { observeBatch } from './observer.ts';
import { reconcileBatch } from './reconciliation.ts';
import { recoverBatch } from './recovery.ts';
import { superviseWorkers, type Supervision } from './supervisor.ts';
import { Wakeups } from './wakeups.ts';

/**
 * Ferry's runtime in one process: the registries, pg-boss (callback deliveries), the wake-up
 * listener and the supervised worker loops. Every process that changes state needs the
 * transition deps (they enqueue callback jobs), so pg-boss starts in API-only processes too; the
 * loops and the delivery worker start only where workers are enabled.
 */
export interface RuntimeOptions {
  pool: Pool;
  config: FerryConfig;
  databaseUrl: string;
  log: Logger;
  executors?: ExecutorRegistry;
  signers?: SignerRegistry;
  /** Run the worker loops and callback delivery in this process (default: config.workersEnabled). */
  workers?: boolean;
}

export interface Runtime {
  deps: RuntimeDeps;
  boss: PgBoss;
  wakeups: Wakeups;
  processId: string;
  /** Rejects when the core worker group dies; never settles when workers are off. */
  done: Promise<void>;
  stop(): Promise<void>;
}

/**
 * The built-in registries: the simulation lane and the noop signer, and the EVM lane when the
 * config names an RPC URL and a signer key. `providerPool` is the simulated provider's own
 * connection pool: like a real provider it must not draw on the runtime's pool, whose connections
 * the observer and recovery hold (with their row locks) while they call it.
 */
export function defaultRegistries(
  providerPool: Pool,
  config?: Pick<FerryConfig, 'evmRpcUrl' | 'evmSignerKey' | 'evmConfirmations'> & Partial<Pick<FerryConfig, 'file'>>,
): { executors: ExecutorRegistry; signers: SignerRegistry; evmNonces: EvmNonceManager | null } {
  const executors = new ExecutorRegistry();
  createSimExecutors(providerPool, executors);
  const signers = new SignerRegistry();
  signers.register(new NoopSigner('noop'));
  // The EVM lane only with both a chain and a (development) key to sign for it. Its nonce
  // reservations use the providers' pool (see EvmNonceManager).
  let evmNonces: EvmNonceManager | null = null;
  if (config?.evmRpcUrl && config.evmSignerKey) {
    evmNonces = new EvmNonceManager(providerPool);
    // Fee policy from the configuration file's entry for the same RPC URL, when there is one.
    const chain = config.file?.evm.chains.find((c) => c.rpc_url === config.evmRpcUrl);
    createEvmLane(
      {
        rpcUrl: config.evmRpcUrl,
        signerPrivateKey: config.evmSignerKey,
        confirmations: config.evmConfirmations,
        nonces: evmNonces,
        feeBump: chain ? feeBumpOfChain(chain) : undefined,
      },
      { executors, signers },
    );
  }
  return { executors, signers, evmNonces };
}

export async function startRuntime(opts: RuntimeOptions): Promise<Runtime> {
  const { pool, config, log } = opts;
  const providerPool = opts.executors && opts.signers ? null : createPool(opts.databaseUrl, 4, 'ferry-sim-provider');
  const defaults = providerPool ? defaultRegistries(providerPool, config) : null;
  const executors = opts.executors ?? defaults!.executors;
  const signers = opts.signers ?? defaults!.signers;
  const workers = opts.workers ?? config.workersEnabled;
  const evmNonces = defaults?.evmNonces ?? null;
  const processId = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;

  const boss = await startBoss(opts.databaseUrl, { supervise: workers, schedule: workers, max: config.pgbossPoolMax });
  let delivery: CallbackDelivery | null = null;
  if (workers) {
    const secret = await resolveCallbackSecret(config, config.dataDir);
    delivery = await startCallbackDelivery({
      boss,
      pool,
      secret,
      timeoutMs: config.callbackTimeoutMs,
      concurrency: config.callbackBatchSize,
      // The runtime's own sidecar loop runs the stranded-callback sweep.
      sweepCron: null,
      log,
    });
  }
  const queue = delivery?.queue ?? createCallbackQueue(boss);
  const deps: RuntimeDeps = {
    pool,
    config,
    executors,
    signers,
    log,
    transitions: { callbacks: callbackSink({ maxAttempts: config.callbackMaxAttempts, queue }) },
  };

  const wakers = { dispatcher: new Waker(), observer: new Waker(), recovery: new Waker() };
  const wakeups = new Wakeups(
    opts.databaseUrl,
    workers
      ? { dispatcher: () => wakers.dispatcher.wake(), observer: () => wakers.observer.wake(), recovery: () => wakers.recovery.wake() }
      : {},
    log,
  );
  await wakeups.start();

  let supervision: Supervision | null = null;
  if (workers) {
    const beat = heartbeats(pool, processId, log);
    const loop = (name: string, group: 'core' | 'sidecar', intervalSeconds: number, run: () => Promise<number>, waker?: Waker): LoopSpec => ({
      name,
      intervalMs: intervalSeconds * 1000,
      jitterMs: intervalSeconds * 100,
      run,
      waker,
      onRun: (stats, ms, error) => {
        beat(name, group, stats);
        workerRunsTotal.inc({ worker: name, outcome: error ? 'error' : 'ok' });
        workerRunSeconds.observe({ worker: name }, ms / 1000);
        if (stats.lastItems > 0) workerItemsTotal.inc({ worker: name }, stats.lastItems);
      },
    });
    const dispatchers = Array.from({ length: config.dispatchConcurrency }, (_, i) =>
      loop(`node_dispatcher${config.dispatchConcurrency > 1 ? `_${i + 1}` : ''}`, 'core', config.dispatchIntervalSeconds, async () =>
        (await dispatchOne(deps)) ? 1 : 0,
        // All slots share one waker: a READY node wakes whichever slot is asleep first.
        wakers.dispatcher,
      ),
    );
    supervision = superviseWorkers(
      {
        core: [
          ...dispatchers,
          loop('node_observer', 'core', config.observeIntervalSeconds, () => observeBatch(deps), wakers.observer),
          loop('node_recovery', 'core', config.recoveryIntervalSeconds, () => recoverBatch(deps), wakers.recovery),
        ],
        sidecar: [
          loop('expiration_checker', 'sidecar', config.expirationIntervalSeconds, async () => (await expirePendingRequests(deps)).expired),
          loop('executor_health', 'sidecar', config.healthIntervalSeconds, async () => {
            await refreshRegistryHealth(pool, executors, signers);
            return 0;
          }),
          loop('audit_outbox_promoter', 'sidecar', config.auditIntervalSeconds, () => promoteAudit(pool)),
          loop('callback_stranded_sweep', 'sidecar', 60, () => requeueStrandedCallbacks(pool, queue)),
          loop('reconciliation', 'sidecar', config.reconciliationIntervalSeconds, async () => (await reconcileBatch(deps)).checked),
          // Temporary registration until the sweep registry takes it over.
          ...(evmNonces && config.evmNonceReaperEnabled
            ? [
                loop('evm_nonce_reaper', 'sidecar', config.evmNonceReaperIntervalSeconds, async () => {
                  const r = await runEvmNonceReaper(
                    { nonces: evmNonces, stuckSeconds: config.evmNonceStuckSeconds, log },
                    { batchSize: config.evmNonceReaperBatchSize, maxRunMs: config.evmNonceReaperMaxRunMs },
                  );
                  return r.rebroadcast + r.filled + r.released;
                }),
              ]
            : []),
        ],
      },
      log,
    );
  }

  let stopped = false;
  return {
    deps,
    boss,
    wakeups,
    processId,
    done: supervision ? supervision.done : new Promise<void>(() => {}),
    async stop() {
      if (stopped) return;
      stopped = true;
      await supervision?.stop();
      await wakeups.stop();
      await delivery?.stop();
      await stopBoss(boss);
      for (const e of executors.all()) await e.close?.().catch(() => {});
      await providerPool?.end();
    },
  };
}

/** Heartbeat rows per worker: written on the first run, on a status change, and every 5 s. */
function heartbeats(pool: Pool, processId: string, log: Logger) {
  const last = new Map<string, { at: number; status: string }>();
  return (worker: string, group: 'core' | 'sidecar', stats: LoopStats) => {
    const status = stats.consecutiveErrors > 0 ? 'failing' : 'running';
    const prev = last.get(worker);
    const now = Date.now();
    if (prev && prev.status === status && now - prev.at < 5000) return;
    last.set(worker, { at: now, status });
    upsertHeartbeat(pool, {
      process_id: processId,
      worker_name: worker,
      hostname: hostname(),
      pid: process.pid,
      group_name: group,
      status,
      loop_runs: stats.runs,
      consecutive_errors: stats.consecutiveErrors,
      last_error: stats.lastError,
    }).catch((err) => log.warn({ err, worker }, 'heartbeat write failed'));
  };
}
