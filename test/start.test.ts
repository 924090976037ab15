/**
 * Start-up as an operator sees it: Ferry runs as its own process, on an empty database or on the
 * embedded server, answers /healthz and /readyz, and stops cleanly on SIGTERM.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, test } from 'node:test';
import { configVariables, loadConfig } from '../src/config.ts';
import { startFerry } from '../src/main.ts';
import { EMBEDDED_PORT_FILE } from '../src/persistence/embedded-port.ts';
import { createEmptyDatabase, dropDatabase } from '../scripts/lib/test-databases.ts';
import { childEnv, collectJsonLines, oldSystemNode, repoRoot } from './helpers/ferry-process.ts';
import { freePort, portRefuses } from './helpers/net.ts';
import { within } from './helpers/wait.ts';

interface Started {
  child: ChildProcess;
  /** Every JSON log line printed so far. */
  lines: Array<Record<string, unknown>>;
  stderr: () => string;
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function spawnFerry(extra: Record<string, string>, command: [string, ...string[]] = [process.execPath, '--import', 'tsx', 'src/main.ts']): Started {
  const child = spawn(command[0], command.slice(1), {
    cwd: repoRoot,
    env: childEnv(extra),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: Array<Record<string, unknown>> = [];
  let stderr = '';
  collectJsonLines(child.stdout!, lines, () => child.emit('lines'));
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  return { child, lines, stderr: () => stderr, exit };
}

/** Waits for the one line that says where Ferry listens; fails if the process exits first, or after 60 s. */
async function listening(started: Started): Promise<{ url: string; line: Record<string, unknown> }> {
  const find = () => started.lines.find((l) => typeof l.url === 'string' && typeof l.msg === 'string' && l.msg.startsWith('ferry listening'));
  const line = await within('ferry to listen', new Promise<Record<string, unknown>>((resolve, reject) => {
    const check = () => {
      const found = find();
      if (found) {
        started.child.off('lines', check);
        resolve(found);
      }
    };
    started.child.on('lines', check);
    started.exit.then(({ code, signal }) => {
      if (!find()) reject(new Error(`ferry exited (${code ?? signal}) before listening:\n${started.stderr()}\n${JSON.stringify(started.lines)}`));
    });
    check();
  }));
  return { url: line.url as string, line };
}

async function stopWith(started: Started, signal: NodeJS.Signals): Promise<number | null> {
  started.child.kill(signal);
  const { code } = await started.exit;
  return code;
}

async function getJson(url: string): Promise<{ status: number; body: any }> {
  const res = await fetch(url);
  return { status: res.status, body: await res.json() };
}

const adminUrl = process.env.FERRY_TEST_ADMIN_URL;
const running = new Set<Started>();

async function emptyDatabase(): Promise<string> {
  if (!adminUrl) throw new Error('run tests through `npm test` (it prepares the database server)');
  const name = `ferry_t_${process.pid}_start_${randomBytes(3).toString('hex')}`;
  const url = await createEmptyDatabase(adminUrl, name);
  after(() => dropDatabase(adminUrl, name));
  return url;
}

function start(extra: Record<string, string>, command?: [string, ...string[]]): Started {
  const started = spawnFerry(extra, command);
  running.add(started);
  started.exit.then(() => running.delete(started));
  return started;
}

// A failed assertion must not leave a server (or an embedded PostgreSQL) running.
after(async () => {
  for (const s of running) s.child.kill('SIGKILL');
});

test('starts on an empty database, is ready, and exits 0 on SIGTERM', async () => {
  const databaseUrl = await emptyDatabase();
  const ferry = start({ DATABASE_URL: databaseUrl });
  const { url, line } = await listening(ferry);

  assert.match(url, /^http:\/\/127\.0\.0\.1:\d+$/);
  assert.equal(line.database, 'external');
  assert.ok((line.migrations_applied as number) > 0, 'the empty database was migrated');
  assert.equal(ferry.lines.filter((l) => typeof l.url === 'string').length, 1, 'one line says where it listens');
  assert.ok(
    ferry.lines.some((l) => String(l.msg).includes('npm run ferry -- tokens create --name admin --role admin')),
    'a database without an admin token gets the command that creates one',
  );

  assert.deepEqual(await getJson(`${url}/healthz`), { status: 200, body: { status: 'ok' } });
  const ready = await getJson(`${url}/readyz`);
  assert.equal(ready.status, 200, JSON.stringify(ready.body));
  assert.equal(ready.body.status, 'ready');

  assert.equal(await stopWith(ferry, 'SIGTERM'), 0, ferry.stderr());
  assert.ok(ferry.lines.some((l) => l.msg === 'ferry stopped'));
  assert.equal(ferry.stderr(), '', 'nothing went wrong on the way out');
  assert.deepEqual(ferry.lines.filter((l) => typeof l.level === 'number' && l.level >= 50), [], 'a clean stop logs no error (pg-boss included)');
});

test('SIGINT stops it cleanly too', async () => {
  const databaseUrl = await emptyDatabase();
  const ferry = start({ DATABASE_URL: databaseUrl });
  await listening(ferry);
  assert.equal(await stopWith(ferry, 'SIGINT'), 0, ferry.stderr());
  assert.deepEqual(ferry.lines.filter((l) => typeof l.level === 'number' && l.level >= 50), [], 'Ctrl-C logs no error');
});

test('two processes started at once on one empty database both come up', async () => {
  const databaseUrl = await emptyDatabase();
  const a = start({ DATABASE_URL: databaseUrl });
  const b = start({ DATABASE_URL: databaseUrl });
  const [la, lb] = await Promise.all([listening(a), listening(b)]);

  // Exactly one of them applied the migrations; the other found nothing left to do.
  const applied = [la.line.migrations_applied, lb.line.migrations_applied].map(Number).sort();
  assert.equal(applied[0], 0);
  assert.ok(applied[1] > 0);

  for (const { url } of [la, lb]) {
    const ready = await getJson(`${url}/readyz`);
    assert.equal(ready.status, 200, JSON.stringify(ready.body));
  }
  assert.deepEqual(await Promise.all([stopWith(a, 'SIGTERM'), stopWith(b, 'SIGTERM')]), [0, 0]);
});

test('a bad configuration value stops start with a message naming the variable', async () => {
  const ferry = start({ PORT: 'abc', DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none' });
  const { code } = await ferry.exit;
  assert.notEqual(code, 0);
  assert.match(ferry.stderr(), /PORT/);
  assert.equal(ferry.stderr().trim().split('\n').length, 1, `one line: ${ferry.stderr()}`);
  assert.ok(!ferry.lines.some((l) => typeof l.url === 'string'), 'nothing was served');
});

test('a bad FERRY_LOG_LEVEL stops start with one line naming it, not an error from the logger', async () => {
  const ferry = start({ FERRY_LOG_LEVEL: 'loud', DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none' });
  const { code } = await ferry.exit;
  assert.equal(code, 1);
  assert.equal(ferry.stderr().trim().split('\n').length, 1, `one line: ${ferry.stderr()}`);
  assert.match(ferry.stderr(), /^ferry: Invalid configuration: FERRY_LOG_LEVEL \("loud"\)/);
});

test('without DATABASE_URL it runs an embedded PostgreSQL and reuses its data folder', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'ferry-start-'));
  // When tests run as root, PostgreSQL runs as its own user and must be able to reach the folder.
  chmodSync(dataDir, 0o755);
  after(() => rmSync(dataDir, { recursive: true, force: true }));
  const pgPort = await freePort();
  const env = { FERRY_DATA_DIR: dataDir, FERRY_EMBEDDED_PG_PORT: String(pgPort) };

  const first = start(env);
  const one = await listening(first);
  assert.equal(one.line.database, 'embedded');
  assert.ok((one.line.migrations_applied as number) > 0);
  // A first start is not silent until it listens: each slow part says it is under way, in order.
  const said = (lines: Array<Record<string, unknown>>) => lines.filter((l) => l.progress === true).map((l) => String(l.msg));
  const firstSaid = said(first.lines);
  const order = [/^first start: creating the embedded PostgreSQL database in /, /^embedded PostgreSQL is running on 127\.0\.0\.1:\d+/, /^applying \d+ database migrations$/, /^database ready; starting the runtime/];
  assert.equal(firstSaid.length, order.length, JSON.stringify(firstSaid));
  order.forEach((re, i) => assert.match(firstSaid[i]!, re));
  assert.ok(first.lines.findIndex((l) => l.progress === true) < first.lines.indexOf(one.line), 'before it listens');
  assert.equal((await getJson(`${one.url}/readyz`)).status, 200);
  const pgVersion = join(dataDir, 'pg', 'PG_VERSION');
  const created = statSync(pgVersion).mtimeMs;
  assert.equal(await stopWith(first, 'SIGTERM'), 0, first.stderr());
  assert.ok(!existsSync(join(dataDir, 'pg', 'postmaster.pid')), 'PostgreSQL shut down cleanly');
  assert.ok(await portRefuses(pgPort), 'embedded PostgreSQL is no longer listening');

  const second = start(env);
  const two = await listening(second);
  assert.equal(two.line.database, 'embedded');
  assert.equal(two.line.migrations_applied, 0, 'the same, already migrated, database was reused');
  assert.equal(statSync(pgVersion).mtimeMs, created, 'the data folder was not initialised again');
  assert.deepEqual(said(second.lines).map((m) => m.split(' ')[0]), ['embedded', 'database'], 'no initdb, no migration to announce');
  assert.equal((await getJson(`${two.url}/readyz`)).status, 200);
  assert.equal(await stopWith(second, 'SIGTERM'), 0, second.stderr());
  assert.ok(!existsSync(join(dataDir, 'pg', 'postmaster.pid')));
});

test('two data folders without FERRY_EMBEDDED_PG_PORT run side by side, the second on a port it remembers', async () => {
  const folders = [0, 1].map(() => {
    const dir = mkdtempSync(join(tmpdir(), 'ferry-side-'));
    chmodSync(dir, 0o755);
    after(() => rmSync(dir, { recursive: true, force: true }));
    return dir;
  });
  // As on a developer's machine: the first checkout starts, then the second while the first runs.
  const first = start({ FERRY_DATA_DIR: folders[0] });
  const one = await listening(first);
  const second = start({ FERRY_DATA_DIR: folders[1] });
  const two = await listening(second);
  for (const { url } of [one, two]) {
    const ready = await getJson(`${url}/readyz`);
    assert.equal(ready.status, 200, JSON.stringify(ready.body));
  }
  // The default was taken (by the first, or by something else on this machine): the second picked a port.
  const remembered = Number(readFileSync(join(folders[1], EMBEDDED_PORT_FILE), 'utf8').trim());
  assert.ok(remembered > 0 && remembered !== 54329, `picked port ${remembered}`);

  // Its next start reuses the remembered port and the database in it.
  assert.equal(await stopWith(second, 'SIGTERM'), 0, second.stderr());
  assert.ok(await portRefuses(remembered));
  const again = start({ FERRY_DATA_DIR: folders[1] });
  const three = await listening(again);
  assert.equal(three.line.migrations_applied, 0, 'the same, already migrated, database was reused');
  assert.equal(Number(readFileSync(join(folders[1], EMBEDDED_PORT_FILE), 'utf8').trim()), remembered);
  assert.equal(await portRefuses(remembered), false, 'the embedded PostgreSQL listens on the remembered port');
  assert.equal((await getJson(`${three.url}/readyz`)).status, 200);
  assert.deepEqual(await Promise.all([stopWith(first, 'SIGTERM'), stopWith(again, 'SIGTERM')]), [0, 0]);
});

test('the README documents every setting with its real default', () => {
  const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8');
  const rows = [...readme.matchAll(/^\| `([A-Z0-9_]+)` \| ([^|]+) \|/gm)].map((m) => ({ name: m[1], fallback: m[2].trim() }));
  assert.deepEqual(
    rows.map((r) => r.name).sort(),
    [...configVariables].sort(),
    'the configuration table lists exactly the variables src/config.ts reads',
  );
  const defaults = loadConfig({});
  for (const { name, fallback } of rows) {
    const literal = /^`([^`]*)`$/.exec(fallback);
    if (!literal) continue; // "(unset)" and the like: no value to compare
    assert.deepEqual(loadConfig({ [name]: literal[1] }), defaults, `README default of ${name} is ${literal[1]}`);
  }
});

const inProcessEnv = (databaseUrl: string) => ({ DATABASE_URL: databaseUrl, HOST: '127.0.0.1', PORT: '0', FERRY_LOG_LEVEL: 'silent' });

test('in-process start: hooks see the runtime, extra routes are served, stop runs in order', async () => {
  const databaseUrl = await emptyDatabase();
  const events: string[] = [];
  const ferry = await startFerry(inProcessEnv(databaseUrl), {
    routes: [(app) => app.get('/t/hello', (c) => c.json({ hello: 'world' }))],
    onStarted: (runtime) => {
      events.push('started');
      assert.equal(runtime.database, 'external');
      assert.equal(runtime.appDeps.pool, runtime.pool);
    },
    onStopping: async (runtime) => {
      events.push('stopping');
      // Whatever stops here may still need the database.
      const client = await runtime.pool.connect();
      client.release();
      events.push('pool still open');
    },
  });
  assert.equal(ferry.databaseUrl, databaseUrl);
  assert.deepEqual(await getJson(`${ferry.url}/t/hello`), { status: 200, body: { hello: 'world' } });
  assert.equal((await getJson(`${ferry.url}/readyz`)).status, 200);

  await ferry.stop();
  events.push('stopped');
  assert.deepEqual(events, ['started', 'stopping', 'pool still open', 'stopped']);
  assert.ok(await portRefuses(ferry.port), 'the HTTP server is closed');
  await assert.rejects(ferry.pool.connect(), 'the pool is closed');
});

test('a failing start hook aborts start and releases what was started', async () => {
  const databaseUrl = await emptyDatabase();
  let port = 0;
  let pool: import('../src/persistence/db.ts').Pool | undefined;
  await assert.rejects(
    startFerry(inProcessEnv(databaseUrl), {
      onStarted: (runtime) => {
        port = runtime.port;
        pool = runtime.pool;
        throw new Error('runtime could not start');
      },
    }),
    /runtime could not start/,
  );
  assert.ok(port > 0);
  assert.ok(await portRefuses(port), 'the HTTP server was closed');
  await assert.rejects(pool!.connect(), 'the pool was closed');
});

const oldNode = oldSystemNode();
test('`npm start` as the README writes it works with an older Node first on PATH', { skip: oldNode ? false : 'no Node older than 22.12 on PATH' }, async () => {
  const url = await emptyDatabase();
  const path = `${dirname(oldNode!)}:${process.env.PATH}`;
  // The old node really is the one a plain `node` finds: the check refuses it in one line.
  const direct = spawnSync('node', ['--import', './scripts/check-node.mjs', '-e', '0'], { cwd: repoRoot, env: { ...process.env, PATH: path }, encoding: 'utf8' });
  assert.equal(direct.status, 1);
  assert.match(direct.stderr, /^ferry: Node\.js >= 22\.12 is required, this is v\d+\.\d+\.\d+ .*\n$/);
  assert.equal(direct.stderr.split('\n').length, 2, 'one line, no stack trace');

  const started = start({ DATABASE_URL: url, PATH: path }, ['npm', 'start']);
  const { url: base } = await listening(started);
  const ready = await getJson(`${base}/readyz`);
  assert.equal(ready.status, 200);
  // npm passes the signal on to Ferry, which stops in order.
  assert.equal(await stopWith(started, 'SIGTERM'), 0);
  assert.ok(started.lines.some((l) => l.msg === 'ferry stopped'), started.stderr());
});
