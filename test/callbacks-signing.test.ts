import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, stat, writeFile, chmod } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { callbackJobId, parseCallbackJobData } from '../src/callbacks/jobs.ts';
import { buildCallbackPayload } from '../src/callbacks/outbox.ts';
import { CALLBACK_SECRET_FILE, resolveCallbackSecret } from '../src/callbacks/secret.ts';
import {
  CALLBACK_HEADERS,
  callbackHeaders,
  deliveryHeaders,
  newWebhookSecret,
  readCallbackHeaders,
  signCallback,
  verifyCallback,
  webhookHeaders,
  webhookSecretForm,
  webhookSignatureV1,
} from '../src/callbacks/signing.ts';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import { assertCallbackUrlAllowed } from '../src/callbacks/url-policy.ts';
import { FerryError } from '../src/errors.ts';

// Computed once outside this code base:
//   printf '%s' "$BODY" | sha256sum   -> e1500c70...a8a1
//   printf '1700000000\n00112233445566778899aabbccddeeff\n<that hex>' | openssl dgst -sha256 -hmac "$SECRET"
const VECTOR = {
  secret: 'ferry-test-secret-0123456789',
  timestamp: 1700000000,
  nonce: '00112233445566778899aabbccddeeff',
  body: '{"event_type":"request_completed","request_id":"11111111-1111-1111-1111-111111111111"}',
  signature: 'b5716aaba78445914b40f5c5875971aafd869b0c2db1d498f702befa3deccec9',
};

describe('v3 callback signature', () => {
  test('matches the hand-computed vector', () => {
    assert.equal(signCallback(VECTOR.secret, VECTOR.timestamp, VECTOR.nonce, VECTOR.body), VECTOR.signature);
    assert.equal(
      signCallback(VECTOR.secret, String(VECTOR.timestamp), VECTOR.nonce, Buffer.from(VECTOR.body)),
      VECTOR.signature,
      'string timestamp and byte body sign the same',
    );
  });

  test('headers carry timestamp, nonce, version v3 and the signature', () => {
    const h = callbackHeaders(VECTOR.secret, VECTOR.timestamp, VECTOR.nonce, VECTOR.body);
    assert.deepEqual(h, {
      'X-Ferry-Callback-Timestamp': '1700000000',
      'X-Ferry-Callback-Nonce': VECTOR.nonce,
      'X-Ferry-Callback-Signature-Version': 'v3',
      'X-Ferry-Callback-Signature': VECTOR.signature,
    });
  });

  test('verify accepts the genuine request and refuses any change', () => {
    const genuine = { timestamp: '1700000000', nonce: VECTOR.nonce, signature: VECTOR.signature, version: 'v3' };
    assert.equal(verifyCallback(VECTOR.secret, genuine, VECTOR.body), true);
    assert.equal(verifyCallback(VECTOR.secret, { ...genuine, version: undefined }, VECTOR.body), true);

    assert.equal(verifyCallback('another-secret-0123456789', genuine, VECTOR.body), false, 'wrong secret');
    assert.equal(verifyCallback(VECTOR.secret, genuine, VECTOR.body.replace('completed', 'failed')), false, 'body');
    assert.equal(verifyCallback(VECTOR.secret, { ...genuine, timestamp: '1700000001' }, VECTOR.body), false, 'timestamp');
    assert.equal(verifyCallback(VECTOR.secret, { ...genuine, nonce: 'ff' + VECTOR.nonce.slice(2) }, VECTOR.body), false, 'nonce');
    assert.equal(verifyCallback(VECTOR.secret, { ...genuine, version: 'v2' }, VECTOR.body), false, 'version');
    assert.equal(verifyCallback(VECTOR.secret, { ...genuine, signature: VECTOR.signature.toUpperCase() }, VECTOR.body), false, 'uppercase');
    assert.equal(verifyCallback(VECTOR.secret, { ...genuine, signature: VECTOR.signature.slice(2) }, VECTOR.body), false, 'short');
    assert.equal(verifyCallback(VECTOR.secret, { ...genuine, signature: '' }, VECTOR.body), false, 'empty');
    assert.equal(verifyCallback(VECTOR.secret, null, VECTOR.body), false, 'no headers');
  });

  test('reads the headers from Node and Fetch header objects', () => {
    const node = {
      'x-ferry-callback-timestamp': '1700000000',
      'x-ferry-callback-nonce': VECTOR.nonce,
      'x-ferry-callback-signature-version': 'v3',
      'x-ferry-callback-signature': VECTOR.signature,
    };
    assert.equal(verifyCallback(VECTOR.secret, readCallbackHeaders(node), VECTOR.body), true);
    const fetchHeaders = new Headers(callbackHeaders(VECTOR.secret, VECTOR.timestamp, VECTOR.nonce, VECTOR.body));
    assert.equal(verifyCallback(VECTOR.secret, readCallbackHeaders(fetchHeaders), VECTOR.body), true);
    const { ['x-ferry-callback-signature']: _s, ...unsigned } = node;
    assert.equal(readCallbackHeaders(unsigned), null);
    assert.equal(CALLBACK_HEADERS.signature, 'X-Ferry-Callback-Signature');
  });
});

describe('callback payload', () => {
  const request = {
    id: '11111111-1111-1111-1111-111111111111',
    template_key: 'cex-withdraw',
    template_version: 3,
    compiled_plan_hash: 'sha256:abc',
    intent: { asset: 'USDC', amount: '100.00' },
    request_state: 'EXECUTING',
    approval_status: 'approved',
    current_frontier: ['withdraw'],
    callback_url: 'http://127.0.0.1:9/cb',
    created_at: new Date('2026-01-02T03:04:05.678Z'),
    updated_at: '2026-01-02T03:05:00.000Z',
  };

  test('has the movement summary and omits node_key unless given', () => {
    const callbackId = '22222222-2222-4222-8222-222222222222';
    const p = buildCallbackPayload({ movement: request, callbackId, eventType: 'request_executing', occurredAt: '2026-01-02T03:05:00.000Z' });
    assert.deepEqual(p, {
      callback_id: callbackId,
      event_type: 'request_executing',
      request_id: request.id,
      request_state: 'EXECUTING',
      occurred_at: '2026-01-02T03:05:00.000Z',
      movement: {
        id: request.id,
        template_key: 'cex-withdraw',
        template_version: 3,
        compiled_plan_hash: 'sha256:abc',
        intent: { asset: 'USDC', amount: '100.00' },
        request_state: 'EXECUTING',
        approval_status: 'approved',
        current_frontier: ['withdraw'],
        created_at: '2026-01-02T03:04:05.678Z',
        updated_at: '2026-01-02T03:05:00.000Z',
      },
    });
    assert.equal('node_key' in p, false);
    const withNode = buildCallbackPayload({ movement: request, callbackId, eventType: 'frontier_advanced', nodeKey: 'withdraw', occurredAt: 'x' });
    assert.equal(withNode.node_key, 'withdraw');
    assert.equal('callback_url' in withNode.movement, false, 'the callback URL is not echoed back');
  });
});

describe('Standard Webhooks signature', () => {
  // The example of the Standard Webhooks spec, recomputed with openssl:
  //   printf '%s' 'msg_p5jXN8AQM9LWM0D4loKWxJek.1614265330.{"test": 2432232314}' \
  //     | openssl dgst -sha256 -mac HMAC -macopt hexkey:<hex of the base64-decoded secret> -binary | base64
  const SPEC = {
    secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
    id: 'msg_p5jXN8AQM9LWM0D4loKWxJek',
    timestamp: 1614265330,
    body: '{"test": 2432232314}',
    signature: 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
  };

  test('matches the spec example and the standardwebhooks library', () => {
    assert.equal(webhookSignatureV1(SPEC.secret, SPEC.id, SPEC.timestamp, SPEC.body), SPEC.signature);
    const lib = new Webhook(SPEC.secret);
    assert.equal(lib.sign(SPEC.id, new Date(SPEC.timestamp * 1000), SPEC.body), SPEC.signature);
  });

  test('a secret from before whsec_ is keyed with its UTF-8 bytes; its whsec_ form verifies with the library', () => {
    // printf '%s' 'cb-1.1700000000.{"a":1}' | openssl dgst -sha256 -hmac 'fcs_vector_secret_0123456789' -binary | base64
    const old = 'fcs_vector_secret_0123456789';
    assert.equal(webhookSignatureV1(old, 'cb-1', 1700000000, '{"a":1}'), 'v1,BKmvfy9OutIrvhyofqOTl2VTMoh7GzCPadQOcmcbVQk=');
    assert.equal(webhookSecretForm(old), `whsec_${Buffer.from(old).toString('base64')}`);
    const now = Math.floor(Date.now() / 1000);
    const h = webhookHeaders([old], 'cb-1', now, '{"a":1}');
    assert.deepEqual(new Webhook(webhookSecretForm(old)).verify('{"a":1}', h), { a: 1 });
    assert.deepEqual(new Webhook(Buffer.from(old, 'utf8'), { format: 'raw' }).verify('{"a":1}', h), { a: 1 });
  });

  test('rotation: one v1 per secret, space-separated, newest first; the library accepts either secret', () => {
    const [fresh, old] = [newWebhookSecret(), newWebhookSecret()];
    assert.match(fresh, /^whsec_[A-Za-z0-9+/]{43}=$/);
    const now = Math.floor(Date.now() / 1000);
    const body = '{"callback_id":"x"}';
    const h = webhookHeaders([fresh, old], 'cb-2', now, body);
    assert.deepEqual(Object.keys(h), ['webhook-id', 'webhook-timestamp', 'webhook-signature']);
    const sigs = h['webhook-signature']!.split(' ');
    assert.deepEqual(sigs, [webhookSignatureV1(fresh, 'cb-2', now, body), webhookSignatureV1(old, 'cb-2', now, body)]);
    for (const s of [fresh, old]) assert.deepEqual(new Webhook(s).verify(body, h), { callback_id: 'x' });
    assert.throws(() => new Webhook(newWebhookSecret()).verify(body, h), WebhookVerificationError, 'another secret');
    assert.throws(() => new Webhook(fresh).verify(body, { ...h, 'webhook-id': 'cb-3' }), WebhookVerificationError, 'the id is signed');
    assert.throws(() => new Webhook(fresh).verify(body, { ...h, 'webhook-timestamp': String(now + 1) }), WebhookVerificationError, 'the timestamp is signed');
    assert.throws(() => webhookSignatureV1(fresh, 'a.b', now, body), /must not contain/);
  });

  test('the legacy headers come only with the setting on', () => {
    const base = { callbackId: 'cb-4', body: '{}', secrets: ['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'], attemptTime: 1700000000, nonce: 'n1' };
    assert.deepEqual(Object.keys(deliveryHeaders({ ...base, legacy: false })).sort(), ['webhook-id', 'webhook-signature', 'webhook-timestamp']);
    assert.deepEqual(Object.keys(deliveryHeaders({ ...base, legacy: true })).sort(), ['Ferry-Signature', 'X-Ferry-Callback-Nonce', 'webhook-id', 'webhook-signature', 'webhook-timestamp']);
    const raw = deliveryHeaders({ ...base, legacy: true, v3: { secret: VECTOR.secret, timestamp: 1600000000 } });
    assert.equal(raw['X-Ferry-Callback-Signature-Version'], 'v3');
    assert.equal(raw['X-Ferry-Callback-Timestamp'], '1600000000', 'v3 keeps the timestamp fixed at creation');
  });
});

describe('callback URL policy', () => {
  const open = {};
  const loopback = { callbackAllowedNetworks: ['127.0.0.0/8', '::1/128'] };

  test('accepts http and https, any host name when no list is set', () => {
    assert.equal(assertCallbackUrlAllowed('https://hooks.example.com/ferry', open).hostname, 'hooks.example.com');
    assert.equal(assertCallbackUrlAllowed('http://127.0.0.1:8080/cb', loopback).port, '8080');
    // A name is checked when a delivery resolves it, not here.
    assert.ok(assertCallbackUrlAllowed('http://localhost/x', open));
  });

  test('refuses malformed URLs and other schemes as VALIDATION_FAILED', () => {
    for (const bad of ['not a url', '', '/relative/path', 'ftp://example.com/x', 'file:///etc/passwd', 'javascript:alert(1)', 'mailto:a@b.c']) {
      assert.throws(
        () => assertCallbackUrlAllowed(bad, open),
        (e: unknown) => e instanceof FerryError && e.code === 'VALIDATION_FAILED' && e.httpStatus === 400,
        bad,
      );
    }
  });

  test('with an allow-list, only listed hosts pass (case-insensitive)', () => {
    const allowed = { callbackAllowedHosts: ['hooks.example.com', '127.0.0.1', '::1'] };
    assert.ok(assertCallbackUrlAllowed('https://HOOKS.Example.com/x', allowed));
    assert.ok(assertCallbackUrlAllowed('https://hooks.example.com./x', allowed));
    // A listed host is delivered to whatever it is, a literal loopback address included.
    assert.ok(assertCallbackUrlAllowed('http://127.0.0.1:3000/x', allowed));
    assert.ok(assertCallbackUrlAllowed('http://[::1]:3000/x', allowed));
    assert.ok(assertCallbackUrlAllowed('https://hooks.example.com/x', { callbackAllowedHosts: ['HOOKS.EXAMPLE.COM'] }));
    for (const bad of ['https://evil.example.com/x', 'https://hooks.example.com.evil.net/x', 'https://example.com/x', 'http://localhost/x', 'http://10.0.0.1/x']) {
      assert.throws(
        () => assertCallbackUrlAllowed(bad, allowed),
        (e: unknown) => e instanceof FerryError && e.code === 'CALLBACK_HOST_NOT_ALLOWED' && e.httpStatus === 422 && e.details.rule === 'FERRY_CALLBACK_ALLOWED_HOSTS',
        bad,
      );
    }
    assert.throws(() => assertCallbackUrlAllowed('https://hooks.example.com/x', { callbackAllowedHosts: [] }), /not in the allowed hosts/);
  });

  test('a literal address a delivery would refuse is refused at creation, by the same rules', () => {
    const cases: Array<[string, string]> = [
      ['http://127.0.0.1:8080/cb', 'loopback'],
      ['http://2130706433/cb', 'loopback'], // the URL parser's reading of 127.0.0.1
      ['http://0x7f.1/cb', 'loopback'],
      ['http://[::1]/cb', 'loopback'],
      ['http://[::ffff:127.0.0.1]/cb', 'loopback'],
      ['http://[64:ff9b::7f00:1]/cb', 'loopback'],
      ['http://[2002:7f00:1::1]/cb', 'loopback'],
      ['http://169.254.169.254/latest/meta-data/', 'link_local'],
      ['http://[2002:a9fe:a9fe::]/x', 'link_local'],
      ['http://10.1.2.3/cb', 'private'],
      ['http://[::ffff:0:10.1.2.3]/cb', 'private'],
      ['http://[::192.168.1.1]/cb', 'private'],
      ['http://[fd00::1]/cb', 'unique_local'],
      ['http://0.0.0.0/cb', 'unspecified'],
    ];
    for (const [url, cls] of cases) {
      assert.throws(
        () => assertCallbackUrlAllowed(url, open),
        (e: unknown) =>
          e instanceof FerryError &&
          e.code === 'CALLBACK_ADDRESS_NOT_ALLOWED' &&
          e.httpStatus === 422 &&
          e.details.address_class === cls &&
          e.details.rule === 'FERRY_CALLBACK_ALLOWED_NETWORKS',
        url,
      );
    }
    // A network an operator allowed is accepted, in IPv4 and its IPv6 forms alike.
    const internal = { callbackAllowedNetworks: ['10.20.0.0/16'] };
    assert.ok(assertCallbackUrlAllowed('http://10.20.0.5/cb', internal));
    assert.ok(assertCallbackUrlAllowed('http://[64:ff9b::a14:5]/cb', internal));
    assert.throws(() => assertCallbackUrlAllowed('http://10.21.0.5/cb', internal), /CALLBACK_ADDRESS_NOT_ALLOWED|not in FERRY_CALLBACK_ALLOWED_NETWORKS/);
    // Public literals, in any form, pass.
    for (const url of ['http://8.8.8.8/cb', 'http://[2606:4700::1]/cb', 'http://[64:ff9b::808:808]/cb', 'http://[2002:808:808::1]/cb']) {
      assert.ok(assertCallbackUrlAllowed(url, open), url);
    }
  });
});

describe('callback secret', () => {
  const dirs: string[] = [];
  after(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });
  const tempDir = async () => {
    const d = await mkdtemp(join(tmpdir(), 'ferry-secret-'));
    dirs.push(d);
    return d;
  };

  test('FERRY_CALLBACK_SECRET wins and nothing is written', async () => {
    const dir = await tempDir();
    assert.equal(await resolveCallbackSecret({ callbackSecret: 'configured-secret-1234' }, dir), 'configured-secret-1234');
    await assert.rejects(stat(join(dir, CALLBACK_SECRET_FILE)), { code: 'ENOENT' });
  });

  test('otherwise one is generated once, kept with mode 0600 and reused', async () => {
    const dir = join(await tempDir(), 'nested', 'data');
    const first = await resolveCallbackSecret({ callbackSecret: undefined }, dir);
    assert.match(first, /^whsec_[A-Za-z0-9+/]{43}=$/, 'a generated secret is a Standard Webhooks one');
    const file = join(dir, CALLBACK_SECRET_FILE);
    assert.equal((await stat(file)).mode & 0o777, 0o600);
    assert.equal((await readFile(file, 'utf8')).trim(), first);
    assert.equal(await resolveCallbackSecret({ callbackSecret: undefined }, dir), first, 'survives a restart');
    const concurrent = await Promise.all([1, 2, 3].map(() => resolveCallbackSecret({ callbackSecret: undefined }, dir)));
    assert.deepEqual(concurrent, [first, first, first]);
  });

  test('a kept file with a loose mode is tightened; an unusable one is refused', async () => {
    const dir = await tempDir();
    const file = join(dir, CALLBACK_SECRET_FILE);
    await writeFile(file, 'a-secret-someone-placed-here\n');
    await chmod(file, 0o644);
    assert.equal(await resolveCallbackSecret({ callbackSecret: undefined }, dir), 'a-secret-someone-placed-here');
    assert.equal((await stat(file)).mode & 0o777, 0o600);
    await writeFile(file, 'short\n');
    await assert.rejects(resolveCallbackSecret({ callbackSecret: undefined }, dir), /no usable callback secret/);
  });
});

describe('callback job ids', () => {
  const id = '22222222-2222-2222-2222-222222222222';
  test('are deterministic uuids, distinct per attempt, redrive and extra key', () => {
    const a = callbackJobId({ callbackId: id, attempts: 0, redriveCount: 0 });
    assert.match(a, /^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.equal(callbackJobId({ callbackId: id, attempts: 0, redriveCount: 0 }), a);
    const others = [
      callbackJobId({ callbackId: id, attempts: 1, redriveCount: 0 }),
      callbackJobId({ callbackId: id, attempts: 0, redriveCount: 1 }),
      callbackJobId({ callbackId: id, attempts: 0, redriveCount: 0, extraKey: 'sweep:1' }),
      callbackJobId({ callbackId: id.replace(/2/g, '3'), attempts: 0, redriveCount: 0 }),
    ];
    assert.equal(new Set([a, ...others]).size, 5);
  });

  test('job data is checked before use', () => {
    assert.deepEqual(parseCallbackJobData({ callbackId: id, attempts: 2, redriveCount: 1 }), {
      callbackId: id,
      attempts: 2,
      redriveCount: 1,
    });
    for (const bad of [null, 'x', {}, { callbackId: id }, { callbackId: 1, attempts: 0, redriveCount: 0 }, { callbackId: id, attempts: 0.5, redriveCount: 0 }]) {
      assert.equal(parseCallbackJobData(bad), null);
    }
  });
});
