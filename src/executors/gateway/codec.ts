import { concat, hashTypedData, isHex, keccak256, pad, parseAbi, size, sliceHex, toHex, type Address, type Hex } from 'viem';

/**
 * Circle Gateway's wire formats (docs/gateway-lane.md, "Facts"): the TransferSpec and BurnIntent
 * as EIP-712 typed data (domain {name "GatewayWallet", version "1"}, no chain id, no verifying
 * contract), their packed binary encodings (big-endian, each opening with a 4-byte magic), the
 * Attestation the API signs, and the ABI of GatewayWallet and GatewayMinter that the lane calls.
 * Pure.
 */

export const GATEWAY_DOMAIN = { name: 'GatewayWallet', version: '1' } as const;
export const BURN_INTENT_PRIMARY_TYPE = 'BurnIntent';

export const TRANSFER_SPEC_FIELDS = [
  { name: 'version', type: 'uint32' },
  { name: 'sourceDomain', type: 'uint32' },
  { name: 'destinationDomain', type: 'uint32' },
  { name: 'sourceContract', type: 'bytes32' },
  { name: 'destinationContract', type: 'bytes32' },
  { name: 'sourceToken', type: 'bytes32' },
  { name: 'destinationToken', type: 'bytes32' },
  { name: 'sourceDepositor', type: 'bytes32' },
  { name: 'destinationRecipient', type: 'bytes32' },
  { name: 'sourceSigner', type: 'bytes32' },
  { name: 'destinationCaller', type: 'bytes32' },
  { name: 'value', type: 'uint256' },
  { name: 'salt', type: 'bytes32' },
  { name: 'hookData', type: 'bytes' },
] as const;

export const BURN_INTENT_FIELDS = [
  { name: 'maxBlockHeight', type: 'uint256' },
  { name: 'maxFee', type: 'uint256' },
  { name: 'spec', type: 'TransferSpec' },
] as const;

/** The struct types of a burn intent (EIP712Domain aside), as the signer's policy knows them. */
export const BURN_INTENT_TYPES = { BurnIntent: BURN_INTENT_FIELDS, TransferSpec: TRANSFER_SPEC_FIELDS } as const;

/** The transfer spec with every field in its final form: 32-byte words as lowercase hex, numbers as bigints. */
export interface TransferSpec {
  version: number;
  sourceDomain: number;
  destinationDomain: number;
  sourceContract: Hex;
  destinationContract: Hex;
  sourceToken: Hex;
  destinationToken: Hex;
  sourceDepositor: Hex;
  destinationRecipient: Hex;
  sourceSigner: Hex;
  destinationCaller: Hex;
  value: bigint;
  salt: Hex;
  hookData: Hex;
}

export interface BurnIntent {
  maxBlockHeight: bigint;
  maxFee: bigint;
  spec: TransferSpec;
}

export const TRANSFER_SPEC_MAGIC = '0xca85def7';
export const BURN_INTENT_MAGIC = '0x070afbc2';
export const ATTESTATION_MAGIC = '0xff6fb334';

/** An address as a bytes32 word (left-padded), lowercase. */
export function word(a: Address | Hex): Hex {
  return pad(a.toLowerCase() as Hex, { size: 32 });
}

/** The address in a bytes32 word, or null when the upper 12 bytes are not zero. */
export function addressOfWord(w: Hex): Address | null {
  if (!isHex(w) || size(w) !== 32 || !/^0x0{24}/.test(w)) return null;
  return `0x${w.slice(26).toLowerCase()}` as Address;
}

const u32 = (n: number) => toHex(n, { size: 4 });
const u256 = (n: bigint) => toHex(n, { size: 32 });

/** The packed TransferSpec: magic, version, domains (4 bytes each), ten 32-byte fields, hook length (4), hook data. */
export function encodeTransferSpec(s: TransferSpec): Hex {
  return concat([
    TRANSFER_SPEC_MAGIC,
    u32(s.version),
    u32(s.sourceDomain),
    u32(s.destinationDomain),
    s.sourceContract,
    s.destinationContract,
    s.sourceToken,
    s.destinationToken,
    s.sourceDepositor,
    s.destinationRecipient,
    s.sourceSigner,
    s.destinationCaller,
    u256(s.value),
    s.salt,
    u32(size(s.hookData)),
    s.hookData,
  ]).toLowerCase() as Hex;
}

/** The packed BurnIntent: magic, maxBlockHeight, maxFee, spec length (4), spec. */
export function encodeBurnIntent(b: BurnIntent): Hex {
  const spec = encodeTransferSpec(b.spec);
  return concat([BURN_INTENT_MAGIC, u256(b.maxBlockHeight), u256(b.maxFee), u32(size(spec)), spec]).toLowerCase() as Hex;
}

/** The packed Attestation: magic, maxBlockHeight, spec length (4), spec. */
export function encodeAttestation(maxBlockHeight: bigint, spec: TransferSpec): Hex {
  const s = encodeTransferSpec(spec);
  return concat([ATTESTATION_MAGIC, u256(maxBlockHeight), u32(size(s)), s]).toLowerCase() as Hex;
}

/** The replay key of a transfer: keccak256 of its packed TransferSpec. */
export function transferSpecHash(s: TransferSpec): Hex {
  return keccak256(encodeTransferSpec(s));
}

function decodeSpecAt(h: Hex, at: number, len: number): TransferSpec | null {
  if (len < 340) return null;
  const bytes = (o: number, n: number) => sliceHex(h, at + o, at + o + n, { strict: true }).toLowerCase() as Hex;
  if (bytes(0, 4) !== TRANSFER_SPEC_MAGIC) return null;
  const hookLen = Number(BigInt(bytes(336, 4)));
  if (340 + hookLen !== len) return null;
  const w = (o: number) => bytes(o, 32);
  return {
    version: Number(BigInt(bytes(4, 4))),
    sourceDomain: Number(BigInt(bytes(8, 4))),
    destinationDomain: Number(BigInt(bytes(12, 4))),
    sourceContract: w(16),
    destinationContract: w(48),
    sourceToken: w(80),
    destinationToken: w(112),
    sourceDepositor: w(144),
    destinationRecipient: w(176),
    sourceSigner: w(208),
    destinationCaller: w(240),
    value: BigInt(w(272)),
    salt: w(304),
    hookData: hookLen === 0 ? '0x' : bytes(340, hookLen),
  };
}

/** A packed Attestation read back (the mint checks what it would mint before signing anything), or null. */
export function decodeAttestation(payload: unknown): { maxBlockHeight: bigint; spec: TransferSpec; specHash: Hex } | null {
  if (typeof payload !== 'string' || !isHex(payload) || size(payload) < 40) return null;
  try {
    const h = payload.toLowerCase() as Hex;
    if (sliceHex(h, 0, 4) !== ATTESTATION_MAGIC) return null;
    const len = Number(BigInt(sliceHex(h, 36, 40)));
    if (size(h) !== 40 + len) return null;
    const spec = decodeSpecAt(h, 40, len);
    if (!spec) return null;
    return { maxBlockHeight: BigInt(sliceHex(h, 4, 36)), spec, specHash: keccak256(sliceHex(h, 40, 40 + len)) };
  } catch {
    return null;
  }
}

/** A packed BurnIntent read back, or null. */
export function decodeBurnIntent(payload: unknown): BurnIntent | null {
  if (typeof payload !== 'string' || !isHex(payload) || size(payload) < 72) return null;
  try {
    const h = payload.toLowerCase() as Hex;
    if (sliceHex(h, 0, 4) !== BURN_INTENT_MAGIC) return null;
    const len = Number(BigInt(sliceHex(h, 68, 72)));
    if (size(h) !== 72 + len) return null;
    const spec = decodeSpecAt(h, 72, len);
    if (!spec) return null;
    return { maxBlockHeight: BigInt(sliceHex(h, 4, 36)), maxFee: BigInt(sliceHex(h, 36, 68)), spec };
  } catch {
    return null;
  }
}

/** The burn intent as the JSON message of its typed data (uint256 as decimal strings, as the API takes them). */
export function burnIntentMessage(b: BurnIntent): Record<string, unknown> {
  const s = b.spec;
  return {
    maxBlockHeight: b.maxBlockHeight.toString(),
    maxFee: b.maxFee.toString(),
    spec: {
      version: s.version,
      sourceDomain: s.sourceDomain,
      destinationDomain: s.destinationDomain,
      sourceContract: s.sourceContract,
      destinationContract: s.destinationContract,
      sourceToken: s.sourceToken,
      destinationToken: s.destinationToken,
      sourceDepositor: s.sourceDepositor,
      destinationRecipient: s.destinationRecipient,
      sourceSigner: s.sourceSigner,
      destinationCaller: s.destinationCaller,
      value: s.value.toString(),
      salt: s.salt,
      hookData: s.hookData,
    },
  };
}

/** The whole typed data of a burn intent: what the signer checks and signs (payload_format eip712). */
export function burnIntentTypedData(b: BurnIntent): { types: Record<string, Array<{ name: string; type: string }>>; primaryType: string; domain: Record<string, unknown>; message: Record<string, unknown> } {
  return {
    types: {
      EIP712Domain: [
        { name: 'name', type: 'string' },
        { name: 'version', type: 'string' },
      ],
      BurnIntent: BURN_INTENT_FIELDS.map((f) => ({ ...f })),
      TransferSpec: TRANSFER_SPEC_FIELDS.map((f) => ({ ...f })),
    },
    primaryType: BURN_INTENT_PRIMARY_TYPE,
    domain: { ...GATEWAY_DOMAIN },
    message: burnIntentMessage(b),
  };
}

/** The EIP-712 digest of a burn intent. */
export function burnIntentDigest(b: BurnIntent): Hex {
  return hashTypedData({ domain: { ...GATEWAY_DOMAIN }, types: { BurnIntent: [...BURN_INTENT_FIELDS], TransferSpec: [...TRANSFER_SPEC_FIELDS] }, primaryType: 'BurnIntent', message: b as never });
}

const HEX32 = /^0x[0-9a-fA-F]{64}$/;
const BYTES = /^0x([0-9a-fA-F]{2})*$/;

/** A burn intent from its JSON message (the API's body, a typed-data message), or why not. */
export function parseBurnIntentMessage(m: unknown): { ok: true; value: BurnIntent } | { ok: false; detail: string } {
  const bad = (detail: string) => ({ ok: false, detail }) as const;
  if (typeof m !== 'object' || m === null) return bad('the burn intent is not an object');
  const o = m as Record<string, unknown>;
  const uint = (v: unknown, bits: number): bigint | null => {
    const n = typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? BigInt(v) : typeof v === 'string' && /^[0-9]{1,78}$/.test(v) ? BigInt(v) : null;
    return n !== null && n < 2n ** BigInt(bits) ? n : null;
  };
  const maxBlockHeight = uint(o.maxBlockHeight, 256);
  const maxFee = uint(o.maxFee, 256);
  if (maxBlockHeight === null) return bad('maxBlockHeight is not a uint256');
  if (maxFee === null) return bad('maxFee is not a uint256');
  if (typeof o.spec !== 'object' || o.spec === null) return bad('spec is not an object');
  const s = o.spec as Record<string, unknown>;
  const keys = Object.keys(s).sort().join(',');
  const want = TRANSFER_SPEC_FIELDS.map((f) => f.name).sort().join(',');
  if (keys !== want) return bad(`spec has the fields ${keys}; a TransferSpec has exactly ${want}`);
  const out: Record<string, unknown> = {};
  for (const f of TRANSFER_SPEC_FIELDS) {
    const v = s[f.name];
    if (f.type === 'uint32') {
      const n = uint(v, 32);
      if (n === null) return bad(`spec.${f.name} is not a uint32`);
      out[f.name] = Number(n);
    } else if (f.type === 'uint256') {
      const n = uint(v, 256);
      if (n === null) return bad(`spec.${f.name} is not a uint256`);
      out[f.name] = n;
    } else if (f.type === 'bytes32') {
      if (typeof v !== 'string' || !HEX32.test(v)) return bad(`spec.${f.name} is not a bytes32`);
      out[f.name] = v.toLowerCase();
    } else {
      if (typeof v !== 'string' || !BYTES.test(v)) return bad(`spec.${f.name} is not bytes`);
      out[f.name] = v.toLowerCase();
    }
  }
  return { ok: true, value: { maxBlockHeight, maxFee, spec: out as unknown as TransferSpec } };
}

export const gatewayWalletAbi = parseAbi([
  'function deposit(address token, uint256 value)',
  'function availableBalance(address token, address depositor) view returns (uint256)',
  'function totalBalance(address token, address depositor) view returns (uint256)',
  'function isTokenSupported(address token) view returns (bool)',
  'function gatewayBurn(bytes calldataBytes, bytes signature)',
  'event Deposited(address indexed token, address indexed depositor, address indexed sender, uint256 value)',
  'event GatewayBurned(address indexed token, address indexed depositor, bytes32 indexed transferSpecHash, uint32 destinationDomain, bytes32 destinationRecipient, address signer, uint256 value, uint256 fee, uint256 fromAvailable, uint256 fromWithdrawing)',
]);

export const gatewayMinterAbi = parseAbi([
  'function gatewayMint(bytes attestationPayload, bytes signature)',
  'function isTokenSupported(address token) view returns (bool)',
  'event AttestationUsed(address indexed token, address indexed recipient, bytes32 indexed transferSpecHash, uint32 sourceDomain, bytes32 sourceDepositor, bytes32 sourceSigner, uint256 value)',
]);

export const DEPOSIT_SIGNATURE = 'deposit(address,uint256)';
export const GATEWAY_MINT_SIGNATURE = 'gatewayMint(bytes,bytes)';
