// viem/utils, not viem: the whole package costs a second to load, and plan code is loaded by the CLI.
import { getAddress } from 'viem/utils';
import { FerryError, IntentInvalidError } from '../errors.ts';
import {
  DECIMAL_PATTERN,
  MAX_AMOUNT_INTEGER_DIGITS,
  assetFieldOf,
  fractionDigits,
  scaled,
  type AmountField,
  type IntentField,
  type IntentSchema,
} from './intent-schema.ts';

/**
 * The checks an intent passes before a plan is compiled from it, so that what an approver approves
 * is what the template was written to do: its template's intent schema (when it has one), the
 * agreement of the intent's asset with every token a node fixes, and exact numbers. Pure; every
 * refusal is INTENT_INVALID (or INEXACT_NUMBER) naming the field and the rule.
 */

export interface IntentProblem {
  field: string;
  rule: string;
  message: string;
  [extra: string]: unknown;
}

const EVM_ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const ZERO_ADDRESS = '0x' + '0'.repeat(40);
const VENUE_ADDRESS = /^[\x21-\x7e]{1,128}$/;
const HINT_STRING = 'send amounts as decimal strings, e.g. "1.5": a JSON number is rounded to a double by every parser on the way';

/** Every problem of an intent against a schema, in the schema's field order (asset before amount). */
export function intentProblems(schema: IntentSchema, intent: Readonly<Record<string, unknown>>): IntentProblem[] {
  const problems: IntentProblem[] = [];
  for (const name of Object.keys(intent)) {
    if (!Object.hasOwn(schema.fields, name)) {
      problems.push({ field: name, rule: 'unknown_field', message: `intent field "${name}" is not declared by the template's intent schema` });
    }
  }
  const asset = assetFieldOf(schema);
  const assetOk = asset ? typeof intent[asset[0]] === 'string' && asset[1].allowed.includes(intent[asset[0]] as string) : false;
  for (const [name, field] of Object.entries(schema.fields)) {
    const value = intent[name];
    if (value === undefined) {
      if (field.required) problems.push({ field: name, rule: 'required', message: `intent field "${name}" is required (${field.type})` });
      continue;
    }
    // An asset given but refused is reported on its own field; an amount then has no decimals to check.
    const assetRefused = asset !== null && intent[asset[0]] !== undefined && !assetOk;
    const problem = fieldProblem(name, field, value, asset && assetOk ? (intent[asset[0]] as string) : null, assetRefused);
    if (problem) problems.push(problem);
  }
  return problems;
}

/** Refuses an intent its schema does not accept: the first problem is the message, all are in details.problems. */
export function validateIntent(schema: IntentSchema, intent: Readonly<Record<string, unknown>>): void {
  refuse(intentProblems(schema, intent));
}

function refuse(problems: IntentProblem[]): void {
  if (problems.length === 0) return;
  const [first] = problems;
  const { field, rule, message, ...extra } = first!;
  const more = problems.length > 1 ? ` (and ${problems.length - 1} more, listed in details.problems)` : '';
  throw new IntentInvalidError(field, rule, `intent refused: ${message}${more}`, { ...extra, problems });
}

function fieldProblem(name: string, field: IntentField, value: unknown, asset: string | null, assetRefused: boolean): IntentProblem | null {
  const p = (rule: string, message: string, extra: Record<string, unknown> = {}): IntentProblem => ({ field: name, rule, message: `intent field "${name}" ${message}`, ...extra });
  switch (field.type) {
    case 'asset':
      if (typeof value !== 'string') return p('type', 'must be an asset symbol string');
      if (!field.allowed.includes(value)) return p('allowed', `is "${value}", which this template does not move (allowed: ${field.allowed.join(', ')})`, { allowed: field.allowed });
      return null;
    case 'amount':
      return amountProblem(name, field, value, asset, assetRefused);
    case 'evm_address':
      return evmAddressProblem(name, addressOf(value), field.checksum);
    case 'venue_address': {
      if (typeof value !== 'string' && !isPlainObject(value)) return p('type', 'must be an address string or an object { address, tag }');
      const obj = typeof value === 'string' ? { address: value } : (value as Record<string, unknown>);
      for (const key of Object.keys(obj)) {
        if (key !== 'address' && key !== 'tag') return { field: `${name}.${key}`, rule: 'unknown_field', message: `intent field "${name}.${key}" is not an address part (address, tag)` };
      }
      const tag = obj.tag;
      if (field.tag === 'forbidden' && tag !== undefined) return { field: `${name}.tag`, rule: 'forbidden', message: `intent field "${name}.tag" is not taken by this template` };
      if (field.tag === 'required' && tag === undefined) return { field: `${name}.tag`, rule: 'required', message: `intent field "${name}.tag" is required (the network needs a memo or tag)` };
      if (tag !== undefined && (typeof tag !== 'string' || !VENUE_ADDRESS.test(tag))) {
        return { field: `${name}.tag`, rule: 'format', message: `intent field "${name}.tag" must be 1-128 printable characters without spaces` };
      }
      if (field.format === 'evm') return evmAddressProblem(name, obj.address, 'if_mixed_case');
      if (typeof obj.address !== 'string' || !VENUE_ADDRESS.test(obj.address)) {
        return p('format', 'must be an address of 1-128 printable characters without spaces');
      }
      return null;
    }
    case 'enum':
      if (typeof value !== 'string' || !field.values.includes(value)) return p('allowed', `must be one of ${field.values.join(', ')}`, { allowed: field.values });
      return null;
    case 'string':
      if (typeof value !== 'string') return p('type', 'must be a string');
      if (value.length > field.max_length) return p('max_length', `is longer than ${field.max_length} characters`, { max_length: field.max_length });
      return null;
    case 'integer':
      if (typeof value !== 'number' || !Number.isSafeInteger(value)) return p('type', 'must be an integer (within ±9007199254740991)');
      if (field.min !== undefined && value < field.min) return p('min', `is below ${field.min}`, { min: field.min });
      if (field.max !== undefined && value > field.max) return p('max', `is above ${field.max}`, { max: field.max });
      return null;
    case 'json':
      return null;
  }
}

function amountProblem(name: string, field: AmountField, value: unknown, asset: string | null, assetRefused: boolean): IntentProblem | null {
  const p = (rule: string, message: string, extra: Record<string, unknown> = {}): IntentProblem => ({ field: name, rule, message: `intent field "${name}" ${message}`, ...extra });
  if (typeof value === 'number') return p('type', `must be a decimal string, not a JSON number (${HINT_STRING})`, { hint: HINT_STRING });
  if (typeof value !== 'string') return p('type', 'must be a decimal string such as "100.25"');
  const integerDigits = value.split('.')[0]!.length;
  if (!DECIMAL_PATTERN.test(value) || integerDigits > MAX_AMOUNT_INTEGER_DIGITS) {
    return p('format', `is "${value.slice(0, 100)}", not a plain decimal such as "100.25" (digits and one ".", no sign, exponent, spaces or leading zeros)`);
  }
  let decimals: number;
  if (typeof field.decimals === 'number') decimals = field.decimals;
  else if (asset !== null && field.decimals[asset] !== undefined) decimals = field.decimals[asset];
  // A refused asset is reported on its own field; without any asset the decimals are unknown.
  else return assetRefused ? null : p('decimals', 'cannot be checked without the asset whose decimals it has; give the asset');
  const digits = fractionDigits(value);
  if (digits > decimals) {
    return p('decimals', `is "${value}", which has ${digits} fractional digits; ${asset ?? 'this asset'} has ${decimals}`, { decimals, ...(asset ? { asset } : {}) });
  }
  const units = scaled(value, decimals);
  if (units === 0n) return p('positive', 'must be more than zero');
  if (field.min !== undefined && units < scaled(field.min, decimals)) return p('min', `is "${value}", below the minimum "${field.min}"`, { min: field.min });
  if (field.max !== undefined && units > scaled(field.max, decimals)) return p('max', `is "${value}", above the maximum "${field.max}"`, { max: field.max });
  return null;
}

/** A destination as the executors read it: a string, or an object's `address` (the only key allowed then). */
function addressOf(value: unknown): unknown {
  if (!isPlainObject(value)) return value;
  const keys = Object.keys(value);
  return keys.length === 1 && keys[0] === 'address' ? value.address : { notAnAddress: true, keys };
}

function evmAddressProblem(name: string, value: unknown, checksum: 'if_mixed_case' | 'required'): IntentProblem | null {
  const p = (rule: string, message: string): IntentProblem => ({ field: name, rule, message: `intent field "${name}" ${message}` });
  if (isPlainObject(value) && value.notAnAddress) {
    const extra = (value.keys as string[]).find((k) => k !== 'address');
    return extra
      ? { field: `${name}.${extra}`, rule: 'unknown_field', message: `intent field "${name}.${extra}" is not part of an EVM destination (give { address } or the address itself)` }
      : { field: `${name}.address`, rule: 'required', message: `intent field "${name}.address" is required` };
  }
  if (typeof value !== 'string') return p('type', 'must be an EVM address string (or { "address": ... })');
  if (!EVM_ADDRESS.test(value)) return p('format', `is "${value.slice(0, 100)}", not an EVM address (0x and 40 hex digits)`);
  const body = value.slice(2);
  const mixed = body !== body.toLowerCase() && body !== body.toUpperCase();
  const checksummed = getAddress(value);
  if ((mixed || checksum === 'required') && checksummed !== value) {
    return p('checksum', mixed ? 'has mixed case but not a valid EIP-55 checksum (a typo, or another address)' : `must be written with its EIP-55 checksum (${checksummed})`);
  }
  if (value.toLowerCase() === ZERO_ADDRESS) return p('zero_address', 'is the zero address, which nobody can spend from');
  return null;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

// ---------------------------------------------------------------------------------------------
// Templates without a schema: amounts are still decimal strings, numbers still exact.

/**
 * What every intent passes, with or without a schema: an `amount` given as a JSON number that is
 * not a whole number is refused (a float where an amount belongs: 0.1 + 0.2 is not 0.3, and the
 * executors would read its shortest form), and no number of intent or input params is a whole
 * number beyond 2^53-1 (it was rounded before Ferry saw it). The HTTP body is checked exactly, digit
 * by digit, before it is parsed (exact-json.ts); this is the net for the other ways in (the queue).
 */
export function checkIntentNumbers(intent: Readonly<Record<string, unknown>>, inputParams: Readonly<Record<string, unknown>>): void {
  refuseUnsafeIntegers('intent', intent);
  refuseUnsafeIntegers('input_params', inputParams);
  if (typeof intent.amount === 'number' && !Number.isSafeInteger(intent.amount)) {
    const message = `intent field "amount" is the JSON number ${intent.amount}; ${HINT_STRING}`;
    refuse([{ field: 'amount', rule: 'type', message, hint: HINT_STRING }]);
  }
}

function refuseUnsafeIntegers(root: string, value: unknown): void {
  const stack: Array<[unknown, string]> = [[value, root]];
  while (stack.length > 0) {
    const [item, at] = stack.pop()!;
    if (typeof item === 'number') {
      if (Number.isInteger(item) && !Number.isSafeInteger(item)) {
        throw new FerryError('INEXACT_NUMBER', `${at} is ${item}, a whole number beyond 2^53-1 that JSON numbers cannot carry exactly; send it as a string`, {
          field: at,
          rule: 'unsafe_integer',
        });
      }
    } else if (Array.isArray(item)) {
      item.forEach((child, i) => stack.push([child, `${at}.${i}`]));
    } else if (isPlainObject(item)) {
      for (const [k, child] of Object.entries(item)) stack.push([child, `${at}.${k}`]);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Bindings: a token a node fixes is the intent's asset.

/** The config fields by which a node fixes the asset it moves or watches (erc20/CCTP `token`, CEX `coin` or `asset`). */
const TOKEN_FIELDS = ['token', 'coin', 'asset'] as const;

export interface BoundToken {
  node_key: string;
  field: string;
  token: string;
  chain_id: number | null;
}

/** The tokens the nodes of a plan fix (plain values only: a `$ref` is decided at run time). */
export function boundTokens(
  nodes: ReadonlyArray<{ node_key: string; config?: Readonly<Record<string, unknown>>; executor_binding?: unknown; signer_binding?: unknown }>,
): BoundToken[] {
  const found: BoundToken[] = [];
  for (const node of nodes) {
    const config = node.config ?? {};
    for (const field of TOKEN_FIELDS) {
      const token = config[field];
      if (typeof token !== 'string' || token === '' || token.startsWith('$ref:')) continue;
      found.push({ node_key: node.node_key, field: `config.${field}`, token, chain_id: chainIdOf(node) });
    }
  }
  return found;
}

function chainIdOf(node: { config?: Readonly<Record<string, unknown>>; executor_binding?: unknown; signer_binding?: unknown }): number | null {
  for (const source of [node.config?.chain_id, extra(node.signer_binding, 'chain_id'), extra(node.executor_binding, 'chain_id')]) {
    if (typeof source === 'number' && Number.isSafeInteger(source)) return source;
    if (typeof source === 'string' && /^[0-9]{1,15}$/.test(source)) return Number(source);
  }
  return null;
}

function extra(binding: unknown, key: string): unknown {
  return isPlainObject(binding) ? binding[key] : undefined;
}

/** Tells an ERC-20 address's symbol on a chain (from evm.tokens); undefined when Ferry does not know it. */
export type TokenSymbolOf = (address: string, chainId: number | null) => string | undefined;
/** Tells whether a symbol is an ERC-20 Ferry knows on a chain (evm.tokens), so not the chain's native coin. */
export type IsTokenSymbol = (symbol: string, chainId: number | null) => boolean;

/** The EVM lane's native transfer (src/executors/evm/index.ts): it moves the chain's coin, never a token. */
const NATIVE_TRANSFER_EXECUTOR = 'exec.evm.native_transfer';

/**
 * The intent's asset against every token a node fixes: a node bound to USDC moves USDC whatever the
 * intent says, so an intent that names DAI is refused (asset_binding_mismatch) rather than approved
 * as DAI and executed as USDC. Symbols compare without regard to case; a node's token address is
 * compared through evm.tokens, and left alone when Ferry cannot tell its symbol.
 */
export function checkAssetBindings(
  nodes: Parameters<typeof boundTokens>[0],
  intent: Readonly<Record<string, unknown>>,
  symbolOf: TokenSymbolOf = () => undefined,
  isTokenSymbol: IsTokenSymbol = () => false,
): void {
  const asset = intent.asset;
  if (typeof asset !== 'string') return;
  const isAddress = (s: string) => EVM_ADDRESS.test(s);
  for (const node of nodes) {
    const key = typeof node.executor_binding === 'string' ? node.executor_binding : extra(node.executor_binding, 'executor_key');
    if (key !== NATIVE_TRANSFER_EXECUTOR || node.config?.contract_call !== undefined) continue;
    // A native transfer sends intent.amount of the coin: an intent for a token it would pay in the coin.
    if (isAddress(asset) || isTokenSymbol(asset, chainIdOf(node))) {
      throw new IntentInvalidError(
        'asset',
        'asset_binding_mismatch',
        `intent refused: intent field "asset" is the token "${asset}", but node "${node.node_key}" is a native transfer; it would send the chain's coin, not ${asset}`,
        { node_key: node.node_key, bound_field: 'executor_binding', bound_token: 'native', asset },
      );
    }
  }
  for (const bound of boundTokens(nodes)) {
    let agrees: boolean | null;
    if (bound.token.toLowerCase() === 'native') {
      // The chain's coin (an EVM balance observation's `token: native`): whatever the intent calls
      // it (ETH, native), only a token is another asset.
      agrees = !(isAddress(asset) || isTokenSymbol(asset, bound.chain_id));
    } else if (isAddress(bound.token)) {
      if (isAddress(asset)) agrees = bound.token.toLowerCase() === asset.toLowerCase();
      else {
        const known = symbolOf(bound.token, bound.chain_id);
        agrees = known === undefined ? null : known.toUpperCase() === asset.toUpperCase();
      }
    } else if (isAddress(asset)) {
      const known = symbolOf(asset, bound.chain_id);
      agrees = known === undefined ? null : known.toUpperCase() === bound.token.toUpperCase();
    } else {
      agrees = bound.token.toUpperCase() === asset.toUpperCase();
    }
    if (agrees === false) {
      throw new IntentInvalidError(
        'asset',
        'asset_binding_mismatch',
        `intent refused: intent field "asset" is "${asset}", but node "${bound.node_key}" is bound to ${bound.token} (${bound.field}); the node would move ${bound.token}, not ${asset}`,
        { node_key: bound.node_key, bound_field: bound.field, bound_token: bound.token, asset },
      );
    }
  }
}
