/**
 * Token amounts as exact integers. A decimal string in token units ("100.25") becomes base units
 * (100250000 for 6 decimals) by string arithmetic on bigints: no float ever sees an amount.
 */

const DECIMAL = /^(0|[1-9][0-9]*)(?:\.([0-9]+))?$/;

export type BaseUnitsResult = { ok: true; value: bigint } | { ok: false; detail: string };

/** "123.45" with 6 decimals -> 123450000n. More fractional digits than decimals is refused, never rounded. */
export function toBaseUnits(amount: string, decimals: number): BaseUnitsResult {
  const m = DECIMAL.exec(amount);
  if (!m) return { ok: false, detail: `amount ${JSON.stringify(amount)} is not a decimal number like "100.25"` };
  const whole = m[1]!;
  const fraction = (m[2] ?? '').replace(/0+$/, '');
  if (fraction.length > decimals) {
    return { ok: false, detail: `amount ${amount} has ${fraction.length} fractional digits; the token has ${decimals} decimals` };
  }
  return { ok: true, value: BigInt(whole) * 10n ** BigInt(decimals) + BigInt(fraction.padEnd(decimals, '0') || '0') };
}

/** 123450000n with 6 decimals -> "123.45". */
export function fromBaseUnits(value: bigint, decimals: number): string {
  const negative = value < 0n;
  const digits = (negative ? -value : value).toString().padStart(decimals + 1, '0');
  const whole = digits.slice(0, digits.length - decimals);
  const fraction = digits.slice(digits.length - decimals).replace(/0+$/, '');
  return `${negative ? '-' : ''}${whole}${fraction ? `.${fraction}` : ''}`;
}

/** An amount from config or intent: a decimal string, or a safe integer written as a number. */
export function amountText(raw: unknown): string | null {
  if (typeof raw === 'number' && Number.isSafeInteger(raw) && raw >= 0) return String(raw);
  return typeof raw === 'string' ? raw.trim() : null;
}
