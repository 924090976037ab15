import { toBaseUnits } from '../evm/amounts.ts';
import type { Parsed } from '../evm/token-config.ts';

/**
 * CCTP v2 fees, pure. The burn's `maxFee` is the most the destination may keep of the amount
 * (feeExecuted <= maxFee, taken at the mint); the approved plan fixes it, so the executor and the
 * signer's expected effect both compute it here from the node config and the approved amount:
 *
 * - `max_fee`: token units ("0.05"), absolute;
 * - `max_fee_bps`: basis points of the amount, at most 3 decimals (Circle's contract counts its
 *   minimum in 1/1000 bps), rounded up to a whole base unit: ceil(amount * bps / 10_000);
 * - neither: 0 (enough only where the chain has no minimum and the transfer is standard).
 *
 * Circle's TokenMessengerV2 refuses a burn whose maxFee is below `getMinFeeAmount(amount)`
 * (floor(amount * minFee / 1e7), at least 1, when minFee > 0); a fast transfer also needs the
 * fee Circle quotes (`GET /v2/burn/USDC/fees/{source}/{destination}`, in bps) or it is attested as
 * a standard one. Neither ever raises the approved max fee: a shortfall fails the burn.
 */

/** Circle's MIN_FEE_MULTIPLIER: minFee and milli-bps share the unit 1/10_000_000 of the amount. */
export const MIN_FEE_MULTIPLIER = 10_000_000n;
/** Fast transfers are attested at 1000 (confirmed); 2000 is finalized, the standard transfer. */
export const FINALITY_CONFIRMED = 1000;

const BPS = /^(0|[1-9][0-9]*)(?:\.([0-9]{1,3}))?$/;
const DECIMAL = /^(0|[1-9][0-9]*)(?:\.[0-9]+)?$/;

export type MaxFeeBasis = 'max_fee' | 'max_fee_bps' | 'default';

/** The approved max fee in base units, from `max_fee` or `max_fee_bps` of the node config. */
export function maxFeeOf(cfg: Record<string, unknown>, amount: bigint, decimals: number): Parsed<{ maxFee: bigint; basis: MaxFeeBasis }> {
  const invalid = (detail: string) => ({ ok: false, code: 'CCTP_INVALID_CONFIG', detail }) as const;
  const hasFee = cfg.max_fee !== undefined && cfg.max_fee !== null;
  const hasBps = cfg.max_fee_bps !== undefined && cfg.max_fee_bps !== null;
  if (hasFee && hasBps) return invalid('give max_fee (token units) or max_fee_bps (basis points of the amount), not both');
  let maxFee = 0n;
  let basis: MaxFeeBasis = 'default';
  if (hasFee) {
    const text = decimalText(cfg.max_fee);
    if (text === null || !DECIMAL.test(text)) return invalid('max_fee must be a decimal string in token units');
    const units = toBaseUnits(text, decimals);
    if (!units.ok) return invalid(`max_fee: ${units.detail}`);
    maxFee = units.value;
    basis = 'max_fee';
  } else if (hasBps) {
    const milli = milliBps(cfg.max_fee_bps);
    if (milli === null || milli >= MIN_FEE_MULTIPLIER) return invalid('max_fee_bps must be basis points below 10000 with at most 3 decimals ("1.5")');
    maxFee = feeOfMilliBps(amount, milli);
    basis = 'max_fee_bps';
  }
  if (maxFee >= amount) return { ok: false, code: 'CCTP_MAX_FEE_INVALID', detail: `the max fee (${maxFee} base units) must be less than the amount (${amount})` };
  return { ok: true, value: { maxFee, basis } };
}

/** ceil(amount * milli / 1e7): a share of the amount in 1/1000 bps, rounded up to a base unit. */
export function feeOfMilliBps(amount: bigint, milli: bigint): bigint {
  return (amount * milli + MIN_FEE_MULTIPLIER - 1n) / MIN_FEE_MULTIPLIER;
}

/** "1.5" or 1.5 -> 1500n (1/1000 bps); more than 3 decimals, negative or not a number: null. */
export function milliBps(raw: unknown): bigint | null {
  const text = decimalText(raw);
  const m = text === null ? null : BPS.exec(text);
  if (!m) return null;
  return BigInt(m[1]!) * 1000n + BigInt((m[2] ?? '').padEnd(3, '0') || '0');
}

/**
 * Circle's quote (`[{finalityThreshold, minimumFee}]`, or `{data: [...]}` as cctp-go reads it) for a
 * burn at `threshold`: the entry of the highest finality at or below it (1000 for a fast
 * transfer; the lowest entry below them all), its minimumFee in bps rounded up to 1/1000 bps.
 * null when the answer has no usable entry.
 */
export function quotedMilliBps(body: unknown, threshold: number): bigint | null {
  const list = Array.isArray(body) ? body : body !== null && typeof body === 'object' ? (body as { data?: unknown }).data : undefined;
  if (!Array.isArray(list)) return null;
  const entries: Array<{ finality: number; milli: bigint }> = [];
  for (const e of list) {
    if (e === null || typeof e !== 'object') continue;
    const finality = Number((e as Record<string, unknown>).finalityThreshold);
    const milli = quoteMilliBps((e as Record<string, unknown>).minimumFee);
    if (Number.isInteger(finality) && milli !== null) entries.push({ finality, milli });
  }
  const atOrBelow = entries.filter((e) => e.finality <= threshold).sort((a, b) => b.finality - a.finality)[0];
  // Below every quoted level (e.g. 500): the fastest level Circle attests at is what it charges.
  return (atOrBelow ?? entries.sort((a, b) => a.finality - b.finality)[0])?.milli ?? null;
}

/** A quoted fee in bps (a number such as 1 or 1.3, or a decimal string), rounded up to 1/1000 bps. */
function quoteMilliBps(raw: unknown): bigint | null {
  const text = decimalText(raw);
  const m = text === null ? null : /^(0|[1-9][0-9]*)(?:\.([0-9]+))?$/.exec(text);
  if (!m) return null;
  const fraction = m[2] ?? '';
  const milli = BigInt(m[1]!) * 1000n + BigInt(fraction.slice(0, 3).padEnd(3, '0') || '0');
  // Rounded up: the quote is a minimum, never read as less than it is.
  return /[1-9]/.test(fraction.slice(3)) ? milli + 1n : milli;
}

function decimalText(raw: unknown): string | null {
  if (typeof raw === 'string') return raw.trim();
  if (typeof raw === 'number' && Number.isFinite(raw) && raw >= 0) {
    const s = String(raw);
    return /e/i.test(s) ? null : s;
  }
  return null;
}
