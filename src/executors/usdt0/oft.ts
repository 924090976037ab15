import { decodeFunctionData, encodeFunctionData, pad, parseAbi, toFunctionSelector, type Address, type Hex } from 'viem';

/**
 * LayerZero OFT v2 as the USDT0 lane speaks it (docs/usdt0-lane.md): the ABI of the calls and
 * events it uses, the encoding of `send`, and the signer's check of a `send` transaction against the
 * approved expected effect. Pure (viem only): the EVM signer policy and the expected effect import it.
 */

export const SEND_SIGNATURE = 'send((uint32,bytes32,uint256,uint256,bytes,bytes,bytes),(uint256,uint256),address)';
export const SEND_SELECTOR = toFunctionSelector(SEND_SIGNATURE);
/** OFT v2 moves amounts in 6 shared decimals by default (OFTCore): USDT0's too (its token has 6 decimals, so no dust). */
export const DEFAULT_SHARED_DECIMALS = 6;

export const oftAbi = parseAbi([
  'struct SendParam { uint32 dstEid; bytes32 to; uint256 amountLD; uint256 minAmountLD; bytes extraOptions; bytes composeMsg; bytes oftCmd; }',
  'struct MessagingFee { uint256 nativeFee; uint256 lzTokenFee; }',
  'struct MessagingReceipt { bytes32 guid; uint64 nonce; MessagingFee fee; }',
  'struct OFTReceipt { uint256 amountSentLD; uint256 amountReceivedLD; }',
  'function send(SendParam sendParam, MessagingFee fee, address refundAddress) payable returns (MessagingReceipt msgReceipt, OFTReceipt oftReceipt)',
  'function quoteSend(SendParam sendParam, bool payInLzToken) view returns (MessagingFee fee)',
  'function token() view returns (address)',
  'function sharedDecimals() view returns (uint8)',
  'function peers(uint32 eid) view returns (bytes32)',
  'function approvalRequired() view returns (bool)',
  'event OFTSent(bytes32 indexed guid, uint32 dstEid, address indexed fromAddress, uint256 amountSentLD, uint256 amountReceivedLD)',
  'event OFTReceived(bytes32 indexed guid, uint32 srcEid, address indexed toAddress, uint256 amountReceivedLD)',
  'error SlippageExceeded(uint256 amountLD, uint256 minAmountLD)',
  'error NotEnoughNative(uint256 msgValue)',
  'error NoPeer(uint32 eid)',
  'error InvalidOptions(bytes options)',
  'error LZ_InsufficientFee(uint256 requiredNative, uint256 suppliedNative, uint256 requiredLzToken, uint256 suppliedLzToken)',
]);

export interface SendParam {
  dstEid: number;
  to: Hex;
  amountLD: bigint;
  minAmountLD: bigint;
  extraOptions: Hex;
  composeMsg: Hex;
  oftCmd: Hex;
}

/** An address as LayerZero's bytes32 (left-padded), lowercase. */
export function addressToBytes32(address: string): Hex {
  return pad(address.toLowerCase() as Address, { size: 32 }).toLowerCase() as Hex;
}

export function encodeSend(sp: SendParam, nativeFee: bigint, refundAddress: Address): Hex {
  return encodeFunctionData({ abi: oftAbi, functionName: 'send', args: [sp, { nativeFee, lzTokenFee: 0n }, refundAddress] });
}

/** The `send` a transaction's calldata makes, exactly (trailing bytes or another encoding: null). */
export function decodeSend(data: Hex): { sp: SendParam; nativeFee: bigint; lzTokenFee: bigint; refundAddress: string } | null {
  try {
    const d = decodeFunctionData({ abi: oftAbi, data });
    if (d.functionName !== 'send') return null;
    const [sp, fee, refund] = d.args as unknown as [SendParam, { nativeFee: bigint; lzTokenFee: bigint }, Address];
    const canonical = encodeFunctionData({ abi: oftAbi, functionName: 'send', args: [sp, fee, refund] });
    if (canonical.toLowerCase() !== data.toLowerCase()) return null;
    return { sp, nativeFee: fee.nativeFee, lzTokenFee: fee.lzTokenFee, refundAddress: refund.toLowerCase() };
  } catch {
    return null;
  }
}

/** What the approved plan fixes of an OFT send (ExpectedEffect.oft_send). */
export interface OftSendEffect {
  dst_eid: number;
  to: string;
  amount_ld: string;
  min_amount_ld: string;
  extra_options: string;
  compose_msg: string;
  oft_cmd: string;
  max_native_fee_wei: string;
  refund_address?: string;
}

export type OftViolation = (rule: string, message: string, details?: Record<string, unknown>) => Error;

/**
 * The signer's rule for an OFT `send` (evm-policy.ts calls it for an effect with `oft_send`): the
 * transaction calls `send` on the approved OFT, its SendParam is the approved one field by field
 * (destination eid, recipient, amount, minimum amount, options, no compose message, no OFT command),
 * it pays no lz token fee, its native value is exactly the fee it declares (the OFT refuses any
 * other) and at most the approved cap, and the endpoint's refund goes to the approved refund address
 * or, when the plan names none, back to the sender. `sender` null: not known here (a proxy in front
 * of a remote signer, which checks it itself).
 */
export function checkOftSend(
  tx: { to?: string | null; data?: Hex; value?: bigint },
  expected: { to: string; oft_send: OftSendEffect },
  sender: string | null,
  violation: OftViolation,
): void {
  const e = expected.oft_send;
  const same = (rule: string, actual: string, want: string, what: string) => {
    if (actual.toLowerCase() !== want.toLowerCase()) throw violation(rule, `the send's ${what} is ${actual}, the approved plan's is ${want}`, { expected: want, actual });
  };
  if (!tx.to) throw violation('oft_call', 'the transaction deploys a contract; the plan names an OFT send');
  same('to', tx.to, expected.to, 'OFT contract');
  const data = (tx.data ?? '0x').toLowerCase() as Hex;
  if (data.slice(0, 10) !== SEND_SELECTOR) throw violation('call', `the transaction calls ${data.slice(0, 10)}, the plan names ${SEND_SIGNATURE}`, { expected: SEND_SELECTOR, actual: data.slice(0, 10) });
  const send = decodeSend(data);
  if (!send) throw violation('oft_calldata', `the calldata is not a canonical encoding of ${SEND_SIGNATURE}`);
  const { sp } = send;
  same('oft_dst_eid', String(sp.dstEid), String(e.dst_eid), 'destination eid');
  same('oft_recipient', sp.to, e.to, 'recipient (bytes32)');
  same('oft_amount', sp.amountLD.toString(), e.amount_ld, 'amount (base units)');
  same('oft_min_amount', sp.minAmountLD.toString(), e.min_amount_ld, 'minimum amount (base units)');
  same('oft_options', sp.extraOptions, e.extra_options, 'extra options');
  same('oft_compose', sp.composeMsg, e.compose_msg, 'compose message');
  same('oft_cmd', sp.oftCmd, e.oft_cmd, 'OFT command');
  if (send.lzTokenFee !== 0n) throw violation('oft_lz_token_fee', `the send pays ${send.lzTokenFee} in lz token; the plan approves native fees only`, { expected: '0', actual: send.lzTokenFee.toString() });
  const value = tx.value ?? 0n;
  if (value !== send.nativeFee) {
    throw violation('oft_value', `the transaction carries ${value} wei, the native fee it declares is ${send.nativeFee} (the OFT wants it exactly)`, { expected: send.nativeFee.toString(), actual: value.toString() });
  }
  if (send.nativeFee > BigInt(e.max_native_fee_wei)) {
    throw violation('oft_native_fee_cap', `the send pays a native fee of ${send.nativeFee} wei, above the approved cap of ${e.max_native_fee_wei}`, { expected: e.max_native_fee_wei, actual: send.nativeFee.toString() });
  }
  const refund = e.refund_address ?? sender;
  if (refund !== null && refund !== undefined) same('oft_refund_address', send.refundAddress, refund, 'refund address');
}
