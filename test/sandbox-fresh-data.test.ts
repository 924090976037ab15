/**
 * The sandbox starts new chains every run, so it starts from an empty data folder: its own folder
 * is emptied (a server a killed run left on it stopped first), a folder it did not make is refused.
 */
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { freshSandboxData, SANDBOX_MARKER } from '../scripts/sandbox/fresh-data.ts';
import { runningServer } from '../src/persistence/embedded-owner.ts';
import { startEmbeddedPostgres } from '../src/persistence/embedded.ts';
import { freePort } from './helpers/net.ts';

function folder(): string {
  const dir = mkdtempSync(join(tmpdir(), 'ferry-sandbox-data-'));
  chmodSync(dir, 0o755);
  after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

test('a missing or empty folder is simply made', async () => {
  const dir = folder();
  assert.equal(await freshSandboxData(dir), 'created');
  assert.equal(await freshSandboxData(join(dir, 'nested')), 'created');
  assert.ok(existsSync(join(dir, 'nested')));
});

test('a folder the sandbox did not make is refused and left as it is', async () => {
  const dir = folder();
  writeFileSync(join(dir, 'pg-password'), 'someone else\n');
  await assert.rejects(freshSandboxData(dir), /holds data the sandbox did not make/);
  assert.deepEqual(readdirSync(dir), ['pg-password']);
});

test('the last run\'s folder is emptied, its left-behind server stopped first', async () => {
  const dir = folder();
  // A run killed with its embedded server still up: the process that started it (this test) is
  // the recorded owner, so the owner is made to look gone by rewriting the record.
  const server = await startEmbeddedPostgres({ dataDir: dir, port: await freePort() });
  writeFileSync(join(dir, SANDBOX_MARKER), '# Written by npm run sandbox\n');
  writeFileSync(join(dir, 'pg-owner'), JSON.stringify({ pid: 2 ** 22 + 1, started: null }) + '\n');
  const left = runningServer(dir);
  assert.ok(left);
  assert.equal(await freshSandboxData(dir), 'reset');
  assert.equal(runningServer(dir), null);
  assert.deepEqual(readdirSync(dir), [], 'nothing of the last run is left');
  await server.stop(); // already stopped: resolves at once
});
