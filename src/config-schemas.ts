import { z } from 'zod';

/**
 * The small schemas every part of the configuration shares: Ferry's own variables (src/config.ts),
 * the configuration file (src/config-file.ts) and each lane's section (src/executors/<lane>/config.ts).
 * Nothing here knows a lane.
 */

/** A switch: true/false, 1/0, yes/no, on/off. */
export const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no', 'on', 'off'])
  .transform((v) => v === 'true' || v === '1' || v === 'yes' || v === 'on');

export const seconds = (def: number) => z.coerce.number().positive().default(def);
export const count = (def: number) => z.coerce.number().int().positive().default(def);
export const csv = z
  .string()
  .transform((v) =>
    v
      .split(',')
      .map((s) => s.trim().toLowerCase())
      .filter(Boolean),
  );

/** One variable: its config key and its schema. */
export type ConfigField = readonly [key: string, schema: z.ZodType];

// The file's shapes (snake_case keys; secrets named by the variable holding them).
export const ENV_NAME = /^[A-Z_][A-Z0-9_]*$/;
export const KEY = /^[a-z0-9][a-z0-9_.-]*$/;
export const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
export const WEI = /^[0-9]+$/;

/** One executor whose typed data of these primary types a signer signs (only types the signer knows how to check: EIP-2612 Permit, Circle Gateway's BurnIntent). */
export const TypedDataAllowSchema = z
  .object({
    executor: z.string().min(1),
    primary_types: z.array(z.enum(['Permit', 'BurnIntent'])).min(1),
  })
  .strict();

/** A configuration Ferry cannot start with, naming the variable (or file entry) at fault. */
export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    reason: string,
  ) {
    super(`Invalid configuration: ${variable} ${reason}`);
    this.name = 'ConfigError';
  }
}
