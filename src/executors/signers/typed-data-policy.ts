import { hashTypedData, isAddress, type Hex, type TypedDataDefinition } from 'viem';
import { z } from 'zod';
import { FatalMovementError, TemporaryMovementError } from '../errors.ts';
import type { ExpectedEffect, SignRequest } from '../protocol.ts';
import { violation, type EvmSignerScope } from './evm-policy.ts';
import { BURN_INTENT_PRIMARY_TYPE, BURN_INTENT_TYPES, parseBurnIntentMessage, word } from '../gateway/codec.ts';

/**
 * The policy every EVM signer applies to typed data (EIP-712) before its key is used, the
 * counterpart of evm-policy.ts for transactions. Default deny at every step:
 *
 * - the signer's configuration must allow the primary type for the request's executor
 *   (evm.signers[].typed_data);
 * - the approved plan must have named typed data for the node (expected_effect.typed_data);
 * - the primary type must be one whose struct Ferry knows (today EIP-2612 `Permit`), with exactly
 *   its canonical types: no extra struct, field or reordering;
 * - the domain must be exactly the approved one (every field equal, no field added or missing);
 * - the message is checked field by field (a permit: owner = the signer, spender = the approved
 *   contract, value at most the approved amount, a deadline inside a bounded window, the nonce
 *   the token's nonces(owner) gives now, or the one the plan pins);
 * - what is signed is the digest of typed data rebuilt from the checked values
 *   (viem's hashTypedData), and it must equal the digest of the payload as given.
 *
 * A refusal is SIGNER_POLICY_VIOLATION with `details.rule`, as for transactions.
 */

/** The payload formats of typed data: Ferry's name, and the reference protocol's for the same JSON. */
export const TYPED_DATA_FORMATS: ReadonlySet<string> = new Set(['eip712', 'eip712_compact']);
/** The signature of typed data: 65 bytes, r || s || v (v 27 or 28), 0x-prefixed hex. */
export const TYPED_DATA_SIGNATURE_FORMAT = 'eip712_signature';
/** EIP-2612's primary type. */
export const PERMIT_PRIMARY_TYPE = 'Permit';
/** How far ahead a permit's deadline may be when the plan says nothing (seconds). */
export const DEFAULT_PERMIT_DEADLINE_SECONDS = 3600;
/** The signer's own bound on a deadline, whatever the plan says: one day. */
export const MAX_TYPED_DATA_DEADLINE_SECONDS = 86_400;

/** Reads `nonces(owner)` of an EIP-2612 token on a chain, from the signer side's own RPC. */
export type TokenNonceReader = (chainId: number, token: Hex, owner: Hex) => Promise<bigint>;

type Field = { name: string; type: string };

/** EIP712Domain's fields in the order EIP-712 gives them; a domain uses a subset, in this order. */
const DOMAIN_FIELDS: readonly Field[] = [
  { name: 'name', type: 'string' },
  { name: 'version', type: 'string' },
  { name: 'chainId', type: 'uint256' },
  { name: 'verifyingContract', type: 'address' },
  { name: 'salt', type: 'bytes32' },
];

type Domain = { name?: string; version?: string; chainId?: number; verifyingContract?: Hex; salt?: Hex };
/** Checks a message against the approved effect; returns it rebuilt from the checked values. */
type MessageCheck = (message: Record<string, unknown>, expected: ExpectedEffect, domain: Domain, scope: EvmSignerScope, opts: TypedDataCheckOptions) => Promise<Record<string, unknown>>;

/**
 * The structs Ferry can check, by primary type: their exact types (EIP712Domain aside) and the
 * check of their message. A new kind (Circle Gateway's BurnIntent) is one more entry.
 */
const KNOWN_STRUCTS: Record<string, { types: Record<string, readonly Field[]>; check: MessageCheck }> = {
  [PERMIT_PRIMARY_TYPE]: {
    types: {
      Permit: [
        { name: 'owner', type: 'address' },
        { name: 'spender', type: 'address' },
        { name: 'value', type: 'uint256' },
        { name: 'nonce', type: 'uint256' },
        { name: 'deadline', type: 'uint256' },
      ],
    },
    check: (...args) => checkPermit(...args),
  },
  // Circle Gateway's burn intent (the Gateway lane, docs/gateway-lane.md).
  [BURN_INTENT_PRIMARY_TYPE]: {
    types: BURN_INTENT_TYPES,
    check: (...args) => checkBurnIntent(...args),
  },
};

const PayloadSchema = z
  .object({
    types: z.record(z.string(), z.array(z.object({ name: z.string(), type: z.string() }).strict())),
    primaryType: z.string().min(1),
    domain: z.record(z.string(), z.unknown()),
    message: z.record(z.string(), z.unknown()),
  })
  .strict();
export type TypedDataPayload = z.output<typeof PayloadSchema>;

/** Typed data checked against the approval: what is signed, and its digest. */
export interface CheckedTypedData {
  /** Rebuilt from the checked values only: the definition the signature is over. */
  typedData: TypedDataDefinition;
  digest: Hex;
}

/** The payload of an `eip712` request: JSON of {types, primaryType, domain, message}, nothing else. */
export function parseTypedDataPayload(payload: string): TypedDataPayload {
  let json: unknown;
  try {
    // A "__proto__" key could give an object fields it does not own once copied: refused outright.
    json = JSON.parse(payload, (key, value: unknown) => {
      if (key === '__proto__') throw new Error('__proto__');
      return value;
    });
  } catch {
    throw invalid('the eip712 payload is not JSON (or has a "__proto__" key)');
  }
  const parsed = PayloadSchema.safeParse(json);
  if (!parsed.success) throw invalid('the eip712 payload is not {types, primaryType, domain, message}');
  return parsed.data;
}

/** The signer's typed-data allowlist from its configuration entry: primary types by executor key. */
export function typedDataAllowlist(entries: ReadonlyArray<{ executor: string; primary_types: readonly string[] }> | undefined): ReadonlyMap<string, ReadonlySet<string>> | undefined {
  if (!entries || entries.length === 0) return undefined;
  const out = new Map<string, Set<string>>();
  for (const e of entries) {
    const set = out.get(e.executor) ?? new Set<string>();
    for (const t of e.primary_types) set.add(t);
    out.set(e.executor, set);
  }
  return out;
}

export interface TypedDataCheckOptions {
  /**
   * The signer's address, lowercase: a permit's owner must be it. null in a proxy in front of a
   * remote signer, which does not hold the key: the remote checks the owner (and, without a
   * reader here, the nonce) itself.
   */
  owner: (() => Promise<string>) | null;
}

/**
 * The whole typed-data policy for a request whose integrity checkSignRequest established (and
 * whose executor the allowlist accepted). Reads the token's nonce when the plan pins none.
 * @throws FatalMovementError SIGNER_POLICY_VIOLATION or SIGNER_PAYLOAD_INVALID;
 *         TemporaryMovementError SIGNER_NONCE_UNREADABLE when the nonce cannot be read now.
 */
export async function checkTypedDataRequest(r: SignRequest, scope: EvmSignerScope, opts: TypedDataCheckOptions): Promise<CheckedTypedData> {
  // Default deny: a signer whose configuration names no typed data signs none, whatever it is.
  if (!scope.typedData || scope.typedData.size === 0) {
    throw violation('typed_data_not_allowed', `signer ${scope.signerKey} signs no typed data (its configuration allows none: evm.signers[].typed_data)`);
  }
  if (r.replaces) throw violation('replacement_format', 'typed data has no replacements: only a transaction is fee-bumped');
  const payload = parseTypedDataPayload(r.payload);
  const primaryType = payload.primaryType;

  // The signer's own configuration first: which executor may have which typed data signed.
  const executor = r.executor_key;
  if (!executor) throw violation('executor_not_named', `signer ${scope.signerKey} signs typed data only for a named executor, and the request names none`);
  if (!scope.typedData?.get(executor)?.has(primaryType)) {
    throw violation('typed_data_not_allowed', `signer ${scope.signerKey} signs no typed data of primary type ${primaryType} for executor ${executor} (evm.signers[].typed_data)`, {
      executor_key: executor,
      actual: primaryType,
    });
  }

  const expected = r.expected_effect;
  if (!expected) {
    throw violation('no_expected_effect', `signer ${scope.signerKey} signs only against an expected effect from the approved plan; none was given${r.expected_effect_unavailable ? ` (${r.expected_effect_unavailable})` : ''}`);
  }
  const approved = expected.typed_data;
  if (!approved) throw violation('typed_data_not_approved', 'the approved plan names no typed data for this node (a transaction was approved)');
  if (primaryType !== approved.primary_type) {
    throw violation('primary_type', `the typed data's primary type is ${primaryType}, the approved plan's is ${approved.primary_type}`, { expected: approved.primary_type, actual: primaryType });
  }
  const struct = KNOWN_STRUCTS[primaryType];
  if (!struct) throw violation('primary_type', `primary type ${primaryType} is not one the signer knows how to check`, { actual: primaryType });

  checkTypes(payload, struct.types);
  const domain = checkDomain(payload.domain, approved.domain, scope);
  const message = await struct.check(payload.message, expected, domain, scope, opts);

  const domainKeys = DOMAIN_FIELDS.filter((f) => f.name in domain);
  const typedData = {
    domain,
    types: { EIP712Domain: domainKeys.map((f) => ({ ...f })), ...Object.fromEntries(Object.entries(struct.types).map(([k, v]) => [k, v.map((f) => ({ ...f }))])) },
    primaryType,
    message,
  } as unknown as TypedDataDefinition;
  const digest = hashTypedData(typedData);
  // The payload as the executor wrote it must mean the same: a parser quirk, a type we did not
  // look at or a value encoded another way would make its digest another one.
  let given: Hex;
  try {
    given = hashTypedData(payload as unknown as TypedDataDefinition);
  } catch (err) {
    throw violation('typed_data_types', `the typed data does not hash: ${(err as Error).message.split('\n')[0]}`);
  }
  if (given !== digest) throw violation('typed_data_types', 'the typed data as given hashes to another digest than the values checked', { expected: digest, actual: given });
  return { typedData, digest };
}

/** Exactly the known struct's types, and an EIP712Domain (when given) that is the canonical one. */
function checkTypes(payload: TypedDataPayload, struct: Record<string, readonly Field[]>): void {
  const { EIP712Domain: domainTypes, ...rest } = payload.types;
  const names = Object.keys(rest).sort();
  const want = Object.keys(struct).sort();
  if (names.join(',') !== want.join(',')) {
    throw violation('typed_data_types', `the typed data defines the types ${names.join(', ') || '(none)'}; ${payload.primaryType} is exactly ${want.join(', ')}`, {
      expected: want.join(','),
      actual: names.join(','),
    });
  }
  for (const name of want) {
    const given = JSON.stringify(rest[name]!.map((f) => [f.name, f.type]));
    const canonical = JSON.stringify(struct[name]!.map((f) => [f.name, f.type]));
    if (given !== canonical) throw violation('typed_data_types', `type ${name} is not the canonical ${name}`, { expected: canonical, actual: given });
  }
  if (domainTypes !== undefined) {
    const canonical = JSON.stringify(DOMAIN_FIELDS.filter((f) => f.name in payload.domain).map((f) => [f.name, f.type]));
    const given = JSON.stringify(domainTypes.map((f) => [f.name, f.type]));
    if (given !== canonical) throw violation('domain_fields', 'EIP712Domain is not the canonical type of the domain given', { expected: canonical, actual: given });
  }
}

/** The domain exactly as approved: the same fields, each equal; the chain one the signer serves. */
function checkDomain(given: Record<string, unknown>, approved: NonNullable<ExpectedEffect['typed_data']>['domain'], scope: EvmSignerScope): Domain {
  const keys = Object.keys(given).sort();
  const want = Object.keys(approved).filter((k) => approved[k as keyof typeof approved] !== undefined).sort();
  if (keys.join(',') !== want.join(',')) {
    throw violation('domain_fields', `the domain has the fields ${keys.join(', ') || '(none)'}; the approved domain ${want.join(', ')}`, { expected: want.join(','), actual: keys.join(',') });
  }
  const out: Domain = {};
  if (approved.name !== undefined) {
    if (given.name !== approved.name) throw violation('domain_name', `the domain's name is ${JSON.stringify(given.name)}, the approved ${JSON.stringify(approved.name)}`, { expected: approved.name, actual: String(given.name) });
    out.name = approved.name;
  }
  if (approved.version !== undefined) {
    if (given.version !== approved.version) {
      throw violation('domain_version', `the domain's version is ${JSON.stringify(given.version)}, the approved ${JSON.stringify(approved.version)}`, { expected: approved.version, actual: String(given.version) });
    }
    out.version = approved.version;
  }
  if (approved.chainId !== undefined) {
    const chainId = uint(given.chainId, 'domain.chainId');
    if (chainId !== BigInt(approved.chainId)) {
      throw violation('chain_id', `the typed data is for chain ${chainId}, the approved plan for chain ${approved.chainId}`, { expected: approved.chainId, actual: chainId.toString() });
    }
    if (scope.chains && !scope.chains.includes(approved.chainId)) throw violation('chain_not_served', `signer ${scope.signerKey} does not sign for chain ${approved.chainId}`);
    out.chainId = approved.chainId;
  }
  // A domain without a chain (Circle Gateway's) binds it in the message instead (the burn intent's
  // source domain): that is its struct's check, as a permit's checks its token and chain below.
  if (approved.verifyingContract !== undefined) {
    const contract = typeof given.verifyingContract === 'string' && isAddress(given.verifyingContract, { strict: false }) ? given.verifyingContract.toLowerCase() : null;
    if (contract !== approved.verifyingContract) {
      throw violation('verifying_contract', `the domain's verifying contract is ${String(given.verifyingContract)}, the approved ${approved.verifyingContract}`, {
        expected: approved.verifyingContract,
        actual: String(given.verifyingContract),
      });
    }
    out.verifyingContract = approved.verifyingContract as Hex;
  }
  if (approved.salt !== undefined) {
    if (typeof given.salt !== 'string' || given.salt.toLowerCase() !== approved.salt) throw violation('domain_salt', "the domain's salt is not the approved one", { expected: approved.salt, actual: String(given.salt) });
    out.salt = approved.salt as Hex;
  }
  return out;
}

/** An EIP-2612 permit as approved: the token, owner, spender, value, deadline and nonce. */
async function checkPermit(
  message: Record<string, unknown>,
  expected: ExpectedEffect,
  domain: Domain,
  scope: EvmSignerScope,
  opts: TypedDataCheckOptions,
): Promise<Record<string, unknown>> {
  if (expected.token_method !== 'permit' || expected.asset === 'native') throw violation('typed_data_not_approved', 'the approved plan names no token permit for this node');
  if (domain.verifyingContract !== expected.asset || domain.chainId !== expected.chain_id) {
    // The effect's token and chain and its domain are pinned together; a mismatch is a bad effect.
    throw violation('verifying_contract', `a permit's domain is the token ${expected.asset} on chain ${expected.chain_id}`, { expected: expected.asset, actual: String(domain.verifyingContract) });
  }
  const keys = Object.keys(message).sort();
  const want = ['deadline', 'nonce', 'owner', 'spender', 'value'];
  if (keys.join(',') !== want.join(',')) throw violation('message_fields', `a permit's message has exactly ${want.join(', ')}; this one ${keys.join(', ')}`, { expected: want.join(','), actual: keys.join(',') });
  const owner = addr(message.owner, 'owner');
  const spender = addr(message.spender, 'spender');
  const value = uint(message.value, 'value');
  const nonce = uint(message.nonce, 'nonce');
  const deadline = uint(message.deadline, 'deadline');

  if (spender !== expected.to) throw violation('spender', `the permit's spender is ${spender}, the approved plan's is ${expected.to}`, { expected: expected.to, actual: spender });
  const cap = BigInt(expected.amount_base_units);
  if (value > cap) throw violation('amount', `the permit allows ${value} base units, more than the approved ${cap}`, { expected: cap.toString(), actual: value.toString() });
  if (value === 0n) throw violation('amount', 'a permit of 0 allows nothing the plan approved');

  const now = BigInt(Math.floor((scope.now?.() ?? Date.now()) / 1000));
  const approvedWindow = expected.typed_data?.deadline_max_seconds ?? DEFAULT_PERMIT_DEADLINE_SECONDS;
  const window = BigInt(Math.min(approvedWindow, MAX_TYPED_DATA_DEADLINE_SECONDS));
  if (deadline <= now) throw violation('deadline', `the permit's deadline ${deadline} has passed (now ${now})`, { expected: `>${now}`, actual: deadline.toString() });
  if (deadline > now + window) {
    throw violation('deadline', `the permit's deadline ${deadline} is more than ${window} s ahead (now ${now})`, { expected: (now + window).toString(), actual: deadline.toString() });
  }

  if (opts.owner !== null) {
    const self = await opts.owner();
    if (owner !== self) throw violation('owner', `a permit's owner is the signer ${self}; this one names ${owner}`, { expected: self, actual: owner });
  }

  const pinned = expected.typed_data?.nonce;
  if (pinned !== undefined) {
    if (nonce !== BigInt(pinned)) throw violation('nonce', `the permit's nonce is ${nonce}, the approved plan pins ${pinned}`, { expected: pinned, actual: nonce.toString() });
  } else if (scope.tokenNonces) {
    let current: bigint;
    try {
      current = await scope.tokenNonces(expected.chain_id, expected.asset as Hex, owner as Hex);
    } catch (err) {
      if (err instanceof FatalMovementError) throw err;
      throw new TemporaryMovementError('SIGNER_NONCE_UNREADABLE', `signer ${scope.signerKey} could not read nonces(${owner}) of token ${expected.asset} on chain ${expected.chain_id}`, { retry_after_seconds: 5 });
    }
    // Only the next nonce: a permit for a later one would stay valid after this one is used.
    if (nonce !== current) throw violation('nonce', `the permit's nonce is ${nonce}, the token's nonces(${owner}) is ${current}`, { expected: current.toString(), actual: nonce.toString() });
  } else if (opts.owner !== null) {
    throw violation('nonce_unverified', `signer ${scope.signerKey} cannot read the token's nonces(owner) on chain ${expected.chain_id} (no RPC for it) and the plan pins no nonce`);
  }
  return { owner, spender, value, nonce, deadline };
}

/**
 * A Circle Gateway burn intent as approved (expected.gateway_burn): every field of its TransferSpec
 * equal to the approved one (version 1, both domains, the GatewayWallet and GatewayMinter, both
 * tokens, the recipient, the destination caller, the value, no hook data), the depositor and the
 * signer both the signing wallet itself (when it is known here), and maxFee at most the approved
 * cap, and maxBlockHeight between the source chain's head (read by the signer side, when it has
 * an RPC of the chain) and the approved window past it. The salt is the executor's (any 32 bytes:
 * a new one is a new transfer, which only the approved amount to the approved recipient can be).
 */
async function checkBurnIntent(
  message: Record<string, unknown>,
  expected: ExpectedEffect,
  _domain: Domain,
  scope: EvmSignerScope,
  opts: TypedDataCheckOptions,
): Promise<Record<string, unknown>> {
  const g = expected.gateway_burn;
  if (!g) throw violation('typed_data_not_approved', 'the approved plan names no Gateway burn intent for this node');
  const keys = Object.keys(message).sort().join(',');
  if (keys !== 'maxBlockHeight,maxFee,spec') throw violation('message_fields', `a burn intent's message has exactly maxBlockHeight, maxFee, spec; this one ${keys}`, { expected: 'maxBlockHeight,maxFee,spec', actual: keys });
  const parsed = parseBurnIntentMessage(message);
  if (!parsed.ok) throw invalid(`the burn intent: ${parsed.detail}`);
  const b = parsed.value;
  const s = b.spec;
  const eq = (rule: string, actual: string | number | bigint, want: string | number | bigint, what: string) => {
    if (String(actual) !== String(want)) throw violation(rule, `the burn intent's ${what} is ${String(actual)}, the approved plan's ${String(want)}`, { expected: String(want), actual: String(actual) });
  };
  eq('gateway_version', s.version, 1, 'spec version');
  eq('gateway_source_domain', s.sourceDomain, g.source_domain, 'source domain');
  eq('gateway_destination_domain', s.destinationDomain, g.destination_domain, 'destination domain');
  eq('gateway_source_contract', s.sourceContract, word(g.source_contract as Hex), 'source contract (GatewayWallet)');
  eq('gateway_destination_contract', s.destinationContract, word(g.destination_contract as Hex), 'destination contract (GatewayMinter)');
  eq('gateway_source_token', s.sourceToken, word(g.source_token as Hex), 'source token');
  eq('gateway_destination_token', s.destinationToken, word(g.destination_token as Hex), 'destination token');
  eq('gateway_recipient', s.destinationRecipient, word(g.destination_recipient as Hex), 'destination recipient');
  eq('gateway_destination_caller', s.destinationCaller, word(g.destination_caller as Hex), 'destination caller');
  eq('amount', s.value, g.value, 'value (base units)');
  eq('gateway_hook_data', s.hookData, '0x', 'hook data');
  if (b.maxFee > BigInt(g.max_fee)) throw violation('gateway_max_fee', `the burn intent's maxFee ${b.maxFee} is above the approved cap ${g.max_fee}`, { expected: g.max_fee, actual: b.maxFee.toString() });
  // Not expired, and not valid for longer than the approved window past the source chain's head
  // (a signed intent is spendable by whoever holds it until then), read by the signer side itself.
  if (scope.chainHeads) {
    let head: bigint;
    try {
      head = await scope.chainHeads(expected.chain_id);
    } catch (err) {
      if (err instanceof FatalMovementError) throw err;
      throw new TemporaryMovementError('SIGNER_CHAIN_UNREADABLE', `signer ${scope.signerKey} could not read the head of chain ${expected.chain_id}`, { retry_after_seconds: 5 });
    }
    const latest = head + BigInt(g.max_blocks_ahead);
    if (b.maxBlockHeight < head || b.maxBlockHeight > latest) {
      throw violation('gateway_max_block_height', `the burn intent's maxBlockHeight ${b.maxBlockHeight} is not between the source chain's head ${head} and ${latest} (the approved ${g.max_blocks_ahead} blocks ahead)`, {
        expected: `${head}..${latest}`,
        actual: b.maxBlockHeight.toString(),
      });
    }
  }
  if (s.sourceDepositor !== s.sourceSigner) throw violation('gateway_signer', "the burn intent's depositor and signer differ: the wallet signs only for its own balance", { expected: s.sourceDepositor, actual: s.sourceSigner });
  if (opts.owner !== null) {
    const self = word((await opts.owner()) as Hex);
    eq('gateway_depositor', s.sourceDepositor, self, 'depositor (the signing wallet)');
  }
  return { maxBlockHeight: b.maxBlockHeight, maxFee: b.maxFee, spec: { ...s } };
}

function uint(v: unknown, what: string): bigint {
  let n: bigint | null = null;
  if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) n = BigInt(v);
  else if (typeof v === 'string' && /^[0-9]{1,78}$/.test(v)) n = BigInt(v);
  if (n === null || n >= 2n ** 256n) throw invalid(`${what} is not a uint256 (a decimal string or a safe integer)`);
  return n;
}

function addr(v: unknown, what: string): string {
  if (typeof v !== 'string' || !isAddress(v, { strict: false })) throw invalid(`${what} is not an address`);
  return v.toLowerCase();
}

function invalid(message: string): FatalMovementError {
  return new FatalMovementError('SIGNER_PAYLOAD_INVALID', message);
}
