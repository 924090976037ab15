import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { ADDRESS, ENV_NAME, KEY, TypedDataAllowSchema } from './config-schemas.ts';
import { lanes, type LaneList } from './executors/lanes.ts';

/**
 * The optional configuration file (`FERRY_CONFIG_FILE`, YAML): what does not fit in environment
 * variables, such as several chains, signers and tokens. Its keys are snake_case. Secrets do not
 * belong in it: a key, or a KMS credential, is named by the environment variable that holds it
 * (`*_env`), and RPC URLs, which may carry an API key, are never shown back.
 *
 * ```yaml
 * evm:
 *   chains:
 *     - chain_id: 31337
 *       name: local
 *       rpc_url: http://127.0.0.1:8545
 *       confirmations: 2
 *       max_fee_per_gas_cap_wei: "100000000000"   # required: a signer signs for this chain
 *   signers:
 *     - key: hot_wallet_1
 *       kind: local_key
 *       private_key_env: HOT_WALLET_1_KEY
 *       chains: [31337]
 *   tokens:
 *     - chain_id: 31337
 *       symbol: USDC
 *       address: "0x5FbDB2315678afecb367f032d93F642f64180aa3"
 *       decimals: 6
 * remote:                      # executors and signers in other processes (docs/operations.md)
 *   executors:
 *     - key: exec.evm.native_transfer
 *       url: http://127.0.0.1:3101
 *       token_env: EXECUTOR_HOST_TOKEN
 * ```
 */

// --- Remote executors and signers (seed 003's HTTP protocols; docs/operations.md, "Remote hosts").
/** An executor served by another process (`ferry executor-host`): nodes bind its key like a local one. */
const RemoteExecutorSchema = z
  .object({
    /** The executor key nodes bind (e.g. exec.evm.native_transfer); no local executor may have it. */
    key: z.string().regex(/^[a-z0-9][a-z0-9_.-]*$/, 'an executor key such as exec.evm.native_transfer'),
    /** Where the host listens; the protocol's paths (/preflight, /submit, ...) are appended. */
    url: z.string().url(),
    /** The environment variable holding the bearer token the host expects. */
    token_env: z.string().regex(ENV_NAME, 'an environment variable name').optional(),
    /** Timeout of one call (connect, answer headers, body), in milliseconds. */
    timeout_ms: z.number().int().positive().default(30_000),
  })
  .strict();

/** A signer served by another process (`ferry signer-host`): POST /sign, GET /health. */
const RemoteSignerSchema = z
  .object({
    key: z.string().regex(KEY, 'lowercase letters, digits, "_", "." and "-"'),
    url: z.string().url(),
    token_env: z.string().regex(ENV_NAME, 'an environment variable name').optional(),
    timeout_ms: z.number().int().positive().default(10_000),
    /** The address it signs as: with `chains`, a wallet the local EVM lane can send from. */
    address: z.string().regex(ADDRESS, 'a 0x-prefixed 20-byte address').optional(),
    /** Chain ids it signs for; with them the EVM signer policy is also checked here before a request leaves. */
    chains: z.array(z.number().int().positive()).min(1).optional(),
    /** Executor keys it serves (checked here too); unset: every executor. */
    executors: z.array(z.string().min(1)).optional(),
    /** Typed data it signs (checked here too, with chains); unset: refused here before it leaves. */
    typed_data: z.array(TypedDataAllowSchema).optional(),
  })
  .strict()
  .refine((s) => s.address === undefined || s.chains !== undefined, { path: ['chains'], message: 'required with address' });

const RemoteSchema = z
  .object({
    executors: z.array(RemoteExecutorSchema).default([]),
    signers: z.array(RemoteSignerSchema).default([]),
  })
  .strict()
  .superRefine((remote, ctx) => {
    for (const list of ['executors', 'signers'] as const) {
      const keys = new Set<string>();
      remote[list].forEach((e, i) => {
        if (keys.has(e.key)) ctx.addIssue({ code: 'custom', path: [list, i, 'key'], message: `${e.key} is listed twice` });
        keys.add(e.key);
      });
    }
  });
// --- end remote

const remoteSection = { remote: RemoteSchema.default({ executors: [], signers: [] }) };

// --- Price feeds (docs/policy.md, "Amounts in a reference currency"): where the treasury policy reads
// the price of an asset when a rule bounds an amount in a reference currency.
/** One Chainlink-style feed (AggregatorV3Interface) of an asset's price in a currency, on a chain of evm.chains. */
const PriceFeedSchema = z
  .object({
    /** The asset as intents name it (`ETH`, `USDC`). */
    asset: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,31}$/, 'an asset symbol'),
    /** The currency the feed quotes in (`USD`). */
    currency: z.string().regex(/^[A-Z][A-Z0-9]{1,9}$/, 'a currency code such as USD'),
    chain_id: z.number().int().positive(),
    address: z.string().regex(ADDRESS, 'a 0x-prefixed 20-byte address'),
    /** The longest the feed's latest answer may be old (its heartbeat, from the feed's page); older is stale. */
    heartbeat_seconds: z.number().int().min(1).max(7 * 24 * 3600),
    /** The feed's decimals, checked against decimals() when it is first read (unset: whatever it answers). */
    decimals: z.number().int().min(0).max(36).optional(),
  })
  .strict();
const priceSection = { price_feeds: z.array(PriceFeedSchema).max(200).default([]) };

type UnionToIntersection<U> = (U extends unknown ? (k: U) => void : never) extends (k: infer I) => void ? I : never;
/** The file's sections: each lane's (src/executors/<lane>/config.ts), and remote hosts. */
type Sections = UnionToIntersection<(typeof lanes)[number]['fileSections']> & typeof remoteSection & typeof priceSection;

/**
 * The file's schema for a list of lanes: their sections and `remote`. A section of a lane not in
 * the list is an unknown entry (refused), and no check reads it.
 */
export function configFileSchema(list: LaneList = lanes) {
  const shape: Record<string, z.ZodType> = {};
  for (const lane of list) {
    for (const [name, section] of Object.entries(lane.fileSections)) {
      if (name in shape || name in remoteSection || name in priceSection) throw new Error(`lane ${lane.name}: file section ${name} is already another lane's`);
      shape[name] = section;
    }
  }
  const evmListed = list.some((l) => 'evm' in l.fileSections);
  return z
    .object({ ...shape, ...remoteSection, ...priceSection } as unknown as Sections)
    .strict()
    .superRefine((file, ctx) => {
      const f = file as unknown as Record<string, unknown>;
      for (const lane of list) lane.refineFile?.(f, ctx);
      // A field a lane not in the list owns inside a listed lane's entries is refused like its sections.
      for (const lane of lanes as LaneList) {
        if (list.includes(lane)) continue;
        for (const { section, list: entries, field } of lane.nestedFields ?? []) {
          const items = (f[section] as Record<string, unknown> | undefined)?.[entries];
          if (!Array.isArray(items)) continue;
          items.forEach((item, i) => {
            if (item && typeof item === 'object' && field in item) {
              ctx.addIssue({ code: 'custom', path: [section, entries, i, field], message: `belongs to the ${lane.name} lane, which this Ferry does not list` });
            }
          });
        }
      }
      // A price feed is read over one of evm.chains, once per (asset, currency).
      const feedKeys = new Set<string>();
      file.price_feeds.forEach((p, i) => {
        const key = `${p.asset.toUpperCase()}/${p.currency}`;
        if (feedKeys.has(key)) ctx.addIssue({ code: 'custom', path: ['price_feeds', i, 'asset'], message: `a second feed of ${key}` });
        feedKeys.add(key);
        const chains = evmListed ? ((f.evm as { chains?: { chain_id: number }[] } | undefined)?.chains ?? []) : [];
        if (!chains.some((c) => c.chain_id === p.chain_id)) {
          ctx.addIssue({ code: 'custom', path: ['price_feeds', i, 'chain_id'], message: `chain ${p.chain_id} is not in evm.chains: a feed is read over its RPC endpoint` });
        }
      });
      // A remote signer's chains need a fee cap too, from evm.chains or evm.fee_caps (none without the EVM lane).
      const evm = evmListed ? (f.evm as Parameters<typeof feeCapOf>[0]) : null;
      file.remote.signers.forEach((s, i) => {
        (s.chains ?? []).forEach((id, j) => {
          if (!evm || feeCapOf(evm, id) === undefined) {
            ctx.addIssue({ code: 'custom', path: ['remote', 'signers', i, 'chains', j], message: `chain ${id} has no fee cap: set evm.chains[].max_fee_per_gas_cap_wei or an evm.fee_caps entry` });
          }
        });
      });
    });
}

export const ConfigFileSchema = configFileSchema(lanes);

/** The fee cap the configuration gives a chain (its evm.chains entry, else evm.fee_caps), in wei; undefined: none. */
export function feeCapOf(evm: { chains: ReadonlyArray<{ chain_id: number; max_fee_per_gas_cap_wei?: string }>; fee_caps: ReadonlyArray<{ chain_id: number; max_fee_per_gas_cap_wei: string }> }, chainId: number): string | undefined {
  return evm.chains.find((c) => c.chain_id === chainId)?.max_fee_per_gas_cap_wei ?? evm.fee_caps.find((c) => c.chain_id === chainId)?.max_fee_per_gas_cap_wei;
}

export type ConfigFile = z.output<typeof ConfigFileSchema>;
export type EvmChainConfig = ConfigFile['evm']['chains'][number];
export type EvmSignerConfig = ConfigFile['evm']['signers'][number];
export type EvmTokenConfig = ConfigFile['evm']['tokens'][number];
export type EvmWatchConfig = ConfigFile['evm']['watch'][number];
export type SimBalanceConfig = ConfigFile['sim']['balances'][number];
export type CexAccountConfig = ConfigFile['cex']['accounts'][number];
export type CctpConfig = NonNullable<ConfigFile['cctp']>;
export type RemoteExecutorConfig = ConfigFile['remote']['executors'][number];
export type RemoteSignerConfig = ConfigFile['remote']['signers'][number];
export type PriceFeedConfig = ConfigFile['price_feeds'][number];

/** The empty file: what Ferry runs with when FERRY_CONFIG_FILE is unset. */
export const EMPTY_CONFIG_FILE: ConfigFile = ConfigFileSchema.parse({});

export type ConfigFileResult = { ok: true; file: ConfigFile } | { ok: false; reason: string };

/**
 * Reads and validates the file. A refusal names the entry (`evm.chains[1].rpc_url: ...`) and never
 * the value, which may be a URL with an API key in it.
 */
export function readConfigFile(path: string, schema: z.ZodType = ConfigFileSchema): ConfigFileResult {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    return { ok: false, reason: `cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})` };
  }
  return parseConfigFile(text, schema);
}

export function parseConfigFile(text: string, schema: z.ZodType = ConfigFileSchema): ConfigFileResult {
  let doc: unknown;
  try {
    doc = parseYaml(text) ?? {};
  } catch (err) {
    return { ok: false, reason: `is not valid YAML: ${(err as Error).message.split('\n')[0]}` };
  }
  const parsed = schema.safeParse(doc);
  if (parsed.success) return { ok: true, file: parsed.data as ConfigFile };
  const issue = parsed.error.issues[0]!;
  return { ok: false, reason: `${entryPath(issue.path)}: ${issue.message}` };
}

function entryPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const part of path) out += typeof part === 'number' ? `[${part}]` : `${out ? '.' : ''}${String(part)}`;
  return out || '(top level)';
}
