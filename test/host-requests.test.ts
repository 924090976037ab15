import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { parseTransaction, parseEther, serializeTransaction, type Hex, type TransactionSerializable } from 'viem';
import { ConfigError, loadConfig } from '../src/config.ts';
import { FatalMovementError } from '../src/executors/errors.ts';
import { generateHostRequestKey, HostRequestSigner, HostRequestVerifier, HOST_REQUEST_HEADERS } from '../src/executors/host-requests.ts';
import { LocalExecutorAdapter } from '../src/executors/local-adapter.ts';
import { payloadHash } from '../src/executors/payload-hash.ts';
import type { SignRequest } from '../src/executors/protocol.ts';
import { RemoteExecutorProxy } from '../src/executors/remote-proxy.ts';
import { LocalPrivateKeySignerEvm } from '../src/executors/signers/local-private-key-evm.ts';
import { RemoteSignerProxy } from '../src/executors/signers/remote-proxy.ts';
import { listenHost, type ListeningHost } from '../src/hosts/common.ts';
import { executorHostApp } from '../src/hosts/executor-host.ts';
import { signerHostApp } from '../src/hosts/signer-host.ts';
import { ANVIL_DEV_KEY, TEST_FEE_CAP_WEI } from './helpers/anvil.ts';
import { runCliProcess } from './helpers/cli.ts';
import { EVIDENCE, hostKeys, requestSigner, requestVerifier, signedHeaders } from './helpers/host-requests.ts';
import { executionContext, preparedAction } from './helpers/protocol.ts';

/**
 * Issue 20, finding 4: a remote host's bearer token was worth its keys. `/sign` signed whatever
 * expected effect the caller named (a 1000 ETH transfer to anyone, with a matching effect, got a
 * signature) and the executor host ran whatever context it was sent. Now every POST must be signed
 * by Ferry's host request key, which the host pins, for the key the host serves, inside the replay
 * window, with a nonce never seen before; the signed body carries the approval's evidence and the
 * signer's own policy judges that. Each refusal below was a 200 before.
 */

const TOKEN = 'host-requests-token-0123456789abcdef';
const CHAIN = 8453;
const ALICE = '0x1111111111111111111111111111111111111111';
const MALLORY = '0x2222222222222222222222222222222222222222';
const lines: string[] = [];
const log = pino({ level: 'trace' }, { write: (l: string) => void lines.push(l) });

const tx = (to: string, value: bigint) =>
  serializeTransaction({ type: 'eip1559', chainId: CHAIN, nonce: 0, to, value, gas: 21_000n, maxFeePerGas: 1_000_000_000n, maxPriorityFeePerGas: 1n } as TransactionSerializable);

/** A native transfer request as Ferry's dispatcher builds it: evidence and expected effect from the approved plan. */
function signRequest(to: string, value: bigint, over: Partial<SignRequest> = {}): SignRequest {
  const payload = tx(to, value);
  return {
    protocol_version: '1.0',
    request_id: 'req-1',
    request_node_id: 'node-1',
    ...EVIDENCE,
    signing_intent: { action: 'evm_native_transfer', asset: 'ETH', amount: value.toString(), destination: to, max_fee_usd: null, chain_family: 'evm', allowed_payload_hash: payloadHash(payload) },
    payload_format: 'evm_raw_tx',
    payload,
    payload_hash: payloadHash(payload),
    metadata: {},
    executor_key: 'exec.evm.native_transfer',
    expected_effect: { chain_id: CHAIN, asset: 'native', to, amount_base_units: value.toString(), max_fee_per_gas_cap_wei: TEST_FEE_CAP_WEI },
    ...over,
  };
}

let signerHost: ListeningHost;
let execHost: ListeningHost;
const submitted: string[] = [];

before(async () => {
  const signer = new LocalPrivateKeySignerEvm({ signerKey: 'hot', privateKey: ANVIL_DEV_KEY, chains: [CHAIN] });
  signerHost = await listenHost(signerHostApp({ signer, token: TOKEN, verifier: requestVerifier(), log }), '127.0.0.1', 0);
  const executor = new LocalExecutorAdapter({
    executorKey: 'exec.test.pay',
    lane: 'test',
    handler: {
      prepare: () => ({ next_state: 'SUBMITTING', prepared_action: preparedAction() }),
      submit: (c) => (submitted.push(c.request_node_id), { next_state: 'SUBMITTED' }),
      observe: () => ({ next_state: 'COMPLETED' }),
      recover: () => ({ next_state: 'COMPLETED' }),
    },
  });
  const other = new LocalExecutorAdapter({
    executorKey: 'exec.test.other',
    lane: 'test',
    handler: { prepare: () => ({ next_state: 'FAILED' }), submit: (c) => (submitted.push(`other:${c.request_node_id}`), { next_state: 'SUBMITTED' }), observe: () => ({ next_state: 'COMPLETED' }), recover: () => ({ next_state: 'COMPLETED' }) },
  });
  execHost = await listenHost(executorHostApp({ executors: [executor, other], token: TOKEN, verifier: requestVerifier(), log }), '127.0.0.1', 0);
});
after(async () => {
  await signerHost?.stop();
  await execHost?.stop();
});

/** POSTs `text` with `headers` (bearer token included) and answers status and code. */
async function post(host: ListeningHost, path: string, text: string, headers: Record<string, string>): Promise<{ status: number; code?: string; body: Record<string, unknown> }> {
  const res = await fetch(`${host.url}${path}`, { method: 'POST', headers, body: text });
  const body = (await res.json().catch(() => ({}))) as Record<string, unknown>;
  return { status: res.status, code: body.code as string | undefined, body };
}

describe('signer host', () => {
  test('a request Ferry signed is signed, through the proxy and by hand', async () => {
    const proxy = new RemoteSignerProxy({ signerKey: 'hot', baseUrl: signerHost.url, token: TOKEN, requestSigner });
    const signed = await proxy.sign(signRequest(ALICE, parseEther('0.1')));
    const decoded = parseTransaction(signed.signature as Hex);
    assert.equal(decoded.to?.toLowerCase(), ALICE);
    assert.equal(decoded.value, parseEther('0.1'));
    await proxy.close();
    const text = JSON.stringify(signRequest(ALICE, 5n));
    const r = await post(signerHost, '/sign', text, signedHeaders('/sign', 'hot', text, TOKEN));
    assert.equal(r.status, 200, JSON.stringify(r.body));
  });

  test('an unsigned request is refused, whatever it says was approved: the bearer token alone signs nothing', async () => {
    // The review's request: 1000 ETH to an address of the caller's choosing, with a matching effect.
    const text = JSON.stringify(signRequest(MALLORY, parseEther('1000')));
    const r = await post(signerHost, '/sign', text, signedHeaders('/sign', 'hot', text, TOKEN, null));
    assert.equal(r.status, 401);
    assert.equal(r.code, 'HOST_REQUEST_UNSIGNED');
    // The proxy without Ferry's key meets the same refusal, as a fatal error (nothing was signed).
    const bare = new RemoteSignerProxy({ signerKey: 'hot', baseUrl: signerHost.url, token: TOKEN });
    await assert.rejects(bare.sign(signRequest(ALICE, 1n)), (e: unknown) => e instanceof FatalMovementError && e.code === 'REMOTE_SIGNER_REJECTED' && /HOST_REQUEST_UNSIGNED/.test(e.message));
    await bare.close();
  });

  test('a replayed request is refused: the same signed request twice signs once', async () => {
    const text = JSON.stringify(signRequest(ALICE, 7n));
    const headers = signedHeaders('/sign', 'hot', text, TOKEN);
    assert.equal((await post(signerHost, '/sign', text, headers)).status, 200);
    const again = await post(signerHost, '/sign', text, headers);
    assert.equal(again.status, 409);
    assert.equal(again.code, 'HOST_REQUEST_REPLAYED');
  });

  test('a tampered expected effect is refused: the evidence is what Ferry signed, or nothing', async () => {
    // Ferry signed 0.1 ETH to Alice; the caller swaps in 1000 ETH to Mallory with a matching effect.
    const honest = JSON.stringify(signRequest(ALICE, parseEther('0.1')));
    const headers = signedHeaders('/sign', 'hot', honest, TOKEN);
    const forged = JSON.stringify(signRequest(MALLORY, parseEther('1000')));
    const r = await post(signerHost, '/sign', forged, headers);
    assert.equal(r.status, 401);
    assert.equal(r.code, 'HOST_REQUEST_SIGNATURE_INVALID');
    // Only the expected effect changed (the transaction still Ferry's): refused the same way.
    const effectOnly = JSON.parse(honest) as SignRequest;
    effectOnly.expected_effect!.max_fee_per_gas_cap_wei = '1';
    assert.equal((await post(signerHost, '/sign', JSON.stringify(effectOnly), signedHeaders('/sign', 'hot', honest, TOKEN))).code, 'HOST_REQUEST_SIGNATURE_INVALID');
    // A signed request whose expected effect does not match its transaction: the signer's own policy refuses.
    const mismatched = JSON.stringify(signRequest(ALICE, 5n, { expected_effect: { chain_id: CHAIN, asset: 'native', to: ALICE, amount_base_units: '4', max_fee_per_gas_cap_wei: TEST_FEE_CAP_WEI } }));
    const policy = await post(signerHost, '/sign', mismatched, signedHeaders('/sign', 'hot', mismatched, TOKEN));
    assert.equal(policy.status, 422);
    assert.equal(policy.code, 'SIGNER_POLICY_VIOLATION');
  });

  test('a stale or future timestamp is refused', async () => {
    const text = JSON.stringify(signRequest(ALICE, 9n));
    const stale = new HostRequestSigner(hostKeys.privateKey, { now: () => Date.now() - 120_000 });
    const r = await post(signerHost, '/sign', text, signedHeaders('/sign', 'hot', text, TOKEN, stale));
    assert.equal(r.status, 401);
    assert.equal(r.code, 'HOST_REQUEST_EXPIRED');
    const future = new HostRequestSigner(hostKeys.privateKey, { now: () => Date.now() + 120_000 });
    assert.equal((await post(signerHost, '/sign', text, signedHeaders('/sign', 'hot', text, TOKEN, future))).code, 'HOST_REQUEST_EXPIRED');
    // Inside the window (60 s by default) it is signed.
    const late = new HostRequestSigner(hostKeys.privateKey, { now: () => Date.now() - 30_000 });
    assert.equal((await post(signerHost, '/sign', text, signedHeaders('/sign', 'hot', text, TOKEN, late))).status, 200);
  });

  test('a key the host does not pin, a request signed for another signer or path, and one without the evidence are refused', async () => {
    const text = JSON.stringify(signRequest(ALICE, 11n));
    const stranger = new HostRequestSigner(generateHostRequestKey().privateKey);
    assert.equal((await post(signerHost, '/sign', text, signedHeaders('/sign', 'hot', text, TOKEN, stranger))).code, 'HOST_REQUEST_SIGNATURE_INVALID');
    assert.equal((await post(signerHost, '/sign', text, signedHeaders('/sign', 'cold', text, TOKEN))).code, 'HOST_REQUEST_SIGNATURE_INVALID');
    assert.equal((await post(signerHost, '/sign', text, signedHeaders('/other', 'hot', text, TOKEN))).code, 'HOST_REQUEST_SIGNATURE_INVALID');
    // Signed, but naming no attempt or approved plan: no approval to act on.
    const bare = signRequest(ALICE, 11n) as Record<string, unknown>;
    delete bare.attempt_no;
    delete bare.compiled_plan_hash;
    const noEvidence = JSON.stringify(bare);
    const r = await post(signerHost, '/sign', noEvidence, signedHeaders('/sign', 'hot', noEvidence, TOKEN));
    assert.equal(r.status, 422);
    assert.equal(r.code, 'HOST_REQUEST_EVIDENCE_MISSING');
  });

  test('the bearer token is still required, and GET /health needs nothing more', async () => {
    const text = JSON.stringify(signRequest(ALICE, 13n));
    const headers = signedHeaders('/sign', 'hot', text, TOKEN);
    assert.equal((await post(signerHost, '/sign', text, { ...headers, authorization: 'Bearer wrong-token-wrong-token' })).status, 401);
    const health = await fetch(`${signerHost.url}/health`, { headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(health.status, 200);
  });
});

describe('executor host', () => {
  const ctx = (key = 'exec.test.pay') => executionContext(key, { request_node_id: `node-${submitted.length}` });
  const submitBody = (key = 'exec.test.pay') => JSON.stringify({ context: ctx(key), prepared_action: preparedAction() });

  test("Ferry's signed submit runs once; unsigned, replayed, tampered or re-addressed, it never runs", async () => {
    const proxy = new RemoteExecutorProxy({ executorKey: 'exec.test.pay', baseUrl: execHost.url, token: TOKEN, requestSigner });
    const before = submitted.length;
    assert.equal((await proxy.submit(ctx(), preparedAction())).next_state, 'SUBMITTED');
    assert.equal(submitted.length, before + 1);
    await proxy.close();

    const text = submitBody();
    const unsigned = await post(execHost, '/submit', text, signedHeaders('/submit', 'exec.test.pay', text, TOKEN, null));
    assert.equal(unsigned.code, 'HOST_REQUEST_UNSIGNED');
    const headers = signedHeaders('/submit', 'exec.test.pay', text, TOKEN);
    assert.equal((await post(execHost, '/submit', text, headers)).status, 200);
    const replayed = await post(execHost, '/submit', text, headers);
    assert.equal(replayed.status, 409);
    assert.equal(replayed.code, 'HOST_REQUEST_REPLAYED');
    // Another attempt's context under this signature.
    const tampered = JSON.parse(text) as { context: { attempt_no: number } };
    tampered.context.attempt_no = 2;
    assert.equal((await post(execHost, '/submit', JSON.stringify(tampered), signedHeaders('/submit', 'exec.test.pay', text, TOKEN))).code, 'HOST_REQUEST_SIGNATURE_INVALID');
    // Signed for one executor, naming another the host also serves.
    const other = submitBody('exec.test.other');
    const readdressed = await post(execHost, '/submit', other, signedHeaders('/submit', 'exec.test.pay', other, TOKEN));
    assert.equal(readdressed.code, 'HOST_REQUEST_SIGNATURE_INVALID');
    const stale = new HostRequestSigner(hostKeys.privateKey, { now: () => Date.now() - 600_000 });
    assert.equal((await post(execHost, '/submit', text, signedHeaders('/submit', 'exec.test.pay', text, TOKEN, stale))).code, 'HOST_REQUEST_EXPIRED');
    assert.equal(submitted.length, before + 2, 'only the two signed submits ran');
    assert.ok(!submitted.some((s) => s.startsWith('other:')));
  });

  test('every POST is signed, not only submit', async () => {
    const text = JSON.stringify(ctx());
    for (const path of ['/preflight', '/prepare', '/observe', '/recover', '/cancel']) {
      assert.equal((await post(execHost, path, text, signedHeaders(path, 'exec.test.pay', text, TOKEN, null))).code, 'HOST_REQUEST_UNSIGNED', path);
    }
  });
});

describe('the verifier', () => {
  test('nonces are remembered until their time leaves the window, and no more than the limit', () => {
    let now = 1_700_000_000_000;
    const signer = new HostRequestSigner(hostKeys.privateKey, { now: () => now });
    const verifier = new HostRequestVerifier({ publicKeys: [hostKeys.publicKey], maxAgeSeconds: 60, maxNonces: 2, now: () => now });
    const verify = (headers: Record<string, string>) => verifier.verify({ method: 'POST', path: '/sign', header: (n) => headers[n], body: '{}', audiences: new Set(['hot']) });
    const sign = () => signer.headers({ method: 'POST', path: '/sign', audience: 'hot', body: '{}' });
    assert.equal(verify(sign()).ok, true);
    assert.equal(verify(sign()).ok, true);
    const full = verify(sign());
    assert.equal(full.ok, false);
    assert.equal(!full.ok && full.code, 'HOST_REQUEST_NONCE_MEMORY_FULL');
    now += 61_000;
    assert.equal(verify(sign()).ok, true, 'the expired nonces were forgotten');
    assert.equal(verifier.remembered, 1);
    const headers = sign();
    assert.equal(verify(headers).ok, true);
    assert.equal(!verify(headers).ok && (verify(headers) as { code: string }).code, 'HOST_REQUEST_REPLAYED');
    assert.equal(headers[HOST_REQUEST_HEADERS.key], requestSigner.keyId);
  });

  test('configuration: the key and the pinned keys are checked at start, the private key never echoed', () => {
    assert.throws(() => loadConfig({ FERRY_HOST_REQUEST_KEY: 'fyh_short-secret-value' }), (e: unknown) => e instanceof ConfigError && /FERRY_HOST_REQUEST_KEY \(value hidden\)/.test(e.message) && !e.message.includes('short-secret'));
    assert.throws(() => loadConfig({ FERRY_HOST_REQUEST_PUBLIC_KEYS: 'nope' }), /FERRY_HOST_REQUEST_PUBLIC_KEYS/);
    assert.throws(() => loadConfig({ FERRY_HOST_REQUEST_MAX_AGE_SECONDS: '0' }), /FERRY_HOST_REQUEST_MAX_AGE_SECONDS/);
    const rotated = generateHostRequestKey();
    const c = loadConfig({ FERRY_HOST_REQUEST_KEY: hostKeys.privateKey, FERRY_HOST_REQUEST_PUBLIC_KEYS: `${hostKeys.publicKey}, ${rotated.publicKey}` });
    assert.deepEqual(c.hostRequestPublicKeys, [hostKeys.publicKey, rotated.publicKey]);
    assert.equal(c.hostRequestMaxAgeSeconds, 60);
  });

  test('ferry hosts keygen prints a pair that works, and the hosts refuse to start without a pinned key', async () => {
    const run = await runCliProcess(['hosts', 'keygen', '--json']);
    assert.equal(run.code, 0, run.stderr);
    const pair = JSON.parse(run.stdout) as { FERRY_HOST_REQUEST_KEY: string; FERRY_HOST_REQUEST_PUBLIC_KEYS: string };
    const signer = new HostRequestSigner(pair.FERRY_HOST_REQUEST_KEY);
    const verifier = new HostRequestVerifier({ publicKeys: [pair.FERRY_HOST_REQUEST_PUBLIC_KEYS] });
    const headers = signer.headers({ method: 'POST', path: '/sign', audience: 'hot', body: 'x' });
    assert.equal(verifier.verify({ method: 'POST', path: '/sign', header: (n) => headers[n], body: 'x', audiences: new Set(['hot']) }).ok, true);
    const refused = await runCliProcess(['signer-host', '--signer', 'hot', '--port', '0'], { FERRY_SIGNER_HOST_TOKEN: TOKEN });
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /FERRY_HOST_REQUEST_PUBLIC_KEYS must be set/);
  });
});
