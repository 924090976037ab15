import { loadConfig } from '../config.ts';
import { FerryError } from '../errors.ts';
import { CliError, UsageError, type CliCommand } from './command.ts';
import { printedJson, printList } from './format.ts';
import { operatorName } from './operator.ts';

/**
 * The sweeps and pg-boss, loaded by the commands that use them: every lane's code comes with the
 * sweep table, and `ferry --help` or an API command should not wait for it.
 */
async function loadSweeps() {
  const [sweeps, database] = await Promise.all([import('../sweeps/sweeps.ts'), import('./database.ts')]);
  return { ...sweeps, withBoss: database.withBoss };
}

const run: CliCommand = {
  path: ['sweeps', 'run'],
  summary: 'run a sweep now (one run, never beside one in progress; audited)',
  usage: 'NAME [--by OPERATOR] [--json]',
  positionals: { min: 1, max: 1, names: 'NAME' },
  options: { by: { type: 'string' }, json: { type: 'boolean' } },
  async run(ctx) {
    const name = ctx.positionals[0];
    const { findSweep, requestSweepRun, sweepDefinitions, withBoss } = await loadSweeps();
    try {
      findSweep(name);
    } catch {
      throw new UsageError(`unknown sweep "${name}"; choose one of: ${sweepDefinitions.map((d) => d.name).join(', ')}`);
    }
    const actor = operatorName(ctx);
    const config = loadConfig(ctx.env);
    const queued = await withBoss(ctx, ({ pool }, boss) => requestSweepRun({ pool, boss, config }, name, actor)).catch((err) => {
      if (err instanceof FerryError) throw new CliError(err.message);
      throw err;
    });
    if (printedJson(ctx, queued)) return;
    ctx.out(
      queued.how === 'queued'
        ? `Sweep ${queued.sweep}: run queued as job ${queued.job_id}; a worker process starts it as soon as no other run of it is in progress.`
        : `Sweep ${queued.sweep}: its waiting run (job ${queued.job_id}) was brought forward to now.`,
    );
  },
};

const list: CliCommand = {
  path: ['sweeps', 'list'],
  summary: "every sweep: schedule, last run and its outcome, next due time (from pg-boss's job records)",
  usage: '[--json]',
  options: { json: { type: 'boolean' } },
  async run(ctx) {
    const config = loadConfig(ctx.env);
    const { sweepStatuses, withBoss } = await loadSweeps();
    const statuses = await withBoss(ctx, ({ pool }, boss) => sweepStatuses({ pool, boss, config }));
    printList(ctx, statuses, {
      columns: ['SWEEP', 'ENABLED', 'EVERY', 'SCHEDULE', 'LAST RUN', 'OUTCOME', 'MS', 'NEXT DUE'],
      row: (s) => [
        s.name,
        s.enabled ? 'yes' : 'no',
        `${s.interval_seconds}s`,
        s.schedule ? `${s.timing} (${s.schedule.cron})` : '-',
        s.running ? `running since ${s.running.started_at}` : (s.last_run?.finished_at ?? '-'),
        s.last_run ? `${s.last_run.outcome}${s.last_run.budget_exhausted ? ' (budget hit)' : ''}` : '-',
        s.last_run?.duration_ms == null ? '-' : String(s.last_run.duration_ms),
        s.next_due_at ?? '-',
      ],
    });
  },
};

export const sweepCommands: CliCommand[] = [list, run];
