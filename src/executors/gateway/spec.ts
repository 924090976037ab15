import { isAddress, zeroAddress, type Address } from 'viem';
import type { EvmTokenConfig } from '../../config-file.ts';
import { amountText, fromBaseUnits, toBaseUnits } from '../evm/amounts.ts';
import type { GatewayChain, GatewayConfig } from './config.ts';

/**
 * What a Gateway node moves, read from its config, the movement's intent and the configuration
 * alone (no I/O): the same reading gives the approved plan's expected effect (effect.ts) and what
 * the executors prepare, so the signer's comparison is between two readings of the same approval.
 */

export type Parsed<T> = { ok: true; value: T } | { ok: false; code: string; detail: string };

const refuse = (code: string, detail: string) => ({ ok: false, code, detail }) as const;

export interface GatewayToken {
  address: Address;
  symbol: string;
  decimals: number;
}

export interface GatewayAmount {
  /** The gateway entry of the node's chain. */
  entry: GatewayChain;
  token: GatewayToken;
  amountText: string;
  amount: bigint;
}

/** A burn intent as the plan fixes it: everything but the salt and the max block height. */
export interface GatewayBurnSpec {
  source: GatewayChain;
  destination: GatewayChain;
  sourceToken: GatewayToken;
  destinationToken: GatewayToken;
  amountText: string;
  value: bigint;
  recipient: Address;
  destinationCaller: Address;
  maxFeeText: string;
  maxFee: bigint;
}

export function gatewayEntry(g: GatewayConfig, chainId: number): Parsed<GatewayChain> {
  const entry = g.chains.find((c) => c.chain_id === chainId);
  return entry ? { ok: true, value: entry } : refuse('GATEWAY_CHAIN_NOT_CONFIGURED', `chain ${chainId} has no gateway entry (gateway.chains)`);
}

export function gatewayToken(g: GatewayConfig, chainId: number, tokens: readonly EvmTokenConfig[]): Parsed<GatewayToken> {
  const t = tokens.find((x) => x.chain_id === chainId && x.symbol === g.token);
  if (!t) return refuse('GATEWAY_TOKEN_NOT_CONFIGURED', `${g.token} is not listed in evm.tokens for chain ${chainId}`);
  if (t.decimals === undefined) return refuse('GATEWAY_TOKEN_NOT_CONFIGURED', `evm.tokens lists ${g.token} on chain ${chainId} without its decimals`);
  return { ok: true, value: { address: t.address.toLowerCase() as Address, symbol: t.symbol, decimals: t.decimals } };
}

function amountOfNode(config: Record<string, unknown>, intent: Record<string, unknown>, field: 'amount' | 'max_fee', decimals: number): Parsed<{ text: string; base: bigint }> {
  const raw = field === 'amount' ? (config.amount ?? intent.amount) : config.max_fee;
  const text = amountText(raw);
  if (text === null) return refuse('GATEWAY_INVALID_CONFIG', `${field === 'amount' ? 'amount' : 'config.max_fee'} ${JSON.stringify(raw ?? null)} must be a decimal string in token units`);
  const base = toBaseUnits(text, decimals);
  if (!base.ok) return refuse('GATEWAY_INVALID_CONFIG', `${field}: ${base.detail}`);
  return { ok: true, value: { text, base: base.value } };
}

/** The amount of an approve or a deposit on the node's chain: config.amount (else intent.amount) plus config.fee_reserve (token units, for Gateway's fee). */
export function gatewayAmountOf(g: GatewayConfig, chainId: number, tokens: readonly EvmTokenConfig[], config: Record<string, unknown>, intent: Record<string, unknown>): Parsed<GatewayAmount> {
  const entry = gatewayEntry(g, chainId);
  if (!entry.ok) return entry;
  const token = gatewayToken(g, chainId, tokens);
  if (!token.ok) return token;
  const a = amountOfNode(config, intent, 'amount', token.value.decimals);
  if (!a.ok) return a;
  // What Gateway's fee will take from the balance on top of the value a later burn intent sends.
  let reserve = 0n;
  if (config.fee_reserve !== undefined) {
    const text = amountText(config.fee_reserve);
    const r = text === null ? null : toBaseUnits(text, token.value.decimals);
    if (!r || !r.ok) return refuse('GATEWAY_INVALID_CONFIG', `config.fee_reserve ${JSON.stringify(config.fee_reserve)} must be a decimal string in token units`);
    reserve = r.value;
  }
  const amount = a.value.base + reserve;
  if (amount === 0n) return refuse('GATEWAY_INVALID_CONFIG', 'the amount is zero (the wallet refuses a deposit of 0)');
  return { ok: true, value: { entry: entry.value, token: token.value, amountText: fromBaseUnits(amount, token.value.decimals), amount } };
}

function addressField(raw: unknown, what: string): Parsed<Address> {
  if (typeof raw !== 'string' || !isAddress(raw, { strict: false })) return refuse('GATEWAY_INVALID_CONFIG', `${what} ${JSON.stringify(raw ?? null)} is not an address`);
  return { ok: true, value: raw.toLowerCase() as Address };
}

/**
 * The burn intent a node on `sourceChainId` approves: config.destination_chain_id (required; a
 * chain of the gateway section other than the source), the recipient (config.recipient, else the
 * intent's destination), the value (config.amount, else intent.amount), config.max_fee (required,
 * token units: the most Gateway may charge on top of the value), config.destination_caller (unset:
 * anyone may mint).
 */
export function gatewayBurnSpecOf(g: GatewayConfig, sourceChainId: number, tokens: readonly EvmTokenConfig[], config: Record<string, unknown>, intent: Record<string, unknown>): Parsed<GatewayBurnSpec> {
  const source = gatewayEntry(g, sourceChainId);
  if (!source.ok) return source;
  const destId = config.destination_chain_id;
  if (typeof destId !== 'number' || !Number.isInteger(destId)) return refuse('GATEWAY_INVALID_CONFIG', 'config.destination_chain_id is required (a chain of gateway.chains)');
  if (destId === sourceChainId) return refuse('GATEWAY_INVALID_CONFIG', 'the destination chain is the source chain');
  const destination = gatewayEntry(g, destId);
  if (!destination.ok) return destination;
  const sourceToken = gatewayToken(g, sourceChainId, tokens);
  if (!sourceToken.ok) return sourceToken;
  const destinationToken = gatewayToken(g, destId, tokens);
  if (!destinationToken.ok) return destinationToken;
  if (sourceToken.value.decimals !== destinationToken.value.decimals) return refuse('GATEWAY_TOKEN_NOT_CONFIGURED', `${g.token} has ${sourceToken.value.decimals} decimals on chain ${sourceChainId} and ${destinationToken.value.decimals} on chain ${destId}`);
  const a = amountOfNode(config, intent, 'amount', sourceToken.value.decimals);
  if (!a.ok) return a;
  if (a.value.base === 0n) return refuse('GATEWAY_INVALID_CONFIG', 'the amount is zero');
  if (config.max_fee === undefined) return refuse('GATEWAY_INVALID_CONFIG', 'config.max_fee is required: the most Gateway may charge on top of the value, in token units');
  const fee = amountOfNode(config, intent, 'max_fee', sourceToken.value.decimals);
  if (!fee.ok) return fee;
  const destination_ = intent.destination;
  const rawRecipient = config.recipient ?? (destination_ !== null && typeof destination_ === 'object' ? (destination_ as Record<string, unknown>).address : destination_);
  const recipient = addressField(rawRecipient, 'the recipient');
  if (!recipient.ok) return recipient;
  if (recipient.value === zeroAddress) return refuse('GATEWAY_INVALID_CONFIG', 'the recipient is the zero address');
  const caller = config.destination_caller === undefined || config.destination_caller === null ? { ok: true as const, value: zeroAddress as Address } : addressField(config.destination_caller, 'config.destination_caller');
  if (!caller.ok) return caller;
  return {
    ok: true,
    value: {
      source: source.value,
      destination: destination.value,
      sourceToken: sourceToken.value,
      destinationToken: destinationToken.value,
      amountText: a.value.text,
      value: a.value.base,
      recipient: recipient.value,
      destinationCaller: caller.value,
      maxFeeText: fee.value.text,
      maxFee: fee.value.base,
    },
  };
}
