import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import type { PgBoss } from 'pg-boss';
import { QUEUES, startBoss, stopBoss } from '../src/actors/boss.ts';
import {
  createCallbackQueue,
  deliverCallbackOnce,
  requeueStrandedCallbacks,
  startCallbackDelivery,
  type CallbackDeliveryDeps,
} from '../src/actors/callback-delivery.ts';
import { callbackJobId, type CallbackQueue } from '../src/callbacks/jobs.ts';
import { enqueueCallback, redriveAndEnqueue, type CallbackMovementRow } from '../src/callbacks/outbox.ts';
import { readCallbackHeaders, verifyCallback } from '../src/callbacks/signing.ts';
import { FerryError, NotFoundError } from '../src/errors.ts';
import {
  callbacksForMovement,
  getCallback,
  listCallbacks,
  type CallbackRow,
} from '../src/persistence/callbacks.ts';
import { withTransaction } from '../src/persistence/db.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';
import { collectPages } from './helpers/pages.ts';
import { loopbackDestinations } from './helpers/destinations.ts';
import { classifyAddress, destinationPolicy, literalRefusal } from '../src/callbacks/destinations.ts';
import { CallbackReceiver, type Received } from './helpers/receiver.ts';
import { waitFor } from './helpers/wait.ts';

const SECRET = 'delivery-test-secret-0123456789';

/** A port nothing listens on: bound once, then released. */
async function closedPort(): Promise<number> {
  const r = await new CallbackReceiver().listen();
  await r.close();
  return r.port;
}

// ---------------------------------------------------------------------------------------------
// Fixtures: a template version and movement requests to hang callbacks on.

const receivers: CallbackReceiver[] = [];
let boss: PgBoss | undefined;
// Registered before testDatabase() so it runs before the database is dropped (after hooks run in order).
after(async () => {
  for (const r of receivers) await r.close();
  if (boss) await stopBoss(boss, { timeoutMs: 5_000 });
});

const db: TestDb = await testDatabase();

async function receiver(port = 0): Promise<CallbackReceiver> {
  const r = await new CallbackReceiver().listen(port);
  receivers.push(r);
  return r;
}

async function movement(callbackUrl: string, state = 'EXECUTING'): Promise<CallbackMovementRow> {
  const { rows } = await db.pool.query<CallbackMovementRow>(
    `INSERT INTO movement_requests
       (template_version_id, template_key, template_version, intent, compiled_plan_hash, compiled_plan,
        machine_id, machine_version, request_state, approval_status, current_frontier, callback_url, created_by)
     VALUES ($1, 'cb-test', 1, '{"asset":"USDC","amount":"12.50"}', 'sha256:plan', '{}',
             'ferry.request', '1', $2, 'approved', '["step_a"]', $3, 'test')
     RETURNING *`,
    [templateVersionId, state, callbackUrl],
  );
  return rows[0];
}

const destinations = loopbackDestinations();

function deps(extra: Partial<CallbackDeliveryDeps> = {}): CallbackDeliveryDeps {
  return { pool: db.pool, secret: SECRET, timeoutMs: 5_000, queue, destinations, ...extra };
}

async function newCallback(request: CallbackMovementRow, eventType: string, opts: { maxAttempts?: number; nodeKey?: string; withJob?: boolean } = {}) {
  return withTransaction(db.pool, (client) =>
    enqueueCallback(
      client,
      { movement: request, eventType, nodeKey: opts.nodeKey, occurredAt: new Date().toISOString(), maxAttempts: opts.maxAttempts ?? 5 },
      opts.withJob === false ? undefined : queue,
    ),
  );
}

async function row(id: string): Promise<CallbackRow> {
  const r = await getCallback(db.pool, id);
  assert.ok(r, `callback ${id} exists`);
  return r;
}

async function job(callbackId: string, attempts: number, redriveCount: number, extraKey?: string) {
  const id = callbackJobId({ callbackId, attempts, redriveCount, extraKey });
  const [found] = await bossInstance.findJobs<{ callbackId: string }>(QUEUES.callbacks, { id });
  return found ?? null;
}

/** Waits until a worker has taken the job and finished with it. */
async function jobDone(callbackId: string, attempts: number, redriveCount: number): Promise<void> {
  await waitFor(`the delivery job of callback ${callbackId} (attempt ${attempts}) to finish`, async () => {
    const j = await job(callbackId, attempts, redriveCount);
    return j !== null && (j.state === 'completed' || j.state === 'failed');
  });
}

/** Moves a row's schedule into the past, standing in for the minutes a lost job would take. */
async function backdate(id: string, seconds: number): Promise<void> {
  await db.pool.query(`UPDATE callback_outbox SET next_attempt_at = now() - make_interval(secs => $2) WHERE id = $1`, [id, seconds]);
}

function assertSigned(r: Received, cb: CallbackRow): void {
  const parts = readCallbackHeaders(r.headers);
  assert.ok(parts, 'signature headers present');
  assert.equal(parts.version, 'v3');
  assert.equal(parts.timestamp, String(cb.callback_timestamp));
  assert.equal(parts.nonce, cb.callback_nonce);
  assert.equal(r.body.toString('utf8'), cb.payload_body, 'the stored bytes are what was sent');
  assert.equal(verifyCallback(SECRET, parts, r.body), true, 'signature verifies over the received bytes');
  assert.equal(r.headers['content-type'], 'application/json');
}

const templateVersionId = await (async () => {
  const { rows: t } = await db.pool.query<{ id: string }>(
    `INSERT INTO plan_templates (template_key, created_by) VALUES ('cb-test', 'test') RETURNING id`,
  );
  const { rows: v } = await db.pool.query<{ id: string }>(
    `INSERT INTO template_versions (template_id, version, graph_hash, definition, created_by)
     VALUES ($1, 1, 'sha256:graph', '{}', 'test') RETURNING id`,
    [t[0].id],
  );
  return v[0].id;
})();
const bossInstance = await startBoss(db.url, { max: 4 });
boss = bossInstance;
const queue: CallbackQueue = createCallbackQueue(bossInstance);

// ---------------------------------------------------------------------------------------------
// Through the real pg-boss worker. Runs first; the worker is stopped before the tests below drive
// attempts by hand, so no worker races them.

describe('delivery by the pg-boss worker', () => {
  test('callbacks of one request arrive in creation order, each once, signed', async () => {
    const rx = await receiver();
    const other = await receiver();
    const request = await movement(rx.url());
    const otherRequest = await movement(other.url());
    const events = ['request_approved', 'request_executing', 'frontier_advanced', 'request_attention', 'request_completed'];
    // One transaction, like a transition that emits several callbacks: the jobs share a creation
    // time, so pg-boss alone would hand them out in any order.
    const ids = await withTransaction(db.pool, async (client) => {
      const out: string[] = [];
      for (const e of events) {
        out.push(
          await enqueueCallback(
            client,
            { movement: request, eventType: e, nodeKey: e === 'frontier_advanced' ? 'step_a' : null, occurredAt: new Date().toISOString(), maxAttempts: 5 },
            queue,
          ),
        );
        await enqueueCallback(client, { movement: otherRequest, eventType: e, occurredAt: new Date().toISOString(), maxAttempts: 5 }, queue);
      }
      return out;
    });

    // The receiver holds its first answer until every other callback's job has been run by a
    // worker: none of them may be sent while an earlier callback of the request is unanswered.
    const release = rx.hold();
    const delivery = await startCallbackDelivery({
      boss: bossInstance,
      pool: db.pool,
      secret: SECRET,
      timeoutMs: 5_000,
      concurrency: 4,
      pollingIntervalSeconds: 0.5,
      destinations,
    });
    try {
      await rx.waitFor(1);
      for (const id of ids.slice(1)) await jobDone(id, 0, 0);
      assert.equal(rx.received.length, 1, 'nothing else was sent while the first callback was unanswered');
      release();
      await rx.waitFor(events.length);
      await other.waitFor(events.length);
    } finally {
      release();
      await delivery.stop();
    }

    assert.equal(rx.maxInFlight, 1, 'one callback of a request in flight at a time');
    assert.deepEqual(
      rx.received.map((r) => JSON.parse(r.body.toString()).event_type),
      events,
      'delivered in the order the callbacks were created',
    );
    assert.deepEqual(other.received.map((r) => JSON.parse(r.body.toString()).event_type), events);
    for (const [i, id] of ids.entries()) {
      const cb = await row(id);
      assert.equal(cb.status, 'sent');
      assert.equal(cb.attempts, 1, 'sent exactly once');
      assert.equal(cb.last_status_code, 200);
      assertSigned(rx.received[i], cb);
    }
    const body = JSON.parse(rx.received[2].body.toString());
    assert.equal(body.node_key, 'step_a');
    assert.equal(body.request_id, request.id);
    assert.equal(body.movement.template_key, 'cb-test');
    assert.equal(rx.received.length, events.length, 'no duplicates');
  });

  test('a stranded callback (no job) is re-enqueued by the sweep and delivered', async () => {
    const rx = await receiver();
    const request = await movement(rx.url());
    const id = await newCallback(request, 'request_failed', { withJob: false });
    assert.equal(await job(id, 0, 0), null, 'no job was written');

    assert.equal(await requeueStrandedCallbacks(db.pool, queue), 0, 'not overdue yet: left alone');
    await backdate(id, 120);
    assert.equal(await requeueStrandedCallbacks(db.pool, queue), 1);
    assert.equal(await requeueStrandedCallbacks(db.pool, queue), 0, 'same minute: the job is not written twice');

    const delivery = await startCallbackDelivery({ boss: bossInstance, pool: db.pool, secret: SECRET, timeoutMs: 5_000, pollingIntervalSeconds: 0.5, destinations });
    try {
      await rx.waitFor(1);
    } finally {
      await delivery.stop();
    }
    // The outcome is written right after the response; wait for it through the row itself.
    const cb = await waitFor('the delivery outcome to be written', async () => {
      const r = await row(id);
      return r.status === 'pending' ? null : r;
    });
    assert.equal(cb.status, 'sent');
    assertSigned(rx.received[0], cb);
  });
});

// ---------------------------------------------------------------------------------------------

describe('one delivery attempt at a time', () => {
  test('a delivery is sent once, signed, and never again', async () => {
    const rx = await receiver();
    const request = await movement(rx.url());
    const id = await newCallback(request, 'request_executing');
    assert.ok(await job(id, 0, 0), 'the delivery job was written with the row');

    assert.equal(await deliverCallbackOnce(deps(), id, { attempts: 0, redriveCount: 0 }), 'sent');
    const cb = await row(id);
    assert.equal(cb.status, 'sent');
    assert.equal(cb.attempts, 1);
    assert.equal(cb.last_status_code, 200);
    assert.ok(cb.sent_at);
    assert.equal(cb.lease_token, null);
    assert.equal(rx.received.length, 1);
    assertSigned(rx.received[0], cb);
    assert.deepEqual(JSON.parse(rx.received[0].body.toString()), {
      callback_id: id,
      event_type: 'request_executing',
      request_id: request.id,
      request_state: 'EXECUTING',
      occurred_at: JSON.parse(cb.payload_body).occurred_at,
      movement: {
        id: request.id,
        template_key: 'cb-test',
        template_version: 1,
        compiled_plan_hash: 'sha256:plan',
        intent: { asset: 'USDC', amount: '12.50' },
        request_state: 'EXECUTING',
        approval_status: 'approved',
        current_frontier: ['step_a'],
        created_at: (request.created_at as Date).toISOString(),
        updated_at: (request.updated_at as Date).toISOString(),
      },
    });

    assert.equal(await deliverCallbackOnce(deps(), id), 'skipped', 'a sent callback is not sent again');
    assert.equal(await deliverCallbackOnce(deps(), id, { attempts: 0, redriveCount: 0 }), 'skipped');
    assert.equal(rx.received.length, 1);
  });

  test('while a delivery is in flight, a second worker does not send it too', async () => {
    const rx = await receiver();
    const release = rx.hold();
    const request = await movement(rx.url());
    const id = await newCallback(request, 'request_executing');

    const first = deliverCallbackOnce(deps(), id, { attempts: 0, redriveCount: 0 });
    await rx.waitFor(1);
    assert.equal(await deliverCallbackOnce(deps(), id, { attempts: 0, redriveCount: 0 }), 'skipped', 'leased');
    assert.equal(await deliverCallbackOnce(deps(), id), 'skipped', 'leased');
    release();
    assert.equal(await first, 'sent');
    assert.equal(rx.received.length, 1);
  });

  test('a later callback of the same request waits for the earlier one, then is woken', async () => {
    const rx = await receiver();
    const request = await movement(rx.url());
    const a = await newCallback(request, 'request_approved');
    const b = await newCallback(request, 'request_executing');

    assert.equal(await deliverCallbackOnce(deps(), b, { attempts: 0, redriveCount: 0 }), 'skipped', 'b waits for a');
    assert.equal(rx.received.length, 0);
    assert.equal(await deliverCallbackOnce(deps(), a, { attempts: 0, redriveCount: 0 }), 'sent');
    const wake = await job(b, 0, 0, `after:${a}:0`);
    assert.ok(wake, 'finishing a wrote a job for b');
    assert.equal(wake.data.callbackId, b);
    assert.equal(await deliverCallbackOnce(deps(), b, { attempts: 0, redriveCount: 0 }), 'sent');
    assert.deepEqual(
      rx.received.map((r) => JSON.parse(r.body.toString()).event_type),
      ['request_approved', 'request_executing'],
    );
  });

  test('non-2xx and redirects are failed attempts; redirects are not followed', async () => {
    const rx = await receiver();
    const request = await movement(rx.url());
    const id = await newCallback(request, 'request_executing');
    rx.status = 503;
    assert.equal(await deliverCallbackOnce(deps(), id), 'retry');
    let cb = await row(id);
    assert.equal(cb.last_status_code, 503);
    assert.equal(cb.last_error, 'HTTP 503');
    rx.status = 302;
    assert.equal(await deliverCallbackOnce(deps(), id), 'retry');
    cb = await row(id);
    assert.equal(cb.last_status_code, 302);
    assert.equal(rx.received.length, 2, 'the Location was not fetched');
    assert.ok(rx.received.every((r) => r.body.toString() === cb.payload_body));
    rx.status = 204;
    assert.equal(await deliverCallbackOnce(deps(), id), 'sent');
    cb = await row(id);
    assert.equal(cb.attempts, 3);
    assert.equal(cb.last_status_code, 204);
  });
});

describe('destinations a callback may reach', () => {
  const strict = destinationPolicy({});
  after(() => strict.dispatcher.close());

  test('addresses outside the public internet are classified, IPv4-mapped IPv6 included', () => {
    const cases: Array<[string, string | null]> = [
      ['127.0.0.1', 'loopback'],
      ['::1', 'loopback'],
      ['::ffff:127.0.0.1', 'loopback'],
      ['169.254.169.254', 'link_local'],
      ['fe80::1', 'link_local'],
      ['10.1.2.3', 'private'],
      ['172.20.0.1', 'private'],
      ['192.168.1.1', 'private'],
      ['100.64.0.1', 'private'],
      ['fd12:3456::1', 'unique_local'],
      ['224.0.0.1', 'multicast'],
      ['ff02::1', 'multicast'],
      ['0.0.0.0', 'unspecified'],
      ['::', 'unspecified'],
      ['255.255.255.255', 'reserved'],
      ['93.184.216.34', null],
      ['2606:4700::1111', null],
      // IPv6 forms that embed an IPv4 address are that address: IPv4-compatible (::/96),
      // NAT64 (64:ff9b::/96), 6to4 (2002::/16), IPv4-translated (::ffff:0:0:0/96).
      ['::7f00:1', 'loopback'],
      ['::10.1.2.3', 'private'],
      ['64:ff9b::7f00:1', 'loopback'],
      ['64:ff9b::169.254.169.254', 'link_local'],
      ['64:ff9b::5db8:d822', null],
      ['2002:7f00:1::', 'loopback'],
      ['2002:a9fe:a9fe:1::1', 'link_local'],
      ['2002:c0a8:101::1', 'private'],
      ['2002:5db8:d822::1', null],
      ['::ffff:0:7f00:1', 'loopback'],
      ['::ffff:0:172.20.0.1', 'private'],
      ['::ffff:0:5db8:d822', null],
    ];
    for (const [address, cls] of cases) assert.equal(classifyAddress(address), cls, address);
  });

  test('an IPv4 address in an IPv6 form is refused at delivery, and allowed by the IPv4 network that holds it', () => {
    assert.equal(literalRefusal(strict, new URL('http://[64:ff9b::7f00:1]:9/x')), 'loopback');
    assert.equal(literalRefusal(strict, new URL('http://[2002:a9fe:a9fe::]/latest/meta-data/')), 'link_local');
    const internal = destinationPolicy({ callbackAllowedNetworks: ['10.20.0.0/16'] });
    after(() => internal.dispatcher.close());
    assert.equal(literalRefusal(internal, new URL('http://[::ffff:0:10.20.0.5]/x')), null);
    assert.equal(literalRefusal(internal, new URL('http://[64:ff9b::10.21.0.5]/x')), 'private');
  });

  test('loopback, link-local and names resolving to them are refused unless allowed; the receiver hears nothing', async () => {
    const rx = await receiver();
    const refusedCases: Array<[string, string]> = [
      [rx.url(), 'destination_blocked (loopback)'],
      [`http://localhost:${rx.port}/callbacks`, 'destination_blocked (loopback)'],
      [`http://[::ffff:127.0.0.1]:${rx.port}/callbacks`, 'destination_blocked (loopback)'],
    ];
    // The metadata address is only asked about, never delivered to: a test must not send traffic
    // there even if the check it tests were broken.
    assert.equal(literalRefusal(strict, new URL('http://169.254.169.254/latest/meta-data/')), 'link_local');
    assert.equal(literalRefusal(strict, new URL('http://[fd00::1]/x')), 'unique_local');
    for (const [url, expected] of refusedCases) {
      const id = await newCallback(await movement(url), 'request_executing');
      assert.equal(await deliverCallbackOnce(deps({ destinations: strict }), id), 'retry', url);
      const cb = await row(id);
      assert.equal(cb.last_error, expected, url);
      assert.equal(cb.last_status_code, null);
    }
    assert.equal(rx.received.length, 0, 'nothing reached the loopback receiver');

    // Named by the operator, as a host or as a network, the same receiver is reached.
    const byHost = destinationPolicy({ callbackAllowedHosts: ['localhost'] });
    after(() => byHost.dispatcher.close());
    const named = await newCallback(await movement(`http://localhost:${rx.port}/callbacks`), 'request_executing');
    assert.equal(await deliverCallbackOnce(deps({ destinations: byHost }), named), 'sent');
    const byNetwork = destinationPolicy({ callbackAllowedNetworks: ['127.0.0.0/8'] });
    after(() => byNetwork.dispatcher.close());
    const literal = await newCallback(await movement(rx.url()), 'request_executing');
    assert.equal(await deliverCallbackOnce(deps({ destinations: byNetwork }), literal), 'sent');
    assert.equal(rx.received.length, 2);
  });

  test('a failed delivery records an error class, not socket text that would map open ports', async () => {
    const port = await closedPort();
    const id = await newCallback(await movement(`http://127.0.0.1:${port}/x`), 'request_executing');
    assert.equal(await deliverCallbackOnce(deps(), id), 'retry');
    const cb = await row(id);
    assert.equal(cb.last_error, 'connection_refused');
    assert.doesNotMatch(cb.last_error ?? '', /127\.0\.0\.1|ECONNREFUSED|\d{4,5}/);
  });
});

describe('retries, dead letter and redrive', () => {
  test('a receiver that is down: backoff 2, 4, 8, 16 s, then dlq; redrive delivers once with the same timestamp and nonce', async () => {
    const port = await closedPort();
    const request = await movement(`http://127.0.0.1:${port}/callbacks`);
    const id = await newCallback(request, 'request_completed', { maxAttempts: 5 });
    const original = await row(id);

    for (const [i, backoff] of [2, 4, 8, 16].entries()) {
      const attempt = i + 1;
      assert.equal(await deliverCallbackOnce(deps(), id, { attempts: i, redriveCount: 0 }), 'retry', `attempt ${attempt}`);
      const cb = await row(id);
      assert.equal(cb.status, 'pending');
      assert.equal(cb.attempts, attempt);
      assert.ok(cb.last_attempt_at);
      assert.equal(cb.next_attempt_at.getTime() - cb.last_attempt_at.getTime(), backoff * 1000, `backoff after attempt ${attempt}`);
      assert.equal(cb.last_error, 'connection_refused', 'a class, not the socket text');
      assert.equal(cb.last_status_code, null);
      const next = await job(id, attempt, 0);
      assert.ok(next, `the job for attempt ${attempt + 1} was written with the outcome`);
      assert.equal(next.startAfter.getTime(), cb.next_attempt_at.getTime());
      assert.deepEqual(next.data, { callbackId: id, attempts: attempt, redriveCount: 0 });
    }
    assert.equal(await deliverCallbackOnce(deps(), id, { attempts: 2, redriveCount: 0 }), 'skipped', 'a stale job does nothing');

    assert.equal(await deliverCallbackOnce(deps(), id, { attempts: 4, redriveCount: 0 }), 'dlq');
    const dead = await row(id);
    assert.equal(dead.status, 'dlq');
    assert.equal(dead.attempts, 5);
    assert.equal(await job(id, 5, 0), null, 'no job after the last attempt');
    assert.equal(await deliverCallbackOnce(deps(), id), 'skipped', 'dlq is not delivered');
    const listed = await listCallbacks(db.pool, { status: 'dlq', movementId: request.id, limit: 10 });
    assert.deepEqual(listed.callbacks.map((c) => c.id), [id]);

    // The receiver comes back on the same address; an operator redrives.
    const rx = await receiver(port);
    const redriven = await withTransaction(db.pool, (client) => redriveAndEnqueue(client, id, queue));
    assert.equal(redriven.status, 'pending');
    assert.equal(redriven.attempts, 0);
    assert.equal(redriven.redrive_count, 1);
    assert.equal(redriven.callback_timestamp, original.callback_timestamp);
    assert.equal(redriven.callback_nonce, original.callback_nonce);
    assert.ok(await job(id, 0, 1), 'redrive wrote a job for the new attempt');

    assert.equal(await deliverCallbackOnce(deps(), id, { attempts: 4, redriveCount: 0 }), 'skipped', 'pre-redrive job does nothing');
    assert.equal(await deliverCallbackOnce(deps(), id, { attempts: 0, redriveCount: 1 }), 'sent');
    assert.equal(await deliverCallbackOnce(deps(), id, { attempts: 0, redriveCount: 1 }), 'skipped');
    assert.equal(rx.received.length, 1, 'delivered exactly once more');
    const sent = await row(id);
    assert.equal(sent.status, 'sent');
    assert.equal(rx.received[0].headers['x-ferry-callback-timestamp'], String(original.callback_timestamp));
    assert.equal(rx.received[0].headers['x-ferry-callback-nonce'], original.callback_nonce);
    assertSigned(rx.received[0], original);

    await assert.rejects(
      withTransaction(db.pool, (client) => redriveAndEnqueue(client, id, queue)),
      (e: unknown) => e instanceof FerryError && e.code === 'CALLBACK_NOT_REDRIVABLE' && e.httpStatus === 409,
    );
  });

  test('backoff doubles up to 64 s and stays there', async () => {
    const request = await movement(`http://127.0.0.1:${await closedPort()}/callbacks`);
    const id = await newCallback(request, 'request_executing', { maxAttempts: 9 });
    const waits: number[] = [];
    for (let i = 0; i < 8; i++) {
      assert.equal(await deliverCallbackOnce(deps(), id), 'retry');
      const cb = await row(id);
      waits.push((cb.next_attempt_at.getTime() - cb.last_attempt_at!.getTime()) / 1000);
    }
    assert.deepEqual(waits, [2, 4, 8, 16, 32, 64, 64, 64]);
    assert.equal(await deliverCallbackOnce(deps(), id), 'dlq');
  });

  test('redrive of an unknown or malformed id is NOT_FOUND', async () => {
    for (const id of ['00000000-0000-4000-8000-000000000000', 'not-a-uuid', "'; drop table x; --"]) {
      await assert.rejects(
        withTransaction(db.pool, (client) => redriveAndEnqueue(client, id, queue)),
        (e: unknown) => e instanceof NotFoundError && e.httpStatus === 404,
      );
    }
  });

  test('a timeout is a failed attempt', async () => {
    const rx = await receiver();
    const release = rx.hold();
    const request = await movement(rx.url());
    const id = await newCallback(request, 'request_executing');
    try {
      assert.equal(await deliverCallbackOnce(deps({ timeoutMs: 200 }), id), 'retry');
    } finally {
      release();
    }
    const cb = await row(id);
    assert.equal(cb.attempts, 1);
    assert.match(cb.last_error ?? '', /timeout after 200 ms/);
  });
});

describe('the outbox', () => {
  test('row and job are written in the caller transaction: a rollback leaves neither', async () => {
    const request = await movement('http://127.0.0.1:9/never');
    let rolledBackId = '';
    await assert.rejects(
      withTransaction(db.pool, async (client) => {
        rolledBackId = await enqueueCallback(
          client,
          { movement: request, eventType: 'request_approved', occurredAt: new Date().toISOString(), maxAttempts: 5 },
          queue,
        );
        assert.ok(await getCallback(client, rolledBackId), 'visible inside the transaction');
        throw new Error('transition failed after the callback was written');
      }),
      /transition failed/,
    );
    assert.match(rolledBackId, /^[0-9a-f-]{36}$/);
    assert.equal(await getCallback(db.pool, rolledBackId), null, 'no outbox row');
    assert.equal(await job(rolledBackId, 0, 0), null, 'no delivery job');

    const committed = await newCallback(request, 'request_approved');
    assert.ok(await getCallback(db.pool, committed));
    assert.ok(await job(committed, 0, 0));
  });

  test('enqueueCallback refuses a movement without a callback URL', async () => {
    const request = await movement('http://127.0.0.1:9/x');
    await assert.rejects(
      withTransaction(db.pool, (client) =>
        enqueueCallback(client, { movement: { ...request, callback_url: null }, eventType: 'x', occurredAt: 'now', maxAttempts: 5 }),
      ),
      /no callback_url/,
    );
  });

  test('timestamp and nonce are fixed at creation', async () => {
    const request = await movement('http://127.0.0.1:9/x');
    const before = Math.floor(Date.now() / 1000);
    const a = await row(await newCallback(request, 'request_approved', { withJob: false }));
    const b = await row(await newCallback(request, 'request_approved', { withJob: false }));
    assert.ok(a.callback_timestamp >= before && a.callback_timestamp <= Math.floor(Date.now() / 1000));
    assert.match(a.callback_nonce, /^[0-9a-f]{32}$/);
    assert.notEqual(a.callback_nonce, b.callback_nonce);
    assert.equal(a.max_attempts, 5);
  });

  test('listCallbacks pages by (created_at, id) without gaps or repeats; callbacksForMovement keeps order', async () => {
    const request = await movement('http://127.0.0.1:9/x');
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) ids.push(await newCallback(request, `event_${i}`, { withJob: false }));

    const { items: seen, pages } = await collectPages(async (cursor) => {
      const page = await listCallbacks(db.pool, { movementId: request.id, status: 'pending', limit: 3, cursor });
      return { items: page.callbacks.map((c) => c.id), next: page.nextCursor };
    });
    assert.deepEqual(seen, ids);
    assert.equal(pages, 3);
    assert.deepEqual((await callbacksForMovement(db.pool, request.id)).map((c) => c.id), ids);
    assert.deepEqual((await listCallbacks(db.pool, { movementId: request.id, status: 'sent', limit: 10 })).callbacks, []);
    assert.deepEqual(await callbacksForMovement(db.pool, 'nope'), []);

    for (const bad of ['garbage', Buffer.from('["2026-02-30T00:00:00.000000Z","00000000-0000-4000-8000-000000000000"]').toString('base64url'), Buffer.from('[1,2]').toString('base64url')]) {
      await assert.rejects(listCallbacks(db.pool, { limit: 3, cursor: bad }), (e: unknown) => e instanceof FerryError && e.code === 'VALIDATION_FAILED');
    }
    for (const limit of [0, -1, 1.5, 10_000]) {
      await assert.rejects(listCallbacks(db.pool, { limit }), (e: unknown) => e instanceof FerryError && e.code === 'VALIDATION_FAILED');
    }
    await assert.rejects(
      listCallbacks(db.pool, { limit: 3, status: 'bogus' as never }),
      (e: unknown) => e instanceof FerryError && e.code === 'VALIDATION_FAILED',
    );
  });

  test('the sweep re-enqueues only the callback whose turn it is', async () => {
    const request = await movement('http://127.0.0.1:9/x');
    const first = await newCallback(request, 'request_approved', { withJob: false });
    const second = await newCallback(request, 'request_executing', { withJob: false });
    await backdate(first, 300);
    await backdate(second, 300);
    const before = await requeueStrandedCallbacks(db.pool, queue, { limit: 10_000 });
    assert.ok(before >= 1);
    const minute = Math.floor(Date.now() / 60_000);
    const sweepJob = (await job(first, 0, 0, `sweep:${minute}`)) ?? (await job(first, 0, 0, `sweep:${minute - 1}`));
    assert.ok(sweepJob, 'the head of the request got a job');
    assert.equal(await job(second, 0, 0, `sweep:${minute}`), null, 'the one behind it waits for its turn');
  });
});
