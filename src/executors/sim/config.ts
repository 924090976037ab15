import { z } from 'zod';

/** The simulation lane's configuration: the `sim` section of the configuration file (scripted balances). */

/** Scripted balances the simulation lane reports to the balance snapshots (amount in asset units). */
export const SimBalanceSchema = z
  .object({
    wallet: z.string().min(1).max(128),
    asset: z.string().min(1).max(32),
    amount: z.string().regex(/^[0-9]+(\.[0-9]+)?$/, 'a decimal string such as "100.25"'),
    decimals: z.number().int().min(0).max(36).default(6),
    /** Report a failure instead of the amount (to exercise staleness). */
    fail: z.boolean().default(false),
  })
  .strict()
  .refine((b) => (b.amount.split('.')[1] ?? '').length <= b.decimals, { path: ['amount'], message: 'more fractional digits than decimals' });

export const SimSectionSchema = z
  .object({ balances: z.array(SimBalanceSchema).default([]) })
  .strict()
  .default({ balances: [] });
