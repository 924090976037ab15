import { z } from 'zod';
import { ENV_NAME, KEY } from '../../config-schemas.ts';

/** The CEX lane's configuration (docs/cex-lane.md): the `cex` section of the configuration file. */

/** A network as the exchange (BSC, OPTIMISM) or ccxt (BEP20, OP) names it: letters, digits, "_", "-", ".". */
const NETWORK_REF = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

/** One exchange account of the CEX lane (docs/cex-lane.md); its key and secret come from the environment. */
export const CexAccountSchema = z
  .object({
    key: z.string().regex(KEY, 'lowercase letters, digits, "_", "." and "-"'),
    exchange: z.literal('binance'),
    /** Where the exchange's REST API is; every ccxt endpoint is pointed here, nothing else is contacted. */
    base_url: z.string().url(),
    api_key_env: z.string().regex(ENV_NAME, 'an environment variable name'),
    api_secret_env: z.string().regex(ENV_NAME, 'an environment variable name'),
    /**
     * Ferry's network names to networks of the exchange, each given as the exchange's network id
     * (`bsc: BSC`) or ccxt's unified network code (`bsc: BEP20`); resolved against the exchange's
     * currencies when ccxt first loads them (docs/cex-lane.md, "Networks").
     */
    networks: z.record(z.string().min(1).max(64), z.string().regex(NETWORK_REF, 'an exchange network id (e.g. BSC) or a ccxt network code (e.g. BEP20)')).optional(),
    /** Timeout of one exchange request, in milliseconds. */
    timeout_ms: z.number().int().positive().default(10_000),
    /**
     * How long an attempt whose outcome is unknown (a timeout, a 5xx, a process that died in submit)
     * must stay absent from the exchange's withdrawal history before recovery concludes nothing was
     * withdrawn and lets the node start a new attempt. Default 300. It must exceed the longest time
     * a withdraw call can take to reach the exchange (a stalled process, a slow network): a call
     * arriving later than this is a second withdrawal.
     */
    not_found_after_seconds: z.number().positive().max(86_400).optional(),
  })
  .strict();

export const CexSectionSchema = z
  .object({ accounts: z.array(CexAccountSchema).default([]) })
  .strict()
  .superRefine((cex, ctx) => {
    const keys = new Set<string>();
    cex.accounts.forEach((a, i) => {
      if (keys.has(a.key)) ctx.addIssue({ code: 'custom', path: ['accounts', i, 'key'], message: `account ${a.key} is listed twice` });
      keys.add(a.key);
    });
  })
  .default({ accounts: [] });
