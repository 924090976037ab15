/**
 * Operator channels made through the API (/v3/operator-channels): an admin adds a signed webhook and
 * a Slack-style channel, and the notification dispatcher delivers to both (real HTTP receivers on
 * loopback) beside a channel of FERRY_NOTIFY_CHANNELS, which is listed read-only. A secret goes in
 * and never comes out: not in an answer, an audit event or a log line. A disabled channel is sent
 * nothing, then or later. Bad input is a 4xx with a code; roles other than admin get 403.
 */
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import pino from 'pino';
import { Webhook } from 'standardwebhooks';
import { runNotificationDispatcher } from '../src/sweeps/notification-dispatcher.ts';
import { newWebhookSecret } from '../src/callbacks/signing.ts';
import { deliveriesOf, insertAttention } from '../src/persistence/notifications.ts';
import { appForFile } from './helpers/app.ts';
import { loopbackDestinations, LOOPBACK_NETWORKS } from './helpers/destinations.ts';
import { callerFor, expectStatus, type Reply } from './helpers/http.ts';
import { CallbackReceiver } from './helpers/receiver.ts';
import { createTokens } from './helpers/tokens.ts';

const configured = await new CallbackReceiver().listen();
const configSecret = newWebhookSecret();
const { db, app, config } = await appForFile(
  {
    FERRY_CALLBACK_ALLOWED_NETWORKS: LOOPBACK_NETWORKS,
    FERRY_NOTIFY_ENABLED: 'true',
    FERRY_NOTIFY_CHANNELS: JSON.stringify([{ name: 'cfg-hook', kind: 'webhook', url: configured.url('/cfg'), secret: configSecret }]),
  },
  { workers: false },
);
after(() => configured.close());
const tokens = await createTokens(db.pool, { admin: 'admin', operator: 'operator', viewer: 'viewer', approver: 'approver', requester: 'requester' });
const call = callerFor(app, tokens);
const destinations = loopbackDestinations();
const logLines: string[] = [];
const log = pino({ level: 'debug' }, { write: (line: string) => void logLines.push(line) });
const run = () => runNotificationDispatcher({ pool: db.pool, config, log, destinations }, { batchSize: 50, maxRunMs: 0 });

/** Every answer of this file, to look for secrets in. */
const answers: Reply[] = [];
const admin = async (method: string, path: string, body?: unknown) => {
  const r = await call(method, path, 'admin', body);
  answers.push(r);
  return r;
};
const secrets: string[] = [configSecret];
let seq = 0;
const attention = (dedupKey = `k${++seq}`) =>
  insertAttention(db.pool, { kind: 'drift', sourceKey: `channels-test:${++seq}`, dedupKey, summary: `event ${seq}`, details: {} }).then((a) => a!);

describe('operator channels through the API', () => {
  test('an admin adds a webhook and a Slack-style channel; the dispatcher delivers to them and to the configured one', async (t) => {
    const hook = await new CallbackReceiver().listen();
    const slack = await new CallbackReceiver().listen();
    t.after(async () => {
      await hook.close();
      await slack.close();
    });
    const secret = newWebhookSecret();
    secrets.push(secret);
    const made = await admin('POST', '/v3/operator-channels', { name: 'ops-hook', kind: 'webhook', url: hook.url('/ferry?key=abc'), secret, rate_limit_per_minute: 60 });
    expectStatus(made, 201);
    assert.equal(made.body.channel.source, 'api');
    assert.equal(made.body.channel.has_secret, true);
    assert.equal(made.body.channel.rate_limit_per_minute, 60);
    assert.equal(made.body.channel.dedup_seconds, 3600, 'the default');
    assert.equal(made.body.channel.url, hook.url('/ferry?…'), 'the query is not shown');
    assert.ok(!('secret' in made.body.channel));
    const s = await admin('POST', '/v3/operator-channels', { name: 'ops-slack', kind: 'slack', url: slack.url('/services/T0/B0/slacktoken123') });
    expectStatus(s, 201);
    assert.equal(s.body.channel.url, `http://127.0.0.1:${slack.port}/…`, "a Slack URL's path is its token: only the origin is shown");
    assert.equal(s.body.channel.has_secret, false);

    const listed = await admin('GET', '/v3/operator-channels');
    expectStatus(listed, 200);
    assert.deepEqual(
      listed.body.channels.map((c: any) => [c.name, c.kind, c.source, c.editable, c.has_secret]),
      [
        ['cfg-hook', 'webhook', 'config', false, true],
        ['ops-hook', 'webhook', 'api', true, true],
        ['ops-slack', 'slack', 'api', true, false],
      ],
    );
    expectStatus(await admin('GET', '/v3/operator-channels/cfg-hook'), 200);
    expectStatus(await admin('GET', '/v3/operator-channels/ops-slack'), 200);
    expectStatus(await admin('GET', '/v3/operator-channels/nobody'), 404, 'NOT_FOUND');

    await run(); // every channel starts at the newest event
    const e = await attention();
    const r = await run();
    assert.equal(r.delivered, 3);
    assert.equal(hook.received.length, 1);
    assert.equal(hook.received[0].url, '/ferry?key=abc', 'the stored URL is the one delivered to');
    const got = hook.received[0];
    const body = new Webhook(secret).verify(got.body.toString(), got.headers as Record<string, string>) as Record<string, unknown>;
    assert.equal(body.attention_id, String(e.id));
    assert.throws(() => new Webhook(configSecret).verify(got.body.toString(), got.headers as Record<string, string>), "signed with the channel's own secret");
    assert.deepEqual(JSON.parse(slack.received[0].body.toString()), { text: `Ferry attention (drift): ${e.summary}` });
    assert.equal(configured.received.length, 1);
    const rows = (await deliveriesOf(db.pool)).filter((d) => d.attention_id === e.id);
    assert.deepEqual(rows.map((d) => [d.channel, d.status]).sort(), [['cfg-hook', 'delivered'], ['ops-hook', 'delivered'], ['ops-slack', 'delivered']]);

    // A new secret replaces the old one at once.
    const rotated = newWebhookSecret();
    secrets.push(rotated);
    const changed = await admin('PATCH', '/v3/operator-channels/ops-hook', { secret: rotated });
    expectStatus(changed, 200);
    await attention();
    await run();
    assert.equal(hook.received.length, 2);
    const second = hook.received[1];
    assert.ok(new Webhook(rotated).verify(second.body.toString(), second.headers as Record<string, string>));
    assert.throws(() => new Webhook(secret).verify(second.body.toString(), second.headers as Record<string, string>));
  });

  test('a disabled channel is sent nothing, not even later; enabled again it starts at the next event', async (t) => {
    const rx = await new CallbackReceiver().listen();
    t.after(() => rx.close());
    expectStatus(await admin('POST', '/v3/operator-channels', { name: 'toggle', kind: 'slack', url: rx.url('/services/x') }), 201);
    await run();
    await attention();
    await run();
    assert.equal(rx.received.length, 1);

    // One delivery pending (the receiver fails it), then the channel is disabled.
    rx.status = 503;
    await attention();
    await run();
    assert.equal(rx.received.length, 2);
    const pending = (await deliveriesOf(db.pool, { channel: 'toggle' })).find((d) => d.status === 'pending')!;
    assert.ok(pending, 'a retry is pending');
    rx.status = 200;
    const off = await admin('PATCH', '/v3/operator-channels/toggle', { enabled: false });
    expectStatus(off, 200);
    assert.equal(off.body.channel.enabled, false);
    const settled = (await deliveriesOf(db.pool, { channel: 'toggle' })).find((d) => d.id === pending.id)!;
    assert.equal(settled.status, 'failed');
    assert.equal(settled.last_error, 'channel_disabled');

    await run();
    const toConfigured = configured.received.length;
    await attention();
    await db.pool.query(`UPDATE notification_deliveries SET next_attempt_at = now() - interval '1 hour' WHERE channel = 'toggle'`);
    await run();
    assert.equal(rx.received.length, 2, 'nothing is sent to a disabled channel');
    assert.equal(configured.received.length, toConfigured + 1, 'the other channels still get the event');
    const listed = await admin('GET', '/v3/operator-channels');
    assert.equal(listed.body.channels.find((c: any) => c.name === 'toggle').enabled, false);

    // Enabled again: what happened while it was off is not sent; the next event is.
    expectStatus(await admin('PATCH', '/v3/operator-channels/toggle', { enabled: true }), 200);
    await run();
    assert.equal(rx.received.length, 2);
    const next = await attention();
    await run();
    assert.equal(rx.received.length, 3);
    assert.match(JSON.parse(rx.received[2].body.toString()).text, new RegExp(`${next.summary}$`));

    // Deleted: gone from the list, its past deliveries stay; the name can be used again.
    rx.status = 503;
    await attention();
    await run();
    const del = await admin('DELETE', '/v3/operator-channels/toggle');
    expectStatus(del, 200);
    assert.equal(del.body.channel.name, 'toggle');
    const after = await deliveriesOf(db.pool, { channel: 'toggle' });
    assert.ok(after.length >= 4);
    assert.equal(after.filter((d) => d.status === 'pending').length, 0);
    assert.ok(after.some((d) => d.last_error === 'channel_deleted'));
    assert.ok(!(await admin('GET', '/v3/operator-channels')).body.channels.some((c: any) => c.name === 'toggle'));
    expectStatus(await admin('DELETE', '/v3/operator-channels/toggle'), 404, 'NOT_FOUND');

    const { rows: audit } = await db.pool.query<{ action: string; details: any }>(
      `SELECT action, details FROM audit_outbox WHERE entity_type = 'operator_channel' AND details->>'name' = 'toggle' ORDER BY id`,
    );
    assert.deepEqual(audit.map((a) => a.action), ['operator_channel.create', 'operator_channel.disable', 'operator_channel.enable', 'operator_channel.delete']);
  });

  test('bad input is a 4xx with a code; a duplicate name is 409; configured channels are read-only', async () => {
    const url = 'http://127.0.0.1:9/hook';
    const good = { name: 'valid-hook', kind: 'webhook', url, secret: newWebhookSecret() };
    secrets.push(good.secret);
    const cases: Array<[string, unknown, number, string, string?]> = [
      ['a name with capitals', { ...good, name: 'Ops' }, 400, 'VALIDATION_FAILED'],
      ['an unknown kind', { ...good, kind: 'email' }, 400, 'VALIDATION_FAILED'],
      ['a webhook without a secret', { name: 'nosecret', kind: 'webhook', url }, 400, 'VALIDATION_FAILED', 'secret'],
      ['a secret of the wrong form', { ...good, secret: 'not-a-whsec-value-4711' }, 400, 'VALIDATION_FAILED', 'secret'],
      ['a slack channel with a secret', { ...good, kind: 'slack' }, 400, 'VALIDATION_FAILED', 'secret'],
      ['an ftp URL', { ...good, url: 'ftp://127.0.0.1/x' }, 400, 'VALIDATION_FAILED', 'url'],
      ['a URL with credentials', { ...good, url: 'http://u:p@127.0.0.1/x' }, 400, 'VALIDATION_FAILED', 'url'],
      ['a private address not allowed', { ...good, url: 'http://10.1.2.3/x' }, 422, 'CALLBACK_ADDRESS_NOT_ALLOWED', 'url'],
      ['a metadata address', { ...good, url: 'http://169.254.169.254/latest' }, 422, 'CALLBACK_ADDRESS_NOT_ALLOWED', 'url'],
      ['a rate limit of 0', { ...good, rate_limit_per_minute: 0 }, 400, 'VALIDATION_FAILED'],
      ['a fractional dedup window', { ...good, dedup_seconds: 1.5 }, 400, 'VALIDATION_FAILED'],
      ['an unknown field', { ...good, colour: 'red' }, 400, 'VALIDATION_FAILED'],
      ["a configured channel's name", { ...good, name: 'cfg-hook' }, 409, 'OPERATOR_CHANNEL_EXISTS'],
    ];
    for (const [what, body, status, code, field] of cases) {
      const r = await admin('POST', '/v3/operator-channels', body);
      assert.equal(r.status, status, `${what}: ${r.text}`);
      assert.equal(r.body.error.code, code, what);
      if (field) assert.equal(r.body.error.details.field, field, what);
      assert.ok(!r.text.includes('not-a-whsec-value-4711'), `${what}: a mistyped secret is not echoed`);
    }
    // A secret too long or of the wrong type is refused by the schema, without its value.
    const long = `whsec_${'A'.repeat(300)}`;
    const tooLong = await admin('POST', '/v3/operator-channels', { ...good, secret: long });
    expectStatus(tooLong, 400, 'VALIDATION_FAILED');
    assert.ok(!tooLong.text.includes('A'.repeat(50)), 'the value is not echoed');
    expectStatus(await admin('POST', '/v3/operator-channels', { ...good, secret: 12345 }), 400, 'VALIDATION_FAILED');
    expectStatus(await admin('POST', '/v3/operator-channels', { ...good, name: 'x'.repeat(64) }), 400, 'VALIDATION_FAILED');
    expectStatus(await admin('POST', '/v3/operator-channels', { ...good, url: 'http://127.0.0.1:9/a b' }), 400, 'VALIDATION_FAILED');
    expectStatus(await admin('POST', '/v3/operator-channels', { ...good, url: 'http://[::ffff:10.0.0.1]/x' }), 422, 'CALLBACK_ADDRESS_NOT_ALLOWED');
    expectStatus(await admin('POST', '/v3/operator-channels', good), 201);
    // No body changes nothing.
    const bare = await admin('PATCH', '/v3/operator-channels/valid-hook');
    expectStatus(bare, 200);
    assert.equal(bare.body.channel.enabled, true);
    const dup = await admin('POST', '/v3/operator-channels', { ...good, kind: 'slack', secret: undefined });
    expectStatus(dup, 409, 'OPERATOR_CHANNEL_EXISTS');
    assert.equal(dup.body.error.details.source, 'api');
    expectStatus(await admin('PATCH', '/v3/operator-channels/valid-hook', { kind: 'slack' }), 400, 'VALIDATION_FAILED');
    expectStatus(await admin('PATCH', '/v3/operator-channels/valid-hook', { url: 'http://10.0.0.1/' }), 422, 'CALLBACK_ADDRESS_NOT_ALLOWED');
    expectStatus(await admin('PATCH', '/v3/operator-channels/valid-hook', { max_attempts: 101 }), 400, 'VALIDATION_FAILED');
    expectStatus(await admin('PATCH', '/v3/operator-channels/nobody', { enabled: false }), 404, 'NOT_FOUND');
    const ro = await admin('PATCH', '/v3/operator-channels/cfg-hook', { enabled: false });
    expectStatus(ro, 409, 'OPERATOR_CHANNEL_READ_ONLY');
    expectStatus(await admin('DELETE', '/v3/operator-channels/cfg-hook'), 409, 'OPERATOR_CHANNEL_READ_ONLY');
    assert.equal((await admin('GET', '/v3/operator-channels/cfg-hook')).body.channel.enabled, true);
    // A change that changes nothing is answered and writes no audit event.
    const before = (await db.pool.query(`SELECT count(*)::int AS n FROM audit_outbox WHERE entity_type = 'operator_channel'`)).rows[0].n;
    expectStatus(await admin('PATCH', '/v3/operator-channels/valid-hook', { enabled: true, max_attempts: 5 }), 200);
    assert.equal((await db.pool.query(`SELECT count(*)::int AS n FROM audit_outbox WHERE entity_type = 'operator_channel'`)).rows[0].n, before);
  });

  test('every role but admin gets 403 on every operator channel route', async () => {
    const routes: Array<[string, string, unknown?]> = [
      ['GET', '/v3/operator-channels'],
      ['GET', '/v3/operator-channels/ops-hook'],
      ['POST', '/v3/operator-channels', { name: 'sneaky', kind: 'slack', url: 'http://127.0.0.1:9/x' }],
      ['PATCH', '/v3/operator-channels/ops-hook', { enabled: false }],
      ['DELETE', '/v3/operator-channels/ops-hook'],
    ];
    for (const who of ['operator', 'viewer', 'approver', 'requester'] as const) {
      for (const [method, path, body] of routes) {
        const r = await call(method, path, who, body);
        assert.equal(r.status, 403, `${who} ${method} ${path}: ${r.text}`);
        assert.equal(r.body.error.code, 'FORBIDDEN');
        assert.equal(r.body.error.details.permission, 'notify.channel');
      }
    }
    const still = await admin('GET', '/v3/operator-channels/ops-hook');
    assert.equal(still.body.channel.enabled, true);
    assert.ok(!(await admin('GET', '/v3/operator-channels')).body.channels.some((c: any) => c.name === 'sneaky'));
  });

  test('an API channel whose name configuration took later is not delivered to; the configured one is, with a warning', async () => {
    // As if FERRY_NOTIFY_CHANNELS gained the name after the channel was made (the service refuses it now).
    const rx = await new CallbackReceiver().listen();
    try {
      const { insertChannel } = await import('../src/persistence/operator-channels.ts');
      await insertChannel(db.pool, { name: 'cfg-hook', kind: 'slack', url: rx.url('/services/shadow'), secret: null, actor: 'test', rate_limit_per_minute: 30, dedup_seconds: 0, max_attempts: 1, timeout_ms: 1000, enabled: true });
      const before = configured.received.length;
      await run();
      await attention();
      await run();
      assert.equal(rx.received.length, 0, 'the shadowed API channel gets nothing');
      assert.equal(configured.received.length, before + 1, 'the configured channel gets the event');
      assert.ok(logLines.some((l) => l.includes('has the name of a configured one') && l.includes('"channel":"cfg-hook"')));
      const listed = await admin('GET', '/v3/operator-channels');
      assert.deepEqual(listed.body.channels.filter((c: any) => c.name === 'cfg-hook').map((c: any) => c.source), ['config']);
    } finally {
      await db.pool.query(`DELETE FROM operator_channels WHERE name = 'cfg-hook'`);
      await rx.close();
    }
  });

  test('no secret is in any answer, audit event or log line', async () => {
    assert.ok(answers.length > 30);
    const { rows } = await db.pool.query<{ t: string }>(`SELECT details::text AS t FROM audit_outbox WHERE entity_type = 'operator_channel'`);
    assert.ok(rows.length >= 5);
    const places = [...answers.map((a) => a.text), ...rows.map((r) => r.t), ...logLines, JSON.stringify(await deliveriesOf(db.pool, { limit: 1000 }))];
    for (const s of secrets) {
      const body = s.slice('whsec_'.length);
      for (const p of places) {
        assert.ok(!p.includes(s) && !p.includes(body), 'a secret leaked');
      }
    }
    for (const p of places) assert.ok(!p.includes('slacktoken123'), "a Slack URL's token leaked");
  });
});
