import { getAddress, isAddress, zeroAddress, type Address } from 'viem';
import type { ExecutionContext } from '../protocol.ts';

/**
 * What one native-value transfer node asks for, read from its config and the movement's intent.
 * Pure: a refusal is a value with a stable code, so preflight can fail the node with it.
 */
export interface TransferSpec {
  to: Address;
  valueWei: bigint;
  confirmations: number;
}

export type TransferSpecResult = { ok: true; spec: TransferSpec } | { ok: false; code: string; detail: string };

const DECIMAL = /^[0-9]+$/;

export function transferSpec(ctx: ExecutionContext, defaultConfirmations: number): TransferSpecResult {
  const cfg = ctx.node_config;

  const destination = ctx.intent.destination;
  const rawTo = cfg.to ?? (destination !== null && typeof destination === 'object' ? (destination as Record<string, unknown>).address : destination);
  // Checksum-insensitive: a lowercase address is as good as a checksummed one, but a mixed-case
  // one with a wrong checksum is a typo and refused.
  if (typeof rawTo !== 'string' || !isAddress(rawTo, { strict: rawTo !== rawTo.toLowerCase() && rawTo.slice(2) !== rawTo.slice(2).toUpperCase() })) {
    return refuse('EVM_INVALID_ADDRESS', `recipient ${JSON.stringify(rawTo ?? null)} is not an EVM address`);
  }
  const to = getAddress(rawTo);
  if (to === zeroAddress) return refuse('EVM_INVALID_ADDRESS', 'recipient is the zero address');

  const rawValue = cfg.value_wei ?? ctx.intent.amount;
  const valueText = typeof rawValue === 'number' && Number.isSafeInteger(rawValue) ? String(rawValue) : rawValue;
  if (typeof valueText !== 'string' || !DECIMAL.test(valueText)) {
    return refuse('EVM_INVALID_VALUE', `value ${JSON.stringify(rawValue ?? null)} is not a whole number of wei`);
  }
  const valueWei = BigInt(valueText);
  if (valueWei <= 0n) return refuse('EVM_INVALID_VALUE', 'value must be at least 1 wei');

  const confirmations = cfg.confirmations ?? defaultConfirmations;
  if (typeof confirmations !== 'number' || !Number.isInteger(confirmations) || confirmations < 1) {
    return refuse('EVM_INVALID_CONFIG', `confirmations ${JSON.stringify(confirmations)} must be a positive integer`);
  }
  return { ok: true, spec: { to, valueWei, confirmations } };
}

/** The chain id a binding (executor or signer) pins, when it pins one. */
export function boundChainId(ctx: ExecutionContext): number | null {
  for (const binding of [ctx.resolved_bindings.signer, ctx.resolved_bindings.executor]) {
    const raw = binding?.chain_id;
    if (raw === undefined || raw === null) continue;
    const n = Number(raw);
    return Number.isSafeInteger(n) && n > 0 ? n : NaN;
  }
  return null;
}

function refuse(code: string, detail: string): TransferSpecResult {
  return { ok: false, code, detail };
}
