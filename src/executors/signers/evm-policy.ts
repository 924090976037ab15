import { decodeFunctionData, encodeFunctionData, erc20Abi, type Hex, type TransactionSerializable } from 'viem';
import { FatalMovementError } from '../errors.ts';
import type { ExpectedEffect, SignRequest } from '../protocol.ts';

/**
 * The policy every EVM signer applies before its key touches a transaction (local key, KMS, the
 * proxy in front of a remote signer). Default deny: a request without an expected effect is
 * refused; a transaction is signed only when what it does, decoded from its own bytes, is exactly
 * what the approved plan expects. Every refusal is a FatalMovementError with code
 * SIGNER_POLICY_VIOLATION and `details.rule` naming the check that failed.
 */

export const SIGNER_POLICY_VIOLATION = 'SIGNER_POLICY_VIOLATION';

/** Who a signer serves, from its configuration entry (evm.signers[]). */
export interface EvmSignerScope {
  signerKey: string;
  /** Chain ids the signer may sign for; unset: any chain the expected effect names. */
  chains?: readonly number[];
  /** Executor keys the signer serves; unset: every executor. */
  executors?: readonly string[];
}

/** What a transaction does, read from its fields and calldata alone. */
export type DecodedEffect =
  | { kind: 'native'; chain_id: number; to: string; amount: bigint }
  | { kind: 'token'; method: 'transfer' | 'approve'; chain_id: number; token: string; to: string; amount: bigint; value: bigint }
  | { kind: 'call'; chain_id: number; contract: string; selector: string; value: bigint }
  | { kind: 'deploy'; chain_id: number };

export function violation(rule: string, message: string, details: Record<string, unknown> = {}): FatalMovementError {
  return new FatalMovementError(SIGNER_POLICY_VIOLATION, message, { rule, ...details });
}

/** The allowlist of executor keys (and the presence of an executor key when there is one). */
export function checkExecutorAllowed(req: SignRequest, scope: EvmSignerScope): void {
  if (!scope.executors) return;
  if (!req.executor_key) {
    throw violation('executor_not_named', `signer ${scope.signerKey} serves only listed executors and the request names none`);
  }
  if (!scope.executors.includes(req.executor_key)) {
    throw violation('executor_not_allowed', `signer ${scope.signerKey} does not serve executor ${req.executor_key}`, { executor_key: req.executor_key });
  }
}

const ERC20_SELECTORS: Record<string, 'transfer' | 'approve'> = { '0xa9059cbb': 'transfer', '0x095ea7b3': 'approve' };

/** Decodes what an unsigned transaction would do. Pure. */
export function decodeEffect(tx: TransactionSerializable): DecodedEffect {
  const chainId = tx.chainId;
  if (chainId === undefined) throw violation('chain_id_missing', 'the transaction has no chain id');
  const data = (tx.data ?? '0x').toLowerCase() as Hex;
  const value = tx.value ?? 0n;
  if (!tx.to) return { kind: 'deploy', chain_id: chainId };
  const to = tx.to.toLowerCase();
  if (data === '0x') return { kind: 'native', chain_id: chainId, to, amount: value };
  const selector = data.slice(0, 10);
  const method = ERC20_SELECTORS[selector];
  if (method) {
    try {
      const decoded = decodeFunctionData({ abi: erc20Abi, data });
      const [recipient, amount] = decoded.args as readonly [string, bigint];
      // Exact bytes only: trailing data or a non-canonical encoding is not the call it looks like.
      const canonical = encodeFunctionData({ abi: erc20Abi, functionName: method, args: [recipient as Hex, amount] });
      if (decoded.functionName === method && canonical.toLowerCase() === data) {
        return { kind: 'token', method, chain_id: chainId, token: to, to: recipient.toLowerCase(), amount, value };
      }
    } catch {
      // Not decodable as that ERC-20 call: judged as an arbitrary call below.
    }
  }
  return { kind: 'call', chain_id: chainId, contract: to, selector, value };
}

/**
 * Refuses the transaction unless it does exactly what `expected` allows, for a signer with `scope`.
 * @throws FatalMovementError SIGNER_POLICY_VIOLATION
 */
export function checkEvmTransaction(
  tx: TransactionSerializable,
  expected: ExpectedEffect | null | undefined,
  scope: EvmSignerScope,
  unavailableReason?: string | null,
): void {
  if (!expected) {
    throw violation(
      'no_expected_effect',
      `signer ${scope.signerKey} signs only against an expected effect from the approved plan; none was given${unavailableReason ? ` (${unavailableReason})` : ''}`,
    );
  }
  if (tx.type === 'eip4844' || tx.type === 'eip7702' || (tx as { authorizationList?: unknown[] }).authorizationList?.length) {
    // A blob or a delegation of the account's code is never a transfer the plan approved.
    throw violation('tx_type_not_allowed', `transaction type ${tx.type} is not signed by policy`);
  }
  const effect = decodeEffect(tx);
  if (effect.chain_id !== expected.chain_id) {
    throw violation('chain_id', `the transaction is for chain ${effect.chain_id}, the approved plan for chain ${expected.chain_id}`, {
      expected: expected.chain_id,
      actual: effect.chain_id,
    });
  }
  if (scope.chains && !scope.chains.includes(effect.chain_id)) {
    throw violation('chain_not_served', `signer ${scope.signerKey} does not sign for chain ${effect.chain_id}`);
  }
  checkFeeCap(tx, expected);

  const want = BigInt(expected.amount_base_units);
  if (expected.call) {
    if (effect.kind === 'deploy') throw violation('call', 'the transaction deploys a contract; the plan names a call');
    const contract = effect.kind === 'native' ? effect.to : effect.kind === 'token' ? effect.token : effect.contract;
    same('to', contract, expected.to, 'contract');
    const selector = effect.kind === 'call' ? effect.selector : effect.kind === 'native' ? '0x' : (tx.data ?? '0x').slice(0, 10).toLowerCase();
    same('call', selector, expected.call.selector, `method (the plan names ${expected.call.method})`);
    same('amount', (tx.value ?? 0n).toString(), want.toString(), 'native value');
    return;
  }
  if (expected.asset === 'native') {
    if (effect.kind !== 'native') throw violation('asset', `the transaction is a ${describe(effect)}, the plan expects a native transfer`);
    same('to', effect.to, expected.to, 'recipient');
    same('amount', effect.amount.toString(), want.toString(), 'amount (wei)');
    return;
  }
  if (effect.kind !== 'token') throw violation('asset', `the transaction is a ${describe(effect)}, the plan expects a token ${expected.token_method ?? 'transfer'}`);
  same('asset', effect.token, expected.asset, 'token contract');
  same('method', effect.method, expected.token_method ?? 'transfer', 'token method');
  same('to', effect.to, expected.to, effect.method === 'approve' ? 'spender' : 'recipient');
  same('amount', effect.amount.toString(), want.toString(), 'amount (base units)');
  if (effect.value !== 0n) throw violation('value', `the token ${effect.method} also carries ${effect.value} wei of native value`);
}

function checkFeeCap(tx: TransactionSerializable, expected: ExpectedEffect): void {
  if (expected.max_fee_per_gas_cap_wei === undefined) return;
  const cap = BigInt(expected.max_fee_per_gas_cap_wei);
  const offered = (tx as { maxFeePerGas?: bigint }).maxFeePerGas ?? (tx as { gasPrice?: bigint }).gasPrice;
  if (offered === undefined) throw violation('fee_cap', 'the transaction names no fee per gas');
  if (offered > cap) {
    throw violation('fee_cap', `the transaction offers ${offered} wei per gas, above the chain's cap of ${cap}`, {
      expected: cap.toString(),
      actual: offered.toString(),
    });
  }
}

function same(rule: string, actual: string, expected: string, what: string): void {
  if (actual.toLowerCase() === expected.toLowerCase()) return;
  throw violation(rule, `the transaction's ${what} is ${actual}, the approved plan's is ${expected}`, { expected, actual });
}

function describe(effect: DecodedEffect): string {
  switch (effect.kind) {
    case 'native':
      return 'native transfer';
    case 'token':
      return `token ${effect.method}`;
    case 'call':
      return `call of ${effect.selector} on ${effect.contract}`;
    case 'deploy':
      return 'contract deployment';
  }
}
