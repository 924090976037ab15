import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import type { WorkerDeps } from '../../src/actors/execution.ts';
import { configuredRegistries } from '../../src/actors/runtime.ts';
import { log } from '../../src/log.ts';
import type { Pool } from '../../src/persistence/db.ts';
import { TEST_FEE_CAP_WEI } from './anvil.ts';
import type { EvmFileInput } from './evm.ts';
import { plan, runtimeDeps } from './runtime.ts';

/** A configuration file with the EVM lane's section and a `hyperliquid` section; returns its path. */
export function writeHyperliquidConfig(evm: EvmFileInput, hyperliquid: Record<string, unknown>): string {
  const dir = mkdtempSync(join(tmpdir(), 'ferry-config-'));
  const path = join(dir, 'ferry.yaml');
  const chains = evm.chains.map((c) => ('max_fee_per_gas_cap_wei' in c ? c : { ...c, max_fee_per_gas_cap_wei: TEST_FEE_CAP_WEI }));
  writeFileSync(path, stringify({ evm: { ...evm, chains }, hyperliquid }));
  return path;
}

/** Runtime deps whose registries are built from that file. */
export async function hyperliquidDeps(pool: Pool, evm: EvmFileInput, hyperliquid: Record<string, unknown>, env: Record<string, string> = {}): Promise<WorkerDeps> {
  const fullEnv = { FERRY_CONFIG_FILE: writeHyperliquidConfig(evm, hyperliquid), ...env };
  const base = runtimeDeps(pool, fullEnv);
  const { executors, signers } = await configuredRegistries(pool, base.config, { env: fullEnv, log });
  return { ...base, executors, signers };
}

/** A top-up by the signer `signerKey`, then the credit observed on Hyperliquid (the sandbox template's shape). */
export function topupPlan(key: string, signerKey: string, config: Record<string, unknown> = {}) {
  return plan(
    key,
    [
      { node_key: 'topup', node_kind: 'action', action_type: 'hyperliquid_topup', executor_binding: 'exec.hyperliquid.topup', signer_binding: signerKey, config },
      { node_key: 'credit', node_kind: 'observe', action_type: 'hyperliquid_credit', executor_binding: 'exec.observe.hyperliquid_credit', config: {} },
    ],
    [{ from: 'topup', to: 'credit' }],
  );
}
