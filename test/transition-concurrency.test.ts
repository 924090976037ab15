import assert from 'node:assert/strict';
import { test } from 'node:test';
import { deliverMovementEvent } from '../src/durable/transition.ts';
import type { MovementEvent } from '../src/machines/movement-machine.ts';
import { withTransaction } from '../src/persistence/db.ts';
import { getMovement, transitionsOfEntity } from '../src/persistence/movements.ts';
import { testDatabase } from './helpers/db.ts';
import { collectingDeps, seedMovement, singleNodeTemplate } from './helpers/fixtures.ts';

const db = await testDatabase();
const deps = collectingDeps();

test('20 concurrent conflicting events to one request: exactly one wins, the log agrees', async () => {
  for (let round = 0; round < 5; round++) {
    const { movement } = await seedMovement(db.pool, singleNodeTemplate(`race-${round}`), { createdBy: 'requester' });
    const at = new Date().toISOString();
    const events: MovementEvent[] = [];
    for (let i = 0; i < 10; i++) events.push({ type: 'APPROVE', by: `approver-${i}`, at });
    for (let i = 0; i < 10; i++) events.push({ type: 'REJECT', by: `rejecter-${i}`, at });
    const results = await Promise.allSettled(
      events.map((e) => withTransaction(db.pool, (c) => deliverMovementEvent(c, movement.id, e, { actor: e.type, deps }))),
    );
    const won = results.filter((r) => r.status === 'fulfilled');
    const lost = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    assert.equal(won.length, 1, 'exactly one event wins');
    for (const r of lost) assert.ok(['INVALID_TRANSITION', 'TRANSITION_CONFLICT'].includes(r.reason.code), String(r.reason));

    const row = (await getMovement(db.pool, movement.id))!;
    const log = await transitionsOfEntity(db.pool, movement.id);
    assert.deepEqual(log.map((t) => t.seq), [0, 1], 'creation plus exactly one accepted event, no gap or duplicate');
    assert.equal(log.at(-1)!.to_state, row.request_state);
    assert.ok(['APPROVED', 'REJECTED'].includes(row.request_state));
    assert.equal(row.row_version, 1);
  }
});
