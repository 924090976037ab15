/**
 * `npm test`: finds a PostgreSQL server (TEST_DATABASE_URL, else DATABASE_URL, else an embedded
 * one), builds the migrated template database once, then runs every test file with node:test.
 * Extra arguments are passed to node's test runner (e.g. a file path or --test-name-pattern).
 *
 * Files run FERRY_TEST_CONCURRENCY (3) at a time, except those that say `@test-runs-alone` near
 * their top: load tests with several worker processes (a 1,000-movement cluster run, a kill storm),
 * which on a small machine would only starve each other and the files beside them. They run after
 * the others, one at a time.
 */
import { spawn } from 'node:child_process';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { startEmbeddedPostgres, type EmbeddedServer } from '../src/persistence/embedded.ts';
import { rememberNewPort, resolveEmbeddedPort } from '../src/persistence/embedded-port.ts';
import { dropOldTestDatabases, ensureTemplate, withDatabase } from './lib/test-databases.ts';

function testFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir)) {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) out.push(...testFiles(path));
    else if (entry.endsWith('.test.ts')) out.push(path);
  }
  return out.sort();
}

/** Whether a test file asks to run with no other file beside it (see the header). */
function runsAlone(file: string): boolean {
  return readFileSync(file, 'utf8').slice(0, 3000).includes('@test-runs-alone');
}

/** The embedded test server's port, beside Ferry's own default (54329). */
const TEST_SERVER_PORT = 54339;

async function main() {
  let embedded: EmbeddedServer | undefined;
  let adminUrl = process.env.TEST_DATABASE_URL ?? process.env.DATABASE_URL;
  if (!adminUrl) {
    // 54339 unless another checkout's test server holds it; then a free port kept in the folder.
    const dataDir = '.ferry/test-data';
    const port = await resolveEmbeddedPort(dataDir, undefined, TEST_SERVER_PORT);
    embedded = await startEmbeddedPostgres({ dataDir, port, database: 'postgres', nextPort: () => rememberNewPort(dataDir) });
    adminUrl = embedded.url;
  }
  adminUrl = withDatabase(adminUrl, 'postgres');
  const template = await ensureTemplate(adminUrl);
  await dropOldTestDatabases(adminUrl, template);

  const args = process.argv.slice(2);
  const all = args.some((a) => a.endsWith('.ts')) ? [] : testFiles('test');
  const alone = all.filter(runsAlone);
  const together = all.filter((f) => !alone.includes(f));
  const env = {
    ...process.env,
    FERRY_TEST_ADMIN_URL: adminUrl,
    FERRY_TEST_TEMPLATE: template,
    FERRY_LOG_LEVEL: process.env.FERRY_LOG_LEVEL ?? 'silent',
    // Tests talk to loopback only: the AWS SDK must never look for credentials at the
    // instance-metadata address, and nothing may report usage.
    AWS_EC2_METADATA_DISABLED: 'true',
    DO_NOT_TRACK: '1',
  };
  const run = (files: string[], concurrency: string): Promise<number> => {
    const child = spawn(
      process.execPath,
      // The timeout is a backstop for a hung test: every wait inside the tests has its own deadline.
      ['--import', 'tsx', '--test', `--test-concurrency=${concurrency}`, '--test-timeout=600000', ...args, ...files],
      { stdio: 'inherit', env },
    );
    return new Promise((resolve) => child.on('exit', (c, sig) => resolve(c ?? (sig ? 1 : 0))));
  };
  let code = all.length === 0 ? await run([], process.env.FERRY_TEST_CONCURRENCY ?? '3') : await run(together, process.env.FERRY_TEST_CONCURRENCY ?? '3');
  if (alone.length > 0) {
    console.log(`\n# ${alone.length} load test file(s), one at a time: ${alone.join(', ')}`);
    code = Math.max(code, await run(alone, '1'));
  }
  if (embedded) await embedded.stop();
  process.exit(code);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
