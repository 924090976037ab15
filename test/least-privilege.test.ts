/**
 * Least privilege at run time (docs/security.md): the owner's URL is start-up's alone. The
 * connection budget is checked as the application role; a running Ferry keeps the owner's URL in
 * neither its configuration nor its environment, and its worker processes never receive it; with
 * migrations run as a step of their own, Ferry starts without it at all. The embedded server's
 * superuser password is made for one start, never written, and stops working once start is done.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import pg from 'pg';
import { runCli } from '../src/cli/run.ts';
import { RUNTIME_APP_NAMES } from '../src/connection-budget.ts';
import { readServerCapacity } from '../src/persistence/connections.ts';
import { startEmbeddedPostgres } from '../src/persistence/embedded.ts';
import { auditProtection } from '../src/persistence/roles.ts';
import { startFerryWithWorkers } from './helpers/ferry.ts';
import { listeningUrl, spawnFerry, stopChild } from './helpers/ferry-process.ts';
import { freePort } from './helpers/net.ts';
import { roleDatabase } from './helpers/roles.ts';
import { waitFor } from './helpers/wait.ts';

const db = await roleDatabase();
const adminEnv = { DATABASE_URL: db.appUrl, FERRY_DATABASE_OWNER_URL: db.adminUrl, FERRY_LOG_LEVEL: 'silent' };
// The owner's name, in its URL: nowhere in a running Ferry (the helper gives both roles one password).
const ownerName = db.owner;

async function cli(args: string[], env: NodeJS.ProcessEnv) {
  let out = '';
  let err = '';
  const code = await runCli(args, { env, io: { out: (t) => (out += t + '\n'), err: (t) => (err += t + '\n') } });
  return { code, out, err };
}

test('set up: the application role gets its rights from setup-roles', async () => {
  const r = await cli(['db', 'setup-roles', '--owner-role', db.owner, '--app-role', db.app, '--apply'], adminEnv);
  assert.equal(r.code, 0, r.err);
});

test('the budget check as the application role sees the connections of other roles', async () => {
  // Another role's session, under a name that is not Ferry's: the application role has no
  // pg_read_all_stats, so PostgreSQL hides that session's backend_type from it.
  const other = new pg.Client({ connectionString: db.adminUrl, application_name: 'someone-else' });
  await other.connect();
  try {
    const capacity = await readServerCapacity(db.appUrl, RUNTIME_APP_NAMES);
    assert.ok(capacity.maxConnections > 0);
    assert.ok((capacity.othersByApplication?.['someone-else'] ?? 0) >= 1, JSON.stringify(capacity.othersByApplication));
    assert.ok(capacity.inUseByOthers >= 1);
  } finally {
    await other.end();
  }
});

/** This process's children and their children (from /proc). */
function descendants(pid: number): number[] {
  const out: number[] = [];
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    let children = '';
    try {
      children = readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8');
    } catch {
      continue;
    }
    for (const c of children.split(/\s+/).filter(Boolean).map(Number)) out.push(c, ...descendants(c));
  }
  return out;
}

function environOf(pid: number): string[] {
  return readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
}

test('npm start with worker processes: no worker process receives the owner URL, the budget is read as the app role', { skip: process.platform !== 'linux' ? 'reads /proc' : false }, async () => {
  const ferry = spawnFerry({
    DATABASE_URL: db.appUrl,
    FERRY_DATABASE_OWNER_URL: db.ownerUrl,
    FERRY_WORKER_PROCESSES: '2',
    FERRY_DATA_DIR: mkdtempSync(join(tmpdir(), 'ferry-least-priv-')),
  });
  try {
    await listeningUrl(ferry);
    const primary = ferry.child.pid!;
    // The primary forks the workers once it listens; both must be up.
    const workers = await waitFor('two worker processes', async () => {
      const found = descendants(primary).filter((pid) => {
        try {
          return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('worker.ts');
        } catch {
          return false;
        }
      });
      return found.length >= 2 ? found : undefined;
    });
    for (const pid of workers) {
      const env = environOf(pid);
      assert.ok(env.some((v) => v.startsWith('DATABASE_URL=')), 'a worker has its database');
      assert.equal(env.find((v) => v.startsWith('FERRY_DATABASE_OWNER_URL=')), undefined, `worker ${pid} holds the owner URL`);
      assert.ok(!env.some((v) => v.includes(ownerName)), `worker ${pid} holds the owner's URL`);
    }
    const budget = ferry.lines.find((l) => l.component === 'connection-budget');
    assert.ok(budget, 'the budget was checked');
    assert.equal(typeof budget.max_connections, 'number');
  } finally {
    await stopChild(ferry);
  }
});

test('in-process start: the running Ferry keeps the owner URL in neither its configuration nor process.env', async () => {
  process.env.FERRY_DATABASE_OWNER_URL = db.ownerUrl;
  const ferry = await startFerryWithWorkers(db.appUrl, { FERRY_DATABASE_OWNER_URL: db.ownerUrl });
  try {
    assert.equal(process.env.FERRY_DATABASE_OWNER_URL, undefined);
    assert.equal(ferry.config.databaseOwnerUrl, undefined);
    assert.ok(!JSON.stringify(ferry.appDeps.config).includes(ownerName));
    assert.deepEqual(await auditProtection(ferry.pool), { protected: true, reasons: [] });
  } finally {
    delete process.env.FERRY_DATABASE_OWNER_URL;
    await ferry.stop();
  }
});

test('migrations as a step of their own: `ferry migrate` as the owner, then Ferry starts with the application role only', async () => {
  const migrated = await cli(['migrate'], { DATABASE_URL: db.appUrl, FERRY_DATABASE_OWNER_URL: db.ownerUrl, FERRY_LOG_LEVEL: 'silent' });
  assert.equal(migrated.code, 0, migrated.err);
  const ferry = await startFerryWithWorkers(db.appUrl);
  try {
    assert.deepEqual(await auditProtection(ferry.pool), { protected: true, reasons: [] });
  } finally {
    await ferry.stop();
  }
});

test('embedded: the superuser password is made for one start, written nowhere, and stops working once start is done', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'ferry-least-priv-embedded-'));
  chmodSync(dataDir, 0o755);
  after(() => rmSync(dataDir, { recursive: true, force: true }));
  const port = await freePort();
  const canLogIn = async (url: string) => {
    const c = new pg.Client({ connectionString: url });
    try {
      await c.connect();
      return true;
    } catch (err) {
      assert.match((err as Error).message, /password authentication failed/);
      return false;
    } finally {
      await c.end().catch(() => {});
    }
  };
  const filesOutsideCluster = () => readdirSync(dataDir).filter((f) => f !== 'pg' && statSync(join(dataDir, f)).isFile());

  const first = await startEmbeddedPostgres({ dataDir, port });
  const password = new URL(first.url).password;
  try {
    assert.equal(await canLogIn(first.url), true, 'the start step has the superuser');
    for (const f of filesOutsideCluster()) assert.ok(!readFileSync(join(dataDir, f), 'utf8').includes(password), `${f} holds the superuser password`);
    await first.dropOwner();
    assert.equal(await canLogIn(first.url), false, 'after start the superuser password no longer works');
    assert.equal(await canLogIn(first.appUrl), true, 'the application role still does');
  } finally {
    await first.stop();
  }

  // A folder from an earlier version keeps the password in pg-password: the next start removes it.
  writeFileSync(join(dataDir, 'pg-password'), password + '\n', { mode: 0o600 });
  const second = await startEmbeddedPostgres({ dataDir, port });
  try {
    assert.ok(!filesOutsideCluster().includes('pg-password'));
    assert.notEqual(new URL(second.url).password, password);
    assert.equal(await canLogIn(first.url), false, "the last start's password is not this one's");
    assert.equal(await canLogIn(second.url), true);
    // The server's own files hold only a SCRAM verifier, never the password as typed.
    const grep = (() => {
      try {
        return execFileSync('grep', ['-rl', '--', new URL(second.url).password, join(dataDir, 'pg')], { encoding: 'utf8' });
      } catch {
        return '';
      }
    })();
    assert.equal(grep, '');
  } finally {
    await second.stop();
  }
});
