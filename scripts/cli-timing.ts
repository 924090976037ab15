/**
 * `node --import tsx scripts/cli-timing.ts [--runs N]`: wall time of `ferry --help` and of
 * `ferry movements show ID` against a running Ferry, each run as a user runs it (`node bin/ferry.js`,
 * a new process every time). Prints one line per command (median, min and max of N runs, default 7,
 * after one warm-up run that fills the compile cache) and then one JSON line.
 *
 * The Ferry it asks is started for the run (`src/main.ts` on a scratch database with one movement and
 * an operator token), then stopped and its database dropped. Database: BENCH_DATABASE_URL, else
 * DATABASE_URL, else TEST_DATABASE_URL (a server this script may create databases on).
 * A measurement, not a test: nothing here fails on a slow machine.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createPool } from '../src/persistence/db.ts';
import { migrate } from '../src/persistence/migrate.ts';
import { createToken } from '../src/persistence/tokens.ts';
import { scratchDatabaseName } from './lib/bench-run.ts';
import { benchTemplate, createMovements } from './lib/load.ts';
import { exited, waitFor } from './lib/processes.ts';
import { createEmptyDatabase, dropDatabase } from './lib/test-databases.ts';

const { values } = parseArgs({ options: { runs: { type: 'string', default: '7' } } });
const runs = Number(values.runs);
if (!Number.isInteger(runs) || runs < 1) throw new Error('--runs must be a positive integer');

const adminUrl = process.env.BENCH_DATABASE_URL ?? process.env.DATABASE_URL ?? process.env.TEST_DATABASE_URL;
if (!adminUrl) {
  process.stderr.write('cli-timing: set BENCH_DATABASE_URL, DATABASE_URL or TEST_DATABASE_URL (a server it may create a scratch database on)\n');
  process.exit(2);
}

/** Wall time of one `node bin/ferry.js <args>`, in ms; fails when the command does. */
function timeOnce(args: string[], env: NodeJS.ProcessEnv): number {
  const started = process.hrtime.bigint();
  const r = spawnSync(process.execPath, ['bin/ferry.js', ...args], { env, encoding: 'utf8' });
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  if (r.status !== 0) throw new Error(`ferry ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
  return ms;
}

function measure(args: string[], env: NodeJS.ProcessEnv) {
  timeOnce(args, env);
  const times = Array.from({ length: runs }, () => timeOnce(args, env)).sort((a, b) => a - b);
  const median = runs % 2 ? times[(runs - 1) / 2] : (times[runs / 2 - 1] + times[runs / 2]) / 2;
  return { median: Math.round(median), min: Math.round(times[0]), max: Math.round(times[runs - 1]) };
}

const name = scratchDatabaseName();
const url = await createEmptyDatabase(adminUrl, name);
const dataDir = mkdtempSync(join(tmpdir(), 'ferry-cli-timing-'));
let server: ReturnType<typeof spawn> | undefined;
try {
  await migrate(url);
  const pool = createPool(url, 2, 'ferry-cli-timing');
  const { token } = await createToken(pool, { name: 'cli-timing', role: 'operator' });
  const [movementId] = await createMovements(pool, benchTemplate(), 1, 1);
  await pool.end();

  server = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    env: { ...process.env, DATABASE_URL: url, PORT: '0', HOST: '127.0.0.1', FERRY_DATA_DIR: dataDir, FERRY_LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let base: string | undefined;
  server.stdout!.setEncoding('utf8');
  server.stdout!.on('data', (chunk: string) => {
    const m = /ferry listening on (http:\/\/[^"\s]+)/.exec(chunk);
    if (m) base = m[1];
  });
  const ferryUrl = await waitFor('Ferry to listen', () => {
    if (server!.exitCode !== null) throw new Error('Ferry exited while starting');
    return base;
  }, 120_000, 100);

  const env: NodeJS.ProcessEnv = { ...process.env, FERRY_URL: ferryUrl, FERRY_TOKEN: token };
  for (const k of ['DATABASE_URL', 'TEST_DATABASE_URL', 'BENCH_DATABASE_URL']) delete env[k];
  const help = measure(['--help'], env);
  const show = measure(['movements', 'show', movementId], env);
  const line = (what: string, t: typeof help) => `${what.padEnd(24)} median ${t.median} ms  (min ${t.min}, max ${t.max}, ${runs} runs)`;
  process.stdout.write(`${line('ferry --help', help)}\n${line('ferry movements show ID', show)}\n`);
  process.stdout.write(
    JSON.stringify({ runs, node: process.version, help_median_ms: help.median, help_max_ms: help.max, movements_show_median_ms: show.median, movements_show_max_ms: show.max }) + '\n',
  );
} finally {
  if (server && server.exitCode === null) {
    server.kill('SIGTERM');
    await exited(server);
  }
  await dropDatabase(adminUrl, name);
  rmSync(dataDir, { recursive: true, force: true });
}
