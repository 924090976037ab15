import type { CliCommand } from './command.ts';

/**
 * The modules that implement the `ferry` commands, each exporting its CliCommand list, in help order.
 * Nothing here is imported until a command runs: `ferry --help`, `ferry <group> --help` and a
 * mistyped command read the generated command table (command-table.ts) and load no lane, no
 * database driver and no pg-boss. To add commands, export them from a module in this folder, list
 * the module here, and run `npm run cli-table` (test/cli-lazy.test.ts fails while the table is out
 * of date).
 */
export const commandModules = {
  system: async () => (await import('./system.ts')).systemCommands,
  principals: async () => (await import('./principals.ts')).principalCommands,
  tokens: async () => (await import('./tokens.ts')).tokenCommands,
  credentials: async () => (await import('./credentials.ts')).credentialCommands,
  audit: async () => (await import('./audit.ts')).auditCommands,
  templates: async () => (await import('./templates.ts')).templateCommands,
  movements: async () => (await import('./movements.ts')).movementCommands,
  policy: async () => (await import('./policy.ts')).policyCommands,
  'standing-orders': async () => (await import('./standing-orders.ts')).standingOrderCommands,
  queue: async () => (await import('./queue.ts')).queueCommands,
  sweeps: async () => (await import('./sweeps.ts')).sweepCommands,
  balances: async () => (await import('./balances.ts')).balanceCommands,
  roles: async () => (await import('./roles.ts')).databaseCommands,
  'callback-destinations': async () => (await import('./callback-destinations.ts')).callbackDestinationCommands,
  // reconcile, resolutions, workers
  operations: async () => (await import('./operations.ts')).operationsCommands,
  // gates confirm|skip
  gates: async () => (await import('./gates.ts')).gateCommands,
  // attention list|waiting-too-long, cex-transfers list
  attention: async () => (await import('./attention.ts')).attentionCommands,
  // notify channels ...
  notify: async () => (await import('./notify.ts')).notifyCommands,
  hosts: async () => (await import('./hosts.ts')).hostCommands,
} satisfies Record<string, () => Promise<CliCommand[]>>;

export type CommandModuleName = keyof typeof commandModules;

/** Every command with the module it comes from, all modules loaded (the table's generator, tests). */
export async function loadAllCommands(): Promise<Array<{ module: CommandModuleName; command: CliCommand }>> {
  const all: Array<{ module: CommandModuleName; command: CliCommand }> = [];
  for (const [module, load] of Object.entries(commandModules) as Array<[CommandModuleName, () => Promise<CliCommand[]>]>) {
    for (const command of await load()) all.push({ module, command });
  }
  return all;
}

/** The implementation of the command at `path`, from its module; an error when the table is stale. */
export async function loadCommand(module: string, path: string[]): Promise<CliCommand> {
  const load = (commandModules as Record<string, () => Promise<CliCommand[]>>)[module];
  const found = load && (await load()).find((c) => c.path.length === path.length && c.path.every((w, i) => w === path[i]));
  if (!found) throw new Error(`the command table names "${path.join(' ')}" in module ${module}, which has no such command: run \`npm run cli-table\``);
  return found;
}
