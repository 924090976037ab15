import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import { promoteAudit } from '../src/sweeps/audit-promoter.ts';
import { FerryError } from '../src/errors.ts';
import {
  GENESIS_HASH,
  auditChainHead,
  auditEventHash,
  canonicalJson,
  listAuditEvents,
  pendingAuditCount,
  promoteAuditBatch,
  verifyAuditChain,
  writeAudit,
} from '../src/persistence/audit.ts';
import { withTransaction } from '../src/persistence/db.ts';
import { testDatabase } from './helpers/db.ts';
import { collectPages } from './helpers/pages.ts';
import { within } from './helpers/wait.ts';

const { pool } = await testDatabase();

/** Runs SQL as an attacker with owner rights: the append-only trigger switched off for the statement. */
async function tamper(sql: string, params: unknown[] = []): Promise<void> {
  await withTransaction(pool, async (c) => {
    await c.query('ALTER TABLE audit_events DISABLE TRIGGER audit_events_append_only');
    await c.query(sql, params);
    await c.query('ALTER TABLE audit_events ENABLE TRIGGER audit_events_append_only');
  });
}

/** An independent verifier written from the encoding documented in src/persistence/audit.ts. */
async function externalVerify(): Promise<number> {
  const { rows } = await pool.query(
    `SELECT id, outbox_id, actor, action, entity_type, entity_id, details::text AS details_text,
            to_char(occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS occurred_at, prev_hash, hash
       FROM audit_events ORDER BY id`,
  );
  const sorted = (v: unknown): unknown =>
    Array.isArray(v)
      ? v.map(sorted)
      : v && typeof v === 'object'
        ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, sorted((v as Record<string, unknown>)[k])]))
        : v;
  let prev = 'sha256:0000000000000000000000000000000000000000000000000000000000000000';
  rows.forEach((r, i) => {
    assert.equal(Number(r.id), i + 1);
    assert.equal(r.prev_hash, prev);
    const body = JSON.stringify({
      outbox_id: Number(r.outbox_id),
      actor: r.actor,
      action: r.action,
      entity_type: r.entity_type,
      entity_id: r.entity_id,
      details: sorted(JSON.parse(r.details_text)),
      occurred_at: r.occurred_at,
    });
    const hash = 'sha256:' + createHash('sha256').update(`${prev}\n${body}`, 'utf8').digest('hex');
    assert.equal(r.hash, hash, `event ${r.id}`);
    prev = hash;
  });
  return rows.length;
}

test('the hash follows the documented encoding (fixed vector)', () => {
  assert.equal(canonicalJson({ b: 1, a: { d: [1, 'x', { z: true, y: null }], c: 'é"\n' } }), '{"a":{"c":"é\\"\\n","d":[1,"x",{"y":null,"z":true}]},"b":1}');
  const event = {
    outbox_id: 7,
    actor: 'token:alice',
    action: 'movement.approve',
    entity_type: 'movement',
    entity_id: null,
    details: { plan_hash: 'abc', quorum: 2 },
    occurred_at: '2030-01-02T03:04:05.123456Z',
  };
  const preimage =
    GENESIS_HASH +
    '\n{"outbox_id":7,"actor":"token:alice","action":"movement.approve","entity_type":"movement","entity_id":null,' +
    '"details":{"plan_hash":"abc","quorum":2},"occurred_at":"2030-01-02T03:04:05.123456Z"}';
  assert.equal(auditEventHash(GENESIS_HASH, event), 'sha256:' + createHash('sha256').update(preimage).digest('hex'));
  assert.equal(GENESIS_HASH, 'sha256:' + '0'.repeat(64));
});

test('an empty chain verifies and has no head', async () => {
  assert.deepEqual(await verifyAuditChain(pool), { ok: true, checked: 0 });
  assert.equal(await auditChainHead(pool), null);
  assert.equal(await promoteAuditBatch(pool), 0);
});

test('concurrent writers and concurrent promoters build one gap-free chain that verifies', async () => {
  const writers = 40;
  const perWriter = 5;
  const written: number[] = [];
  let done = false;
  const writing = Promise.all(
    Array.from({ length: writers }, (_, w) =>
      withTransaction(pool, async (c) => {
        const ids: number[] = [];
        for (let i = 0; i < perWriter; i++) {
          ids.push(
            await writeAudit(c, {
              actor: `token:writer-${w}`,
              action: 'movement.create',
              entity_type: 'movement',
              entity_id: `m-${w}-${i}`,
              details: { writer: w, i, nested: { z: 1, a: [w, i] } },
            }),
          );
        }
        // Every fifth writer rolls back: its audit rows must vanish with its change.
        if (w % 5 === 4) throw new Error('rolled back on purpose');
        written.push(...ids);
      }).catch((e: Error) => {
        if (e.message !== 'rolled back on purpose') throw e;
      }),
    ),
  ).finally(() => {
    done = true;
  });
  const promoters = Array.from({ length: 4 }, async () => {
    let moved = 0;
    for (;;) {
      const finished = done;
      const n = await promoteAuditBatch(pool, 7);
      moved += n;
      if (finished && n === 0) return moved;
    }
  });
  await writing;
  const movedByPromoters = (await within('the promoters to empty the outbox', Promise.all(promoters))).reduce((a, b) => a + b, 0);

  const committed = (writers - writers / 5) * perWriter;
  assert.equal(written.length, committed);
  assert.equal(movedByPromoters, committed, 'each row promoted exactly once');
  assert.equal(await pendingAuditCount(pool), 0);
  const { rows } = await pool.query<{ id: number; outbox_id: number }>('SELECT id, outbox_id FROM audit_events ORDER BY id');
  assert.deepEqual(
    rows.map((r) => r.id),
    Array.from({ length: committed }, (_, i) => i + 1),
  );
  assert.deepEqual(
    rows.map((r) => r.outbox_id).sort((a, b) => a - b),
    [...written].sort((a, b) => a - b),
  );
  assert.deepEqual(await verifyAuditChain(pool), { ok: true, checked: committed });
  assert.equal(await externalVerify(), committed);
  assert.deepEqual(await auditChainHead(pool), {
    id: committed,
    hash: (await pool.query('SELECT hash FROM audit_events WHERE id = $1', [committed])).rows[0].hash,
  });
});

test('the promoter run drains more than one batch', async () => {
  await withTransaction(pool, async (c) => {
    for (let i = 0; i < 1203; i++) await writeAudit(c, { actor: 'worker:test', action: 'bulk', entity_type: 'test', details: { i } });
  });
  assert.equal(await promoteAudit(pool), 1203);
  assert.equal(await promoteAudit(pool), 0);
  const result = await verifyAuditChain(pool);
  assert.equal(result.ok, true);
  assert.equal(result.checked, 160 + 1203);
});

test('audit_events refuses UPDATE, DELETE and TRUNCATE; audit_outbox refuses UPDATE', async () => {
  await assert.rejects(pool.query(`UPDATE audit_events SET actor = 'x' WHERE id = 1`), /append-only/);
  await assert.rejects(pool.query('DELETE FROM audit_events WHERE id = 1'), /append-only/);
  await assert.rejects(pool.query('TRUNCATE audit_events'), /append-only/);
  const id = await writeAudit(pool, { actor: 'a', action: 'b', entity_type: 'c' });
  await assert.rejects(pool.query(`UPDATE audit_outbox SET actor = 'x' WHERE id = $1`, [id]), /append-only/);
  await promoteAuditBatch(pool);
  assert.equal((await verifyAuditChain(pool)).ok, true);
});

test('changing a row’s details breaks the chain at that row', async () => {
  const { rows } = await pool.query('SELECT details FROM audit_events WHERE id = 50');
  await tamper(`UPDATE audit_events SET details = jsonb_set(details, '{writer}', '999') WHERE id = 50`);
  const result = await verifyAuditChain(pool);
  assert.equal(result.ok, false);
  assert.equal(result.broken!.id, 50);
  assert.match(result.broken!.reason, /hash mismatch/);
  assert.equal(result.checked, 49);
  await tamper('UPDATE audit_events SET details = $1 WHERE id = 50', [rows[0].details]);
  assert.equal((await verifyAuditChain(pool)).ok, true, 'restoring the row restores the chain');
});

test('changing a timestamp by one microsecond is detected', async () => {
  await tamper(`UPDATE audit_events SET occurred_at = occurred_at + interval '1 microsecond' WHERE id = 30`);
  const result = await verifyAuditChain(pool);
  assert.deepEqual(result.broken?.id, 30);
  await tamper(`UPDATE audit_events SET occurred_at = occurred_at - interval '1 microsecond' WHERE id = 30`);
  assert.equal((await verifyAuditChain(pool)).ok, true);
});

test('rewriting a row together with its hash breaks the link to the next row', async () => {
  const { rows } = await pool.query('SELECT actor, hash FROM audit_events WHERE id = 60');
  const forged = await pool.query(
    `SELECT outbox_id, entity_type, entity_id, action, details, prev_hash,
            to_char(occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS occurred_at
       FROM audit_events WHERE id = 60`,
  );
  const f = forged.rows[0];
  const hash = auditEventHash(f.prev_hash, { ...f, actor: 'token:mallory' });
  await tamper(`UPDATE audit_events SET actor = 'token:mallory', hash = $1 WHERE id = 60`, [hash]);
  const result = await verifyAuditChain(pool);
  assert.equal(result.ok, false);
  assert.equal(result.broken!.id, 61);
  assert.match(result.broken!.reason, /prev_hash mismatch/);
  await tamper('UPDATE audit_events SET actor = $1, hash = $2 WHERE id = 60', [rows[0].actor, rows[0].hash]);
  assert.equal((await verifyAuditChain(pool)).ok, true);
});

test('deleting a middle row (or the first) is named as a gap', async () => {
  for (const victim of [100, 1]) {
    // occurred_at as text: a JS Date would drop the microseconds the hash covers.
    const { rows } = await pool.query('SELECT *, occurred_at::text AS occurred_text FROM audit_events WHERE id = $1', [victim]);
    await tamper('DELETE FROM audit_events WHERE id = $1', [victim]);
    const result = await verifyAuditChain(pool);
    assert.equal(result.ok, false);
    assert.equal(result.broken!.id, victim + 1);
    assert.match(result.broken!.reason, new RegExp(`gap in the chain: event ${victim} is missing`));
    const r = rows[0];
    await pool.query(
      `INSERT INTO audit_events (id, outbox_id, actor, action, entity_type, entity_id, details, occurred_at, prev_hash, hash, promoted_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
      [r.id, r.outbox_id, r.actor, r.action, r.entity_type, r.entity_id, r.details, r.occurred_text, r.prev_hash, r.hash, r.promoted_at],
    );
    assert.equal((await verifyAuditChain(pool)).ok, true);
  }
});

test('a recorded head detects a removed tail that the chain alone cannot', async () => {
  const before = (await auditChainHead(pool))!;
  await tamper('DELETE FROM audit_events WHERE id = $1', [before.id]);
  assert.equal((await verifyAuditChain(pool)).ok, true, 'a shorter chain is still internally consistent');
  const result = await verifyAuditChain(pool, { checkpoint: before });
  assert.equal(result.ok, false);
  assert.equal(result.broken!.id, before.id);
  assert.match(result.broken!.reason, /checkpoint/);
  const older = (await pool.query('SELECT id, hash FROM audit_events WHERE id = 10')).rows[0];
  assert.equal((await verifyAuditChain(pool, { checkpoint: older })).ok, true);
  const wrong = await verifyAuditChain(pool, { checkpoint: { id: 10, hash: GENESIS_HASH } });
  assert.equal(wrong.broken?.id, 10);
});

test('listAuditEvents pages by id in both directions and filters by entity', async () => {
  const total = (await pool.query('SELECT count(*)::int AS n FROM audit_events')).rows[0].n as number;
  const { items: seen, pages } = await collectPages(async (cursor) => {
    const page = await listAuditEvents(pool, { limit: 97, cursor });
    return { items: page.events.map((e) => e.id), next: page.next_cursor };
  });
  assert.deepEqual(seen, Array.from({ length: total }, (_, i) => i + 1));
  assert.equal(pages, Math.ceil(total / 97));

  const newest = await listAuditEvents(pool, { limit: 3, order: 'desc' });
  assert.deepEqual(newest.events.map((e) => e.id), [total, total - 1, total - 2]);
  const next = await listAuditEvents(pool, { limit: 3, order: 'desc', cursor: newest.next_cursor });
  assert.equal(next.events[0].id, total - 3);

  const one = await listAuditEvents(pool, { entity_type: 'movement', entity_id: 'm-0-1' });
  assert.equal(one.events.length, 1);
  assert.equal(one.next_cursor, null);
  assert.deepEqual(one.events[0].details, { writer: 0, i: 1, nested: { z: 1, a: [0, 1] } });
  assert.match(one.events[0].occurred_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
  assert.match(one.events[0].hash, /^sha256:[0-9a-f]{64}$/);

  for (const bad of [{ limit: 0 }, { limit: 1001 }, { limit: 1.5 }, { cursor: 'abc' }, { cursor: '-1' }, { cursor: '0' }]) {
    await assert.rejects(listAuditEvents(pool, bad), (e: unknown) => e instanceof FerryError && e.code === 'VALIDATION_FAILED', JSON.stringify(bad));
  }
});

test('writeAudit refuses an entry without actor, action or entity_type', async () => {
  for (const bad of [
    { actor: '', action: 'a', entity_type: 'e' },
    { actor: 'a', action: '', entity_type: 'e' },
    { actor: 'a', action: 'a', entity_type: '' },
    { actor: 'a', action: 'a', entity_type: 'e', details: [] as unknown as Record<string, unknown> },
  ]) {
    await assert.rejects(writeAudit(pool, bad), (e: unknown) => e instanceof FerryError && e.code === 'VALIDATION_FAILED');
  }
  assert.equal(await pendingAuditCount(pool), 0);
});
