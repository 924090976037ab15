import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { configuredRegistries } from '../src/actors/runtime.ts';
import { ConfigError, loadConfig } from '../src/config.ts';
import { parseConfigFile } from '../src/config-file.ts';
import { FatalMovementError, TemporaryMovementError } from '../src/executors/errors.ts';
import { LocalExecutorAdapter } from '../src/executors/local-adapter.ts';
import type { SignRequest } from '../src/executors/protocol.ts';
import { RemoteExecutorProxy } from '../src/executors/remote-proxy.ts';
import { RemoteSignerProxy } from '../src/executors/signers/remote-proxy.ts';
import { createPool } from '../src/persistence/db.ts';
import { listenHost, type ListeningHost } from '../src/hosts/common.ts';
import { executorHostApp } from '../src/hosts/executor-host.ts';
import { signerHostApp } from '../src/hosts/signer-host.ts';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify as yaml } from 'yaml';
import { executionContext, preparedAction } from './helpers/protocol.ts';
import { EVIDENCE, hostKeys, requestSigner, requestVerifier, signedHeaders } from './helpers/host-requests.ts';

/**
 * The executor host and the signer host (src/hosts) in this process, on loopback, spoken to by
 * Ferry's own remote proxies: what each outcome of a local implementation looks like on the other
 * side of the protocol. And the configuration file's remote block, as the registry binds it.
 */

const TOKEN = 'host-test-token-0123456789abcdef';
const lines: string[] = [];
const log = pino({ level: 'trace' }, { write: (l: string) => void lines.push(l) });

const ctx = executionContext;

const prepared = preparedAction({ payload_hash: 'sha256:' + '1'.repeat(64) });

let host: ListeningHost;
let signer: ListeningHost;
const submits: Array<{ sign_result: unknown }> = [];
let prechecked = 0;

before(async () => {
  const good = new LocalExecutorAdapter({
    executorKey: 'exec.test.good',
    lane: 'test',
    handler: {
      prepare: () => ({ next_state: 'SUBMITTING', prepared_action: prepared }),
      preSubmitCheck: () => void prechecked++,
      submit: (_c, _p, opts) => (submits.push({ sign_result: opts.signResult ?? null }), { next_state: 'SUBMITTED', provider_refs: { ref: 'r-1' } }),
      observe: () => ({ next_state: 'COMPLETED' }),
      recover: () => ({ next_state: 'COMPLETED', provider_state: 'recovered' }),
      inspect: () => ({ next_state: 'COMPLETED', provider_state: 'inspected' }),
      health: () => ({ ok: true, executor_key: 'exec.test.good' }),
    },
  });
  const grumpy = new LocalExecutorAdapter({
    executorKey: 'exec.test.grumpy',
    lane: 'test',
    handler: {
      preflight: () => {
        throw new TemporaryMovementError('PROVIDER_BUSY', 'come back later', { retry_after_seconds: 7 });
      },
      prepare: () => {
        throw new FatalMovementError('PROVIDER_REFUSED', 'no such account');
      },
      submit: () => {
        throw new Error('exploded halfway');
      },
    },
  });
  host = await listenHost(executorHostApp({ executors: [good, grumpy], token: TOKEN, verifier: requestVerifier(), log }), '127.0.0.1', 0);
  signer = await listenHost(
    signerHostApp({
      signer: {
        signerKey: 'hot',
        sign: async (req: SignRequest) => {
          if (req.payload === 'refuse') throw new FatalMovementError('SIGNER_POLICY_REFUSED', 'not allowed');
          return { signature: '0xsig', signature_format: 'test', signer_ref: 'hot' };
        },
      },
      token: TOKEN,
      verifier: requestVerifier(),
      log,
    }),
    '127.0.0.1',
    0,
  );
});
after(async () => {
  await host?.stop();
  await signer?.stop();
});

const proxy = (key: string, token = TOKEN) => new RemoteExecutorProxy({ executorKey: key, baseUrl: host.url, token, timeoutMs: 2000, requestSigner });

describe('executor host', () => {
  test('a passing preflight is 204 (null through the proxy); prepare, submit with its sign result, observe and recover round-trip', async () => {
    const p = proxy('exec.test.good');
    const text = JSON.stringify(ctx('exec.test.good'));
    const raw = await fetch(`${host.url}/preflight`, { method: 'POST', headers: signedHeaders('/preflight', 'exec.test.good', text, TOKEN), body: text });
    assert.equal(raw.status, 204);
    assert.equal(await p.preflight(ctx('exec.test.good')), null);
    assert.equal((await p.prepare(ctx('exec.test.good'))).prepared_action?.payload_hash, prepared.payload_hash);
    const before = prechecked;
    const sent = await p.submit(ctx('exec.test.good'), prepared, { signResult: { signature: '0xabc', signature_format: 'evm_raw_tx', signer_ref: 'hot' } });
    assert.equal(sent.next_state, 'SUBMITTED');
    assert.deepEqual(sent.provider_refs, { ref: 'r-1' });
    assert.equal(prechecked, before + 1, 'the pre-submit check ran in the host, before submit');
    assert.deepEqual(submits.at(-1)?.sign_result, { signature: '0xabc', signature_format: 'evm_raw_tx', signer_ref: 'hot' });
    assert.equal((await p.observe(ctx('exec.test.good'))).next_state, 'COMPLETED');
    assert.equal((await p.recover(ctx('exec.test.good'))).provider_state, 'recovered');
    assert.equal((await p.inspect(ctx('exec.test.good'))).provider_state, 'inspected', 'inspect is its own route, never recover');
    // An executor without inspect() answers an error: no answer, never a recover() in its place.
    await assert.rejects(proxy('exec.test.grumpy').inspect(ctx('exec.test.grumpy')));
    const health = await p.health();
    assert.equal(health?.ok, true);
    assert.deepEqual(Object.keys(health?.executors as object).sort(), ['exec.test.good', 'exec.test.grumpy']);
  });

  test("an implementation's errors: temporary -> 503 with Retry-After, a refusal -> its code, a crash in submit -> UNKNOWN", async () => {
    const p = proxy('exec.test.grumpy');
    await assert.rejects(p.preflight(ctx('exec.test.grumpy')), (err: TemporaryMovementError) => err instanceof TemporaryMovementError && err.details.retry_after_seconds === 7);
    await assert.rejects(p.prepare(ctx('exec.test.grumpy')), (err: FatalMovementError) => err instanceof FatalMovementError && /PROVIDER_REFUSED/.test(err.message));
    const r = await p.submit(ctx('exec.test.grumpy'), prepared, {});
    assert.equal(r.next_state, 'UNKNOWN', 'a submit that failed halfway may have acted');
    assert.equal(r.error_code, 'REMOTE_SUBMIT_OUTCOME_UNKNOWN');
    assert.ok(!JSON.stringify(r).includes('exploded halfway'), "the host's internal error is not echoed");
    await assert.rejects(p.cancel(ctx('exec.test.grumpy')), /CANCEL_NOT_SUPPORTED/);
  });

  test('an executor the host does not serve, a malformed body and a wrong token are refused, never run', async () => {
    const count = submits.length;
    await assert.rejects(proxy('exec.test.other').submit(ctx('exec.test.other'), prepared, {}), /EXECUTOR_NOT_SERVED/);
    await assert.rejects(proxy('exec.test.good', TOKEN + 'x').submit(ctx('exec.test.good'), prepared, {}), /401/);
    await assert.rejects(proxy('exec.test.good', TOKEN.slice(1)).observe(ctx('exec.test.good')), /401/);
    const badText = JSON.stringify({ context: ctx('exec.test.good') });
    const bad = await fetch(`${host.url}/submit`, { method: 'POST', headers: signedHeaders('/submit', 'exec.test.good', badText, TOKEN), body: badText });
    assert.equal(bad.status, 400);
    assert.equal(((await bad.json()) as { code: string }).code, 'HOST_INVALID_REQUEST');
    assert.equal(submits.length, count);
  });
});

describe('signer host', () => {
  const request: SignRequest = {
    protocol_version: '1.0',
    request_id: 'req-1',
    request_node_id: 'node-1',
    ...EVIDENCE,
    signing_intent: { action: 'a', asset: 'USDC', amount: '1', destination: 'x', max_fee_usd: null, chain_family: 'evm', allowed_payload_hash: 'sha256:' + 'a'.repeat(64) },
    payload_format: 'json',
    payload: 'ok',
    payload_hash: 'sha256:' + 'a'.repeat(64),
    metadata: {},
  };

  test('POST /sign and GET /health through the remote signer proxy; a policy refusal keeps its code', async () => {
    const p = new RemoteSignerProxy({ signerKey: 'hot', baseUrl: signer.url, token: TOKEN, timeoutMs: 2000, requestSigner });
    const text = JSON.stringify(request);
    const raw = await fetch(`${signer.url}/sign`, { method: 'POST', headers: signedHeaders('/sign', 'hot', text, TOKEN), body: text });
    assert.equal(raw.status, 200);
    assert.equal(((await raw.json()) as { signature: string }).signature, '0xsig');
    assert.equal((await p.health())?.signer_key, 'hot');
    const refuseText = JSON.stringify({ ...request, payload: 'refuse' });
    const refused = await fetch(`${signer.url}/sign`, { method: 'POST', headers: signedHeaders('/sign', 'hot', refuseText, TOKEN), body: refuseText });
    assert.equal(refused.status, 422);
    assert.equal(((await refused.json()) as { code: string }).code, 'SIGNER_POLICY_REFUSED');
    const anonymous = await fetch(`${signer.url}/health`);
    assert.equal(anonymous.status, 401);
  });

  test('no bearer token in anything the hosts logged', () => {
    assert.ok(lines.some((l) => l.includes('"method":"sign"')));
    for (const l of lines) assert.ok(!l.includes(TOKEN.slice(0, 20)), l);
  });
});

describe('the remote block of the configuration file', () => {
  const remote = (body: unknown) => parseConfigFile(yaml({ remote: body }));

  test('entries are validated and a refusal names the entry', () => {
    const ok = remote({ executors: [{ key: 'exec.evm.native_transfer', url: 'http://127.0.0.1:3101', token_env: 'EXEC_TOKEN' }], signers: [{ key: 'hot', url: 'http://127.0.0.1:3102' }] });
    assert.ok(ok.ok);
    assert.equal(ok.ok && ok.file.remote.executors[0].timeout_ms, 30_000);
    assert.deepEqual(remote({ executors: [{ key: 'exec.x', url: 'not a url' }] }), { ok: false, reason: 'remote.executors[0].url: Invalid URL' });
    const twice = remote({ signers: [{ key: 'hot', url: 'http://127.0.0.1:1' }, { key: 'hot', url: 'http://127.0.0.1:2' }] });
    assert.equal(twice.ok, false);
    assert.match(!twice.ok ? twice.reason : '', /remote\.signers\[1\]\.key: hot is listed twice/);
    const addressOnly = remote({ signers: [{ key: 'hot', url: 'http://127.0.0.1:1', address: '0x' + '1'.repeat(40) }] });
    assert.match(!addressOnly.ok ? addressOnly.reason : '', /remote\.signers\[0\]\.chains: required with address/);
  });

  async function registries(body: unknown, env: Record<string, string>) {
    const dir = mkdtempSync(join(tmpdir(), 'ferry-remote-config-'));
    const path = join(dir, 'ferry.yaml');
    writeFileSync(path, yaml(body));
    const fullEnv = { FERRY_CONFIG_FILE: path, ...env };
    // Nothing is contacted: the registries make no call, so the pool is never used.
    const pool = createPool('postgres://127.0.0.1:9/none', 1, 'ferry-test');
    try {
      return await configuredRegistries(pool, loadConfig(fullEnv), { env: fullEnv, log });
    } finally {
      await pool.end();
    }
  }

  test('the registry binds remote executors and signers under their keys, with their tokens', async () => {
    const r = await registries({ remote: { executors: [{ key: 'exec.cex.withdrawal_action', url: host.url, token_env: 'T' }], signers: [{ key: 'hot', url: signer.url, token_env: 'T' }] } }, { T: TOKEN, FERRY_HOST_REQUEST_KEY: hostKeys.privateKey });
    const executor = r.executors.get({ executor_key: 'exec.cex.withdrawal_action' });
    assert.ok(executor instanceof RemoteExecutorProxy);
    assert.equal(executor.lane, 'cex', 'the lane recovery arms and graces see');
    assert.ok(r.signers.get('hot') instanceof RemoteSignerProxy);
    assert.equal((await r.signers.get('hot').health?.())?.signer_key, 'hot', 'the token from T was sent');
  });

  test('an unset token variable, or a key a local lane serves, stops start naming the entry', async () => {
    await assert.rejects(
      registries({ remote: { signers: [{ key: 'hot', url: signer.url, token_env: 'UNSET_TOKEN' }] } }, {}),
      (err: ConfigError) => err instanceof ConfigError && /remote\.signers\[0\] \(hot\): environment variable UNSET_TOKEN is not set/.test(err.message),
    );
    await assert.rejects(
      registries({ remote: { executors: [{ key: 'exec.sim.action', url: host.url }] } }, {}),
      (err: ConfigError) => err instanceof ConfigError && /remote\.executors\[0\] \(exec\.sim\.action\): a local executor already has this key/.test(err.message),
    );
  });
});
