import { encodeFunctionData, hexToBigInt, hexToNumber, isHex, keccak256, pad, parseAbi, recoverAddress, sliceHex, type Address, type Hex } from 'viem';

/**
 * CCTP v2 on EVM: the ABI fragments Ferry calls, and the message layout (big-endian, packed):
 * message = version@0:4, sourceDomain@4:4, destinationDomain@8:4, nonce@12:32, sender@44:32,
 * recipient@76:32, destinationCaller@108:32, minFinalityThreshold@140:4,
 * finalityThresholdExecuted@144:4, messageBody@148; burn body = version@0:4, burnToken@4:32,
 * mintRecipient@36:32, amount@68:32, messageSender@100:32, maxFee@132:32, feeExecuted@164:32,
 * expirationBlock@196:32, hookData@228. Pure.
 */

export const tokenMessengerAbi = parseAbi([
  'function depositForBurn(uint256 amount, uint32 destinationDomain, bytes32 mintRecipient, address burnToken, bytes32 destinationCaller, uint256 maxFee, uint32 minFinalityThreshold)',
  'function getMinFeeAmount(uint256 amount) view returns (uint256)',
  'function minFee() view returns (uint256)',
  'event MintAndWithdraw(address indexed mintRecipient, uint256 amount, address indexed mintToken, uint256 feeCollected)',
  'event DepositForBurn(address indexed burnToken, uint256 amount, address indexed depositor, bytes32 mintRecipient, uint32 destinationDomain, bytes32 destinationTokenMessenger, bytes32 destinationCaller, uint256 maxFee, uint32 indexed minFinalityThreshold, bytes hookData)',
]);

export const messageTransmitterAbi = parseAbi([
  'function receiveMessage(bytes message, bytes attestation) returns (bool)',
  'function usedNonces(bytes32 nonce) view returns (uint256)',
  'function localDomain() view returns (uint32)',
  'function isEnabledAttester(address attester) view returns (bool)',
  'function signatureThreshold() view returns (uint256)',
  'event MessageSent(bytes message)',
  'event MessageReceived(address indexed caller, uint32 sourceDomain, bytes32 indexed nonce, bytes32 sender, uint32 indexed finalityThresholdExecuted, bytes messageBody)',
]);

export const DEPOSIT_FOR_BURN_SIGNATURE = 'depositForBurn(uint256,uint32,bytes32,address,bytes32,uint256,uint32)';
export const RECEIVE_MESSAGE_SIGNATURE = 'receiveMessage(bytes,bytes)';
/** CCTP's finality thresholds: 2000 waits for hard finality, 1000 for a confirmed (soft) block. */
export const FINALITY_FINALIZED = 2000;

export interface BurnArgs {
  amount: bigint;
  destinationDomain: number;
  mintRecipient: Address;
  burnToken: Address;
  /** Zero address: anyone may call receiveMessage on the destination. */
  destinationCaller: Address;
  maxFee: bigint;
  minFinalityThreshold: number;
}

/** The depositForBurn calldata; the executor and the signer's expected effect both build it here. */
export function encodeDepositForBurn(a: BurnArgs): Hex {
  return encodeFunctionData({
    abi: tokenMessengerAbi,
    functionName: 'depositForBurn',
    args: [a.amount, a.destinationDomain, pad(a.mintRecipient.toLowerCase() as Hex), a.burnToken, pad(a.destinationCaller.toLowerCase() as Hex), a.maxFee, a.minFinalityThreshold],
  });
}

export interface DecodedMessage {
  version: number;
  sourceDomain: number;
  destinationDomain: number;
  nonce: Hex;
  sender: Hex;
  recipient: Hex;
  destinationCaller: Address;
  minFinalityThreshold: number;
  finalityThresholdExecuted: number;
  body: Hex;
  /** The burn body's fields, when the body is one (at least 228 bytes). */
  burn: { burnToken: Hex; mintRecipient: Address; amount: bigint; messageSender: Address; maxFee: bigint; feeExecuted: bigint; expirationBlock: bigint } | null;
}

/** Decodes a v2 message; null when it is not hex or shorter than the 148-byte header. */
export function decodeMessage(message: unknown): DecodedMessage | null {
  if (typeof message !== 'string' || !isHex(message) || (message.length - 2) % 2 !== 0 || (message.length - 2) / 2 < 148) return null;
  const m = message as Hex;
  const n = (start: number, size: number) => hexToNumber(sliceHex(m, start, start + size));
  const b32 = (start: number) => sliceHex(m, start, start + 32);
  const body = (m.length - 2) / 2 > 148 ? sliceHex(m, 148) : ('0x' as Hex);
  const bodyLen = (body.length - 2) / 2;
  const word = (start: number) => sliceHex(body, start, start + 32);
  return {
    version: n(0, 4),
    sourceDomain: n(4, 4),
    destinationDomain: n(8, 4),
    nonce: b32(12),
    sender: b32(44),
    recipient: b32(76),
    destinationCaller: addressOfWord(b32(108)),
    minFinalityThreshold: n(140, 4),
    finalityThresholdExecuted: n(144, 4),
    body,
    burn:
      bodyLen >= 228
        ? {
            burnToken: word(4),
            mintRecipient: addressOfWord(word(36)),
            amount: hexToBigInt(word(68)),
            messageSender: addressOfWord(word(100)),
            maxFee: hexToBigInt(word(132)),
            feeExecuted: hexToBigInt(word(164)),
            expirationBlock: hexToBigInt(word(196)),
          }
        : null,
  };
}

/** The address in the low 20 bytes of a 32-byte word, lowercase. */
export function addressOfWord(word: Hex): Address {
  return `0x${word.slice(-40)}`.toLowerCase() as Address;
}

/**
 * The signers of an attestation: 65-byte r‖s‖v chunks over keccak256(message), no prefix, as
 * MessageTransmitterV2 recovers them. null when the attestation is not a whole number of chunks,
 * or a chunk does not recover.
 */
export async function attestationSigners(message: Hex, attestation: unknown): Promise<Address[] | null> {
  if (typeof attestation !== 'string' || !isHex(attestation)) return null;
  const len = (attestation.length - 2) / 2;
  if (len === 0 || len % 65 !== 0) return null;
  const digest = keccak256(message);
  const out: Address[] = [];
  for (let i = 0; i < len / 65; i++) {
    try {
      out.push(((await recoverAddress({ hash: digest, signature: sliceHex(attestation as Hex, i * 65, (i + 1) * 65) })) as string).toLowerCase() as Address);
    } catch {
      return null;
    }
  }
  return out;
}
