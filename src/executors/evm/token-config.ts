import { getAddress, isAddress, zeroAddress, type Address } from 'viem';
import type { EvmTokenConfig } from '../../config-file.ts';
import type { ExecutionContext } from '../protocol.ts';
import { amountText } from './amounts.ts';

/**
 * What token nodes ask for, read from node config, intent and Ferry's token list. Pure: a refusal
 * is a value with a stable code, so preflight can fail the node with it.
 */

export type Parsed<T> = { ok: true; value: T } | { ok: false; code: string; detail: string };

export interface TokenRef {
  address: Address;
  symbol: string | null;
  /** From the node config or evm.tokens (trusted); null: only the chain can say. */
  decimals: number | null;
}

/** `token`: a 0x address, or a symbol listed in evm.tokens for the chain; `decimals` from the node or the list. */
export function tokenOf(cfg: Record<string, unknown>, chainId: number, tokens: readonly EvmTokenConfig[]): Parsed<TokenRef> {
  const raw = cfg.token;
  if (typeof raw !== 'string' || raw.length === 0) return refuse('EVM_INVALID_TOKEN', 'config.token must be a token address or a configured symbol');
  const listed = isAddress(raw, { strict: false })
    ? tokens.find((t) => t.chain_id === chainId && t.address.toLowerCase() === raw.toLowerCase())
    : tokens.find((t) => t.chain_id === chainId && t.symbol === raw);
  if (!isAddress(raw, { strict: false }) && !listed) return refuse('EVM_UNKNOWN_TOKEN', `token ${JSON.stringify(raw)} is not listed in evm.tokens for chain ${chainId}`);
  const address = getAddress(listed ? listed.address : raw);
  if (address === zeroAddress) return refuse('EVM_INVALID_TOKEN', 'token is the zero address');
  const decimals = decimalsOf(cfg.decimals, listed?.decimals);
  if (!decimals.ok) return decimals;
  return { ok: true, value: { address, symbol: listed?.symbol ?? null, decimals: decimals.value } };
}

function decimalsOf(fromNode: unknown, fromList: number | undefined): Parsed<number | null> {
  if (fromNode !== undefined && fromNode !== null) {
    if (typeof fromNode !== 'number' || !Number.isInteger(fromNode) || fromNode < 0 || fromNode > 77) {
      return refuse('EVM_INVALID_CONFIG', `decimals ${JSON.stringify(fromNode)} must be an integer from 0 to 77`);
    }
    if (fromList !== undefined && fromList !== fromNode) {
      return refuse('EVM_TOKEN_DECIMALS_MISMATCH', `the node says ${fromNode} decimals, evm.tokens says ${fromList}`);
    }
    return { ok: true, value: fromNode };
  }
  return { ok: true, value: fromList ?? null };
}

/** `to` from config, else intent.destination (a string, or an object's `address`). */
export function recipientOf(ctx: Pick<ExecutionContext, 'node_config' | 'intent'>, field = 'to'): Parsed<Address> {
  const destination = ctx.intent.destination;
  const raw = ctx.node_config[field] ?? (destination !== null && typeof destination === 'object' ? (destination as Record<string, unknown>).address : destination);
  return addressOf(raw, field === 'to' ? 'recipient' : field);
}

/** Checksum-insensitive for all-lower or all-upper hex; a mixed-case address must carry a valid checksum. */
export function addressOf(raw: unknown, what: string): Parsed<Address> {
  if (typeof raw !== 'string' || !isAddress(raw, { strict: raw !== raw.toLowerCase() && raw.slice(2) !== raw.slice(2).toUpperCase() })) {
    return refuse('EVM_INVALID_ADDRESS', `${what} ${JSON.stringify(raw ?? null)} is not an EVM address`);
  }
  const address = getAddress(raw);
  if (address === zeroAddress) return refuse('EVM_INVALID_ADDRESS', `${what} is the zero address`);
  return { ok: true, value: address };
}

/** `amount` from config, else intent.amount: a decimal string in token units. */
export function amountOf(ctx: Pick<ExecutionContext, 'node_config' | 'intent'>): Parsed<string> {
  const raw = ctx.node_config.amount ?? ctx.intent.amount;
  const text = amountText(raw);
  if (text === null) return refuse('EVM_INVALID_AMOUNT', `amount ${JSON.stringify(raw ?? null)} must be a decimal string in token units`);
  return { ok: true, value: text };
}

export function confirmationsOf(cfg: Record<string, unknown>, fallback: number): Parsed<number> {
  const c = cfg.confirmations ?? fallback;
  if (typeof c !== 'number' || !Number.isInteger(c) || c < 1) return refuse('EVM_INVALID_CONFIG', `confirmations ${JSON.stringify(c)} must be a positive integer`);
  return { ok: true, value: c };
}

export function refuse(code: string, detail: string): { ok: false; code: string; detail: string } {
  return { ok: false, code, detail };
}
