import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { chmodSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { createPublicClient, erc20Abi, http, type Address } from 'viem';
import { api, childEnv, repoRoot, spawnScript, stopChild, type ChildFerry } from './helpers/ferry-process.ts';
import { waitFor } from './helpers/wait.ts';

/**
 * A sandbox stopped and started again on the same data folder, with its embedded PostgreSQL, as a
 * newcomer would: the second run has new chains (anvil keeps nothing), so what Ferry kept of the
 * first (the hot wallet's nonce reservations, movements on contracts that are gone) would make its
 * transfers wait for nonces the new chain never reaches. The sandbox starts from fresh data instead,
 * and the printed transfer completes on the new chain.
 */

const run = promisify(execFile);

interface Ready {
  url: string;
  commands: string[];
  tokens: { admin: string };
  recipient: Address;
  chain_local: { rpc_url: string };
  token_USDC: { address: Address };
}

async function start(t: import('node:test').TestContext, dataDir: string): Promise<{ sandbox: ChildFerry; ready: Ready }> {
  // No DATABASE_URL: the sandbox's own embedded PostgreSQL in its data folder.
  const sandbox = spawnScript('scripts/sandbox.ts', { PORT: '0', FERRY_DATA_DIR: dataDir });
  t.after(() => stopChild(sandbox, 'SIGKILL'));
  const ready = (await waitFor('the sandbox to be ready', async () => {
    if (sandbox.child.exitCode !== null) throw new Error(`the sandbox exited:\n${sandbox.output()}`);
    return sandbox.lines.find((l) => l.sandbox === 'ready');
  }, 240_000)) as unknown as Ready;
  return { sandbox, ready };
}

/** Runs the sandbox's two printed commands (create, approve) and waits for the movement to end. */
async function transfer(ready: Ready): Promise<{ state: string; nodes: unknown }> {
  const shell = (command: string) => run('sh', ['-c', command], { cwd: repoRoot, env: childEnv({}) });
  const created = await shell(ready.commands[0]);
  const id = /Created movement ([0-9a-f-]{36})/.exec(created.stdout)?.[1];
  assert.ok(id, created.stdout + created.stderr);
  await shell(`${ready.commands[1].replace('<movement id>', id)} --yes`);
  const done = await waitFor(
    'the transfer to finish',
    async () => {
      const r = await api(ready.url, ready.tokens.admin, 'GET', `/v3/movements/${id}`);
      return ['COMPLETED', 'FAILED', 'MANUAL_INTERVENTION'].includes(r.body?.movement?.state) ? r.body : null;
    },
    120_000,
  );
  return { state: done.movement.state, nodes: done.nodes };
}

test('a sandbox started again on its folder begins on fresh chains with fresh data, and its printed transfer completes', async (t) => {
  const parent = mkdtempSync(join(tmpdir(), 'ferry-sandbox-restart-'));
  // The embedded server runs as its own system user when this test runs as root: let it pass (search only).
  chmodSync(parent, 0o711);
  const dataDir = join(parent, 'sandbox');

  const first = await start(t, dataDir);
  const one = await transfer(first.ready);
  assert.equal(one.state, 'COMPLETED', JSON.stringify(one.nodes));
  assert.equal(await stopChild(first.sandbox, 'SIGTERM'), 0, first.sandbox.output());

  const second = await start(t, dataDir);
  assert.match(second.sandbox.output(), /^sandbox: fresh chains: emptied .*, which held the last run's data$/m);
  const two = await transfer(second.ready);
  assert.equal(two.state, 'COMPLETED', JSON.stringify(two.nodes));
  // On the new chain: the recipient holds the second run's 25 USDC and nothing of the first's.
  const chain = createPublicClient({ transport: http(second.ready.chain_local.rpc_url, { retryCount: 0 }) });
  const balance = await chain.readContract({ address: second.ready.token_USDC.address, abi: erc20Abi, functionName: 'balanceOf', args: [second.ready.recipient] });
  assert.equal(balance, 25_000_000n);
  assert.equal(await stopChild(second.sandbox, 'SIGTERM'), 0);
});
