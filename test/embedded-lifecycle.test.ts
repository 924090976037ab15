/**
 * The embedded PostgreSQL belongs to its data folder: a server a killed Ferry left running is taken
 * over by the next start, a live Ferry's server is never touched, a closed terminal (SIGHUP) stops
 * everything in order, two first starts that race for one port both come up, a command finds the
 * folder's server on whatever port it runs, and, as root, a folder the server's user cannot enter
 * is named in one line instead of a crash.
 */
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import pg from 'pg';
import { startEmbeddedPostgres, type EmbeddedServer } from '../src/persistence/embedded.ts';
import { EMBEDDED_PORT_FILE, rememberNewPort, resolveEmbeddedPort } from '../src/persistence/embedded-port.ts';
import { runningServer } from '../src/persistence/embedded-owner.ts';
import { listeningUrl, spawnFerry, stopChild, type ChildFerry } from './helpers/ferry-process.ts';
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

test('as root, a data folder under a folder of mode 0700 stops start in one line naming that folder and the fix', { skip: asRoot ? false : 'runs only as root (PostgreSQL then runs as its own user)' }, async () => {
  const home = mkdtempSync(join(tmpdir(), 'ferry-home-'));
  after(() => rmSync(home, { recursive: true, force: true }));
  chmodSync(home, 0o700);
  const inside = join(home, 'checkout', '.ferry', 'data');
  mkdirSync(inside, { recursive: true });
  const ferry = start({ FERRY_DATA_DIR: inside, FERRY_EMBEDDED_PG_PORT: String(await freePort()) });
  const { code } = await ferry.exit;
  assert.equal(code, 1);
  const lines = ferry.output().trim().split('\n');
  assert.equal(lines.length, 1, ferry.output());
  assert.match(lines[0]!, new RegExp(`cannot enter ${home} \\(mode 700\\)`));
  assert.match(lines[0]!, new RegExp(`chmod o\\+x ${home}`));
  assert.doesNotMatch(ferry.output(), /EACCES|at .*\.ts:\d+/, 'no crash, no stack');
});
