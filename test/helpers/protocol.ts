/** Executor protocol values for tests of executors, proxies and hosts, without a database. */
import { payloadHash } from '../../src/executors/payload-hash.ts';
import type { ExecutionContext, PreparedAction } from '../../src/executors/protocol.ts';

/** The context the runtime sends for attempt 1 of node-1 of req-1, bound to `executorKey`; `over` changes any field. */
export function executionContext(executorKey: string, over: Partial<ExecutionContext> = {}): ExecutionContext {
  return {
    protocol_version: '1.0',
    request_id: 'req-1',
    request_node_id: 'node-1',
    compiled_plan_hash: 'sha256:plan',
    template_key: 't',
    template_version: 1,
    node_key: 'a',
    node_kind: 'action',
    action_type: 'x',
    attempt_no: 1,
    intent: {},
    input_params: {},
    resolved_bindings: { executor: { executor_key: executorKey }, signer: null },
    risk_controls: {},
    prior_artifacts: [],
    node_config: {},
    provider_context: {},
    timeout_policy: {},
    idempotency_key: 'node-1:1',
    ...over,
  };
}

/** A prepared action that needs no signature: pa-1, a JSON payload ('{}' unless given) with its hash; `over` changes any field. */
export function preparedAction(over: Partial<PreparedAction> = {}): PreparedAction {
  const payload = over.payload ?? '{}';
  return {
    prepared_action_id: 'pa-1',
    action_type: 'x',
    payload_format: 'json',
    payload,
    payload_hash: payloadHash(payload),
    signing_required: false,
    provider_hints: {},
    expires_at: null,
    ...over,
  };
}
