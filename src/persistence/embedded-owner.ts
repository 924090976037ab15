import { existsSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Who runs a data folder's embedded PostgreSQL. A process that starts the server records itself in
 * the folder (`pg-owner`: its pid and, on Linux, its start time, so a recycled pid is not taken for
 * it). A server whose owner is gone was left behind by a Ferry that could not stop it (SIGKILL, a
 * closed terminal before SIGHUP was handled, a crash of the machine's session): the next start
 * stops it and starts it again under itself, instead of failing on `postmaster.pid already exists`.
 * A server whose owner is alive belongs to another running process: start-up refuses to touch it.
 */

export const EMBEDDED_OWNER_FILE = 'pg-owner';

export interface ServerProcess {
  pid: number;
  port: number;
}

interface Owner {
  pid: number;
  started: string | null;
}

/** The data folder's PostgreSQL, when postmaster.pid names a live process serving that very folder. */
export function runningServer(dataDir: string): ServerProcess | null {
  const clusterDir = join(resolve(dataDir), 'pg');
  const pidFile = join(clusterDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return null;
  const lines = readFileSync(pidFile, 'utf8').split('\n');
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  // The second line is the cluster folder the server was started on: a copied folder's stale file
  // names another one. As root, `pg` may link to the cluster (embedded-reach.ts): the server was
  // given its target.
  if (!Number.isInteger(pid) || pid <= 0 || !Number.isInteger(port) || !sameFolder(resolve(lines[1] ?? ''), clusterDir)) return null;
  return alive(pid) ? { pid, port } : null;
}

/** The process that started the folder's server, if it still runs (null: none recorded, or gone). */
export function liveOwner(dataDir: string): number | null {
  const file = join(resolve(dataDir), EMBEDDED_OWNER_FILE);
  if (!existsSync(file)) return null;
  let owner: Owner;
  try {
    owner = JSON.parse(readFileSync(file, 'utf8')) as Owner;
  } catch {
    return null;
  }
  if (!Number.isInteger(owner.pid) || owner.pid <= 0 || !alive(owner.pid)) return null;
  // A pid the system gave to another process since: not the owner.
  if (owner.started !== null && startTimeOf(owner.pid) !== owner.started) return null;
  return owner.pid;
}

export function recordOwner(dataDir: string): void {
  const owner: Owner = { pid: process.pid, started: startTimeOf(process.pid) };
  writeFileSync(join(resolve(dataDir), EMBEDDED_OWNER_FILE), JSON.stringify(owner) + '\n', { mode: 0o600 });
}

export function clearOwner(dataDir: string): void {
  const file = join(resolve(dataDir), EMBEDDED_OWNER_FILE);
  try {
    const owner = JSON.parse(readFileSync(file, 'utf8')) as Owner;
    if (owner.pid === process.pid) rmSync(file, { force: true });
  } catch {
    // Nothing recorded, or unreadable: nothing of ours to clear.
  }
}

/**
 * Stops a server left behind: SIGINT (PostgreSQL's fast shutdown: sessions are ended, the data is
 * checkpointed), then SIGQUIT (immediate shutdown, crash recovery at the next start) when it has
 * not exited within `graceMs`. Resolves when the process is gone; throws when it survives both.
 */
export async function stopLeftServer(server: ServerProcess, graceMs = 30_000): Promise<void> {
  for (const [signal, wait] of [['SIGINT', graceMs], ['SIGQUIT', 10_000]] as const) {
    try {
      process.kill(server.pid, signal);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ESRCH') return;
      throw err;
    }
    const deadline = Date.now() + wait;
    while (Date.now() < deadline) {
      if (!alive(server.pid)) return;
      await sleep(100);
    }
  }
  throw new Error(`the PostgreSQL server left running on this data folder (pid ${server.pid}) did not stop`);
}

function sameFolder(named: string, clusterDir: string): boolean {
  if (named === clusterDir) return true;
  try {
    return named === realpathSync(clusterDir);
  } catch {
    return false;
  }
}

/** Whether process `pid` is running (signal 0); one of another user counts too. */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: alive, owned by another user (as root, PostgreSQL runs as its own user).
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** A process's start time in clock ticks since boot (field 22 of /proc/PID/stat); null off Linux. */
function startTimeOf(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces and parentheses: count from the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return fields[19] ?? null;
  } catch {
    return null;
  }
}
