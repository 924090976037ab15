/**
 * The audit log the application cannot rewrite: a database owned and migrated by an owner role, an
 * application role set up by `ferry db setup-roles --apply`, and Ferry's runtime connected as the
 * application role. What the role must not do fails with the server's permission error; what the
 * runtime needs (promotion included) still works, end to end.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import pg from 'pg';
import { runCli } from '../src/cli/run.ts';
import type { RunningFerry } from '../src/main.ts';
import { promoteAuditBatch, verifyAuditChain, writeAudit } from '../src/persistence/audit.ts';
import { createPool, withTransaction } from '../src/persistence/db.ts';
import { auditProtection, grantStatements, setupStatements } from '../src/persistence/roles.ts';
import { createToken } from '../src/persistence/tokens.ts';
import { startFerryWithWorkers } from './helpers/ferry.ts';
import { listeningUrl, spawnFerry, stopChild } from './helpers/ferry-process.ts';
import { callApi } from './helpers/http.ts';
import { testDatabase } from './helpers/db.ts';
import { roleDatabase } from './helpers/roles.ts';
import { waitFor } from './helpers/wait.ts';
import { makeTemplateLive } from './helpers/templates.ts';

const db = await roleDatabase();
const appPool = createPool(db.appUrl, 4, 'ferry-test');
const ownerPool = createPool(db.ownerUrl, 2, 'ferry-test');
let ferry: RunningFerry | undefined;
after(async () => {
  await ferry?.stop();
  await appPool.end();
  await ownerPool.end();
});

const CHECKPOINT_KEY = 'k'.repeat(40);

/** Runs `ferry ...` in this process; its exit code and output. */
async function cli(args: string[], env: NodeJS.ProcessEnv) {
  let out = '';
  let err = '';
  const code = await runCli(args, { env, io: { out: (t) => (out += t + '\n'), err: (t) => (err += t + '\n') } });
  return { code, out, err };
}

const adminEnv = { DATABASE_URL: db.appUrl, FERRY_DATABASE_OWNER_URL: db.adminUrl, FERRY_LOG_LEVEL: 'silent' };

async function refused(sql: string, params: unknown[] = []): Promise<void> {
  await assert.rejects(appPool.query(sql, params), (err: { code?: string; message: string }) => {
    // 42501 insufficient_privilege: the role lacks the right (or is not the owner).
    assert.equal(err.code, '42501', `${sql}: ${err.message}`);
    return true;
  });
}

test('setup-roles prints the SQL, and applied twice it succeeds both times', async () => {
  const printed = await cli(['db', 'setup-roles', '--owner-role', db.owner, '--app-role', db.app], adminEnv);
  assert.equal(printed.code, 0, printed.err);
  assert.match(printed.out, /ALTER DEFAULT PRIVILEGES FOR ROLE/);
  assert.match(printed.out, /CREATE SCHEMA IF NOT EXISTS "pgboss" AUTHORIZATION/);
  assert.doesNotMatch(printed.out, /PASSWORD '(?!\.\.\.')/, 'no password in the script');
  for (let i = 0; i < 2; i++) {
    const applied = await cli(['db', 'setup-roles', '--owner-role', db.owner, '--app-role', db.app, '--apply'], adminEnv);
    assert.equal(applied.code, 0, applied.err);
  }
  // The owner alone can re-apply its grants (as every migration run as the owner does).
  const owner = new pg.Client({ connectionString: db.ownerUrl });
  await owner.connect();
  try {
    for (const sql of grantStatements({ owner: db.owner, app: db.app })) await owner.query(sql);
  } finally {
    await owner.end();
  }
  assert.deepEqual(await auditProtection(appPool), { protected: true, reasons: [] });
  assert.equal((await auditProtection(ownerPool)).protected, false, 'the owner itself could rewrite the log');
});

test('the application role cannot change, remove or unguard the append-only tables', async () => {
  // Something on each table first, so a refusal is not the answer to an empty table.
  await withTransaction(appPool, (c) => writeAudit(c, { actor: 'test', action: 'roles.check', entity_type: 'test', entity_id: '1' }));
  assert.equal(await promoteAuditBatch(appPool), 1, 'promotion works as the application role');
  for (const table of ['transitions', 'audit_events']) {
    await refused(`UPDATE ${table} SET id = id`);
    await refused(`DELETE FROM ${table}`);
    await refused(`TRUNCATE ${table}`);
    await refused(`ALTER TABLE ${table} DISABLE TRIGGER ALL`);
  }
  await refused('ALTER TABLE audit_events DISABLE TRIGGER audit_events_append_only');
  await refused('DROP TRIGGER audit_events_append_only ON audit_events');
  await refused(`INSERT INTO audit_events (id, outbox_id, actor, action, entity_type, details, occurred_at, prev_hash, hash)
                 VALUES (99, 99, 'x', 'x', 'x', '{}', now(), 'x', 'x')`);
  await refused('DELETE FROM audit_outbox');
  await refused('TRUNCATE audit_outbox');
  await refused('UPDATE audit_outbox SET actor = actor');
  await refused('DELETE FROM ferry_migrations');
  await refused('SET session_replication_role = replica');

  // The promotion function appends only: a batch that does not continue the head is refused.
  const outboxId = await withTransaction(appPool, (c) => writeAudit(c, { actor: 'test', action: 'roles.fork', entity_type: 'test' }));
  await assert.rejects(
    appPool.query('SELECT ferry_promote_audit($1::bigint[], $2::text[], $3::text[])', [[outboxId], ['sha256:' + '0'.repeat(64)], ['sha256:' + '1'.repeat(64)]]),
    /does not continue the chain head/,
  );
  assert.equal(await promoteAuditBatch(appPool), 1);
  assert.deepEqual(await verifyAuditChain(appPool), { ok: true, checked: 2 });
});

test('tables of later migrations are granted by default, and an append-only one is revoked on the next grant run', async () => {
  const owner = new pg.Client({ connectionString: db.ownerUrl });
  await owner.connect();
  try {
    // What a later migration, run as the owner, might add.
    await owner.query('CREATE TABLE later_things (id bigserial PRIMARY KEY, v text)');
    await owner.query('CREATE TABLE later_log (id bigserial PRIMARY KEY, v text)');
    await owner.query('CREATE TRIGGER later_log_append_only BEFORE UPDATE OR DELETE ON later_log FOR EACH ROW EXECUTE FUNCTION ferry_forbid_change()');
    await appPool.query(`INSERT INTO later_things (v) VALUES ('a')`);
    await appPool.query(`UPDATE later_things SET v = 'b'`);
    await appPool.query('DELETE FROM later_things');
    await appPool.query(`INSERT INTO later_log (v) VALUES ('a')`);
    // The grants Ferry re-applies after every migration run as the owner.
    for (const sql of grantStatements({ owner: db.owner, app: db.app })) await owner.query(sql);
    await appPool.query(`INSERT INTO later_log (v) VALUES ('b')`);
    await refused(`UPDATE later_log SET v = 'c'`);
    await refused('DELETE FROM later_log');
    await refused('TRUNCATE later_things');
    await appPool.query(`INSERT INTO later_things (v) VALUES ('still fine')`);
  } finally {
    await owner.query('DROP TABLE IF EXISTS later_things, later_log').catch(() => {});
    await owner.end();
  }
});

test('the full runtime runs a movement as the application role, migrating as the owner', async () => {
  ferry = await startFerryWithWorkers(db.appUrl, { FERRY_DATABASE_OWNER_URL: db.ownerUrl });
  const operator = (await createToken(appPool, { name: 'op', role: 'operator' })).token;
  const requester = (await createToken(appPool, { name: 'req', role: 'requester' })).token;
  const approver = (await createToken(appPool, { name: 'appr', role: 'approver' })).token;
  await makeTemplateLive(ferry.url, appPool, {
    template_key: 'roles-e2e',
    nodes: [{ node_key: 'pay', node_kind: 'action', action_type: 'sim_action', executor_binding: 'exec.sim.action' }],
    edges: [],
  }, { proposer: operator, approver });
  const created = await callApi(ferry.url, 'POST', '/v3/movements', requester, { template_key: 'roles-e2e', intent: { amount: '1' } });
  assert.equal(created.status, 201, created.text);
  const m = created.body.movement;
  const approved = await callApi(ferry.url, 'POST', `/v3/movements/${m.id}/approve`, approver, { compiled_plan_hash: m.compiled_plan_hash });
  assert.ok(approved.status >= 200 && approved.status < 300, approved.text);
  await waitFor('the movement to complete', async () => {
    const r = await ownerPool.query<{ request_state: string }>('SELECT request_state FROM movement_requests WHERE id = $1', [m.id]);
    return r.rows[0]?.request_state === 'COMPLETED' ? true : null;
  });
  // Every connection of the runtime is the application role's.
  const { rows } = await ownerPool.query<{ usename: string; application_name: string }>(
    `SELECT DISTINCT usename, application_name FROM pg_stat_activity
      WHERE datname = current_database() AND application_name IN ('ferry', 'ferry-worker', 'ferry-pgboss', 'ferry-sim-provider', 'ferry-listen')`,
  );
  assert.ok(rows.length >= 3, JSON.stringify(rows));
  for (const r of rows) assert.equal(r.usename, db.app, `${r.application_name} connects as the application role`);
  // Its audit rows reached the chain through the promotion function, and the chain verifies.
  await waitFor('the movement audit on the chain', async () => {
    const e = await ownerPool.query(`SELECT 1 FROM audit_events WHERE action = 'movement.approve' AND entity_id = $1`, [m.id]);
    return e.rowCount ? true : null;
  });
  assert.equal((await verifyAuditChain(ownerPool)).ok, true);
});

test('start warns when the runtime role could rewrite the audit log, and is quiet when it cannot', async () => {
  const warnings = async (env: Record<string, string>) => {
    const f = spawnFerry({ ...env, FERRY_DATA_DIR: mkdtempSync(join(tmpdir(), 'ferry-roles-start-')) });
    try {
      await listeningUrl(f);
      return f.lines.filter((l) => l.component === 'audit' && l.level === 40);
    } finally {
      assert.equal(await stopChild(f), 0, f.output());
    }
  };
  // One URL for everything, as before roles existed (here the test server's superuser).
  const plain = await testDatabase();
  const single = await warnings({ DATABASE_URL: plain.url });
  assert.equal(single.length, 1, 'one warning');
  assert.match(String(single[0].msg), /not protected .*superuser.*FERRY_DATABASE_OWNER_URL/);
  assert.doesNotMatch(JSON.stringify(single[0]), /postgres(ql)?:\/\//, 'no URL in the warning');
  const separated = await warnings({ DATABASE_URL: db.appUrl, FERRY_DATABASE_OWNER_URL: db.ownerUrl });
  assert.deepEqual(separated, []);
});

test('a signed checkpoint passes on the untouched chain and catches a history rewritten by the owner', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ferry-checkpoint-'));
  const file = join(dir, 'head.json');
  const env = { DATABASE_URL: db.appUrl, FERRY_AUDIT_CHECKPOINT_KEY: CHECKPOINT_KEY, FERRY_LOG_LEVEL: 'silent' };
  const exported = await cli(['audit', 'checkpoint', 'export', '--out', file], env);
  assert.equal(exported.code, 0, exported.err);
  const checkpoint = JSON.parse(readFileSync(file, 'utf8'));
  assert.ok(checkpoint.sequence >= 2);
  assert.doesNotMatch(readFileSync(file, 'utf8'), new RegExp(CHECKPOINT_KEY), 'the key is not in the file');

  const ok = await cli(['audit', 'verify', '--checkpoint', file], env);
  assert.equal(ok.code, 0, ok.out + ok.err);
  assert.match(ok.out, /audit chain ok/);

  // Another key, or a file edited after signing, is refused before the chain is even read.
  const otherKey = await cli(['audit', 'verify', '--checkpoint', file], { ...env, FERRY_AUDIT_CHECKPOINT_KEY: 'x'.repeat(40) });
  assert.equal(otherKey.code, 1);
  assert.match(otherKey.err, /signed with another key/);
  const forged = join(dir, 'forged.json');
  writeFileSync(forged, JSON.stringify({ ...checkpoint, hash: 'sha256:' + 'a'.repeat(64) }));
  const bad = await cli(['audit', 'verify', '--checkpoint', forged], env);
  assert.equal(bad.code, 1);
  assert.match(bad.err, /signature is wrong/);

  // The owner (who may switch the triggers off) rewrites event 1 and recomputes the whole chain, so
  // that the chain alone verifies again: only the checkpoint still knows the old head.
  const owner = new pg.Client({ connectionString: db.ownerUrl });
  await owner.connect();
  try {
    await owner.query('BEGIN');
    await owner.query('ALTER TABLE audit_events DISABLE TRIGGER audit_events_append_only');
    await owner.query(`UPDATE audit_events SET details = '{"rewritten":true}' WHERE id = 1`);
    const { auditEventHash, GENESIS_HASH } = await import('../src/persistence/audit.ts');
    const { rows } = await owner.query(
      `SELECT id, outbox_id, actor, action, entity_type, entity_id, details,
              to_char(occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS occurred_at
         FROM audit_events ORDER BY id`,
    );
    let prev = GENESIS_HASH;
    // Hashes are unique: park them first, then write the recomputed chain.
    await owner.query(`UPDATE audit_events SET hash = 'tmp:' || id`);
    for (const r of rows) {
      const hash = auditEventHash(prev, { ...r, outbox_id: Number(r.outbox_id) });
      await owner.query('UPDATE audit_events SET prev_hash = $2, hash = $3 WHERE id = $1', [r.id, prev, hash]);
      prev = hash;
    }
    await owner.query('ALTER TABLE audit_events ENABLE TRIGGER audit_events_append_only');
    await owner.query('COMMIT');
  } finally {
    await owner.end();
  }
  assert.equal((await verifyAuditChain(ownerPool)).ok, true, 'the rewritten chain is self-consistent');
  const caught = await cli(['audit', 'verify', '--checkpoint', file], env);
  assert.equal(caught.code, 1, caught.out);
  assert.match(caught.out, new RegExp(`BROKEN at event ${checkpoint.sequence}: checkpoint mismatch`));
});

test('setup statements refuse an application role that is the owner or a member of it', async () => {
  const admin = new pg.Client({ connectionString: db.adminUrl });
  await admin.connect();
  const apply = async (names: { owner: string; app: string }) => {
    for (const sql of setupStatements(names, { createAppRole: false })) await admin.query(sql);
  };
  try {
    await admin.query('BEGIN');
    await assert.rejects(apply({ owner: db.owner, app: db.owner }), /must not be the owner role/);
    await admin.query('ROLLBACK');
    await admin.query('BEGIN');
    await admin.query(`GRANT ${pg.escapeIdentifier(db.owner)} TO ${pg.escapeIdentifier(db.app)}`);
    await assert.rejects(apply({ owner: db.owner, app: db.app }), /is a member of the owner role/);
    await admin.query('ROLLBACK');
  } finally {
    await admin.end();
  }
});
