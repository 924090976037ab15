/**
 * Embedded mode sets the roles up by itself: the server's superuser migrates, the runtime connects as
 * ferry_app, which cannot rewrite the audit log. A data folder from before (pg-boss's schema owned by
 * the superuser) is brought over on the next start.
 */
import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import pg from 'pg';
import { promoteAuditBatch, verifyAuditChain, writeAudit } from '../src/persistence/audit.ts';
import { withTransaction } from '../src/persistence/db.ts';
import { startEmbeddedPostgres } from '../src/persistence/embedded.ts';
import { auditProtection, EMBEDDED_APP_ROLE, urlRole } from '../src/persistence/roles.ts';
import type { RunningFerry } from '../src/main.ts';
import { startFerryWithWorkers } from './helpers/ferry.ts';
import { freePort } from './helpers/net.ts';

const dataDir = mkdtempSync(join(tmpdir(), 'ferry-embedded-roles-'));
// As root, PostgreSQL runs as its own user, which must reach the folder.
chmodSync(dataDir, 0o755);
const port = await freePort();
let ferry: RunningFerry | undefined;
after(async () => {
  await ferry?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

const start = () => startFerryWithWorkers('', { FERRY_DATA_DIR: dataDir, FERRY_EMBEDDED_PG_PORT: String(port) });

async function checkProtected(running: RunningFerry): Promise<void> {
  assert.equal(running.database, 'embedded');
  assert.equal(urlRole(running.databaseUrl), EMBEDDED_APP_ROLE);
  assert.deepEqual(await auditProtection(running.pool), { protected: true, reasons: [] });
  await assert.rejects(running.pool.query('DELETE FROM audit_outbox'), { code: '42501' });
  await assert.rejects(running.pool.query('ALTER TABLE transitions DISABLE TRIGGER ALL'), { code: '42501' });
  await withTransaction(running.pool, (c) => writeAudit(c, { actor: 'test', action: 'embedded.check', entity_type: 'test' }));
  // The promoter sweep may have moved it already; either way it is on a chain that verifies.
  await promoteAuditBatch(running.pool);
  const { rows } = await running.pool.query(`SELECT count(*)::int AS n FROM audit_outbox`);
  assert.equal(rows[0].n, 0);
  assert.equal((await verifyAuditChain(running.pool)).ok, true);
}

test('embedded Ferry migrates as the superuser and runs as ferry_app', async () => {
  ferry = await start();
  await checkProtected(ferry);
  await ferry.stop();
  ferry = undefined;
});

test('a data folder whose pg-boss schema the superuser owns is brought over on the next start', async () => {
  // What a folder started by an earlier version looks like: everything the superuser's.
  const server = await startEmbeddedPostgres({ dataDir, port });
  const c = new pg.Client({ connectionString: server.url });
  await c.connect();
  try {
    await c.query(`REASSIGN OWNED BY ${EMBEDDED_APP_ROLE} TO ferry`);
    const { rows } = await c.query(`SELECT pg_get_userbyid(nspowner) AS owner FROM pg_namespace WHERE nspname = 'pgboss'`);
    assert.equal(rows[0].owner, 'ferry');
  } finally {
    await c.end();
    await server.stop();
  }
  ferry = await start();
  await checkProtected(ferry);
  const { rows } = await ferry.pool.query(
    `SELECT count(*)::int AS n FROM pg_class WHERE relnamespace = 'pgboss'::regnamespace AND relowner <> 'ferry_app'::regrole`,
  );
  assert.equal(rows[0].n, 0, "every pg-boss table is ferry_app's again");
});
