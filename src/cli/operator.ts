import { userInfo } from 'node:os';
import { UsageError, type CliContext } from './command.ts';

/**
 * Who runs a CLI command that changes something, as its audit rows record it: `cli:<--by>` when the
 * command was given `--by OPERATOR`, else `cli:<login name>` of the process.
 */
export function operatorName(ctx: CliContext): string {
  const by = ctx.option('by');
  if (by !== undefined) {
    if (!/^[\x21-\x7e]{1,100}$/.test(by)) throw new UsageError('--by must be 1-100 printable characters without spaces');
    return `cli:${by}`;
  }
  let user = 'unknown';
  try {
    user = userInfo().username || user;
  } catch {
    // No passwd entry (a container): the audit row says so.
  }
  return `cli:${user}`;
}
