/**
 * A velocity limit's approval-time sum reads the movements approved inside its window through the
 * per-asset index on the approval time (migration 0430), not every movement of the asset.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Queryable } from '../src/persistence/db.ts';
import { velocitySums, windowAssets } from '../src/persistence/policy.ts';
import { scratchDatabase } from './helpers/db.ts';

/** The plan PostgreSQL picks for a persistence function's statement, with sequential scans priced out. */
async function planOf(pool: import('pg').Pool, run: (db: Queryable) => Promise<unknown>): Promise<string> {
  const client = await pool.connect();
  try {
    await client.query('SET enable_seqscan = off');
    let plan = '';
    const explaining = {
      query: async (text: string, values?: unknown[]) => {
        const { rows } = await client.query(`EXPLAIN (FORMAT TEXT) ${text}`, values);
        plan += rows.map((r) => r['QUERY PLAN']).join('\n') + '\n';
        return { rows: [], rowCount: 0 };
      },
    } as unknown as Queryable;
    await run(explaining);
    return plan;
  } finally {
    client.release();
  }
}

test('the approval-time window sum and the window assets read through the approval-time index', async (t) => {
  const db = await scratchDatabase(t);
  const since = new Date(Date.now() - 3600_000);
  const sums = await planOf(db.pool, (q) => velocitySums(q, { assets: ['USDC'], destination: null, since, except: null }));
  assert.match(sums, /movement_requests_policy_window/, sums);
  const assets = await planOf(db.pool, (q) => windowAssets(q, since, ['USDC']));
  assert.match(assets, /movement_requests_policy_window/, assets);
});

test('the approval time is the last approval, whatever the session time zone', async (t) => {
  const db = await scratchDatabase(t);
  const approvals = JSON.stringify([{ at: '2026-12-04T10:00:00.000Z' }, { at: '2026-12-04T11:30:00.000Z' }]);
  for (const zone of ['UTC', 'Pacific/Kiritimati', 'America/Adak']) {
    const client = await db.pool.connect();
    try {
      await client.query(`SET TIME ZONE '${zone}'`);
      const { rows } = await client.query(`SELECT ferry_last_approval_at($1::jsonb) AS at`, [approvals]);
      assert.equal((rows[0].at as Date).toISOString(), '2026-12-04T11:30:00.000Z', zone);
    } finally {
      client.release();
    }
  }
});
