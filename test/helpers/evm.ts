import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { configuredRegistries } from '../../src/actors/runtime.ts';
import type { RuntimeDeps } from '../../src/actors/execution.ts';
import { loadConfig } from '../../src/config.ts';
import { log } from '../../src/log.ts';
import type { Pool } from '../../src/persistence/db.ts';
import { runtimeDeps } from './runtime.ts';

/**
 * The EVM lane as the runtime builds it from a FERRY_CONFIG_FILE: a YAML file written to a fresh
 * temporary folder, loaded by loadConfig, and the registries made by configuredRegistries.
 */

export interface EvmFileInput {
  chains: Array<Record<string, unknown>>;
  signers?: Array<Record<string, unknown>>;
  tokens?: Array<Record<string, unknown>>;
}

/** Writes the configuration file; returns its path. */
export function writeConfigFile(evm: EvmFileInput): string {
  const dir = mkdtempSync(join(tmpdir(), 'ferry-config-'));
  const path = join(dir, 'ferry.yaml');
  writeFileSync(path, stringify({ evm }));
  return path;
}

/** Runtime deps whose registries are the configured ones (sim lane included). */
export async function configuredDeps(pool: Pool, evm: EvmFileInput, env: Record<string, string> = {}): Promise<RuntimeDeps> {
  const fullEnv = { FERRY_CONFIG_FILE: writeConfigFile(evm), ...env };
  const base = runtimeDeps(pool, fullEnv);
  const { executors, signers } = await configuredRegistries(pool, base.config, { env: fullEnv, log });
  return { ...base, executors, signers };
}
