/**
 * Loaded into the benchmark's worker processes (node --import): counts every statement the
 * process sends to PostgreSQL (all pools: runtime, simulation lane, pg-boss, LISTEN) and writes
 * the running total to FERRY_BENCH_QUERY_FILE twice a second, so the benchmark can report
 * statements per movement without pg_stat_statements.
 */
import { writeFileSync } from 'node:fs';
import pg from 'pg';

const file = process.env.FERRY_BENCH_QUERY_FILE;
if (file) {
  let queries = 0;
  const original = pg.Client.prototype.query;
  pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
    queries++;
    return (original as (...a: unknown[]) => unknown).apply(this, args);
  } as typeof original;
  const flush = () => {
    try {
      writeFileSync(file, String(queries));
    } catch {
      // the benchmark may already have removed its scratch folder
    }
  };
  setInterval(flush, 500).unref();
  process.on('exit', flush);
}
