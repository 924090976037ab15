import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';

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

const ENV_NAME = /^[A-Z_][A-Z0-9_]*$/;
const KEY = /^[a-z0-9][a-z0-9_.-]*$/;
const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const WEI = /^[0-9]+$/;

const ChainSchema = z
  .object({
    chain_id: z.number().int().positive(),
    name: z.string().regex(KEY, 'lowercase letters, digits, "_", "." and "-"').optional(),
    rpc_url: z.string().url(),
    /** Blocks, the transaction's own included, before a transfer counts as done. */
    confirmations: z.number().int().positive().default(1),
    /** `finalized`: wait for the chain's finalized block tag instead of a confirmation count. */
    finality: z.enum(['confirmations', 'finalized']).default('confirmations'),
    /** Seconds until the observer looks again at a transaction not yet confirmed. */
    poll_seconds: z.number().positive().default(1),
    /** Timeout of one JSON-RPC call, in milliseconds. */
    rpc_timeout_ms: z.number().int().positive().default(10_000),
    /** A transaction pending longer than this is replaced with higher fees; unset: never. */
    fee_bump_after_seconds: z.number().positive().optional(),
    /** Each replacement raises both fee fields by at least this percentage (nodes need >= 10). */
    fee_bump_percent: z.number().int().min(10).max(1000).default(20),
    /**
     * Policy cap: no version of a transaction may offer more than this maxFeePerGas, in wei.
     * Required when a signer signs for the chain (docs/signing.md, "Fee caps").
     */
    max_fee_per_gas_cap_wei: z.string().regex(WEI, 'a whole number of wei, as a string').optional(),
    /** The chain's CCTP v2 domain and contracts (docs/cctp-lane.md); unset: no CCTP on this chain. */
    cctp: z.lazy(() => CctpChainSchema).optional(),
  })
  .strict();

// --- CCTP lane (docs/cctp-lane.md) ---
/** A chain's CCTP v2 deployment: its domain id and the TokenMessengerV2 / MessageTransmitterV2 addresses. */
const CctpChainSchema = z
  .object({
    domain: z.number().int().nonnegative().max(0xffffffff),
    token_messenger: z.string().regex(ADDRESS, 'a 0x-prefixed 20-byte address'),
    message_transmitter: z.string().regex(ADDRESS, 'a 0x-prefixed 20-byte address'),
  })
  .strict();

/** Circle's attestation service (Iris v2) the attestation observer asks. */
const CctpSchema = z
  .object({
    attestation_url: z.string().url(),
    /** Seconds until the observer asks again about a message not yet attested. */
    poll_seconds: z.number().positive().default(5),
    /** Timeout of one request to the attestation service, in milliseconds. */
    timeout_ms: z.number().int().positive().default(10_000),
  })
  .strict();
// --- end CCTP lane ---

const KmsSchema = z
  .object({
    key_id: z.string().min(1),
    region: z.string().min(1),
    /** The KMS endpoint; required, so the SDK never goes looking for one. */
    endpoint: z.string().url(),
    /**
     * Static keys, read from these variables. Unset (all three): the AWS SDK's default credential
     * chain (environment, web identity / IRSA, ECS task role, shared files, instance role).
     */
    access_key_id_env: z.string().regex(ENV_NAME, 'an environment variable name').optional(),
    secret_access_key_env: z.string().regex(ENV_NAME, 'an environment variable name').optional(),
    session_token_env: z.string().regex(ENV_NAME, 'an environment variable name').optional(),
    timeout_ms: z.number().int().positive().default(5_000),
  })
  .strict()
  .refine((k) => (k.access_key_id_env === undefined) === (k.secret_access_key_env === undefined), {
    message: 'access_key_id_env and secret_access_key_env go together (neither: the default credential chain)',
    path: ['secret_access_key_env'],
  })
  .refine((k) => k.session_token_env === undefined || k.access_key_id_env !== undefined, {
    message: 'session_token_env needs access_key_id_env and secret_access_key_env',
    path: ['session_token_env'],
  });

/** One executor whose typed data of these primary types a signer signs (only types the signer knows how to check). */
const TypedDataAllowSchema = z
  .object({
    executor: z.string().min(1),
    primary_types: z.array(z.enum(['Permit'])).min(1),
  })
  .strict();

const SignerSchema = z
  .object({
    key: z.string().regex(KEY, 'lowercase letters, digits, "_", "." and "-"'),
    kind: z.enum(['local_key', 'aws_kms']),
    /** local_key: the environment variable holding the 0x-prefixed 32-byte key. */
    private_key_env: z.string().regex(ENV_NAME, 'an environment variable name').optional(),
    kms: KmsSchema.optional(),
    /** Chain ids this signer may sign for; each must be one of evm.chains. */
    chains: z.array(z.number().int().positive()).min(1),
    /** Executor keys this signer serves; unset: every EVM executor. */
    executors: z.array(z.string().min(1)).optional(),
    /** The address the signer signs as, when known without asking it (aws_kms); its balances are watched. */
    address: z.string().regex(ADDRESS, 'a 0x-prefixed 20-byte address').optional(),
    /** Typed data (EIP-712) it signs: primary types by executor key (docs/signing.md); unset: none. */
    typed_data: z.array(TypedDataAllowSchema).optional(),
  })
  .strict()
  .superRefine((s, ctx) => {
    if (s.kind === 'local_key' && !s.private_key_env) ctx.addIssue({ code: 'custom', path: ['private_key_env'], message: 'required for kind local_key' });
    if (s.kind === 'aws_kms' && !s.kms) ctx.addIssue({ code: 'custom', path: ['kms'], message: 'required for kind aws_kms' });
  });

/**
 * The fee cap of a chain Ferry does not reach itself (no RPC here: its executor or signer is a
 * remote host), so that the expected effect of its nodes still carries one.
 */
const FeeCapSchema = z
  .object({
    chain_id: z.number().int().positive(),
    max_fee_per_gas_cap_wei: z.string().regex(WEI, 'a whole number of wei, as a string'),
  })
  .strict();

const TokenSchema = z
  .object({
    chain_id: z.number().int().positive(),
    symbol: z.string().min(1).max(32),
    address: z.string().regex(ADDRESS, 'a 0x-prefixed 20-byte address'),
    /** Checked against the token contract's decimals() when the lane starts using it. */
    decimals: z.number().int().min(0).max(36).optional(),
    /** The token's EIP-712 domain name and version (EIP-2612 permits): USDC's are "USD Coin" and "2". */
    eip712: z.object({ name: z.string().min(1).max(256), version: z.string().min(1).max(64) }).strict().optional(),
  })
  .strict();

/** An address whose balances (native coin and every evm.tokens entry of its chain) are snapshotted. */
const WatchSchema = z
  .object({
    chain_id: z.number().int().positive(),
    address: z.string().regex(ADDRESS, 'a 0x-prefixed 20-byte address'),
    label: z.string().min(1).max(64).optional(),
  })
  .strict();

/** Scripted balances the simulation lane reports to the balance snapshots (amount in asset units). */
const SimBalanceSchema = z
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

/** A network as the exchange (BSC, OPTIMISM) or ccxt (BEP20, OP) names it: letters, digits, "_", "-", ".". */
const NETWORK_REF = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

/** One exchange account of the CEX lane (docs/cex-lane.md); its key and secret come from the environment. */
const CexAccountSchema = z
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
  })
  .strict();

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

export const ConfigFileSchema = z
  .object({
    cex: z
      .object({ accounts: z.array(CexAccountSchema).default([]) })
      .strict()
      .superRefine((cex, ctx) => {
        const keys = new Set<string>();
        cex.accounts.forEach((a, i) => {
          if (keys.has(a.key)) ctx.addIssue({ code: 'custom', path: ['accounts', i, 'key'], message: `account ${a.key} is listed twice` });
          keys.add(a.key);
        });
      })
      .default({ accounts: [] }),
    evm: z
      .object({
        chains: z.array(ChainSchema).default([]),
        signers: z.array(SignerSchema).default([]),
        tokens: z.array(TokenSchema).default([]),
        watch: z.array(WatchSchema).default([]),
        fee_caps: z.array(FeeCapSchema).default([]),
      })
      .strict()
      .superRefine((evm, ctx) => {
        const ids = new Set<number>();
        evm.chains.forEach((c, i) => {
          if (ids.has(c.chain_id)) ctx.addIssue({ code: 'custom', path: ['chains', i, 'chain_id'], message: `chain ${c.chain_id} is listed twice` });
          ids.add(c.chain_id);
        });
        evm.fee_caps.forEach((c, i) => {
          if (ids.has(c.chain_id)) ctx.addIssue({ code: 'custom', path: ['fee_caps', i, 'chain_id'], message: `chain ${c.chain_id} is listed in evm.chains or twice here: give its cap in one place` });
        });
        // Every chain a signer signs for has a fee cap: a key with none can be made to pay any fee.
        evm.signers.forEach((s) => {
          for (const id of s.chains) {
            const i = evm.chains.findIndex((c) => c.chain_id === id);
            if (i >= 0 && evm.chains[i]!.max_fee_per_gas_cap_wei === undefined) {
              ctx.addIssue({ code: 'custom', path: ['chains', i, 'max_fee_per_gas_cap_wei'], message: `required: signer ${s.key} signs for chain ${id}` });
            }
          }
        });
        const tokenChains = new Set([...ids, ...evm.fee_caps.map((c) => c.chain_id)]);
        const domains = new Set<number>();
        evm.chains.forEach((c, i) => {
          if (!c.cctp) return;
          if (domains.has(c.cctp.domain)) ctx.addIssue({ code: 'custom', path: ['chains', i, 'cctp', 'domain'], message: `CCTP domain ${c.cctp.domain} is listed twice` });
          domains.add(c.cctp.domain);
        });
        const keys = new Set<string>();
        evm.signers.forEach((s, i) => {
          if (keys.has(s.key)) ctx.addIssue({ code: 'custom', path: ['signers', i, 'key'], message: `signer ${s.key} is listed twice` });
          keys.add(s.key);
          s.chains.forEach((id, j) => {
            if (!ids.has(id)) ctx.addIssue({ code: 'custom', path: ['signers', i, 'chains', j], message: `chain ${id} is not in evm.chains` });
          });
        });
        const tokens = new Set<string>();
        evm.tokens.forEach((t, i) => {
          if (!tokenChains.has(t.chain_id)) ctx.addIssue({ code: 'custom', path: ['tokens', i, 'chain_id'], message: `chain ${t.chain_id} is not in evm.chains (nor evm.fee_caps)` });
          const k = `${t.chain_id}:${t.symbol}`;
          if (tokens.has(k)) ctx.addIssue({ code: 'custom', path: ['tokens', i, 'symbol'], message: `token ${t.symbol} is listed twice on chain ${t.chain_id}` });
          tokens.add(k);
        });
        evm.watch.forEach((w, i) => {
          if (!ids.has(w.chain_id)) ctx.addIssue({ code: 'custom', path: ['watch', i, 'chain_id'], message: `chain ${w.chain_id} is not in evm.chains` });
        });
      })
      .default({ chains: [], signers: [], tokens: [], watch: [], fee_caps: [] }),
    cctp: CctpSchema.optional(),
    sim: z
      .object({ balances: z.array(SimBalanceSchema).default([]) })
      .strict()
      .default({ balances: [] }),
    remote: RemoteSchema.default({ executors: [], signers: [] }),
  })
  .strict()
  .superRefine((file, ctx) => {
    // A remote signer's chains need a fee cap too, from evm.chains or evm.fee_caps.
    file.remote.signers.forEach((s, i) => {
      (s.chains ?? []).forEach((id, j) => {
        if (feeCapOf(file.evm, id) === undefined) {
          ctx.addIssue({ code: 'custom', path: ['remote', 'signers', i, 'chains', j], message: `chain ${id} has no fee cap: set evm.chains[].max_fee_per_gas_cap_wei or an evm.fee_caps entry` });
        }
      });
    });
  });

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

/** The empty file: what Ferry runs with when FERRY_CONFIG_FILE is unset. */
export const EMPTY_CONFIG_FILE: ConfigFile = ConfigFileSchema.parse({});

export type ConfigFileResult = { ok: true; file: ConfigFile } | { ok: false; reason: string };

/**
 * Reads and validates the file. A refusal names the entry (`evm.chains[1].rpc_url: ...`) and never
 * the value, which may be a URL with an API key in it.
 */
export function readConfigFile(path: string): ConfigFileResult {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    return { ok: false, reason: `cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})` };
  }
  return parseConfigFile(text);
}

export function parseConfigFile(text: string): ConfigFileResult {
  let doc: unknown;
  try {
    doc = parseYaml(text) ?? {};
  } catch (err) {
    return { ok: false, reason: `is not valid YAML: ${(err as Error).message.split('\n')[0]}` };
  }
  const parsed = ConfigFileSchema.safeParse(doc);
  if (parsed.success) return { ok: true, file: parsed.data };
  const issue = parsed.error.issues[0]!;
  return { ok: false, reason: `${entryPath(issue.path)}: ${issue.message}` };
}

function entryPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const part of path) out += typeof part === 'number' ? `[${part}]` : `${out ? '.' : ''}${String(part)}`;
  return out || '(top level)';
}
