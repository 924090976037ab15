import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { after, before, beforeEach, describe, test } from 'node:test';
import { FatalMovementError, TemporaryMovementError } from '../src/executors/errors.ts';
import { payloadHash } from '../src/executors/payload-hash.ts';
import type { SignRequest } from '../src/executors/protocol.ts';
import { RemoteExecutorProxy } from '../src/executors/remote-proxy.ts';
import { RemoteSignerProxy } from '../src/executors/signers/remote-proxy.ts';
import { deadUrl, listenOnLoopback, type Listening } from './helpers/net.ts';
import { executionContext, preparedAction } from './helpers/protocol.ts';

/**
 * A loopback peer speaking the reference protocol. Each test sets what an endpoint answers; the
 * server records every request it receives.
 */
type Reply = { status: number; body?: unknown; raw?: string; headers?: Record<string, string> } | 'hang';
interface Seen {
  method: string;
  path: string;
  authorization?: string;
  body: unknown;
}

let listening: Listening;
let baseUrl: string;
let replies: Record<string, Reply> = {};
let seen: Seen[] = [];

before(async () => {
  const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    seen.push({ method: req.method ?? '', path: req.url ?? '', authorization: req.headers.authorization, body: text ? JSON.parse(text) : undefined });
    const reply = replies[`${req.method} ${req.url}`] ?? { status: 404, body: { error: 'no such endpoint' } };
    if (reply === 'hang') return; // never answers; the client's timeout must fire
    res.writeHead(reply.status, { 'content-type': 'application/json', ...reply.headers });
    res.end(reply.raw ?? (reply.body === undefined ? '' : JSON.stringify(reply.body)));
  });
  listening = await listenOnLoopback(server);
  baseUrl = `${listening.url}/v1`;
});

after(() => listening.stop());

beforeEach(() => {
  replies = {};
  seen = [];
});

const ctx = executionContext('exec.remote', { template_key: 'cex_transfer', node_key: 'withdraw', action_type: 'cex_withdrawal', intent: { asset: 'USDC', amount: '5' } });

const prepared = preparedAction({ action_type: 'cex_withdrawal', payload: '{"amount":"5"}' });

const proxy = (opts: Partial<ConstructorParameters<typeof RemoteExecutorProxy>[0]> = {}) =>
  new RemoteExecutorProxy({ executorKey: 'exec.remote', baseUrl, token: 'secret-token', timeoutMs: 2_000, ...opts });

describe('RemoteExecutorProxy', () => {
  test('preflight: 204 means no objection, a body is a refusal', async () => {
    const p = proxy();
    replies['POST /v1/preflight'] = { status: 204 };
    assert.equal(await p.preflight(ctx), null);
    replies['POST /v1/preflight'] = { status: 200, body: { next_state: 'FAILED', error_code: 'ADDRESS_NOT_WHITELISTED' } };
    const refusal = await p.preflight(ctx);
    assert.equal(refusal?.next_state, 'FAILED');
    assert.equal(refusal?.error_code, 'ADDRESS_NOT_WHITELISTED');
    assert.deepEqual(seen[0].body, ctx);
    assert.equal(seen[0].authorization, 'Bearer secret-token');
    await p.close();
  });

  test('prepare, observe, recover, cancel post the context; answers are validated and completed with defaults', async () => {
    const p = proxy();
    replies['POST /v1/prepare'] = { status: 200, body: { next_state: 'SUBMITTING', prepared_action: { ...prepared, vendor: 'x' }, extra: 1 } };
    replies['POST /v1/observe'] = { status: 200, body: { next_state: 'OBSERVING', retry_after_seconds: 30 } };
    replies['POST /v1/recover'] = { status: 200, body: { next_state: 'SUBMITTED', provider_refs: { id: 'w-1' } } };
    replies['POST /v1/cancel'] = { status: 200, body: { next_state: 'CANCELLED' } };
    const prep = await p.prepare(ctx);
    assert.deepEqual(prep.prepared_action, prepared);
    assert.equal('extra' in prep, false);
    assert.equal((await p.observe(ctx)).retry_after_seconds, 30);
    assert.deepEqual((await p.recover(ctx)).provider_refs, { id: 'w-1' });
    assert.equal((await p.cancel(ctx)).next_state, 'CANCELLED');
    assert.deepEqual(seen.map((s) => s.path), ['/v1/prepare', '/v1/observe', '/v1/recover', '/v1/cancel']);
    assert.ok(seen.every((s) => JSON.stringify(s.body) === JSON.stringify(ctx)));
    await p.close();
  });

  test('submit posts {context, prepared_action, sign_result}; sign_result only when there is one', async () => {
    const p = proxy({ token: undefined });
    replies['POST /v1/submit'] = { status: 200, body: { next_state: 'SUBMITTED', provider_refs: { exchange_withdrawal_id: 'w-9' } } };
    const signResult = { signature: '0xsig', signature_format: 'evm_signed_tx', signer_ref: 'kms:1' };
    const r = await p.submit(ctx, prepared, { signResult });
    assert.equal(r.next_state, 'SUBMITTED');
    await p.submit(ctx, prepared, {});
    assert.deepEqual(seen[0].body, { context: ctx, prepared_action: prepared, sign_result: signResult });
    assert.deepEqual(seen[1].body, { context: ctx, prepared_action: prepared });
    assert.equal(seen[0].authorization, undefined);
    await p.close();
  });

  test('an answer that fails validation is a fatal error naming the field', async () => {
    const p = proxy();
    replies['POST /v1/observe'] = { status: 200, body: { next_state: 'OBSERVING', retry_after_seconds: 'soon' } };
    await assert.rejects(p.observe(ctx), (e: unknown) => e instanceof FatalMovementError && e.code === 'REMOTE_EXECUTOR_INVALID_RESPONSE' && e.message.includes('retry_after_seconds'));
    replies['POST /v1/prepare'] = { status: 200, raw: 'not json' };
    await assert.rejects(p.prepare(ctx), (e: unknown) => e instanceof FatalMovementError && e.code === 'REMOTE_EXECUTOR_INVALID_RESPONSE');
    await p.close();
  });

  test('a 4xx refusal is fatal; 5xx and 429 are temporary, with Retry-After passed on', async () => {
    const p = proxy();
    replies['POST /v1/prepare'] = { status: 422, body: { error: 'bad amount' } };
    await assert.rejects(p.prepare(ctx), (e: unknown) => e instanceof FatalMovementError && e.code === 'REMOTE_EXECUTOR_REJECTED' && e.details.status === 422);
    replies['POST /v1/observe'] = { status: 503, body: {}, headers: { 'retry-after': '7' } };
    await assert.rejects(
      p.observe(ctx),
      (e: unknown) => e instanceof TemporaryMovementError && e.code === 'REMOTE_EXECUTOR_UNAVAILABLE' && e.details.retry_after_seconds === 7,
    );
    replies['POST /v1/recover'] = { status: 429, body: {} };
    await assert.rejects(p.recover(ctx), (e: unknown) => e instanceof TemporaryMovementError && e.details.may_have_acted === false);
    await p.close();
  });

  test('a server that is down is a temporary error, and a submit that never left is not reported as UNKNOWN', async () => {
    const p = proxy({ baseUrl: await deadUrl() });
    await assert.rejects(p.observe(ctx), (e: unknown) => e instanceof TemporaryMovementError && e.code === 'REMOTE_EXECUTOR_UNREACHABLE' && e.details.may_have_acted === false);
    await assert.rejects(p.submit(ctx, prepared, {}), (e: unknown) => e instanceof TemporaryMovementError && e.code === 'REMOTE_EXECUTOR_UNREACHABLE');
    await assert.rejects(p.health(), TemporaryMovementError);
    await p.close();
  });

  test('a submit whose fate is unknown (5xx, unreadable answer, timeout) is UNKNOWN, never an error to retry', async () => {
    const p = proxy({ timeoutMs: 300 });
    replies['POST /v1/submit'] = { status: 502, body: {} };
    const r1 = await p.submit(ctx, prepared, {});
    assert.equal(r1.next_state, 'UNKNOWN');
    assert.equal(r1.error_code, 'REMOTE_SUBMIT_OUTCOME_UNKNOWN');
    replies['POST /v1/submit'] = { status: 200, body: { next_state: 'DONE' } };
    assert.equal((await p.submit(ctx, prepared, {})).next_state, 'UNKNOWN');
    replies['POST /v1/submit'] = 'hang';
    const r3 = await p.submit(ctx, prepared, {});
    assert.equal(r3.next_state, 'UNKNOWN');
    assert.match(r3.error_detail ?? '', /REMOTE_EXECUTOR_CONNECTION_LOST/);
    // A 4xx is a refusal: nothing happened, the node may fail outright.
    replies['POST /v1/submit'] = { status: 400, body: { error: 'insufficient balance' } };
    await assert.rejects(p.submit(ctx, prepared, {}), FatalMovementError);
    await p.close();
  });

  test('health GETs /health', async () => {
    const p = proxy();
    replies['GET /v1/health'] = { status: 200, body: { ok: true, executor_key: 'exec.remote', mode: 'remote' } };
    assert.deepEqual(await p.health(), { ok: true, executor_key: 'exec.remote', mode: 'remote' });
    assert.equal(seen[0].method, 'GET');
    await p.close();
  });

  test('a base URL that is not http(s) is refused at construction', () => {
    assert.throws(() => new RemoteExecutorProxy({ executorKey: 'x', baseUrl: 'ftp://127.0.0.1' }), TypeError);
    assert.throws(() => new RemoteExecutorProxy({ executorKey: 'x', baseUrl: 'nope' }), TypeError);
  });
});

describe('RemoteSignerProxy', () => {
  const payload = '0x02e5';
  const signRequest: SignRequest = {
    protocol_version: '1.0',
    request_id: 'req-1',
    request_node_id: 'node-1',
    signing_intent: {
      action: 'exec.cctp.burn',
      asset: 'USDC',
      amount: '5',
      destination: '0x' + '1'.repeat(40),
      max_fee_usd: null,
      chain_family: 'evm',
      allowed_payload_hash: payloadHash(payload),
    },
    payload_format: 'evm_raw_tx',
    payload,
    payload_hash: payloadHash(payload),
    metadata: { chain_id: 1 },
    // Forwarded as they are: the remote signer applies the approval-bound policy itself.
    executor_key: 'exec.cctp.burn',
    expected_effect: { chain_id: 1, asset: 'native', to: '0x' + '2'.repeat(40), amount_base_units: '0', call: { method: 'depositForBurn(uint256,uint32,bytes32,address,bytes32,uint256,uint32)', selector: '0x8e0250ee' } },
  };
  const signer = () => new RemoteSignerProxy({ signerKey: 'remote_evm', baseUrl, token: 'sig-token', timeoutMs: 2_000 });

  test('POSTs the request to /sign and validates the SignResult', async () => {
    const s = signer();
    replies['POST /v1/sign'] = { status: 200, body: { signature: '0xsigned', signature_format: 'evm_signed_tx', signer_ref: 'remote:x', extra: 1 } };
    assert.deepEqual(await s.sign(signRequest), { signature: '0xsigned', signature_format: 'evm_signed_tx', signer_ref: 'remote:x' });
    assert.deepEqual(seen[0].body, signRequest);
    assert.equal(seen[0].authorization, 'Bearer sig-token');
    await s.close();
  });

  test('a tampered request is refused before it leaves the process', async () => {
    const s = signer();
    replies['POST /v1/sign'] = { status: 200, body: { signature: '0x', signature_format: 'x', signer_ref: 'y' } };
    const tampered = { ...signRequest, signing_intent: { ...signRequest.signing_intent, allowed_payload_hash: payloadHash('0x00') } };
    await assert.rejects(s.sign(tampered), (e: unknown) => e instanceof FatalMovementError && e.code === 'SIGNER_PAYLOAD_HASH_MISMATCH');
    await assert.rejects(s.sign({ ...signRequest, payload: '0x02e6' }), (e: unknown) => e instanceof FatalMovementError && e.code === 'SIGNER_PAYLOAD_HASH_MISMATCH');
    assert.equal(seen.length, 0);
    await s.close();
  });

  test('an invalid answer is fatal, a refusal is fatal, a server that is down is temporary', async () => {
    const s = signer();
    replies['POST /v1/sign'] = { status: 200, body: { signature: 42 } };
    await assert.rejects(s.sign(signRequest), (e: unknown) => e instanceof FatalMovementError && e.code === 'REMOTE_SIGNER_INVALID_RESPONSE');
    replies['POST /v1/sign'] = { status: 403, body: { error: 'policy' } };
    await assert.rejects(s.sign(signRequest), (e: unknown) => e instanceof FatalMovementError && e.code === 'REMOTE_SIGNER_REJECTED');
    await s.close();
    const down = new RemoteSignerProxy({ signerKey: 'remote_evm', baseUrl: await deadUrl() });
    await assert.rejects(down.sign(signRequest), (e: unknown) => e instanceof TemporaryMovementError && e.code === 'REMOTE_SIGNER_UNREACHABLE');
    await down.close();
  });

  test('with the EVM policy, typed data is refused before it leaves the process, as the local signers refuse it', async () => {
    const s = new RemoteSignerProxy({ signerKey: 'remote_evm', baseUrl, token: 'sig-token', timeoutMs: 2_000, evmPolicy: {} });
    replies['POST /v1/sign'] = { status: 200, body: { signature: '0xsigned', signature_format: 'eip712_signature', signer_ref: 'remote:x' } };
    const typed = JSON.stringify({ domain: { name: 'USD Coin', chainId: 1 }, primaryType: 'Permit', message: { spender: '0x' + '3'.repeat(40), value: '1' } });
    const request: SignRequest = {
      ...signRequest,
      payload_format: 'eip712',
      payload: typed,
      payload_hash: payloadHash(typed),
      signing_intent: { ...signRequest.signing_intent, allowed_payload_hash: payloadHash(typed) },
    };
    await assert.rejects(s.sign(request), (e: unknown) => e instanceof FatalMovementError && e.code === 'SIGNER_POLICY_VIOLATION' && e.details.rule === 'typed_data_not_allowed');
    assert.equal(seen.length, 0, 'nothing was sent to the remote signer');
    await s.close();
  });

  test('health GETs /health', async () => {
    const s = signer();
    replies['GET /v1/health'] = { status: 200, body: { ok: true, signer_address: '0x' + 'ab'.repeat(20) } };
    assert.deepEqual(await s.health(), { ok: true, signer_address: '0x' + 'ab'.repeat(20) });
    await s.close();
  });
});
