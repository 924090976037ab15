import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { type Address, type Hex, type PublicClient } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { stringify as yaml } from 'yaml';
import type { WorkerDeps } from '../src/actors/execution.ts';
import { configuredRegistries } from '../src/actors/runtime.ts';
import { log } from '../src/log.ts';
import type { Pool } from '../src/persistence/db.ts';
import { CEX_TO_CHAIN_TEMPLATE_KEY, cexToChainTemplate } from '../scripts/sandbox/templates.ts';
import { erc20Payout, startBinanceEmulator, type BinanceEmulator } from './emulators/binance.ts';
import { ANVIL_CHAIN_ID, ANVIL_DEV_KEY, TEST_FEE_CAP_WEI, type Anvil } from './helpers/anvil.ts';
import { sendCall, tokenBalance, usdcChainForFile, type DeployedToken } from './helpers/contracts.ts';
import { scratchDatabase } from './helpers/db.ts';
import { approvedMovement, drain, runtimeDeps, snapshot } from './helpers/runtime.ts';
import { waitFor } from './helpers/wait.ts';
import type { TemplateDefinitionInput } from '../src/plan/template-schema.ts';

/**
 * The installed `cex_to_chain` template end to end: the exchange (the Binance emulator, paying
 * USDC on a real anvil chain) withdraws to Ferry's receiving wallet, the withdrawal is followed to
 * its chain transaction, the deposit is watched arrive on chain, and the receiving wallet's signer
 * sweeps it to the treasury with an ERC-20 transfer. Balances are read from the chain.
 */

const CREDS = { EX_KEY: 'c2c-api-key-0123456789abcdefghijklmnopqrstuvwxyz', EX_SECRET: 'c2c-api-secret-ZYXWVUTSRQPONMLKJIHGFEDCBA987654' };

let anvil: Anvil;
let chain: PublicClient;
let usdc: DeployedToken;
let exchange: BinanceEmulator;
const exchangeHot = wallet();

usdcChainForFile(async (local) => {
  ({ anvil, chain, usdc } = local);
  await fund(exchangeHot.address, 1_000_000_000n);
  exchange = await startBinanceEmulator({
    apiKey: CREDS.EX_KEY,
    apiSecret: CREDS.EX_SECRET,
    rpcUrl: anvil.url,
    depositAddress: wallet().address,
    coins: [{ coin: 'USDC', network: 'ETH', decimals: 6, withdrawFee: '1', withdrawMin: '1', withdrawMax: '100000', withdrawIntegerMultiple: '0.000001' }],
    balances: { USDC: '5000' },
    payout: erc20Payout(anvil.url, exchangeHot.key, usdc.address),
  });
});
after(async () => exchange?.stop());

function wallet(): { key: Hex; address: Address } {
  const key = generatePrivateKey();
  return { key, address: privateKeyToAccount(key).address };
}

/** Gas money, and `usdc` base units minted to the address. */
async function fund(address: Address, units: bigint): Promise<void> {
  await anvil.rpc('anvil_setBalance', [address, '0x56BC75E2D63100000']);
  if (units > 0n) await sendCall(chain, anvil.url, ANVIL_DEV_KEY, usdc, 'mint', [address, units]);
}

/** The runtime's registries from one config file: the chain, the receiving wallet's signer, USDC, the exchange account. */
async function laneDeps(pool: Pool, receiving: { key: Hex }): Promise<WorkerDeps> {
  const dir = mkdtempSync(join(tmpdir(), 'ferry-c2c-'));
  const file = join(dir, 'ferry.yaml');
  writeFileSync(
    file,
    yaml({
      evm: {
        chains: [{ chain_id: ANVIL_CHAIN_ID, name: 'local', rpc_url: anvil.url, poll_seconds: 0.001, max_fee_per_gas_cap_wei: TEST_FEE_CAP_WEI }],
        signers: [{ key: 'receiving', kind: 'local_key', private_key_env: 'RECEIVING_KEY', chains: [ANVIL_CHAIN_ID] }],
        tokens: [{ chain_id: ANVIL_CHAIN_ID, symbol: 'USDC', address: usdc.address, decimals: 6 }],
      },
      cex: { accounts: [{ key: 'exchange', exchange: 'binance', base_url: exchange.url, api_key_env: 'EX_KEY', api_secret_env: 'EX_SECRET', networks: { ethereum: 'ETH' }, timeout_ms: 5000 }] },
    }),
  );
  const env = { ...CREDS, RECEIVING_KEY: receiving.key, FERRY_CONFIG_FILE: file, FERRY_SUBMITTING_GRACE_SECONDS_BY_LANE: 'cex=0.001,evm=0.001' };
  const base = runtimeDeps(pool, env);
  const { executors, signers } = await configuredRegistries(pool, base.config, { env, log });
  return { ...base, executors, signers };
}

const finished = (state: string) => ['COMPLETED', 'FAILED', 'MANUAL_INTERVENTION'].includes(state);

test('cex_to_chain: withdraw USDC from the exchange, watch it arrive at the receiving wallet, sweep it to the treasury; balances on chain', async (t) => {
  const db = await scratchDatabase(t);
  const receiving = wallet();
  const treasury = wallet().address;
  await fund(receiving.address, 0n);
  const deps = await laneDeps(db.pool, receiving);
  const template = cexToChainTemplate({
    chainId: ANVIL_CHAIN_ID,
    account: 'exchange',
    network: 'ethereum',
    token: 'USDC',
    decimals: 6,
    receiving: { address: receiving.address, signerKey: 'receiving' },
    treasury,
    confirmations: 2,
  });
  assert.equal(template.template_key, CEX_TO_CHAIN_TEMPLATE_KEY);
  const hotBefore = await tokenBalance(chain, usdc, exchangeHot.address);
  const id = await approvedMovement(deps, template as unknown as TemplateDefinitionInput, { asset: 'USDC', amount: '125.5' });

  const done = await waitFor(
    'the movement to finish',
    async () => {
      await drain(deps);
      // A block per round: confirmations advance as they would on a live chain.
      await anvil.mine(1);
      const s = await snapshot(db.pool, id);
      return finished(s.movement.request_state) ? s : null;
    },
    60_000,
  );
  assert.equal(done.movement.request_state, 'COMPLETED', JSON.stringify(done.nodes.map((n) => [n.node_key, n.node_state, n.error_code, n.error_detail])));
  for (const key of ['withdraw', 'withdrawal_observe', 'deposit_observe', 'sweep']) assert.equal(done.byKey[key].node_state, 'COMPLETED', key);

  // The exchange paid the receiving wallet on chain, with the transaction the observer followed.
  const payout = done.byKey.withdrawal_observe.provider_refs.tx_hash as Hex;
  const payoutReceipt = await chain.getTransactionReceipt({ hash: payout });
  assert.equal(payoutReceipt.status, 'success');
  assert.equal(payoutReceipt.to, usdc.address);
  assert.equal(hotBefore - (await tokenBalance(chain, usdc, exchangeHot.address)), 125_500_000n, 'the exchange hot wallet paid 125.5 USDC');
  assert.equal(exchange.balance('USDC'), '4873.5', 'the exchange account paid the amount and the 1 USDC fee');
  assert.equal(done.byKey.deposit_observe.provider_refs.watch_address, receiving.address.toLowerCase());

  // The sweep moved exactly that amount on to the treasury, from the receiving wallet.
  assert.equal(await tokenBalance(chain, usdc, treasury), 125_500_000n, 'the treasury holds the swept 125.5 USDC');
  assert.equal(await tokenBalance(chain, usdc, receiving.address), 0n, 'nothing is left in the receiving wallet');
  const sweepHash = done.byKey.sweep.provider_refs.tx_hash as Hex;
  const sweep = await chain.getTransaction({ hash: sweepHash });
  assert.equal(sweep.from, receiving.address.toLowerCase());
  assert.equal((await chain.getTransactionReceipt({ hash: sweepHash })).status, 'success');
  assert.equal(exchange.withdrawals.filter((w) => w.withdrawOrderId?.startsWith(done.byKey.withdraw.id)).length, 1, 'one withdrawal');
});
