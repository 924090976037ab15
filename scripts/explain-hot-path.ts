/**
 * One-off: EXPLAIN (ANALYZE, BUFFERS) of the worker's hot-path statements on a scratch database
 * with `--preload` finished movements of history and `--movements` live ones (approved).
 * Each statement runs once under EXPLAIN inside a savepoint (rolled back), then for real, so the
 * functions that read their own results keep working.
 *   node --import tsx scripts/explain-hot-path.ts --preload 100000 --movements 1000 [--keep]
 */
import { parseArgs } from 'node:util';
import { approveMovements, benchTemplate, createMovements } from './lib/load.ts';
import { preloadFinishedMovements } from './lib/bench-queries.ts';
import { createPool, type Queryable } from '../src/persistence/db.ts';
import { migrate } from '../src/persistence/migrate.ts';
import { claimAbandonedDispatches, claimDispatchBatch, claimObserveBatch, claimRecoveryBatch, expiredCandidates } from '../src/persistence/claims.ts';
import { reconciliationCandidates } from '../src/persistence/movements.ts';
import { evidenceCandidates } from '../src/persistence/reconciliation-drifts.ts';
import { listStrandedCallbacks } from '../src/persistence/callbacks.ts';
import { lockMovements } from '../src/persistence/group-commit.ts';
import { createEmptyDatabase, dropDatabase, withDatabase } from './lib/test-databases.ts';

const { values } = parseArgs({
  options: { preload: { type: 'string', default: '100000' }, movements: { type: 'string', default: '1000' }, keep: { type: 'boolean', default: false }, fresh: { type: 'boolean', default: false } },
});
const server = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const name = `ferry_explain_${process.pid}`;
const admin = withDatabase(server, 'postgres');

function explaining(db: Queryable, label: string): Queryable {
  return {
    async query(text: string, params?: unknown[]) {
      await db.query('SAVEPOINT ex');
      const t0 = performance.now();
      const plan = await db.query(`EXPLAIN (ANALYZE, BUFFERS) ${text}`, params as unknown[]);
      const ms = performance.now() - t0;
      await db.query('ROLLBACK TO SAVEPOINT ex');
      const lines = plan.rows.map((r: Record<string, string>) => r['QUERY PLAN']);
      console.log(`\n=== ${label} (${ms.toFixed(1)} ms round trip)\n${text.replace(/\s+/g, ' ').slice(0, 160)}\n${lines.join('\n')}`);
      return db.query(text, params as unknown[]);
    },
  } as unknown as Queryable;
}

async function main() {
  await createEmptyDatabase(admin, name);
  const url = withDatabase(server, name);
  await migrate(url);
  const pool = createPool(url, 8, 'ferry-explain');
  try {
    const ids = await createMovements(pool, benchTemplate(), Number(values.movements), 8);
    const preload = Number(values.preload);
    if (preload > 0) await preloadFinishedMovements(pool, ids[0], preload);
    await approveMovements(pool, ids, { callbacks: async () => {} }, 4, 25);
    // Without --fresh the statistics are those preloadFinishedMovements took before the approvals (as in the bench).
    if (values.fresh) await pool.query('ANALYZE');
    const states = await pool.query(`SELECT node_state, count(*)::int FROM request_nodes GROUP BY 1 ORDER BY 1`);
    console.log('node states', states.rows);
    // A mid-run mix: a third of the live movements with their first node observing.
    await pool.query(`UPDATE movement_requests SET request_state = 'EXECUTING' WHERE id = ANY($1::uuid[])`, [ids]);
    await pool.query(
      `UPDATE request_nodes SET node_state = CASE node_key WHEN 'withdraw' THEN 'COMPLETED' WHEN 'observe' THEN 'OBSERVING' ELSE node_state END
        WHERE request_id = ANY($1::uuid[]) AND node_key IN ('withdraw', 'observe')`,
      [ids.filter((_, i) => i % 3 === 0)],
    );
    const run = async (label: string, fn: (db: Queryable) => Promise<unknown>) => {
      const c = await pool.connect();
      try {
        await c.query('BEGIN');
        await fn(explaining(c, label));
        await c.query('ROLLBACK');
      } finally {
        c.release();
      }
    };
    await run('dispatch claim', (db) => claimDispatchBatch(db, 16));
    await run('observe claim', (db) => claimObserveBatch(db, 10));
    await run('recovery claim (sim arm)', (db) => claimRecoveryBatch(db, { lanes: ['sim'], limit: 10 }, [], [{ lane: 'sim', seconds: 30 }], 30));
    await run('recovery claim (other lanes)', (db) => claimRecoveryBatch(db, { lanes: null, limit: 10 }, ['sim'], [], 30));
    await run('abandoned dispatches', (db) => claimAbandonedDispatches(db, 30, 10));
    await run('expiry candidates', (db) => expiredCandidates(db, 20));
    await run('reconciliation candidates', (db) => reconciliationCandidates(db, 50));
    // Steady state: every movement reconciled, nothing changed since.
    await pool.query('UPDATE movement_requests SET reconciled_at = now() + interval \'1 hour\' WHERE reconciled_at IS NULL OR reconciled_at < updated_at');
    await pool.query('UPDATE request_nodes SET reconciled_at = now() + interval \'1 hour\' WHERE reconciled_at IS NULL OR reconciled_at < updated_at').catch(() => {});
    await run('reconciliation candidates (all reconciled)', (db) => reconciliationCandidates(db, 50));
    await run('evidence candidates', (db) => evidenceCandidates(db, { lookbackSeconds: 86400, recheckSeconds: 3600, limit: 20 }));
    await run('stranded callbacks', (db) => listStrandedCallbacks(db, { overdueSeconds: 60, limit: 500 }));
    await run('lock movements (16)', (db) => lockMovements(db, ids.slice(0, 16), []));
  } finally {
    await pool.end();
    if (!values.keep) await dropDatabase(admin, name);
    else console.log(`kept ${name}`);
  }
}
main().catch((e) => {
  console.error(e);
  process.exit(1);
});
