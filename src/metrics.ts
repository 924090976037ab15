import client from 'prom-client';

/**
 * Ferry's Prometheus metrics, all under ferry_. One registry per process; /metrics renders it.
 * Gauges that reflect the database (nodes by state) are filled at scrape time by the HTTP layer.
 */
export const registry = new client.Registry();
client.collectDefaultMetrics({ register: registry, prefix: 'ferry_process_' });

export const transitionsTotal = new client.Counter({
  name: 'ferry_transitions_total',
  help: 'Accepted machine transitions, by machine, source state and target state.',
  labelNames: ['machine', 'from', 'to'] as const,
  registers: [registry],
});

export const claimsTotal = new client.Counter({
  name: 'ferry_claims_total',
  help: 'Claim attempts by worker and result (hit: claimed; miss: locked elsewhere or moved on).',
  labelNames: ['worker', 'result'] as const,
  registers: [registry],
});

export const deferralsTotal = new client.Counter({
  name: 'ferry_infra_deferrals_total',
  help: "Nodes deferred because Ferry's own database failed (not the provider), by worker and cause.",
  labelNames: ['worker', 'cause'] as const,
  registers: [registry],
});

export const workerRunsTotal = new client.Counter({
  name: 'ferry_worker_runs_total',
  help: 'Worker loop runs by worker and outcome.',
  labelNames: ['worker', 'outcome'] as const,
  registers: [registry],
});

export const workerRunSeconds = new client.Histogram({
  name: 'ferry_worker_run_seconds',
  help: 'Duration of one worker loop run.',
  labelNames: ['worker'] as const,
  buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  registers: [registry],
});

export const sweepBudgetExhaustedTotal = new client.Counter({
  name: 'ferry_sweep_budget_exhausted_total',
  help: 'Sweep runs that stopped at their run budget (batch or time) with work left for the next run.',
  labelNames: ['worker'] as const,
  registers: [registry],
});

export const workerItemsTotal = new client.Counter({
  name: 'ferry_worker_items_total',
  help: 'Items (nodes, requests, rows) handled by worker runs.',
  labelNames: ['worker'] as const,
  registers: [registry],
});

export const commitSeconds = new client.Histogram({
  name: 'ferry_commit_seconds',
  help: 'Latency of COMMIT for transactions that changed state.',
  buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
  registers: [registry],
});

export const approvalExpiryTotal = new client.Counter({
  name: 'ferry_approval_expiry_total',
  help: 'Approval expiry sweep results: expired, or skipped (approved or locked first).',
  labelNames: ['result'] as const,
  registers: [registry],
});

export const callbackDeliveriesTotal = new client.Counter({
  name: 'ferry_callback_deliveries_total',
  help: 'Callback delivery attempts by outcome (sent, retry, dlq, skipped).',
  labelNames: ['outcome'] as const,
  registers: [registry],
});

export const movementQueueMessagesTotal = new client.Counter({
  name: 'ferry_movement_queue_messages_total',
  help: 'Movement requests taken from the queue by outcome (created, replayed, dead_lettered, retried).',
  labelNames: ['outcome'] as const,
  registers: [registry],
});

export const nodesByState = new client.Gauge({
  name: 'ferry_nodes',
  help: 'Request nodes by state (read from the database at scrape time).',
  labelNames: ['state'] as const,
  registers: [registry],
});

export const movementsByState = new client.Gauge({
  name: 'ferry_requests',
  help: 'Movement requests by state (read from the database at scrape time).',
  labelNames: ['state'] as const,
  registers: [registry],
});

export const reconciliationTotal = new client.Counter({
  name: 'ferry_reconciliation_total',
  help: 'Movements replayed through their machines, by result (consistent, drift).',
  labelNames: ['result'] as const,
  registers: [registry],
});

// Reconciliation with provider evidence (src/actors/provider-reconciliation.ts).
export const providerReconciledTotal = new client.Counter({
  name: 'ferry_reconciliation_provider_checks_total',
  help: "Settled nodes whose provider was asked about their attempt, by result (consistent, drift, no_answer).",
  labelNames: ['result'] as const,
  registers: [registry],
});

export const reconciliationDriftTotal = new client.Counter({
  name: 'ferry_reconciliation_drift_detected_total',
  help: "Nodes whose stored state the provider's answer contradicts, by drift class.",
  labelNames: ['class'] as const,
  registers: [registry],
});

export const reconciliationRepairedTotal = new client.Counter({
  name: 'ferry_reconciliation_repaired_total',
  help: 'Drifts repaired through the node machine (FERRY_RECONCILIATION_AUTO_REPAIR), by drift class.',
  labelNames: ['class'] as const,
  registers: [registry],
});

export const balanceSnapshotsTotal = new client.Counter({
  name: 'ferry_balance_snapshots_total',
  help: 'Balance snapshots recorded, by chain.',
  labelNames: ['chain'] as const,
  registers: [registry],
});

export const balanceFetchErrorsTotal = new client.Counter({
  name: 'ferry_balance_fetch_errors_total',
  help: 'Balance fetches that failed, by chain and error class.',
  labelNames: ['chain', 'code'] as const,
  registers: [registry],
});

export const balanceSweepBudgetExhaustedTotal = new client.Counter({
  name: 'ferry_balance_sweep_budget_exhausted_total',
  help: 'Balance snapshot runs that stopped at their time budget (the next run continues).',
  registers: [registry],
});

export const evmNonceReaperTotal = new client.Counter({
  name: 'ferry_evm_nonce_reaper_total',
  help: 'What the EVM nonce reaper did with stuck nonces, by action (settled, rebroadcast, filled, released, pending, skipped).',
  labelNames: ['action'] as const,
  registers: [registry],
});

export const evmReplacementsTotal = new client.Counter({
  name: 'ferry_evm_replacements_total',
  help: 'Fee-bumped versions of submitted transactions, by result (sent, not_sent, stale, signing_failed).',
  labelNames: ['result'] as const,
  registers: [registry],
});

// --- Template proposals and sweep budgets (docs/operations.md) ------------------------------------

export const templateProposalSweepTotal = new client.Counter({
  name: 'ferry_template_proposal_sweep_total',
  help: 'Template proposals handled by the expiration and finalization sweeps, by sweep and result (expired, finalized, skipped).',
  labelNames: ['sweep', 'result'] as const,
  registers: [registry],
});

export const callbackStrandedRequeuedTotal = new client.Counter({
  name: 'ferry_callback_stranded_requeued_total',
  help: 'Overdue pending callbacks whose delivery job the stranded-callback sweep wrote again.',
  registers: [registry],
});
