import type { PriceReading } from '../policy/rules.ts';

/**
 * A price source (docs/policy.md, "Amounts in a reference currency"): what the treasury policy asks
 * for the price of an asset in a reference currency when a rule bounds an amount in that currency.
 * It answers a reading it has already judged (fresh, positive, from a complete round) or why there
 * is none; it never answers a price it would not stand behind, and the policy refuses a movement a
 * rule cannot price (fail closed).
 */
export interface PriceSource {
  /** The price of `asset` in `currency` as of `at` (the instant the policy decides on). */
  read(asset: string, currency: string, at: Date): Promise<PriceReading>;
}
