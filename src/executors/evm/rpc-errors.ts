import { BaseError } from 'viem';

/**
 * What a failed eth_sendRawTransaction proves. Only an answer that names a reason the node refused
 * the transaction is proof that it was not accepted; a timeout, a reset connection, a 5xx or an
 * error text we do not recognise leaves the bytes possibly in the mempool, so the attempt is
 * uncertain and recovery must look the transaction up instead of anyone guessing.
 */
export type BroadcastFailure =
  | { kind: 'already_known' }
  | { kind: 'refused'; code: string; detail: string }
  | { kind: 'uncertain'; detail: string };

const REFUSALS: ReadonlyArray<readonly [RegExp, string]> = [
  [/nonce too low|nonce has already been used|oldnonce/i, 'EVM_NONCE_TOO_LOW'],
  [/insufficient funds/i, 'EVM_INSUFFICIENT_FUNDS'],
  [/intrinsic gas too low|gas limit reached|exceeds block gas limit/i, 'EVM_GAS_REFUSED'],
  [/underpriced|fee cap|max fee per gas less than block base fee|feecap/i, 'EVM_FEE_REFUSED'],
  [/invalid chain id|incorrect chain id|invalid sender|invalid signature/i, 'EVM_TX_INVALID'],
];

export function classifyBroadcastError(err: unknown): BroadcastFailure {
  const detail = errorDetail(err);
  if (/already known|already imported|known transaction/i.test(detail)) return { kind: 'already_known' };
  for (const [pattern, code] of REFUSALS) if (pattern.test(detail)) return { kind: 'refused', code, detail };
  return { kind: 'uncertain', detail };
}

/** The node's own words when there are some, else the error's message; one line. */
export function errorDetail(err: unknown): string {
  if (err instanceof BaseError) return [err.details, err.shortMessage].filter(Boolean).join(': ');
  return err instanceof Error ? err.message.split('\n')[0] : String(err);
}
