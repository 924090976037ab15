import assert from 'node:assert/strict';
import type { Exchange } from 'ccxt';
import { after, before, test } from 'node:test';
import { createPublicClient, http, parseEther, type PublicClient } from 'viem';
import type { WorkerDeps } from '../src/actors/execution.ts';
import type { CexAccountConfig } from '../src/config-file.ts';
import { loadCcxt } from '../src/executors/cex/client.ts';
import { CEX_WITHDRAWAL_ACTION_KEY, createCexLane } from '../src/executors/cex/index.ts';
import type { PreparedAction } from '../src/executors/protocol.ts';
import type { Pool } from '../src/persistence/db.ts';
import { ANVIL_DEV_KEY, freshAddress, startAnvil, type Anvil } from './helpers/anvil.ts';
import { scratchDatabase } from './helpers/db.ts';
import { approvedMovement, drain, plan, runtimeDeps, snapshot } from './helpers/runtime.ts';
import { waitFor } from './helpers/wait.ts';
import { startBinanceEmulator, type BinanceEmulator } from './emulators/binance.ts';

/**
 * Withdrawals on a coin with several networks of different withdraw steps, checked with ccxt's own
 * currency data (parsed by ccxt from the emulator's capital/config/getall, in Binance's shape):
 * ccxt reads `params.network` as its unified code (BEP20), and given the exchange's id (BSC) it
 * silently truncates to the coarsest step of any network of the coin. The exchange must receive
 * exactly the approved amount, on the network named, or nothing at all.
 */

const CREDS = { NET_KEY: 'net-api-key-0123456789abcdefghijklmnopqrstuvwxyzABCDEF', NET_SECRET: 'net-api-secret-ZYXWVUTSRQPONMLKJIHGFEDCBA9876543210' };
const APPLY = '/sapi/v1/capital/withdraw/apply';
// USDT as four networks, paid on the local chain like any other (decimals 18 for the emulator's ledger).
const USDT_NETWORKS = [
  { network: 'ETH', name: 'Ethereum (ERC20)', isDefault: true, withdrawIntegerMultiple: '0.000001', withdrawMin: '2', withdrawFee: '1' },
  { network: 'BSC', name: 'BNB Smart Chain (BEP20)', withdrawIntegerMultiple: '0.00000001', withdrawMin: '0.01', withdrawFee: '0.01' },
  { network: 'TRX', name: 'Tron (TRC20)', withdrawIntegerMultiple: '0.01', withdrawMin: '1', withdrawFee: '1' },
  { network: 'OPTIMISM', name: 'Optimism', withdrawIntegerMultiple: '0.000001', withdrawMin: '0.1', withdrawFee: '0.1', withdrawEnable: false },
];

let anvil: Anvil;
let chain: PublicClient;
let ex: BinanceEmulator;

before(async () => {
  anvil = await startAnvil();
  chain = createPublicClient({ transport: http(anvil.url, { retryCount: 0 }), cacheTime: 0 });
  ex = await startBinanceEmulator({
    apiKey: CREDS.NET_KEY,
    apiSecret: CREDS.NET_SECRET,
    rpcUrl: anvil.url,
    depositAddress: freshAddress(),
    hotWalletKey: ANVIL_DEV_KEY,
    coins: [
      { coin: 'ETH', network: 'ETH', decimals: 18 },
      { coin: 'USDT', decimals: 18, networks: USDT_NETWORKS },
    ],
    balances: { ETH: '10', USDT: '1000' },
  });
});
after(async () => {
  await ex?.stop();
  await anvil?.stop();
});

// Ferry's network names: the exchange's ids and ccxt's unified codes side by side.
const NETWORKS = { bsc: 'BSC', 'bnb-smart-chain': 'BEP20', ethereum: 'ETH', erc20: 'ERC20', tron: 'TRX', optimism: 'OP', bogus: 'NOPE' };
const account = (): CexAccountConfig => ({ key: 'net', exchange: 'binance', base_url: ex.url, api_key_env: 'NET_KEY', api_secret_env: 'NET_SECRET', timeout_ms: 5000, networks: NETWORKS });

function deps(pool: Pool): WorkerDeps {
  const base = runtimeDeps(pool, { FERRY_SUBMITTING_GRACE_SECONDS_BY_LANE: 'cex=0.001' });
  createCexLane([account()], base.executors, { env: CREDS, pollSeconds: 0 });
  return base;
}

const withdrawPlan = (key: string, network: string) =>
  plan(key, [{ node_key: 'withdraw', node_kind: 'action', action_type: 'cex_withdrawal', executor_binding: { executor_key: CEX_WITHDRAWAL_ACTION_KEY, account: 'net' }, config: { coin: 'USDT', network } }]);

async function withdrawThroughRuntime(d: WorkerDeps, key: string, network: string, amount: string, to = freshAddress()) {
  const id = await approvedMovement(d, withdrawPlan(key, network), { asset: 'USDT', amount, destination: { address: to } });
  return waitFor(`${key} to finish`, async () => {
    await drain(d);
    const s = await snapshot(d.pool, id);
    return ['COMPLETED', 'FAILED', 'MANUAL_INTERVENTION'].includes(s.movement.request_state) ? s.byKey.withdraw : null;
  });
}

/** ccxt's implicit endpoint method, which the base Exchange type does not declare. */
type Apply = Exchange & { sapiPostCapitalWithdrawApply(req: Record<string, unknown>): Promise<unknown> };

const appliesOf = (nodeId: string) => ex.applies.filter((a) => a.withdrawOrderId?.startsWith(nodeId));

function preparedFor(payload: Record<string, unknown>): PreparedAction {
  const text = JSON.stringify({ account: 'net', coin: 'USDT', address: freshAddress(), address_tag: null, prepared_at_ms: Date.now(), ...payload });
  return { prepared_action_id: 'x', action_type: 'cex_withdrawal', payload_format: 'cex_withdrawal_json', payload: text, payload_hash: 'h', signing_required: false, provider_hints: {}, expires_at: null };
}

test("ccxt's own data from the emulator: networks keyed by unified code, each with its step; an exchange id in their place falls to the coarsest step", async () => {
  const ccxt = await loadCcxt();
  const client = new ccxt.binance({ apiKey: CREDS.NET_KEY, secret: CREDS.NET_SECRET, options: { fetchMargins: false, fetchMarkets: { types: ['spot'] }, adjustForTimeDifference: false } });
  for (const [name, url] of Object.entries(client.urls.api as Record<string, string>)) (client.urls.api as Record<string, string>)[name] = ex.url + new URL(url).pathname;
  await client.loadMarkets();
  const usdt = client.currencies.USDT!;
  assert.deepEqual(Object.keys(usdt.networks).sort(), ['BEP20', 'ERC20', 'OP', 'TRC20']);
  assert.deepEqual(
    Object.fromEntries(Object.entries(usdt.networks).map(([code, n]) => [code, [n.id, n.precision, n.withdraw]])),
    { ERC20: ['ETH', 0.000001, true], BEP20: ['BSC', 1e-8, true], TRC20: ['TRX', 0.01, true], OP: ['OPTIMISM', 0.000001, false] },
  );
  assert.equal(client.networkIdToCode('BSC', 'USDT'), 'BEP20');
  assert.equal(client.networkCodeToId('BEP20', 'USDT'), 'BSC');
  // The pitfall this lane guards against, in ccxt's own rounding.
  assert.equal(client.currencyToPrecision('USDT', '1.12345678' as never, 'BEP20'), '1.12345678');
  assert.equal(client.currencyToPrecision('USDT', '1.12345678' as never, 'BSC'), '1.12');

  // And the emulator refuses what Binance refuses, whatever client sends it.
  const addr = freshAddress();
  const apply = (p: Record<string, string>) => client.sapiPostCapitalWithdrawApply({ coin: 'USDT', address: addr, ...p });
  await assert.rejects(apply({ network: 'TRX', amount: '1.123' }), /-4021/);
  await assert.rejects(apply({ network: 'BSC', amount: '0.005' }), /-4022/);
  await assert.rejects(apply({ network: 'OPTIMISM', amount: '1' }), /-4019/);
  await assert.rejects(apply({ network: 'SOL', amount: '1' }), /-4019/);
  assert.equal(ex.withdrawals.length, 0);
});

test('1.12345678 USDT goes out exactly on BSC (step 1e-8), named by the exchange id BSC and by the unified code BEP20', async (t) => {
  const db = await scratchDatabase(t);
  const d = deps(db.pool);
  for (const [key, network] of [['usdt-bsc-id', 'bsc'], ['usdt-bsc-code', 'bnb-smart-chain']] as const) {
    const to = freshAddress();
    const w = await withdrawThroughRuntime(d, key, network, '1.12345678', to);
    assert.equal(w.node_state, 'COMPLETED', `${key}: ${w.error_code} ${w.error_detail}`);
    const sent = ex.withdrawalsByOrderId(String(w.provider_refs.withdraw_order_id));
    assert.equal(sent.length, 1);
    assert.equal(sent[0]!.network, 'BSC');
    assert.equal(sent[0]!.amount, '1.12345678', 'the exchange received the approved amount');
    assert.equal(w.provider_refs.amount, '1.12345678', 'provider_refs.amount is what went on the wire');
    assert.equal(w.provider_refs.network, 'BSC');
    assert.equal(w.provider_refs.network_code, 'BEP20');
    await ex.settled();
    assert.equal(await chain.getBalance({ address: to }), parseEther('1.12345678'), 'paid on chain, to the wei');
  }
});

test('an amount the network would round is refused before any withdrawal (CEX_AMOUNT_PRECISION), with network, step, approved and would-send', async (t) => {
  const db = await scratchDatabase(t);
  const d = deps(db.pool);
  const tron = await withdrawThroughRuntime(d, 'usdt-trx', 'tron', '1.12345678');
  assert.equal(tron.node_state, 'FAILED');
  assert.equal(tron.error_code, 'CEX_AMOUNT_PRECISION');
  assert.match(tron.error_detail!, /1\.12345678 is not a multiple of the withdraw step 0\.01 of USDT on TRC20 \(id TRX\).*ccxt would send 1\.12/);
  assert.equal(appliesOf(tron.id).length, 0, 'the exchange saw no withdraw/apply');
  // Nine decimals on BSC: ccxt would truncate to eight.
  const nine = await withdrawThroughRuntime(d, 'usdt-bsc-9', 'bsc', '1.123456789');
  assert.equal(nine.error_code, 'CEX_AMOUNT_PRECISION');
  assert.match(nine.error_detail!, /would send 1\.12345678/);
  assert.equal(appliesOf(nine.id).length, 0);

  // submit() checks again with the currencies it holds, whatever the prepared action says.
  const lane = createCexLane([account()], undefined, { env: CREDS })!;
  const [action] = lane.executors;
  const before = ex.applies.length;
  const r = await action.submit({} as never, preparedFor({ network: 'TRX', network_code: 'TRC20', amount: '1.12345678', withdraw_order_id: `trx-${Date.now()}` }));
  assert.equal(r.next_state, 'FAILED');
  assert.equal(r.error_code, 'CEX_AMOUNT_PRECISION');
  assert.deepEqual([r.provider_refs.network, r.provider_refs.network_code, r.provider_refs.precision, r.provider_refs.approved, r.provider_refs.would_send], ['TRX', 'TRC20', '0.01', '1.12345678', '1.12']);
  // An older payload with the exchange id only: resolved to its network, still refused.
  const legacy = await action.submit({} as never, preparedFor({ network: 'TRX', amount: '5.555', withdraw_order_id: `trx-legacy-${Date.now()}` }));
  assert.equal(legacy.error_code, 'CEX_AMOUNT_PRECISION');
  assert.equal(ex.applies.length, before, 'nothing reached the exchange');
});

test("the client's last guard: a withdraw/apply whose amount differs from the approved one never leaves (ccxt altering it after the check)", async () => {
  const lane = createCexLane([account()], undefined, { env: CREDS })!;
  const [action] = lane.executors;
  const client = (await lane.accounts.get('net')!.client()) as Apply;
  const orig = client.sapiPostCapitalWithdrawApply.bind(client);
  // Stands in for any change between Ferry's check and the wire (ccxt's rounding, a version upgrade).
  client.sapiPostCapitalWithdrawApply = (req: Record<string, unknown>) => orig({ ...req, amount: '1.12' });
  const before = ex.applies.length;
  const orderId = `guard-${Date.now()}`;
  const r = await action.submit({} as never, preparedFor({ network: 'BSC', network_code: 'BEP20', amount: '1.12345678', withdraw_order_id: orderId }));
  assert.equal(r.next_state, 'FAILED');
  assert.equal(r.error_code, 'CEX_AMOUNT_PRECISION');
  assert.deepEqual([r.provider_refs.approved, r.provider_refs.would_send], ['1.12345678', '1.12']);
  assert.equal(ex.applies.length, before, 'no request reached the exchange');
  assert.equal(lane.accounts.get('net')!.approved.size, 0, 'the approval ends with the call');
  // A withdraw/apply that submit() did not approve is refused too.
  await assert.rejects(orig({ coin: 'USDT', network: 'BSC', amount: '1', address: freshAddress(), withdrawOrderId: 'nobody-approved-this' }), (err: Error & { code?: string }) => err.code === 'CEX_WITHDRAWAL_UNAPPROVED');
  assert.equal(ex.applies.length, before);
});

test('below the network minimum, a disabled network, an unknown name: refused with their codes, naming the network or the config entry; nothing withdrawn', async (t) => {
  const db = await scratchDatabase(t);
  const d = deps(db.pool);
  const before = ex.applies.length;
  // 1.5 is enough on BSC (minimum 0.01) but not on ERC20 (minimum 2), named by its unified code.
  const low = await withdrawThroughRuntime(d, 'usdt-low', 'erc20', '1.5');
  assert.equal(low.error_code, 'CEX_AMOUNT_BELOW_MINIMUM');
  assert.match(low.error_detail!, /1\.5 is below the minimum withdrawal 2 of USDT on ERC20 \(id ETH\)/);
  const off = await withdrawThroughRuntime(d, 'usdt-op', 'optimism', '1');
  assert.equal(off.error_code, 'CEX_WITHDRAW_DISABLED');
  assert.match(off.error_detail!, /USDT on OP \(id OPTIMISM\)/);
  const bogus = await withdrawThroughRuntime(d, 'usdt-bogus', 'bogus', '1');
  assert.equal(bogus.error_code, 'CEX_NETWORK_UNKNOWN');
  assert.match(bogus.error_detail!, /^cex\.accounts net networks\.bogus \(NOPE\) is no network of USDT on net, which lists .*BEP20 \(id BSC\)/);
  for (const w of [low, off, bogus]) assert.equal(w.node_state, 'FAILED');
  assert.equal(ex.applies.length, before, 'the exchange saw no withdraw/apply');
  // Without a network: the coin's default (ERC20), named explicitly so ccxt rounds with its step.
  const dflt = await approvedMovement(d, plan('usdt-default', [{ node_key: 'withdraw', node_kind: 'action', action_type: 'cex_withdrawal', executor_binding: { executor_key: CEX_WITHDRAWAL_ACTION_KEY, account: 'net' }, config: { coin: 'USDT' } }]), { asset: 'USDT', amount: '2.123456', destination: { address: freshAddress() } });
  const s = await waitFor('the default-network withdrawal', async () => {
    await drain(d);
    const x = await snapshot(db.pool, dflt);
    return x.movement.request_state === 'COMPLETED' ? x : null;
  });
  assert.deepEqual([s.byKey.withdraw.provider_refs.network, s.byKey.withdraw.provider_refs.amount], ['ETH', '2.123456']);
  assert.equal(ex.withdrawalsByOrderId(String(s.byKey.withdraw.provider_refs.withdraw_order_id))[0]!.amount, '2.123456');
});

test("the exchange's own refusals map to the same codes when they come (-4021, -4022, -4019)", async () => {
  const { classifyCexError } = await import('../src/executors/cex/errors.ts');
  const ccxt = await loadCcxt();
  // Through the real client: an apply for a suspended network that Ferry's own checks would have
  // caught is sent straight to the emulator by bypassing them (the guard lets it through: approved).
  const lane = createCexLane([account()], undefined, { env: CREDS })!;
  const acct = lane.accounts.get('net')!;
  const client = (await acct.client()) as Apply;
  await client.loadMarkets();
  for (const [network, amount, code] of [['OPTIMISM', '1', 'CEX_WITHDRAW_DISABLED'], ['TRX', '1.123', 'CEX_AMOUNT_PRECISION'], ['BSC', '0.005', 'CEX_AMOUNT_BELOW_MINIMUM']] as const) {
    const withdrawOrderId = `raw-${network}-${Date.now()}`;
    acct.approved.set(withdrawOrderId, { coin: 'USDT', network, amount });
    try {
      const err = await client.sapiPostCapitalWithdrawApply({ coin: 'USDT', network, amount, address: freshAddress(), withdrawOrderId }).then(
        () => assert.fail('accepted'),
        (e: unknown) => e,
      );
      assert.ok(err instanceof ccxt.BaseError);
      assert.equal(classifyCexError(err, acct).code, code);
    } finally {
      acct.approved.delete(withdrawOrderId);
    }
  }
  assert.ok(ex.requests.some((r) => r.path === APPLY && r.status === 400));
});

test('exact decimals, and the resolution rule: one network per value, or a refusal naming the candidates', async () => {
  const { addDecimal, compareDecimal, decimalOf, isMultipleOf, sameDecimal } = await import('../src/executors/cex/decimal.ts');
  assert.deepEqual([addDecimal('8.91', '0.09'), addDecimal('1', '0.00000001'), addDecimal('0.5', '0.5'), addDecimal('x', '1')], ['9.00', '1.00000001', '1.0', null]);
  const { checkWithdrawal, resolveNetwork } = await import('../src/executors/cex/networks.ts');
  assert.ok(isMultipleOf('1.12345678', '0.00000001') && !isMultipleOf('1.123456789', '0.00000001') && !isMultipleOf('1.125', '0.01') && isMultipleOf('3', '0.5'));
  assert.ok(!isMultipleOf('1', '0'), 'a zero step is no step');
  assert.ok(sameDecimal('1.10', '1.1') && !sameDecimal('1.12345678', '1.123456780000001'));
  assert.equal(compareDecimal('0.9999999999999999999', '1'), -1);
  assert.deepEqual([decimalOf(1e-8), decimalOf(0.000001), decimalOf(0.1), decimalOf(10), decimalOf('1e-8')], ['0.00000001', '0.000001', '0.1', '10', undefined]);

  const lane = createCexLane([account()], undefined, { env: CREDS })!;
  const acct = lane.accounts.get('net')!;
  // A value that is one network's code and another's id matches two networks: refused, not guessed.
  const stub = {
    currencies: { XYZ: { networks: { AAA: { id: 'BBB', withdraw: true, precision: 0.01 }, BBB: { id: 'CCC', withdraw: true, precision: 0.01 } } } },
    networkCodeToId: (v: string) => v,
    networkIdToCode: (v: string) => v,
  } as unknown as Exchange;
  const ambiguous = resolveNetwork(stub, acct, 'XYZ', 'BBB');
  assert.ok(!ambiguous.ok && ambiguous.code === 'CEX_NETWORK_AMBIGUOUS' && /AAA \(id BBB\), BBB \(id CCC\)/.test(ambiguous.detail));
  // ccxt sending another id for the code than the exchange lists: refused.
  const skewed = { ...stub, networkCodeToId: () => 'ZZZ' } as unknown as Exchange;
  const mismatch = resolveNetwork(skewed, acct, 'XYZ', 'AAA', { direct: true });
  assert.ok(!mismatch.ok && mismatch.code === 'CEX_NETWORK_MISMATCH');
  // Two networks and none marked default: the node must name one.
  const none = resolveNetwork(stub, acct, 'XYZ', null);
  assert.ok(!none.ok && none.code === 'CEX_NETWORK_MISSING');

  // With ccxt's data from the emulator: every spelling of BSC lands on BEP20, and ERC20's maximum is checked.
  const client = await acct.client();
  await client.loadMarkets();
  for (const v of ['BSC', 'BEP20']) {
    const r = resolveNetwork(client, acct, 'USDT', v, { direct: true });
    assert.ok(r.ok && r.network.code === 'BEP20' && r.network.id === 'BSC' && r.network.step === '0.00000001', v);
  }
  const erc20 = resolveNetwork(client, acct, 'USDT', 'ETH', { direct: true });
  assert.ok(erc20.ok && erc20.network.code === 'ERC20');
  assert.equal(checkWithdrawal(client, acct, 'USDT', erc20.network, '2000000')?.code, 'CEX_AMOUNT_ABOVE_MAXIMUM');
  assert.equal(checkWithdrawal(client, acct, 'USDT', erc20.network, '2.000001'), null);
});
