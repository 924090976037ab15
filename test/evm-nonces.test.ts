import assert from 'node:assert/strict';
import { test } from 'node:test';
import { keccak256, type Address, type Hex, type PublicClient } from 'viem';
import { dispatchOne } from '../src/actors/dispatcher.ts';
import type { WorkerDeps } from '../src/actors/execution.ts';
import { runEvmNonceReaper } from '../src/sweeps/evm-nonce-reaper.ts';
import { deliverMovementEvent } from '../src/durable/transition.ts';
import { createEvmLane, EvmNativeTransferExecutor, EvmNonceManager } from '../src/executors/evm/index.ts';
import type { ExecutionContext, Executor, PreparedAction, SubmitOptions } from '../src/executors/protocol.ts';
import { artifactsOfNodes } from '../src/persistence/artifacts.ts';
import { FatalMovementError } from '../src/executors/errors.ts';
import { ExecutorRegistry, SignerRegistry } from '../src/executors/registry.ts';
import { withTransaction, type Pool } from '../src/persistence/db.ts';
import { reservationsOfWallet } from '../src/persistence/evm-nonces.ts';
import { log } from '../src/log.ts';
import { ANVIL_CHAIN_ID, ANVIL_DEV_ADDRESS, ANVIL_DEV_KEY, freshAddress, localChainForFile, type Anvil, TEST_FEE_CAP_WEI } from './helpers/anvil.ts';
import { scratchDatabase } from './helpers/db.ts';
import { collectingDeps, seedMovement } from './helpers/fixtures.ts';
import { exited, spawnWorker } from './helpers/processes.ts';
import { waitFor } from './helpers/wait.ts';
import { nativeTransferPlan } from './helpers/evm.ts';
import { approvedMovement, dispatchUntilIdle, drain, runtimeDeps, snapshot } from './helpers/runtime.ts';

/**
 * The nonce manager and the nonce reaper against a real chain (anvil on loopback): many
 * dispatchers in two processes share one hot wallet and every transfer gets its own nonce, in one
 * contiguous run; a transaction that never reached the chain is sent again from its stored bytes;
 * a nonce whose transaction was never signed is filled (or, as the wallet's highest, released), so
 * the transactions above it are mined.
 */

let anvil: Anvil;
let chain: PublicClient;

localChainForFile((local) => {
  ({ anvil, chain } = local);
});

const WALLET = { chainId: ANVIL_CHAIN_ID, sender: ANVIL_DEV_ADDRESS };
const senderNonce = (blockTag: 'pending' | 'latest' = 'pending') => chain.getTransactionCount({ address: ANVIL_DEV_ADDRESS, blockTag });

/** In-process deps with the EVM lane on the shared nonce manager, and a signer that always refuses. */
function evmDeps(pool: Pool, wrap?: (real: EvmNativeTransferExecutor) => Executor): WorkerDeps & { nonces: EvmNonceManager } {
  const base = runtimeDeps(pool, { FERRY_SUBMITTING_GRACE_SECONDS_BY_LANE: 'evm=0.001' });
  const nonces = new EvmNonceManager(pool);
  const executors = new ExecutorRegistry();
  const signers = new SignerRegistry();
  const { executor, signer } = createEvmLane({ rpcUrl: anvil.url, signerPrivateKey: ANVIL_DEV_KEY, pollSeconds: 0, nonces, feeBump: { capWei: BigInt(TEST_FEE_CAP_WEI) } });
  executors.register(wrap ? wrap(executor) : executor);
  signers.register(signer);
  signers.register({
    signerKey: 'evm_broken',
    sign: async () => {
      throw new FatalMovementError('SIGNER_UNAVAILABLE', 'the key is gone');
    },
  });
  return { ...base, executors, signers, nonces };
}

/**
 * Wraps the lane's executor so that attempt 1 stalls in its pre-submit check (a slow or dying
 * process: signed and committed SUBMITTING, nothing broadcast) until `release()`; `reached`
 * resolves when it got there.
 */
/**
 * An executor whose first attempt stalls (a slow process) until the test lets it go on: in its
 * pre-submit check (default), or inside submit after the check passed, before the broadcast is cleared.
 */
function stallBeforeBroadcast(where: 'preSubmitCheck' | 'submit' = 'preSubmitCheck') {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let paused!: () => void;
  const reached = new Promise<void>((r) => (paused = r));
  const stall = async (ctx: ExecutionContext, at: typeof where) => {
    if (ctx.attempt_no === 1 && at === where) {
      paused();
      await gate;
    }
  };
  const wrap = (real: EvmNativeTransferExecutor): Executor =>
    Object.assign(Object.create(real) as Executor, {
      executorKey: real.executorKey,
      lane: real.lane,
      preflight: (ctx: ExecutionContext) => real.preflight(ctx),
      prepare: (ctx: ExecutionContext) => real.prepare(ctx),
      submit: async (ctx: ExecutionContext, prepared: PreparedAction, opts: SubmitOptions) => {
        await stall(ctx, 'submit');
        return real.submit(ctx, prepared, opts);
      },
      observe: (ctx: ExecutionContext) => real.observe(ctx),
      recover: (ctx: ExecutionContext) => real.recover(ctx),
      inspect: (ctx: ExecutionContext) => real.inspect(ctx),
      preSubmitCheck: async (ctx: ExecutionContext) => {
        await stall(ctx, 'preSubmitCheck');
        return real.preSubmitCheck(ctx);
      },
    });
  return { wrap, reached, release };
}

const reap = (deps: { nonces: EvmNonceManager }) =>
  runEvmNonceReaper({ nonces: deps.nonces, stuckSeconds: 60, log: log.child({ test: true }) }, { batchSize: 20, maxRunMs: 0 });

/** Ages every open reservation past the reaper's threshold (instead of waiting for it). */
async function backdate(pool: Pool, nonce?: number) {
  await pool.query(
    `UPDATE evm_nonce_reservations SET updated_at = now() - interval '1 hour' WHERE closed_at IS NULL AND ($1::bigint IS NULL OR nonce = $1)`,
    [nonce ?? null],
  );
}

test('30 transfers from one hot wallet, dispatched concurrently by 2 processes: contiguous nonces, all confirmed, none refused', async (t) => {
  const db = await scratchDatabase(t);
  const MOVEMENTS = 30;
  const first = await senderNonce();
  const recipients = Array.from({ length: MOVEMENTS }, () => freshAddress());
  const ids: string[] = [];
  for (const [i, to] of recipients.entries()) {
    const { movement } = await seedMovement(db.pool, nativeTransferPlan('evm-many', { to, value_wei: String(1000 + i) }), { intent: { asset: 'ETH', amount: '1' } });
    ids.push(movement.id);
  }
  const env = {
    FERRY_EVM_RPC_URL: anvil.url,
    FERRY_EVM_SIGNER_KEY: ANVIL_DEV_KEY,
    FERRY_EVM_MAX_FEE_PER_GAS_CAP_WEI: TEST_FEE_CAP_WEI,
    FERRY_NODE_DISPATCH_INTERVAL_SECONDS: '0.5',
    FERRY_DB_POOL_MAX: '6',
    FERRY_EVM_NONCE_REAPER_INTERVAL_SECONDS: '1',
  };
  const workers = [spawnWorker(db.url, env), spawnWorker(db.url, env)];
  try {
    // Approved all at once, so both processes' dispatchers find READY nodes together.
    const transitions = collectingDeps();
    await withTransaction(db.pool, async (c) => {
      for (const id of ids) await deliverMovementEvent(c, id, { type: 'APPROVE', by: 'approver', at: new Date().toISOString() }, { actor: 'approver', deps: transitions });
    });
    await waitFor(
      'every transfer to finish',
      async () => {
        const { rows } = await db.pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM movement_requests WHERE id = ANY($1::uuid[]) AND request_state IN ('COMPLETED', 'FAILED', 'MANUAL_INTERVENTION')`,
          [ids],
        );
        return rows[0]!.n === ids.length;
      },
      180_000,
      200,
    );
    // The nonce reaper is a sweep (a pg-boss job, one run at a time across both processes): it ran
    // beside the EVM lane, found a wallet it can act for, and did not fail.
    const run = await waitFor(
      'a nonce reaper run to finish',
      async () => {
        const { rows } = await db.pool.query<{ state: string; output: Record<string, unknown> | null }>(
          `SELECT state, output FROM pgboss.job WHERE name = 'ferry-sweep-evm_nonce_reaper' AND state = 'completed' AND (output->>'wallets')::int >= 1 LIMIT 1`,
        );
        return rows[0] ?? null;
      },
      30_000,
      100,
    );
    assert.equal(run.output?.wallets, 1, 'the reaper acts for the hot wallet');
    const failed = await db.pool.query(`SELECT 1 FROM pgboss.job WHERE name = 'ferry-sweep-evm_nonce_reaper' AND state = 'failed'`);
    assert.equal(failed.rowCount, 0, 'no reaper run failed');
  } finally {
    for (const w of workers) w.kill('SIGTERM');
    await Promise.all(workers.map(exited));
  }

  const nodes = [];
  for (const id of ids) {
    const s = await snapshot(db.pool, id);
    assert.equal(s.movement.request_state, 'COMPLETED', `${id}: ${s.byKey.pay.error_code} ${s.byKey.pay.error_detail}`);
    nodes.push(s.byKey.pay);
  }
  assert.ok(nodes.every((n) => n.attempt_no === 1), 'every transfer went through on its first attempt');
  const { rows: refused } = await db.pool.query(`SELECT 1 FROM transitions WHERE event_payload::text LIKE '%EVM_NONCE_TOO_LOW%'`);
  assert.equal(refused.length, 0, 'no broadcast was refused for its nonce');
  const used = nodes.map((n) => n.provider_refs.nonce as number).sort((a, b) => a - b);
  assert.deepEqual(used, Array.from({ length: MOVEMENTS }, (_, i) => first + i), 'contiguous nonces, each used once');
  assert.equal(await senderNonce('latest'), first + MOVEMENTS, 'exactly 30 transactions mined');
  for (const [i, to] of recipients.entries()) assert.equal(await chain.getBalance({ address: to }), BigInt(1000 + i));

  const rows = await reservationsOfWallet(db.pool, WALLET);
  assert.equal(rows.length, MOVEMENTS);
  assert.ok(rows.every((r) => r.status === 'broadcast' || r.status === 'confirmed'), 'no reservation was released or filled');
  // The reaper settles them all from the chain's count (the processes' own reapers, starting while
  // transfers were under way, may have settled some already).
  const open = rows.filter((r) => r.closed_at === null).length;
  const nonces = new EvmNonceManager(db.pool);
  createEvmLane({ rpcUrl: anvil.url, signerPrivateKey: ANVIL_DEV_KEY, nonces, feeBump: { capWei: BigInt(TEST_FEE_CAP_WEI) } });
  const report = await reap({ nonces });
  assert.equal(report.settled, open);
  assert.ok((await reservationsOfWallet(db.pool, WALLET)).every((r) => r.status === 'confirmed' && r.closed_at !== null));
});

test('reaper, re-broadcast arm: a transaction dropped before it was mined is sent again from its stored bytes', async (t) => {
  const db = await scratchDatabase(t);
  const deps = evmDeps(db.pool);
  await anvil.rpc('evm_setAutomine', [false]);
  t.after(() => anvil.rpc('evm_setAutomine', [true]));
  const to = freshAddress();
  const first = await senderNonce();
  const id = await approvedMovement(deps, nativeTransferPlan('evm-reap-resend', { to, value_wei: '4242' }), { asset: 'ETH', amount: '1' });
  assert.equal(await dispatchOne(deps), true);
  const node = (await snapshot(db.pool, id)).byKey.pay;
  assert.equal(node.node_state, 'SUBMITTED');
  const hash = node.provider_refs.tx_hash as Hex;
  await anvil.rpc('anvil_dropTransaction', [hash]);
  await assert.rejects(chain.getTransaction({ hash }), /could not be found/);

  assert.equal((await reap(deps)).rebroadcast, 0, 'a fresh reservation is left alone');
  await backdate(db.pool);
  const report = await reap(deps);
  assert.equal(report.rebroadcast, 1);
  assert.equal(report.filled, 0);
  assert.equal((await chain.getTransaction({ hash })).hash, hash, 'the very same transaction is pending again');

  await anvil.mine(1);
  await drain(deps);
  const done = (await snapshot(db.pool, id)).byKey.pay;
  assert.equal(done.node_state, 'COMPLETED');
  assert.equal(done.provider_refs.tx_hash, hash);
  assert.equal(await chain.getBalance({ address: to }), 4242n, 'paid exactly once');
  assert.equal(await senderNonce('latest'), first + 1);
  await reap(deps);
  const [row] = await reservationsOfWallet(db.pool, WALLET).then((rs) => rs.filter((r) => r.nonce === first));
  assert.equal(row!.status, 'confirmed');
});

test('reaper, gap-fill arm: a nonce never signed is filled with a zero-value self-transfer and the transfer above it is mined', async (t) => {
  const db = await scratchDatabase(t);
  const deps = evmDeps(db.pool);
  const first = await senderNonce();

  // A: its nonce is reserved at prepare, then the signer refuses: no bytes exist for that nonce.
  const lostId = await approvedMovement(deps, nativeTransferPlan('evm-reap-lost', { to: freshAddress(), value_wei: '1' }, { signer_key: 'evm_broken' }), { asset: 'ETH', amount: '1' });
  assert.equal(await dispatchOne(deps), true);
  const lost = (await snapshot(db.pool, lostId)).byKey.pay;
  assert.equal(lost.node_state, 'FAILED');
  assert.equal(lost.error_code, 'SIGNER_UNAVAILABLE');

  // B: the next nonce; its transaction waits on the node behind the gap.
  const to = freshAddress();
  const id = await approvedMovement(deps, nativeTransferPlan('evm-reap-behind', { to, value_wei: '777' }), { asset: 'ETH', amount: '1' });
  await drain(deps, 3);
  let node = (await snapshot(db.pool, id)).byKey.pay;
  assert.equal(node.provider_refs.nonce, first + 1, 'B took the nonce above the reserved one');
  assert.notEqual(node.node_state, 'COMPLETED');
  assert.equal(await senderNonce('latest'), first, 'nothing is mined while the gap is open');
  assert.equal(await chain.getBalance({ address: to }), 0n);

  await backdate(db.pool, first);
  const report = await reap(deps);
  assert.equal(report.filled, 1);
  const filled = (await reservationsOfWallet(db.pool, WALLET)).find((r) => r.nonce === first)!;
  assert.equal(filled.status, 'filled');
  assert.match(filled.filler_tx_hash!, /^0x[0-9a-f]{64}$/);

  await waitFor('the gap and the transfer above it to be mined', async () => (await senderNonce('latest')) === first + 2, 30_000);
  const filler = await chain.getTransaction({ hash: filled.filler_tx_hash as Hex });
  assert.equal(filler.nonce, first);
  assert.equal(filler.from, ANVIL_DEV_ADDRESS);
  assert.equal(filler.to, ANVIL_DEV_ADDRESS, 'a transfer to itself');
  assert.equal(filler.value, 0n, 'of no value');
  await drain(deps);
  node = (await snapshot(db.pool, id)).byKey.pay;
  assert.equal(node.node_state, 'COMPLETED');
  assert.equal(await chain.getBalance({ address: to }), 777n);

  await reap(deps);
  assert.ok((await reservationsOfWallet(db.pool, WALLET)).every((r) => r.closed_at !== null), 'the chain settled every row');
});

test('reaper, gap-fill arm: stored bytes the chain refuses for good (fee cap under the base fee) are replaced by a filler; the node fails without paying', async (t) => {
  const db = await scratchDatabase(t);
  const deps = evmDeps(db.pool);
  await anvil.rpc('evm_setAutomine', [false]);
  t.after(() => anvil.rpc('evm_setAutomine', [true]));
  const first = await senderNonce('latest');
  const to = freshAddress();
  const id = await approvedMovement(deps, nativeTransferPlan('evm-reap-unusable', { to, value_wei: '313' }), { asset: 'ETH', amount: '1' });
  assert.equal(await dispatchOne(deps), true);
  const node = (await snapshot(db.pool, id)).byKey.pay;
  assert.equal(node.node_state, 'SUBMITTED');
  const hash = node.provider_refs.tx_hash as Hex;
  const maxFee = (await chain.getTransaction({ hash })).maxFeePerGas!;
  // The node loses it, and the base fee rises far above its fee cap: the bytes can never be mined.
  await anvil.rpc('anvil_dropTransaction', [hash]);
  await anvil.rpc('anvil_setNextBlockBaseFeePerGas', [`0x${(maxFee * 10n).toString(16)}`]);
  await anvil.mine(1);

  await backdate(db.pool);
  const report = await reap(deps);
  assert.equal(report.rebroadcast, 0);
  assert.equal(report.filled, 1, 'the refused bytes are replaced by a filler');
  const row = (await reservationsOfWallet(db.pool, WALLET)).find((r) => r.nonce === first)!;
  assert.equal(row.status, 'filled');
  assert.match(row.detail!, /EVM_FEE_REFUSED/);
  await anvil.mine(1);
  const filler = await chain.getTransactionReceipt({ hash: row.filler_tx_hash as Hex });
  assert.equal(filler.status, 'success');
  assert.equal(filler.to, ANVIL_DEV_ADDRESS);

  await drain(deps);
  const s = await snapshot(db.pool, id);
  assert.equal(s.byKey.pay.node_state, 'FAILED');
  assert.equal(s.byKey.pay.error_code, 'EVM_NONCE_CONSUMED');
  assert.equal(await chain.getBalance({ address: to }), 0n, 'nothing paid');
  assert.equal(await senderNonce('latest'), first + 1, 'the wallet moved on');
});

test('reaper, release arm: the wallet\'s highest nonce, never signed, is given back and the next transfer uses it', async (t) => {
  const db = await scratchDatabase(t);
  const deps = evmDeps(db.pool);
  const first = await senderNonce();
  const lostId = await approvedMovement(deps, nativeTransferPlan('evm-reap-top', { to: freshAddress(), value_wei: '1' }, { signer_key: 'evm_broken' }), { asset: 'ETH', amount: '1' });
  await drain(deps);
  assert.equal((await snapshot(db.pool, lostId)).byKey.pay.node_state, 'FAILED');

  await backdate(db.pool, first);
  const report = await reap(deps);
  assert.equal(report.released, 1);
  assert.equal(report.filled, 0, 'no transaction needed');

  const to = freshAddress();
  const id = await approvedMovement(deps, nativeTransferPlan('evm-reap-next', { to, value_wei: '55' }), { asset: 'ETH', amount: '1' });
  await drain(deps);
  const node = (await snapshot(db.pool, id)).byKey.pay;
  assert.equal(node.node_state, 'COMPLETED');
  assert.equal(node.provider_refs.nonce, first, 'the released nonce is used again');
  assert.equal(await senderNonce('latest'), first + 1);
});

test('a reservation is idempotent per attempt, and a released gap below the highest live nonce is used first', async (t) => {
  const db = await scratchDatabase(t);
  const nonces = new EvmNonceManager(db.pool);
  const a = (node: string) => ({ chainId: 5, sender: '0x00000000000000000000000000000000000000aa' as Address, requestNodeId: node, attemptNo: 1 });
  const ids = ['00000000-0000-4000-8000-000000000001', '00000000-0000-4000-8000-000000000002', '00000000-0000-4000-8000-000000000003', '00000000-0000-4000-8000-000000000004'];
  // Ten reservations at once: ten distinct nonces from the chain's count up.
  const many = await Promise.all(Array.from({ length: 10 }, (_, i) => nonces.reserve(a(`00000000-0000-4000-8000-1000000000${String(i).padStart(2, '0')}`), 7)));
  assert.deepEqual([...many].sort((x, y) => x - y), [7, 8, 9, 10, 11, 12, 13, 14, 15, 16]);
  assert.equal(await nonces.reserve(a(ids[0]!), 7), 17);
  assert.equal(await nonces.reserve(a(ids[0]!), 7), 17, 'same attempt, same nonce');
  assert.equal(await nonces.reserve(a(ids[1]!), 7), 18);
  await nonces.release({ ...a(ids[0]!), nonce: 17 }, 'refused');
  assert.equal(await nonces.reserve(a(ids[2]!), 7), 17, 'the gap first');
  assert.equal(await nonces.reserve(a(ids[3]!), 20), 20, 'a chain count above the table wins');
  assert.equal(await nonces.reserve({ ...a(ids[0]!), attemptNo: 2 }, 7), 21);
  assert.equal(await nonces.clearForBroadcast({ ...a(ids[0]!), nonce: 17, txHash: null }), false, 'a released nonce is never sent');
  assert.equal(await nonces.clearForBroadcast({ ...a(ids[2]!), nonce: 17, txHash: '0xabc' }), true);
});

test('a nonce reclaimed while its attempt waits between signing and submit is never sent: the node is prepared again and pays once', async (t) => {
  const db = await scratchDatabase(t);
  // The attempt stalls in its pre-submit check (a slow process) until the test lets it go on.
  const { wrap, reached, release } = stallBeforeBroadcast();
  const deps = evmDeps(db.pool, wrap);
  const first = await senderNonce();
  const to = freshAddress();
  const id = await approvedMovement(deps, nativeTransferPlan('evm-reclaimed', { to, value_wei: '606' }), { asset: 'ETH', amount: '1' });
  const inflight = dispatchOne(deps);
  await reached;
  const stalled = (await snapshot(db.pool, id)).byKey.pay;
  assert.equal(stalled.node_state, 'SUBMITTING');
  const signed = (await artifactsOfNodes(db.pool, [stalled.id])).find((a) => a.artifact_type === 'signature')!;
  const firstHash = keccak256(signed.content_inline as Hex);

  await backdate(db.pool);
  assert.equal((await reap(deps)).released, 1, 'the reaper took the nonce back');
  release();
  assert.equal(await inflight, true);
  const deferred = (await snapshot(db.pool, id)).byKey.pay;
  assert.equal(deferred.node_state, 'READY', 'deferred, not failed');
  assert.equal(deferred.error_code, 'PRE_SUBMIT_CHECK_TEMPORARY_ERROR');
  assert.match(deferred.error_detail!, /no longer holds a nonce/);

  await db.pool.query(`UPDATE request_nodes SET dispatch_after = now() WHERE id = $1`, [stalled.id]);
  await drain(deps);
  const done = (await snapshot(db.pool, id)).byKey.pay;
  assert.equal(done.node_state, 'COMPLETED');
  assert.equal(done.attempt_no, 2, 'a new attempt');
  assert.equal(done.provider_refs.nonce, first, 'with the nonce given back');
  // Same nonce, recipient, value and (usually) fees: the new attempt may sign the very same bytes.
  if (done.provider_refs.tx_hash !== firstHash) {
    await assert.rejects(chain.getTransaction({ hash: firstHash }), /could not be found/, 'the first attempt\'s bytes never left');
  }
  assert.equal(await chain.getBalance({ address: to }), 606n, 'paid exactly once');
  assert.equal(await senderNonce('latest'), first + 1);
});

test('a nonce reclaimed after the pre-submit check passed, before the broadcast is cleared, is never sent and never FAILED: the node is prepared again and pays once', async (t) => {
  const db = await scratchDatabase(t);
  // The attempt passes its pre-submit check, then stalls inside submit until the test lets it go
  // on: the reaper takes the nonce back in between.
  const { wrap, reached, release } = stallBeforeBroadcast('submit');
  const deps = evmDeps(db.pool, wrap);
  const first = await senderNonce();
  const to = freshAddress();
  const id = await approvedMovement(deps, nativeTransferPlan('evm-reclaimed-late', { to, value_wei: '707' }), { asset: 'ETH', amount: '1' });
  const inflight = dispatchOne(deps);
  await reached;
  await backdate(db.pool);
  assert.equal((await reap(deps)).released, 1, 'the reaper took the nonce back');
  release();
  assert.equal(await inflight, true);
  const deferred = (await snapshot(db.pool, id)).byKey.pay;
  assert.equal(deferred.node_state, 'READY', 'prepared again, not FAILED');
  assert.equal(deferred.error_code, 'EVM_NONCE_RECLAIMED');

  await db.pool.query(`UPDATE request_nodes SET dispatch_after = now() WHERE id = $1`, [deferred.id]);
  await drain(deps);
  const done = (await snapshot(db.pool, id)).byKey.pay;
  assert.equal(done.node_state, 'COMPLETED');
  assert.equal(done.attempt_no, 2, 'a new attempt');
  assert.equal(await chain.getBalance({ address: to }), 707n, 'paid exactly once');
  assert.equal(await senderNonce('latest'), first + 1);
});

test('signed but never sent, its nonce filled by the reaper and the filler mined first: recovery makes a new attempt, never FAILED, and the transfer is paid once', async (t) => {
  const db = await scratchDatabase(t);
  // A's first attempt is signed and committed SUBMITTING, then its process stalls before the
  // broadcast (as one that died there would): its bytes never leave.
  const { wrap, reached, release } = stallBeforeBroadcast();
  const stalling = evmDeps(db.pool, wrap);
  const deps = evmDeps(db.pool);
  const first = await senderNonce();
  const toA = freshAddress();
  const a = await approvedMovement(deps, nativeTransferPlan('evm-reclaimed-filled', { to: toA, value_wei: '4242' }), { asset: 'ETH', amount: '1' });
  const inflight = dispatchOne(stalling);
  await reached;
  const stalled = (await snapshot(db.pool, a)).byKey.pay;
  assert.equal(stalled.node_state, 'SUBMITTING');
  assert.ok((await artifactsOfNodes(db.pool, [stalled.id])).some((x) => x.artifact_type === 'signature'), 'A was signed');

  // B takes the nonce above A's and waits behind the gap (dispatched only: recovery is held up).
  const toB = freshAddress();
  const b = await approvedMovement(deps, nativeTransferPlan('evm-above-reclaimed', { to: toB, value_wei: '1717' }), { asset: 'ETH', amount: '1' });
  await dispatchUntilIdle(deps);
  assert.equal((await snapshot(db.pool, b)).byKey.pay.provider_refs.nonce, first + 1);

  // The reaper reclaims A's nonce (never cleared to broadcast) and fills it; the filler is mined,
  // and B with it.
  await backdate(db.pool, first);
  assert.equal((await reap(deps)).filled, 1);
  await waitFor('the filler and B to be mined', async () => (await senderNonce('latest')) === first + 2, 30_000);

  // Recovery now finds A's nonce used on chain. Its attempt sent nothing: a new attempt pays.
  await drain(deps);
  const done = (await snapshot(db.pool, a)).byKey.pay;
  assert.equal(done.node_state, 'COMPLETED', `A completed (was ${done.node_state} ${done.error_code ?? ''})`);
  assert.equal(done.attempt_no, 2, 'as a new attempt');
  assert.equal(done.provider_refs.nonce, first + 2);
  const recovered = (
    await db.pool.query(`SELECT to_state, event_payload FROM transitions WHERE entity_id = $1 AND event_type = 'RECOVERED' ORDER BY seq`, [stalled.id])
  ).rows;
  assert.equal(recovered.length, 1, 'recovery resolved the first attempt once');
  assert.equal(recovered[0].to_state, 'READY', 'as nothing done, not FAILED');
  assert.match(JSON.stringify(recovered[0].event_payload), /EVM_NONCE_RECLAIMED/);
  assert.equal(await chain.getBalance({ address: toA }), 4242n, 'A paid exactly once');
  assert.equal(await chain.getBalance({ address: toB }), 1717n, 'B paid once');
  assert.equal(await senderNonce('latest'), first + 3, 'filler, B and A\'s second attempt: nothing else');

  // The stalled process's late continuation sends nothing: its nonce is gone and its lease too.
  release();
  await inflight;
  assert.equal(await senderNonce('pending'), first + 3);
  assert.equal(await chain.getBalance({ address: toA }), 4242n);
});
