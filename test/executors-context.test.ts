import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { buildExecutionContext, type ExecutionContextInput } from '../src/executors/context.ts';
import { attemptKey } from '../src/ids.ts';
import { ConfigRefUnresolvedError, ExecutorNotRegisteredError } from '../src/executors/errors.ts';
import { ExecutionContextSchema } from '../src/executors/protocol.ts';

// withdraw (COMPLETED) and quote (COMPLETED) feed deposit_observe; precheck (COMPLETED) is upstream
// of withdraw only; sidecar (SUBMITTED) is a direct predecessor that has not completed.
function input(overrides: Partial<ExecutionContextInput['node']> = {}, extra: Partial<ExecutionContextInput> = {}): ExecutionContextInput {
  return {
    movement: {
      id: 'req-1',
      compiled_plan_hash: 'sha256:plan',
      template_key: 'cex_transfer',
      template_version: 2,
      intent: { asset: 'USDC', amount: '100' },
      input_params: { exchange: 'upbit' },
    },
    node: {
      id: 'node-9',
      node_key: 'deposit_observe',
      node_kind: 'observe',
      action_type: 'cex_deposit_status',
      config: { network: 'ETH', txid: '$ref:withdraw.txid', threshold: 3 },
      timeout_policy: { max_observe_seconds: 600 },
      executor_binding: { executor_key: 'exec.cex.deposit_observe', exchange: 'upbit' },
      signer_binding: null,
      predecessor_keys: ['withdraw', 'quote', 'sidecar'],
      ...overrides,
    },
    attemptNo: 1,
    nodes: [
      { node_key: 'precheck', node_state: 'COMPLETED', provider_refs: { precheck_id: 'p-1', shared: 'from-precheck' } },
      { node_key: 'withdraw', node_state: 'COMPLETED', provider_refs: { exchange_withdrawal_id: 'wd-1', txid: '0xabc', shared: 'from-withdraw' } },
      { node_key: 'quote', node_state: 'COMPLETED', provider_refs: { quote_id: 'q-1', shared: 'from-quote' } },
      { node_key: 'sidecar', node_state: 'SUBMITTED', provider_refs: { sidecar_ref: 's-1' } },
      { node_key: 'deposit_observe', node_state: 'READY', provider_refs: {} },
    ],
    priorArtifacts: [{ artifact_type: 'prepared_action', artifact_digest: 'sha256:pa' }],
    riskControls: { hardcap: '1000' },
    ...extra,
  };
}

describe('buildExecutionContext', () => {
  test('provider_context merges only COMPLETED direct predecessors, in predecessor order', () => {
    const ctx = buildExecutionContext(input());
    assert.deepEqual(ctx.provider_context, {
      exchange_withdrawal_id: 'wd-1',
      txid: '0xabc',
      quote_id: 'q-1',
      shared: 'from-quote',
    });
  });

  test('carries the request, node, bindings and attempt as the protocol says', () => {
    const ctx = buildExecutionContext(input({}, { attemptNo: 3 }));
    assert.equal(ExecutionContextSchema.safeParse(ctx).success, true);
    assert.equal(ctx.protocol_version, '1.0');
    assert.equal(ctx.request_id, 'req-1');
    assert.equal(ctx.request_node_id, 'node-9');
    assert.equal(ctx.template_version, 2);
    assert.equal(ctx.attempt_no, 3);
    assert.equal(ctx.idempotency_key, 'node-9:3');
    assert.equal(attemptKey('node-9', 3), 'node-9:3');
    assert.deepEqual(ctx.resolved_bindings, { executor: { executor_key: 'exec.cex.deposit_observe', exchange: 'upbit' }, signer: null });
    assert.deepEqual(ctx.prior_artifacts, [{ artifact_type: 'prepared_action', artifact_digest: 'sha256:pa' }]);
    assert.deepEqual(ctx.risk_controls, { hardcap: '1000' });
    assert.deepEqual(ctx.timeout_policy, { max_observe_seconds: 600 });
    assert.deepEqual(ctx.intent, { asset: 'USDC', amount: '100' });
  });

  test('string bindings become objects; an explicit idempotency key wins', () => {
    const ctx = buildExecutionContext(input({ executor_binding: 'exec.sim.action', signer_binding: { signer_key: 'kms', region: 'eu' } }, { attemptKey: 'stored-key' }));
    assert.deepEqual(ctx.resolved_bindings, { executor: { executor_key: 'exec.sim.action' }, signer: { signer_key: 'kms', region: 'eu' } });
    assert.equal(ctx.idempotency_key, 'stored-key');
    assert.deepEqual(buildExecutionContext(input({ signer_binding: 'noop' })).resolved_bindings.signer, { signer_key: 'noop' });
  });

  test('top-level $ref resolves against any COMPLETED node; other values are untouched', () => {
    const ctx = buildExecutionContext(
      input({
        config: {
          txid: '$ref:withdraw.txid',
          precheck: '$ref:precheck.precheck_id',
          nested: { txid: '$ref:withdraw.txid' },
          list: ['$ref:withdraw.txid'],
          plain: 'ref:withdraw.txid',
          n: 3,
        },
      }),
    );
    assert.deepEqual(ctx.node_config, {
      txid: '0xabc',
      precheck: 'p-1',
      nested: { txid: '$ref:withdraw.txid' },
      list: ['$ref:withdraw.txid'],
      plain: 'ref:withdraw.txid',
      n: 3,
    });
    // Resolution feeds node_config only: precheck is not a direct predecessor.
    assert.equal('precheck_id' in ctx.provider_context, false);
  });

  test('a node key containing dots resolves to the longest matching node', () => {
    const base = input({ config: { v: '$ref:cex.withdraw.id' } });
    base.nodes = [...base.nodes, { node_key: 'cex.withdraw', node_state: 'COMPLETED', provider_refs: { id: 'dotted' } }];
    assert.equal(buildExecutionContext(base).node_config.v, 'dotted');
  });

  const unresolvable: Array<[string, string]> = [
    ['a node that has not completed', '$ref:sidecar.sidecar_ref'],
    ['a node that does not exist', '$ref:nowhere.id'],
    ['a field the node did not report', '$ref:withdraw.block_number'],
    ['a ref without a field', '$ref:withdraw'],
    ['an empty ref', '$ref:'],
  ];
  for (const [name, ref] of unresolvable) {
    test(`a $ref to ${name} fails with CONFIG_REF_UNRESOLVED naming it`, () => {
      assert.throws(
        () => buildExecutionContext(input({ config: { target: ref } })),
        (err: unknown) => err instanceof ConfigRefUnresolvedError && err.code === 'CONFIG_REF_UNRESOLVED' && err.ref === ref && err.message.includes(ref),
      );
    });
  }

  test('a field reported as null does not resolve', () => {
    const base = input({ config: { t: '$ref:withdraw.memo' } });
    base.nodes = base.nodes.map((n) => (n.node_key === 'withdraw' ? { ...n, provider_refs: { ...n.provider_refs, memo: null } } : n));
    assert.throws(() => buildExecutionContext(base), ConfigRefUnresolvedError);
  });

  test('does not mutate its input', () => {
    const i = input();
    const before = structuredClone(i);
    const ctx = buildExecutionContext(i);
    ctx.intent.asset = 'BTC';
    ctx.node_config.network = 'TRON';
    assert.deepEqual(i, before);
  });

  test('an executor binding without its key is refused with a typed error', () => {
    assert.throws(() => buildExecutionContext(input({ executor_binding: { exchange: 'upbit' } })), ExecutorNotRegisteredError);
  });

  test('attemptNo must be a positive integer', () => {
    assert.throws(() => buildExecutionContext(input({}, { attemptNo: 0 })), RangeError);
  });
});
