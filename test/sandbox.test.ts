import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { createPublicClient, erc20Abi, http, type Address } from 'viem';
import { scratchDatabase } from './helpers/db.ts';
import { api, childEnv, repoRoot, spawnScript, stopChild } from './helpers/ferry-process.ts';
import { waitFor } from './helpers/wait.ts';

/**
 * `npm run sandbox` end to end, as an operator would use it: it starts (anvil, the test
 * stablecoin, the exchange emulator, Ferry), the two commands it prints create and approve a
 * movement, the movement completes with the USDC on chain, the printed cex_to_chain command
 * withdraws from the exchange and sweeps to the treasury, and SIGTERM stops everything cleanly.
 */

const run = promisify(execFile);

interface Ready {
  url: string;
  commands: string[];
  tokens: { admin: string };
  recipient: Address;
  chain_local: { rpc_url: string };
  token_USDC: { address: Address };
  cctp_commands: string[];
  chain_remote: { rpc_url: string };
  cctp: { destination: { token: Address } };
  cex_to_chain_command: string;
  hyperliquid_commands: string[];
  usdt0_commands: string[];
  usdt0: { destination: { token: Address } };
  hyperliquid: { info_url: string; bridge: Address };
  hot_wallet: Address;
  exchange: { url: string; hot_wallet: Address };
  receiving_wallet: Address;
  treasury: Address;
}

test('the sandbox starts, its printed commands move 25 USDC on chain, bridge 10 USDC with CCTP, send 15 USDT0 with LayerZero OFT, top up Hyperliquid with 20 USDC and run cex_to_chain (withdraw, sweep to the treasury) to COMPLETED, and it stops cleanly', async (t) => {
  const db = await scratchDatabase(t);
  const sandbox = spawnScript('scripts/sandbox.ts', { DATABASE_URL: db.url, PORT: '0', FERRY_DATA_DIR: mkdtempSync(join(tmpdir(), 'ferry-sandbox-')) });
  t.after(() => stopChild(sandbox, 'SIGKILL'));
  const ready = (await waitFor('the sandbox to be ready', async () => {
    if (sandbox.child.exitCode !== null) throw new Error(`the sandbox exited:\n${sandbox.output()}`);
    return sandbox.lines.find((l) => l.sandbox === 'ready');
  }, 120_000)) as unknown as Ready;
  assert.equal(ready.commands.length, 2);
  assert.match(sandbox.output(), /movements create/);

  const shell = (command: string) => run('sh', ['-c', command], { cwd: repoRoot, env: childEnv({}) });
  const created = await shell(ready.commands[0]);
  const id = /Created movement ([0-9a-f-]{36})/.exec(created.stdout)?.[1];
  assert.ok(id, created.stdout + created.stderr);
  // Not on a terminal: the approver confirms the plan printed with --yes.
  const approved = await shell(`${ready.commands[1].replace('<movement id>', id)} --yes`);
  assert.match(approved.stdout, /Approved plan/);

  /** The movement once it is COMPLETED, FAILED or MANUAL_INTERVENTION, as the API shows it. */
  const finished = (what: string, movementId: string) =>
    waitFor(
      what,
      async () => {
        const r = await api(ready.url, ready.tokens.admin, 'GET', `/v3/movements/${movementId}`);
        return ['COMPLETED', 'FAILED', 'MANUAL_INTERVENTION'].includes(r.body?.movement?.state) ? r.body : null;
      },
      120_000,
    );
  const done = await finished('the movement to finish', id);
  assert.equal(done.movement.state, 'COMPLETED', JSON.stringify(done.nodes));
  assert.deepEqual(done.nodes.map((n: { node_key: string; state?: string; node_state?: string }) => n.node_key).sort(), ['finality', 'transfer']);

  const chain = createPublicClient({ transport: http(ready.chain_local.rpc_url, { retryCount: 0 }) });
  const balance = await chain.readContract({ address: ready.token_USDC.address, abi: erc20Abi, functionName: 'balanceOf', args: [ready.recipient] });
  assert.equal(balance, 25_000_000n, '25 USDC arrived');

  // The CCTP bridge between the sandbox's two chains, through its own printed commands.
  assert.equal(ready.cctp_commands.length, 2);
  const bridged = await shell(ready.cctp_commands[0]);
  const bridgeId = /Created movement ([0-9a-f-]{36})/.exec(bridged.stdout)?.[1];
  assert.ok(bridgeId, bridged.stdout + bridged.stderr);
  await shell(`${ready.cctp_commands[1].replace('<movement id>', bridgeId)} --yes`);
  const bridgedDone = await finished('the cctp_bridge movement to finish', bridgeId);
  assert.equal(bridgedDone.movement.state, 'COMPLETED', JSON.stringify(bridgedDone.nodes));
  const remote = createPublicClient({ transport: http(ready.chain_remote.rpc_url, { retryCount: 0 }) });
  const minted = await remote.readContract({ address: ready.cctp.destination.token, abi: erc20Abi, functionName: 'balanceOf', args: [ready.recipient] });
  assert.equal(minted, 10_000_000n, '10 USDC minted on the remote chain');
  // The USDT0 send: an OFT send on the local chain, the credit found by its GUID on the remote chain.
  assert.equal(ready.usdt0_commands.length, 2);
  const sent = await shell(ready.usdt0_commands[0]);
  const sendId = /Created movement ([0-9a-f-]{36})/.exec(sent.stdout)?.[1];
  assert.ok(sendId, sent.stdout + sent.stderr);
  await shell(`${ready.usdt0_commands[1].replace('<movement id>', sendId)} --yes`);
  const sentDone = await finished('the usdt0_send movement to finish', sendId);
  assert.equal(sentDone.movement.state, 'COMPLETED', JSON.stringify(sentDone.nodes));
  const credited = await remote.readContract({ address: ready.usdt0.destination.token, abi: erc20Abi, functionName: 'balanceOf', args: [ready.recipient] });
  assert.equal(credited, 15_000_000n, '15 USDT0 credited on the remote chain');
  // The Hyperliquid top-up: a deposit to the bridge address, credited by the info API emulator.
  assert.equal(ready.hyperliquid_commands.length, 2);
  const topped = await shell(ready.hyperliquid_commands[0]);
  const topupId = /Created movement ([0-9a-f-]{36})/.exec(topped.stdout)?.[1];
  assert.ok(topupId, topped.stdout + topped.stderr);
  await shell(`${ready.hyperliquid_commands[1].replace('<movement id>', topupId)} --yes`);
  const toppedDone = await finished('the hyperliquid_topup movement to finish', topupId);
  assert.equal(toppedDone.movement.state, 'COMPLETED', JSON.stringify(toppedDone.nodes));
  const atBridge = await chain.readContract({ address: ready.token_USDC.address, abi: erc20Abi, functionName: 'balanceOf', args: [ready.hyperliquid.bridge] });
  assert.equal(atBridge, 20_000_000n, '20 USDC sent to the bridge');
  const state = (await (await fetch(ready.hyperliquid.info_url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ type: 'clearinghouseState', user: ready.hot_wallet }) })).json()) as { withdrawable: string };
  assert.equal(state.withdrawable, '20.0', 'credited to the hot wallet on Hyperliquid');
  // The exchange emulator runs too, and the printed cex_to_chain command (create, approve, watch)
  // withdraws 40 USDC to the receiving wallet and sweeps them to the treasury.
  const usdcOf = (owner: Address) => chain.readContract({ address: ready.token_USDC.address, abi: erc20Abi, functionName: 'balanceOf', args: [owner] });
  const exchangeHotBefore = await usdcOf(ready.exchange.hot_wallet);
  assert.equal(exchangeHotBefore, 1_000_000n * 10n ** 6n, 'the exchange hot wallet is funded on the sandbox chain');
  const watched = await run('sh', ['-c', ready.cex_to_chain_command], { cwd: repoRoot, env: childEnv({}), timeout: 180_000 });
  assert.match(watched.stdout, /ended COMPLETED/, watched.stdout + watched.stderr);
  assert.equal(await usdcOf(ready.treasury), 40_000_000n, 'the treasury received the swept 40 USDC');
  assert.equal(await usdcOf(ready.receiving_wallet), 0n, 'the receiving wallet was swept');
  assert.equal(exchangeHotBefore - (await usdcOf(ready.exchange.hot_wallet)), 40_000_000n, 'the exchange paid 40 USDC on chain');

  assert.equal(await stopChild(sandbox, 'SIGTERM'), 0, 'the sandbox stops cleanly');
  await assert.rejects(chain.getBlockNumber(), 'the chain is stopped');
  await assert.rejects(fetch(`${ready.url}/healthz`), 'Ferry is stopped');
  await assert.rejects(fetch(`${ready.exchange.url}/api/v3/time`), 'the exchange emulator is stopped');
});
