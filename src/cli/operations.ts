/**
 * `ferry reconcile`, `ferry resolutions list|propose|confirm` and `ferry workers`: clients of a
 * running Ferry's HTTP API, like the movement commands, so each decision is made by the principal
 * whose token the command carries (a resolution's confirmation needs a second one).
 */
import { isUuid } from '../ids.ts';
import { UsageError, type CliCommand, type CliContext } from './command.ts';
import { table } from './format.ts';
import { API_USAGE, apiOptions, apiTarget, callApi } from './movements.ts';

function uuidArg(ctx: CliContext, i: number, what: string): string {
  const v = ctx.positionals[i];
  if (!isUuid(v)) throw new UsageError(`${what} must be a UUID, got "${v}"`);
  return v;
}

const reconcile: CliCommand = {
  path: ['reconcile'],
  summary: "drift between stored node states and their providers' answers (the reconciliation sweep's findings)",
  usage: `[--all] ${API_USAGE}`,
  options: { ...apiOptions, all: { type: 'boolean' } },
  async run(ctx) {
    const report = await callApi(apiTarget(ctx), 'GET', `/v3/reconciliation?state=${ctx.flag('all') ? 'all' : 'open'}`);
    if (ctx.flag('json')) {
      ctx.out(JSON.stringify(report));
      return;
    }
    ctx.out(`Auto-repair: ${report.auto_repair ? 'on' : 'off'} (FERRY_RECONCILIATION_AUTO_REPAIR); lookback ${report.lookback_seconds}s.`);
    if (report.drifts.length === 0) {
      ctx.out(ctx.flag('all') ? 'No drift recorded.' : 'No open drift.');
      return;
    }
    ctx.out(
      table(
        ['CLASS', 'MOVEMENT', 'NODE', 'ATTEMPT', 'STORED', 'PROVIDER', 'LAST SEEN', 'REPAIRED'],
        report.drifts.map((d: any) => [
          d.drift_class,
          d.movement_id,
          d.node_key,
          String(d.attempt_no),
          d.stored_state,
          d.provider_state,
          d.last_seen_at,
          d.repaired_at ? `${d.repaired_at} by ${d.repaired_by}` : '-',
        ]),
      ),
    );
  },
};

const listResolutions: CliCommand = {
  path: ['resolutions', 'list'],
  summary: "a movement's proposed, applied and refused resolutions",
  usage: `MOVEMENT ${API_USAGE}`,
  positionals: { min: 1, max: 1, names: 'MOVEMENT' },
  options: apiOptions,
  async run(ctx) {
    const id = uuidArg(ctx, 0, 'MOVEMENT');
    const { resolutions } = await callApi(apiTarget(ctx), 'GET', `/v3/movements/${id}/resolutions`);
    if (ctx.flag('json')) {
      ctx.out(JSON.stringify(resolutions));
      return;
    }
    if (resolutions.length === 0) {
      ctx.out('No resolutions.');
      return;
    }
    ctx.out(
      table(
        ['ID', 'NODE', 'RESOLUTION', 'STATUS', 'PROPOSED BY', 'CONFIRMED BY', 'REASON'],
        resolutions.map((r: any) => [r.id, r.node_key, r.resolution, r.status, r.proposed_by, r.confirmed_by ?? '-', r.reason]),
      ),
    );
  },
};

const propose: CliCommand = {
  path: ['resolutions', 'propose'],
  summary: 'propose how to settle a node of a MANUAL_INTERVENTION movement (complete | fail | retry); another principal confirms',
  usage: `MOVEMENT --node KEY --resolution complete|fail|retry --reason TEXT [--provider-ref REF] ${API_USAGE}`,
  positionals: { min: 1, max: 1, names: 'MOVEMENT' },
  options: { ...apiOptions, node: { type: 'string' }, resolution: { type: 'string' }, reason: { type: 'string' }, 'provider-ref': { type: 'string' } },
  async run(ctx) {
    const id = uuidArg(ctx, 0, 'MOVEMENT');
    const node = ctx.option('node');
    const resolution = ctx.option('resolution');
    const reason = ctx.option('reason');
    if (!node || !resolution || !reason) throw new UsageError('--node, --resolution and --reason are required');
    if (!['complete', 'fail', 'retry'].includes(resolution)) throw new UsageError('--resolution must be complete, fail or retry');
    const ref = ctx.option('provider-ref');
    const body = { node_key: node, resolution, reason, ...(ref ? { provider_ref: ref } : {}) };
    const r = await callApi(apiTarget(ctx), 'POST', `/v3/movements/${id}/resolutions`, body);
    if (ctx.flag('json')) {
      ctx.out(JSON.stringify(r));
      return;
    }
    ctx.out(`Proposed resolution ${r.id}: ${r.resolution} node ${r.node_key} (attempt ${r.attempt_no}).`);
    ctx.out(`Another principal applies it with: ferry resolutions confirm ${id} ${r.id}`);
  },
};

const confirm: CliCommand = {
  path: ['resolutions', 'confirm'],
  summary: "confirm and apply another principal's proposed resolution",
  usage: `MOVEMENT RESOLUTION ${API_USAGE}`,
  positionals: { min: 2, max: 2, names: 'MOVEMENT RESOLUTION' },
  options: apiOptions,
  async run(ctx) {
    const id = uuidArg(ctx, 0, 'MOVEMENT');
    const rid = uuidArg(ctx, 1, 'RESOLUTION');
    const r = await callApi(apiTarget(ctx), 'POST', `/v3/movements/${id}/resolutions/${rid}/confirm`);
    if (ctx.flag('json')) {
      ctx.out(JSON.stringify(r));
      return;
    }
    ctx.out(`Applied resolution ${r.resolution.id} (${r.resolution.resolution} node ${r.resolution.node_key}); the movement is ${r.movement.state}.`);
  },
};

const workers: CliCommand = {
  path: ['workers'],
  summary: 'every worker of every process: enabled, interval, status, runs, consecutive errors, last run, heartbeat, last error',
  usage: API_USAGE,
  options: apiOptions,
  async run(ctx) {
    const report = await callApi(apiTarget(ctx), 'GET', '/v3/workers');
    if (ctx.flag('json')) {
      ctx.out(JSON.stringify(report.workers));
      return;
    }
    if (report.workers.length === 0) {
      ctx.out('No worker has reported yet (is a process with workers running?).');
      return;
    }
    ctx.out(
      table(
        ['PROCESS', 'WORKER', 'KIND', 'ENABLED', 'EVERY', 'STATUS', 'RUNS', 'ERRORS', 'LAST RUN', 'HEARTBEAT', 'LAST ERROR'],
        report.workers.map((w: any) => [
          w.process_id,
          w.worker_name,
          w.kind,
          w.enabled ? 'yes' : 'no',
          w.interval_seconds === null ? '-' : `${w.interval_seconds}s`,
          w.status,
          String(w.runs),
          String(w.consecutive_errors),
          w.last_run_at ?? '-',
          w.last_beat_at,
          w.last_error ?? '-',
        ]),
      ),
    );
  },
};

export const operationsCommands: CliCommand[] = [reconcile, listResolutions, propose, confirm, workers];
