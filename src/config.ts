import { z } from 'zod';
import { parseCidr } from './callbacks/cidr.ts';
import { WEBHOOK_SECRET_PREFIX, decodeWebhookSecret } from './callbacks/signing.ts';
import { bool, ConfigError, count, csv, seconds, type ConfigField } from './config-schemas.ts';
import { EMPTY_CONFIG_FILE, configFileSchema, readConfigFile, type ConfigFile } from './config-file.ts';
import { lanes, type LaneList } from './executors/lanes.ts';

export { ConfigError } from './config-schemas.ts';

/**
 * Ferry's whole configuration: one object, validated once at start from the environment.
 * Defaults follow the reference worker runtime (intervals, batch sizes, TTLs, flags).
 * Each lane's variables are its own (src/executors/<lane>/config.ts) and join this object through
 * the lane list (src/executors/lanes.ts).
 */

// "lane=seconds,lane=seconds": per-lane overrides of how long a node may sit in SUBMITTING before
// recovery asks the provider what happened.
const laneSeconds = z.string().transform((v, ctx) => {
  const out: Record<string, number> = {};
  for (const part of v.split(',').map((s) => s.trim()).filter(Boolean)) {
    const [lane, secs] = part.split('=');
    const n = Number(secs);
    if (!lane || !Number.isFinite(n) || n <= 0) {
      ctx.addIssue({ code: 'custom', message: `expected lane=seconds, got ${JSON.stringify(part)}` });
      return z.NEVER;
    }
    out[lane.trim()] = n;
  }
  return out;
});

// FERRY_EXPLORER_URLS: a JSON object, chain id or network name -> an http(s) URL template holding
// {tx}, e.g. {"1": "https://etherscan.io/tx/{tx}"}. Only rendered as links, never fetched.
/** A key of FERRY_EXPLORER_URLS: a chain id or a network name. */
export const EXPLORER_KEY = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
const explorerUrls = z
  .string()
  .transform((v, ctx) => {
    try {
      return JSON.parse(v) as unknown;
    } catch {
      ctx.addIssue({ code: 'custom', message: 'expected a JSON object such as {"1": "https://etherscan.io/tx/{tx}"}' });
      return z.NEVER;
    }
  })
  .pipe(
    z
      .record(
        z.string().regex(EXPLORER_KEY, 'keys are chain ids or network names (letters, digits, "_", "." and "-")'),
        z
          .string()
          .max(500)
          .refine((t) => /^https?:\/\/[^\s{}]+/i.test(t) && t.includes('{tx}') && !/\s/.test(t), 'each value is an http(s) URL template holding {tx}, e.g. https://etherscan.io/tx/{tx}')
          .refine((t) => {
            try {
              return ['http:', 'https:'].includes(new URL(t.split('{tx}').join('0')).protocol);
            } catch {
              return false;
            }
          }, 'each value must be a valid http(s) URL once {tx} is filled in'),
      )
      .refine((r) => Object.keys(r).length <= 100, 'at most 100 chains'),
  );

const cidrList = csv.pipe(
  z.array(z.string().refine((v) => parseCidr(v) !== null, { message: 'expected networks such as 10.0.0.0/8 or fd00::/8, comma-separated' })),
);

// --- Operator notifications (notification_dispatcher, docs/operations.md "Operator notifications").
// FERRY_NOTIFY_CHANNELS: a JSON array of channels, each
//   {"name", "kind": "webhook" | "slack", "url", "secret" (webhook: whsec_...), "rate_limit_per_minute",
//    "dedup_seconds", "max_attempts", "timeout_ms"}.
export const NOTIFY_CHANNEL_NAME = /^[a-z0-9][a-z0-9_.-]{0,62}$/;
const notifyChannel = z
  .strictObject({
    name: z.string().regex(NOTIFY_CHANNEL_NAME, 'channel names are 1-63 lowercase letters, digits, "_", "." or "-"'),
    kind: z.enum(['webhook', 'slack']),
    url: z
      .string()
      .max(2048)
      .refine((u) => {
        try {
          return ['http:', 'https:'].includes(new URL(u).protocol);
        } catch {
          return false;
        }
      }, 'url must be an http(s) URL'),
    secret: z
      .string()
      .refine((s) => s.startsWith(WEBHOOK_SECRET_PREFIX) && decodeWebhookSecret(s) !== null, 'secret must be whsec_ + base64 of 24 to 64 bytes')
      .optional(),
    rate_limit_per_minute: z.number().int().min(1).max(10_000).default(30),
    dedup_seconds: z.number().int().min(0).max(30 * 86_400).default(3600),
    max_attempts: z.number().int().min(1).max(100).default(5),
    timeout_ms: z.number().int().min(100).max(60_000).default(5_000),
  })
  .refine((c) => c.kind !== 'webhook' || c.secret !== undefined, 'a webhook channel needs a secret (whsec_...) to sign with');
export type NotifyChannel = z.output<typeof notifyChannel>;
const notifyChannels = z
  .string()
  .transform((v, ctx) => {
    try {
      return JSON.parse(v) as unknown;
    } catch {
      ctx.addIssue({ code: 'custom', message: 'expected a JSON array of channels such as [{"name":"ops","kind":"slack","url":"https://..."}]' });
      return z.NEVER;
    }
  })
  .pipe(
    z
      .array(notifyChannel)
      .max(20, 'at most 20 channels')
      .refine((cs) => new Set(cs.map((c) => c.name)).size === cs.length, 'channel names must be unique'),
  );

// --- Capital transfer follow-up (capital_transfer_followup, docs/operations.md "Movements waiting too long").
// "template_key=seconds,template_key=seconds": per-template ages past which a waiting movement is surfaced.
const templateSeconds = z.string().transform((v, ctx) => {
  const out: Record<string, number> = {};
  for (const part of v.split(',').map((s) => s.trim()).filter(Boolean)) {
    const [key, secs] = part.split('=');
    const n = Number(secs);
    if (!key || !Number.isInteger(n) || n <= 0) {
      ctx.addIssue({ code: 'custom', message: `expected template_key=seconds, got ${JSON.stringify(part)}` });
      return z.NEVER;
    }
    out[key.trim()] = n;
  }
  return out;
});

export const logLevels = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogLevel = (typeof logLevels)[number];

/** Environment variable name -> config key, with its schema: Ferry's own (the lanes' are theirs). */
const coreFields = {
  PORT: ['port', z.coerce.number().int().min(0).max(65535).default(3000)],
  HOST: ['host', z.string().min(1).default('127.0.0.1')],
  DATABASE_URL: ['databaseUrl', z.string().url().optional()],
  FERRY_DATA_DIR: ['dataDir', z.string().min(1).default('./.ferry/data')],
  // Unset: 54329, or a free port remembered in the data folder when 54329 is taken (persistence/embedded-port.ts).
  FERRY_EMBEDDED_PG_PORT: ['embeddedPgPort', z.coerce.number().int().min(1).max(65535).optional()],
  // As root, where the embedded PostgreSQL's programs and cluster go when its system user cannot reach
  // them in the checkout (a home folder of mode 0700): persistence/embedded-reach.ts.
  FERRY_EMBEDDED_PG_SHARED_DIR: ['embeddedPgSharedDir', z.string().min(1).default('/var/lib/ferry')],
  FERRY_LOG_LEVEL: ['logLevel', z.enum(logLevels).default('info')],
  FERRY_DB_POOL_MAX: ['dbPoolMax', count(20)],
  FERRY_PGBOSS_POOL_MAX: ['pgbossPoolMax', count(4)],
  FERRY_PGBOSS_SUPERVISE_INTERVAL_SECONDS: ['pgbossSuperviseIntervalSeconds', z.coerce.number().int().min(1).max(3600).default(30)],
  // pg-boss's flow resolver (job dependencies; Ferry writes none): how often each process claims its turn.
  FERRY_PGBOSS_FLOW_INTERVAL_SECONDS: ['pgbossFlowIntervalSeconds', z.coerce.number().int().min(1).max(3600).default(60)],

  FERRY_WORKERS_ENABLED: ['workersEnabled', bool.default(true)],
  FERRY_WORKER_PROCESSES: ['workerProcesses', z.coerce.number().int().min(0).max(64).default(0)],
  // The deployment this process serves (mainnet, testnet, staging...): worker heartbeats are kept
  // per network class, so deployments sharing one database keep separate baselines of their workers.
  FERRY_NETWORK_CLASS: ['networkClass', z.string().regex(/^[a-z][a-z0-9_-]{0,31}$/, 'a lower-case name of at most 32 letters, digits, - and _').default('default')],
  // A process whose workers wrote no heartbeat for this long is listed as gone (GET /v3/workers, ferry workers).
  FERRY_WORKER_GONE_AFTER_SECONDS: ['workerGoneAfterSeconds', z.coerce.number().int().min(10).max(86400).default(60)],
  // A core worker (lease holder, recovery, a lane's core worker) whose runs failed this many times in
  // a row, not counting Ferry's database being away, takes its process down (exit code 1) so that the
  // cluster primary or the service manager starts a fresh one; 0: it only backs off, forever.
  FERRY_CORE_WORKER_CRASH_AFTER_FAILURES: ['coreWorkerCrashAfterFailures', z.coerce.number().int().min(0).max(10000).default(10)],
  // The lease holder and its movement actors (docs/actor-runtime.md): how long a lease lasts unrenewed,
  // how many movements one process holds, and how long a movement actor keeps a movement whose next
  // work is due soon instead of handing it back (movement-actor.ts).
  FERRY_LEASE_TTL_SECONDS: ['leaseTtlSeconds', z.coerce.number().min(1).max(3600).default(15)],
  FERRY_LEASE_MAX_MOVEMENTS: ['leaseMaxMovements', count(500)],
  FERRY_ACTOR_HOLD_SECONDS: ['actorHoldSeconds', z.coerce.number().min(0).max(300).default(5)],
  // Per-worker switches for the recovery loop and the callback delivery consumer (the sweeps have their
  // own FERRY_<SWEEP>_ENABLED); a disabled worker is listed as disabled in GET /v3/workers.
  FERRY_WORKER_NODE_RECOVERY_ENABLED: ['workerNodeRecoveryEnabled', bool.default(true)],
  FERRY_WORKER_CALLBACK_DISPATCHER_ENABLED: ['workerCallbackDispatcherEnabled', bool.default(true)],
  FERRY_NODE_DISPATCH_INTERVAL_SECONDS: ['dispatchIntervalSeconds', seconds(2)],
  FERRY_NODE_DISPATCH_BATCH_SIZE: ['dispatchBatchSize', count(16)],
  FERRY_NODE_OBSERVE_BATCH_SIZE: ['observeBatchSize', count(10)],
  FERRY_OBSERVE_TIMEOUT_ENFORCEMENT_ENABLED: ['observeTimeoutEnforcement', bool.default(false)],
  FERRY_NODE_RECOVERY_INTERVAL_SECONDS: ['recoveryIntervalSeconds', seconds(60)],
  FERRY_NODE_RECOVERY_BATCH_SIZE: ['recoveryBatchSize', count(10)],
  FERRY_SUBMITTING_GRACE_SECONDS: ['submittingGraceSeconds', seconds(300)],
  FERRY_SUBMITTING_GRACE_SECONDS_BY_LANE: ['submittingGraceByLane', laneSeconds.default({})],
  // The callback workers' backstop poll: a new delivery job's NOTIFY wakes one at once, and a retry
  // due later is woken by the process that wrote it (src/actors/boss.ts, "Waking").
  FERRY_CALLBACK_DISPATCH_INTERVAL_SECONDS: ['callbackIntervalSeconds', z.coerce.number().min(0.5).max(3600).default(30)],
  FERRY_CALLBACK_BATCH_SIZE: ['callbackBatchSize', count(5)],
  FERRY_CALLBACK_MAX_ATTEMPTS: ['callbackMaxAttempts', count(5)],
  FERRY_CALLBACK_TIMEOUT_MS: ['callbackTimeoutMs', count(10_000)],
  FERRY_CALLBACK_SECRET: [
    'callbackSecret',
    z
      .string()
      .min(16)
      .refine((s) => !s.startsWith(WEBHOOK_SECRET_PREFIX) || decodeWebhookSecret(s) !== null, 'a whsec_ secret must be whsec_ + base64 of 24 to 64 bytes')
      .optional(),
  ],
  // Also send the signature headers from before Standard Webhooks (Ferry-Signature, X-Ferry-Callback-*).
  FERRY_CALLBACK_LEGACY_HEADERS: ['callbackLegacyHeaders', bool.default(true)],
  FERRY_CALLBACK_ALLOWED_HOSTS: ['callbackAllowedHosts', csv.optional()],
  // Networks (CIDR) callbacks may reach although they are not public: loopback, private, link-local.
  FERRY_CALLBACK_ALLOWED_NETWORKS: ['callbackAllowedNetworks', cidrList.default([])],
  FERRY_SWEEP_RETENTION_SECONDS: ['sweepRetentionSeconds', z.coerce.number().int().min(60).default(86_400)],
  FERRY_SWEEP_HEARTBEAT_SECONDS: ['sweepHeartbeatSeconds', z.coerce.number().int().min(10).max(3600).default(30)],
  FERRY_SWEEP_RETRY_LIMIT: ['sweepRetryLimit', z.coerce.number().int().min(0).max(20).default(3)],
  // How often an idle sweep worker polls at most: its runs are woken (timers, NOTIFY), so this is the
  // backstop for a lost notification (src/sweeps/sweeps.ts, "Waking").
  FERRY_SWEEP_POLL_BACKSTOP_SECONDS: ['sweepPollBackstopSeconds', z.coerce.number().min(2).max(3600).default(60)],
  FERRY_CALLBACK_STRANDED_SWEEP_ENABLED: ['callbackStrandedSweepEnabled', bool.default(true)],
  FERRY_CALLBACK_STRANDED_SWEEP_INTERVAL_SECONDS: ['callbackStrandedSweepIntervalSeconds', seconds(60)],
  FERRY_CALLBACK_STRANDED_SWEEP_BATCH_SIZE: ['callbackStrandedSweepBatchSize', count(500)],
  FERRY_EXPIRATION_CHECK_ENABLED: ['expirationEnabled', bool.default(true)],
  FERRY_EXPIRATION_CHECK_INTERVAL_SECONDS: ['expirationIntervalSeconds', seconds(30)],
  FERRY_EXPIRATION_BATCH_SIZE: ['expirationBatchSize', count(20)],
  FERRY_EXPIRATION_MAX_RUN_MS: ['expirationMaxRunMs', z.coerce.number().int().min(0).default(30_000)],
  FERRY_EXECUTOR_HEALTH_ENABLED: ['healthEnabled', bool.default(true)],
  FERRY_EXECUTOR_HEALTH_INTERVAL_SECONDS: ['healthIntervalSeconds', seconds(60)],
  FERRY_EXECUTOR_HEALTH_TIMEOUT_MS: ['healthTimeoutMs', count(10_000)],
  // Largest answer read from a remote executor; past it the answer is refused (EXECUTOR_ANSWER_TOO_LARGE).
  FERRY_EXECUTOR_ANSWER_MAX_BYTES: ['executorAnswerMaxBytes', z.coerce.number().int().min(64 * 1024).max(64 * 1024 * 1024).default(1024 * 1024)],
  FERRY_AUDIT_PROMOTER_ENABLED: ['auditEnabled', bool.default(true)],
  FERRY_AUDIT_PROMOTER_INTERVAL_SECONDS: ['auditIntervalSeconds', seconds(1)],
  // Between runs once a run found the outbox empty; an outbox write's NOTIFY brings the next run forward.
  FERRY_AUDIT_PROMOTER_IDLE_INTERVAL_SECONDS: ['auditIdleIntervalSeconds', z.coerce.number().min(1).max(3600).default(30)],
  FERRY_AUDIT_PROMOTER_BATCH_SIZE: ['auditBatchSize', count(500)],
  FERRY_AUDIT_PROMOTER_MAX_BATCHES: ['auditMaxBatches', count(20)],
  FERRY_RECONCILIATION_ENABLED: ['reconciliationEnabled', bool.default(true)],
  FERRY_RECONCILIATION_INTERVAL_SECONDS: ['reconciliationIntervalSeconds', seconds(30)],
  FERRY_RECONCILIATION_BATCH_SIZE: ['reconciliationBatchSize', count(50)],
  FERRY_RECONCILIATION_MAX_RUN_MS: ['reconciliationMaxRunMs', z.coerce.number().int().min(0).default(20_000)],
  // Reconciliation with provider evidence (docs/operations.md, "Reconciliation"): which settled nodes
  // are asked about, how many per run, and whether a contradiction is repaired (off: only reported).
  FERRY_RECONCILIATION_EVIDENCE_ENABLED: ['reconciliationEvidenceEnabled', bool.default(true)],
  FERRY_RECONCILIATION_LOOKBACK_SECONDS: ['reconciliationLookbackSeconds', seconds(86_400)],
  FERRY_RECONCILIATION_RECHECK_SECONDS: ['reconciliationRecheckSeconds', seconds(3_600)],
  FERRY_RECONCILIATION_EVIDENCE_BATCH_SIZE: ['reconciliationEvidenceBatchSize', count(20)],
  FERRY_RECONCILIATION_AUTO_REPAIR: ['reconciliationAutoRepair', bool.default(false)],
  // Movements placed on the pg-boss queue ferry-movement-requests by other systems (src/queue/movement-queue.ts).
  FERRY_MOVEMENT_QUEUE_ENABLED: ['movementQueueEnabled', bool.default(true)],
  FERRY_MOVEMENT_QUEUE_CONCURRENCY: ['movementQueueConcurrency', count(2)],
  // The consumers' backstop poll: a message sent through pg-boss wakes one by its NOTIFY.
  FERRY_MOVEMENT_QUEUE_POLL_SECONDS: ['movementQueuePollSeconds', z.coerce.number().min(0.5).max(3600).default(30)],
  // Balance snapshots (src/balances/): the optional sidecar that records wallet balances per chain.
  FERRY_BALANCE_SNAPSHOT_ENABLED: ['balanceSnapshotEnabled', bool.default(false)],
  FERRY_BALANCE_SNAPSHOT_INTERVAL_SECONDS: ['balanceSnapshotIntervalSeconds', seconds(30)],
  FERRY_BALANCE_SNAPSHOT_BATCH_SIZE: ['balanceSnapshotBatchSize', count(50)],
  FERRY_BALANCE_SNAPSHOT_MAX_RUN_MS: ['balanceSnapshotMaxRunMs', z.coerce.number().int().min(0).default(20_000)],
  FERRY_BALANCE_SNAPSHOT_RETENTION_SECONDS: ['balanceSnapshotRetentionSeconds', seconds(7 * 24 * 3600)],
  FERRY_BALANCE_STALE_THRESHOLD_SECONDS: ['balanceStaleThresholdSeconds', seconds(120)],
  FERRY_APPROVAL_TTL_SECONDS: ['approvalTtlSeconds', count(300)],
  FERRY_APPROVAL_QUORUM: ['approvalQuorum', count(1)],
  FERRY_MAX_BODY_BYTES: ['maxBodyBytes', count(256 * 1024)],
  // Failed authentications per client address and window before that address gets 429 AUTH_THROTTLED
  // (src/http/auth-throttle.ts), and how many addresses one API process keeps count of.
  FERRY_AUTH_FAILURE_LIMIT: ['authFailureLimit', count(20)],
  FERRY_AUTH_FAILURE_WINDOW_SECONDS: ['authFailureWindowSeconds', count(60)],
  FERRY_AUTH_FAILURE_MAX_ADDRESSES: ['authFailureMaxAddresses', count(10_000)],
  FERRY_DEMO_TEMPLATE: ['demoTemplate', bool.optional()],
  // Template proposals (docs/operations.md, "Template proposals"): the review window (PROPOSED ->
  // EXPIRED), the challenge window after approval (APPROVED -> FINALIZED), and their two sweeps.
  // Windows under 60 s are refused unless FERRY_TEMPLATE_SHORT_WINDOWS=true (development only).
  // Credential proposals (docs/security.md, "Credentials under four-eyes"): how long a proposed
  // principal or token waits for a second admin's confirmation before it can only expire.
  // Queued movement orders (docs/operations.md, "Movement queue"): how long after it was signed an
  // order may be placed on the queue; older (or more than a minute ahead) is dead-lettered.
  FERRY_QUEUE_ORDER_MAX_AGE_SECONDS: ['queueOrderMaxAgeSeconds', z.coerce.number().int().min(10).max(86_400).default(300)],
  FERRY_CREDENTIAL_REVIEW_WINDOW_SECONDS: ['credentialReviewWindowSeconds', z.coerce.number().int().min(60).max(30 * 24 * 3600).default(24 * 3600)],
  // Treasury policy (docs/policy.md): how long a proposed change of the address book or the rule set
  // waits for a second principal's approval, and the cool-down after it (anyone may challenge it then).
  FERRY_POLICY_REVIEW_WINDOW_SECONDS: ['policyReviewWindowSeconds', z.coerce.number().int().min(60).max(30 * 24 * 3600).default(7 * 24 * 3600)],
  FERRY_POLICY_COOLDOWN_SECONDS: ['policyCooldownSeconds', z.coerce.number().int().min(0).max(30 * 24 * 3600).default(24 * 3600)],
  FERRY_TEMPLATE_REVIEW_WINDOW_SECONDS: ['templateReviewWindowSeconds', z.coerce.number().int().min(0).default(7 * 24 * 3600)],
  FERRY_TEMPLATE_CHALLENGE_WINDOW_SECONDS: ['templateChallengeWindowSeconds', z.coerce.number().int().min(0).default(3600)],
  FERRY_TEMPLATE_SHORT_WINDOWS: ['templateShortWindows', bool.default(false)],
  FERRY_TEMPLATE_PROPOSAL_EXPIRATION_ENABLED: ['proposalExpirationEnabled', bool.default(true)],
  FERRY_TEMPLATE_PROPOSAL_EXPIRATION_INTERVAL_SECONDS: ['proposalExpirationIntervalSeconds', seconds(30)],
  FERRY_TEMPLATE_PROPOSAL_EXPIRATION_BATCH_SIZE: ['proposalExpirationBatchSize', count(50)],
  FERRY_TEMPLATE_PROPOSAL_EXPIRATION_MAX_RUN_MS: ['proposalExpirationMaxRunMs', z.coerce.number().int().min(0).default(20_000)],
  FERRY_TEMPLATE_FINALIZATION_ENABLED: ['proposalFinalizationEnabled', bool.default(true)],
  FERRY_TEMPLATE_FINALIZATION_INTERVAL_SECONDS: ['proposalFinalizationIntervalSeconds', seconds(30)],
  FERRY_TEMPLATE_FINALIZATION_BATCH_SIZE: ['proposalFinalizationBatchSize', count(50)],
  FERRY_TEMPLATE_FINALIZATION_MAX_RUN_MS: ['proposalFinalizationMaxRunMs', z.coerce.number().int().min(0).default(20_000)],
  // Run budget of the stranded-callback sweep (its batch size is FERRY_CALLBACK_STRANDED_SWEEP_BATCH_SIZE).
  FERRY_CALLBACK_STRANDED_SWEEP_MAX_RUN_MS: ['callbackStrandedSweepMaxRunMs', z.coerce.number().int().min(0).default(20_000)],
  // YAML file with what environment variables cannot say well (chains, signers, tokens): src/config-file.ts.
  FERRY_CONFIG_FILE: ['configFile', z.string().min(1).optional()],

  // Connection budget (docs/scaling.md): how many processes share the database and how much of
  // max_connections Ferry leaves to others.
  FERRY_DATABASE_DIRECT_URL: ['databaseDirectUrl', z.string().url().optional()],
  FERRY_API_PROCESSES: ['apiProcesses', z.coerce.number().int().min(0).max(64).default(1)],
  FERRY_SIM_POOL_MAX: ['simPoolMax', count(4)],
  FERRY_DB_CONNECTION_RESERVE: ['dbConnectionReserve', z.coerce.number().int().min(0).default(5)],
  FERRY_CONNECTION_BUDGET_ENABLED: ['connectionBudgetEnabled', bool.default(true)],

  // Database roles and pools (docs/security.md "Audit log", docs/scaling.md). DATABASE_URL is the
  // application role; with FERRY_DATABASE_OWNER_URL the migrations run as the owner instead.
  FERRY_DATABASE_OWNER_URL: ['databaseOwnerUrl', z.string().url().optional()],
  // The workers' pool where worker loops run (default FERRY_DB_POOL_MAX); FERRY_DB_POOL_MAX is the API's.
  FERRY_WORKER_POOL_MAX: ['workerPoolMax', z.coerce.number().int().positive().optional()],
  // statement_timeout per pool, in ms; 0 = none. Migrations never have one.
  FERRY_API_STATEMENT_TIMEOUT_MS: ['apiStatementTimeoutMs', z.coerce.number().int().min(0).default(5_000)],
  FERRY_WORKER_STATEMENT_TIMEOUT_MS: ['workerStatementTimeoutMs', z.coerce.number().int().min(0).default(30_000)],
  // Signs exported audit checkpoints (HMAC-SHA256); keep a copy outside the database's reach.
  FERRY_AUDIT_CHECKPOINT_KEY: ['auditCheckpointKey', z.string().min(32).optional()],
  // Event streams (/inspect/movements/{id}/events, docs/security.md): how often an open stream
  // re-checks its token (at most 30 s, so a revoked token's stream ends within that), and how many
  // streams one token may hold open in one process.
  FERRY_STREAM_TOKEN_RECHECK_SECONDS: ['streamTokenRecheckSeconds', z.coerce.number().positive().max(30).default(15)],
  FERRY_STREAM_MAX_PER_TOKEN: ['streamMaxPerToken', z.coerce.number().int().min(1).max(1000).default(4)],
  // Block explorer links of the UI's node cards (docs/visualizer.md): chain -> URL template with {tx}.
  FERRY_EXPLORER_URLS: ['explorerUrls', explorerUrls.default({})],
  // Bearer tokens `ferry executor-host` and `ferry signer-host` require of their callers (docs/operations.md).
  FERRY_EXECUTOR_HOST_TOKEN: ['executorHostToken', z.string().min(16).optional()],
  FERRY_SIGNER_HOST_TOKEN: ['signerHostToken', z.string().min(16).optional()],
  // Requests Ferry signs for those hosts (src/executors/host-requests.ts, docs/security.md): Ferry's
  // Ed25519 private key, the public keys a host pins (comma-separated while a key is rotated), and
  // how far a request's time may lie from the host's clock. `ferry hosts keygen` makes a pair.
  FERRY_HOST_REQUEST_KEY: ['hostRequestKey', z.string().regex(/^fyh_[A-Za-z0-9_-]{43}$/, 'expected fyh_ followed by 43 base64url characters (ferry hosts keygen)').optional()],
  FERRY_HOST_REQUEST_PUBLIC_KEYS: [
    'hostRequestPublicKeys',
    z
      .string()
      .transform((v) => v.split(',').map((s) => s.trim()).filter(Boolean))
      .pipe(z.array(z.string().regex(/^[A-Za-z0-9_-]{43}$/, 'expected public keys of 43 base64url characters, comma-separated (ferry hosts keygen)')).min(1))
      .optional(),
  ],
  FERRY_HOST_REQUEST_MAX_AGE_SECONDS: ['hostRequestMaxAgeSeconds', z.coerce.number().int().min(1).max(600).default(60)],

  // --- Operator notifications (notification_dispatcher; see the block above the table).
  FERRY_NOTIFY_ENABLED: ['notifyEnabled', bool.default(false)],
  FERRY_NOTIFY_INTERVAL_SECONDS: ['notifyIntervalSeconds', seconds(5)],
  FERRY_NOTIFY_BATCH_SIZE: ['notifyBatchSize', count(100)],
  FERRY_NOTIFY_MAX_RUN_MS: ['notifyMaxRunMs', z.coerce.number().int().min(0).default(20_000)],
  FERRY_NOTIFY_CHANNELS: ['notifyChannels', notifyChannels.default([])],

  // --- Capital transfer follow-up (capital_transfer_followup).
  FERRY_CAPITAL_TRANSFER_FOLLOWUP_ENABLED: ['followupEnabled', bool.default(false)],
  FERRY_CAPITAL_TRANSFER_FOLLOWUP_INTERVAL_SECONDS: ['followupIntervalSeconds', seconds(60)],
  FERRY_CAPITAL_TRANSFER_FOLLOWUP_BATCH_SIZE: ['followupBatchSize', count(100)],
  FERRY_CAPITAL_TRANSFER_FOLLOWUP_AFTER_SECONDS: ['followupAfterSeconds', z.coerce.number().int().positive().default(3600)],
  FERRY_CAPITAL_TRANSFER_FOLLOWUP_AFTER_SECONDS_BY_TEMPLATE: ['followupAfterByTemplate', templateSeconds.default({})],

  // --- Standing orders (docs/policy.md, "Standing orders"): the sweep that runs them, and the
  // time zone their schedules are read in unless an order names its own.
  FERRY_STANDING_ORDERS_ENABLED: ['standingOrdersEnabled', bool.default(true)],
  FERRY_STANDING_ORDERS_INTERVAL_SECONDS: ['standingOrdersIntervalSeconds', seconds(60)],
  FERRY_STANDING_ORDERS_BATCH_SIZE: ['standingOrdersBatchSize', count(100)],
  // The sweep that makes reviewed policy changes live once their cool-down ends (and expires those
  // left unreviewed), so a change does not wait for the next policy read.
  FERRY_POLICY_PROPOSALS_ENABLED: ['policyProposalsEnabled', bool.default(true)],
  FERRY_POLICY_PROPOSALS_INTERVAL_SECONDS: ['policyProposalsIntervalSeconds', seconds(60)],
  FERRY_POLICY_PROPOSALS_BATCH_SIZE: ['policyProposalsBatchSize', count(50)],
  FERRY_OPERATOR_TIME_ZONE: [
    'operatorTimeZone',
    z
      .string()
      .refine((tz) => {
        try {
          new Intl.DateTimeFormat('en', { timeZone: tz });
          return true;
        } catch {
          return false;
        }
      }, 'must be an IANA time zone such as "UTC" or "Europe/Paris"')
      .default('UTC'),
  ],

  // --- Fresh balances and balance history (src/balances/fresh.ts, src/balances/rollup.ts; docs/operations.md "Balances").
  // GET /v3/balances?fresh=true: how many balances are fetched at once and how long one may take.
  FERRY_BALANCE_FRESH_CONCURRENCY: ['balanceFreshConcurrency', z.coerce.number().int().min(1).max(64).default(4)],
  FERRY_BALANCE_FRESH_TIMEOUT_MS: ['balanceFreshTimeoutMs', z.coerce.number().int().min(50).max(120_000).default(5_000)],
  // The balance_history_rollup sidecar: hourly and daily min/max/last of the snapshots, kept this long.
  FERRY_BALANCE_HISTORY_ENABLED: ['balanceHistoryEnabled', bool.default(true)],
  FERRY_BALANCE_HISTORY_INTERVAL_SECONDS: ['balanceHistoryIntervalSeconds', seconds(300)],
  FERRY_BALANCE_HISTORY_BATCH_SIZE: ['balanceHistoryBatchSize', count(5_000)],
  FERRY_BALANCE_HISTORY_MAX_RUN_MS: ['balanceHistoryMaxRunMs', z.coerce.number().int().min(0).default(20_000)],
  FERRY_BALANCE_HISTORY_HOURLY_RETENTION_DAYS: ['balanceHistoryHourlyRetentionDays', count(30)],
  FERRY_BALANCE_HISTORY_DAILY_RETENTION_DAYS: ['balanceHistoryDailyRetentionDays', count(400)],
  // --- Exchange transfers no movement made (src/sweeps/cex-transfer-ingest.ts; docs/operations.md "Exchange transfers").
  // The CEX account keys (cex.accounts[].key) whose deposit and withdrawal history is read; empty: off.
  FERRY_CEX_TRANSFER_INGEST_VENUES: ['cexTransferIngestVenues', z.string().transform((v) => v.split(',').map((s) => s.trim()).filter(Boolean)).default([])],
  // A switch beside the list (the sweep table names one per sweep); the sidecar runs only with venues listed.
  FERRY_CEX_TRANSFER_INGEST_ENABLED: ['cexTransferIngestEnabled', bool.default(true)],
  FERRY_CEX_TRANSFER_INGEST_INTERVAL_SECONDS: ['cexTransferIngestIntervalSeconds', seconds(300)],
  FERRY_CEX_TRANSFER_INGEST_LOOKBACK_SECONDS: ['cexTransferIngestLookbackSeconds', z.coerce.number().int().min(60).max(90 * 86_400).default(86_400)],
  // --- Registry drift (src/sweeps/verify-drift.ts; docs/operations.md "Registry drift"): the lanes'
  // on-chain baselines read every 6 hours, at most this many calls at once per chain, each lane's
  // reads on a chain given this long before what is left counts as unverified.
  FERRY_VERIFY_DRIFT_ENABLED: ['verifyDriftEnabled', bool.default(true)],
  FERRY_VERIFY_DRIFT_INTERVAL_SECONDS: ['verifyDriftIntervalSeconds', seconds(21_600)],
  FERRY_VERIFY_DRIFT_RPC_CONCURRENCY: ['verifyDriftRpcConcurrency', z.coerce.number().int().min(1).max(32).default(4)],
  FERRY_VERIFY_DRIFT_LANE_TIMEOUT_MS: ['verifyDriftLaneTimeoutMs', z.coerce.number().int().min(50).max(300_000).default(15_000)],
} as const;

type UnionToIntersection<U> = (U extends unknown ? (k: U) => void : never) extends (k: infer I) => void ? I : never;
/** The variables of every lane of the list. */
type LaneFields = UnionToIntersection<(typeof lanes)[number]['env']>;
type Fields = typeof coreFields & LaneFields;

function fieldsOf(list: LaneList): Record<string, ConfigField> {
  const out: Record<string, ConfigField> = { ...coreFields };
  for (const lane of list) {
    for (const [name, field] of Object.entries(lane.env)) {
      if (name in out) throw new Error(`lane ${lane.name}: variable ${name} is already Ferry's or another lane's`);
      out[name] = field;
    }
  }
  return out;
}

const fields = fieldsOf(lanes) as unknown as Fields;
export type FerryConfig = {
  [K in keyof Fields as Fields[K][0]]: z.output<Fields[K][1]>;
} & {
  /** The validated contents of FERRY_CONFIG_FILE (empty lists when it is unset). */
  file: ConfigFile;
};

/** A variable Ferry reads; with T, only those whose value is a T. */
export type ConfigVariable<T = unknown> = { [V in keyof Fields]: z.output<Fields[V][1]> extends T ? V : never }[keyof Fields];

/** The value a variable gave this configuration (its config key's). */
export function configValue<V extends keyof Fields>(config: FerryConfig, variable: V): z.output<Fields[V][1]> {
  return (config as unknown as Record<string, unknown>)[fields[variable][0]] as z.output<Fields[V][1]>;
}

/** Variables whose values must never appear in messages or logs. */
const SECRET_VARIABLES = new Set(['DATABASE_URL', 'FERRY_DATABASE_DIRECT_URL', 'FERRY_CALLBACK_SECRET']);
// Role separation and audit checkpoints (docs/security.md).
for (const name of ['FERRY_DATABASE_OWNER_URL', 'FERRY_AUDIT_CHECKPOINT_KEY']) SECRET_VARIABLES.add(name);
// Tokens the executor and signer hosts require of their callers (docs/operations.md).
for (const name of ['FERRY_EXECUTOR_HOST_TOKEN', 'FERRY_SIGNER_HOST_TOKEN', 'FERRY_HOST_REQUEST_KEY']) SECRET_VARIABLES.add(name);
// The lanes' own secrets.
for (const lane of lanes) for (const name of lane.secretVariables ?? []) SECRET_VARIABLES.add(name);
// Operator notification channels hold signing secrets and webhook URLs that are credentials (Slack).
SECRET_VARIABLES.add('FERRY_NOTIFY_CHANNELS');

/**
 * Builds the config from an environment; a bad value throws a ConfigError naming the variable.
 * `list`: the lanes whose variables and file sections are read (default: every lane); a lane not
 * listed has none, and a file section of it is refused like any unknown entry.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, list: LaneList = lanes): FerryConfig {
  const out: Record<string, unknown> = {};
  for (const [name, [key, schema]] of Object.entries(list === lanes ? (fields as unknown as Record<string, ConfigField>) : fieldsOf(list))) {
    const raw = env[name];
    const value = raw === undefined || raw === '' ? undefined : raw;
    const parsed = (schema as z.ZodType).safeParse(value);
    if (!parsed.success) {
      const reason = parsed.error.issues.map((i) => i.message).join('; ');
      // A malformed secret may still be most of a real one: never echo it.
      const shown = SECRET_VARIABLES.has(name) ? '(value hidden)' : `(${JSON.stringify(raw)})`;
      throw new ConfigError(name, `${shown}: ${reason}`);
    }
    out[key] = parsed.data;
  }
  for (const name of ['FERRY_TEMPLATE_REVIEW_WINDOW_SECONDS', 'FERRY_TEMPLATE_CHALLENGE_WINDOW_SECONDS'] as const) {
    const value = out[coreFields[name][0]] as number;
    if (value < 60 && !out.templateShortWindows) {
      throw new ConfigError(name, `(${value}): windows under 60 seconds need FERRY_TEMPLATE_SHORT_WINDOWS=true (development only)`);
    }
  }
  for (const lane of list) lane.checkConfig?.(out);
  if (out.configFile) {
    const read = readConfigFile(out.configFile as string, list === lanes ? undefined : configFileSchema(list));
    if (!read.ok) throw new ConfigError('FERRY_CONFIG_FILE', read.reason);
    out.file = read.file;
  } else {
    out.file = list === lanes ? EMPTY_CONFIG_FILE : configFileSchema(list).parse({});
  }
  return out as FerryConfig;
}

/** The variables of these lanes (each lane's own, for docs and tests). */
export function laneVariables(list: LaneList = lanes): string[] {
  return list.flatMap((l) => Object.keys(l.env));
}

/**
 * The log level for the logger created when src/log.ts is first imported, before any start-up code
 * has run: FERRY_LOG_LEVEL when it is valid, else the default. A bad value is not an error here;
 * loadConfig() refuses it at start with a ConfigError naming the variable.
 */
export function earlyLogLevel(env: NodeJS.ProcessEnv = process.env): LogLevel {
  const parsed = coreFields.FERRY_LOG_LEVEL[1].safeParse(env.FERRY_LOG_LEVEL || undefined);
  return parsed.success ? parsed.data : 'info';
}

/** The variables Ferry reads, for the README table and `ferry config`. */
export const configVariables = Object.keys(fields as unknown as Record<string, ConfigField>);
