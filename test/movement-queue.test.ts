/**
 * Queue-fed movements: messages on ferry-movement-requests become movements exactly as the API
 * makes them (same service, idempotency and audit); a message that can never succeed goes to the
 * dead-letter queue with its reason; a failure worth retrying is left to pg-boss.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { consumeMovementRequest, MOVEMENT_QUEUE, MOVEMENT_QUEUE_DLQ, sendMovementRequest } from '../src/actors/movement-queue.ts';
import { createPool, withTransaction } from '../src/persistence/db.ts';
import { saveTemplate } from '../src/persistence/templates.ts';
import { createToken } from '../src/persistence/tokens.ts';
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
await createToken(db.pool, { name: 'an-approver', role: 'approver' });

const base = { template_key: 'queue.pay', intent: { asset: 'USDC', amount: '5' }, requested_by: 'upstream-treasury' };

async function jobOutput(queue: string, id: string) {
  const job = await boss.getJobById(queue, id);
  return job?.state === 'completed' ? (job.output as Record<string, unknown>) : null;
}

const movementsWithKey = async (key: string) =>
  (await db.pool.query('SELECT id, created_by, request_state FROM movement_requests WHERE idempotency_key = $1', [key])).rows;

test('a message becomes a movement as the API makes it; the same message again returns it', async () => {
  const msg = { ...base, idempotency_key: 'queue-ok-1' };
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
  assert.equal((await movementsWithKey('queue-ok-1')).length, 1);
});

test('messages that can never succeed are dead-lettered with their reason and create nothing', async () => {
  await sendMovementRequest(boss, { ...base, idempotency_key: 'queue-reused' });
  const cases: Array<[string, unknown, string]> = [
    ['unknown template', { ...base, template_key: 'queue.missing', idempotency_key: 'queue-bad-1' }, 'NOT_FOUND'],
    ['unknown principal', { ...base, requested_by: 'nobody', idempotency_key: 'queue-bad-2' }, 'FORBIDDEN'],
    ['principal may not create', { ...base, requested_by: 'an-approver', idempotency_key: 'queue-bad-3' }, 'FORBIDDEN'],
    ['no idempotency key', { ...base }, 'VALIDATION_FAILED'],
    ['not an object', 'create a movement please', 'VALIDATION_FAILED'],
    ['callback to a bad scheme', { ...base, callback_url: 'ftp://127.0.0.1/x', idempotency_key: 'queue-bad-4' }, 'VALIDATION_FAILED'],
    ['callback to a private address', { ...base, callback_url: 'http://10.0.0.1/x', idempotency_key: 'queue-bad-5' }, 'CALLBACK_ADDRESS_NOT_ALLOWED'],
    ['an unregistered callback destination', { ...base, callback_destination: 'nobody-listens', idempotency_key: 'queue-bad-dest' }, 'CALLBACK_DESTINATION_UNKNOWN'],
  ];
  await waitFor('the first message of the key', async () => ((await movementsWithKey('queue-reused')).length === 1 ? true : null));
  cases.push(['key reused for another body', { ...base, intent: { asset: 'USDC', amount: '6' }, idempotency_key: 'queue-reused' }, 'IDEMPOTENCY_KEY_REUSED']);

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

test('a failure worth retrying is thrown back to pg-boss, not dead-lettered', async () => {
  const broken = createPool('postgres://postgres@127.0.0.1:1/none', 1);
  after(() => broken.end());
  const dlqBefore = (await db.pool.query(`SELECT count(*)::int AS n FROM pgboss.job WHERE name = $1`, [MOVEMENT_QUEUE_DLQ])).rows[0].n;
  await assert.rejects(
    consumeMovementRequest({ pool: broken, config, transitions: runtime.deps.transitions }, boss, { id: 'local', data: { ...base, idempotency_key: 'queue-transient' } }),
    (err: Error & { code?: string }) => err.code === 'ECONNREFUSED' || /ECONNREFUSED/.test(String(err)),
  );
  assert.equal((await db.pool.query(`SELECT count(*)::int AS n FROM pgboss.job WHERE name = $1`, [MOVEMENT_QUEUE_DLQ])).rows[0].n, dlqBefore);
});

test('`ferry queue send` places a message that a worker turns into a movement', async () => {
  const run = (args: string[]) => runCliProcess(args, { DATABASE_URL: db.url, FERRY_LOG_LEVEL: 'silent' });
  const sent = await run(['queue', 'send', '--template', 'queue.pay', '--intent', '{"asset":"USDC","amount":"7"}', '--requested-by', 'upstream-treasury', '--idempotency-key', 'queue-cli-1', '--json']);
  assert.equal(sent.code, 0, sent.stderr);
  const { job_id } = JSON.parse(sent.stdout);
  const out = await waitFor('the CLI job', () => jobOutput(MOVEMENT_QUEUE, job_id));
  assert.equal(out.outcome, 'created');
  const bad = await run(['queue', 'send', '--template', 'queue.pay', '--intent', '[1]', '--requested-by', 'x']);
  assert.equal(bad.code, 2, bad.stderr);
  assert.match(bad.stderr, /--intent must be a JSON object/);
});
