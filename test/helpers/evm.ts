import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { configuredRegistries } from '../../src/actors/runtime.ts';
import type { WorkerDeps } from '../../src/actors/execution.ts';
import { EVM_NATIVE_TRANSFER_KEY } from '../../src/executors/evm/index.ts';
import type { ExecutionContext, Executor, PreparedAction, SubmitOptions } from '../../src/executors/protocol.ts';
import { log } from '../../src/log.ts';
import type { Pool } from '../../src/persistence/db.ts';
import type { TemplateDefinitionInput } from '../../src/plan/template-schema.ts';
import { ANVIL_CHAIN_ID, TEST_FEE_CAP_WEI } from './anvil.ts';
import { plan, runtimeDeps } from './runtime.ts';

/**
 * The EVM lane as the runtime builds it from a FERRY_CONFIG_FILE: a YAML file written to a fresh
 * temporary folder, loaded by loadConfig, and the registries made by configuredRegistries.
 */

export interface EvmFileInput {
  chains: Array<Record<string, unknown>>;
  signers?: Array<Record<string, unknown>>;
  tokens?: Array<Record<string, unknown>>;
}

/**
 * Writes the configuration file; returns its path. A chain that names no fee cap gets
 * TEST_FEE_CAP_WEI (every chain a signer signs for needs one); `max_fee_per_gas_cap_wei: undefined`
 * leaves it without.
 */
export function writeConfigFile(evm: EvmFileInput): string {
  const dir = mkdtempSync(join(tmpdir(), 'ferry-config-'));
  const path = join(dir, 'ferry.yaml');
  const chains = evm.chains.map((c) => ('max_fee_per_gas_cap_wei' in c ? c : { ...c, max_fee_per_gas_cap_wei: TEST_FEE_CAP_WEI }));
  writeFileSync(path, stringify({ evm: { ...evm, chains } }));
  return path;
}

/** Runtime deps whose registries are the configured ones (sim lane included). */
export async function configuredDeps(pool: Pool, evm: EvmFileInput, env: Record<string, string> = {}): Promise<WorkerDeps> {
  const fullEnv = { FERRY_CONFIG_FILE: writeConfigFile(evm), ...env };
  const base = runtimeDeps(pool, fullEnv);
  const { executors, signers } = await configuredRegistries(pool, base.config, { env: fullEnv, log });
  return { ...base, executors, signers };
}

/** An executor with a pre-submit check, as the EVM executors are. */
type CheckingExecutor = Executor & Required<Pick<Executor, 'preSubmitCheck'>>;

export interface DyingExecutor {
  /** Wraps the real executor: every call passes through, except the submits that die. */
  wrap(real: CheckingExecutor): Executor;
  /** Resolves once a submit reached the point where the process "dies". */
  reached: Promise<void>;
  /** Ends the pending submit with an error (the process is gone). */
  die(): void;
}

/**
 * An executor whose process "dies" inside submit(), before or after the real broadcast: the answer
 * never comes back. `dies` picks the submits this happens to (the others pass through); `label`
 * names what is broadcast in the assertion, `reason` is the error die() ends the submit with.
 */
export function dyingInSubmit(
  when: 'before_broadcast' | 'after_broadcast',
  opts: { dies?: (prepared: PreparedAction) => boolean; label: string; reason: string },
): DyingExecutor {
  let reached!: () => void;
  const reachedP = new Promise<void>((r) => (reached = r));
  let die!: (err: Error) => void;
  const death = new Promise<never>((_, reject) => (die = reject));
  death.catch(() => {});
  const wrap = (real: CheckingExecutor): Executor =>
    Object.assign(Object.create(real) as Executor, {
      executorKey: real.executorKey,
      lane: real.lane,
      preflight: (ctx: ExecutionContext) => real.preflight(ctx),
      prepare: (ctx: ExecutionContext) => real.prepare(ctx),
      preSubmitCheck: (ctx: ExecutionContext) => real.preSubmitCheck(ctx),
      observe: (ctx: ExecutionContext) => real.observe(ctx),
      recover: (ctx: ExecutionContext) => real.recover(ctx),
      inspect: (ctx: ExecutionContext) => real.inspect(ctx),
      submit: async (ctx: ExecutionContext, prepared: PreparedAction, submitOpts: SubmitOptions) => {
        if (opts.dies && !opts.dies(prepared)) return real.submit(ctx, prepared, submitOpts);
        if (when === 'after_broadcast') {
          const r = await real.submit(ctx, prepared, submitOpts);
          assert.equal(r.next_state, 'SUBMITTED', `${opts.label} itself went through`);
        }
        reached();
        // The answer never comes back: as if the process had died here.
        return death;
      },
    });
  return { wrap, reached: reachedP, die: () => die(new Error(opts.reason)) };
}

/**
 * A one-node plan, `pay`: a native transfer on anvil's chain by the EVM native-transfer executor,
 * signed by evm_local; `config` is the node's (to, value_wei, confirmations...), `signerBinding`
 * changes the signer or the chain.
 */
export function nativeTransferPlan(key: string, config: Record<string, unknown> = {}, signerBinding: Record<string, unknown> = {}): TemplateDefinitionInput {
  return plan(key, [
    {
      node_key: 'pay',
      node_kind: 'action',
      action_type: 'evm_native_transfer',
      executor_binding: { executor_key: EVM_NATIVE_TRANSFER_KEY },
      signer_binding: { signer_key: 'evm_local', chain_id: ANVIL_CHAIN_ID, ...signerBinding },
      config,
    },
  ]);
}
