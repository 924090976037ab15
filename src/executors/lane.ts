import type { z } from 'zod';
import type { BalanceFetcher, EvmChainClients } from '../balances/fetchers.ts';
import type { BalanceTarget } from '../balances/watch.ts';
import type { ConfigField } from '../config-schemas.ts';
import type { FerryConfig } from '../config.ts';
import type { Logger } from '../log.ts';
import type { Pool } from '../persistence/db.ts';
import type { ExecutorRegistry, SignerRegistry } from './registry.ts';

/**
 * A lane as a plug-in (docs/lanes.md): everything the runtime needs to know about one family of
 * executors, exported by `src/executors/<lane>/lane.ts` and listed once in `src/executors/lanes.ts`.
 * The config loader, the registries, the sweeps, the balance fetchers, GET /v3/executors, the
 * sandbox and the docs index read the list; nothing else names a lane.
 *
 * A lane module keeps its static imports light (its config.ts, zod, types): the configuration
 * loads the list, so a lane's executors are imported when the lane registers them, never before.
 */

/** What a lane's register() is handed. */
export interface LaneContext {
  config: FerryConfig;
  executors: ExecutorRegistry;
  signers: SignerRegistry;
  env: NodeJS.ProcessEnv;
  log: Logger;
  /** The providers' own pool (never the runtime's: observers hold its connections while they call a provider). */
  providerPool: Pool;
  /** What the lanes registered before this one returned, by lane name (a lane that depends on another reads it here). */
  lanes: Readonly<Record<string, unknown>>;
}

/** A sweep a lane brings: a row of the sweep table (src/sweeps/sweeps.ts), named by variables of the lane's own. */
export interface LaneSweep {
  name: string;
  summary: string;
  variables: { enabled: string; interval: string; batchSize?: string; budget?: string };
  /** deps: the sweep's deps (src/sweeps/sweeps.ts, SweepDeps); `deps.lanes[<name>]` is what this lane's register() returned. */
  run(deps: LaneSweepDeps, settings: { batchSize: number | null; maxRunMs: number }): Promise<{ items: number; budget_exhausted: boolean; [detail: string]: unknown }>;
}

export interface LaneSweepDeps {
  /** Ferry's runtime pool (a sweep that records attention writes through src/persistence/ with it). */
  pool: Pool;
  config: FerryConfig;
  log: Logger;
  lanes?: Readonly<Record<string, unknown>>;
}

/**
 * A worker a lane adds to the core group of every worker process (src/actors/supervisor.ts): a loop
 * of its own, run every interval like the dispatcher and recovery, failing fast like them (its runs
 * failing FERRY_CORE_WORKER_CRASH_AFTER_FAILURES times in a row, not counting Ferry's database being
 * away, or a WorkerCrash thrown by a run, stop the process non-zero). For a worker whose silent death
 * would leave money unwatched (seed 000: the stranded-send reaper). Its runs must be safe to run in
 * several processes at once (each process runs one loop of it).
 */
export interface LaneCoreWorker {
  name: string;
  summary: string;
  /** Its switch, interval (seconds) and batch size (optional): variables of the lane's own. */
  variables: { enabled: string; interval: string; batchSize?: string };
  /** Whether this configuration has what it works on (the lane's section); unconfigured, it is not started and its row says disabled. */
  configured(config: FerryConfig): boolean;
  /** One run; answers how many items it handled. A throw is a failed run (counted; see above). */
  run(deps: LaneSweepDeps, settings: { batchSize: number | null }): Promise<number>;
}

/** A template the lane ships (installed by the sandbox or by start, see docs/templates.md). */
export interface LaneTemplate {
  key: string;
  summary: string;
}

/** An observe executor's poll interval and where it is set. */
export interface LaneObserveInterval {
  executorKey: string;
  /** Seconds between two looks when nothing sets it. */
  defaultSeconds: number;
  /** The variable or file entry that sets it. */
  setBy: string;
}

/**
 * One on-chain fact a lane's configuration asserts (verify_drift, src/sweeps/verify-drift.ts): at
 * `address` on `chainId`, either there is contract code, or a view function answers `expected`.
 * Declared from the configuration file alone (no I/O); the sweep reads them on the chain.
 */
export interface RegistryBaseline {
  chainId: number;
  /** What is checked, stable across runs: `evm.tokens[USDC]`, `evm.chains[31337].cctp.message_transmitter`. */
  subject: string;
  address: string;
  /**
   * `code`: the address holds contract code; `chain_id`: the RPC endpoint answers `eth_chainId` with
   * this chain (the address is unused: the zero address); else a view call.
   */
  property: 'code' | 'chain_id' | { name: string; signature: string; args?: readonly unknown[] };
  /**
   * What the configuration says, in the sweep's words: `code` for a code check; a call's answer as a
   * decimal string (numbers), the text (strings) or lowercase 0x hex (addresses, bytes).
   */
  expected: string;
}

export interface LaneDefinition<Env extends Record<string, ConfigField> = Record<string, ConfigField>, Sections extends Record<string, z.ZodType> = Record<string, z.ZodType>> {
  /** The lane's name: `executor.lane` of its executors, the folder under src/executors/. */
  name: string;
  summary: string;
  /** Its docs page, relative to the repository (listed in the docs index: README "Lanes"). */
  docs: string;
  /** Lanes this one builds on (registered first; their sections are read only when they are listed). */
  requires?: readonly string[];
  /** Its environment variables: name -> [config key, schema]. Part of the one config object. */
  env: Env;
  /** Those of its variables whose values never appear in messages or logs. */
  secretVariables?: readonly string[];
  /** Checks across its variables once every variable is read; throws a ConfigError naming one. */
  checkConfig?(values: Readonly<Record<string, unknown>>): void;
  /** Its sections of the configuration file (top-level keys of FERRY_CONFIG_FILE). */
  fileSections: Sections;
  /**
   * Fields it owns inside another lane's list entries (the CCTP lane's `evm.chains[].cctp`): without
   * this lane in the list, an entry holding one is refused, as its own sections are.
   */
  nestedFields?: ReadonlyArray<{ section: string; list: string; field: string }>;
  /** Cross-checks of its sections; issues name paths from the file's top level. */
  refineFile?(file: Readonly<Record<string, unknown>>, ctx: z.RefinementCtx): void;
  /** The executor keys it can register, and its signer keys (a configured signer's own key aside). */
  executorKeys: readonly string[];
  signerKeys: readonly string[];
  observeIntervals: readonly LaneObserveInterval[];
  /**
   * Its own arm of recovery, in this order (lowest first: a lane whose stuck nodes cost most, such as
   * a burn waiting for its mint); unset: it shares the arm of every other lane.
   */
  recoveryPriority?: number;
  /**
   * Registers the lane's executors and signers for this configuration (nothing when it configures
   * none); its result is handed to later lanes and to its sweeps. Throws a ConfigError naming what
   * cannot be used.
   */
  register(ctx: LaneContext): unknown | Promise<unknown>;
  /** Executors registered without any configuration (the built-in registries of tests and hosts). */
  builtIn?(providerPool: Pool, executors: ExecutorRegistry): void;
  sweeps: readonly LaneSweep[];
  /** Workers it adds to the core group (fail fast) when configured; unset: none. */
  coreWorkers?: readonly LaneCoreWorker[];
  /** Its balance fetchers over the process's chain clients (src/balances/). */
  balanceFetchers?(clients: EvmChainClients): BalanceFetcher[];
  /** The balances its own sections ask to watch (the watch plan's other entries come from evm and sim); unset: none. */
  balanceTargets?(file: Readonly<Record<string, unknown>>): BalanceTarget[];
  templates: readonly LaneTemplate[];
  /** The on-chain facts its configuration asserts, checked by verify_drift; unset: none. */
  registryBaselines?(file: Readonly<Record<string, unknown>>): RegistryBaseline[];
}
