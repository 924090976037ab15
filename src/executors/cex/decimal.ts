/**
 * Exact decimal arithmetic on amount strings ("1.12345678"), for the checks that decide whether the
 * exchange would receive the approved amount. Never through floating point: 1.12345678 and
 * 1.123456780000001 are different amounts.
 */

const DECIMAL = /^[0-9]+(\.[0-9]+)?$/;

/** A non-negative decimal string as an integer and a scale (10^-scale), or null if it is not one. */
function parse(v: string): { units: bigint; scale: number } | null {
  if (!DECIMAL.test(v)) return null;
  const [int, frac = ''] = v.split('.');
  return { units: BigInt(int! + frac), scale: frac.length };
}

function align(a: { units: bigint; scale: number }, b: { units: bigint; scale: number }): [bigint, bigint] {
  const scale = Math.max(a.scale, b.scale);
  return [a.units * 10n ** BigInt(scale - a.scale), b.units * 10n ** BigInt(scale - b.scale)];
}

export function isDecimal(v: unknown): v is string {
  return typeof v === 'string' && DECIMAL.test(v);
}

/** -1, 0 or 1; null when either side is not a decimal string. */
export function compareDecimal(a: string, b: string): -1 | 0 | 1 | null {
  const x = parse(a);
  const y = parse(b);
  if (!x || !y) return null;
  const [p, q] = align(x, y);
  return p < q ? -1 : p > q ? 1 : 0;
}

export function sameDecimal(a: string, b: string): boolean {
  return compareDecimal(a, b) === 0;
}

/** a + b, exactly; null when either side is not a decimal string. */
export function addDecimal(a: string, b: string): string | null {
  const x = parse(a);
  const y = parse(b);
  if (!x || !y) return null;
  const [p, q] = align(x, y);
  const scale = Math.max(x.scale, y.scale);
  const digits = (p + q).toString().padStart(scale + 1, '0');
  return scale === 0 ? digits : `${digits.slice(0, -scale)}.${digits.slice(-scale)}`;
}

/** Whether `amount` is a whole multiple of `step` (a positive decimal); false when either is malformed. */
export function isMultipleOf(amount: string, step: string): boolean {
  const x = parse(amount);
  const y = parse(step);
  if (!x || !y || y.units === 0n) return false;
  const [p, q] = align(x, y);
  return p % q === 0n;
}

/**
 * A number from ccxt's parsed exchange data as the decimal it stands for (1e-8 -> "0.00000001"):
 * the shortest fixed-point text that reads back as the same double. Undefined for anything else.
 */
export function decimalOf(v: unknown): string | undefined {
  if (typeof v === 'string') return isDecimal(v) ? v : undefined;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) return undefined;
  for (let digits = 0; digits <= 20; digits++) {
    const text = v.toFixed(digits);
    if (Number(text) === v) return digits === 0 ? text : text.replace(/0+$/, '').replace(/\.$/, '');
  }
  return undefined;
}
