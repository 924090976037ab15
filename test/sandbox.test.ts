import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { createPublicClient, erc20Abi, http, parseAbiItem, type Address, type Hex } from 'viem';
import { scratchDatabase } from './helpers/db.ts';
import { api, childEnv, repoRoot, spawnScript, stopChild } from './helpers/ferry-process.ts';
import { waitFor } from './helpers/wait.ts';

/**
 * `npm run sandbox` end to end, as an operator would use it: it starts (anvil, the test
 * stablecoin, the exchange emulator, Ferry), the two commands it prints create and approve a
 * movement, the movement completes with the USDC on chain, the printed cex_to_chain command
 * withdraws from the exchange and sweeps to the treasury, and SIGTERM stops everything cleanly.
 * It also installs the treasury policy: an address book entry, a rule set and one standing order
 * (the hourly sweep of the hot wallet's excess to the cold address), live and shown by the API.
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
  gateway_commands: string[];
  gateway: { destination: { token: Address } };
  ccip_commands: string[];
  ccip_link_commands: string[];
  ccip: { source: { token: Address; pool: Address; link: Address }; destination: { token: Address; off_ramp: Address } };
  hyperliquid: { info_url: string; bridge: Address };
  hot_wallet: Address;
  exchange: { url: string; hot_wallet: Address };
  receiving_wallet: Address;
  treasury: Address;
  gate_commands: string[];
  callback_receiver: { name: string; received_url: string; log: string };
  cex_transfers_command: string;
  foreign_deposit: { venue: string; amount: string; tx_id: string };
  standing_order_id: string;
  cold: Address;
}

test('the sandbox starts, its printed commands move 25 USDC on chain, pass a manual gate (node callbacks to its receiver), list a deposit no movement made, bridge 10 USDC with CCTP, send 15 USDT0 with LayerZero OFT, send 12.5 CCIP-BnM with CCIP (and 4 more paying the fee in LINK), top up Hyperliquid with 20 USDC, move 30 USDC with Circle Gateway and run cex_to_chain (withdraw, sweep to the treasury) to COMPLETED, and it stops cleanly', async (t) => {
  const db = await scratchDatabase(t);
  const sandbox = spawnScript('scripts/sandbox.ts', { DATABASE_URL: db.url, PORT: '0', FERRY_DATA_DIR: mkdtempSync(join(tmpdir(), 'ferry-sandbox-')) });
  t.after(() => stopChild(sandbox, 'SIGKILL'));
  const ready = (await waitFor('the sandbox to be ready', async () => {
    if (sandbox.child.exitCode !== null) throw new Error(`the sandbox exited:\n${sandbox.output()}`);
    return sandbox.lines.find((l) => l.sandbox === 'ready');
  }, 120_000)) as unknown as Ready;
  assert.equal(ready.commands.length, 2);
  assert.match(sandbox.output(), /movements create/);
  // Never silent while Ferry starts: its progress lines are the sandbox's too.
  assert.match(sandbox.output(), /^sandbox: ferry: database ready; starting the runtime/m);

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
  assert.equal(done.movement.policy.rule_id, 'sandbox', 'checked against the sandbox rule set');

  // The policy: the book entry, the rule set, and the hourly sweep of the hot wallet, ACTIVE.
  const order = await api(ready.url, ready.tokens.admin, 'GET', `/v3/standing-orders/${ready.standing_order_id}`);
  assert.equal(order.status, 200, order.text);
  assert.equal(order.body.standing_order.state, 'ACTIVE');
  assert.equal(order.body.standing_order.name, 'hot-sweep');
  assert.deepEqual(order.body.standing_order.destinations, ['cold']);
  assert.deepEqual(order.body.standing_order.trigger.schedule, { cron: '0 * * * *' });
  assert.equal(order.body.standing_order.trigger.balance.wallet, ready.hot_wallet);
  const book = await api(ready.url, ready.tokens.admin, 'GET', '/v3/policy/address-book');
  assert.equal(book.status, 200, book.text);
  assert.match(JSON.stringify(book.body), new RegExp(ready.cold, 'i'));
  const sweep = await api(ready.url, ready.tokens.admin, 'POST', '/v3/policy/test', { template_key: 'usdc.transfer', intent: { asset: 'USDC', amount: '100000', destination: ready.cold } });
  assert.equal(sweep.status, 200, sweep.text);
  assert.equal(sweep.body.live.rule_id, 'sweeps-to-cold');
  assert.equal(sweep.body.live.outcome, 'allowed');
  assert.deepEqual(done.nodes.map((n: { node_key: string; state?: string; node_state?: string }) => n.node_key).sort(), ['finality', 'transfer']);

  const chain = createPublicClient({ transport: http(ready.chain_local.rpc_url, { retryCount: 0 }) });
  const balance = await chain.readContract({ address: ready.token_USDC.address, abi: erc20Abi, functionName: 'balanceOf', args: [ready.recipient] });
  assert.equal(balance, 25_000_000n, '25 USDC arrived');

  // The transfer behind a manual gate, reporting every node's change to the sandbox's receiver.
  assert.equal(ready.gate_commands.length, 3);
  const gatedMade = await shell(ready.gate_commands[0]);
  const gatedId = /Created movement ([0-9a-f-]{36})/.exec(gatedMade.stdout)?.[1];
  assert.ok(gatedId, gatedMade.stdout + gatedMade.stderr);
  await shell(`${ready.gate_commands[1].replace('<movement id>', gatedId)} --yes`);
  await waitFor('the gate to be READY', async () => {
    const r = await api(ready.url, ready.tokens.admin, 'GET', `/v3/movements/${gatedId}`);
    return r.body?.nodes?.some((n: { node_key: string; state: string }) => n.node_key === 'review' && n.state === 'READY');
  }, 60_000);
  const held = await api(ready.url, ready.tokens.admin, 'GET', `/v3/movements/${gatedId}`);
  assert.equal(held.body.nodes.find((n: { node_key: string }) => n.node_key === 'transfer').state, 'BLOCKED', 'nothing is sent before the gate');
  const confirmed = await shell(ready.gate_commands[2].replace('<movement id>', gatedId));
  assert.match(confirmed.stdout, /Confirmed gate review \(COMPLETED\)/, confirmed.stdout + confirmed.stderr);
  const gatedDone = await finished('the gated movement to finish', gatedId);
  assert.equal(gatedDone.movement.state, 'COMPLETED', JSON.stringify(gatedDone.nodes));
  const callbacks = (await waitFor('the completion callback', async () => {
    const got = (await (await fetch(ready.callback_receiver.received_url)).json()) as Array<{ event_type: string; movement_id: string; node_key: string | null; verified: boolean }>;
    const mine = got.filter((c) => c.movement_id === gatedId);
    return mine.some((c) => c.event_type === 'request_completed') ? mine : null;
  }, 60_000)) as Array<{ event_type: string; node_key: string | null; verified: boolean }>;
  assert.ok(callbacks.every((c) => c.verified), 'every callback verified with the destination secret');
  const nodeEvents = callbacks.filter((c) => c.event_type.startsWith('node_'));
  for (const key of ['review', 'transfer', 'finality']) assert.ok(nodeEvents.some((c) => c.node_key === key && c.event_type === 'node_completed'), `node_completed for ${key}`);
  assert.ok(callbacks.some((c) => c.event_type === 'manual_gate_confirmed'));
  const positionOf = (e: string, k: string) => callbacks.findIndex((c) => c.event_type === e && c.node_key === k);
  assert.ok(positionOf('node_completed', 'review') < positionOf('node_submitted', 'transfer'), 'in creation order: the gate before the transfer');

  // The deposit no movement made, recorded by cex_transfer_ingest and listed by the printed command.
  const listed = await waitFor('the foreign deposit to be recorded', async () => {
    const r = await shell(ready.cex_transfers_command);
    return r.stdout.includes(ready.foreign_deposit.tx_id) ? r.stdout : null;
  }, 90_000);
  assert.match(listed, new RegExp(`^sandbox_exchange\\s+deposit\\s+USDC\\s+75\\s+ETH\\s+${ready.foreign_deposit.tx_id}`, 'm'));

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
  // The CCIP send: ccipSend on the local chain's Router, executed on the remote chain's OffRamp (the emulated DON), found by its messageId.
  assert.equal(ready.ccip_commands.length, 2);
  const ccipMade = await shell(ready.ccip_commands[0]);
  const ccipId = /Created movement ([0-9a-f-]{36})/.exec(ccipMade.stdout)?.[1];
  assert.ok(ccipId, ccipMade.stdout + ccipMade.stderr);
  await shell(`${ready.ccip_commands[1].replace('<movement id>', ccipId)} --yes`);
  const ccipDone = await finished('the ccip_send movement to finish', ccipId);
  assert.equal(ccipDone.movement.state, 'COMPLETED', JSON.stringify(ccipDone.nodes));
  const messageId = ccipDone.nodes.find((n: { node_key: string }) => n.node_key === 'send').provider_refs.message_id as Hex;
  assert.match(messageId, /^0x[0-9a-f]{64}$/);
  const executions = await remote.getLogs({
    address: ready.ccip.destination.off_ramp,
    event: parseAbiItem('event ExecutionStateChanged(uint64 indexed sourceChainSelector, uint64 indexed sequenceNumber, bytes32 indexed messageId, bytes32 messageHash, uint8 state, bytes returnData, uint256 gasUsed)'),
    fromBlock: 0n,
    toBlock: 'latest',
  });
  assert.deepEqual(executions.map((e) => [e.args.messageId, e.args.state]), [[messageId, 2]], 'executed once, SUCCESS, on the remote chain');
  const delivered = await remote.readContract({ address: ready.ccip.destination.token, abi: erc20Abi, functionName: 'balanceOf', args: [ready.recipient] });
  assert.equal(delivered, 12_500_000_000_000_000_000n, '12.5 CCIP-BnM minted to the recipient on the remote chain');
  const locked = await chain.readContract({ address: ready.ccip.source.token, abi: erc20Abi, functionName: 'balanceOf', args: [ready.ccip.source.pool] });
  assert.equal(locked, 12_500_000_000_000_000_000n, 'locked in the source pool');
  // The same send paying its fee in LINK: the fee approval node approves the cap to the Router, the Router pulls the quoted LINK.
  assert.equal(ready.ccip_link_commands.length, 2);
  const linkMade = await shell(ready.ccip_link_commands[0]);
  const linkId = /Created movement ([0-9a-f-]{36})/.exec(linkMade.stdout)?.[1];
  assert.ok(linkId, linkMade.stdout + linkMade.stderr);
  await shell(`${ready.ccip_link_commands[1].replace('<movement id>', linkId)} --yes`);
  const linkDone = await finished('the ccip_send_link movement to finish', linkId);
  assert.equal(linkDone.movement.state, 'COMPLETED', JSON.stringify(linkDone.nodes));
  assert.deepEqual(linkDone.nodes.map((n: { node_key: string }) => n.node_key).sort(), ['delivery', 'fee_approval', 'send']);
  const linkSend = linkDone.nodes.find((n: { node_key: string }) => n.node_key === 'send');
  assert.equal(String(linkSend.provider_refs.fee_token).toLowerCase(), ready.ccip.source.link.toLowerCase(), 'the fee paid in LINK');
  const linkLeft = await chain.readContract({ address: ready.ccip.source.link, abi: erc20Abi, functionName: 'balanceOf', args: [ready.hot_wallet] });
  assert.ok(linkLeft < 100n * 10n ** 18n && linkLeft > 99n * 10n ** 18n, `the hot wallet paid a LINK fee under the 1 LINK cap (${linkLeft} juels left of 100 LINK)`);
  assert.equal(await remote.readContract({ address: ready.ccip.destination.token, abi: erc20Abi, functionName: 'balanceOf', args: [ready.recipient] }), 16_500_000_000_000_000_000n, '4 more CCIP-BnM on the remote chain');
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
  // The Gateway transfer: approve and deposit on the local chain, a signed burn intent attested by the API emulator, gatewayMint on the remote chain.
  assert.equal(ready.gateway_commands.length, 2);
  const mintedBefore = await remote.readContract({ address: ready.gateway.destination.token, abi: erc20Abi, functionName: 'balanceOf', args: [ready.recipient] });
  const moved = await shell(ready.gateway_commands[0]);
  const gatewayId = /Created movement ([0-9a-f-]{36})/.exec(moved.stdout)?.[1];
  assert.ok(gatewayId, moved.stdout + moved.stderr);
  await shell(`${ready.gateway_commands[1].replace('<movement id>', gatewayId)} --yes`);
  const movedDone = await finished('the gateway_transfer movement to finish', gatewayId);
  assert.equal(movedDone.movement.state, 'COMPLETED', JSON.stringify(movedDone.nodes));
  const mintedAfter = await remote.readContract({ address: ready.gateway.destination.token, abi: erc20Abi, functionName: 'balanceOf', args: [ready.recipient] });
  assert.equal(mintedAfter - mintedBefore, 30_000_000n, '30 USDC minted on the remote chain by the GatewayMinter');
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

  // verify_drift's start run read every lane's registry baselines on the sandbox's chains: the
  // configuration the sandbox wrote agrees with its contracts (no drift, nothing unverified).
  const drift = await waitFor('the first verify_drift run', async () => {
    const r = await api(ready.url, ready.tokens.admin, 'GET', '/v3/registry-drift?state=all');
    return r.body.last_checked_at ? r.body : null;
  }, 60_000);
  assert.deepEqual(drift.drifts, [], JSON.stringify(drift.drifts));
  assert.deepEqual(drift.unverified, []);

  assert.equal(await stopChild(sandbox, 'SIGTERM'), 0, 'the sandbox stops cleanly');
  await assert.rejects(chain.getBlockNumber(), 'the chain is stopped');
  await assert.rejects(fetch(`${ready.url}/healthz`), 'Ferry is stopped');
  await assert.rejects(fetch(`${ready.exchange.url}/api/v3/time`), 'the exchange emulator is stopped');
});
