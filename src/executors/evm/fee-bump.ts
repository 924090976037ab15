import { parseTransaction, serializeTransaction, type Hex } from 'viem';
import { DEFAULT_REPLACEMENT_LIMITS, type ReplacementLimits } from '../signers/evm-policy.ts';
import type { SignedTx } from './signed-tx.ts';

/**
 * Fee bumping, the pure part: from the attempt's signed versions (same nonce, same everything but
 * the fees) and the chain's current fee estimate, the unsigned next version, or the reason there is
 * none (the policy cap). Shared by every EVM executor: the replacement keeps the newest version's
 * fields (to, value, data, gas, nonce, chain id) exactly and changes only the two fee fields, so
 * whichever version is mined has the same effect, and only one can be (same nonce).
 */

export interface FeeBumpPolicy {
  /** A version pending longer than this (since it was last sent) is replaced. */
  afterSeconds: number;
  /** Each version raises both fee fields by at least this percentage (nodes require >= 10). */
  percent: number;
  /** No version may offer more than this maxFeePerGas; null: no cap. */
  capWei: bigint | null;
  /**
   * What the signer allows a replacement (FERRY_EVM_MAX_REPLACEMENTS, FERRY_EVM_MAX_FEE_BUMP_FACTOR
   * over the first version's maxFeePerGas); unset: the signer's defaults. Proposing beyond them
   * would only be refused.
   */
  limits?: ReplacementLimits;
}

export type Replacement =
  | { kind: 'replace'; payload: Hex; maxFeePerGas: bigint; maxPriorityFeePerGas: bigint; replaces: Hex; version: number }
  | { kind: 'cap_reached'; detail: string; maxFeePerGas: bigint };

const ceilPercent = (v: bigint, percent: number) => (v * BigInt(100 + percent) + 99n) / 100n;

/** Fee fields of a signed version (EIP-1559 only; a legacy transaction is never bumped). */
export function feesOf(raw: Hex): { maxFeePerGas: bigint; maxPriorityFeePerGas: bigint } | null {
  const tx = parseTransaction(raw);
  if (tx.type !== 'eip1559' || tx.maxFeePerGas === undefined || tx.maxPriorityFeePerGas === undefined) return null;
  return { maxFeePerGas: tx.maxFeePerGas, maxPriorityFeePerGas: tx.maxPriorityFeePerGas };
}

/** The highest fees any version offers: the next one must beat those. */
function topVersion(versions: readonly SignedTx[]): { tx: SignedTx; maxFeePerGas: bigint; maxPriorityFeePerGas: bigint } | null {
  let top: { tx: SignedTx; maxFeePerGas: bigint; maxPriorityFeePerGas: bigint } | null = null;
  for (const tx of versions) {
    const fees = feesOf(tx.raw);
    if (fees && (!top || fees.maxFeePerGas > top.maxFeePerGas)) top = { tx, ...fees };
  }
  return top;
}

export function nextVersion(
  versions: readonly SignedTx[],
  estimate: { maxFeePerGas: bigint; maxPriorityFeePerGas: bigint },
  policy: FeeBumpPolicy,
): Replacement | null {
  const top = topVersion(versions);
  if (!top) return null;
  const limits = policy.limits ?? DEFAULT_REPLACEMENT_LIMITS;
  if (versions.length - 1 >= limits.maxReplacements) {
    return { kind: 'cap_reached', maxFeePerGas: top.maxFeePerGas, detail: `${versions.length - 1} replacements, the most the signer allows (FERRY_EVM_MAX_REPLACEMENTS)` };
  }
  const first = feesOf(versions[0]!.raw);
  const factorCap = first ? (first.maxFeePerGas * BigInt(Math.round(limits.maxFeeBumpFactor * 1000))) / 1000n : null;
  const capWei = factorCap !== null && (policy.capWei === null || factorCap < policy.capWei) ? factorCap : policy.capWei;
  policy = { ...policy, capWei };
  let maxFee = ceilPercent(top.maxFeePerGas, policy.percent);
  let tip = ceilPercent(top.maxPriorityFeePerGas, policy.percent);
  if (estimate.maxFeePerGas > maxFee) maxFee = estimate.maxFeePerGas;
  if (estimate.maxPriorityFeePerGas > tip) tip = estimate.maxPriorityFeePerGas;
  if (policy.capWei !== null && maxFee > policy.capWei) {
    // A smaller step than the bump percentage would be refused by the node as underpriced, so at
    // the cap the bumping stops.
    if (policy.capWei < ceilPercent(top.maxFeePerGas, policy.percent)) {
      return { kind: 'cap_reached', maxFeePerGas: top.maxFeePerGas, detail: `maxFeePerGas ${top.maxFeePerGas} cannot rise by ${policy.percent}% within the cap of ${policy.capWei} wei` };
    }
    maxFee = policy.capWei;
  }
  if (tip > maxFee) tip = maxFee;
  const { r: _r, s: _s, v: _v, yParity: _y, ...fields } = parseTransaction(top.tx.raw) as Record<string, unknown>;
  const payload = serializeTransaction({ ...(fields as object), type: 'eip1559', maxFeePerGas: maxFee, maxPriorityFeePerGas: tip } as never);
  return { kind: 'replace', payload, maxFeePerGas: maxFee, maxPriorityFeePerGas: tip, replaces: top.tx.hash, version: versions.length + 1 };
}

/** The policy cap applied to a first version's fees (prepare). */
export function capFees(fees: { maxFeePerGas: bigint; maxPriorityFeePerGas: bigint }, capWei: bigint | null) {
  if (capWei === null || fees.maxFeePerGas <= capWei) return fees;
  return { maxFeePerGas: capWei, maxPriorityFeePerGas: fees.maxPriorityFeePerGas > capWei ? capWei : fees.maxPriorityFeePerGas };
}
