import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { createPublicClient, createWalletClient, http, parseEther, type Hex, type PublicClient } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import type { WorkerDeps } from '../src/actors/execution.ts';
import type { CexAccountConfig } from '../src/config-file.ts';
import { CEX_DEPOSIT_OBSERVE_KEY, CEX_WITHDRAWAL_ACTION_KEY, CEX_WITHDRAWAL_OBSERVE_KEY, createCexLane } from '../src/executors/cex/index.ts';
import type { Pool } from '../src/persistence/db.ts';
import { ANVIL_DEV_KEY, freshAddress, startAnvil, type Anvil } from './helpers/anvil.ts';
import { scratchDatabase } from './helpers/db.ts';
import { exited, spawnWorker } from './helpers/processes.ts';
import { waitFor } from './helpers/wait.ts';
import { approvedMovement, drain, plan, runtimeDeps, snapshot } from './helpers/runtime.ts';
import pino from 'pino';
import { stringify as yaml } from 'yaml';
import { startBinanceEmulator, type BinanceEmulator } from './emulators/binance.ts';

/**
 * The CEX lane through the real dispatcher, observer and recovery, against the Binance emulator on
 * loopback (real HTTP, HMAC-signed requests through ccxt) paying withdrawals on a real anvil chain.
 */

const APPLY = '/sapi/v1/capital/withdraw/apply';
// anvil's second default account: exchange B's hot wallet.
const SECOND_DEV_KEY = '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d' as const;
const CREDS = {
  EXA_KEY: 'exa-api-key-0123456789abcdefghijklmnopqrstuvwxyzABCDEF',
  EXA_SECRET: 'exa-api-secret-ZYXWVUTSRQPONMLKJIHGFEDCBA9876543210',
  EXB_KEY: 'exb-api-key-0123456789abcdefghijklmnopqrstuvwxyzABCDEF',
  EXB_SECRET: 'exb-api-secret-ZYXWVUTSRQPONMLKJIHGFEDCBA9876543210',
};

let anvil: Anvil;
let chain: PublicClient;
let exA: BinanceEmulator;
let exB: BinanceEmulator;
const depositAddressB = freshAddress();

before(async () => {
  anvil = await startAnvil();
  chain = createPublicClient({ transport: http(anvil.url, { retryCount: 0 }), cacheTime: 0 });
  exA = await startBinanceEmulator({
    apiKey: CREDS.EXA_KEY,
    apiSecret: CREDS.EXA_SECRET,
    rpcUrl: anvil.url,
    depositAddress: freshAddress(),
    hotWalletKey: ANVIL_DEV_KEY,
    balances: { ETH: '100' },
  });
  exB = await startBinanceEmulator({
    apiKey: CREDS.EXB_KEY,
    apiSecret: CREDS.EXB_SECRET,
    rpcUrl: anvil.url,
    depositAddress: depositAddressB,
    hotWalletKey: SECOND_DEV_KEY,
    depositConfirmations: 3,
  });
});
after(async () => {
  await exA?.stop();
  await exB?.stop();
  await anvil?.stop();
});

function accounts(over: Partial<CexAccountConfig> = {}): CexAccountConfig[] {
  return [
    { key: 'exa', exchange: 'binance', base_url: exA.url, api_key_env: 'EXA_KEY', api_secret_env: 'EXA_SECRET', timeout_ms: 5000, networks: { ethereum: 'ETH' }, ...over },
    { key: 'exb', exchange: 'binance', base_url: exB.url, api_key_env: 'EXB_KEY', api_secret_env: 'EXB_SECRET', timeout_ms: 5000 },
  ];
}

/** Every line the in-process workers log, at trace level, for the secrets check at the end. */
const logLines: string[] = [];
const testLog = pino({ level: 'trace' }, { write: (line: string) => void logLines.push(line) });

/** Runtime deps whose registry holds the CEX lane (a fresh ccxt client per call: a fresh process). */
function cexDeps(pool: Pool, opts: { notFoundAfterSeconds?: number; account?: Partial<CexAccountConfig> } = {}) {
  const base = runtimeDeps(pool, { FERRY_SUBMITTING_GRACE_SECONDS_BY_LANE: 'cex=0.001' });
  const urls: string[] = [];
  const lane = createCexLane(accounts(opts.account), base.executors, {
    env: CREDS,
    hooks: { onRequest: (u) => urls.push(u) },
    pollSeconds: 0,
    notFoundAfterSeconds: opts.notFoundAfterSeconds ?? 60,
  });
  return { deps: { ...base, log: testLog } as WorkerDeps, urls, lane: lane! };
}

const withdrawNode = (config: Record<string, unknown> = {}) => ({
  node_key: 'withdraw',
  node_kind: 'action',
  action_type: 'cex_withdrawal',
  executor_binding: { executor_key: CEX_WITHDRAWAL_ACTION_KEY, account: 'exa' },
  config: { coin: 'ETH', network: 'ethereum', ...config },
});
const observeNode = {
  node_key: 'withdrawal_observe',
  node_kind: 'observe',
  action_type: 'cex_withdrawal_status',
  executor_binding: { executor_key: CEX_WITHDRAWAL_OBSERVE_KEY, account: 'exa' },
  config: {},
};
const depositNode = (config: Record<string, unknown>) => ({
  node_key: 'deposit_observe',
  node_kind: 'observe',
  action_type: 'cex_deposit_status',
  executor_binding: { executor_key: CEX_DEPOSIT_OBSERVE_KEY, account: 'exb' },
  config: { coin: 'ETH', ...config },
});

/** withdraw -> withdrawal observe (-> deposit observe on exchange B, matched by the payout's hash). */
function cexToChain(key: string, opts: { deposit?: boolean; withdraw?: Record<string, unknown> } = {}) {
  const nodes: Record<string, unknown>[] = [withdrawNode(opts.withdraw), observeNode];
  const edges = [{ from: 'withdraw', to: 'withdrawal_observe' }];
  if (opts.deposit) {
    nodes.push(depositNode({ tx_hash: '$ref:withdrawal_observe.tx_hash' }));
    edges.push({ from: 'withdrawal_observe', to: 'deposit_observe' });
  }
  return plan(key, nodes, edges);
}

type Snap = Awaited<ReturnType<typeof snapshot>>;

/** Drives the workers until `check` holds (bounded). */
function until(deps: WorkerDeps, id: string, what: string, check: (s: Snap) => boolean, timeoutMs = 30_000): Promise<Snap> {
  return waitFor(
    what,
    async () => {
      await drain(deps);
      const s = await snapshot(deps.pool, id);
      return check(s) ? s : null;
    },
    timeoutMs,
  );
}

const finished = (s: Snap) => ['COMPLETED', 'FAILED', 'MANUAL_INTERVENTION'].includes(s.movement.request_state);

async function assertNoSecrets(pool: Pool) {
  const { rows } = await pool.query(`SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`);
  for (const { table_name } of rows) {
    const dump = await pool.query(`SELECT coalesce(string_agg(t::text, ' '), '') AS text FROM "${table_name}" t`);
    for (const [name, value] of Object.entries(CREDS)) {
      assert.ok(!dump.rows[0].text.includes(value), `${name} appears in table ${table_name}`);
    }
  }
}

function assertLoopbackOnly(urls: string[]) {
  assert.ok(urls.length > 0);
  for (const u of urls) assert.ok([exA.url, exB.url].includes(new URL(u).origin), `ccxt fetched ${u}`);
}

test('cex_to_chain: withdraw on A, follow it to the chain, A pays on anvil, B credits the deposit after 3 blocks', async (t) => {
  const db = await scratchDatabase(t);
  const { deps, urls } = cexDeps(db.pool);
  const requestsBefore = exA.requests.length + exB.requests.length;
  const balanceBefore = await chain.getBalance({ address: depositAddressB });
  const id = await approvedMovement(deps, cexToChain('cex-to-chain', { deposit: true }), { asset: 'ETH', amount: '0.5', destination: { address: depositAddressB } });

  let s = await until(deps, id, 'the deposit to be seen pending on B', (x) => x.byKey.deposit_observe?.provider_state === 'pending' || finished(x));
  assert.equal(s.byKey.withdraw.node_state, 'COMPLETED');
  assert.equal(s.byKey.withdrawal_observe.node_state, 'COMPLETED');
  const orderId = String(s.byKey.withdraw.provider_refs.withdraw_order_id);
  assert.equal(orderId, `${s.byKey.withdraw.id}:1`, 'the attempt\'s idempotency key is the withdrawOrderId');
  const txHash = s.byKey.withdrawal_observe.provider_refs.tx_hash as Hex;
  assert.match(txHash, /^0x[0-9a-f]{64}$/);
  assert.equal(s.byKey.deposit_observe.node_state, 'OBSERVING', 'not credited before 3 confirmations');

  await anvil.mine(2);
  s = await until(deps, id, 'the movement to finish', finished);
  assert.equal(s.movement.request_state, 'COMPLETED');
  assert.equal(s.byKey.deposit_observe.provider_refs.tx_hash, txHash);
  assert.equal(s.byKey.deposit_observe.provider_state, 'credited');

  const receipt = await chain.getTransactionReceipt({ hash: txHash });
  assert.equal(receipt.status, 'success');
  assert.equal(receipt.to, depositAddressB.toLowerCase());
  assert.equal((await chain.getBalance({ address: depositAddressB })) - balanceBefore, parseEther('0.5'), 'the funds arrived on chain');
  assert.equal(exA.withdrawalsByOrderId(orderId).length, 1);
  assert.equal(exA.applies.filter((a) => a.withdrawOrderId === orderId).length, 1, 'one withdraw/apply');
  assert.equal(exB.deposits.find((d) => d.txId === txHash)?.status, 1);

  // ccxt talked to the emulators only, and they saw every request it made.
  assertLoopbackOnly(urls);
  assert.equal(exA.requests.length + exB.requests.length - requestsBefore, urls.length);
  await assertNoSecrets(db.pool);
});

test('accept-then-drop: the exchange records the withdrawal, the answer is lost; recovery finds it by withdrawOrderId, never withdraws again', async (t) => {
  const db = await scratchDatabase(t);
  const { deps } = cexDeps(db.pool);
  const to = freshAddress();
  exA.fault({ path: APPLY, fault: { kind: 'drop_after_accept' }, times: 1 });
  const id = await approvedMovement(deps, cexToChain('cex-drop'), { asset: 'ETH', amount: '0.25', destination: { address: to } });

  const s = await until(deps, id, 'the movement to finish', finished);
  assert.equal(s.movement.request_state, 'COMPLETED');
  const w = s.byKey.withdraw;
  assert.equal(w.attempt_no, 1);
  assert.equal(w.provider_state, 'recovered');
  const orderId = `${w.id}:1`;
  assert.equal(exA.withdrawalsByOrderId(orderId).length, 1, 'exactly one withdrawal for the node');
  assert.equal(exA.applies.filter((a) => a.withdrawOrderId?.startsWith(w.id)).length, 1, 'one withdraw/apply was ever sent');
  const { rows } = await db.pool.query(`SELECT from_state, to_state FROM transitions WHERE entity_id = $1 AND event_type IN ('SUBMIT_RESULT', 'RECOVERED') ORDER BY id`, [w.id]);
  assert.deepEqual(rows.map((r) => `${r.from_state}->${r.to_state}`), ['SUBMITTING->UNKNOWN', 'UNKNOWN->COMPLETED']);
  assert.equal(await chain.getBalance({ address: to }), parseEther('0.25'));
});

test('a slow answer past the client timeout: UNKNOWN (CEX_TIMEOUT), recovered from the history, one withdrawal', async (t) => {
  const db = await scratchDatabase(t);
  const { deps } = cexDeps(db.pool, { account: { timeout_ms: 1000 } });
  const to = freshAddress();
  exA.fault({ path: APPLY, fault: { kind: 'delay', ms: 2000 }, times: 1 });
  const id = await approvedMovement(deps, cexToChain('cex-slow'), { asset: 'ETH', amount: '0.125', destination: { address: to } });

  const s = await until(deps, id, 'the movement to finish', finished);
  assert.equal(s.movement.request_state, 'COMPLETED');
  const { rows } = await db.pool.query(`SELECT to_state, event_payload FROM transitions WHERE entity_id = $1 AND event_type = 'SUBMIT_RESULT' ORDER BY id`, [s.byKey.withdraw.id]);
  assert.deepEqual(rows.map((r) => [r.to_state, r.event_payload.outcome.errorCode]), [['UNKNOWN', 'CEX_TIMEOUT']]);
  assert.equal(s.byKey.withdraw.attempt_no, 1);
  assert.equal(exA.withdrawals.filter((x) => x.withdrawOrderId?.startsWith(s.byKey.withdraw.id)).length, 1);
  assert.equal(await chain.getBalance({ address: to }), parseEther('0.125'));
});

test('a 5xx the exchange did not act on: UNKNOWN (CEX_UNAVAILABLE); not in the history past the grace, a new attempt; one withdrawal', async (t) => {
  const db = await scratchDatabase(t);
  const { deps } = cexDeps(db.pool, { notFoundAfterSeconds: 1 });
  const to = freshAddress();
  exA.fault({ path: APPLY, fault: { kind: 'status', status: 500 }, times: 1 });
  const id = await approvedMovement(deps, cexToChain('cex-500'), { asset: 'ETH', amount: '0.0625', destination: { address: to } });

  const s = await until(deps, id, 'the movement to finish', finished);
  assert.equal(s.movement.request_state, 'COMPLETED');
  const w = s.byKey.withdraw;
  assert.equal(w.attempt_no, 2, 'recovery proved attempt 1 left nothing, attempt 2 withdrew');
  const { rows } = await db.pool.query(`SELECT to_state, event_payload FROM transitions WHERE entity_id = $1 AND event_type = 'SUBMIT_RESULT' ORDER BY id`, [w.id]);
  assert.equal(rows[0].to_state, 'UNKNOWN');
  assert.equal(rows[0].event_payload.outcome.errorCode, 'CEX_UNAVAILABLE');
  assert.equal(exA.withdrawalsByOrderId(`${w.id}:1`).length, 0);
  assert.equal(exA.withdrawalsByOrderId(`${w.id}:2`).length, 1);
  assert.equal(await chain.getBalance({ address: to }), parseEther('0.0625'));
});

test('insufficient balance and an invalid address FAIL with their codes, and nothing is withdrawn', async (t) => {
  const db = await scratchDatabase(t);
  const { deps } = cexDeps(db.pool);
  const countBefore = exA.withdrawals.length;
  const poor = await approvedMovement(deps, cexToChain('cex-poor'), { asset: 'ETH', amount: '500', destination: { address: freshAddress() } });
  const bad = await approvedMovement(deps, cexToChain('cex-bad-address'), { asset: 'ETH', amount: '0.01', destination: { address: '0x1234' } });

  const p = await until(deps, poor, 'the poor movement to finish', finished);
  assert.equal(p.byKey.withdraw.node_state, 'FAILED');
  assert.equal(p.byKey.withdraw.error_code, 'CEX_INSUFFICIENT_BALANCE');
  const b = await until(deps, bad, 'the bad-address movement to finish', finished);
  assert.equal(b.byKey.withdraw.node_state, 'FAILED');
  assert.equal(b.byKey.withdraw.error_code, 'CEX_INVALID_ADDRESS');
  assert.equal(exA.withdrawals.length, countBefore);

  // The exchange's own refusal at submit (-4026, ccxt's BadRequest on a non-binance.com URL) maps the same way.
  const lane = createCexLane(accounts(), undefined, { env: CREDS })!;
  const [action] = lane.executors;
  const payload = JSON.stringify({ account: 'exa', coin: 'ETH', network: 'ETH', address: freshAddress(), address_tag: null, amount: '500', withdraw_order_id: `direct-${Date.now()}`, prepared_at_ms: Date.now() });
  const r = await action.submit({} as never, { prepared_action_id: 'x', action_type: 'cex_withdrawal', payload_format: 'cex_withdrawal_json', payload, payload_hash: 'h', signing_required: false, provider_hints: {}, expires_at: null });
  assert.equal(r.next_state, 'FAILED');
  assert.equal(r.error_code, 'CEX_INSUFFICIENT_BALANCE');
  assert.match(r.error_detail!, /-4026/);
  assert.ok(!JSON.stringify(r).includes(CREDS.EXA_KEY) && !JSON.stringify(r).includes(CREDS.EXA_SECRET));
});

test('a rate limit before submit defers the node to at least the exchange\'s Retry-After (dispatch_after), without a request meanwhile', async (t) => {
  const db = await scratchDatabase(t);
  const { deps, urls, lane } = cexDeps(db.pool);
  const to = freshAddress();
  const seenBefore = exA.requests.length;
  exA.fault({ fault: { kind: 'status', status: 429, retryAfterSeconds: 120 }, times: 1 });
  const id = await approvedMovement(deps, cexToChain('cex-429-pre'), { asset: 'ETH', amount: '0.03', destination: { address: to } });

  await drain(deps);
  const s = await snapshot(db.pool, id);
  const w = s.byKey.withdraw;
  assert.equal(w.node_state, 'READY');
  assert.equal(w.error_code, 'CEX_RATE_LIMITED');
  const limited = exA.requests.slice(seenBefore).find((r) => r.status === 429)!;
  assert.ok(limited, 'the exchange answered 429');
  assert.ok(w.dispatch_after!.getTime() >= limited.at + 120_000, `dispatch_after ${w.dispatch_after!.toISOString()} is at least Retry-After past the 429`);

  // Even with the deferral backdated, this process remembers the Retry-After and sends nothing.
  await db.pool.query(`UPDATE request_nodes SET dispatch_after = now() - interval '1 second' WHERE id = $1`, [w.id]);
  const sent = urls.length;
  await drain(deps);
  assert.equal(urls.length, sent, 'no request during the Retry-After');
  assert.equal((await snapshot(db.pool, id)).byKey.withdraw.error_code, 'CEX_RATE_LIMITED');

  // Once the wait is over (here: forgotten), the same client, whose first market load failed, goes through.
  lane.accounts.get('exa')!.blockedUntilMs = 0;
  await db.pool.query(`UPDATE request_nodes SET dispatch_after = now() - interval '1 second' WHERE id = $1`, [w.id]);
  const done = await until(deps, id, 'the movement to finish', finished);
  assert.equal(done.movement.request_state, 'COMPLETED');
  assert.equal(await chain.getBalance({ address: to }), parseEther('0.03'));
});

test('a rate-limited withdraw/apply: nothing withdrawn, the next attempt starts no sooner than Retry-After', async (t) => {
  const db = await scratchDatabase(t);
  const { deps } = cexDeps(db.pool);
  const to = freshAddress();
  const seenBefore = exA.requests.length;
  exA.fault({ path: APPLY, fault: { kind: 'status', status: 429, retryAfterSeconds: 2 }, times: 1 });
  const id = await approvedMovement(deps, cexToChain('cex-429-submit'), { asset: 'ETH', amount: '0.02', destination: { address: to } });

  const s = await until(deps, id, 'the movement to finish', finished);
  assert.equal(s.movement.request_state, 'COMPLETED');
  const w = s.byKey.withdraw;
  assert.equal(w.attempt_no, 2);
  const limited = exA.requests.slice(seenBefore).find((r) => r.status === 429 && r.path === APPLY)!;
  // started_at is the start of the current attempt (2), recorded when it was committed SUBMITTING.
  assert.ok(w.started_at!.getTime() >= limited.at + 2000, `attempt 2 began ${w.started_at!.getTime() - limited.at} ms after the 429, Retry-After was 2 s`);
  const { rows } = await db.pool.query(`SELECT to_state, event_payload FROM transitions WHERE entity_id = $1 AND event_type = 'SUBMIT_RESULT' ORDER BY id`, [w.id]);
  assert.equal(rows[0].event_payload.outcome.errorCode, 'CEX_RATE_LIMITED');
  assert.equal(exA.withdrawalsByOrderId(`${w.id}:1`).length, 0);
  assert.equal(exA.withdrawalsByOrderId(`${w.id}:2`).length, 1);
});

test('deposit observe by address, amount and time window: pending until N confirmations, then credited', async (t) => {
  const db = await scratchDatabase(t);
  const { deps } = cexDeps(db.pool);
  const id = await approvedMovement(deps, plan('cex-deposit', [depositNode({ address: depositAddressB, amount: '0.777' })]), { asset: 'ETH', amount: '0.777' });
  await drain(deps);
  assert.equal((await snapshot(db.pool, id)).byKey.deposit_observe.provider_state, 'not_seen');

  const wallet = createWalletClient({ account: privateKeyToAccount(SECOND_DEV_KEY), transport: http(anvil.url, { retryCount: 0 }) });
  const hash = await wallet.sendTransaction({ chain: null, to: depositAddressB, value: parseEther('0.777') });
  await chain.waitForTransactionReceipt({ hash });
  let s = await until(deps, id, 'the deposit to be pending', (x) => x.byKey.deposit_observe.provider_state === 'pending');
  assert.equal(s.byKey.deposit_observe.provider_refs.tx_hash, hash);
  await anvil.mine(2);
  s = await until(deps, id, 'the movement to finish', finished);
  assert.equal(s.movement.request_state, 'COMPLETED');
  assert.equal(s.byKey.deposit_observe.provider_refs.tx_hash, hash);
  assert.equal(s.byKey.deposit_observe.provider_refs.exchange_status, 1);
});

test('a repeated withdrawOrderId is refused by the exchange (CEX_REJECTED); the first withdrawal stands alone', async () => {
  const lane = createCexLane(accounts(), undefined, { env: CREDS })!;
  const [action] = lane.executors;
  const orderId = `repeat-${Date.now()}`;
  const payload = JSON.stringify({ account: 'exa', coin: 'ETH', network: 'ETH', address: freshAddress(), address_tag: null, amount: '0.001', withdraw_order_id: orderId, prepared_at_ms: Date.now() });
  const prepared = { prepared_action_id: 'x', action_type: 'cex_withdrawal', payload_format: 'cex_withdrawal_json', payload, payload_hash: 'h', signing_required: false, provider_hints: {}, expires_at: null };
  assert.equal((await action.submit({} as never, prepared)).next_state, 'COMPLETED');
  const again = await action.submit({} as never, prepared);
  assert.equal(again.next_state, 'FAILED');
  assert.equal(again.error_code, 'CEX_REJECTED');
  assert.equal(exA.withdrawalsByOrderId(orderId).length, 1);
});

test('an observer read the exchange refuses (stale clock) keeps the node observing with the code; it completes once the clock is right', async () => {
  const lane = createCexLane(accounts(), undefined, { env: CREDS })!;
  const [action, observer] = lane.executors;
  const orderId = `observe-${Date.now()}`;
  const payload = JSON.stringify({ account: 'exa', coin: 'ETH', network: 'ETH', address: freshAddress(), address_tag: null, amount: '0.002', withdraw_order_id: orderId, prepared_at_ms: Date.now() });
  const sent = await action.submit({} as never, { prepared_action_id: 'x', action_type: 'cex_withdrawal', payload_format: 'cex_withdrawal_json', payload, payload_hash: 'h', signing_required: false, provider_hints: {}, expires_at: null });
  assert.equal(sent.next_state, 'COMPLETED');
  const ctx = { node_config: {}, intent: {}, resolved_bindings: { executor: { executor_key: CEX_WITHDRAWAL_OBSERVE_KEY, account: 'exa' }, signer: null }, provider_context: sent.provider_refs } as never;
  exA.clockSkewMs = 60_000;
  try {
    const refused = await observer.observe(ctx);
    assert.equal(refused.next_state, 'OBSERVING');
    assert.equal(refused.error_code, 'CEX_AUTH_REJECTED');
    assert.equal(refused.retry_after_seconds, 60);
  } finally {
    exA.clockSkewMs = 0;
  }
  const done = await observer.observe(ctx);
  assert.equal(done.next_state, 'COMPLETED');
  assert.match(String(done.provider_refs.tx_hash), /^0x[0-9a-f]{64}$/);
});

test('ccxt is confined to the account\'s base_url; signatures and stale timestamps are checked by the emulator', async () => {
  const lane = createCexLane(accounts(), undefined, { env: CREDS })!;
  const client = await lane.accounts.get('exa')!.client();
  const seen = exA.requests.length;
  // Any origin but the account's is refused before a request is made (a name under .invalid, which
  // never resolves, stands in for the exchange's public host).
  await assert.rejects(client.fetch('https://exchange.invalid/api/v3/time', 'GET'), /refusing to contact https:\/\/exchange\.invalid/);
  assert.equal(exA.requests.length, seen);
  for (const url of Object.values(client.urls.api as Record<string, string>)) assert.ok(url.startsWith(exA.url), url);
  const health = await lane.executors[0].health();
  assert.equal(health.ok, true);
  assert.deepEqual((health.accounts as Array<Record<string, unknown>>).map((a) => [a.account, a.reachable]), [['exa', true], ['exb', true]]);

  const wrong = createCexLane(accounts(), undefined, { env: { ...CREDS, EXA_SECRET: 'not-the-secret' } })!;
  const [action] = wrong.executors;
  const ctx = { node_config: { coin: 'ETH' }, intent: { asset: 'ETH', amount: '1', destination: { address: freshAddress() } }, resolved_bindings: { executor: { executor_key: 'x', account: 'exa' }, signer: null }, provider_context: {}, request_node_id: 'n', attempt_no: 1, action_type: 'cex_withdrawal' } as never;
  await assert.rejects(action.preflight(ctx), (err: Error & { code?: string }) => err.code === 'CEX_AUTH_REJECTED' && /-1022/.test(err.message) && !err.message.includes('not-the-secret'));

  exA.clockSkewMs = 60_000;
  try {
    await assert.rejects(lane.executors[0].preflight(ctx), (err: Error & { code?: string }) => err.code === 'CEX_AUTH_REJECTED' && /-1021/.test(err.message));
  } finally {
    exA.clockSkewMs = 0;
  }
});

test('SIGKILL of the worker while the exchange holds an accepted withdraw/apply: the next worker recovers it, one withdrawal, funds on chain', async (t) => {
  const db = await scratchDatabase(t);
  const { deps } = cexDeps(db.pool);
  const to = freshAddress();
  // The worker processes read the exchange account from the config file, its key and secret from the environment.
  const dir = mkdtempSync(join(tmpdir(), 'ferry-cex-'));
  const configFile = join(dir, 'ferry.yaml');
  writeFileSync(configFile, yaml({ cex: { accounts: [accounts()[0]] } }));
  const env = {
    ...CREDS,
    FERRY_CONFIG_FILE: configFile,
    FERRY_SUBMITTING_GRACE_SECONDS_BY_LANE: 'cex=2',
    FERRY_NODE_RECOVERY_INTERVAL_SECONDS: '0.5',
    FERRY_NODE_DISPATCH_INTERVAL_SECONDS: '0.2',
  };
  exA.fault({ path: APPLY, fault: { kind: 'hold_after_accept' }, times: 1 });
  const id = await approvedMovement(deps, cexToChain('cex-sigkill'), { asset: 'ETH', amount: '0.0421', destination: { address: to } });
  const nodeId = (await snapshot(db.pool, id)).byKey.withdraw.id;

  const first = spawnWorker(db.url, env);
  try {
    await waitFor('the exchange to accept the withdrawal', async () => exA.withdrawalsByOrderId(`${nodeId}:1`).length === 1);
  } finally {
    first.kill('SIGKILL');
  }
  assert.equal((await exited(first)).signal, 'SIGKILL');
  assert.equal((await snapshot(db.pool, id)).byKey.withdraw.node_state, 'SUBMITTING', 'the kill left the attempt undecided');

  const second = spawnWorker(db.url, env);
  let done: Snap;
  try {
    done = await waitFor('the movement to finish', async () => {
      const s = await snapshot(db.pool, id);
      return finished(s) ? s : null;
    });
  } finally {
    second.kill('SIGTERM');
    assert.equal((await exited(second)).code, 0, 'the worker stops cleanly on SIGTERM');
  }
  assert.equal(done.movement.request_state, 'COMPLETED');
  assert.equal(done.byKey.withdraw.attempt_no, 1);
  assert.equal(done.byKey.withdraw.provider_state, 'recovered');
  assert.equal(exA.withdrawals.filter((w) => w.withdrawOrderId?.startsWith(nodeId)).length, 1, 'exactly one withdrawal for the node');
  assert.equal(exA.applies.filter((a) => a.withdrawOrderId?.startsWith(nodeId)).length, 1, 'one withdraw/apply was ever sent');
  const recovered = await db.pool.query(`SELECT count(*)::int AS n FROM transitions WHERE entity_id = $1 AND event_type = 'RECOVERED' AND from_state = 'SUBMITTING'`, [nodeId]);
  assert.equal(recovered.rows[0].n, 1);
  await exA.settled();
  assert.equal(await chain.getBalance({ address: to }), parseEther('0.0421'));
  await assertNoSecrets(db.pool);
});

test('no key or secret in anything the workers logged during these tests', () => {
  assert.ok(logLines.length > 20, `${logLines.length} log lines`);
  assert.ok(logLines.some((l) => l.includes('CEX_RATE_LIMITED')), 'the lane\'s outcomes were logged');
  for (const line of logLines) for (const [name, value] of Object.entries(CREDS)) assert.ok(!line.includes(value), `${name} logged: ${line}`);
});
