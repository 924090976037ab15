import { feeCapsOf, replacementLimitsOf } from '../executors/signers/evm-policy.ts';
import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import type { PgBoss } from 'pg-boss';
import { createBalanceSnapshotDeps } from '../balances/sweep.ts';
import { callbackSink } from '../callbacks/outbox.ts';
import { resolveCallbackSecret } from '../callbacks/secret.ts';
import { configValue, type ConfigVariable, type FerryConfig } from '../config.ts';
import { APP_NAMES } from '../connection-budget.ts';
import type { LaneCoreWorker } from '../executors/lane.ts';
import { lanes as allLanes, type LaneList } from '../executors/lanes.ts';
import { ExecutorRegistry, SignerRegistry } from '../executors/registry.ts';
import { HostRequestSigner } from '../executors/host-requests.ts';
import { registerRemoteExecutors, registerRemoteSigners } from '../executors/remote-config.ts';
import { NoopSigner } from '../executors/signers/noop.ts';
import type { Logger } from '../log.ts';
import { workerItemsTotal, workerRunSeconds, workerRunsTotal } from '../metrics.ts';
import { createPool, type Pool } from '../persistence/db.ts';
import { databaseTroubleCause } from '../persistence/infra-errors.ts';
import { destinationPolicy } from '../callbacks/destinations.ts';
import { startBoss, stopBoss, wakeQueue } from './boss.ts';
import { createCallbackQueue, startCallbackDelivery, type CallbackDelivery } from './callback-delivery.ts';
import type { WorkerDeps } from './execution.ts';
import { GroupWriter } from './group-writer.ts';
import { LeaseHolder } from './lease-holder.ts';
import { Waker, type LoopSpec } from './loop-runner.ts';
import { startMovementQueue, type MovementQueueConsumer } from '../queue/movement-queue.ts';
import { recoverBatch } from './recovery.ts';
import { superviseWorkers, type Supervision } from './supervisor.ts';
import { startSweeps, sweepDefinitions, type SweepWorkers } from '../sweeps/sweeps.ts';
import { configSecrets, WorkerRoster, type RosterEntry } from './worker-roster.ts';
import { Wakeups } from './wakeups.ts';

/**
 * Ferry's runtime in one process: the registries, pg-boss (callback deliveries and the sweeps, see
 * sweeps.ts), the wake-up listener, the lease holder with its movement actors (lease-holder.ts,
 * docs/actor-runtime.md) and the supervised recovery loop. Every process that changes state needs the
 * transition deps (they enqueue callback jobs), so pg-boss starts in API-only processes too; the
 * core workers and the delivery worker start only where workers are enabled.
 */

/** Group statements the actor runtime's writer has in flight at once; writes arriving meanwhile are merged. */
const GROUP_WRITER_IN_FLIGHT = 2;

export interface RuntimeOptions {
  pool: Pool;
  config: FerryConfig;
  databaseUrl: string;
  /** Where the LISTEN client connects: a direct connection when databaseUrl is a pooler. Default databaseUrl. */
  listenUrl?: string;
  log: Logger;
  executors?: ExecutorRegistry;
  signers?: SignerRegistry;
  /** Where local_key signers read their keys (default: process.env). */
  env?: NodeJS.ProcessEnv;
  /** Run the core workers and callback delivery in this process (default: config.workersEnabled). */
  workers?: boolean;
}

export interface Runtime {
  deps: WorkerDeps;
  boss: PgBoss;
  wakeups: Wakeups;
  processId: string;
  /** Rejects when the core worker group dies; never settles when workers are off. */
  done: Promise<void>;
  stop(): Promise<void>;
}

/**
 * The built-in registries: the lanes' built-in executors (the simulation lane's) and the noop signer. `providerPool` is the
 * simulated provider's own connection pool: like a real provider it must not draw on the
 * runtime's pool, whose connections recovery holds (with its row locks) while it calls it.
 */
export function defaultRegistries(providerPool: Pool, lanes: LaneList = allLanes): { executors: ExecutorRegistry; signers: SignerRegistry } {
  const executors = new ExecutorRegistry();
  for (const lane of lanes) lane.builtIn?.(providerPool, executors);
  const signers = new SignerRegistry();
  signers.register(new NoopSigner('noop'));
  return { executors, signers };
}

/**
 * The registries a runtime starts with: the built-in ones, plus each lane of the list registered
 * for the configuration (src/executors/lanes.ts: the EVM lane's chains, signers and executors from
 * the configuration file and the legacy single-chain variables, the CEX lane for the file's
 * exchange accounts, the CCTP lane on the EVM lane's chains), with what each lane's register()
 * returned (its sweeps read it: the EVM lane's nonce manager), and the remote executors and signers.
 * @throws ConfigError naming the variable or file entry that cannot be used.
 */
export async function configuredRegistries(
  providerPool: Pool,
  config: Pick<FerryConfig, 'file' | 'evmRpcUrl' | 'evmSignerKey' | 'evmConfirmations'> &
    Partial<Pick<FerryConfig, 'executorAnswerMaxBytes' | 'evmMaxReplacements' | 'evmMaxFeeBumpFactor' | 'evmMaxFeePerGasCapWei' | 'hostRequestKey'>>,
  deps: { env?: NodeJS.ProcessEnv; log: Logger; lanes?: LaneList },
): Promise<{ executors: ExecutorRegistry; signers: SignerRegistry; lanes: Record<string, unknown> }> {
  const list = deps.lanes ?? allLanes;
  const registries = defaultRegistries(providerPool, list);
  const env = deps.env ?? process.env;
  // Every POST to a remote host is signed with Ferry's host request key, when there is one.
  const requestSigner = config.hostRequestKey ? new HostRequestSigner(config.hostRequestKey) : undefined;
  const remote = config.file.remote;
  if (!requestSigner && ((remote?.executors?.length ?? 0) > 0 || (remote?.signers?.length ?? 0) > 0)) {
    deps.log.warn('remote executors or signers are configured without FERRY_HOST_REQUEST_KEY: ferry executor-host and ferry signer-host refuse unsigned requests (HOST_REQUEST_UNSIGNED)');
  }
  // Remote signers (remote.signers) first: the EVM lane may send from their wallets.
  registerRemoteSigners(remote, registries.signers, env, { replacements: replacementLimitsOf(config), feeCaps: feeCapsOf(config.file.evm ?? { chains: [] }) }, requestSigner);
  // Each lane in the list's order (a lane that builds on another reads what that one returned).
  const states: Record<string, unknown> = {};
  for (const lane of list) {
    states[lane.name] = await lane.register({ config: config as FerryConfig, executors: registries.executors, signers: registries.signers, env, log: deps.log, providerPool, lanes: states });
  }
  // Remote executors (remote.executors) last: a key a local lane already serves is refused.
  registerRemoteExecutors(remote, registries.executors, env, config.executorAnswerMaxBytes, requestSigner);
  return { ...registries, lanes: states };
}

export async function startRuntime(opts: RuntimeOptions): Promise<Runtime> {
  const { pool, config, log } = opts;
  const providerPool = opts.executors && opts.signers ? null : createPool(opts.databaseUrl, config.simPoolMax, APP_NAMES.sim, {
    // Behind a pooler (a separate URL to LISTEN on), no statement is kept between calls.
    namedStatements: (opts.listenUrl ?? opts.databaseUrl) === opts.databaseUrl,
  });
  let defaults: Awaited<ReturnType<typeof configuredRegistries>> | null = null;
  try {
    defaults = providerPool ? await configuredRegistries(providerPool, config, { env: opts.env, log }) : null;
  } catch (err) {
    await providerPool?.end();
    throw err;
  }
  const executors = opts.executors ?? defaults!.executors;
  const signers = opts.signers ?? defaults!.signers;
  const workers = opts.workers ?? config.workersEnabled;
  const laneStates = defaults?.lanes ?? {};
  const processId = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;

  const boss = await startBoss(opts.databaseUrl, {
    supervise: workers,
    schedule: workers,
    max: config.pgbossPoolMax,
    superviseIntervalSeconds: config.pgbossSuperviseIntervalSeconds,
    flowIntervalSeconds: config.pgbossFlowIntervalSeconds,
  });
  let delivery: CallbackDelivery | null = null;
  const destinations = destinationPolicy(config);
  // Every worker of this process gets its heartbeat row now, enabled or not (worker-roster.ts).
  let liveActors = () => 0;
  const roster = new WorkerRoster(pool, processId, log, configSecrets(config), { networkClass: config.networkClass, liveActors: () => liveActors() });
  if (workers) await roster.seed(rosterOf(config));
  if (workers && config.workerCallbackDispatcherEnabled) {
    const secret = await resolveCallbackSecret(config, config.dataDir);
    delivery = await startCallbackDelivery({
      boss,
      pool,
      secret,
      timeoutMs: config.callbackTimeoutMs,
      concurrency: config.callbackBatchSize,
      log,
      destinations,
      legacyHeaders: config.callbackLegacyHeaders,
      pollingIntervalSeconds: config.callbackIntervalSeconds,
      onRun: (err) => roster.ran('callback_dispatcher', err),
    });
    roster.started('callback_dispatcher');
  }
  const queue = delivery?.queue ?? createCallbackQueue(boss);
  const deps: WorkerDeps = {
    pool,
    config,
    executors,
    signers,
    log,
    transitions: {
      callbacks: callbackSink({ maxAttempts: config.callbackMaxAttempts, queue }),
      // The lease holder's writes renew its leases as they go (lease-holder.ts).
      ...(workers ? { lease: { owner: processId, ttlSeconds: config.leaseTtlSeconds } } : {}),
    },
  };

  const recoveryWaker = new Waker();
  // One lease holder, whose movement actors dispatch and observe (lease-holder.ts).
  if (workers) deps.groupWriter = new GroupWriter(pool, GROUP_WRITER_IN_FLIGHT);
  const holder = workers ? new LeaseHolder(deps, { owner: processId, ttlSeconds: config.leaseTtlSeconds, maxMovements: config.leaseMaxMovements, holdMs: config.actorHoldSeconds * 1000, log }) : null;
  const holderWaker = new Waker();
  holder?.onWake(() => holderWaker.wake());
  if (holder) liveActors = () => holder.movementIds.length;
  let sweeps: SweepWorkers | null = null;
  const wakeSweep = (queue: string) => sweeps?.wake(queue);
  // pg-boss's NOTIFY for a ready job, and the audit outbox's for the idle promoter (src/actors/boss.ts).
  const jobs = { queue: (name: string | null) => void wakeQueue(boss, name), audit: () => sweeps?.poke('audit_outbox_promoter') };
  const wakeups = new Wakeups(
    opts.listenUrl ?? opts.databaseUrl,
    holder ? { leaseHolder: () => holderWaker.wake(), recovery: () => recoveryWaker.wake(), notices: (n) => holder.notice(n), sweep: wakeSweep, ...jobs } : {},
    log,
  );
  await wakeups.start();

  let supervision: Supervision | null = null;
  let movementQueue: MovementQueueConsumer | null = null;
  if (holder) {
    const loop = (name: string, intervalSeconds: number, run: () => Promise<number>, waker?: Waker): LoopSpec => ({
      name,
      intervalMs: intervalSeconds * 1000,
      jitterMs: intervalSeconds * 100,
      run,
      waker,
      // Every loop here is a core worker: wedged, it takes the process down to be replaced.
      crashAfter: config.coreWorkerCrashAfterFailures,
      tolerated: (err) => databaseTroubleCause(err) !== null,
      onRun: (stats, ms, error) => {
        roster.loopRan(name, stats);
        workerRunsTotal.inc({ worker: name, outcome: error ? 'error' : 'ok' });
        workerRunSeconds.observe({ worker: name }, ms / 1000);
        if (stats.lastItems > 0) workerItemsTotal.inc({ worker: name }, stats.lastItems);
      },
    });
    const balances = config.balanceSnapshotEnabled ? createBalanceSnapshotDeps({ pool, config, log }) : undefined;
    sweeps = await startSweeps({
      boss,
      deps: { ...deps, callbackQueue: queue, balances, lanes: laneStates },
      processId,
      onRun: (name, err) => roster.ran(name, err),
    });
    if (config.movementQueueEnabled) {
      const bindings = { hasExecutor: (key: string) => executors.has(key), hasSigner: (key: string) => signers.has(key) };
      movementQueue = await startMovementQueue({
        boss,
        deps: () => ({ pool, config, transitions: deps.transitions, bindings }),
        concurrency: config.movementQueueConcurrency,
        pollingIntervalSeconds: config.movementQueuePollSeconds,
        log,
      });
    }
    supervision = superviseWorkers(
      {
        // A disabled loop (FERRY_WORKER_<NAME>_ENABLED=false) is not started; its row says so.
        core: [
          loop('lease_holder', config.dispatchIntervalSeconds, () => holder.acquire(), holderWaker),
          ...(config.workerNodeRecoveryEnabled ? [loop('node_recovery', config.recoveryIntervalSeconds, () => recoverBatch(deps), recoveryWaker)] : []),
          // The lanes' core workers (the CCIP lane's stranded-send reaper), where configured and on.
          ...laneCoreWorkers(config)
            .filter((w) => w.enabled)
            .map((w) => loop(w.worker.name, w.intervalSeconds, () => w.worker.run({ pool, config, log, lanes: laneStates }, { batchSize: w.batchSize }))),
        ],
        // The sweeps are pg-boss jobs (startSweeps above), not loops of this process.
        sidecar: [],
      },
      log,
      { onEvent: (worker, event) => roster.supervised(worker, event) },
    );
    holder.start();
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
      await movementQueue?.stop();
      await sweeps?.stop();
      await supervision?.stop();
      await holder?.stop();
      await wakeups.stop();
      await delivery?.stop();
      if (workers) await roster.stopped();
      await destinations.dispatcher.close();
      await stopBoss(boss);
      for (const e of executors.all()) await e.close?.().catch(() => {});
      await providerPool?.end();
    },
  };
}

/** Every worker a process with workers has, with whether its configuration enables it. */
function rosterOf(config: FerryConfig): RosterEntry[] {
  return [
    { name: 'lease_holder', group: 'core', kind: 'loop', enabled: true, intervalSeconds: config.dispatchIntervalSeconds },
    { name: 'node_recovery', group: 'core', kind: 'loop', enabled: config.workerNodeRecoveryEnabled, intervalSeconds: config.recoveryIntervalSeconds },
    ...laneCoreWorkers(config).map((w) => ({ name: w.worker.name, group: 'core' as const, kind: 'loop' as const, enabled: w.enabled, intervalSeconds: w.intervalSeconds })),
    { name: 'callback_dispatcher', group: 'sidecar', kind: 'queue', enabled: config.workerCallbackDispatcherEnabled, intervalSeconds: config.callbackIntervalSeconds },
    ...sweepDefinitions.map((def) => {
      const s = def.settings(config);
      return { name: def.name, group: 'sidecar' as const, kind: 'sweep' as const, enabled: s.enabled, intervalSeconds: s.intervalSeconds };
    }),
  ];
}

/**
 * The core workers the lanes of the list bring (LaneCoreWorker), with their settings for this
 * configuration: on when the lane is configured and the worker's switch is on.
 */
export function laneCoreWorkers(config: FerryConfig, list: LaneList = allLanes): Array<{ worker: LaneCoreWorker; enabled: boolean; intervalSeconds: number; batchSize: number | null }> {
  return list.flatMap((lane) =>
    (lane.coreWorkers ?? []).map((worker) => {
      const v = worker.variables;
      return {
        worker,
        enabled: worker.configured(config) && configValue(config, v.enabled as ConfigVariable<boolean>),
        intervalSeconds: configValue(config, v.interval as ConfigVariable<number>),
        batchSize: v.batchSize ? configValue(config, v.batchSize as ConfigVariable<number>) : null,
      };
    }),
  );
}
