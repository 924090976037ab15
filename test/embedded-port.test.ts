/**
 * Which port the embedded PostgreSQL takes: the explicit one, else the default, else (when something
 * else holds the default) a free port remembered in the data folder.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { EMBEDDED_PORT_FILE, resolveEmbeddedPort } from '../src/persistence/embedded-port.ts';
import { freePort } from './helpers/net.ts';

function dataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'ferry-port-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Holds a loopback port for the rest of the file, as another program would. */
async function occupy(): Promise<number> {
  const server: Server = createServer();
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  after(() => new Promise<void>((done) => server.close(() => done())));
  return (server.address() as { port: number }).port;
}

test('an explicit port is used as given, even when taken, and nothing is remembered', async () => {
  const dir = dataDir();
  const taken = await occupy();
  assert.equal(await resolveEmbeddedPort(dir, taken), taken);
  assert.equal(existsSync(join(dir, EMBEDDED_PORT_FILE)), false);
});

test('a free default is used and not written down', async () => {
  const dir = dataDir();
  const port = await freePort();
  assert.equal(await resolveEmbeddedPort(dir, undefined, port), port);
  assert.equal(existsSync(join(dir, EMBEDDED_PORT_FILE)), false);
});

test('a taken default gives a free port, remembered in the data folder and reused', async () => {
  const dir = dataDir();
  const taken = await occupy();
  const picked = await resolveEmbeddedPort(dir, undefined, taken);
  assert.notEqual(picked, taken);
  assert.equal(readFileSync(join(dir, EMBEDDED_PORT_FILE), 'utf8').trim(), String(picked));
  // Later starts find the remembered port, not the default.
  assert.equal(await resolveEmbeddedPort(dir, undefined, taken), picked);
  assert.equal(await resolveEmbeddedPort(dir, undefined, await freePort()), picked);
});

test('a remembered port that something else took since is replaced by another free one', async () => {
  const dir = dataDir();
  const taken = await occupy();
  const first = await resolveEmbeddedPort(dir, undefined, taken);
  const squatter = createServer();
  await new Promise<void>((done) => squatter.listen(first, '127.0.0.1', done));
  try {
    const second = await resolveEmbeddedPort(dir, undefined, taken);
    assert.notEqual(second, first);
    assert.equal(readFileSync(join(dir, EMBEDDED_PORT_FILE), 'utf8').trim(), String(second));
  } finally {
    await new Promise<void>((done) => squatter.close(() => done()));
  }
});
