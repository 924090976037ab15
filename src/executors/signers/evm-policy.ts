import { decodeFunctionData, encodeFunctionData, erc20Abi, type Hex, type TransactionSerializable } from 'viem';
import { FatalMovementError } from '../errors.ts';
import type { ExpectedEffect, SignRequest } from '../protocol.ts';
import type { TokenNonceReader } from './typed-data-policy.ts';
import { checkOftSend } from '../usdt0/oft.ts';
import { checkCcipSend } from '../ccip/router.ts';

/**
 * The policy every EVM signer applies before its key touches a transaction (local key, KMS, the
 * proxy in front of a remote signer). Default deny: a request without an expected effect is
 * refused; a transaction is signed only when what it does, decoded from its own bytes, is exactly
 * what the approved plan expects. Every refusal is a FatalMovementError with code
 * SIGNER_POLICY_VIOLATION and `details.rule` naming the check that failed.
 */

export const SIGNER_POLICY_VIOLATION = 'SIGNER_POLICY_VIOLATION';
/** The signing intent action of the nonce reaper's gap filler (src/sweeps/evm-nonce-reaper.ts). */
export const EVM_NONCE_FILL_ACTION = 'evm_nonce_fill';

/** Who a signer serves, from its configuration entry (evm.signers[]). */
export interface EvmSignerScope {
  signerKey: string;
  /** Chain ids the signer may sign for; unset: any chain the expected effect names. */
  chains?: readonly number[];
  /** Executor keys the signer serves; unset: every executor. */
  executors?: readonly string[];
  /** Bounds of replacements (fee bumps); unset: DEFAULT_REPLACEMENT_LIMITS. */
  replacements?: ReplacementLimits;
  /**
   * The signer's OWN fee caps (maxFeePerGas, wei) by chain id, from its own configuration: the
   * lower of its cap and the request's applies, so a caller cannot raise it (a signer host).
   */
  feeCaps?: ReadonlyMap<number, bigint>;
  /**
   * The typed data (EIP-712) it signs: primary types by executor key (evm.signers[].typed_data);
   * unset: none (typed-data-policy.ts).
   */
  typedData?: ReadonlyMap<string, ReadonlySet<string>>;
  /** Reads an EIP-2612 token's nonces(owner) through the signer side's own RPC; unset: only a nonce the plan pins is signed. */
  tokenNonces?: TokenNonceReader;
  /** The clock a typed data deadline is judged by, in milliseconds; unset: Date.now. */
  now?: () => number;
  /** Reads a chain's head through the signer side's own RPC (a Gateway burn intent's maxBlockHeight is judged by it); unset: not bounded here. */
  chainHeads?: ChainHeadReader;
}

/** A chain's latest block number, read by the signer side itself. */
export type ChainHeadReader = (chainId: number) => Promise<bigint>;

/** How far a replacement may go (FERRY_EVM_MAX_REPLACEMENTS, FERRY_EVM_MAX_FEE_BUMP_FACTOR). */
export interface ReplacementLimits {
  /** Replacements per attempt; the n-th replacement is signed only when n <= this. */
  maxReplacements: number;
  /** A replacement's fee per gas may be at most this many times the original's. */
  maxFeeBumpFactor: number;
}

export const DEFAULT_REPLACEMENT_LIMITS: ReplacementLimits = { maxReplacements: 5, maxFeeBumpFactor: 4 };

/** The limits a configuration gives (FERRY_EVM_MAX_REPLACEMENTS, FERRY_EVM_MAX_FEE_BUMP_FACTOR), defaults for what it leaves unset. */
/** What a signer's configuration adds to its scope: replacement bounds and its own fee caps. */
export type SignerPolicyOptions = Pick<EvmSignerScope, 'replacements' | 'feeCaps' | 'tokenNonces' | 'now' | 'chainHeads'>;

/** Fee caps by chain id from a configuration's evm.chains and evm.fee_caps (a signer's own caps). */
export function feeCapsOf(evm: { chains: ReadonlyArray<{ chain_id: number; max_fee_per_gas_cap_wei?: string }>; fee_caps?: ReadonlyArray<{ chain_id: number; max_fee_per_gas_cap_wei: string }> }): Map<number, bigint> {
  const caps = new Map<number, bigint>();
  for (const c of [...evm.chains, ...(evm.fee_caps ?? [])]) if (c.max_fee_per_gas_cap_wei !== undefined) caps.set(c.chain_id, BigInt(c.max_fee_per_gas_cap_wei));
  return caps;
}

export function replacementLimitsOf(config: { evmMaxReplacements?: number; evmMaxFeeBumpFactor?: number }): ReplacementLimits {
  return {
    maxReplacements: config.evmMaxReplacements ?? DEFAULT_REPLACEMENT_LIMITS.maxReplacements,
    maxFeeBumpFactor: config.evmMaxFeeBumpFactor ?? DEFAULT_REPLACEMENT_LIMITS.maxFeeBumpFactor,
  };
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
  /** The signer's address, for the rules that need it (an OFT send's refund); null or unset: not known here. */
  sender?: string | null,
): void {
  if (expected?.typed_data) throw violation('typed_data_effect', 'the approved plan names typed data for this node, not a transaction');
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
  checkFeeCap(tx, expected, scope);

  // A LayerZero OFT send (the USDT0 lane): its SendParam, fee and refund address, decoded and checked whole.
  if (expected.oft_send) {
    checkOftSend(tx, { to: expected.to, oft_send: expected.oft_send }, sender ?? null, violation);
    return;
  }
  // A Chainlink CCIP send (the CCIP lane): its message and the value it pays as the fee, decoded and checked whole.
  if (expected.ccip_send) {
    checkCcipSend(tx, { to: expected.to, ccip_send: expected.ccip_send }, violation);
    return;
  }
  const want = BigInt(expected.amount_base_units);
  if (expected.call) {
    if (effect.kind === 'deploy') throw violation('call', 'the transaction deploys a contract; the plan names a call');
    const contract = effect.kind === 'native' ? effect.to : effect.kind === 'token' ? effect.token : effect.contract;
    same('to', contract, expected.to, 'contract');
    const selector = effect.kind === 'call' ? effect.selector : effect.kind === 'native' ? '0x' : (tx.data ?? '0x').slice(0, 10).toLowerCase();
    same('call', selector, expected.call.selector, `method (the plan names ${expected.call.method})`);
    if (expected.call.data !== undefined) same('call_data', (tx.data ?? '0x').toLowerCase(), expected.call.data, `calldata of ${expected.call.method}`);
    same('amount', (tx.value ?? 0n).toString(), want.toString(), 'native value');
    return;
  }
  if (expected.asset === 'native') {
    if (effect.kind !== 'native') throw violation('asset', `the transaction is a ${describe(effect)}, the plan expects a native transfer`);
    // A zero-value transfer moves nothing a plan could approve: only the nonce reaper's gap filler
    // is one (checkNonceFill).
    if (want === 0n) throw violation('amount', 'a native transfer of 0 wei is signed only as a nonce gap filler');
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

/**
 * The nonce reaper's gap filler, the one transaction signed without an approved plan: a zero-value
 * transfer from the signer's own address to itself, no calldata, on a chain the signer serves. The
 * request's expected effect must say exactly that ({chain_id, asset 'native', to: the sender,
 * amount_base_units '0'}, a fee cap at most) and the transaction must match it. `sender` is the
 * signer's address; null where it is not known (a proxy in front of a remote signer, which checks
 * the sender itself): then the transaction's recipient must still be the effect's.
 * @throws FatalMovementError SIGNER_POLICY_VIOLATION
 */
export function checkNonceFill(tx: TransactionSerializable, expected: ExpectedEffect | null | undefined, scope: EvmSignerScope, sender: string | null): void {
  if (!expected) throw violation('no_expected_effect', `signer ${scope.signerKey} signs a nonce gap filler only against its expected effect; none was given`);
  const extra = Object.keys(expected).filter((k) => !['chain_id', 'asset', 'to', 'amount_base_units', 'max_fee_per_gas_cap_wei'].includes(k));
  if (expected.asset !== 'native' || expected.amount_base_units !== '0' || extra.length > 0) {
    throw violation('nonce_fill', 'a nonce gap filler\'s expected effect is a native transfer of 0 wei to the sender, nothing else');
  }
  if (sender !== null && expected.to.toLowerCase() !== sender.toLowerCase()) {
    throw violation('nonce_fill', `a nonce gap filler goes from the sender to itself; the expected effect names ${expected.to}, the sender is ${sender}`, {
      expected: sender.toLowerCase(),
      actual: expected.to.toLowerCase(),
    });
  }
  if (tx.type !== 'eip1559' && tx.type !== 'legacy' && tx.type !== 'eip2930') throw violation('tx_type_not_allowed', `transaction type ${tx.type} is not signed as a nonce gap filler`);
  const effect = decodeEffect(tx);
  if (effect.chain_id !== expected.chain_id) {
    throw violation('chain_id', `the filler is for chain ${effect.chain_id}, its expected effect for chain ${expected.chain_id}`, { expected: expected.chain_id, actual: effect.chain_id });
  }
  if (scope.chains && !scope.chains.includes(effect.chain_id)) throw violation('chain_not_served', `signer ${scope.signerKey} does not sign for chain ${effect.chain_id}`);
  if (effect.kind !== 'native') throw violation('nonce_fill', `a nonce gap filler is a plain transfer; this transaction is a ${describe(effect)}`);
  same('to', effect.to, expected.to, 'recipient');
  same('amount', effect.amount.toString(), '0', 'amount (wei)');
  checkFeeCap(tx, expected, scope);
}

/**
 * The fee per gas within the cap: the expected effect's (the chain's cap from the approving
 * configuration; none: refused, a key with no cap can be made to pay any fee), lowered to the
 * signer's own cap for the chain when it has one.
 */
function checkFeeCap(tx: TransactionSerializable, expected: ExpectedEffect, scope: EvmSignerScope): void {
  if (expected.max_fee_per_gas_cap_wei === undefined) {
    throw violation(
      'fee_cap_missing',
      `the expected effect names no fee cap for chain ${expected.chain_id}: set evm.chains[].max_fee_per_gas_cap_wei (or evm.fee_caps, or FERRY_EVM_MAX_FEE_PER_GAS_CAP_WEI for the chain of FERRY_EVM_RPC_URL)`,
    );
  }
  const requested = BigInt(expected.max_fee_per_gas_cap_wei);
  const own = scope.feeCaps?.get(expected.chain_id);
  const cap = own !== undefined && own < requested ? own : requested;
  const offered = (tx as { maxFeePerGas?: bigint }).maxFeePerGas ?? (tx as { gasPrice?: bigint }).gasPrice;
  if (offered === undefined) throw violation('fee_cap', 'the transaction names no fee per gas');
  if (offered > cap) {
    throw violation('fee_cap', `the transaction offers ${offered} wei per gas, above the ${cap === own ? "signer's own" : "chain's"} cap of ${cap}`, {
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

type FeeFields = { maxFeePerGas?: bigint; maxPriorityFeePerGas?: bigint; gasPrice?: bigint; accessList?: unknown };

/**
 * A replacement (fee bump) is the same payment as the attempt's original version: same chain,
 * nonce, recipient, value, calldata (byte for byte), gas limit, transaction type and access list.
 * Only the fee fields may differ, each at least the original's and the fee per gas at most
 * `maxFeeBumpFactor` times the original's; the chain's fee cap is checked on the replacement by
 * checkEvmTransaction. `replacementNo` (1 for the first replacement of the attempt) must be within
 * `maxReplacements`. Pure: both transactions are decoded from bytes the caller checked.
 * @throws FatalMovementError SIGNER_POLICY_VIOLATION, rule `replacement_*`
 */
export function checkReplacement(tx: TransactionSerializable, original: TransactionSerializable, replacementNo: number, limits: ReplacementLimits = DEFAULT_REPLACEMENT_LIMITS): void {
  if (!Number.isInteger(replacementNo) || replacementNo < 1 || replacementNo > limits.maxReplacements) {
    throw violation('replacement_limit', `replacement ${replacementNo} of this attempt is over the limit of ${limits.maxReplacements}`, {
      expected: limits.maxReplacements,
      actual: replacementNo,
    });
  }
  const keep = (rule: string, what: string, a: unknown, b: unknown) => {
    if (a === b) return;
    throw violation(rule, `a replacement keeps the original's ${what}: it is ${String(b)}, the original's ${String(a)}`, { expected: String(a), actual: String(b) });
  };
  keep('replacement_tx_type', 'transaction type', original.type, tx.type);
  keep('replacement_chain_id', 'chain id', original.chainId, tx.chainId);
  keep('replacement_nonce', 'nonce', original.nonce, tx.nonce);
  keep('replacement_to', 'recipient', original.to?.toLowerCase(), tx.to?.toLowerCase());
  keep('replacement_value', 'value', original.value ?? 0n, tx.value ?? 0n);
  keep('replacement_data', 'calldata', (original.data ?? '0x').toLowerCase(), (tx.data ?? '0x').toLowerCase());
  keep('replacement_gas', 'gas limit', original.gas, tx.gas);
  const o = original as FeeFields;
  const r = tx as FeeFields;
  keep('replacement_access_list', 'access list', accessListKey(o.accessList), accessListKey(r.accessList));

  const fields = tx.type === 'eip1559' ? (['maxFeePerGas', 'maxPriorityFeePerGas'] as const) : (['gasPrice'] as const);
  for (const field of fields) {
    const before = o[field];
    const after = r[field];
    if (before === undefined || after === undefined) throw violation('replacement_fee_decrease', `the ${field} of the original or the replacement is missing`);
    if (after < before) {
      throw violation('replacement_fee_decrease', `a replacement never lowers ${field}: ${after} wei, the original's ${before}`, { expected: before.toString(), actual: after.toString() });
    }
  }
  // The fee per gas bounds what the transaction can cost (gas limit x fee per gas); the tip is
  // bounded by it (a node refuses a tip above maxFeePerGas).
  const field = tx.type === 'eip1559' ? 'maxFeePerGas' : 'gasPrice';
  const bound = (o[field]! * BigInt(Math.round(limits.maxFeeBumpFactor * 1000))) / 1000n;
  if (r[field]! > bound) {
    throw violation('replacement_bump_factor', `a replacement offers ${r[field]} wei per gas, over ${limits.maxFeeBumpFactor} times the original's ${o[field]}`, {
      expected: bound.toString(),
      actual: r[field]!.toString(),
    });
  }
}

/** What a cancel replacement costs in gas: a plain transfer without calldata. */
export const CANCEL_GAS = 21_000n;

/**
 * An operator's cancel of a submitted attempt: a zero-value transfer from the signer's own address
 * to itself, no calldata, no access list, 21,000 gas, at the nonce, on the chain and of the type of
 * the attempt's original version, with fees at least the original's and within the chain's cap. The
 * original must itself be the approved payment (checkEvmTransaction against the expected effect), so
 * a cancel exists only for a nonce a movement's approved node holds. `sender` is the signer's address;
 * null where it is not known (a proxy in front of a remote signer, which checks it itself).
 * Whichever of the two is mined, nothing is paid twice: they share the nonce.
 * @throws FatalMovementError SIGNER_POLICY_VIOLATION, rule `cancel_*`
 */
export function checkCancel(
  tx: TransactionSerializable,
  original: TransactionSerializable,
  expected: ExpectedEffect | null | undefined,
  scope: EvmSignerScope,
  sender: string | null,
  unavailableReason?: string | null,
): void {
  checkEvmTransaction(original, expected, scope, unavailableReason);
  const keep = (rule: string, what: string, a: unknown, b: unknown) => {
    if (a === b) return;
    throw violation(rule, `a cancel keeps the original's ${what}: it is ${String(b)}, the original's ${String(a)}`, { expected: String(a), actual: String(b) });
  };
  keep('cancel_tx_type', 'transaction type', original.type, tx.type);
  keep('cancel_chain_id', 'chain id', original.chainId, tx.chainId);
  keep('cancel_nonce', 'nonce', original.nonce, tx.nonce);
  if (!tx.to) throw violation('cancel_to', 'a cancel is a transfer to the sender itself; this transaction names no recipient');
  if (sender !== null && tx.to.toLowerCase() !== sender.toLowerCase()) {
    throw violation('cancel_to', `a cancel goes from the sender to itself; it names ${tx.to}, the sender is ${sender}`, { expected: sender.toLowerCase(), actual: tx.to.toLowerCase() });
  }
  if ((tx.value ?? 0n) !== 0n) throw violation('cancel_value', `a cancel moves no value; this one carries ${tx.value} wei`);
  if ((tx.data ?? '0x') !== '0x') throw violation('cancel_data', 'a cancel carries no calldata');
  if (accessListKey((tx as FeeFields).accessList) !== '[]') throw violation('cancel_access_list', 'a cancel has no access list');
  if (tx.gas !== CANCEL_GAS) throw violation('cancel_gas', `a cancel's gas limit is ${CANCEL_GAS}, not ${tx.gas}`, { expected: CANCEL_GAS.toString(), actual: String(tx.gas) });
  const o = original as FeeFields;
  const r = tx as FeeFields;
  const fields = tx.type === 'eip1559' ? (['maxFeePerGas', 'maxPriorityFeePerGas'] as const) : (['gasPrice'] as const);
  for (const field of fields) {
    const before = o[field];
    const after = r[field];
    if (before === undefined || after === undefined || after < before) {
      throw violation('cancel_fee_decrease', `a cancel offers at least the original's ${field} (${before}), not ${after}`, { expected: String(before), actual: String(after) });
    }
  }
  checkFeeCap(tx, expected!, scope);
}

function accessListKey(list: unknown): string {
  if (!Array.isArray(list) || list.length === 0) return '[]';
  return JSON.stringify(
    list.map((e: { address?: string; storageKeys?: string[] }) => [String(e.address ?? '').toLowerCase(), (e.storageKeys ?? []).map((k) => k.toLowerCase())]),
  );
}
