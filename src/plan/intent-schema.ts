import { z } from 'zod';

/**
 * A template's intent schema: what an intent of this template may hold, declared next to the graph
 * (docs/templates.md, "Intent schema"). It is part of the template's graph hash, checked with the
 * rest of the template when it is proposed or compiled (intentSchemaProblems), and every intent is
 * checked against it when a movement is created (validateIntent in intent-check.ts), so an approver
 * never sees, and a signer never gets, an intent the template was not written for.
 *
 * One entry per intent field, keyed by the field's name; each field is required unless it says
 * `required: false`, and a field the schema does not list is refused.
 */

export const INTENT_FIELD_PATTERN = /^[a-z][a-z0-9_]{0,63}$/;
/** A ticker as exchanges and evm.tokens spell it (USDC, USDC.e, WETH, ...). */
export const ASSET_SYMBOL_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,31}$/;
/** A plain positive or zero decimal in its shortest usual form: no sign, no exponent, no leading zeros. */
export const DECIMAL_PATTERN = /^(0|[1-9][0-9]*)(\.[0-9]+)?$/;
export const MAX_INTENT_FIELDS = 50;
export const MAX_DECIMALS = 36;
/** Digits of an amount's integer part: more than any token supply (uint256 has 78). */
export const MAX_AMOUNT_INTEGER_DIGITS = 78;

const required = z.boolean().default(true);
const decimalString = z
  .string()
  .max(MAX_AMOUNT_INTEGER_DIGITS + MAX_DECIMALS + 1)
  .regex(DECIMAL_PATTERN, 'must be a decimal string such as "0.01" (no sign, exponent or leading zeros)');
const symbol = z.string().regex(ASSET_SYMBOL_PATTERN, 'must be an asset symbol (letters, digits, ".", "_" or "-", 1-32 characters)');
const decimals = z.number().int().min(0).max(MAX_DECIMALS);

const assetField = z.strictObject({
  type: z.literal('asset'),
  /** The assets an intent may name, as evm.tokens and the exchanges spell them. */
  allowed: z.array(symbol).min(1).max(50),
  required,
});

const amountField = z.strictObject({
  type: z.literal('amount'),
  /** Fractional digits the amount may have: one number, or one per allowed asset of the asset field. */
  decimals: z.union([decimals, z.record(symbol, decimals)]),
  /** Inclusive bounds, decimal strings. An amount is always more than zero. */
  min: decimalString.optional(),
  max: decimalString.optional(),
  required,
});

const evmAddressField = z.strictObject({
  type: z.literal('evm_address'),
  /**
   * `if_mixed_case` (the default, as the EVM executors read addresses): all-lowercase or all-uppercase
   * hex is accepted, a mixed-case one must carry a valid EIP-55 checksum. `required`: only the
   * EIP-55 form.
   */
  checksum: z.enum(['if_mixed_case', 'required']).default('if_mixed_case'),
  required,
});

const venueAddressField = z.strictObject({
  type: z.literal('venue_address'),
  /** `evm`: the address follows the evm_address rules; `text`: any address the venue takes (printable, no spaces). */
  format: z.enum(['evm', 'text']).default('text'),
  /** The memo or tag some networks need beside the address. */
  tag: z.enum(['required', 'optional', 'forbidden']).default('forbidden'),
  required,
});

const enumField = z.strictObject({
  type: z.literal('enum'),
  values: z.array(z.string().min(1).max(64).regex(/^[\x21-\x7e]+$/, 'printable, without spaces')).min(1).max(100),
  required,
});

const stringField = z.strictObject({
  type: z.literal('string'),
  max_length: z.number().int().min(1).max(2000).default(200),
  required,
});

const integerField = z.strictObject({
  type: z.literal('integer'),
  min: z.number().int().min(Number.MIN_SAFE_INTEGER).max(Number.MAX_SAFE_INTEGER).optional(),
  max: z.number().int().min(Number.MIN_SAFE_INTEGER).max(Number.MAX_SAFE_INTEGER).optional(),
  required,
});

/** A declared free-form field: any bounded JSON (numbers must still be exact). */
const jsonField = z.strictObject({ type: z.literal('json'), required });

export const intentFieldSchema = z.discriminatedUnion('type', [
  assetField,
  amountField,
  evmAddressField,
  venueAddressField,
  enumField,
  stringField,
  integerField,
  jsonField,
]);

export const intentSchemaSchema = z.strictObject({
  fields: z
    .record(z.string().regex(INTENT_FIELD_PATTERN, 'intent field names are lowercase letters, digits and "_" (1-64, starting with a letter)'), intentFieldSchema)
    .refine((f) => Object.keys(f).length >= 1 && Object.keys(f).length <= MAX_INTENT_FIELDS, {
      message: `an intent schema declares 1 to ${MAX_INTENT_FIELDS} fields`,
    }),
});

export type IntentSchema = z.output<typeof intentSchemaSchema>;
export type IntentField = z.output<typeof intentFieldSchema>;
export type AmountField = z.output<typeof amountField>;

/** A decimal string as an integer count of 10^-scale units, exactly. */
export function scaled(decimal: string, scale: number): bigint {
  const [whole, fraction = ''] = decimal.split('.');
  return BigInt(whole! + (fraction + '0'.repeat(scale)).slice(0, scale));
}

export function fractionDigits(decimal: string): number {
  return decimal.split('.')[1]?.length ?? 0;
}

/** The schema's asset field, if it has one (at most one is allowed). */
export function assetFieldOf(schema: IntentSchema): [string, Extract<IntentField, { type: 'asset' }>] | null {
  for (const [name, field] of Object.entries(schema.fields)) if (field.type === 'asset') return [name, field];
  return null;
}

/**
 * What is wrong with a schema that its shape alone cannot say, as sentences (empty when nothing):
 * bounds that contradict each other or the decimals, a decimals map that does not match the allowed
 * assets, two asset fields (an amount would not know whose decimals it has).
 */
export function intentSchemaProblems(schema: IntentSchema): string[] {
  const problems: string[] = [];
  const assets = Object.entries(schema.fields).filter(([, f]) => f.type === 'asset');
  if (assets.length > 1) problems.push(`intent_schema declares ${assets.length} asset fields (${assets.map(([n]) => n).join(', ')}); declare one`);
  const asset = assetFieldOf(schema);
  for (const [name, field] of Object.entries(schema.fields)) {
    const at = `intent_schema field "${name}"`;
    if (field.type === 'asset' && new Set(field.allowed).size !== field.allowed.length) problems.push(`${at} lists an asset twice`);
    if (field.type === 'enum' && new Set(field.values).size !== field.values.length) problems.push(`${at} lists a value twice`);
    if (field.type === 'integer' && field.min !== undefined && field.max !== undefined && field.min > field.max) {
      problems.push(`${at} has min ${field.min} above max ${field.max}`);
    }
    if (field.type !== 'amount') continue;
    let widest: number;
    if (typeof field.decimals === 'number') {
      widest = field.decimals;
    } else {
      const keys = Object.keys(field.decimals).sort();
      if (!asset) {
        problems.push(`${at} gives decimals per asset, but the schema has no asset field`);
      } else {
        const allowed = [...asset[1].allowed].sort();
        if (keys.join(',') !== allowed.join(',')) {
          problems.push(`${at} gives decimals for ${keys.join(', ') || 'no asset'}, but asset field "${asset[0]}" allows ${allowed.join(', ')}; give one entry per allowed asset`);
        }
      }
      widest = Math.max(0, ...Object.values(field.decimals));
    }
    for (const bound of ['min', 'max'] as const) {
      const v = field[bound];
      if (v === undefined) continue;
      if (fractionDigits(v) > widest) problems.push(`${at} ${bound} "${v}" has more fractional digits than its decimals allow (${widest})`);
      if (scaled(v, MAX_DECIMALS) === 0n) problems.push(`${at} ${bound} is zero; an amount is always more than zero, so leave min out or make it positive`);
    }
    if (field.min !== undefined && field.max !== undefined && scaled(field.min, MAX_DECIMALS) > scaled(field.max, MAX_DECIMALS)) {
      problems.push(`${at} has min "${field.min}" above max "${field.max}"`);
    }
  }
  return problems;
}
