import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { createPublicClient, http, parseEther, type Address, type Hex, type PublicClient } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { stringify as yaml } from 'yaml';
import { EVM_NATIVE_TRANSFER_KEY } from '../src/executors/evm/index.ts';
import { ANVIL_CHAIN_ID, startAnvil, TEST_FEE_CAP_WEI, type Anvil } from './helpers/anvil.ts';
import { scratchDatabase, type TestDb } from './helpers/db.ts';
import { collectJsonLines, spawnScript, stopChild, type ChildFerry } from './helpers/ferry-process.ts';
import { seedMovement, collectingDeps } from './helpers/fixtures.ts';
import { freePort } from './helpers/net.ts';
import { exited, spawnWorker } from './helpers/processes.ts';
import { startRpcProxy, type RpcProxy } from './helpers/rpc-proxy.ts';
import { nativeTransferPlan } from './helpers/evm.ts';
import { snapshot } from './helpers/runtime.ts';
import { waitFor } from './helpers/wait.ts';
import { hostKeys } from './helpers/host-requests.ts';
import { withTransaction } from '../src/persistence/db.ts';
import { deliverMovementEvent } from '../src/durable/transition.ts';

/**
 * Remote executor and signer hosts as separate processes: a Ferry worker whose configuration file
 * binds exec.evm.native_transfer to `ferry executor-host` and the signer `hot` to `ferry
 * signer-host` (the only process holding the key), moving ETH on a real anvil. A host that is down
 * defers the node (before submit) or leaves it UNKNOWN (the submit's answer was lost) until
 * recovery reaches the host again; the chain shows one transaction per movement, never two.
 */

const EXEC_TOKEN = 'executor-host-token-ABCDEFGHIJKLMNOPQRSTUV';
const SIGN_TOKEN = 'signer-host-token-abcdefghijklmnopqrstuvwx';
const HOT_KEY = generatePrivateKey();
const HOT = privateKeyToAccount(HOT_KEY).address;

let anvil: Anvil;
let chain: PublicClient;
let rpc: RpcProxy;
let db: TestDb;
let execPort: number;
let signPort: number;
let execHost: ChildFerry | undefined;
let signHost: ChildFerry | undefined;
let worker: ChildProcess;
const workerLines: Array<Record<string, unknown>> = [];
const hostOutput: string[] = [];
const dropDb: Array<() => Promise<void>> = [];
const dir = mkdtempSync(join(tmpdir(), 'ferry-remote-'));

function file(name: string, content: unknown): string {
  const path = join(dir, name);
  writeFileSync(path, yaml(content));
  return path;
}

async function startExecutorHost(): Promise<void> {
  // The executor host knows the chain (through a proxy the test can make swallow answers) and the
  // hot wallet's address, not its key: the signature comes from the signer host, through Ferry.
  const config = file('executor-host.yaml', {
    evm: { chains: [{ chain_id: ANVIL_CHAIN_ID, name: 'local', rpc_url: rpc.url, poll_seconds: 0.2, rpc_timeout_ms: 20_000, max_fee_per_gas_cap_wei: TEST_FEE_CAP_WEI }] },
    remote: { signers: [{ key: 'hot', url: `http://127.0.0.1:${signPort}`, address: HOT, chains: [ANVIL_CHAIN_ID] }] },
  });
  execHost = spawnScript('src/cli/index.ts', { DATABASE_URL: db.url, FERRY_CONFIG_FILE: config, FERRY_EXECUTOR_HOST_TOKEN: EXEC_TOKEN, FERRY_HOST_REQUEST_PUBLIC_KEYS: hostKeys.publicKey }, ['executor-host', '--executor', EVM_NATIVE_TRANSFER_KEY, '--port', String(execPort)]);
  await listening(execHost, 'executor host listening');
}

async function startSignerHost(): Promise<void> {
  const config = file('signer-host.yaml', {
    evm: {
      chains: [{ chain_id: ANVIL_CHAIN_ID, name: 'local', rpc_url: anvil.url, max_fee_per_gas_cap_wei: TEST_FEE_CAP_WEI }],
      signers: [{ key: 'hot', kind: 'local_key', private_key_env: 'HOT_KEY', chains: [ANVIL_CHAIN_ID], executors: [EVM_NATIVE_TRANSFER_KEY] }],
    },
  });
  signHost = spawnScript('src/cli/index.ts', { FERRY_CONFIG_FILE: config, HOT_KEY, FERRY_SIGNER_HOST_TOKEN: SIGN_TOKEN, FERRY_HOST_REQUEST_PUBLIC_KEYS: hostKeys.publicKey }, ['signer-host', '--signer', 'hot', '--port', String(signPort)]);
  await listening(signHost, 'signer host listening');
}

async function listening(host: ChildFerry, msg: string): Promise<void> {
  await waitFor(msg, async () => {
    if (host.child.exitCode !== null) throw new Error(`the host exited:\n${host.output()}`);
    return host.lines.some((l) => l.msg === msg);
  });
}

async function stopHost(host: ChildFerry | undefined, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (!host) return;
  await stopChild(host, signal);
  hostOutput.push(host.output());
}

before(async () => {
  anvil = await startAnvil();
  chain = createPublicClient({ transport: http(anvil.url, { retryCount: 0 }), cacheTime: 0 });
  await anvil.rpc('anvil_setBalance', [HOT, '0x56BC75E2D63100000']); // 100 ETH
  rpc = await startRpcProxy(anvil.url, 'pass');
  // Dropped last, once every process using it has stopped.
  db = await scratchDatabase({ after: (fn) => void dropDb.push(fn) });
  [execPort, signPort] = [await freePort(), await freePort()];
  await startSignerHost();
  await startExecutorHost();
  // The worker holds no key and no chain: only where the hosts are, their tokens and the key it signs its requests to them with.
  const config = file('ferry.yaml', {
    // Ferry reaches no chain itself here: the chain's fee cap still binds what it has signed.
    evm: { fee_caps: [{ chain_id: ANVIL_CHAIN_ID, max_fee_per_gas_cap_wei: TEST_FEE_CAP_WEI }] },
    remote: {
      executors: [{ key: EVM_NATIVE_TRANSFER_KEY, url: `http://127.0.0.1:${execPort}`, token_env: 'EXEC_TOKEN', timeout_ms: 3000 }],
      signers: [{ key: 'hot', url: `http://127.0.0.1:${signPort}`, token_env: 'SIGN_TOKEN', timeout_ms: 3000 }],
    },
  });
  worker = spawnWorker(
    db.url,
    {
      FERRY_CONFIG_FILE: config,
      EXEC_TOKEN,
      SIGN_TOKEN,
      FERRY_HOST_REQUEST_KEY: hostKeys.privateKey,
      FERRY_LOG_LEVEL: 'debug',
      FERRY_NODE_DISPATCH_INTERVAL_SECONDS: '0.2',
      FERRY_NODE_RECOVERY_INTERVAL_SECONDS: '0.5',
    },
    { output: 'pipe' },
  );
  collectJsonLines(worker.stdout!, workerLines);
});

after(async () => {
  worker?.kill('SIGTERM');
  if (worker) await exited(worker);
  await stopHost(execHost);
  await stopHost(signHost);
  await rpc?.stop();
  await anvil?.stop();
  for (const fn of dropDb) await fn();
});

const finished = (state: string) => ['COMPLETED', 'FAILED', 'MANUAL_INTERVENTION'].includes(state);
let n = 0;

/** A movement paying `eth` (the lane's amounts are in wei) to a fresh address from the hot wallet, approved. */
async function transfer(eth: string): Promise<{ id: string; nodeId: string; to: Address }> {
  const to = privateKeyToAccount(generatePrivateKey()).address;
  const template = nativeTransferPlan(`remote-${n++}`, { confirmations: 1 }, { signer_key: 'hot' });
  const deps = collectingDeps();
  const { movement, nodes } = await seedMovement(db.pool, template, { intent: { asset: 'ETH', amount: parseEther(eth).toString(), destination: { address: to } } });
  await withTransaction(db.pool, (c) => deliverMovementEvent(c, movement.id, { type: 'APPROVE', by: 'approver', at: new Date().toISOString() }, { actor: 'approver', deps }));
  return { id: movement.id, nodeId: nodes[0].id, to };
}

function done(id: string) {
  return waitFor('the movement to finish', async () => {
    const s = await snapshot(db.pool, id);
    return finished(s.movement.request_state) ? s : null;
  });
}

const sentBy = () => chain.getTransactionCount({ address: HOT, blockTag: 'pending' });

async function transitions(nodeId: string): Promise<string[]> {
  const { rows } = await db.pool.query(`SELECT from_state, to_state FROM transitions WHERE entity_id = $1 AND entity_type = 'node' ORDER BY id`, [nodeId]);
  return rows.map((r) => `${r.from_state}->${r.to_state}`);
}

test('a native transfer runs through the executor host and the signer host, each its own process', async () => {
  const nonce = await sentBy();
  const m = await transfer('0.5');
  const s = await done(m.id);
  assert.equal(s.movement.request_state, 'COMPLETED', JSON.stringify(s.byKey.pay));
  assert.equal(await chain.getBalance({ address: m.to }), parseEther('0.5'), 'the ETH arrived');
  assert.equal((await sentBy()) - nonce, 1, 'one transaction from the hot wallet');
  const tx = await chain.getTransaction({ hash: s.byKey.pay.provider_refs.tx_hash as Hex });
  assert.equal(tx.from, HOT.toLowerCase());
  // The hosts did the work: the executor host prepared and submitted, the signer host signed.
  const calls = (host: ChildFerry, method: string) => host.lines.filter((l) => l.msg === 'host call' && l.method === method && l.request_node_id === m.nodeId);
  assert.equal(calls(signHost!, 'sign').length, 1);
  assert.equal(calls(execHost!, 'submit').length, 1);
  assert.ok(calls(execHost!, 'prepare').length >= 1);
});

test('the hosts refuse a request without the right bearer token', async () => {
  for (const [port, path] of [[execPort, '/health'], [signPort, '/health']] as const) {
    const none = await fetch(`http://127.0.0.1:${port}${path}`);
    assert.equal(none.status, 401);
    const wrong = await fetch(`http://127.0.0.1:${port}${path}`, { headers: { authorization: `Bearer ${EXEC_TOKEN.slice(0, -1)}x` } });
    assert.equal(wrong.status, 401);
  }
  const ok = await fetch(`http://127.0.0.1:${signPort}/health`, { headers: { authorization: `Bearer ${SIGN_TOKEN}` } });
  assert.equal(ok.status, 200);
  assert.equal(((await ok.json()) as { address: string }).address.toLowerCase(), HOT.toLowerCase());
  const sign = await fetch(`http://127.0.0.1:${signPort}/sign`, { method: 'POST', headers: { authorization: `Bearer ${EXEC_TOKEN}`, 'content-type': 'application/json' }, body: '{}' });
  assert.equal(sign.status, 401, "the executor host's token is not the signer host's");
  // The right token without Ferry's request signature acts on nothing.
  const preflight = await fetch(`http://127.0.0.1:${execPort}/preflight`, { method: 'POST', headers: { authorization: `Bearer ${EXEC_TOKEN}`, 'content-type': 'application/json' }, body: '{"x":1}' });
  assert.equal(preflight.status, 401);
  assert.equal(((await preflight.json()) as { code: string }).code, 'HOST_REQUEST_UNSIGNED');
});

/**
 * With one host down, a transfer's node is deferred with `code` and nothing is sent; with the host
 * back (and the deferral's wait over) the movement completes with one transaction.
 */
async function deferredWhileDown(host: 'executor' | 'signer', code: string, amount: string): Promise<void> {
  await stopHost(host === 'executor' ? execHost : signHost);
  const nonce = await sentBy();
  const m = await transfer(amount);
  const deferred = await waitFor('the node to be deferred', async () => {
    const node = (await snapshot(db.pool, m.id)).byKey.pay;
    return node.node_state === 'READY' && node.error_code ? node : null;
  });
  assert.equal(deferred.error_code, code);
  assert.equal(await sentBy(), nonce);

  await (host === 'executor' ? startExecutorHost() : startSignerHost());
  await db.pool.query(`UPDATE request_nodes SET dispatch_after = now() WHERE id = $1`, [m.nodeId]); // the deferral's wait is over
  const s = await done(m.id);
  assert.equal(s.movement.request_state, 'COMPLETED');
  assert.equal(await chain.getBalance({ address: m.to }), parseEther(amount));
  assert.equal((await sentBy()) - nonce, 1, 'one transaction');
}

test('the executor host down: the node is deferred, nothing is sent; once it is back the movement completes with one transaction', () =>
  deferredWhileDown('executor', 'REMOTE_EXECUTOR_UNREACHABLE', '0.25'));

test('the signer host down: the node is deferred at signing, nothing is sent; once it is back the movement completes with one transaction', () =>
  deferredWhileDown('signer', 'REMOTE_SIGNER_UNREACHABLE', '0.125'));

test("the executor host dies inside submit, after its broadcast: UNKNOWN, recovered once the host is back; one transaction, no second submit", async () => {
  const nonce = await sentBy();
  // The executor host's broadcast reaches the chain and its answer is held: the host is inside
  // submit when it is killed, so Ferry's call to it is cut after having been delivered.
  rpc.mode = 'hold_after';
  const m = await transfer('0.0625');
  await rpc.held;
  await stopHost(execHost, 'SIGKILL');
  rpc.mode = 'pass';
  assert.equal((await sentBy()) - nonce, 1, 'the transaction is on chain');
  const unknown = await waitFor('the node to be UNKNOWN', async () => {
    const node = (await snapshot(db.pool, m.id)).byKey.pay;
    return node.node_state === 'UNKNOWN' ? node : null;
  });
  // What the submit reported, from its transition: recovery (every 0.5 s here) may already have
  // tried the host that is down and stored its own error code on the node.
  const { rows: toUnknown } = await db.pool.query<{ payload: string }>(
    `SELECT event_payload::text AS payload FROM transitions WHERE entity_id = $1 AND from_state = 'SUBMITTING' AND to_state = 'UNKNOWN'`,
    [m.nodeId],
  );
  assert.equal(toUnknown.length, 1);
  assert.match(toUnknown[0].payload, /REMOTE_SUBMIT_OUTCOME_UNKNOWN/);
  assert.equal(unknown.attempt_no, 1);

  // Recovery meets a host that is down: the node stays UNKNOWN.
  await waitFor('recovery to try the host that is down', async () =>
    workerLines.some((l) => l.msg === 'recovered' && l.node_id === m.nodeId && l.error_code === 'REMOTE_EXECUTOR_UNREACHABLE'),
  ).catch((err) => {
    throw new Error(`${err.message}\n${workerLines.filter((l) => l.node_id === m.nodeId).map((l) => JSON.stringify(l)).join('\n')}`);
  });
  assert.equal((await snapshot(db.pool, m.id)).byKey.pay.node_state, 'UNKNOWN');

  await startExecutorHost();
  const s = await done(m.id);
  assert.equal(s.movement.request_state, 'COMPLETED', JSON.stringify(s.byKey.pay));
  assert.equal(s.byKey.pay.attempt_no, 1, 'no new attempt');
  assert.equal(await chain.getBalance({ address: m.to }), parseEther('0.0625'));
  assert.equal((await sentBy()) - nonce, 1, 'exactly one transaction, never a second submit');
  const path = await transitions(m.nodeId);
  assert.ok(path.includes('SUBMITTING->UNKNOWN'), path.join(', '));
  assert.equal(path.filter((p) => p.endsWith('->SUBMITTING')).length, 1, `one submit: ${path.join(', ')}`);
  const submits = execHost!.lines.filter((l) => l.msg === 'host call' && l.method === 'submit' && l.request_node_id === m.nodeId);
  assert.equal(submits.length, 0, 'the restarted host was never asked to submit');
});

test('no token or key in anything the worker and the hosts logged', async () => {
  const logs = [JSON.stringify(workerLines), ...hostOutput, execHost?.output() ?? '', signHost?.output() ?? ''].join('\n');
  assert.ok(logs.includes('host call'));
  for (const [name, secret] of Object.entries({ EXEC_TOKEN, SIGN_TOKEN, HOT_KEY, HOT_KEY_BARE: HOT_KEY.slice(2), HOST_REQUEST_KEY: hostKeys.privateKey.slice(4) })) assert.ok(!logs.includes(secret), `${name} was logged`);
});
