import assert from 'node:assert/strict';
import { test } from 'node:test';
import { erc20Abi, parseEventLogs, type Address, type Hex, type PublicClient } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import type { WorkerDeps } from '../src/actors/execution.ts';
import { fromBaseUnits, toBaseUnits } from '../src/executors/evm/amounts.ts';
import { EVM_ERC20_TRANSFER_KEY } from '../src/executors/evm/index.ts';
import type { SignRequest, SignResult, Signer } from '../src/executors/protocol.ts';
import { SignerRegistry } from '../src/executors/registry.ts';
import { artifactsOfNodes } from '../src/persistence/artifacts.ts';
import type { Pool } from '../src/persistence/db.ts';
import { reservationsOfWallet } from '../src/persistence/evm-nonces.ts';
import { ANVIL_CHAIN_ID, ANVIL_DEV_KEY, freshAddress, type Anvil } from './helpers/anvil.ts';
import { deployToken, sendCall, tokenBalance, usdcChainForFile, type DeployedToken } from './helpers/contracts.ts';
import { scratchDatabase } from './helpers/db.ts';
import { configuredDeps } from './helpers/evm.ts';
import { approvedMovement, dispatchUntilIdle, drain, plan, snapshot } from './helpers/runtime.ts';

/**
 * exec.evm.erc20_transfer against a real anvil and real test tokens (test/contracts, compiled
 * with solc), configured through a FERRY_CONFIG_FILE and driven by the real dispatcher, observer
 * and recovery.
 */

let anvil: Anvil;
let chain: PublicClient;
let usdc: DeployedToken;

usdcChainForFile((local) => void ({ anvil, chain, usdc } = local));

const ENV = { FERRY_SUBMITTING_GRACE_SECONDS_BY_LANE: 'evm=0.001' };

/** A fresh hot wallet: gas money, and `tokens` of each given token. */
async function hotWallet(funding: Array<[DeployedToken, bigint]> = []): Promise<{ key: Hex; address: Address }> {
  const key = generatePrivateKey();
  const address = privateKeyToAccount(key).address;
  await anvil.rpc('anvil_setBalance', [address, '0x56BC75E2D63100000']); // 100 ETH
  for (const [token, amount] of funding) await sendCall(chain, anvil.url, ANVIL_DEV_KEY, token, 'mint', [address, amount]);
  return { key, address };
}

async function laneDeps(pool: Pool, wallet: { key: Hex }, tokens: Array<Record<string, unknown>> = []): Promise<WorkerDeps> {
  return configuredDeps(
    pool,
    {
      chains: [{ chain_id: ANVIL_CHAIN_ID, name: 'local', rpc_url: anvil.url, poll_seconds: 0.001 }],
      signers: [{ key: 'hot_1', kind: 'local_key', private_key_env: 'HOT_1_KEY', chains: [ANVIL_CHAIN_ID] }],
      tokens: [{ chain_id: ANVIL_CHAIN_ID, symbol: 'USDC', address: usdc.address, decimals: 6 }, ...tokens],
    },
    { ...ENV, HOT_1_KEY: wallet.key },
  );
}

function erc20Plan(key: string, config: Record<string, unknown>) {
  return plan(key, [
    {
      node_key: 'pay',
      node_kind: 'action',
      action_type: 'erc20_transfer',
      executor_binding: { executor_key: EVM_ERC20_TRANSFER_KEY },
      signer_binding: { signer_key: 'hot_1' },
      config,
    },
  ]);
}

async function artifacts(pool: Pool, nodeId: string) {
  return artifactsOfNodes(pool, [nodeId]);
}

const nonceOf = (address: Address) => chain.getTransactionCount({ address, blockTag: 'pending' });

test('amounts convert exactly, and too many fractional digits are refused, never rounded', () => {
  assert.deepEqual(toBaseUnits('100.25', 6), { ok: true, value: 100_250_000n });
  assert.deepEqual(toBaseUnits('123456789.123456789012345678', 18), { ok: true, value: 123456789123456789012345678n });
  assert.deepEqual(toBaseUnits('1.500', 2), { ok: true, value: 150n }, 'trailing zeros are not digits that matter');
  assert.deepEqual(toBaseUnits('7', 0), { ok: true, value: 7n });
  assert.equal(toBaseUnits('1.0000001', 6).ok, false);
  for (const bad of ['', '1.', '.5', '-1', '1e6', '01', '1,5', ' 1']) assert.equal(toBaseUnits(bad, 6).ok, false, JSON.stringify(bad));
  assert.equal(fromBaseUnits(123456789123456789012345678n, 18), '123456789.123456789012345678');
  assert.equal(fromBaseUnits(5n, 6), '0.000005');
});

test('an ERC-20 transfer runs to COMPLETED: exact amount on chain, one Transfer log, decimals pinned', async (t) => {
  const db = await scratchDatabase(t);
  const wallet = await hotWallet([[usdc, 1_000_000_000n]]);
  const deps = await laneDeps(db.pool, wallet);
  const to = freshAddress();
  const id = await approvedMovement(deps, erc20Plan('erc20-ok', { token: 'USDC' }), { asset: 'USDC', amount: '100.25', destination: { address: to } });

  await drain(deps);

  const s = await snapshot(db.pool, id);
  assert.equal(s.movement.request_state, 'COMPLETED');
  const node = s.byKey.pay;
  assert.equal(node.node_state, 'COMPLETED');
  assert.equal(await tokenBalance(chain, usdc, to), 100_250_000n);
  assert.equal(await tokenBalance(chain, usdc, wallet.address), 1_000_000_000n - 100_250_000n);

  const receipt = await chain.getTransactionReceipt({ hash: node.provider_refs.tx_hash as Hex });
  const transfers = parseEventLogs({ abi: erc20Abi, eventName: 'Transfer', logs: receipt.logs });
  assert.equal(transfers.length, 1);
  assert.equal(transfers[0].args.to, to);
  assert.equal(transfers[0].args.value, 100_250_000n);

  const all = await artifacts(db.pool, node.id);
  const prepared = JSON.parse(all.find((a) => a.artifact_type === 'prepared_action')!.content_inline!);
  assert.equal(prepared.provider_hints.token, usdc.address);
  assert.equal(prepared.provider_hints.decimals, 6);
  assert.equal(prepared.provider_hints.amount_base_units, '100250000');
  assert.ok(BigInt(prepared.provider_hints.gas_limit) > BigInt(prepared.provider_hints.gas_estimate), 'gas has a margin over the estimate');
  assert.ok(receipt.gasUsed <= BigInt(prepared.provider_hints.gas_limit));
  const proof = JSON.parse(all.find((a) => a.artifact_type === 'proof')!.content_inline!);
  assert.equal(proof.status, 'success');
  assert.equal(proof.transfer_log_index, transfers[0].logIndex);
  assert.equal(proof.block_hash, receipt.blockHash);
});

test('a balance too small is refused before anything is prepared or signed', async (t) => {
  const db = await scratchDatabase(t);
  const wallet = await hotWallet([[usdc, 10_000_000n]]);
  const deps = await laneDeps(db.pool, wallet);
  const to = freshAddress();
  const id = await approvedMovement(deps, erc20Plan('erc20-poor', { token: usdc.address, to, amount: '10.000001' }), { asset: 'USDC', amount: '1' });
  await drain(deps);
  const node = (await snapshot(db.pool, id)).byKey.pay;
  assert.equal(node.node_state, 'FAILED');
  assert.equal(node.error_code, 'EVM_INSUFFICIENT_TOKEN_BALANCE');
  assert.match(node.error_detail!, /holds 10 of token .* needs 10\.000001/);
  const kinds = (await artifacts(db.pool, node.id)).map((a) => a.artifact_type);
  assert.ok(!kinds.includes('signature'), 'nothing was signed');
  assert.ok(!kinds.includes('prepared_action'), 'nothing was even prepared');
  const signed = await db.pool.query(`SELECT count(*)::int AS n FROM transitions WHERE entity_id = $1 AND to_state = 'AWAITING_SIGNATURE'`, [node.id]);
  assert.equal(signed.rows[0].n, 0, 'the node never asked for a signature');
  assert.equal(await nonceOf(wallet.address), 0, 'no transaction from the wallet');
  assert.equal(await tokenBalance(chain, usdc, to), 0n);
});

test('decimals are read from the chain and pinned: an 18-decimal token moves a large amount exactly; a wrong decimals setting or too fine an amount fails', async (t) => {
  const db = await scratchDatabase(t);
  const big = await deployToken(chain, anvil.url, ANVIL_DEV_KEY, { symbol: 'BIG', decimals: 18 });
  const amount = 123456789123456789012345678n;
  const wallet = await hotWallet([[big, amount * 2n], [usdc, 5_000_000n]]);
  // BIG is listed with its decimals (the signer's expected effect needs them from the configuration,
  // never from the executor; the executor checks them against the chain), WRONG with the wrong ones.
  const deps = await laneDeps(db.pool, wallet, [
    { chain_id: ANVIL_CHAIN_ID, symbol: 'BIG', address: big.address, decimals: 18 },
    { chain_id: ANVIL_CHAIN_ID, symbol: 'WRONG', address: big.address, decimals: 6 },
  ]);
  const to = freshAddress();
  const ok = await approvedMovement(deps, erc20Plan('erc20-big', { token: 'BIG', to }), { asset: 'BIG', amount: '123456789.123456789012345678' });
  const cases = [
    { key: 'erc20-wrong-list', config: { token: 'WRONG', to, amount: '1' }, code: 'EVM_TOKEN_DECIMALS_MISMATCH' },
    { key: 'erc20-wrong-node', config: { token: usdc.address, decimals: 18, to, amount: '1' }, code: 'EVM_TOKEN_DECIMALS_MISMATCH' },
    { key: 'erc20-too-fine', config: { token: 'USDC', to, amount: '1.0000001' }, code: 'EVM_INVALID_AMOUNT' },
    { key: 'erc20-zero', config: { token: 'USDC', to, amount: '0.000' }, code: 'EVM_INVALID_AMOUNT' },
    { key: 'erc20-float', config: { token: 'USDC', to, amount: 1.5 }, code: 'EVM_INVALID_AMOUNT' },
    { key: 'erc20-unknown', config: { token: 'DAI', to, amount: '1' }, code: 'EVM_UNKNOWN_TOKEN' },
    { key: 'erc20-no-contract', config: { token: freshAddress(), to, amount: '1' }, code: 'EVM_INVALID_TOKEN' },
    { key: 'erc20-bad-to', config: { token: 'USDC', to: '0x1234', amount: '1' }, code: 'EVM_INVALID_ADDRESS' },
    { key: 'erc20-other-chain', config: { token: 'USDC', to, amount: '1', chain_id: 1 }, code: 'EVM_CHAIN_NOT_CONFIGURED' },
  ];
  const ids: string[] = [];
  // No asset in the intent: each node fixes its own token, and an intent naming another is refused at creation.
  for (const c of cases) ids.push(await approvedMovement(deps, erc20Plan(c.key, c.config), { amount: '1' }));
  await drain(deps);

  const s = await snapshot(db.pool, ok);
  assert.equal(s.byKey.pay.node_state, 'COMPLETED');
  assert.equal(await tokenBalance(chain, big, to), amount, 'every one of the 27 digits arrived');
  const prepared = JSON.parse((await artifacts(db.pool, s.byKey.pay.id)).find((a) => a.artifact_type === 'prepared_action')!.content_inline!);
  assert.equal(prepared.provider_hints.decimals, 18, 'the chain\'s decimals are pinned in the prepared action');
  assert.equal(prepared.provider_hints.amount_base_units, amount.toString());
  for (const [i, c] of cases.entries()) {
    const node = (await snapshot(db.pool, ids[i])).byKey.pay;
    assert.equal(node.node_state, 'FAILED', c.key);
    assert.equal(node.error_code, c.code, c.key);
  }
  assert.equal(await nonceOf(wallet.address), 1, 'only the good transfer was sent');
});

test('a transfer that reverts on chain FAILS with the receipt as proof; the tokens stay', async (t) => {
  const db = await scratchDatabase(t);
  const pausable = await deployToken(chain, anvil.url, ANVIL_DEV_KEY, { contract: 'RevertingToken', symbol: 'PAUSE', decimals: 6 });
  const wallet = await hotWallet([[pausable, 50_000_000n]]);
  const base = await laneDeps(db.pool, wallet, [{ chain_id: ANVIL_CHAIN_ID, symbol: 'PAUSE', address: pausable.address, decimals: 6 }]);
  // The token is paused between prepare (whose gas estimate passes) and the broadcast: the signer
  // pauses it before it signs, so the signed transaction is mined and reverts.
  const real = base.signers.get('hot_1');
  const pausing: Signer = {
    signerKey: 'hot_1',
    sign: async (req: SignRequest): Promise<SignResult> => {
      await sendCall(chain, anvil.url, ANVIL_DEV_KEY, pausable, 'setPaused', [true]);
      return real.sign(req);
    },
  };
  const signers = new SignerRegistry();
  signers.register(pausing);
  const deps = { ...base, signers };
  const to = freshAddress();
  const id = await approvedMovement(deps, erc20Plan('erc20-revert', { token: pausable.address, to, amount: '20' }), { asset: 'PAUSE', amount: '20' });
  await drain(deps);

  const node = (await snapshot(db.pool, id)).byKey.pay;
  assert.equal(node.node_state, 'FAILED');
  assert.equal(node.error_code, 'EVM_TX_REVERTED');
  assert.equal(node.provider_state, 'reverted');
  const receipt = await chain.getTransactionReceipt({ hash: node.provider_refs.tx_hash as Hex });
  assert.equal(receipt.status, 'reverted');
  const proof = JSON.parse((await artifacts(db.pool, node.id)).find((a) => a.artifact_type === 'proof')!.content_inline!);
  assert.equal(proof.status, 'reverted');
  assert.equal(proof.block_hash, receipt.blockHash);
  assert.equal(await tokenBalance(chain, pausable, to), 0n);
  assert.equal(await tokenBalance(chain, pausable, wallet.address), 50_000_000n);

  // Paused already at preflight: the gas estimate reverts, nothing is signed.
  const early = await approvedMovement(base, erc20Plan('erc20-revert-early', { token: pausable.address, to, amount: '1' }), { asset: 'PAUSE', amount: '1' });
  await drain(base);
  const refused = (await snapshot(db.pool, early)).byKey.pay;
  assert.equal(refused.error_code, 'EVM_TX_WOULD_REVERT');
  assert.ok(!(await artifacts(db.pool, refused.id)).some((a) => a.artifact_type === 'signature'));
});

test('a successful receipt without the expected Transfer event is not taken as payment: UNKNOWN for an operator', async (t) => {
  const db = await scratchDatabase(t);
  const silent = await deployToken(chain, anvil.url, ANVIL_DEV_KEY, { contract: 'SilentToken', symbol: 'SILENT', decimals: 6 });
  const wallet = await hotWallet([[silent, 5_000_000n]]);
  const deps = await laneDeps(db.pool, wallet, [{ chain_id: ANVIL_CHAIN_ID, symbol: 'SILENT', address: silent.address, decimals: 6 }]);
  const id = await approvedMovement(deps, erc20Plan('erc20-silent', { token: silent.address, to: freshAddress(), amount: '1' }), { asset: 'S', amount: '1' });
  await drain(deps);
  const node = (await snapshot(db.pool, id)).byKey.pay;
  assert.equal(node.node_state, 'UNKNOWN');
  assert.equal(node.error_code, 'EVM_TRANSFER_EVENT_MISSING');
  assert.equal(node.provider_state, 'mined_without_transfer');
});

test('ERC-20 transfers from one wallet dispatched concurrently take contiguous nonces from the nonce manager, one reservation each', async (t) => {
  const db = await scratchDatabase(t);
  const MOVEMENTS = 6;
  const wallet = await hotWallet([[usdc, 1_000_000_000n]]);
  const deps = await laneDeps(db.pool, wallet);
  const first = await nonceOf(wallet.address);
  const recipients = Array.from({ length: MOVEMENTS }, () => freshAddress());
  const ids: string[] = [];
  for (const [i, to] of recipients.entries()) {
    ids.push(await approvedMovement(deps, erc20Plan('erc20-many', { token: 'USDC' }), { asset: 'USDC', amount: `1.${i + 1}`, destination: { address: to } }));
  }

  // Four dispatches at once, as the movement actors of several movements run them: every
  // prepare reads the same pending count, and only the reservation table tells them apart.
  await Promise.all(Array.from({ length: 4 }, () => dispatchUntilIdle(deps)));
  await drain(deps);

  const nonces: number[] = [];
  for (const [i, id] of ids.entries()) {
    const s = await snapshot(db.pool, id);
    assert.equal(s.movement.request_state, 'COMPLETED', `movement ${i}: ${s.byKey.pay.error_code ?? ''} ${s.byKey.pay.error_detail ?? ''}`);
    nonces.push(Number(s.byKey.pay.provider_refs.nonce));
    assert.equal(await tokenBalance(chain, usdc, recipients[i]!), 1_000_000n + BigInt(i + 1) * 100_000n, `recipient ${i} paid exactly once`);
  }
  assert.deepEqual(
    [...nonces].sort((a, b) => a - b),
    Array.from({ length: MOVEMENTS }, (_, i) => first + i),
    'one nonce each, contiguous',
  );
  assert.equal(await chain.getTransactionCount({ address: wallet.address, blockTag: 'latest' }), first + MOVEMENTS);
  const rows = await reservationsOfWallet(db.pool, { chainId: ANVIL_CHAIN_ID, sender: wallet.address.toLowerCase() });
  assert.deepEqual(
    rows.map((r) => [r.nonce, r.status]),
    Array.from({ length: MOVEMENTS }, (_, i) => [first + i, 'broadcast']),
    'every transfer reserved its nonce and cleared it for broadcast',
  );
});
