/**
 * Registered callback destinations: each signs with its own secret, rotation overlaps old and new,
 * every attempt is signed with its own timestamp (replays are refused by the documented check), a
 * disabled destination is not delivered to, and secrets appear only in their one-time reveal.
 */
import assert from 'node:assert/strict';
import { createHmac, randomUUID, timingSafeEqual } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { after, describe, test } from 'node:test';
import { deliverCallbackOnce, type CallbackDeliveryDeps } from '../src/actors/callback-delivery.ts';
import { enqueueCallback, type CallbackMovementRow } from '../src/callbacks/outbox.ts';
import { ferrySignature, newWebhookSecret, signatureV1, webhookHeaders, webhookSecretForm } from '../src/callbacks/signing.ts';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import { loadConfig } from '../src/config.ts';
import { runCli } from '../src/cli/run.ts';
import { createApp } from '../src/http/app.ts';
import { callbacksForMovement, getCallback } from '../src/persistence/callbacks.ts';
import { withTransaction } from '../src/persistence/db.ts';
import { getMovement } from '../src/persistence/movements.ts';
import { appForFile, FAST_WORKERS } from './helpers/app.ts';
import { loopbackDestinations } from './helpers/destinations.ts';
import { callApi, callerFor, expectStatus, serveApp, type Reply } from './helpers/http.ts';
import { CallbackReceiver, verifyFerrySignature, verifyReceived } from './helpers/receiver.ts';
import { makeTemplateLive } from './helpers/templates.ts';
import { createTokens } from './helpers/tokens.ts';
import { waitFor } from './helpers/wait.ts';

const INSTANCE_SECRET = 'destinations-test-instance-secret-0123';

const env = { FERRY_DATA_DIR: '.ferry/test-destinations', FERRY_CALLBACK_SECRET: INSTANCE_SECRET, FERRY_LOG_LEVEL: 'silent', ...FAST_WORKERS };
const { db, runtime, app } = await appForFile(env, { workers: true });
const rxA = await new CallbackReceiver().listen();
const rxB = await new CallbackReceiver().listen();
const rxLegacy = await new CallbackReceiver().listen();
after(async () => {
  for (const r of [rxA, rxB, rxLegacy]) await r.close();
});

const tokens = await createTokens(db.pool, { requester: 'requester', approver: 'approver', operator: 'operator', admin: 'admin', viewer: 'viewer' });
type Who = keyof typeof tokens;
const call = callerFor(app, tokens);

/** Every answer and audit row so far, to prove no secret leaked into them. */
const answers: string[] = [];
async function callKept(method: string, path: string, who: Who, body?: unknown): Promise<Reply> {
  const r = await call(method, path, who, body);
  answers.push(r.text);
  return r;
}

async function register(name: string, url: string): Promise<{ id: string; secret: string }> {
  const r = await call('POST', '/v3/callback-destinations', 'operator', { name, url });
  expectStatus(r, 201);
  assert.match(r.body.secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
  return { id: r.body.destination.id, secret: r.body.secret };
}

const template = {
  template_key: 'dest-one-step',
  nodes: [{ node_key: 'a', node_kind: 'action', action_type: 'sim_action', executor_binding: 'exec.sim.action' }],
};
// A template goes live through its proposal: proposed, approved by a second principal, finalized.
await makeTemplateLive(app, db.pool, template, { proposer: tokens.operator.token, approver: tokens.approver.token });

async function createMovement(extra: Record<string, unknown>): Promise<any> {
  const r = await call('POST', '/v3/movements', 'requester', { template_key: template.template_key, intent: { amount: '1' }, ...extra });
  expectStatus(r, 201);
  return r.body.movement;
}

/** One callback on a movement, written without a queue job: only deliverCallbackOnce sends it. */
async function callbackOn(movementId: string): Promise<string> {
  const request = (await getMovement(db.pool, movementId)) as unknown as CallbackMovementRow;
  return withTransaction(db.pool, (client) =>
    enqueueCallback(client, { movement: request, eventType: 'request_test', occurredAt: new Date().toISOString(), maxAttempts: 5 }),
  );
}

const deliveryDeps: CallbackDeliveryDeps = { pool: db.pool, secret: INSTANCE_SECRET, timeoutMs: 5_000, destinations: loopbackDestinations() };

const A = await register('receiver-a', rxA.url());
const B = await register('receiver-b', rxB.url());

describe('the signature format', () => {
  test('Ferry-Signature matches the hand-computed vectors, one v1 per secret, newest first', () => {
    // printf '%s' '1700000000.<body>' | openssl dgst -sha256 -hmac <secret>
    const body = '{"event_type":"request_completed"}';
    const fresh = '0927a7e2fc8870cc469ea55a126ab9e731c74cfa69c092139489395011e5f1cf';
    const old = '135eca294828aaa1a3279909ec15a2987ee69d3d58e55b57286b30d28384ac9b';
    assert.equal(signatureV1('fcs_vector_secret_0123456789', 1700000000, body), fresh);
    assert.equal(
      ferrySignature(['fcs_vector_secret_0123456789', 'fcs_vector_old_secret_987654321'], 1700000000, Buffer.from(body)),
      `t=1700000000,v1=${fresh},v1=${old}`,
    );
    const at = { now: 1700000010 };
    assert.deepEqual(verifyFerrySignature(`t=1700000000,v1=${fresh}`, body, ['fcs_vector_secret_0123456789'], at), { ok: true, timestamp: 1700000000 });
    assert.equal(verifyFerrySignature(`t=1700000001,v1=${fresh}`, body, ['fcs_vector_secret_0123456789'], at).ok, false, 'the timestamp is signed');
    assert.equal(verifyFerrySignature(`t=1700000000,v1=${fresh}`, `${body} `, ['fcs_vector_secret_0123456789'], at).ok, false, 'the body is signed');
    assert.deepEqual(verifyFerrySignature(undefined, body, ['x'], at), { ok: false, reason: 'missing' });
    assert.deepEqual(verifyFerrySignature('v1=abc', body, ['x'], at), { ok: false, reason: 'malformed' });
  });

  test('the receiver example in docs/security.md verifies a fresh delivery and refuses a stale or forged one', async () => {
    const doc = await readFile(new URL('../docs/security.md', import.meta.url), 'utf8');
    const code = /```js\n([\s\S]*?)```/.exec(doc)?.[1];
    assert.ok(code, 'docs/security.md has a js example');
    const source = code.replace(/^import .*$/m, '');
    const verifyCallback = new Function('Webhook', `${source}\nreturn verifyCallback;`)(Webhook);
    const body = '{"event_type":"request_completed"}';
    const now = Math.floor(Date.now() / 1000);
    const [secret, other] = [newWebhookSecret(), newWebhookSecret()];
    assert.deepEqual(verifyCallback(body, webhookHeaders([other, secret], 'cb-doc', now, body), [secret]), { event_type: 'request_completed' });
    assert.deepEqual(verifyCallback(body, webhookHeaders([secret], 'cb-doc', now, body), [other, secret]), { event_type: 'request_completed' }, 'any held secret');
    assert.equal(verifyCallback(body, webhookHeaders([secret], 'cb-doc', now - 301, body), [secret]), null, 'outside the window');
    assert.equal(verifyCallback(body, webhookHeaders([other], 'cb-doc', now, body), [secret]), null, 'another secret');
    assert.equal(verifyCallback(`${body} `, webhookHeaders([secret], 'cb-doc', now, body), [secret]), null, 'another body');
    assert.equal(verifyCallback(body, { ...webhookHeaders([secret], 'cb-doc', now, body), 'webhook-id': 'cb-other' }, [secret]), null, 'another id');
  });
});

describe('destinations through the API', () => {
  test('each destination signs with its own secret: receiver B cannot verify a callback meant for A', async () => {
    const m = await createMovement({ callback_destination: 'receiver-a' });
    const row = await getMovement(db.pool, m.id);
    assert.equal(row?.callback_url, rxA.url(), 'the movement reports to the destination URL');
    const approved = await call('POST', `/v3/movements/${m.id}/approve`, 'approver', { compiled_plan_hash: m.compiled_plan_hash });
    expectStatus(approved, 200);
    await waitFor('the movement to complete and its callbacks to be sent', async () => {
      const cbs = await callbacksForMovement(db.pool, m.id);
      // The completion's callback is queued with the commit that completes the movement, or just after it.
      return cbs.some((c) => c.event_type === 'request_completed') && cbs.every((c) => c.status === 'sent') && (await getMovement(db.pool, m.id))?.request_state === 'COMPLETED';
    });
    const cbs = await callbacksForMovement(db.pool, m.id);
    assert.ok(cbs.every((c) => c.destination_id === A.id), 'each callback names destination A');
    const got = rxA.received.filter((r) => JSON.parse(r.body.toString()).request_id === m.id);
    assert.equal(got.length, cbs.length);
    for (const r of got) {
      assert.deepEqual(verifyReceived(r, [A.secret]).ok, true, 'A verifies with its secret');
      assert.deepEqual(verifyReceived(r, [B.secret]), { ok: false, reason: 'no_matching_signature' }, 'B cannot');
      assert.deepEqual(verifyReceived(r, [INSTANCE_SECRET]), { ok: false, reason: 'no_matching_signature' }, 'nor the instance secret');
      assert.equal(r.headers['x-ferry-callback-signature'], undefined, 'no instance-secret v3 signature on a destination callback');
      assert.equal(r.headers['x-ferry-callback-nonce'], cbs.find((c) => c.payload_body === r.body.toString())?.callback_nonce);
    }
    assert.equal(rxB.received.length, 0, 'nothing reached B');
  });

  test('a raw callback_url still works as before, and also carries a Ferry-Signature with the instance secret', async () => {
    const m = await createMovement({ callback_url: rxLegacy.url() });
    const id = await callbackOn(m.id);
    assert.equal((await getCallback(db.pool, id))?.destination_id, null);
    assert.equal(await deliverCallbackOnce(deliveryDeps, id), 'sent');
    const r = rxLegacy.received.at(-1)!;
    assert.equal(r.headers['x-ferry-callback-signature-version'], 'v3');
    assert.equal(verifyReceived(r, [INSTANCE_SECRET]).ok, true);
  });

  test('rotation: during the overlap both secrets verify; once the overlap ends only the new one does', async () => {
    const m = await createMovement({ callback_destination: A.id });
    const rotated = await call('POST', `/v3/callback-destinations/receiver-a/rotate-secret`, 'operator', { overlap_seconds: 3600 });
    expectStatus(rotated, 200);
    const fresh = rotated.body.secret as string;
    assert.match(fresh, /^whsec_[A-Za-z0-9+/]{43}=$/);
    assert.notEqual(fresh, A.secret);
    const ends = Date.parse(rotated.body.destination.previous_secrets_expire_at);
    assert.ok(Math.abs(ends - Date.now() - 3600_000) < 60_000, 'the overlap ends in an hour');

    const during = await callbackOn(m.id);
    assert.equal(await deliverCallbackOnce(deliveryDeps, during), 'sent');
    const r1 = rxA.received.at(-1)!;
    assert.equal(String(r1.headers['ferry-signature']).match(/v1=/g)?.length, 2, 'two signatures during the overlap');
    assert.equal(verifyReceived(r1, [fresh]).ok, true, 'the new secret verifies');
    assert.equal(verifyReceived(r1, [A.secret]).ok, true, 'the old secret still verifies');

    // The overlap has run out: backdate the old secret's end instead of waiting an hour.
    await db.pool.query(
      `UPDATE callback_destination_secrets SET expires_at = now() - interval '1 second' WHERE destination_id = $1 AND expires_at IS NOT NULL`,
      [A.id],
    );
    const shown = await callKept('GET', `/v3/callback-destinations/${A.id}`, 'operator');
    expectStatus(shown, 200);
    assert.equal(shown.body.destination.previous_secrets_expire_at, null);

    const afterOverlap = await callbackOn(m.id);
    assert.equal(await deliverCallbackOnce(deliveryDeps, afterOverlap), 'sent');
    const r2 = rxA.received.at(-1)!;
    assert.equal(String(r2.headers['ferry-signature']).match(/v1=/g)?.length, 1, 'one signature after the overlap');
    assert.equal(verifyReceived(r2, [fresh]).ok, true);
    assert.deepEqual(verifyReceived(r2, [A.secret]), { ok: false, reason: 'no_matching_signature' }, 'the old secret no longer verifies');
    A.secret = fresh;
  });

  test('a second rotation inside an overlap: every valid secret signs, and none outlives the newest overlap', async () => {
    const C = await register('receiver-c', rxA.url('/c'));
    const m = await createMovement({ callback_destination: 'receiver-c' });
    const second = await call('POST', '/v3/callback-destinations/receiver-c/rotate-secret', 'operator', { overlap_seconds: 3600 });
    expectStatus(second, 200);
    const third = await call('POST', `/v3/callback-destinations/${C.id}/rotate-secret`, 'admin', { overlap_seconds: 60 });
    expectStatus(third, 200);
    const ends = Date.parse(third.body.destination.previous_secrets_expire_at);
    assert.ok(ends - Date.now() <= 60_000 && ends - Date.now() > 0, 'the hour-long overlap was cut to the new one');
    const { rows } = await db.pool.query<{ expires_at: Date | null }>(
      'SELECT expires_at FROM callback_destination_secrets WHERE destination_id = $1 ORDER BY created_at',
      [C.id],
    );
    assert.equal(rows.length, 3);
    assert.equal(rows[2].expires_at, null, 'one current secret');
    assert.ok(rows.slice(0, 2).every((r) => r.expires_at !== null && r.expires_at.getTime() <= ends));

    const id = await callbackOn(m.id);
    assert.equal(await deliverCallbackOnce(deliveryDeps, id), 'sent');
    const r = rxA.received.at(-1)!;
    assert.equal(String(r.headers['ferry-signature']).match(/v1=/g)?.length, 3);
    for (const secret of [C.secret, second.body.secret, third.body.secret]) assert.equal(verifyReceived(r, [secret]).ok, true);
    const [t, newest] = String(r.headers['ferry-signature']).split(',');
    assert.equal(newest, `v1=${signatureV1(third.body.secret, Number(t.slice(2)), r.body)}`, 'the newest secret signs first');
    await call('POST', '/v3/callback-destinations/receiver-c/disable', 'operator', {});
  });

  test('every attempt is signed with its own time; a replay of an old delivery fails the documented check', async () => {
    const m = await createMovement({ callback_destination: 'receiver-a' });
    const id = await callbackOn(m.id);
    // Written an hour ago, as far as the row knows: the signature's t must still be the attempt's time.
    await db.pool.query('UPDATE callback_outbox SET callback_timestamp = callback_timestamp - 3600 WHERE id = $1', [id]);
    const createdAt = Number((await getCallback(db.pool, id))!.callback_timestamp);
    rxA.status = 500;
    try {
      assert.equal(await deliverCallbackOnce(deliveryDeps, id), 'retry');
    } finally {
      rxA.status = 200;
    }
    const first = rxA.received.at(-1)!;
    const t1 = verifyReceived(first, [A.secret]);
    assert.ok(t1.ok, 'signed with the time of the attempt, not of the callback');
    assert.ok(t1.timestamp >= createdAt + 3600 - 5);
    assert.equal(await deliverCallbackOnce(deliveryDeps, id), 'sent');
    const second = rxA.received.at(-1)!;
    assert.ok(verifyReceived(second, [A.secret]).ok, 'the retry verifies on arrival');
    assert.equal(second.body.toString(), first.body.toString(), 'same body');
    assert.equal(second.headers['x-ferry-callback-nonce'], first.headers['x-ferry-callback-nonce'], 'same nonce, to dedupe on');

    // An attacker who captured the first delivery replays it six minutes later.
    const sixMinutesLater = t1.timestamp + 360;
    assert.deepEqual(verifyReceived(first, [A.secret], { now: sixMinutesLater }), { ok: false, reason: 'too_old' });
    assert.deepEqual(verifyReceived(first, [A.secret], { now: t1.timestamp + 299 }), { ok: true, timestamp: t1.timestamp }, 'inside the window');
    // Re-stamping the replay does not help: the timestamp is under the signature.
    const v1 = String(first.headers['ferry-signature']).split(',').filter((p) => p.startsWith('v1='));
    const restamped = [`t=${sixMinutesLater}`, ...v1].join(',');
    assert.deepEqual(verifyFerrySignature(restamped, first.body, [A.secret], { now: sixMinutesLater }), { ok: false, reason: 'no_matching_signature' });
  });

  test('a disabled destination stops deliveries: its callbacks dead-letter unsent and movements cannot name it', async () => {
    const m = await createMovement({ callback_destination: 'receiver-b' });
    const pending = await callbackOn(m.id);
    const disabled = await callKept('POST', '/v3/callback-destinations/receiver-b/disable', 'admin', {});
    expectStatus(disabled, 200);
    assert.equal(disabled.body.destination.status, 'disabled');
    assert.equal(disabled.body.destination.disabled_by, `principal:${tokens.admin.principal_id}`);
    expectStatus(await call('POST', '/v3/callback-destinations/receiver-b/disable', 'admin', {}), 200);

    const before = rxB.received.length;
    assert.equal(await deliverCallbackOnce(deliveryDeps, pending), 'dlq');
    const row = await getCallback(db.pool, pending);
    assert.equal(row?.status, 'dlq');
    assert.equal(row?.last_error, 'destination_disabled');
    const listed = await call('GET', `/v3/callbacks?status=dlq&movement_id=${m.id}`, 'operator');
    expectStatus(listed, 200);
    assert.deepEqual(
      listed.body.callbacks.map((c: any) => [c.id, c.destination_id, c.last_error]),
      [[pending, B.id, 'destination_disabled']],
      'operators see the dead letter and its destination',
    );
    assert.equal(rxB.received.length, before, 'nothing was sent');

    const refused = await call('POST', '/v3/movements', 'requester', { template_key: template.template_key, intent: { amount: '1' }, callback_destination: 'receiver-b' });
    expectStatus(refused, 409, 'CALLBACK_DESTINATION_DISABLED');
    expectStatus(await call('POST', `/v3/callback-destinations/${B.id}/rotate-secret`, 'operator', {}), 409, 'CALLBACK_DESTINATION_DISABLED');
  });

  test('concurrent writes: one registration per name, rotations one after another with one current secret', async () => {
    const creates = await Promise.all(
      [1, 2, 3, 4].map(() => call('POST', '/v3/callback-destinations', 'operator', { name: 'raced', url: rxA.url('/raced') })),
    );
    assert.deepEqual(creates.map((r) => r.status).sort(), [201, 409, 409, 409]);
    const rotations = await Promise.all([1, 2, 3, 4].map(() => call('POST', '/v3/callback-destinations/raced/rotate-secret', 'operator', {})));
    assert.deepEqual(rotations.map((r) => r.status), [200, 200, 200, 200]);
    const { rows } = await db.pool.query<{ current: number; total: number }>(
      `SELECT count(*) FILTER (WHERE s.expires_at IS NULL)::int AS current, count(*)::int AS total
         FROM callback_destination_secrets s JOIN callback_destinations d ON d.id = s.destination_id WHERE d.name = 'raced'`,
    );
    assert.deepEqual(rows[0], { current: 1, total: 5 });
    expectStatus(await call('POST', '/v3/callback-destinations/raced/disable', 'operator', {}), 200);
  });

  test('bad input is a 4xx with a code', async () => {
    const post = (body: unknown, who: Who = 'operator') => call('POST', '/v3/callback-destinations', who, body);
    expectStatus(await post({ name: 'Upper', url: rxA.url() }), 400, 'VALIDATION_FAILED');
    expectStatus(await post({ name: '00000000-0000-4000-8000-000000000000', url: rxA.url() }), 400, 'VALIDATION_FAILED');
    expectStatus(await post({ name: 'ftp-one', url: 'ftp://example.com/x' }), 400, 'VALIDATION_FAILED');
    expectStatus(await post({ name: 'creds', url: 'https://user:pw@example.com/x' }), 400, 'VALIDATION_FAILED');
    expectStatus(await post({ name: 'extra', url: rxA.url(), secret: 'mine' }), 400, 'VALIDATION_FAILED');
    expectStatus(await post({ name: 'receiver-a', url: rxB.url() }), 409, 'CALLBACK_DESTINATION_EXISTS');
    expectStatus(await post({ name: 'by-requester', url: rxA.url() }, 'requester'), 403, 'FORBIDDEN');
    expectStatus(await call('GET', '/v3/callback-destinations', 'viewer'), 403, 'FORBIDDEN');
    expectStatus(await call('GET', '/v3/callback-destinations/nope', 'operator'), 404, 'NOT_FOUND');
    expectStatus(await call('POST', '/v3/callback-destinations/nope/disable', 'operator', {}), 404, 'NOT_FOUND');
    expectStatus(await call('POST', '/v3/callback-destinations/receiver-a/rotate-secret', 'operator', { overlap_seconds: -1 }), 400, 'VALIDATION_FAILED');
    expectStatus(await call('POST', '/v3/callback-destinations/receiver-a/rotate-secret', 'operator', { overlap_seconds: 1e9 }), 400, 'VALIDATION_FAILED');

    const movement = (extra: Record<string, unknown>) =>
      call('POST', '/v3/movements', 'requester', { template_key: template.template_key, intent: { amount: '1' }, ...extra });
    expectStatus(await movement({ callback_destination: 'no-such-receiver' }), 422, 'CALLBACK_DESTINATION_UNKNOWN');
    expectStatus(await movement({ callback_destination: 'receiver-a', callback_url: rxA.url() }), 400, 'VALIDATION_FAILED');

    const allowList = createApp({ pool: db.pool, config: loadConfig({ ...env, FERRY_CALLBACK_ALLOWED_HOSTS: 'hooks.example.com' }), runtime });
    const r = await callApi(allowList, 'POST', '/v3/callback-destinations', tokens.operator.token, { name: 'not-listed', url: rxA.url() });
    expectStatus(r, 422, 'CALLBACK_HOST_NOT_ALLOWED');
    // A literal address deliveries would refuse (outside FERRY_CALLBACK_ALLOWED_NETWORKS) is refused now.
    const literal = await call('POST', '/v3/callback-destinations', 'operator', { name: 'metadata', url: 'http://169.254.169.254/latest/' });
    expectStatus(literal, 422, 'CALLBACK_ADDRESS_NOT_ALLOWED');
    assert.equal(literal.body.error.details.address_class, 'link_local');
    expectStatus(await call('POST', '/v3/callback-destinations', 'operator', { name: 'nat64-loop', url: 'http://[64:ff9b::10.0.0.1]/x' }), 422, 'CALLBACK_ADDRESS_NOT_ALLOWED');
  });

  test('secrets appear only in their one-time reveal: not in lists, shows, audit events or later answers', async () => {
    const list = await callKept('GET', '/v3/callback-destinations', 'admin');
    expectStatus(list, 200);
    assert.deepEqual(list.body.destinations.map((d: { name: string }) => d.name), ['raced', 'receiver-a', 'receiver-b', 'receiver-c']);
    await callKept('GET', '/v3/callback-destinations/receiver-a', 'operator');
    const { rows: secrets } = await db.pool.query<{ secret: string }>('SELECT secret FROM callback_destination_secrets');
    assert.ok(secrets.length >= 3);
    const { rows: audit } = await db.pool.query<{ action: string; text: string }>(
      // Promoted or not yet: the promoter moves rows from the outbox into the chain as it runs.
      `SELECT action, text FROM (
         SELECT action, occurred_at, row_to_json(e)::text AS text FROM audit_events e WHERE entity_type = 'callback_destination'
         UNION ALL
         SELECT action, occurred_at, row_to_json(o)::text AS text FROM audit_outbox o WHERE entity_type = 'callback_destination'
       ) a ORDER BY occurred_at`,
    );
    assert.deepEqual(
      audit.map((a) => a.action),
      [
        'callback_destination.create',
        'callback_destination.create',
        'callback_destination.rotate_secret',
        'callback_destination.create',
        'callback_destination.rotate_secret',
        'callback_destination.rotate_secret',
        'callback_destination.disable',
        'callback_destination.disable',
        'callback_destination.create',
        'callback_destination.rotate_secret',
        'callback_destination.rotate_secret',
        'callback_destination.rotate_secret',
        'callback_destination.rotate_secret',
        'callback_destination.disable',
      ],
      'create, rotate and disable wrote audit events; the repeated disable did not',
    );
    for (const { secret } of secrets) {
      for (const text of [...answers, ...audit.map((a) => a.text)]) assert.ok(!text.includes(secret), 'a secret leaked');
    }
  });
});

describe('ferry callbacks destinations', () => {
  test('create, list, show, rotate-secret and disable through the API, printing each secret once', async () => {
    // The CLI is a client of the HTTP API: serve the app on loopback for it.
    const { url, stop } = await serveApp(app);
    try {
      const ferry = async (args: string[], who: Who = 'operator') => {
        const out: string[] = [];
        const err: string[] = [];
        const code = await runCli(args, {
          env: { FERRY_URL: url, FERRY_TOKEN: tokens[who].token },
          io: { out: (t) => void out.push(t), err: (t) => void err.push(t) },
        });
        return { code, out: out.join('\n'), err: err.join('\n') };
      };
      const made = await ferry(['callbacks', 'destinations', 'create', '--name', 'cli-receiver', '--callback-url', rxA.url('/cli')]);
      assert.equal(made.code, 0, made.err);
      const secret = /whsec_[A-Za-z0-9+/]{43}=/.exec(made.out)?.[0];
      assert.ok(secret, made.out);

      const listed = await ferry(['callbacks', 'destinations', 'list']);
      assert.equal(listed.code, 0, listed.err);
      assert.match(listed.out, /cli-receiver\s+active/);
      assert.ok(!listed.out.includes(secret));

      const rotated = await ferry(['callbacks', 'destinations', 'rotate-secret', 'cli-receiver', '--overlap-seconds', '60', '--json']);
      assert.equal(rotated.code, 0, rotated.err + rotated.out);
      const body = JSON.parse(rotated.out);
      assert.match(body.secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
      assert.notEqual(body.secret, secret);
      assert.ok(body.destination.previous_secrets_expire_at);

      const shown = await ferry(['callbacks', 'destinations', 'show', 'cli-receiver']);
      assert.equal(shown.code, 0, shown.err);
      assert.match(shown.out, /overlap until\s+\d{4}-/);
      assert.ok(!shown.out.includes(secret) && !shown.out.includes(body.secret));

      const refused = await ferry(['callbacks', 'destinations', 'disable', 'cli-receiver'], 'requester');
      assert.equal(refused.code, 1);
      assert.match(refused.err, /FORBIDDEN/);
      const disabled = await ferry(['callbacks', 'destinations', 'disable', 'cli-receiver']);
      assert.equal(disabled.code, 0, disabled.err);
      assert.match(disabled.out, /is disabled/);
      const usage = await ferry(['callbacks', 'destinations', 'rotate-secret', 'cli-receiver', '--overlap-seconds', 'soon']);
      assert.equal(usage.code, 2);
    } finally {
      await stop();
    }
  });
});

describe('Standard Webhooks: a receiver verifies with the standardwebhooks library', () => {
  /** The three Standard Webhooks headers of a recorded request, as the library takes them. */
  const webhookHeadersOf = (r: { headers: Record<string, unknown> }) => ({
    'webhook-id': String(r.headers['webhook-id']),
    'webhook-timestamp': String(r.headers['webhook-timestamp']),
    'webhook-signature': String(r.headers['webhook-signature']),
  });

  test('a real delivery verifies; webhook-id is the body\'s callback_id, kept on a retry; a replay under another id fails', async () => {
    const D = await register('receiver-sw', rxA.url('/sw'));
    const m = await createMovement({ callback_destination: 'receiver-sw' });
    const id = await callbackOn(m.id);
    rxA.status = 500;
    try {
      assert.equal(await deliverCallbackOnce(deliveryDeps, id), 'retry');
    } finally {
      rxA.status = 200;
    }
    const first = rxA.received.at(-1)!;
    assert.equal(await deliverCallbackOnce(deliveryDeps, id), 'sent');
    const r = rxA.received.at(-1)!;
    const headers = webhookHeadersOf(r);
    const payload = new Webhook(D.secret).verify(r.body.toString('utf8'), headers) as { callback_id: string; request_id: string };
    assert.equal(headers['webhook-id'], id, 'webhook-id is the callback id');
    assert.equal(payload.callback_id, id, 'the body carries the callback id');
    assert.equal(payload.request_id, m.id);
    assert.equal(webhookHeadersOf(first)['webhook-id'], id, 'the same id on the retry: receivers dedupe on it');
    assert.equal(new Webhook(D.secret).verify(first.body, webhookHeadersOf(first)) !== undefined, true, 'the first attempt verified too');

    // A captured delivery replayed inside the window under a fresh id, to slip past a receiver's dedupe.
    assert.throws(() => new Webhook(D.secret).verify(r.body, { ...headers, 'webhook-id': randomUUID() }), WebhookVerificationError);
    // Or re-stamped to look new.
    assert.throws(() => new Webhook(D.secret).verify(r.body, { ...headers, 'webhook-timestamp': String(Number(headers['webhook-timestamp']) + 1) }), WebhookVerificationError);
    // Another destination's secret, or the instance secret, does not verify.
    assert.throws(() => new Webhook(A.secret).verify(r.body, headers), WebhookVerificationError);
    assert.throws(() => new Webhook(webhookSecretForm(INSTANCE_SECRET)).verify(r.body, headers), WebhookVerificationError);
  });

  test('during a rotation the library verifies with the old or the new secret', async () => {
    const D = await register('receiver-sw-rotating', rxA.url('/swr'));
    const m = await createMovement({ callback_destination: D.id });
    const rotated = await call('POST', `/v3/callback-destinations/${D.id}/rotate-secret`, 'operator', { overlap_seconds: 600 });
    expectStatus(rotated, 200);
    const id = await callbackOn(m.id);
    assert.equal(await deliverCallbackOnce(deliveryDeps, id), 'sent');
    const r = rxA.received.at(-1)!;
    const headers = webhookHeadersOf(r);
    assert.equal(headers['webhook-signature'].split(' ').length, 2, 'two v1 signatures, space-separated');
    for (const secret of [rotated.body.secret, D.secret]) assert.ok(new Webhook(secret).verify(r.body, headers));
  });

  test('a raw callback_url verifies with the whsec_ form of the instance secret', async () => {
    const m = await createMovement({ callback_url: rxLegacy.url() });
    const id = await callbackOn(m.id);
    assert.equal(await deliverCallbackOnce(deliveryDeps, id), 'sent');
    const r = rxLegacy.received.at(-1)!;
    const payload = new Webhook(webhookSecretForm(INSTANCE_SECRET)).verify(r.body, webhookHeadersOf(r)) as { callback_id: string };
    assert.equal(payload.callback_id, id);
    assert.equal(r.headers['x-ferry-callback-signature-version'], 'v3', 'legacy headers still sent by default');
    assert.ok(r.headers['ferry-signature']);
  });

  test('with the legacy headers off only the Standard Webhooks headers are sent', async () => {
    const D = await register('receiver-sw-only', rxA.url('/swo'));
    const m = await createMovement({ callback_destination: D.id });
    const id = await callbackOn(m.id);
    assert.equal(await deliverCallbackOnce({ ...deliveryDeps, legacyHeaders: false }, id), 'sent');
    const r = rxA.received.at(-1)!;
    for (const h of ['ferry-signature', 'x-ferry-callback-nonce', 'x-ferry-callback-signature']) assert.equal(r.headers[h], undefined, h);
    assert.ok(new Webhook(D.secret).verify(r.body, webhookHeadersOf(r)));
    assert.equal(loadConfig({ ...env }).callbackLegacyHeaders, true, 'on by default for this release');
    assert.equal(loadConfig({ ...env, FERRY_CALLBACK_LEGACY_HEADERS: 'false' }).callbackLegacyHeaders, false);
  });
});
