import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { encodeFunctionData, erc20Abi, serializeTransaction, type Address, type TransactionSerializable } from 'viem';
import { deliverMovementEvent } from '../src/durable/transition.ts';
import type { WorkerDeps } from '../src/actors/execution.ts';
import { loadConfig } from '../src/config.ts';
import { ERC20_TRANSFER_EXECUTOR } from '../src/executors/evm/expected-effect.ts';
import { LocalExecutorAdapter } from '../src/executors/local-adapter.ts';
import { payloadHash } from '../src/executors/payload-hash.ts';
import type { ExecutionContext, SignRequest } from '../src/executors/protocol.ts';
import { feeCapsOf } from '../src/executors/signers/evm-policy.ts';
import { LocalPrivateKeySignerEvm } from '../src/executors/signers/local-private-key-evm.ts';
import { nodeView } from '../src/http/views.ts';
import { withTransaction } from '../src/persistence/db.ts';
import { saveTemplate } from '../src/persistence/templates.ts';
import { parseTemplateDefinition } from '../src/plan/template-schema.ts';
import { createMovement } from '../src/services/movements.ts';
import { ANVIL_DEV_KEY } from './helpers/anvil.ts';
import { scratchDatabase, type TestDb } from './helpers/db.ts';
import { writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify as yaml } from 'yaml';
import { dispatchUntilIdle, plan, runtimeDeps, snapshot } from './helpers/runtime.ts';

/**
 * Issue 20, finding 9: token decimals and fee caps were read from the configuration at dispatch,
 * not pinned at approval, so a configuration changed between the approval and the dispatch changed
 * what was signed. Now the expected effect of a signing node (amount in base units with the
 * token's decimals and symbol, the fee cap) is pinned when the movement is created, shown on the
 * node, and dispatch signs against it: a raised cap is not used (the lower of the two applies), and
 * changed decimals stop the node (effect_changed_since_approval) instead of signing either amount.
 */

const CHAIN = 8453;
const TOKEN = '0x5fbdb2315678afecb367f032d93f642f64180aa3' as Address;
const ALICE = '0x1111111111111111111111111111111111111111' as Address;
const GWEI = 1_000_000_000n;
const dir = mkdtempSync(join(tmpdir(), 'ferry-pinned-'));
let db: TestDb;
let n = 0;

const drops: Array<() => Promise<void>> = [];
before(async () => {
  db = await scratchDatabase({ after: (fn) => void drops.push(fn) });
});
after(async () => {
  for (const fn of drops) await fn();
});

function config(cap: bigint, decimals: number) {
  const path = join(dir, `ferry-${n++}.yaml`);
  writeFileSync(path, yaml({ evm: { fee_caps: [{ chain_id: CHAIN, max_fee_per_gas_cap_wei: cap.toString() }], tokens: [{ chain_id: CHAIN, symbol: 'USDC', address: TOKEN, decimals }] } }));
  return loadConfig({ FERRY_DATA_DIR: '.ferry/test-runtime', FERRY_CONFIG_FILE: path });
}

/**
 * Worker deps for `cfg` whose ERC-20 executor prepares `units` base units to Alice at `feeGwei`
 * (what a hostile executor holding the configuration of now would build) and whose signer is
 * built from `cfg` as a restarted worker's would be. Records what it was asked to sign.
 */
function deps(cfg: ReturnType<typeof config>, units: bigint, feeGwei: bigint): WorkerDeps & { asked: SignRequest[] } {
  const base = runtimeDeps(db.pool);
  const asked: SignRequest[] = [];
  const signer = new LocalPrivateKeySignerEvm({ signerKey: 'hot', privateKey: ANVIL_DEV_KEY, chains: [CHAIN], feeCaps: feeCapsOf(cfg.file.evm) });
  const recording = { signerKey: 'hot', sign: (r: SignRequest) => (asked.push(r), signer.sign(r)) };
  base.signers.register(recording as never);
  const tx = serializeTransaction({
    type: 'eip1559',
    chainId: CHAIN,
    nonce: 0,
    to: TOKEN,
    value: 0n,
    data: encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [ALICE, units] }),
    gas: 90_000n,
    maxFeePerGas: feeGwei * GWEI,
    maxPriorityFeePerGas: 1n,
  } as TransactionSerializable);
  base.executors.register(
    new LocalExecutorAdapter({
      executorKey: ERC20_TRANSFER_EXECUTOR,
      lane: 'evm',
      handler: {
        prepare: (ctx: ExecutionContext) => ({
          next_state: 'SUBMITTING',
          prepared_action: { prepared_action_id: 'p-1', action_type: ctx.action_type, payload_format: 'evm_raw_tx', payload: tx, payload_hash: payloadHash(tx), signing_required: true, provider_hints: {}, expires_at: null },
        }),
        submit: () => ({ next_state: 'SUBMITTED', provider_refs: { tx_hash: '0x' + '0'.repeat(64) } }),
        observe: () => ({ next_state: 'OBSERVING' }),
        recover: () => ({ next_state: 'OBSERVING' }),
      },
    }),
  );
  return { ...base, config: cfg, asked };
}

/** A 100 USDC movement created (and pinned) under `cfg`, then approved. */
async function approved(cfg: ReturnType<typeof config>): Promise<string> {
  const key = `pinned-${n++}`;
  await withTransaction(db.pool, (c) =>
    saveTemplate(
      c,
      parseTemplateDefinition(
        plan(key, [
          {
            node_key: 'pay',
            node_kind: 'action',
            action_type: 'evm_erc20_transfer',
            executor_binding: { executor_key: ERC20_TRANSFER_EXECUTOR },
            signer_binding: { signer_key: 'hot', chain_id: CHAIN },
            config: { token: 'USDC', to: ALICE },
          },
        ]),
      ),
      'test',
    ),
  );
  const transitions = runtimeDeps(db.pool).transitions;
  const created = await createMovement({ pool: db.pool, config: { ...cfg, approvalQuorum: 1 }, transitions }, { actor: 'requester', templateKey: key, intent: { asset: 'USDC', amount: '100', destination: { address: ALICE } } });
  await withTransaction(db.pool, (c) => deliverMovementEvent(c, created.movement.id, { type: 'APPROVE', by: 'approver', at: new Date().toISOString() }, { actor: 'approver', deps: transitions }));
  return created.movement.id;
}

test('the expected effect is pinned at creation, with the decimals and symbol, and shown on the node', async () => {
  const cfg = config(2n * GWEI, 6);
  const id = await approved(cfg);
  const node = (await snapshot(db.pool, id)).byKey.pay;
  assert.deepEqual(nodeView(node).expected_effect, {
    effect: { chain_id: CHAIN, asset: TOKEN, to: ALICE, amount_base_units: '100000000', token_method: 'transfer', token_decimals: 6, token_symbol: 'USDC', max_fee_per_gas_cap_wei: (2n * GWEI).toString() },
  });
  // Unchanged configuration: signed, 100 USDC.
  const d = deps(cfg, 100_000_000n, 1n);
  await dispatchUntilIdle(d);
  const after = (await snapshot(db.pool, id)).byKey.pay;
  assert.equal(after.node_state, 'SUBMITTED', `${after.error_code}: ${after.error_detail}`);
  assert.equal(d.asked.at(-1)?.expected_effect?.token_decimals, 6);
});

test('a fee cap raised after approval is not used: the pinned cap rules, nothing is signed above it', async () => {
  const id = await approved(config(2n * GWEI, 6));
  // The configuration now allows 50 gwei; the executor offers 10.
  const d = deps(config(50n * GWEI, 6), 100_000_000n, 10n);
  await dispatchUntilIdle(d);
  const node = (await snapshot(db.pool, id)).byKey.pay;
  assert.equal(node.node_state, 'FAILED');
  assert.equal(node.error_code, 'SIGNER_POLICY_VIOLATION');
  assert.match(node.error_detail ?? '', /above the chain's cap of 2000000000/);
  assert.equal(d.asked.at(-1)?.expected_effect?.max_fee_per_gas_cap_wei, (2n * GWEI).toString(), 'the request carried the pinned cap');
});

test('a fee cap lowered after approval binds: the lower of the two applies', async () => {
  const id = await approved(config(50n * GWEI, 6));
  const d = deps(config(2n * GWEI, 6), 100_000_000n, 10n);
  await dispatchUntilIdle(d);
  const node = (await snapshot(db.pool, id)).byKey.pay;
  assert.equal(node.node_state, 'FAILED');
  assert.match(node.error_detail ?? '', /cap of 2000000000/);
  assert.equal(d.asked.at(-1)?.expected_effect?.max_fee_per_gas_cap_wei, (2n * GWEI).toString());
});

test('token decimals changed after approval: the node is refused (effect_changed_since_approval), neither amount is signed', async () => {
  const id = await approved(config(2n * GWEI, 6));
  // 18 decimals now: an executor reading the configuration of now builds 100 * 10^18 base units,
  // 10^12 times the approved 100 USDC; the configuration of now would have let it be signed.
  const d = deps(config(2n * GWEI, 18), 100n * 10n ** 18n, 1n);
  await dispatchUntilIdle(d);
  const node = (await snapshot(db.pool, id)).byKey.pay;
  assert.equal(node.node_state, 'FAILED');
  assert.equal(node.error_code, 'SIGNER_POLICY_VIOLATION');
  assert.match(node.error_detail ?? '', /token_decimals \(6 -> 18\)/);
  assert.equal(d.asked.length, 0, 'the signer was never asked');
  const { rows } = await db.pool.query(`SELECT details FROM audit_outbox WHERE action = 'signer.refused' AND entity_id = $1 UNION ALL SELECT details FROM audit_events WHERE action = 'signer.refused' AND entity_id = $1`, [node.id]);
  assert.equal(rows[0]?.details.rule, 'effect_changed_since_approval');
});
