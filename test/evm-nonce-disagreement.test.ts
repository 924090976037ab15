import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import { createPublicClient, http, type PublicClient } from 'viem';
import { dispatchOne } from '../src/actors/dispatcher.ts';
import { runEvmNonceReaper } from '../src/sweeps/evm-nonce-reaper.ts';
import type { WorkerDeps } from '../src/actors/execution.ts';
import { createEvmLane, EvmNonceManager } from '../src/executors/evm/index.ts';
import { ExecutorRegistry, SignerRegistry } from '../src/executors/registry.ts';
import { createApp } from '../src/http/app.ts';
import type { ApiRuntime } from '../src/http/v3/context.ts';
import type { Pool } from '../src/persistence/db.ts';
import { callbacksForMovement } from '../src/persistence/callbacks.ts';
import { ANVIL_CHAIN_ID, ANVIL_DEV_ADDRESS, ANVIL_DEV_KEY, freshAddress, startAnvil, type Anvil } from './helpers/anvil.ts';
import { scratchDatabase } from './helpers/db.ts';
import { nativeTransferPlan } from './helpers/evm.ts';
import { callerFor, expectStatus } from './helpers/http.ts';
import { approvedMovement, drain, runtimeDeps, snapshot } from './helpers/runtime.ts';
import { createTokens } from './helpers/tokens.ts';

/**
 * Chain state disagreements are loud. A sandbox-like setup restarted on a fresh chain with its
 * database kept hands out the nonce after the last one it used; the new chain has not reached it,
 * so the transfer waits in the mempool behind nonces nothing will ever send. The nonce reaper says
 * so once: a warning naming the wallet, the chain's nonce and the waiting nonces, an audit event,
 * a request_attention callback for the movement. A reservation above the chain's pending nonce for
 * longer than the threshold is reported the same way.
 */

const lines: Record<string, unknown>[] = [];
const testLog = pino({ level: 'warn' }, { write: (l: string) => void lines.push(JSON.parse(l)) });

function evmDeps(pool: Pool, url: string, nonces: EvmNonceManager): WorkerDeps {
  const base = runtimeDeps(pool);
  const executors = new ExecutorRegistry();
  const signers = new SignerRegistry();
  const { executor, signer } = createEvmLane({ rpcUrl: url, signerPrivateKey: ANVIL_DEV_KEY, pollSeconds: 0, nonces });
  executors.register(executor);
  signers.register(signer);
  return { ...base, executors, signers };
}

const reap = (nonces: EvmNonceManager) =>
  runEvmNonceReaper({ nonces, stuckSeconds: 3600, log: testLog, disagreement: { afterSeconds: 60, callbackMaxAttempts: 3 } }, { batchSize: 20, maxRunMs: 0 });

async function disagreements(pool: Pool) {
  const { rows } = await pool.query(
    `SELECT details FROM (SELECT action, details, id FROM audit_outbox UNION ALL SELECT action, details, id FROM audit_events) a WHERE action = 'evm.nonce_disagreement' ORDER BY id`,
  );
  return rows.map((r) => r.details as Record<string, unknown>);
}

const backdate = (pool: Pool) => pool.query(`UPDATE evm_nonce_reservations SET created_at = created_at - interval '10 minutes' WHERE closed_at IS NULL`);

test('a fresh chain behind a kept database: the transfer waits on a nonce the chain has not reached, and the reaper says so once, loudly', async (t) => {
  const db = await scratchDatabase(t);
  const nonces = new EvmNonceManager(db.pool);
  let anvil: Anvil = await startAnvil();
  t.after(() => anvil.stop());
  const port = anvil.port;
  let deps = evmDeps(db.pool, anvil.url, nonces);

  // The first life: two transfers, mined and settled.
  for (const n of [1, 2]) {
    const id = await approvedMovement(deps, nativeTransferPlan(`first-${n}`, { to: freshAddress(), value_wei: '1000', confirmations: 1 }), { asset: 'ETH', amount: '1' });
    await drain(deps);
    assert.equal((await snapshot(db.pool, id)).movement.request_state, 'COMPLETED');
  }
  await reap(nonces);
  assert.equal((await disagreements(db.pool)).length, 0, 'a chain that agrees raises nothing');

  // The restart: a new chain on the same RPC, the database kept.
  await anvil.stop();
  anvil = await startAnvil({ port });
  deps = evmDeps(db.pool, anvil.url, nonces);
  const chain: PublicClient = createPublicClient({ transport: http(anvil.url, { retryCount: 0 }) });
  assert.equal(await chain.getTransactionCount({ address: ANVIL_DEV_ADDRESS }), 0);

  const to = freshAddress();
  const id = await approvedMovement(deps, nativeTransferPlan('after-restart', { to, value_wei: '1000', confirmations: 1 }), { asset: 'ETH', amount: '1' });
  await drain(deps);
  const waiting = await snapshot(db.pool, id);
  assert.equal(waiting.movement.request_state, 'EXECUTING');
  assert.equal(waiting.byKey.pay.node_state, 'OBSERVING', 'the transfer waits in the mempool');
  assert.equal(waiting.byKey.pay.provider_state, 'broadcast');
  assert.equal(waiting.byKey.pay.provider_refs.nonce, 2, 'the nonce after the last one the old chain used');

  // Not yet past the threshold: nothing.
  assert.equal((await reap(nonces)).disagreements, 0);
  await backdate(db.pool);
  const report = await reap(nonces);
  assert.equal(report.disagreements, 1);
  const [raised] = await disagreements(db.pool);
  assert.equal(raised!.kind, 'nonce_gap');
  assert.equal(raised!.chain_latest_nonce, 0);
  assert.equal(raised!.lowest_open_nonce, 2);
  assert.deepEqual(raised!.movements, [id]);
  const warning = lines.find((l) => l.kind === 'nonce_gap');
  assert.ok(warning, 'a warning is logged');
  assert.equal(warning!.level, 40);
  assert.match(String(warning!.msg), /next nonce .* is 0, Ferry's lowest open nonce is 2/);
  assert.ok((await callbacksForMovement(db.pool, id)).some((c) => c.event_type === 'request_attention'), 'the movement asks for attention');
  // Once per row, not at every run.
  assert.equal((await reap(nonces)).disagreements, 0);
  assert.equal((await disagreements(db.pool)).length, 1);

  // The operator's cancel says why it cannot settle either: the cancel waits behind the same gap.
  const tokens = await createTokens(db.pool, { operator: 'operator' });
  const call = callerFor(createApp({ pool: db.pool, config: deps.config, runtime: { deps, boss: null } as unknown as ApiRuntime }), tokens);
  const r = await call('POST', `/v3/movements/${id}/cancel`, 'operator', {});
  expectStatus(r, 200);
  const cancel = (await snapshot(db.pool, id)).byKey.pay.provider_refs.cancel as Record<string, unknown>;
  assert.match(String(cancel.error_detail), /next nonce .* is 0: neither the transfer nor its cancel at nonce 2 can be mined/);
});

test('a reservation above the chain\'s pending nonce for longer than the threshold is reported as reservation_ahead', async (t) => {
  const db = await scratchDatabase(t);
  const nonces = new EvmNonceManager(db.pool);
  const anvil = await startAnvil();
  t.after(() => anvil.stop());
  evmDeps(db.pool, anvil.url, nonces); // registers the wallet
  const reserved = await nonces.reserve({ chainId: ANVIL_CHAIN_ID, sender: ANVIL_DEV_ADDRESS, requestNodeId: '00000000-0000-4000-8000-000000000001', attemptNo: 1 }, 0);
  assert.equal(reserved, 0);
  assert.equal((await reap(nonces)).disagreements, 0);
  await backdate(db.pool);
  assert.equal((await reap(nonces)).disagreements, 1);
  const [raised] = await disagreements(db.pool);
  assert.equal(raised!.kind, 'reservation_ahead');
  assert.deepEqual(raised!.movements, []);
});
