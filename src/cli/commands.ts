import { attentionCommands } from './attention.ts';
import { auditCommands } from './audit.ts';
import { balanceCommands } from './balances.ts';
import { callbackDestinationCommands } from './callback-destinations.ts';
import { credentialCommands } from './credentials.ts';
import { hostCommands } from './hosts.ts';
import type { CliCommand } from './command.ts';
import { movementCommands } from './movements.ts';
import { notifyCommands } from './notify.ts';
import { policyCommands } from './policy.ts';
import { standingOrderCommands } from './standing-orders.ts';
import { principalCommands } from './principals.ts';
import { operationsCommands } from './operations.ts';
import { gateCommands } from './gates.ts';
import { queueCommands } from './queue.ts';
import { databaseCommands } from './roles.ts';
import { sweepCommands } from './sweeps.ts';
import { systemCommands } from './system.ts';
import { templateCommands } from './templates.ts';
import { tokenCommands } from './tokens.ts';

/**
 * Every `ferry` command. Each area owns a module exporting its CliCommand list; to add commands
 * (e.g. `templates apply`, `movements create|approve|list|show|watch`), export them from a module
 * in this folder and spread the list here. Help output follows this order.
 */
export const commands: CliCommand[] = [
  ...systemCommands,
  ...principalCommands,
  ...tokenCommands,
  ...credentialCommands,
  ...auditCommands,
  ...templateCommands,
  ...movementCommands,
  ...policyCommands,
  ...standingOrderCommands,
  ...queueCommands,
  ...sweepCommands,
  ...balanceCommands,
  ...databaseCommands,
  ...callbackDestinationCommands,
  // reconcile, resolutions, workers
  ...operationsCommands,
  // gates confirm|skip
  ...gateCommands,
  // attention list|waiting-too-long, cex-transfers list
  ...attentionCommands,
  // notify channels ...
  ...notifyCommands,
  ...hostCommands,
];
