/**
 * Loaded into the benchmark's worker processes (node --import): counts every statement the
 * process sends to PostgreSQL (all pools: runtime, simulation lane, pg-boss, LISTEN) and writes
 * the running total to FERRY_BENCH_QUERY_FILE twice a second, so the benchmark can report
 * statements per movement without pg_stat_statements.
 *
 * It also keeps the last TRACE_SIZE statements (start time and duration in milliseconds, pool's
 * application name, the first words of the text) in memory. On SIGUSR2 it writes them to `<FERRY_BENCH_QUERY_FILE>.trace`, one per
 * line, so the benchmark can count the statements on one movement's critical path.
 */
import { writeFileSync } from 'node:fs';
import pg from 'pg';

const TRACE_SIZE = 4000;
const file = process.env.FERRY_BENCH_QUERY_FILE;
if (file) {
  let queries = 0;
  const trace: string[] = [];
  const original = pg.Client.prototype.query;
  pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
    queries++;
    const first = args[0];
    const text = typeof first === 'string' ? first : ((first as { text?: string; name?: string } | undefined)?.text ?? (first as { name?: string } | undefined)?.name ?? '');
    const app = (this as unknown as { connectionParameters?: { application_name?: string } }).connectionParameters?.application_name ?? '';
    const start = performance.timeOrigin + performance.now();
    const line = `${start.toFixed(1)}\t${app}\t${text.replace(/\s+/g, ' ').trim().slice(0, 60)}`;
    const done = () => {
      trace.push(`${line}\t${(performance.timeOrigin + performance.now() - start).toFixed(1)}`);
      if (trace.length > TRACE_SIZE) trace.splice(0, trace.length - TRACE_SIZE);
    };
    const last = args.length - 1;
    if (typeof args[last] === 'function') {
      const callback = args[last] as (...a: unknown[]) => unknown;
      args[last] = (...a: unknown[]) => {
        done();
        return callback(...a);
      };
    }
    const result = (original as (...a: unknown[]) => unknown).apply(this, args);
    if (typeof args[last] !== 'function' && result && typeof (result as Promise<unknown>).then === 'function') (result as Promise<unknown>).then(done, done);
    return result;
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
  process.on('SIGUSR2', () => {
    try {
      writeFileSync(`${file}.trace`, trace.join('\n'));
    } catch {
      // as above
    }
  });
}
