import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { after, before, beforeEach, describe, test } from 'node:test';
import { dispatchUntilIdle } from './helpers/runtime.ts';
import type { WorkerDeps } from '../src/actors/execution.ts';
import { refreshRegistryHealth } from '../src/sweeps/executor-health.ts';
import { observeBatch } from '../src/actors/observer.ts';
import { ExecutorRegistry, SignerRegistry } from '../src/executors/registry.ts';
import { listExecutors } from '../src/persistence/registry.ts';
import { classifyCexError } from '../src/executors/cex/errors.ts';
import { FatalMovementError } from '../src/executors/errors.ts';
import { JsonHttpClient } from '../src/executors/http-json.ts';
import { LocalExecutorAdapter } from '../src/executors/local-adapter.ts';
import { boundText, ExecutionResultSchema, parseExecutionResult, RESULT_BOUNDS } from '../src/executors/protocol.ts';
import { RemoteExecutorProxy } from '../src/executors/remote-proxy.ts';
import { createApp } from '../src/http/app.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';
import { callApi } from './helpers/http.ts';
import { listenOnLoopback, type Listening } from './helpers/net.ts';
import { executionContext, preparedAction } from './helpers/protocol.ts';
import { approvedMovement, plan, runtimeDeps, snapshot } from './helpers/runtime.ts';
import { createTokens } from './helpers/tokens.ts';

/**
 * A hostile remote executor on loopback answers far more than any protocol answer needs: a 20 MB
 * error_detail, a 5 MB provider_refs. Ferry reads up to FERRY_EXECUTOR_ANSWER_MAX_BYTES and refuses
 * the rest (EXECUTOR_ANSWER_TOO_LARGE), the node goes the way of a malformed answer, and what is
 * stored for it stays a few kilobytes. Fields of an answer within the limit are bounded
 * (RESULT_BOUNDS) wherever the executor runs.
 */

// First, before any test or hook is registered: a top-level await between suites would let the
// suites above it finish, and the file's after hooks run, before the ones below it are registered.
const db: TestDb = await testDatabase();

const MB = 1024 * 1024;
const hugeDetail = () => 'x'.repeat(20 * MB);
const hugeRefs = () => ({ id: 'w-1', blob: 'r'.repeat(5 * MB) });

type Reply = { status: number; body?: unknown; raw?: string; chunked?: boolean };
let listening: Listening;
let replies: Record<string, Reply | (() => Reply)> = {};
/** Bytes the server managed to hand to its socket before the client went away, per path. */
let written: Record<string, number> = {};

before(async () => {
  const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    for await (const _ of req);
    const key = `${req.method} ${req.url}`;
    const found = replies[key];
    const reply = typeof found === 'function' ? found() : (found ?? { status: 404, body: { error: 'no such endpoint' } });
    const text = reply.raw ?? JSON.stringify(reply.body);
    if (!reply.chunked) {
      res.writeHead(reply.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
      res.end(text);
      written[key] = Buffer.byteLength(text);
      return;
    }
    // No content-length: the client only learns the size by reading, 64 KiB at a time.
    res.writeHead(reply.status, { 'content-type': 'application/json' });
    let offset = 0;
    const step = 64 * 1024;
    const pump = () => {
      while (offset < text.length) {
        const chunk = text.slice(offset, offset + step);
        offset += step;
        written[key] = (written[key] ?? 0) + chunk.length;
        if (!res.write(chunk)) return void res.once('drain', pump);
      }
      res.end();
    };
    res.once('close', () => {
      offset = text.length + 1;
    });
    pump();
  });
  listening = await listenOnLoopback(server);
});

after(() => listening.stop());

beforeEach(() => {
  replies = {};
  written = {};
});

const ctx = executionContext('exec.remote.hostile');
const proxy = (maxAnswerBytes?: number) =>
  new RemoteExecutorProxy({ executorKey: 'exec.remote.hostile', baseUrl: listening.url, timeoutMs: 5_000, ...(maxAnswerBytes ? { maxAnswerBytes } : {}) });
const tooLarge = (e: unknown) => e instanceof FatalMovementError && e.code === 'EXECUTOR_ANSWER_TOO_LARGE' && e.message.length < 1_000;

describe('the answer size limit', () => {
  test('an answer announced over the limit is refused unread; one streamed past it is cut off', async () => {
    const p = proxy();
    replies['POST /observe'] = { status: 200, body: { next_state: 'OBSERVING', error_detail: hugeDetail(), provider_refs: hugeRefs() } };
    await assert.rejects(p.observe(ctx), tooLarge);
    written = {};
    replies['POST /observe'] = { status: 200, body: { next_state: 'OBSERVING', error_detail: hugeDetail() }, chunked: true };
    await assert.rejects(p.observe(ctx), tooLarge);
    // The client stopped reading near the limit: the server never got to write most of its 20 MB.
    assert.ok(written['POST /observe']! < 10 * MB, `server wrote ${written['POST /observe']} bytes`);
    await p.close();
  });

  test('the limit is the configured one; an answer within it passes', async () => {
    const small = proxy(64 * 1024);
    replies['POST /observe'] = { status: 200, body: { next_state: 'OBSERVING', error_detail: 'd'.repeat(100 * 1024) } };
    await assert.rejects(small.observe(ctx), tooLarge);
    await small.close();
    const p = proxy();
    const r = await p.observe(ctx);
    assert.equal(r.next_state, 'OBSERVING');
    await p.close();
  });

  test('a submit answered past the limit is UNKNOWN (money may have moved), as an unreadable answer is', async () => {
    const p = proxy();
    replies['POST /submit'] = { status: 200, body: { next_state: 'COMPLETED', error_detail: hugeDetail(), provider_refs: hugeRefs() } };
    const r = await p.submit(ctx, preparedAction(), {});
    assert.equal(r.next_state, 'UNKNOWN');
    assert.equal(r.error_code, 'REMOTE_SUBMIT_OUTCOME_UNKNOWN');
    assert.match(r.error_detail ?? '', /^EXECUTOR_ANSWER_TOO_LARGE: /);
    await p.close();
  });

  test("the remote signers' client has the same default limit, under its own code", async () => {
    const client = new JsonHttpClient({ baseUrl: listening.url, timeoutMs: 5_000, codePrefix: 'REMOTE_SIGNER' });
    replies['POST /sign'] = { status: 200, body: { signature: 's'.repeat(2 * MB), signature_format: 'evm_signed_tx', signer_ref: 'x' } };
    await assert.rejects(client.call('POST', '/sign', {}), (e: unknown) => e instanceof FatalMovementError && e.code === 'REMOTE_SIGNER_ANSWER_TOO_LARGE');
    await client.close();
  });

  test('an error answer over the limit keeps its status meaning, with a short excerpt', async () => {
    const p = proxy();
    replies['POST /observe'] = { status: 503, raw: 'e'.repeat(3 * MB) };
    await assert.rejects(p.observe(ctx), (e: unknown) => e instanceof Error && (e as { code?: string }).code === 'REMOTE_EXECUTOR_UNAVAILABLE' && e.message.length < 1_000);
    await p.close();
  });
});

describe('the bounds of a result, wherever the executor runs', () => {
  test('error_detail is cut to 4 KiB with a marker; codes and provider_state to 256 characters', () => {
    const r = ExecutionResultSchema.parse({ next_state: 'FAILED', error_detail: 'd'.repeat(100 * 1024), error_code: 'C'.repeat(1000), provider_state: 's'.repeat(1000) });
    assert.equal(r.error_detail!.length, RESULT_BOUNDS.detailChars);
    assert.match(r.error_detail!, /… \[truncated, 102400 characters\]$/);
    assert.equal(r.error_code!.length, RESULT_BOUNDS.codeChars);
    assert.equal(r.provider_state!.length, RESULT_BOUNDS.codeChars);
    // Short text is kept as it is.
    assert.equal(ExecutionResultSchema.parse({ next_state: 'FAILED', error_detail: 'insufficient balance' }).error_detail, 'insufficient balance');
  });

  test('text PostgreSQL cannot store (NUL, half a surrogate pair) is replaced, also where it is cut', () => {
    assert.equal(boundText('a\u0000b\ud83dc\ude00', 100), 'a\ufffdb\ufffdc\ufffd');
    assert.equal(boundText('ok 😀', 100), 'ok 😀');
    // A cut that would fall between the two halves of an emoji keeps neither half.
    const cut = boundText('😀'.repeat(100), 60);
    assert.ok(cut.length <= 60);
    assert.equal(boundText(cut, 100), cut, 'already well formed');
    const refs = ExecutionResultSchema.parse({ next_state: 'SUBMITTED', provider_refs: { id: 'a\u0000', ['k\ud800']: ['\udc00'] } }).provider_refs;
    assert.deepEqual(refs, { id: 'a\ufffd', 'k\ufffd': ['\ufffd'] });
  });

  test('provider_refs or proof over 16 KiB, an artifact too large or too many are refused, never cut', async () => {
    const big = { blob: 'r'.repeat(RESULT_BOUNDS.jsonBytes) };
    for (const over of [
      { provider_refs: big },
      { proof: big },
      { generated_artifacts: [{ artifact_type: 'x', content_inline: 'c'.repeat(RESULT_BOUNDS.inlineBytes + 1) }] },
      { generated_artifacts: [{ artifact_type: 'x', artifact_metadata: big }] },
      { artifacts: Array.from({ length: RESULT_BOUNDS.artifacts + 1 }, (_, i) => ({ artifact_type: 'x', artifact_digest: `d${i}` })) },
      { prepared_action: preparedAction({ provider_hints: big }) },
    ]) {
      const value = { next_state: 'SUBMITTED', ...over };
      assert.throws(() => parseExecutionResult(value, 'executor x submit()'), tooLarge, Object.keys(over)[0]);
    }
    // Just under the bound passes untouched.
    const fits = { blob: 'r'.repeat(RESULT_BOUNDS.jsonBytes - 20) };
    assert.deepEqual(parseExecutionResult({ next_state: 'SUBMITTED', provider_refs: fits }, 'x').provider_refs, fits);

    // An executor in this process is held to the same bounds as a remote one.
    const local = new LocalExecutorAdapter({ executorKey: 'exec.local.big', handler: { observe: () => ({ next_state: 'OBSERVING', provider_refs: big }) } });
    await assert.rejects(local.observe(ctx), tooLarge);
    const p = proxy();
    replies['POST /observe'] = { status: 200, body: { next_state: 'OBSERVING', provider_refs: big } };
    await assert.rejects(p.observe(ctx), tooLarge);
    // A malformed answer is still told apart from an oversized one.
    replies['POST /observe'] = { status: 200, body: { next_state: 'OBSERVING', artifacts: Array.from({ length: 10_000 }, () => ({ artifact_type: 1 })) } };
    await assert.rejects(p.observe(ctx), (e: unknown) => e instanceof FatalMovementError && e.code === 'REMOTE_EXECUTOR_INVALID_RESPONSE' && e.message.length < 4_000);
    await p.close();
  });
});

describe('exchange errors', () => {
  test("a node's exchange error keeps the endpoint, not the account's base_url or the signed query", () => {
    const baseUrl = 'https://proxy.internal.example:8443/binance-prod-7f3a';
    const err = new Error(`binance POST ${baseUrl}/sapi/v1/capital/withdraw/apply?coin=ETH&amount=5&timestamp=1&signature=abc123 400 Bad Request {"code":-4026,"msg":"x"}`);
    const failure = classifyCexError(err, { baseUrl, redact: (t) => t });
    assert.match(failure.detail, /POST \/sapi\/v1\/capital\/withdraw\/apply 400 Bad Request/);
    assert.doesNotMatch(failure.detail, /proxy\.internal|binance-prod-7f3a|8443|signature|amount=5/);
  });
});

describe('what a hostile executor leaves in the tables', () => {
  let deps: WorkerDeps;
  const KEY = 'exec.remote.hostile';

  beforeEach(() => {
    replies['POST /preflight'] = { status: 204, raw: '' };
  });

  before(() => {
    deps = runtimeDeps(db.pool);
    deps.executors.register(new RemoteExecutorProxy({ executorKey: KEY, baseUrl: listening.url, timeoutMs: 5_000 }));
  });

  const template = (key: string) =>
    plan(key, [{ node_key: 'pay', node_kind: 'action', action_type: 'remote_transfer', executor_binding: KEY, config: {} }]);
  const honestPrepare: Reply = { status: 200, body: { next_state: 'SUBMITTING', prepared_action: preparedAction() } };

  async function transitionBytes(movementId: string): Promise<number> {
    const { rows } = await db.pool.query(`SELECT coalesce(sum(pg_column_size(t.*)), 0)::int AS bytes FROM transitions t WHERE request_id = $1`, [movementId]);
    return rows[0].bytes;
  }

  /** The larger of what GET /v3/movements/{id} and /inspect/movements/{id} answer, in bytes. */
  async function movementAnswerBytes(movementId: string): Promise<number> {
    const { viewer } = await createTokens(db.pool, { viewer: { name: `viewer-${movementId.slice(0, 8)}`, role: 'viewer' } });
    const app = createApp({ pool: db.pool, config: deps.config });
    let largest = 0;
    for (const path of [`/v3/movements/${movementId}`, `/inspect/movements/${movementId}`]) {
      const res = await callApi(app, 'GET', path, viewer.token);
      assert.equal(res.status, 200, path);
      largest = Math.max(largest, Buffer.byteLength(res.text));
    }
    return largest;
  }

  test('an oversized prepare answer fails the node as a malformed one does, with a few KB stored', async () => {
    replies['POST /prepare'] = () => ({ status: 200, body: { next_state: 'SUBMITTING', error_detail: hugeDetail(), provider_refs: hugeRefs() } });
    const id = await approvedMovement(deps, template('hostile_prepare'));
    await dispatchUntilIdle(deps);
    const pay = (await snapshot(db.pool, id)).byKey.pay!;
    assert.equal(pay.node_state, 'FAILED', `${pay.error_code}: ${pay.error_detail}`);
    assert.equal(pay.error_code, 'EXECUTOR_ANSWER_TOO_LARGE');
    assert.ok((await transitionBytes(id)) < 8 * 1024, `transitions hold ${await transitionBytes(id)} bytes`);
    assert.ok((await movementAnswerBytes(id)) < 16 * 1024);

    // A malformed answer takes the same way, with its own code.
    replies['POST /prepare'] = { status: 200, raw: 'not json' };
    const bad = await approvedMovement(deps, template('malformed_prepare'));
    await dispatchUntilIdle(deps);
    const badPay = (await snapshot(db.pool, bad)).byKey.pay!;
    assert.equal(badPay.node_state, 'FAILED');
    assert.equal(badPay.error_code, 'REMOTE_EXECUTOR_INVALID_RESPONSE');
  });

  test('an oversized submit answer leaves the node UNKNOWN for recovery, with a few KB stored', async () => {
    replies['POST /prepare'] = honestPrepare;
    replies['POST /submit'] = () => ({ status: 200, body: { next_state: 'COMPLETED', error_detail: hugeDetail(), provider_refs: hugeRefs() } });
    const id = await approvedMovement(deps, template('hostile_submit'));
    await dispatchUntilIdle(deps);
    const pay = (await snapshot(db.pool, id)).byKey.pay!;
    assert.equal(pay.node_state, 'UNKNOWN', `${pay.error_code}: ${pay.error_detail}`);
    assert.equal(pay.error_code, 'REMOTE_SUBMIT_OUTCOME_UNKNOWN');
    assert.match(pay.error_detail ?? '', /EXECUTOR_ANSWER_TOO_LARGE/);
    assert.deepEqual(pay.provider_refs, {});
    assert.ok((await transitionBytes(id)) < 8 * 1024, `transitions hold ${await transitionBytes(id)} bytes`);
    assert.ok((await movementAnswerBytes(id)) < 16 * 1024);
  });

  test('an answer within the limit carrying a 100 KB error_detail is stored cut to 4 KiB', async () => {
    replies['POST /prepare'] = honestPrepare;
    replies['POST /submit'] = { status: 200, body: { next_state: 'SUBMITTED', provider_refs: { id: 'w-7' } } };
    replies['POST /observe'] = { status: 200, body: { next_state: 'OBSERVING', error_code: 'STILL_PENDING', error_detail: 'p'.repeat(100 * 1024) } };
    const id = await approvedMovement(deps, template('verbose_observe'));
    await dispatchUntilIdle(deps);
    const submitted = (await snapshot(db.pool, id)).byKey.pay!;
    assert.equal(submitted.node_state, 'SUBMITTED', `${submitted.error_code}: ${submitted.error_detail}`);
    await observeBatch(deps);
    const pay = (await snapshot(db.pool, id)).byKey.pay!;
    assert.equal(pay.node_state, 'OBSERVING');
    assert.equal(pay.error_detail!.length, RESULT_BOUNDS.detailChars);
    assert.match(pay.error_detail!, /\[truncated, 102400 characters\]$/);
    assert.deepEqual(pay.provider_refs, { id: 'w-7' });
    assert.ok((await transitionBytes(id)) < 16 * 1024, `transitions hold ${await transitionBytes(id)} bytes`);
  });
});

describe('health answers', () => {
  test('a health answer over the JSON bound is stored as its size; its text made storable', async () => {
    const executors = new ExecutorRegistry();
    executors.register(new LocalExecutorAdapter({ executorKey: 'exec.verbose', handler: { health: () => ({ ok: true, blob: 'h'.repeat(100 * 1024) }) } }));
    executors.register(new LocalExecutorAdapter({ executorKey: 'exec.nul', handler: { health: () => ({ ok: true, note: 'a\u0000b' }) } }));
    executors.register(new LocalExecutorAdapter({ executorKey: 'exec.loud', handler: { health: () => Promise.reject(new Error('e'.repeat(50_000))) } }));
    await refreshRegistryHealth(db.pool, executors, new SignerRegistry(), { timeoutMs: 2_000 });
    const rows = Object.fromEntries((await listExecutors(db.pool)).map((r) => [r.executor_key, r]));
    assert.equal(rows['exec.verbose']!.health_state, 'up');
    assert.deepEqual(rows['exec.verbose']!.health_detail, { oversized: true, bytes: Buffer.byteLength(JSON.stringify({ ok: true, blob: 'h'.repeat(100 * 1024) })) });
    assert.deepEqual(rows['exec.nul']!.health_detail, { ok: true, note: 'a\ufffdb' });
    assert.equal(rows['exec.loud']!.health_state, 'down');
    assert.equal(String((rows['exec.loud']!.health_detail as { error: string }).error).length, RESULT_BOUNDS.detailChars);
  });
});
