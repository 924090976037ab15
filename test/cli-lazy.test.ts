/**
 * The CLI answers help and mistakes without loading what only running a command needs: the command
 * table (generated from the modules) is all `ferry --help`, `ferry <group> --help` and an unknown
 * command read, and an API command loads no lane, no pg and no pg-boss. Database commands refuse a
 * Ferry's URL (they would open another database than the one meant) and say which database they
 * opened. Timing is measured by scripts/cli-timing.ts, never here.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { commandTable } from '../src/cli/command-table.ts';
import { loadAllCommands } from '../src/cli/commands.ts';
import { runCli } from '../src/cli/run.ts';
import { COMMAND_TABLE_FILE, renderCommandTable } from '../scripts/cli-table.ts';
import { runCliProcess, type CliRun } from './helpers/cli.ts';
import { testDatabase } from './helpers/db.ts';

const dir = mkdtempSync(join(tmpdir(), 'ferry-cli-lazy-'));
let runs = 0;

/** `node bin/ferry.js <args>` as a user runs it, with the modules it resolved. */
async function ferryRecorded(args: string[], env: NodeJS.ProcessEnv = {}): Promise<CliRun & { modules: string[] }> {
  const log = join(dir, `modules-${++runs}.txt`);
  const r = await runCliProcess(args, { FERRY_TEST_MODULE_LOG: log, ...env }, ['--import', './test/helpers/record-modules.mjs', 'bin/ferry.js']);
  const modules = readFileSync(log, 'utf8').split('\n').filter(Boolean);
  assert.ok(modules.some((m) => m.endsWith('/src/cli/run.ts')), `the log records the CLI's own modules: ${modules.join(' ')}`);
  return { ...r, modules };
}

/** What a command that only prints help or talks to the API must not load. */
const HEAVY: Array<[string, RegExp]> = [
  ['ccxt', /\/node_modules\/ccxt\//],
  ['viem', /\/node_modules\/viem\//],
  ['pg-boss', /\/node_modules\/pg-boss\//],
  ['pg', /\/node_modules\/pg\//],
  ['a lane', /\/src\/executors\//],
  ['config.ts (every lane config schema)', /\/src\/config\.ts$/],
  ['the database layer', /\/src\/persistence\//],
];

function assertLight(r: { modules: string[] }, what: string) {
  for (const [name, pattern] of HEAVY) {
    const loaded = r.modules.filter((m) => pattern.test(m));
    assert.deepEqual(loaded, [], `${what} loaded ${name}`);
  }
}

test('the command table is the modules\' commands: same words, summary, usage, options and positionals, in help order', async () => {
  assert.equal(readFileSync(COMMAND_TABLE_FILE, 'utf8'), await renderCommandTable(), 'src/cli/command-table.ts is out of date: run `npm run cli-table`');
  const loaded = await loadAllCommands();
  assert.equal(commandTable.length, loaded.length);
  loaded.forEach(({ module, command }, i) => {
    const { run: _run, ...spec } = command;
    assert.deepEqual(commandTable[i], { module, ...spec }, `row ${i} (${command.path.join(' ')})`);
  });
});

test('a command whose module changed since the table was generated runs with a warning naming the fix', async () => {
  const stale = commandTable.map((row) => (row.path.join(' ') === 'movements show' ? { ...row, summary: 'an older summary' } : row));
  const run = async (table: typeof commandTable) => {
    let err = '';
    const code = await runCli(['movements', 'show', '00000000-0000-4000-8000-000000000000'], {
      env: { FERRY_URL: 'http://127.0.0.1:9', FERRY_TOKEN: 'fy_unused' },
      io: { out: () => {}, err: (t) => (err += t + '\n') },
      table,
    });
    return { code, err };
  };
  const old = await run(stale);
  assert.equal(old.code, 1);
  assert.match(old.err, /^ferry: warning: src\/cli\/command-table\.ts is out of date for this command; run `npm run cli-table`$/m);
  const fresh = await run(commandTable);
  assert.doesNotMatch(fresh.err, /out of date/);
  assert.match(fresh.err, /cannot reach Ferry/);
});

test('ferry --help, ferry <group> --help, a command\'s --help and an unknown command load no lane, pg, pg-boss, viem or ccxt', async () => {
  const help = await ferryRecorded(['--help']);
  assert.equal(help.code, 0, help.stderr);
  assert.match(help.stdout, /^ {2}movements show +show a movement/m);
  assertLight(help, 'ferry --help');

  const group = await ferryRecorded(['tokens', '--help']);
  assert.equal(group.code, 0, group.stderr);
  assert.match(group.stdout, /^usage: ferry tokens list /m);
  assert.match(group.stdout, /^usage: ferry tokens revoke /m);
  assertLight(group, 'ferry tokens --help');
  const helpGroup = await ferryRecorded(['help', 'tokens']);
  assert.equal(helpGroup.code, 0, helpGroup.stderr);
  assert.equal(helpGroup.stdout, group.stdout, 'ferry help tokens is ferry tokens --help');

  const one = await ferryRecorded(['sweeps', 'run', '--help']);
  assert.equal(one.code, 0, one.stderr);
  assert.match(one.stdout, /^usage: ferry sweeps run /);
  assertLight(one, 'ferry sweeps run --help');

  const unknown = await ferryRecorded(['no-such-command']);
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /unknown command "no-such-command"/);
  assertLight(unknown, 'an unknown command');

  const badOption = await ferryRecorded(['tokens', 'list', '--no-such-option']);
  assert.equal(badOption.code, 2);
  assert.match(badOption.stderr, /usage: ferry tokens list/);
  assertLight(badOption, 'a bad option');
});

test('an API command (movements show) loads its module and no lane, pg or pg-boss', async () => {
  // Nothing listens on port 9 of the loopback: the command gets as far as calling the API.
  const r = await ferryRecorded(['movements', 'show', '00000000-0000-4000-8000-000000000000'], { FERRY_URL: 'http://127.0.0.1:9', FERRY_TOKEN: 'fy_unused' });
  assert.equal(r.code, 1);
  assert.match(r.stderr, /cannot reach Ferry at http:\/\/127\.0\.0\.1:9/);
  assert.ok(r.modules.some((m) => m.endsWith('/src/cli/movements.ts')), 'its module was loaded to run it');
  assertLight(r, 'movements show');
});

test('one API command of every module that has them loads no lane, config.ts, pg, pg-boss, viem or ccxt', async () => {
  const modules = new Set<string>();
  for (const row of commandTable) {
    if (!row.options || !('url' in row.options) || modules.has(row.module)) continue;
    modules.add(row.module);
    // As many positionals as it needs (a UUID serves as an id and as a missing file); a required
    // option left out is refused by the command itself, after its module loaded.
    const args = [...row.path, ...Array.from({ length: row.positionals?.min ?? 0 }, () => '00000000-0000-4000-8000-000000000000')];
    const r = await ferryRecorded(args, { FERRY_URL: 'http://127.0.0.1:9', FERRY_TOKEN: 'fy_unused' });
    const what = `ferry ${args.join(' ')}`;
    assert.ok(r.code === 1 || r.code === 2, `${what}: ${r.stderr}`);
    assert.ok(r.modules.some((m) => m.endsWith(`/src/cli/${row.module}.ts`)), `${what} loaded its module`);
    for (const [name, pattern] of HEAVY.filter(([n]) => n !== 'the database layer')) {
      assert.deepEqual(r.modules.filter((m) => pattern.test(m)), [], `${what} loaded ${name}`);
    }
  }
  assert.ok(modules.size >= 10, `API modules: ${[...modules].join(', ')}`);
});

test('database commands given a Ferry\'s URL refuse in one line, exit 2, and open no database: --url (CLI_NOT_OVER_API) or FERRY_URL (CLI_DATABASE_ONLY)', async (t) => {
  // DATABASE_URL points here: a connection would be counted (and cut).
  let connections = 0;
  const server = createServer((socket) => {
    connections++;
    socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => server.close());
  const databasePort = (server.address() as AddressInfo).port;
  // The counter counts: a command not pointed at a Ferry connects.
  const plain = await runCliProcess(['tokens', 'list'], { DATABASE_URL: `postgres://postgres@127.0.0.1:${databasePort}/postgres` });
  assert.equal(plain.code, 1, plain.stderr);
  assert.ok(connections > 0, 'the plain command tried the database');
  for (const [name, args, env, given] of [
    ['tokens create', ['tokens', 'create', '--name', 'x', '--role', 'admin', '--url', 'http://127.0.0.1:9'], {}, '--url'],
    ['principals disable', ['principals', 'disable', '--name', 'x', '--url=http://127.0.0.1:9'], {}, '--url'],
    ['tokens revoke', ['tokens', 'revoke', '--name', 'x'], { FERRY_URL: 'http://127.0.0.1:9' }, 'FERRY_URL'],
    ['credentials list', ['credentials', 'list'], { FERRY_URL: 'http://127.0.0.1:9' }, 'FERRY_URL'],
    ['sweeps list', ['sweeps', 'list'], { FERRY_URL: 'http://127.0.0.1:9' }, 'FERRY_URL'],
    ['audit head', ['audit', 'head'], { FERRY_URL: 'http://127.0.0.1:9' }, 'FERRY_URL'],
    ['queue credentials list', ['queue', 'credentials', 'list'], { FERRY_URL: 'http://127.0.0.1:9' }, 'FERRY_URL'],
  ] as Array<[string, string[], NodeJS.ProcessEnv, string]>) {
    // A database is configured, and would be opened if the command went on.
    const before = connections;
    const r = await ferryRecorded(args, { DATABASE_URL: `postgres://postgres:hunter2@127.0.0.1:${databasePort}/postgres`, ...env });
    const what = `ferry ${args.join(' ')} with ${given}`;
    assert.equal(r.code, 2, `${what}: ${r.stderr}`);
    const expected =
      given === '--url'
        ? `ferry: CLI_NOT_OVER_API: ferry ${name} has no --url: it runs on this machine, not over a Ferry's API `
        : `ferry: CLI_DATABASE_ONLY: ferry ${name} works on a database directly, not over a Ferry's API, and FERRY_URL is set: unset it (FERRY_URL= ferry ${name})`;
    assert.ok(r.stderr.startsWith(expected), `${what}: ${r.stderr}`);
    assert.equal(r.stderr.split('\n').length, 2, `${what}: one line: ${r.stderr}`);
    assert.equal(r.stdout, '', what);
    assert.equal(connections, before, `${what}: no connection to the database`);
  }
  // An empty FERRY_URL is unset (the way out the message names): see the next test.
});

test('a database command says on stderr which database it opened: host:port/database and where from, never the password', async () => {
  const { url } = await testDatabase();
  const withPassword = new URL(url);
  withPassword.password = 'hunter2-not-shown';
  const r = await runCliProcess(['principals', 'list', '--json'], { DATABASE_URL: withPassword.toString(), FERRY_URL: '' });
  assert.equal(r.code, 0, r.stderr);
  assert.ok(Array.isArray(JSON.parse(r.stdout)), 'stdout is still the JSON alone');
  const u = new URL(url);
  assert.equal(r.stderr, `ferry: principals list: database ${u.hostname}:${u.port}${u.pathname} (DATABASE_URL)\n`);
  assert.ok(!r.stderr.includes('hunter2'), 'no password');
});
