import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import pino from 'pino';
import type { Hex } from 'viem';
import { findSweep } from '../src/sweeps/sweeps.ts';
import { runCexTransferIngest } from '../src/sweeps/cex-transfer-ingest.ts';
import { loadConfig, type FerryConfig } from '../src/config.ts';
import { createCexAccount } from '../src/executors/cex/client.ts';
import { listForeignTransfers } from '../src/persistence/cex-transfers.ts';
import { createApp } from '../src/http/app.ts';
import { createToken } from '../src/persistence/tokens.ts';
import { startBinanceEmulator, type BinanceEmulator } from './emulators/binance.ts';
import { ANVIL_DEV_ADDRESS, freshAddress, startAnvil, type Anvil } from './helpers/anvil.ts';
import { testDatabase } from './helpers/db.ts';
import { seedMovement, singleNodeTemplate } from './helpers/fixtures.ts';

/**
 * cex_transfer_ingest against the Binance emulator (signed capital/deposit/hisrec and
 * capital/withdraw/history through ccxt): a deposit no movement made is recorded once across two
 * runs, with an audit event; a withdrawal a movement's node made (its withdrawOrderId) is not; a
 * withdrawal made by someone else on the account is.
 */

const CREDS = { INGEST_KEY: 'ingest-api-key-0123456789abcdefghijklmnopqrstuvwxyzAB', INGEST_SECRET: 'ingest-api-secret-ZYXWVUTSRQPONMLKJIHGFEDCBA98765432' };
const db = await testDatabase();
const silent = pino({ level: 'silent' });
let anvil: Anvil;
let ex: BinanceEmulator;
const depositAddress = freshAddress();
let paid = 0;

before(async () => {
  anvil = await startAnvil();
  ex = await startBinanceEmulator({
    ...{ apiKey: CREDS.INGEST_KEY, apiSecret: CREDS.INGEST_SECRET },
    rpcUrl: anvil.url,
    depositAddress,
    balances: { ETH: '100' },
    // Payouts are not this test's business: a made-up hash per withdrawal.
    payout: async () => `0x${(++paid).toString(16).padStart(64, '0')}` as Hex,
  });
});
after(async () => {
  await ex?.stop();
  await anvil?.stop();
});

function configFor(): FerryConfig {
  const base = loadConfig({ FERRY_DATA_DIR: '.ferry/test-cex-ingest', FERRY_CEX_TRANSFER_INGEST_VENUES: 'ex1' });
  return {
    ...base,
    file: { ...base.file, cex: { accounts: [{ key: 'ex1', exchange: 'binance', base_url: ex.url, api_key_env: 'INGEST_KEY', api_secret_env: 'INGEST_SECRET', timeout_ms: 5000, networks: {} } as never] } },
  };
}

test('a foreign deposit is recorded once across two runs; the withdrawal a movement made is not; another withdrawal is', async () => {
  const config = configFor();
  assert.equal(findSweep('cex_transfer_ingest').settings(config).enabled, true);
  assert.equal(findSweep('cex_transfer_ingest').settings(loadConfig({ FERRY_DATA_DIR: '.ferry/x' })).enabled, false, 'off without venues');

  // Someone sends ETH to the exchange's deposit address: no movement made it.
  const txHash = (await anvil.rpc('eth_sendTransaction', [{ from: ANVIL_DEV_ADDRESS, to: depositAddress, value: '0xde0b6b3a7640000' }])) as string;
  await anvil.rpc('evm_mine', []);

  // A withdrawal a movement's CEX node made: its withdrawOrderId is the node's.
  const movement = await seedMovement(db.pool, singleNodeTemplate('ingest-own', 'action', 'cex_withdrawal'));
  const requestId = movement.movement.id;
  const ownOrderId = `ferry-own-${requestId.slice(0, 8)}:1`;
  await db.pool.query(`UPDATE request_nodes SET provider_refs = jsonb_build_object('withdraw_order_id', $2::text) WHERE request_id = $1`, [requestId, ownOrderId]);
  const accounts = new Map([['ex1', createCexAccount(config.file.cex.accounts[0]!, CREDS)]]);
  const account = accounts.get('ex1')!;
  const client = await account.client();
  for (const orderId of [ownOrderId, 'someone-else-1']) {
    account.approved.set(orderId, { coin: 'ETH', network: 'ETH', amount: '0.5' });
    await client.withdraw('ETH', 0.5, freshAddress(), undefined, { network: 'ETH', withdrawOrderId: orderId });
    account.approved.delete(orderId);
  }
  assert.equal(ex.withdrawals.length, 2);

  const first = await runCexTransferIngest({ pool: db.pool, config, log: silent, accounts });
  assert.deepEqual(first.failed, []);
  assert.equal(first.own, 1, 'the movement\'s withdrawal is Ferry\'s own');
  assert.equal(first.recorded, 2);
  const rows = await listForeignTransfers(db.pool, { limit: 10 });
  const deposit = rows.find((r) => r.direction === 'deposit')!;
  assert.equal(deposit.venue, 'ex1');
  assert.equal(deposit.asset, 'ETH');
  assert.equal(Number(deposit.amount), 1);
  assert.equal(deposit.tx_id?.toLowerCase(), txHash.toLowerCase());
  assert.equal(deposit.network, 'ETH');
  const withdrawal = rows.find((r) => r.direction === 'withdrawal')!;
  assert.equal(Number(withdrawal.amount), 0.5);
  assert.equal(withdrawal.provider_id, ex.withdrawals.find((w) => w.withdrawOrderId === 'someone-else-1')!.id);
  assert.equal(rows.filter((r) => r.direction === 'withdrawal').length, 1, 'the own withdrawal is not recorded');

  const second = await runCexTransferIngest({ pool: db.pool, config, log: silent, accounts });
  assert.equal(second.seen, 3);
  assert.equal(second.recorded, 0, 'nothing is recorded twice');
  assert.equal((await listForeignTransfers(db.pool, { limit: 10 })).length, 2);
  const audit = await db.pool.query(`SELECT count(*)::int AS n FROM audit_outbox WHERE action = 'cex.foreign_transfer'`);
  assert.equal(audit.rows[0].n, 2, 'one attention event per transfer');
  assert.ok(ex.requests.some((r) => r.path === '/sapi/v1/capital/deposit/hisrec' && r.status === 200));

  // Shown in /v3.
  const viewer = (await createToken(db.pool, { name: 'ingest-viewer', role: 'viewer' })).token;
  const app = createApp({ pool: db.pool, config });
  const res = await app.request('/v3/cex-transfers?venue=ex1', { headers: { authorization: `Bearer ${viewer}` } });
  assert.equal(res.status, 200);
  const body = (await res.json()) as { transfers: Array<Record<string, unknown>> };
  assert.deepEqual(body.transfers.map((t) => t.direction).sort(), ['deposit', 'withdrawal']);
  assert.equal(String(body.transfers.find((t) => t.direction === 'deposit')!.tx_id).toLowerCase(), txHash.toLowerCase());
  const bad = await app.request('/v3/cex-transfers?venue=%20', { headers: { authorization: `Bearer ${viewer}` } });
  assert.equal(bad.status, 400);
  assert.ok(ex.requests.some((r) => r.path === '/sapi/v1/capital/withdraw/history' && r.status === 200));
});
