import { concat, decodeAbiParameters, decodeFunctionData, encodeAbiParameters, encodeFunctionData, parseAbi, toFunctionSelector, zeroAddress, type Address, type Hex } from 'viem';

/**
 * Chainlink CCIP (1.6) as the CCIP lane speaks it (docs/ccip-lane.md): the Router's client calls,
 * the OnRamp's CCIPMessageSent, the OffRamp's execution state, the EVMExtraArgsV2 encoding, and the
 * signer's check of a `ccipSend` transaction against the approved expected effect. Pure (viem only):
 * the EVM signer policy and the expected effect import it.
 */

export const CCIP_SEND_SIGNATURE = 'ccipSend(uint64,(bytes,bytes,(address,uint256)[],address,bytes))';
export const CCIP_SEND_SELECTOR = toFunctionSelector(CCIP_SEND_SIGNATURE);
/** EVMExtraArgsV2 (GenericExtraArgsV2): bytes4(keccak256("CCIP EVMExtraArgsV2")), then abi.encode(gasLimit, allowOutOfOrderExecution). */
export const EVM_EXTRA_ARGS_V2_TAG = '0x181dcf10';
export const MAX_UINT64 = 2n ** 64n - 1n;

export const routerAbi = parseAbi([
  'struct EVMTokenAmount { address token; uint256 amount; }',
  'struct EVM2AnyMessage { bytes receiver; bytes data; EVMTokenAmount[] tokenAmounts; address feeToken; bytes extraArgs; }',
  'function ccipSend(uint64 destinationChainSelector, EVM2AnyMessage message) payable returns (bytes32)',
  'function getFee(uint64 destinationChainSelector, EVM2AnyMessage message) view returns (uint256 fee)',
  'function isChainSupported(uint64 chainSelector) view returns (bool)',
  'function getOnRamp(uint64 destChainSelector) view returns (address)',
  'error UnsupportedDestinationChain(uint64 destChainSelector)',
  'error InsufficientFeeTokenAmount()',
  'error InvalidMsgValue()',
  'error InvalidExtraArgsTag()',
  'error MessageGasLimitTooHigh()',
  'error ExtraArgOutOfOrderExecutionMustBeTrue()',
  'error FeeTokenNotSupported(address token)',
  'error UnsupportedToken(address token)',
  'error InvalidEVMAddress(bytes encodedAddress)',
  'error DestinationChainNotEnabled(uint64 destChainSelector)',
]);

export const onRampAbi = parseAbi([
  'struct RampMessageHeader { bytes32 messageId; uint64 sourceChainSelector; uint64 destChainSelector; uint64 sequenceNumber; uint64 nonce; }',
  'struct EVM2AnyTokenTransfer { address sourcePoolAddress; bytes destTokenAddress; bytes extraData; uint256 amount; bytes destExecData; }',
  'struct EVM2AnyRampMessage { RampMessageHeader header; address sender; bytes data; bytes receiver; bytes extraArgs; address feeToken; uint256 feeTokenAmount; uint256 feeValueJuels; EVM2AnyTokenTransfer[] tokenAmounts; }',
  'event CCIPMessageSent(uint64 indexed destChainSelector, uint64 indexed sequenceNumber, EVM2AnyRampMessage message)',
]);

/** MessageExecutionState (all versions): 0 UNTOUCHED, 1 IN_PROGRESS, 2 SUCCESS, 3 FAILURE. */
export const EXECUTION_STATES = ['UNTOUCHED', 'IN_PROGRESS', 'SUCCESS', 'FAILURE'] as const;

export const offRampAbi = parseAbi([
  'function getExecutionState(uint64 sourceChainSelector, uint64 sequenceNumber) view returns (uint8)',
  'event ExecutionStateChanged(uint64 indexed sourceChainSelector, uint64 indexed sequenceNumber, bytes32 indexed messageId, bytes32 messageHash, uint8 state, bytes returnData, uint256 gasUsed)',
]);

export interface CcipMessage {
  receiver: Hex;
  data: Hex;
  tokenAmounts: Array<{ token: Address; amount: bigint }>;
  feeToken: Address;
  extraArgs: Hex;
}

/** An address as CCIP's receiver bytes: abi.encode(address), 32 bytes, lowercase. */
export function encodeReceiver(address: string): Hex {
  return encodeAbiParameters([{ type: 'address' }], [address as Address]).toLowerCase() as Hex;
}

/** EVMExtraArgsV2 for a gas limit and out-of-order execution, lowercase. */
export function encodeExtraArgsV2(gasLimit: bigint, allowOutOfOrderExecution: boolean): Hex {
  return concat([EVM_EXTRA_ARGS_V2_TAG, encodeAbiParameters([{ type: 'uint256' }, { type: 'bool' }], [gasLimit, allowOutOfOrderExecution])]).toLowerCase() as Hex;
}

/** The (gasLimit, allowOutOfOrderExecution) of EVMExtraArgsV2 bytes; null for anything else. */
export function decodeExtraArgsV2(extraArgs: Hex): { gasLimit: bigint; allowOutOfOrderExecution: boolean } | null {
  if (extraArgs.slice(0, 10).toLowerCase() !== EVM_EXTRA_ARGS_V2_TAG || extraArgs.length !== 10 + 128) return null;
  try {
    const [gasLimit, ooo] = decodeAbiParameters([{ type: 'uint256' }, { type: 'bool' }], `0x${extraArgs.slice(10)}`);
    return { gasLimit, allowOutOfOrderExecution: ooo };
  } catch {
    return null;
  }
}

/** A token-only message: what the lane sends, its fee paid in native coin (feeToken 0) or in a fee token (LINK). */
export function tokenMessage(receiver: string, token: Address, amount: bigint, extraArgs: Hex, feeToken: Address = zeroAddress): CcipMessage {
  return { receiver: encodeReceiver(receiver), data: '0x', tokenAmounts: [{ token, amount }], feeToken, extraArgs };
}

export function encodeCcipSend(destinationChainSelector: bigint, message: CcipMessage): Hex {
  return encodeFunctionData({ abi: routerAbi, functionName: 'ccipSend', args: [destinationChainSelector, message] });
}

/** The `ccipSend` a transaction's calldata makes, exactly (trailing bytes or another encoding: null). */
export function decodeCcipSend(data: Hex): { destinationChainSelector: bigint; message: CcipMessage } | null {
  try {
    const d = decodeFunctionData({ abi: routerAbi, data });
    if (d.functionName !== 'ccipSend') return null;
    const [selector, message] = d.args as unknown as [bigint, CcipMessage];
    if (encodeCcipSend(selector, message).toLowerCase() !== data.toLowerCase()) return null;
    return { destinationChainSelector: selector, message };
  } catch {
    return null;
  }
}

/** What the approved plan fixes of a CCIP send (ExpectedEffect.ccip_send). */
export interface CcipSendEffect {
  dest_chain_selector: string;
  destination_chain_id: number;
  receiver: string;
  token: string;
  amount: string;
  data: string;
  fee_token: string;
  extra_args: string;
  /** The fee cap in the fee token's base units: wei for native (fee_token 0), the token's own (juels for LINK) otherwise. */
  max_fee_wei: string;
}

export type CcipViolation = (rule: string, message: string, details?: Record<string, unknown>) => Error;

/**
 * The signer's rule for a Router `ccipSend` (evm-policy.ts calls it for an effect with
 * `ccip_send`): the transaction calls `ccipSend` on the approved Router, to the approved destination
 * selector, with the approved receiver, exactly one token amount (the approved token and amount), the
 * approved data and extraArgs and the approved fee token. Paid in native coin (feeToken 0), the
 * value is at most the approved fee cap: the Router takes the whole msg.value, so the value is the
 * fee paid. Paid in a fee token (LINK), the value is 0: the Router pulls getFee() of the token with
 * transferFrom, so the cap holds on chain through the allowance, which the plan's own fee approval
 * node (its spender the Router, its amount the cap, checked by the signer as an approve) sets.
 */
export function checkCcipSend(tx: { to?: string | null; data?: Hex; value?: bigint }, expected: { to: string; ccip_send: CcipSendEffect }, violation: CcipViolation): void {
  const e = expected.ccip_send;
  const same = (rule: string, actual: string, want: string, what: string) => {
    if (actual.toLowerCase() !== want.toLowerCase()) throw violation(rule, `the send's ${what} is ${actual}, the approved plan's is ${want}`, { expected: want, actual });
  };
  if (!tx.to) throw violation('ccip_call', 'the transaction deploys a contract; the plan names a CCIP send');
  same('to', tx.to, expected.to, 'Router contract');
  const data = (tx.data ?? '0x').toLowerCase() as Hex;
  if (data.slice(0, 10) !== CCIP_SEND_SELECTOR) throw violation('call', `the transaction calls ${data.slice(0, 10)}, the plan names ${CCIP_SEND_SIGNATURE}`, { expected: CCIP_SEND_SELECTOR, actual: data.slice(0, 10) });
  const send = decodeCcipSend(data);
  if (!send) throw violation('ccip_calldata', `the calldata is not a canonical encoding of ${CCIP_SEND_SIGNATURE}`);
  const m = send.message;
  same('ccip_dest_selector', send.destinationChainSelector.toString(), e.dest_chain_selector, 'destination chain selector');
  same('ccip_receiver', m.receiver, e.receiver, 'receiver');
  if (m.tokenAmounts.length !== 1) throw violation('ccip_token_amounts', `the send moves ${m.tokenAmounts.length} token amounts; the plan approves one`, { expected: 1, actual: m.tokenAmounts.length });
  same('ccip_token', m.tokenAmounts[0]!.token, e.token, 'token');
  same('ccip_amount', m.tokenAmounts[0]!.amount.toString(), e.amount, 'amount (base units)');
  same('ccip_data', m.data, e.data, 'data');
  same('ccip_extra_args', m.extraArgs, e.extra_args, 'extraArgs');
  same('ccip_fee_token', m.feeToken, e.fee_token, 'fee token');
  const value = tx.value ?? 0n;
  if (e.fee_token.toLowerCase() !== zeroAddress) {
    if (value !== 0n) throw violation('ccip_fee_value', `the send carries ${value} wei with its fee paid in ${e.fee_token}; the plan approves no native value (the Router refuses it, or keeps it)`, { expected: '0', actual: value.toString() });
    return;
  }
  if (value > BigInt(e.max_fee_wei)) {
    throw violation('ccip_fee_cap', `the send carries ${value} wei, above the approved fee cap of ${e.max_fee_wei} (the Router keeps the whole value)`, { expected: e.max_fee_wei, actual: value.toString() });
  }
}
