import client from 'prom-client';

/**
 * Ferry's Prometheus metrics, under ferry_, beside the standard process_* and nodejs_* metrics of
 * prom-client (unprefixed, so stock Node.js dashboards and alerts find them). One registry per
 * process; /metrics renders it, and `promtool check metrics` accepts it (test/metrics-endpoint.test.ts).
 * Gauges that reflect the database (nodes by state) are filled at scrape time by the HTTP layer.
 */
export const registry = new client.Registry();
client.collectDefaultMetrics({ register: registry });

/**
 * prom-client's gauges with a counter's suffix, which promtool refuses ("non-counter metrics should
 * not have _total suffix"). Each repeats a standard gauge that is kept: it is the sum over `type` of
 * nodejs_active_handles, nodejs_active_requests or nodejs_active_resources.
 */
export const DROPPED_DEFAULT_METRICS = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'] as const;
for (const name of DROPPED_DEFAULT_METRICS) registry.removeSingleMetric(name);

/** A counter on Ferry's registry (every metric is on it: /metrics renders only that one). */
function counter<L extends string = never>(name: string, help: string, labelNames: readonly L[] = []): client.Counter<L> {
  return new client.Counter<L>({ name, help, labelNames, registers: [registry] });
}

/** A gauge on Ferry's registry. */
function gauge<L extends string = never>(name: string, help: string, labelNames: readonly L[] = []): client.Gauge<L> {
  return new client.Gauge<L>({ name, help, labelNames, registers: [registry] });
}

export const transitionsTotal = counter(
  'ferry_transitions_total',
  'Accepted machine transitions, by machine, source state and target state.',
  ['machine', 'from', 'to'],
);

export const claimsTotal = counter(
  'ferry_claims_total',
  'Claim attempts by worker and result (hit: claimed; miss: locked elsewhere or moved on).',
  ['worker', 'result'],
);

export const deferralsTotal = counter(
  'ferry_infra_deferrals_total',
  "Nodes deferred because Ferry's own database failed (not the provider), by worker and cause.",
  ['worker', 'cause'],
);

export const fencedRetriesTotal = counter(
  'ferry_fenced_write_retries_total',
  'Batched writes over held rows refused by the write fence (the movement was written since) and delivered again over rows read under the lock, by worker.',
  ['worker'],
);

export const leasedTotal = counter('ferry_movement_leases_total', 'Movements leased by this process (its lease holder).', []);

export const movementDurationSeconds = new client.Histogram({
  name: 'ferry_movement_duration_seconds',
  help: 'Time from a movement\'s creation to the state that ended it (COMPLETED, FAILED, CANCELLED, REJECTED, EXPIRED), by template and that state.',
  labelNames: ['template', 'state'],
  buckets: [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 14_400, 86_400],
  registers: [registry],
});

export const workerRunsTotal = counter('ferry_worker_runs_total', 'Worker loop runs by worker and outcome.', ['worker', 'outcome']);

export const workerRunSeconds = new client.Histogram({
  name: 'ferry_worker_run_seconds',
  help: 'Duration of one worker loop run.',
  labelNames: ['worker'] as const,
  buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  registers: [registry],
});

export const sweepBudgetExhaustedTotal = counter(
  'ferry_sweep_budget_exhausted_total',
  'Sweep runs that stopped at their run budget (batch or time) with work left for the next run.',
  ['worker'],
);

export const workerItemsTotal = counter('ferry_worker_items_total', 'Items (nodes, movements, rows) handled by worker runs.', ['worker']);

export const commitSeconds = new client.Histogram({
  name: 'ferry_commit_seconds',
  help: 'Latency of COMMIT for transactions that changed state.',
  buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
  registers: [registry],
});

export const approvalExpiryTotal = counter(
  'ferry_approval_expiry_total',
  'Approval expiry sweep results: expired, or skipped (approved or locked first).',
  ['result'],
);

export const callbackDeliveriesTotal = counter(
  'ferry_callback_deliveries_total',
  'Callback delivery attempts by outcome (sent, retry, dlq, skipped).',
  ['outcome'],
);

export const movementQueueMessagesTotal = counter(
  'ferry_movement_queue_messages_total',
  'Movement requests taken from the queue by outcome (created, replayed, dead_lettered, retried).',
  ['outcome'],
);

export const authFailuresTotal = counter(
  'ferry_auth_failures_total',
  'Failed bearer-token authentications on the HTTP API, by result (refused: the credential was checked and failed; throttled: its address was over the limit, nothing was checked).',
  ['result'],
);

export const nodesByState = gauge('ferry_nodes', 'Nodes of movements by state (read from the database at scrape time).', ['state']);

export const movementsByState = gauge('ferry_movements', 'Movements by state (read from the database at scrape time).', ['state']);

export const reconciliationTotal = counter(
  'ferry_reconciliation_total',
  'Movements replayed through their machines, by result (consistent, drift).',
  ['result'],
);

// Reconciliation with provider evidence (src/sweeps/provider-reconciliation.ts).
export const providerReconciledTotal = counter(
  'ferry_reconciliation_provider_checks_total',
  "Settled nodes whose provider was asked about their attempt, by result (consistent, drift, no_answer).",
  ['result'],
);

export const reconciliationDriftTotal = counter(
  'ferry_reconciliation_drift_detected_total',
  "Nodes whose stored state the provider's answer contradicts, by drift class.",
  ['class'],
);

export const reconciliationRepairedTotal = counter(
  'ferry_reconciliation_repaired_total',
  'Drifts repaired through the node machine (FERRY_RECONCILIATION_AUTO_REPAIR), by drift class.',
  ['class'],
);

export const balanceSnapshotsTotal = counter('ferry_balance_snapshots_total', 'Balance snapshots recorded, by chain.', ['chain']);

export const balanceFetchErrorsTotal = counter('ferry_balance_fetch_errors_total', 'Balance fetches that failed, by chain and error class.', ['chain', 'code']);

/** The balance gauges are read from balance_watch at scrape time (src/http/metrics.ts), at most this many series each. */
export const BALANCE_GAUGE_LIMIT = 1000;

export const balanceAmount = gauge(
  'ferry_balance',
  'The latest fetched balance of each watched wallet and asset, in whole units of the asset (read from the database at scrape time; absent until the first successful fetch).',
  ['chain', 'wallet', 'asset', 'symbol'],
);

export const balanceAgeSeconds = gauge(
  'ferry_balance_age_seconds',
  'Seconds since each watched balance was last fetched successfully, by the database clock (read at scrape time).',
  ['chain', 'wallet', 'asset', 'symbol'],
);

export const balanceConsecutiveErrors = gauge(
  'ferry_balance_consecutive_errors',
  'Failed fetches in a row of each watched balance since its last success (read at scrape time).',
  ['chain', 'wallet', 'asset', 'symbol'],
);

export const balanceSweepBudgetExhaustedTotal = counter(
  'ferry_balance_sweep_budget_exhausted_total',
  'Balance snapshot runs that stopped at their time budget (the next run continues).',
);

export const evmNonceReaperTotal = counter(
  'ferry_evm_nonce_reaper_total',
  'What the EVM nonce reaper did with stuck nonces, by action (settled, rebroadcast, filled, released, pending, skipped).',
  ['action'],
);

export const evmReplacementsTotal = counter(
  'ferry_evm_replacements_total',
  'Fee-bumped versions of submitted transactions, by result (sent, not_sent, stale, signing_failed, refused).',
  ['result'],
);

// --- Template proposals and sweep budgets (docs/operations.md) ------------------------------------

export const templateProposalSweepTotal = counter(
  'ferry_template_proposal_sweep_total',
  'Template proposals handled by the expiration and finalization sweeps, by sweep and result (expired, finalized, skipped).',
  ['sweep', 'result'],
);

export const callbackStrandedRequeuedTotal = counter(
  'ferry_callback_stranded_requeued_total',
  'Overdue pending callbacks whose delivery job the stranded-callback sweep wrote again.',
);

// --- Registry drift (src/sweeps/verify-drift.ts; docs/operations.md "Registry drift") ----------

export const registryChecksTotal = counter(
  'ferry_registry_checks_total',
  "On-chain facts of the lanes' configuration read by verify_drift, by lane and outcome (match, drift, unverified).",
  ['lane', 'outcome'],
);

export const registryDriftsOpen = gauge('ferry_registry_drifts_open', 'Open registry drifts by lane (read from the database at scrape time).', ['lane']);

// --- Standing orders and policy proposals (src/services/standing-orders.ts, policy.ts; docs/policy.md) ---

export const standingOrderRunsTotal = counter(
  'ferry_standing_order_runs_total',
  'Runs of standing orders by outcome: approved (by the order), waiting (for people), refused (by the policy), skipped (nothing to move).',
  ['outcome'],
);

export const standingOrdersByState = gauge('ferry_standing_orders', 'Standing orders by state (read from the database at scrape time).', ['state']);

export const policyProposalsSettledTotal = counter(
  'ferry_policy_proposals_settled_total',
  'Policy proposals (address book, rule set) the policy_proposals sweep or a policy read settled: finalized after their cool-down, or expired unreviewed.',
  ['result'],
);
