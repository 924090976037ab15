/**
 * The hot statements (the lease, the group write, the simulated provider's ledger) are prepared
 * once per connection on a pool straight to PostgreSQL, and sent unnamed on a pool through a
 * transaction pooler, where the next statement may land on a server connection that never saw
 * the statement prepared.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createPool, named } from '../src/persistence/db.ts';
import { acquireLeases } from '../src/persistence/leases.ts';
import { testDatabase } from './helpers/db.ts';
import { ferryForFile } from './helpers/ferry.ts';

async function preparedOn(url: string, namedStatements: boolean): Promise<string[]> {
  const pool = createPool(url, 1, 'ferry-test-named', { namedStatements });
  try {
    // One client, so the lease and the look at pg_prepared_statements share a session.
    const client = await pool.connect();
    try {
      assert.deepEqual(await acquireLeases(client, 'test:named', 15, 1), []);
      assert.deepEqual(await acquireLeases(client, 'test:named', 15, 1), [], 'a second call runs the prepared statement');
      const { rows } = await client.query<{ name: string }>('SELECT name FROM pg_prepared_statements ORDER BY name');
      return rows.map((r) => r.name);
    } finally {
      client.release();
    }
  } finally {
    await pool.end();
  }
}

test('a pool straight to PostgreSQL prepares the lease statement once; a pool without named statements prepares nothing', async () => {
  const db = await testDatabase();
  assert.deepEqual(await preparedOn(db.url, true), ['ferry_acquire_leases']);
  assert.deepEqual(await preparedOn(db.url, false), []);
});

test("behind a pooler (a separate direct URL), Ferry's pools send their statements unnamed", async () => {
  const db = await testDatabase();
  // The same server under another spelling stands in for PgBouncer: what counts is that the URLs differ.
  const direct = db.url.includes('?') ? `${db.url}&application_name=ferry-direct` : `${db.url}?application_name=ferry-direct`;
  const { ferry } = await ferryForFile({ FERRY_DATABASE_DIRECT_URL: direct }, { runtime: 'none' });
  assert.deepEqual(named(ferry.pool, 'x', 'SELECT 1'), { text: 'SELECT 1' });
  assert.deepEqual(named(ferry.workerPool, 'x', 'SELECT 1'), { text: 'SELECT 1' });
  const client = await ferry.pool.connect();
  try {
    assert.deepEqual(named(client, 'x', 'SELECT 1'), { text: 'SELECT 1' });
  } finally {
    client.release();
  }
});

test("without a pooler, Ferry's pools and their clients name their hot statements", async () => {
  const { ferry } = await ferryForFile({}, { runtime: 'none' });
  assert.deepEqual(named(ferry.pool, 'x', 'SELECT 1'), { name: 'x', text: 'SELECT 1' });
  const client = await ferry.workerPool.connect();
  try {
    assert.deepEqual(named(client, 'x', 'SELECT 1'), { name: 'x', text: 'SELECT 1' });
  } finally {
    client.release();
  }
});
