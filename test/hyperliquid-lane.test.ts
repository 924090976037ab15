import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { erc20Abi, type Address, type Hex, type PublicClient } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { parseConfigFile } from '../src/config-file.ts';
import { deriveExpectedEffect } from '../src/executors/evm/expected-effect.ts';
import { artifactsOfNodes } from '../src/persistence/artifacts.ts';
import type { Pool } from '../src/persistence/db.ts';
import type { WorkerDeps } from '../src/actors/execution.ts';
import { ANVIL_CHAIN_ID, ANVIL_DEV_KEY, freshAddress, type Anvil } from './helpers/anvil.ts';
import { sendCall, tokenBalance, usdcChainForFile, type DeployedToken } from './helpers/contracts.ts';
import { scratchDatabase } from './helpers/db.ts';
import { hyperliquidDeps, topupPlan } from './helpers/hyperliquid.ts';
import { approvedMovement, backdateNodes, drain, snapshot } from './helpers/runtime.ts';
import { waitFor } from './helpers/wait.ts';
import { startHyperliquidInfo, type HyperliquidInfoEmulator } from './emulators/hyperliquid-info.ts';

/**
 * exec.hyperliquid.topup and exec.observe.hyperliquid_credit against a real anvil standing in for
 * Arbitrum, a test USDC, and the emulated info API (test/emulators/hyperliquid-info.ts), which
 * credits the sender only for transfers of at least 5 USDC to the bridge address, as Hyperliquid does.
 */

let anvil: Anvil;
let chain: PublicClient;
let usdc: DeployedToken;
let info: HyperliquidInfoEmulator;
const bridge = freshAddress().toLowerCase() as Address;

usdcChainForFile(async (local) => {
  ({ anvil, chain, usdc } = local);
  info = await startHyperliquidInfo({ chain, token: usdc.address, bridge, creditDelayMs: 1500, pollMs: 100 });
});
after(() => info?.stop());

async function hotWallet(usdcUnits: bigint): Promise<{ key: Hex; address: Address }> {
  const key = generatePrivateKey();
  const address = privateKeyToAccount(key).address;
  await anvil.rpc('anvil_setBalance', [address, '0x56BC75E2D63100000']);
  await sendCall(chain, anvil.url, ANVIL_DEV_KEY, usdc, 'mint', [address, usdcUnits]);
  return { key, address };
}

async function laneDeps(pool: Pool, wallet: { key: Hex }): Promise<WorkerDeps> {
  return hyperliquidDeps(
    pool,
    {
      chains: [{ chain_id: ANVIL_CHAIN_ID, name: 'arbitrum-local', rpc_url: anvil.url, poll_seconds: 0.001 }],
      signers: [{ key: 'hot_1', kind: 'local_key', private_key_env: 'HOT_1_KEY', chains: [ANVIL_CHAIN_ID] }],
      tokens: [{ chain_id: ANVIL_CHAIN_ID, symbol: 'USDC', address: usdc.address, decimals: 6 }],
    },
    { chain_id: ANVIL_CHAIN_ID, bridge, info_url: info.url, token: 'USDC', poll_seconds: 1 },
    { FERRY_SUBMITTING_GRACE_SECONDS_BY_LANE: 'hyperliquid=0.001', HOT_1_KEY: wallet.key },
  );
}

const depositsFrom = (from: Address) =>
  chain.getContractEvents({ address: usdc.address, abi: erc20Abi, eventName: 'Transfer', args: { from, to: bridge }, fromBlock: 0n, toBlock: 'latest' });

test('a top-up runs to COMPLETED: one Transfer to the bridge with the exact amount, credited, observed over the baseline', async (t) => {
  const db = await scratchDatabase(t);
  const wallet = await hotWallet(100_000_000n);
  // The account already holds 3 USDC on Hyperliquid: the credit is measured over it.
  info.setWithdrawable(wallet.address, 3_000_000n);
  const deps = await laneDeps(db.pool, wallet);
  const id = await approvedMovement(deps, topupPlan('hl-topup-ok', 'hot_1'), { asset: 'USDC', amount: '12.5' });

  await drain(deps);
  let s = await snapshot(db.pool, id);
  assert.equal(s.byKey.topup.node_state, 'COMPLETED');
  assert.notEqual(s.byKey.credit.node_state, 'COMPLETED', 'not credited yet: the credit comes after a delay');
  assert.equal(info.credits.filter((c) => c.user === wallet.address.toLowerCase()).length, 0);

  await waitFor('the emulated validators to credit the deposit', () => info.credits.find((c) => c.user === wallet.address.toLowerCase()) ?? null);
  await backdateNodes(db.pool, [id], 'next_observe_at', 60);
  await drain(deps);
  s = await snapshot(db.pool, id);
  assert.equal(s.movement.request_state, 'COMPLETED');
  assert.equal(s.byKey.credit.node_state, 'COMPLETED');

  const logs = await depositsFrom(wallet.address);
  assert.equal(logs.length, 1, 'exactly one deposit');
  assert.equal(logs[0].args.value, 12_500_000n);
  assert.equal(logs[0].transactionHash, s.byKey.topup.provider_refs.tx_hash);
  assert.equal(await tokenBalance(chain, usdc, bridge), 12_500_000n);
  assert.equal(info.withdrawable(wallet.address), 15_500_000n, 'credited to the sending address');

  const prepared = JSON.parse((await artifactsOfNodes(db.pool, [s.byKey.topup.id])).find((a) => a.artifact_type === 'prepared_action')!.content_inline!);
  assert.equal(prepared.provider_hints.to, bridge);
  assert.equal(prepared.provider_hints.baseline_withdrawable, '3.0', 'the baseline read before submit');
  assert.equal(s.byKey.credit.provider_refs.baseline_withdrawable, '3.0');
  assert.equal(s.byKey.credit.provider_refs.withdrawable, '15.5');
  assert.equal(s.byKey.credit.provider_refs.credited, '12.5');
});

test('4 USDC is refused before anything is signed: it would never be credited', async (t) => {
  const db = await scratchDatabase(t);
  const wallet = await hotWallet(100_000_000n);
  const deps = await laneDeps(db.pool, wallet);
  const ids = [];
  for (const amount of ['4', '4.999999']) ids.push(await approvedMovement(deps, topupPlan(`hl-topup-small-${amount}`, 'hot_1'), { asset: 'USDC', amount }));
  await drain(deps);
  for (const id of ids) {
    const node = (await snapshot(db.pool, id)).byKey.topup;
    assert.equal(node.node_state, 'FAILED');
    assert.equal(node.error_code, 'HYPERLIQUID_DEPOSIT_BELOW_MINIMUM');
    assert.match(node.error_detail!, /minimum of 5/);
    const kinds = (await artifactsOfNodes(db.pool, [node.id])).map((a) => a.artifact_type);
    assert.ok(!kinds.includes('signature') && !kinds.includes('prepared_action'), 'nothing was prepared or signed');
    const signing = await db.pool.query(`SELECT count(*)::int AS n FROM transitions WHERE entity_id = $1 AND to_state = 'AWAITING_SIGNATURE'`, [node.id]);
    assert.equal(signing.rows[0].n, 0, 'the node never asked for a signature');
  }
  assert.equal(await chain.getTransactionCount({ address: wallet.address }), 0, 'no transaction from the wallet');
  assert.equal((await depositsFrom(wallet.address)).length, 0);
});

test('a node naming another recipient is refused; the signer signs only the transfer to the bridge', async (t) => {
  const db = await scratchDatabase(t);
  const wallet = await hotWallet(100_000_000n);
  const deps = await laneDeps(db.pool, wallet);
  const id = await approvedMovement(deps, topupPlan('hl-topup-elsewhere', 'hot_1', { to: freshAddress() }), { asset: 'USDC', amount: '10' });
  await drain(deps);
  const node = (await snapshot(db.pool, id)).byKey.topup;
  assert.equal(node.node_state, 'FAILED');
  assert.equal(node.error_code, 'HYPERLIQUID_INVALID_CONFIG');
  assert.equal(await chain.getTransactionCount({ address: wallet.address }), 0);
});

test('the hyperliquid section is validated: its chain and token must be the EVM lane\'s', () => {
  const evm = `evm:\n  chains:\n    - chain_id: 31337\n      rpc_url: http://127.0.0.1:9\n  tokens:\n    - chain_id: 31337\n      symbol: USDC\n      address: "0x0000000000000000000000000000000000000001"\n      decimals: 6\n`;
  const hl = (extra: string) => `${evm}hyperliquid:\n  bridge: "0x2df1c51e09aecf9cacb7bc98cb1742757f163df7"\n  info_url: http://127.0.0.1:9/info\n${extra}`;
  const ok = parseConfigFile(hl('  chain_id: 31337\n'));
  assert.equal(ok.ok, true);
  assert.equal((ok as { file: { hyperliquid: { token: string } } }).file.hyperliquid.token, 'USDC', 'USDC by default');
  const wrongChain = parseConfigFile(hl('  chain_id: 42161\n'));
  assert.equal(wrongChain.ok, false);
  assert.match((wrongChain as { reason: string }).reason, /hyperliquid\.chain_id: chain 42161 is not in evm\.chains/);
  const wrongToken = parseConfigFile(hl('  chain_id: 31337\n  token: USDT\n'));
  assert.match((wrongToken as { reason: string }).reason, /hyperliquid\.token: USDT is not listed/);
  assert.equal(parseConfigFile(hl('  chain_id: 31337\n  bridge_fee: 1\n')).ok, false, 'unknown fields are refused');
  assert.equal(parseConfigFile(`${evm}hyperliquid:\n  chain_id: 31337\n  bridge: "0x12"\n  info_url: http://127.0.0.1:9/info\n`).ok, false, 'a bridge that is not an address');
});

test('the emulated info API refuses malformed bodies with a 4xx and answers decimal strings', async () => {
  const post = (body: string) => fetch(info.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  assert.equal((await post('not json')).status, 400);
  assert.equal((await post(JSON.stringify({ type: 'clearinghouseState' }))).status, 422);
  assert.equal((await post(JSON.stringify({ type: 'nope', user: freshAddress() }))).status, 422);
  const bad = await post(JSON.stringify({ type: 'clearinghouseState', user: '0x12' }));
  assert.equal(bad.status, 422);
  assert.ok('msg' in ((await bad.json()) as object));
  const good = (await (await post(JSON.stringify({ type: 'clearinghouseState', user: freshAddress() }))).json()) as Record<string, unknown>;
  assert.equal(good.withdrawable, '0.0');
  assert.equal(typeof good.time, 'number');
  assert.equal((good.marginSummary as Record<string, unknown>).accountValue, '0.0');
});

test("the signer's expected effect of a top-up comes from the hyperliquid section: the token's transfer to the bridge, on the bridge's chain", () => {
  const token = '0x00000000000000000000000000000000000000aa';
  const evm = {
    chains: [{ chain_id: 42161, rpc_url: 'http://127.0.0.1:9', max_fee_per_gas_cap_wei: '1000' }],
    signers: [],
    watch: [],
    tokens: [{ chain_id: 42161, symbol: 'USDC', address: token, decimals: 6 }],
    fee_caps: [],
  } as never;
  const hl = { chain_id: 42161, bridge: '0x2df1c51e09aecf9cacb7bc98cb1742757f163df7', info_url: 'http://127.0.0.1:9/info', token: 'USDC', poll_seconds: 5, timeout_ms: 10_000 };
  const planOf = (config: Record<string, unknown>, signer: unknown = 'hot_1') => ({
    nodes: [{ node_key: 'topup', executor_binding: 'exec.hyperliquid.topup', signer_binding: signer, config }],
  });
  const derive = (config: Record<string, unknown>, hyperliquid: typeof hl | null = hl, signer?: unknown) =>
    deriveExpectedEffect({ plan: planOf(config, signer), nodeKey: 'topup', intent: { asset: 'USDC', amount: '12.5' }, evm, hyperliquid });
  assert.deepEqual(derive({}), {
    ok: true,
    effect: { chain_id: 42161, asset: token, to: hl.bridge, amount_base_units: '12500000', token_method: 'transfer', token_decimals: 6, token_symbol: 'USDC', max_fee_per_gas_cap_wei: '1000' },
  });
  const reason = (r: ReturnType<typeof derive>) => (r.ok ? '' : r.reason);
  assert.match(reason(derive({}, null)), /no hyperliquid section/);
  assert.match(reason(derive({ to: freshAddress() })), /is not the bridge/);
  assert.match(reason(derive({ token: 'USDT' })), /is not USDC/);
  assert.match(reason(derive({}, hl, { signer_key: 'hot_1', chain_id: 1 })), /pins chain 1, the bridge is on chain 42161/);
});
