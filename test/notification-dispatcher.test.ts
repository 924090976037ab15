/**
 * notification_dispatcher: attention events reach the operator channels through real HTTP receivers
 * on loopback: a generic webhook signed the Standard Webhooks way and a Slack-style {text} webhook;
 * the same dedup_key within a channel's window is sent once; a channel's rate limit holds the rest
 * for later runs; a receiver that is down is retried until it answers, and a delivery that runs out
 * of attempts fails; no URL token or secret reaches the logs. Runs are called directly and times
 * are moved by backdating rows, never by sleeping.
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { describe, test } from 'node:test';
import pino from 'pino';
import { Webhook } from 'standardwebhooks';
import { runNotificationDispatcher, type NotificationDeps } from '../src/sweeps/notification-dispatcher.ts';
import { newWebhookSecret } from '../src/callbacks/signing.ts';
import { ConfigError, loadConfig } from '../src/config.ts';
import { writeAudit } from '../src/persistence/audit.ts';
import { promoteAuditRun } from '../src/sweeps/audit-promoter.ts';
import { deliveriesOf, insertAttention, listAttention } from '../src/persistence/notifications.ts';
import { testDatabase } from './helpers/db.ts';
import { loopbackDestinations, LOOPBACK_NETWORKS } from './helpers/destinations.ts';
import { CallbackReceiver } from './helpers/receiver.ts';

const db = await testDatabase();
const destinations = loopbackDestinations();
const logLines: string[] = [];
const log = pino({ level: 'info' }, { write: (line: string) => void logLines.push(line) });

let seq = 0;
function channels(list: Record<string, unknown>[]) {
  return loadConfig({ FERRY_CALLBACK_ALLOWED_NETWORKS: LOOPBACK_NETWORKS, FERRY_NOTIFY_ENABLED: 'true', FERRY_NOTIFY_CHANNELS: JSON.stringify(list) });
}
function depsFor(list: Record<string, unknown>[]): NotificationDeps {
  return { pool: db.pool, config: channels(list), log, destinations };
}
const run = (deps: NotificationDeps) => runNotificationDispatcher(deps, { batchSize: 50, maxRunMs: 0 });

async function attention(dedupKey: string, summary = `event ${++seq}`) {
  return (await insertAttention(db.pool, { kind: 'manual_intervention', sourceKey: `test:${++seq}`, dedupKey, summary, details: { n: seq } }))!;
}

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

describe('operator channels', () => {
  test('a signed webhook and a Slack-style webhook each get the event; the webhook verifies with its secret', async (t) => {
    const hook = await new CallbackReceiver().listen();
    const slack = await new CallbackReceiver().listen();
    t.after(async () => {
      await hook.close();
      await slack.close();
    });
    const secret = newWebhookSecret();
    const deps = depsFor([
      { name: 'ops-hook', kind: 'webhook', url: hook.url('/ferry'), secret },
      { name: 'ops-slack', kind: 'slack', url: slack.url('/services/T0/B0/slacktoken123') },
    ]);
    await run(deps); // the channels' cursors start at the newest event
    const e = await attention('manual_intervention:m1', 'movement m1 needs manual intervention');
    const r = await run(deps);
    assert.equal(r.delivered, 2);
    assert.equal(hook.received.length, 1);
    const got = hook.received[0];
    const body = new Webhook(secret).verify(got.body.toString(), {
      'webhook-id': String(got.headers['webhook-id']),
      'webhook-timestamp': String(got.headers['webhook-timestamp']),
      'webhook-signature': String(got.headers['webhook-signature']),
    }) as Record<string, unknown>;
    assert.equal(body.attention_id, String(e.id));
    assert.equal(body.kind, 'manual_intervention');
    assert.equal(body.summary, 'movement m1 needs manual intervention');
    assert.throws(() => new Webhook(newWebhookSecret()).verify(got.body.toString(), got.headers as Record<string, string>), 'another secret does not verify');
    assert.equal(slack.received.length, 1);
    assert.deepEqual(JSON.parse(slack.received[0].body.toString()), { text: 'Ferry attention (manual_intervention): movement m1 needs manual intervention' });
    const rows = await deliveriesOf(db.pool);
    for (const ch of ['ops-hook', 'ops-slack']) {
      const row = rows.find((d) => d.channel === ch && d.attention_id === e.id)!;
      assert.equal(row.status, 'delivered');
      assert.equal(row.attempts, 1);
      assert.equal(row.last_status_code, 200);
    }
    // Nothing new: a second run sends nothing.
    assert.equal((await run(deps)).delivered, 0);
    assert.equal(hook.received.length, 1);
  });

  test('the same dedup_key within the window is sent once (suppressed), and again once the window has passed', async (t) => {
    const rx = await new CallbackReceiver().listen();
    t.after(() => rx.close());
    const deps = depsFor([{ name: 'dedup-slack', kind: 'slack', url: rx.url(), dedup_seconds: 600 }]);
    await run(deps);
    await attention('drift:x');
    await attention('drift:x');
    await attention('drift:y');
    const r = await run(deps);
    assert.equal(r.delivered, 2);
    assert.equal(r.suppressed, 1);
    assert.equal(rx.received.length, 2);
    const rows = (await deliveriesOf(db.pool, { channel: 'dedup-slack' })).reverse();
    assert.deepEqual(rows.map((d) => [d.dedup_key, d.status]), [['drift:x', 'delivered'], ['drift:x', 'suppressed'], ['drift:y', 'delivered']]);
    // Past the window, the same thing is said again.
    await db.pool.query(`UPDATE notification_deliveries SET created_at = created_at - interval '601 seconds' WHERE channel = 'dedup-slack'`);
    await attention('drift:x');
    assert.equal((await run(deps)).delivered, 1);
    assert.equal(rx.received.length, 3);
  });

  test("each channel's rate limit holds the rest for later runs; another channel is not held by it", async (t) => {
    const slow = await new CallbackReceiver().listen();
    const fast = await new CallbackReceiver().listen();
    t.after(async () => {
      await slow.close();
      await fast.close();
    });
    const deps = depsFor([
      { name: 'limited', kind: 'slack', url: slow.url(), rate_limit_per_minute: 2 },
      { name: 'unlimited', kind: 'slack', url: fast.url(), rate_limit_per_minute: 100 },
    ]);
    await run(deps);
    for (let i = 0; i < 5; i++) await attention(`rate:${i}`);
    const first = await run(deps);
    assert.equal(slow.received.length, 2, 'two within the minute');
    assert.equal(fast.received.length, 5);
    assert.ok(first.rate_limited >= 1);
    await run(deps);
    assert.equal(slow.received.length, 2, 'still two: the minute has not passed');
    await db.pool.query(`UPDATE notification_deliveries SET last_attempt_at = last_attempt_at - interval '61 seconds' WHERE channel = 'limited'`);
    await run(deps);
    assert.equal(slow.received.length, 4);
    await db.pool.query(`UPDATE notification_deliveries SET last_attempt_at = last_attempt_at - interval '61 seconds' WHERE channel = 'limited'`);
    await run(deps);
    assert.equal(slow.received.length, 5);
    // In order, each once.
    const texts = slow.received.map((r) => JSON.parse(r.body.toString()).text);
    assert.equal(new Set(texts).size, 5);
  });

  test('a receiver that is down is retried after the backoff and delivered once it is up; exhausted attempts fail; no secret in the logs', async (t) => {
    const port = await freePort();
    const secret = newWebhookSecret();
    const deps = depsFor([
      { name: 'down-hook', kind: 'webhook', url: `http://127.0.0.1:${port}/hook/urltoken987`, secret, max_attempts: 3 },
      { name: 'dead-slack', kind: 'slack', url: `http://127.0.0.1:${port}/services/T1/B1/slacksecret555`, max_attempts: 1 },
    ]);
    await run(deps);
    const e = await attention('callback_dlq:m2');
    const r1 = await run(deps);
    assert.equal(r1.retried, 1);
    assert.equal(r1.failed, 1, 'the one-attempt channel fails at once');
    let rows = await deliveriesOf(db.pool);
    const hookRow = () => rows.find((d) => d.channel === 'down-hook' && d.attention_id === e.id)!;
    assert.equal(hookRow().status, 'pending');
    assert.equal(hookRow().attempts, 1);
    assert.equal(hookRow().last_error, 'connection_refused');
    assert.ok(hookRow().next_attempt_at.getTime() > Date.now(), 'the next attempt waits for the backoff');
    assert.equal(rows.find((d) => d.channel === 'dead-slack' && d.attention_id === e.id)!.status, 'failed');
    // Not due yet: a run now does not call.
    assert.equal((await run(deps)).retried, 0);

    const rx = await new CallbackReceiver().listen(port);
    t.after(() => rx.close());
    await db.pool.query(`UPDATE notification_deliveries SET next_attempt_at = now() - interval '1 second' WHERE channel = 'down-hook'`);
    const r2 = await run(deps);
    assert.equal(r2.delivered, 1);
    rows = await deliveriesOf(db.pool);
    assert.equal(hookRow().status, 'delivered');
    assert.equal(hookRow().attempts, 2);
    assert.equal(rx.received.length, 1, 'the failed Slack delivery is not retried');
    assert.equal(rx.received[0].headers['webhook-id'], hookRow().id, 'webhook-id is the delivery id, the same on every retry');

    const text = logLines.join('');
    assert.match(text, /operator notification failed/, 'the failure was logged');
    for (const s of [secret, 'urltoken987', 'slacksecret555', String(port)]) assert.ok(!text.includes(s), `${s} is not in the logs`);
    const stored = JSON.stringify(await deliveriesOf(db.pool));
    for (const s of [secret, 'urltoken987', 'slacksecret555']) assert.ok(!stored.includes(s), `${s} is not stored`);
  });
});

describe('attention sources', () => {
  test('drift in the audit log, a signer identity mismatch and a stale balance are each recorded once', async () => {
    const deps = depsFor([]);
    await run(deps); // cursors start at the newest rows
    await writeAudit(db.pool, { actor: 'worker:reconciliation', action: 'reconciliation.drift', entity_type: 'node', entity_id: 'n-1', details: {} });
    await writeAudit(db.pool, { actor: 'operator', action: 'movement.approve', entity_type: 'node', entity_id: 'n-2', details: {} });
    await promoteAuditRun(db.pool, {});
    await db.pool.query(`INSERT INTO signer_registry (signer_key, observed_signer_address, expected_signer_address) VALUES ('sig.hot', '0xbbb', '0xaaa')`);
    await db.pool.query(
      `INSERT INTO balance_watch (chain, wallet, asset, lane, fetcher, amount, decimals, as_of) VALUES ('sim', 'treasury', 'usd', 'sim', 'sim', '1', 0, now() - interval '1 hour')`,
    );
    const r = await run(deps);
    assert.equal(r.recorded, 3);
    assert.equal((await run(deps)).recorded, 0, 'a rescan records nothing twice');
    const kinds = (await listAttention(db.pool)).map((a) => a.kind);
    for (const k of ['drift', 'signer_identity_mismatch', 'balance_stale'] as const) assert.equal(kinds.filter((x) => x === k).length, 1, k);
  });

  test('channels are validated at start, and a bad one never echoes its value', () => {
    const bad = (v: unknown) => () => loadConfig({ FERRY_NOTIFY_CHANNELS: JSON.stringify(v) });
    assert.throws(bad([{ name: 'x', kind: 'webhook', url: 'http://127.0.0.1:1/h' }]), (e: unknown) => e instanceof ConfigError && /needs a secret/.test(e.message));
    assert.throws(bad([{ name: 'x', kind: 'pager', url: 'http://127.0.0.1:1/h' }]), ConfigError);
    assert.throws(bad([{ name: 'x', kind: 'slack', url: 'ftp://host/x' }]), ConfigError);
    assert.throws(bad([{ name: 'x', kind: 'slack', url: 'http://a/supersecretpath' }, { name: 'x', kind: 'slack', url: 'http://b/' }]), (e: unknown) => e instanceof ConfigError && !e.message.includes('supersecretpath'));
    const ok = channels([{ name: 'fine', kind: 'slack', url: 'http://127.0.0.1:9/x' }]);
    assert.equal(ok.notifyChannels[0].rate_limit_per_minute, 30);
    assert.equal(ok.notifyChannels[0].dedup_seconds, 3600);
  });
});
