import { z } from 'zod';
import { ADDRESS, bool, count, ENV_NAME, KEY, seconds, TypedDataAllowSchema, WEI, type ConfigField } from '../../config-schemas.ts';
import { CctpChainSchema } from '../cctp/config.ts';

/**
 * The EVM lane's configuration (docs/evm-lane.md): its environment variables (the legacy single
 * chain, the replacement limits, the nonce reaper) and the `evm` section of the configuration file
 * (chains, signers, tokens, watched wallets, fee caps of chains reached through remote hosts).
 */

/** Environment variable name -> config key, with its schema. */
export const evmVariables = {
  FERRY_EVM_RPC_URL: ['evmRpcUrl', z.string().url().optional()],
  // Development only: the key lives in process memory (see docs/evm-lane.md).
  FERRY_EVM_SIGNER_KEY: ['evmSignerKey', z.string().regex(/^0x[0-9a-fA-F]{64}$/, 'expected 0x and 64 hex digits').optional()],
  FERRY_EVM_CONFIRMATIONS: ['evmConfirmations', count(1)],
  // The fee cap (maxFeePerGas, wei) of the chain of FERRY_EVM_RPC_URL, which the configuration file
  // does not list; required with FERRY_EVM_SIGNER_KEY (docs/signing.md, "Fee caps").
  FERRY_EVM_MAX_FEE_PER_GAS_CAP_WEI: ['evmMaxFeePerGasCapWei', z.string().regex(/^[0-9]+$/, 'a whole number of wei').optional()],
  // Replacements (fee bumps) an EVM signer signs per attempt, and how far above the original's fee
  // per gas a replacement may go (docs/signing.md, "Replacements").
  FERRY_EVM_MAX_REPLACEMENTS: ['evmMaxReplacements', z.coerce.number().int().min(0).max(50).default(5)],
  FERRY_EVM_MAX_FEE_BUMP_FACTOR: ['evmMaxFeeBumpFactor', z.coerce.number().min(1).max(100).default(4)],
  // The EVM nonce reaper (docs/evm-lane.md, "Nonces").
  FERRY_EVM_NONCE_REAPER_ENABLED: ['evmNonceReaperEnabled', bool.default(true)],
  FERRY_EVM_NONCE_REAPER_INTERVAL_SECONDS: ['evmNonceReaperIntervalSeconds', seconds(60)],
  FERRY_EVM_NONCE_STUCK_SECONDS: ['evmNonceStuckSeconds', seconds(300)],
  // A reservation above the chain's pending nonce this long is a chain state disagreement: attention.
  FERRY_EVM_NONCE_DISAGREEMENT_SECONDS: ['evmNonceDisagreementSeconds', seconds(120)],
  FERRY_EVM_NONCE_REAPER_BATCH_SIZE: ['evmNonceReaperBatchSize', count(20)],
  FERRY_EVM_NONCE_REAPER_MAX_RUN_MS: ['evmNonceReaperMaxRunMs', z.coerce.number().int().min(0).default(20_000)],
} as const satisfies Record<string, ConfigField>;

/** The variables whose values must never appear in messages or logs. */
export const EVM_SECRET_VARIABLES = ['FERRY_EVM_SIGNER_KEY'] as const;

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

export const EvmSectionSchema = z
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
  .default({ chains: [], signers: [], tokens: [], watch: [], fee_caps: [] });
