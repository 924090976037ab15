import assert from 'node:assert/strict';
import { beforeEach, test } from 'node:test';
import { dispatchOne } from '../src/actors/dispatcher.ts';
import { PREPARED_ACTION_EXPIRED, preparedActionExpired } from '../src/actors/prepared-expiry.ts';
import { LocalExecutorAdapter } from '../src/executors/local-adapter.ts';
import { payloadHash } from '../src/executors/payload-hash.ts';
import type { ExecutionContext, SignRequest } from '../src/executors/protocol.ts';
import { artifactsOfMovement } from '../src/persistence/artifacts.ts';
import { transitionsOfEntity } from '../src/persistence/movements.ts';
import { scratchDatabase, type TestDb } from './helpers/db.ts';
import { waitFor } from './helpers/wait.ts';
import { approvedMovement, plan, runtimeDeps, snapshot } from './helpers/runtime.ts';

/**
 * A prepared action's expires_at is enforced: past it, the action is never signed (checked right
 * before the signer is asked) nor submitted (checked right before submit()); the node goes back to
 * READY and is prepared again, and a fresh action is signed and submitted once.
 */

const EXECUTOR = 'exec.test.expiring';
const SIGNER = 'test.expiry_signer';

let db: TestDb;
let deps: ReturnType<typeof runtimeDeps>;
/** What each prepare() gives its action as expires_at, by call (the last repeats). */
let expiries: Array<() => string | null>;
let prepares: number;
let signed: SignRequest[];
let submitted: number[];
/** When set, the signer does not answer while it holds (a stalled signer). */
let signerHolds: (() => boolean) | null;

beforeEach(async (t) => {
  db = await scratchDatabase(t as never);
  deps = runtimeDeps(db.pool);
  prepares = 0;
  signed = [];
  submitted = [];
  signerHolds = null;
  deps.executors.register(
    new LocalExecutorAdapter({
      executorKey: EXECUTOR,
      lane: 'test',
      handler: {
        prepare: (ctx: ExecutionContext) => {
          const expiresAt = expiries[Math.min(prepares++, expiries.length - 1)]!();
          const payload = JSON.stringify({ node: ctx.request_node_id, attempt: ctx.attempt_no, n: prepares });
          return {
            next_state: 'AWAITING_SIGNATURE',
            prepared_action: {
              prepared_action_id: `pa-${ctx.attempt_no}-${prepares}`,
              action_type: ctx.action_type,
              payload_format: 'json',
              payload,
              payload_hash: payloadHash(payload),
              signing_required: true,
              expires_at: expiresAt,
            },
          };
        },
        submit: (ctx) => (submitted.push(ctx.attempt_no), { next_state: 'COMPLETED', provider_state: 'done' }),
        observe: () => ({ next_state: 'COMPLETED' }),
      },
    }),
  );
  deps.signers.register({
    signerKey: SIGNER,
    sign: async (req) => {
      signed.push(req);
      const holds = signerHolds;
      if (holds) await waitFor('the stalled signer to answer', async () => !holds(), 5_000, 20);
      return { signature: `sig-${req.payload_hash}`, signature_format: 'test', signer_ref: SIGNER };
    },
  });
});

const template = (key: string) =>
  plan(key, [{ node_key: 'pay', node_kind: 'action', action_type: 'test_expiring', executor_binding: { executor_key: EXECUTOR }, signer_binding: { signer_key: SIGNER } }]);

const inSeconds = (s: number) => () => new Date(Date.now() + s * 1000).toISOString();

/** The node is due again now (its retry delay backdated, instead of waited for). */
const dueNow = (nodeId: string) => db.pool.query(`UPDATE request_nodes SET dispatch_after = now() WHERE id = $1`, [nodeId]);

test('an action prepared already expired is never signed nor stored: the node is prepared again and the fresh action is signed and submitted once', async () => {
  expiries = [inSeconds(-60), inSeconds(600)];
  const id = await approvedMovement(deps, template('expired-before-sign'));
  assert.equal(await dispatchOne(deps), true);
  const deferred = (await snapshot(db.pool, id)).byKey.pay;
  assert.equal(deferred.node_state, 'READY');
  assert.equal(deferred.error_code, PREPARED_ACTION_EXPIRED);
  assert.equal(deferred.attempt_no, 0, 'no attempt started');
  assert.equal(signed.length, 0, 'the signer was never asked');
  assert.deepEqual(submitted, []);
  assert.equal((await artifactsOfMovement(db.pool, id)).length, 0, 'the expired action is not stored');
  assert.equal((await transitionsOfEntity(db.pool, deferred.id)).at(-1)!.event_type, 'DISPATCH_DEFERRED');

  await dueNow(deferred.id);
  assert.equal(await dispatchOne(deps), true);
  const done = await snapshot(db.pool, id);
  assert.equal(done.byKey.pay.node_state, 'COMPLETED');
  assert.equal(done.movement.request_state, 'COMPLETED');
  assert.equal(prepares, 2, 'prepared again');
  assert.equal(signed.length, 1, 'only the fresh action was signed');
  assert.deepEqual(submitted, [1]);
});

test('an action that expires while its signer stalls is never submitted: the attempt is abandoned and a new attempt pays once', async () => {
  // The first action expires 300 ms after it is prepared; the signer answers only after that.
  let firstExpiry = 0;
  expiries = [
    () => {
      firstExpiry = Date.now() + 300;
      return new Date(firstExpiry).toISOString();
    },
    inSeconds(600),
  ];
  const id = await approvedMovement(deps, template('expired-during-sign'));
  // The action is valid when the signer is asked (checked right before), expired when it answers.
  signerHolds = () => Date.now() <= firstExpiry;
  assert.equal(await dispatchOne(deps), true);

  const abandoned = (await snapshot(db.pool, id)).byKey.pay;
  assert.equal(abandoned.node_state, 'READY');
  assert.equal(abandoned.error_code, PREPARED_ACTION_EXPIRED);
  assert.equal(abandoned.attempt_no, 1, 'attempt 1 started (signed), then was abandoned');
  assert.deepEqual(submitted, [], 'the expired action was never submitted');
  const events = (await transitionsOfEntity(db.pool, abandoned.id)).map((tr) => tr.event_type);
  assert.deepEqual(events.slice(-3), ['PREPARED', 'SIGNED', 'PRE_SUBMIT_CHECK_DEFERRED']);

  signerHolds = null;
  await dueNow(abandoned.id);
  assert.equal(await dispatchOne(deps), true);
  const done = await snapshot(db.pool, id);
  assert.equal(done.byKey.pay.node_state, 'COMPLETED');
  assert.equal(done.byKey.pay.attempt_no, 2, 'a new attempt');
  assert.deepEqual(submitted, [2], 'submitted once, as attempt 2');
  assert.equal(signed.length, 2);
});

test('the expiry rule: none never expires, a future one holds, the moment itself and an unreadable one are expired', () => {
  const now = Date.parse('2030-01-01T00:00:00Z');
  const at = (expires_at: string | null) => preparedActionExpired({ prepared_action_id: 'pa', expires_at }, 'submit', now);
  assert.equal(at(null), null);
  assert.equal(at('2030-01-01T00:00:01Z'), null);
  assert.equal(at('2030-01-01T00:00:00Z')?.errorCode, PREPARED_ACTION_EXPIRED);
  assert.equal(at('2029-12-31T23:59:59Z')?.errorCode, PREPARED_ACTION_EXPIRED);
  assert.equal(at('not a time')?.errorCode, PREPARED_ACTION_EXPIRED);
});
