import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, test } from 'node:test';
import { FatalMovementError } from '../src/executors/errors.ts';
import { payloadHash } from '../src/executors/payload-hash.ts';
import {
  ChainFinalityProbeResultSchema,
  ChainReceiveProbeResultSchema,
  ExecutionContextSchema,
  ExecutionResultSchema,
  parseExecutionResult,
  PreparedActionSchema,
  ProtocolProbeResultSchema,
  SignRequestSchema,
  SignResultSchema,
} from '../src/executors/protocol.ts';

// JSON as a reference (pydantic) peer writes it: every field present, nulls explicit.
const seedResult = {
  next_state: 'SUBMITTED',
  provider_state: 'PROCESSING',
  provider_refs: { exchange_withdrawal_id: 'wd-123', txid: '0xabc' },
  proof: { block_number: 19000000, confirmations: 3 },
  error_code: null,
  error_detail: null,
  retry_after_seconds: 15,
  manual_intervention_required: false,
  artifacts: [{ artifact_type: 'prepared_action', artifact_digest: 'sha256:' + 'a'.repeat(64) }],
  generated_artifacts: [
    {
      artifact_type: 'attestation',
      content_format: 'hex',
      content_inline: '0xdeadbeef',
      content_uri: null,
      artifact_metadata: { source: 'iris' },
      artifact_digest: null,
    },
  ],
  prepared_action: {
    prepared_action_id: '6f1c1c1e-0000-4000-8000-000000000001',
    action_type: 'cex_withdrawal',
    payload_format: 'json',
    payload: '{"amount":"10"}',
    payload_hash: payloadHash('{"amount":"10"}'),
    signing_required: false,
    provider_hints: { chain_id: 1 },
    expires_at: '2026-01-01T00:00:00+00:00',
  },
};

const seedContext = {
  protocol_version: '1.0',
  request_id: '0b0f0b0f-0000-4000-8000-000000000001',
  request_node_id: '0b0f0b0f-0000-4000-8000-000000000002',
  compiled_plan_hash: 'sha256:' + 'b'.repeat(64),
  template_key: 'cex_transfer',
  template_version: 3,
  node_key: 'deposit_observe',
  node_kind: 'observe',
  action_type: 'cex_deposit_status',
  attempt_no: 1,
  intent: { asset: 'USDC', amount: '1000', destination: { address: '0x' + '1'.repeat(40) } },
  input_params: { exchange: 'upbit', network: 'ETH' },
  resolved_bindings: { executor: { executor_key: 'exec.cex.deposit_observe', exchange: 'upbit' }, signer: null },
  risk_controls: { hardcap: '5000' },
  prior_artifacts: [{ artifact_type: 'prepared_action', artifact_digest: 'sha256:' + 'c'.repeat(64) }],
  node_config: { poll: true },
  provider_context: { exchange_withdrawal_id: 'wd-123' },
  timeout_policy: { max_observe_seconds: 3600 },
};

describe('ExecutionResult', () => {
  test('a minimal result takes the protocol defaults', () => {
    const r = ExecutionResultSchema.parse({ next_state: 'COMPLETED' });
    assert.deepEqual(r, {
      next_state: 'COMPLETED',
      provider_state: null,
      provider_refs: {},
      proof: {},
      error_code: null,
      error_detail: null,
      retry_after_seconds: null,
      manual_intervention_required: false,
      artifacts: [],
      generated_artifacts: [],
      prepared_action: null,
    });
  });

  test('seed-shaped JSON round-trips unchanged', () => {
    const parsed = ExecutionResultSchema.parse(seedResult);
    assert.deepEqual(parsed, seedResult);
    assert.deepEqual(ExecutionResultSchema.parse(JSON.parse(JSON.stringify(parsed))), parsed);
  });

  test('unknown fields from a newer peer are dropped, at every level', () => {
    const r = ExecutionResultSchema.parse({
      ...seedResult,
      vendor_extension: { x: 1 },
      prepared_action: { ...seedResult.prepared_action, gas_oracle: 'fast' },
      artifacts: [{ ...seedResult.artifacts[0], size: 10 }],
    });
    assert.equal('vendor_extension' in r, false);
    assert.equal('gas_oracle' in (r.prepared_action as object), false);
    assert.equal('size' in r.artifacts[0], false);
  });

  const wrong: Array<[string, Record<string, unknown>]> = [
    ['retry_after_seconds as a string', { retry_after_seconds: '15' }],
    ['retry_after_seconds negative', { retry_after_seconds: -1 }],
    ['retry_after_seconds fractional', { retry_after_seconds: 1.5 }],
    ['an unknown next_state', { next_state: 'DONE' }],
    ['provider_refs as an array', { provider_refs: ['x'] }],
    ['manual_intervention_required as a string', { manual_intervention_required: 'false' }],
    ['a prepared action without payload_hash', { prepared_action: { ...seedResult.prepared_action, payload_hash: undefined } }],
    ['signing_required as a string', { prepared_action: { ...seedResult.prepared_action, signing_required: 'true' } }],
    ['expires_at that is not a datetime', { prepared_action: { ...seedResult.prepared_action, expires_at: 'tomorrow' } }],
    ['an artifact without digest', { artifacts: [{ artifact_type: 'proof' }] }],
  ];
  for (const [name, patch] of wrong) {
    test(`rejects ${name}`, () => {
      assert.equal(ExecutionResultSchema.safeParse({ ...seedResult, ...patch }).success, false);
    });
  }

  test('a missing next_state is rejected', () => {
    assert.equal(ExecutionResultSchema.safeParse({ provider_refs: {} }).success, false);
  });

  test('parseExecutionResult names the bad field in a fatal error', () => {
    assert.throws(
      () => parseExecutionResult({ next_state: 'COMPLETED', retry_after_seconds: 'soon' }, 'executor x observe()'),
      (err: unknown) =>
        err instanceof FatalMovementError &&
        err.code === 'EXECUTOR_INVALID_RESULT' &&
        err.message.includes('retry_after_seconds') &&
        err.message.includes('executor x observe()'),
    );
  });

  test('naive and offset datetimes are both accepted for expires_at', () => {
    for (const expires_at of ['2026-01-01T00:00:00', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00.123+09:00']) {
      assert.equal(PreparedActionSchema.safeParse({ ...seedResult.prepared_action, expires_at }).success, true, expires_at);
    }
  });
});

describe('ExecutionContext', () => {
  test('seed-shaped JSON (no idempotency_key) parses and round-trips', () => {
    const ctx = ExecutionContextSchema.parse(seedContext);
    assert.equal(ctx.idempotency_key, undefined);
    assert.deepEqual(ctx, seedContext);
  });

  test("Ferry's idempotency_key is kept, binding extras are kept, unknown fields dropped", () => {
    const ctx = ExecutionContextSchema.parse({ ...seedContext, idempotency_key: 'n1:1', trace_id: 't' });
    assert.equal(ctx.idempotency_key, 'n1:1');
    assert.equal(ctx.resolved_bindings.executor.exchange, 'upbit');
    assert.equal('trace_id' in ctx, false);
  });

  test('wrong types are rejected', () => {
    for (const patch of [
      { attempt_no: '1' },
      { attempt_no: 0 },
      { template_version: 1.5 },
      { intent: 'USDC' },
      { resolved_bindings: { executor: {}, signer: null } },
      { prior_artifacts: {} },
    ]) {
      assert.equal(ExecutionContextSchema.safeParse({ ...seedContext, ...patch }).success, false, JSON.stringify(patch));
    }
  });
});

describe('signing and probes', () => {
  const signRequest = {
    protocol_version: '1.0',
    request_id: 'r',
    request_node_id: 'n',
    signing_intent: {
      action: 'exec.cctp.burn',
      asset: 'USDC',
      amount: '10',
      destination: '0x' + '2'.repeat(40),
      max_fee_usd: null,
      chain_family: 'evm',
      allowed_payload_hash: 'sha256:00',
    },
    payload_format: 'evm_raw_tx',
    payload: '0x02',
    payload_hash: 'sha256:00',
    metadata: { chain_id: 1 },
  };

  test('SignRequest and SignResult round-trip', () => {
    assert.deepEqual(SignRequestSchema.parse(signRequest), signRequest);
    const result = { signature: '0xabc', signature_format: 'evm_signed_tx', signer_ref: 'local_evm:0x1' };
    assert.deepEqual(SignResultSchema.parse({ ...result, extra: true }), result);
  });

  test('SignRequest and SignResult reject wrong types', () => {
    assert.equal(SignRequestSchema.safeParse({ ...signRequest, payload: null }).success, false);
    assert.equal(SignRequestSchema.safeParse({ ...signRequest, signing_intent: { ...signRequest.signing_intent, amount: 10 } }).success, false);
    assert.equal(SignResultSchema.safeParse({ signature: 1, signature_format: 'x', signer_ref: 'y' }).success, false);
  });

  test('probe results take defaults and check types', () => {
    assert.deepEqual(ChainReceiveProbeResultSchema.parse({ matched: true }), {
      matched: true,
      provider_state: null,
      provider_refs: {},
      proof: {},
      retry_after_seconds: null,
    });
    assert.equal(ChainFinalityProbeResultSchema.parse({ finalized: false, confirmations: 3 }).confirmations, 3);
    assert.equal(ChainFinalityProbeResultSchema.safeParse({ finalized: false, confirmations: -1 }).success, false);
    assert.deepEqual(ProtocolProbeResultSchema.parse({ completed: true }).generated_artifacts, []);
    assert.equal(ProtocolProbeResultSchema.safeParse({ completed: 'yes' }).success, false);
  });
});

test('payloadHash is sha256 of the UTF-8 bytes, prefixed', () => {
  assert.equal(payloadHash('abc'), 'sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  // "é" is two bytes in UTF-8 (c3 a9); a latin1 encoding would hash one byte.
  assert.equal(payloadHash('é'), 'sha256:' + createHash('sha256').update(Buffer.from([0xc3, 0xa9])).digest('hex'));
  assert.notEqual(payloadHash('é'), 'sha256:' + createHash('sha256').update(Buffer.from([0xe9])).digest('hex'));
});
