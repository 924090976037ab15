/**
 * Queue-fed movements: signed orders on ferry-movement-requests become movements exactly as the API
 * makes them (same service, idempotency and audit); a message that can never succeed goes to the
 * dead-letter queue with its reason; a failure worth retrying is left to pg-boss. Who asks is
 * proven by a queue credential's signature (issue 20, finding 5): a forged, tampered, unsigned,
 * revoked or stale order is dead-lettered, audited, and creates nothing.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { consumeMovementRequest, MOVEMENT_QUEUE, MOVEMENT_QUEUE_DLQ, sendMovementRequest } from '../src/queue/movement-queue.ts';
import { createPool, withTransaction } from '../src/persistence/db.ts';
import { saveTemplate } from '../src/persistence/templates.ts';
import { createToken } from '../src/persistence/tokens.ts';
import { createQueueCredential, revokeQueueCredential, signMovementOrder } from '../src/services/queue-credentials.ts';
import { parseTemplateDefinition } from '../src/plan/template-schema.ts';
import { runtimeForFile } from './helpers/app.ts';
import { runCliProcess } from './helpers/cli.ts';
import { singleNodeTemplate } from './helpers/fixtures.ts';
import { waitFor } from './helpers/wait.ts';

const { db, config, runtime } = await runtimeForFile(
  { FERRY_DATA_DIR: '.ferry/test-movement-queue', FERRY_CALLBACK_SECRET: 'movement-queue-secret-0123' },
  { workers: true },
);
const boss = runtime.boss;

await withTransaction(db.pool, (c) => saveTemplate(c, parseTemplateDefinition(singleNodeTemplate('queue.pay')), 'test'));
const requester = await createToken(db.pool, { name: 'upstream-treasury', role: 'requester' });
const other = await createToken(db.pool, { name: 'an-approver', role: 'approver' });
// Each principal's queue credential: the key that signs its orders (Ferry keeps the public half).
const treasuryKey = (await createQueueCredential(db.pool, { principal: 'upstream-treasury' }, 'cli:test')).key;
const otherKey = (await createQueueCredential(db.pool, { principal: 'an-approver' }, 'cli:test')).key;

const base = { template_key: 'queue.pay', intent: { asset: 'USDC', amount: '5' }, requested_by: 'upstream-treasury' };
/** An order as upstream-treasury's system sends it: signed with its key, now. */
const signed = <T extends Record<string, unknown>>(order: T, key = treasuryKey, at?: Date) => signMovementOrder(order, key, at);

async function jobOutput(queue: string, id: string) {
  const job = await boss.getJobById(queue, id);
  return job?.state === 'completed' ? (job.output as Record<string, unknown>) : null;
}

const movementsWithKey = async (key: string) =>
  (await db.pool.query('SELECT id, created_by, request_state FROM movement_requests WHERE idempotency_key = $1', [key])).rows;

test('a message becomes a movement as the API makes it; the same message again returns it', async () => {
  const msg = signed({ ...base, idempotency_key: 'queue-ok-1' });
  const first = await sendMovementRequest(boss, msg);
  const out = await waitFor('the first job', () => jobOutput(MOVEMENT_QUEUE, first));
  assert.equal(out.outcome, 'created');
  const rows = await movementsWithKey('queue-ok-1');
  assert.equal(rows.length, 1);
  assert.equal(rows[0].id, out.movement_id);
  assert.equal(rows[0].created_by, `principal:${requester.principal_id}`, 'the requesting principal is the requester (four-eyes applies)');
  assert.equal(rows[0].request_state, 'PENDING_APPROVAL');
  const audit = await db.pool.query(
    `SELECT count(*)::int AS n FROM (SELECT entity_id FROM audit_outbox UNION ALL SELECT entity_id FROM audit_events) a WHERE entity_id = $1`,
    [out.movement_id],
  );
  assert.ok(audit.rows[0].n >= 1, 'created with its audit row');

  const again = await sendMovementRequest(boss, msg);
  const replay = await waitFor('the repeated job', () => jobOutput(MOVEMENT_QUEUE, again));
  assert.deepEqual(replay, { outcome: 'replayed', movement_id: out.movement_id });
  assert.equal((await movementsWithKey('queue-ok-1')).length, 1, 'a replayed order creates no second movement');
  const jobs = await db.pool.query(`SELECT data::text AS data FROM pgboss.job WHERE id = ANY($1::uuid[])`, [[first, again]]);
  assert.equal(jobs.rows.length, 2);
  for (const r of jobs.rows) assert.ok(!r.data.includes(treasuryKey.split('.')[1]), 'nothing in the job can sign an order');
});

test('messages that can never succeed are dead-lettered with their reason and create nothing', async () => {
  await sendMovementRequest(boss, signed({ ...base, idempotency_key: 'queue-reused' }));
  const cases: Array<[string, unknown, string]> = [
    ['unknown template', signed({ ...base, template_key: 'queue.missing', idempotency_key: 'queue-bad-1' }), 'NOT_FOUND'],
    ['no idempotency key', signed({ ...base }), 'VALIDATION_FAILED'],
    ['not an object', 'create a movement please', 'VALIDATION_FAILED'],
    ['callback to a bad scheme', signed({ ...base, callback_url: 'ftp://127.0.0.1/x', idempotency_key: 'queue-bad-4' }), 'VALIDATION_FAILED'],
    ['callback to a private address', signed({ ...base, callback_url: 'http://10.0.0.1/x', idempotency_key: 'queue-bad-5' }), 'CALLBACK_ADDRESS_NOT_ALLOWED'],
    ['an unregistered callback destination', signed({ ...base, callback_destination: 'nobody-listens', idempotency_key: 'queue-bad-dest' }), 'CALLBACK_DESTINATION_UNKNOWN'],
  ];
  await waitFor('the first message of the key', async () => ((await movementsWithKey('queue-reused')).length === 1 ? true : null));
  cases.push(['key reused for another body', signed({ ...base, intent: { asset: 'USDC', amount: '6' }, idempotency_key: 'queue-reused' }), 'IDEMPOTENCY_KEY_REUSED']);

  const before = (await db.pool.query('SELECT count(*)::int AS n FROM movement_requests')).rows[0].n;
  for (const [what, data, code] of cases) {
    // Sent raw, as a foreign system might: the consumer, not the sender, must catch it.
    const id = (await boss.send(MOVEMENT_QUEUE, data as object))!;
    const out = await waitFor(what, () => jobOutput(MOVEMENT_QUEUE, id));
    assert.equal(out.outcome, 'dead_lettered', what);
    assert.equal((out.reason as { code: string }).code, code, what);
    const dead = await waitFor(`${what} in the dead-letter queue`, async () => {
      const { rows } = await db.pool.query(`SELECT data FROM pgboss.job WHERE name = $1 AND data->>'source_job_id' = $2`, [MOVEMENT_QUEUE_DLQ, id]);
      return rows[0]?.data ?? null;
    });
    assert.equal(dead.reason.code, code, what);
    assert.deepEqual(dead.message, data, what);
  }
  assert.equal((await db.pool.query('SELECT count(*)::int AS n FROM movement_requests')).rows[0].n, before, 'nothing was created');
});

/** Sends raw data and waits for the dead-letter reason; the order must create nothing. */
async function deadLettered(what: string, data: unknown): Promise<{ code: string; details: Record<string, unknown> }> {
  const id = (await boss.send(MOVEMENT_QUEUE, data as object))!;
  const out = await waitFor(what, () => jobOutput(MOVEMENT_QUEUE, id));
  assert.equal(out.outcome, 'dead_lettered', what);
  // The audit promoter may already have moved the row from the outbox into the chain.
  const audit = await db.pool.query(
    `SELECT actor, details FROM (SELECT actor, details, action, entity_id FROM audit_outbox
        UNION ALL SELECT actor, details, action, entity_id FROM audit_events) a
      WHERE action = 'movement_queue.order_refused' AND entity_id = $1`,
    [id],
  );
  assert.equal(audit.rows.length, 1, `${what}: audited`);
  assert.equal(audit.rows[0].actor, 'worker:movement_queue');
  return out.reason as { code: string; details: Record<string, unknown> };
}

test('forged, tampered, unsigned and revoked orders are dead-lettered as QUEUE_ORDER_UNAUTHENTICATED, audited, and create nothing', async () => {
  const before = (await db.pool.query('SELECT count(*)::int AS n FROM movement_requests')).rows[0].n;
  // The old shape: a message that only names its requester.
  let r = await deadLettered('unsigned', { ...base, idempotency_key: 'forged-1' });
  assert.deepEqual([r.code, r.details.reason], ['QUEUE_ORDER_UNAUTHENTICATED', 'unsigned']);
  // Signed by another principal's key, naming upstream-treasury.
  r = await deadLettered('another principal\'s key', signed({ ...base, idempotency_key: 'forged-2' }, otherKey));
  assert.deepEqual([r.code, r.details.reason], ['QUEUE_ORDER_UNAUTHENTICATED', 'requester_mismatch']);
  // upstream-treasury's credential id with a signature made up by the writer.
  const made = signed({ ...base, idempotency_key: 'forged-3' });
  r = await deadLettered('a made-up signature', { ...made, signature: Buffer.alloc(64, 7).toString('base64url') });
  assert.deepEqual([r.code, r.details.reason], ['QUEUE_ORDER_UNAUTHENTICATED', 'bad_signature']);
  // A genuine order whose amount was changed on the way.
  const genuine = signed({ ...base, idempotency_key: 'forged-4' });
  r = await deadLettered('a tampered amount', { ...genuine, intent: { asset: 'USDC', amount: '5000' } });
  assert.deepEqual([r.code, r.details.reason], ['QUEUE_ORDER_UNAUTHENTICATED', 'bad_signature']);
  // An unknown credential.
  r = await deadLettered('an unknown credential', { ...genuine, credential_id: '00000000-0000-4000-8000-000000000000' });
  assert.deepEqual([r.code, r.details.reason], ['QUEUE_ORDER_UNAUTHENTICATED', 'unknown_credential']);
  // A revoked credential signs nothing from then on.
  const spare = await createQueueCredential(db.pool, { principal: 'upstream-treasury', name: 'spare' }, 'cli:test');
  await revokeQueueCredential(db.pool, 'spare', 'cli:test');
  r = await deadLettered('a revoked credential', signed({ ...base, idempotency_key: 'forged-5' }, spare.key));
  assert.deepEqual([r.code, r.details.reason], ['QUEUE_ORDER_UNAUTHENTICATED', 'unknown_credential']);
  assert.equal((await db.pool.query('SELECT count(*)::int AS n FROM movement_requests')).rows[0].n, before, 'nothing was created');
  assert.equal(other.principal_id !== requester.principal_id, true);
});

test('an order queued outside its replay window is dead-lettered as QUEUE_ORDER_EXPIRED; a retry of its own job is not', async () => {
  const old = signed({ ...base, idempotency_key: 'stale-1' }, treasuryKey, new Date(Date.now() - (config.queueOrderMaxAgeSeconds + 5) * 1000));
  const r = await deadLettered('a stale order', old);
  assert.equal(r.code, 'QUEUE_ORDER_EXPIRED');
  assert.equal((await movementsWithKey('stale-1')).length, 0);
  // A copy of a consumed order queued again after the window: refused, not replayed.
  const order = signed({ ...base, idempotency_key: 'replay-late' });
  const deps = { pool: db.pool, config, transitions: runtime.deps.transitions };
  assert.equal((await consumeMovementRequest(deps, boss, { id: 'first', data: order, createdOn: new Date() })).outcome, 'created');
  const late = new Date(Date.parse(order.issued_at) + (config.queueOrderMaxAgeSeconds + 1) * 1000);
  assert.equal((await consumeMovementRequest(deps, boss, { id: 'copy', data: order, createdOn: late })).outcome, 'dead_lettered');
  // pg-boss retrying the first job later keeps the job's creation time: still the first movement.
  assert.equal((await consumeMovementRequest(deps, boss, { id: 'first', data: order, createdOn: new Date(Date.parse(order.issued_at)) })).outcome, 'replayed');
  assert.equal((await movementsWithKey('replay-late')).length, 1);
});

test('a failure worth retrying is thrown back to pg-boss, not dead-lettered', async () => {
  const broken = createPool('postgres://postgres@127.0.0.1:1/none', 1);
  after(() => broken.end());
  const dlqBefore = (await db.pool.query(`SELECT count(*)::int AS n FROM pgboss.job WHERE name = $1`, [MOVEMENT_QUEUE_DLQ])).rows[0].n;
  await assert.rejects(
    consumeMovementRequest({ pool: broken, config, transitions: runtime.deps.transitions }, boss, { id: 'local', data: signed({ ...base, idempotency_key: 'queue-transient' }) }),
    (err: Error & { code?: string }) => err.code === 'ECONNREFUSED' || /ECONNREFUSED/.test(String(err)),
  );
  assert.equal((await db.pool.query(`SELECT count(*)::int AS n FROM pgboss.job WHERE name = $1`, [MOVEMENT_QUEUE_DLQ])).rows[0].n, dlqBefore);
});

test('`ferry queue credentials create` writes a key that `ferry queue send` signs with; a worker turns it into a movement', async () => {
  const run = (args: string[], env: Record<string, string> = {}) => runCliProcess(args, { DATABASE_URL: db.url, FERRY_LOG_LEVEL: 'silent', ...env });
  const dir = mkdtempSync(join(tmpdir(), 'ferry-queue-key-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const keyFile = join(dir, 'treasury.key');
  const made = await run(['queue', 'credentials', 'create', '--principal', 'upstream-treasury', '--name', 'treasury-cli', '--out', keyFile]);
  assert.equal(made.code, 0, made.stderr);
  assert.equal(statSync(keyFile).mode & 0o777, 0o600);
  assert.ok(!made.stdout.includes(readFileSync(keyFile, 'utf8').trim()), 'with --out the key is not printed');
  const unsigned = await run(['queue', 'send', '--template', 'queue.pay', '--intent', '{"amount":"1"}', '--requested-by', 'upstream-treasury']);
  assert.equal(unsigned.code, 2);
  assert.match(unsigned.stderr, /a queue key is required/);
  const sent = await run(['queue', 'send', '--template', 'queue.pay', '--intent', '{"asset":"USDC","amount":"7"}', '--requested-by', 'upstream-treasury', '--key-file', keyFile, '--idempotency-key', 'queue-cli-1', '--json']);
  assert.equal(sent.code, 0, sent.stderr);
  const { job_id } = JSON.parse(sent.stdout);
  const out = await waitFor('the CLI job', () => jobOutput(MOVEMENT_QUEUE, job_id));
  assert.equal(out.outcome, 'created');
  const bad = await run(['queue', 'send', '--template', 'queue.pay', '--intent', '[1]', '--requested-by', 'x', '--key-file', keyFile]);
  assert.equal(bad.code, 2, bad.stderr);
  assert.match(bad.stderr, /--intent must be a JSON object/);
});
