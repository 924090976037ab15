import { existsSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { liveOwner, runningServer, stopLeftServer } from '../../src/persistence/embedded-owner.ts';

/** The file the sandbox writes into its data folder at every start; it marks the folder as the sandbox's. */
export const SANDBOX_MARKER = 'sandbox-config.yaml';

/**
 * Every sandbox run starts fresh chains (anvil keeps no state), so what Ferry kept of the last run
 * (nonce reservations of the hot wallet, movements on contracts that no longer exist) disagrees with
 * them: its next transfers would take nonces the new chain has not reached and wait forever. So the
 * sandbox starts from an empty data folder too. Only a folder the sandbox made (it holds
 * SANDBOX_MARKER) is emptied; any other non-empty folder is refused, so FERRY_DATA_DIR pointed at a
 * real installation never loses it; and so is one whose embedded server another process still runs.
 * Returns what was done, for the sandbox to say.
 */
export async function freshSandboxData(dataDir: string): Promise<'created' | 'reset'> {
  if (!existsSync(dataDir) || readdirSync(dataDir).length === 0) {
    mkdirSync(dataDir, { recursive: true });
    return 'created';
  }
  if (!existsSync(join(dataDir, SANDBOX_MARKER))) {
    throw new Error(`${dataDir} holds data the sandbox did not make; the sandbox starts new chains and needs a folder of its own (set FERRY_DATA_DIR to another one)`);
  }
  const owner = liveOwner(dataDir);
  if (owner !== null) throw new Error(`the sandbox's database in ${dataDir} is in use by process ${owner}; stop that sandbox first`);
  // A server a killed sandbox left running: stopped before its files go.
  const left = runningServer(dataDir);
  if (left) await stopLeftServer(left);
  rmSync(dataDir, { recursive: true, force: true });
  mkdirSync(dataDir, { recursive: true });
  return 'reset';
}
