/**
 * `ferry reconcile`, `ferry resolutions list|propose|confirm` and `ferry workers`: clients of a
 * running Ferry's HTTP API, like the movement commands, so each decision is made by the principal
 * whose token the command carries (a resolution's confirmation needs a second one).
 */
import { isUuid } from '../ids.ts';
import { UsageError, type CliCommand, type CliContext } from './command.ts';
import { printedJson, printList, printTable } from './format.ts';
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
    const report = await callApi((await apiTarget(ctx)), 'GET', `/v3/reconciliation?state=${ctx.flag('all') ? 'all' : 'open'}`);
    if (printedJson(ctx, report)) return;
    ctx.out(`Auto-repair: ${report.auto_repair ? 'on' : 'off'} (FERRY_RECONCILIATION_AUTO_REPAIR); lookback ${report.lookback_seconds}s.`);
    printTable(ctx, report.drifts, {
      empty: ctx.flag('all') ? 'No drift recorded.' : 'No open drift.',
      columns: ['CLASS', 'MOVEMENT', 'NODE', 'ATTEMPT', 'STORED', 'PROVIDER', 'LAST SEEN', 'REPAIRED'],
      row: (d: any) => [
        d.drift_class,
        d.movement_id,
        d.node_key,
        String(d.attempt_no),
        d.stored_state,
        d.provider_state,
        d.last_seen_at,
        d.repaired_at ? `${d.repaired_at} by ${d.repaired_by}` : '-',
      ],
    });
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
    const { resolutions } = await callApi((await apiTarget(ctx)), 'GET', `/v3/movements/${id}/resolutions`);
    printList(ctx, resolutions, {
      empty: 'No resolutions.',
      columns: ['ID', 'NODE', 'RESOLUTION', 'STATUS', 'PROPOSED BY', 'CONFIRMED BY', 'REASON'],
      row: (r: any) => [r.id, r.node_key, r.resolution, r.status, r.proposed_by, r.confirmed_by ?? '-', r.reason],
    });
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
    const r = await callApi((await apiTarget(ctx)), 'POST', `/v3/movements/${id}/resolutions`, body);
    if (printedJson(ctx, r)) return;
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
    const r = await callApi((await apiTarget(ctx)), 'POST', `/v3/movements/${id}/resolutions/${rid}/confirm`);
    if (printedJson(ctx, r)) return;
    ctx.out(`Applied resolution ${r.resolution.id} (${r.resolution.resolution} node ${r.resolution.node_key}); the movement is ${r.movement.state}.`);
  },
};

const workers: CliCommand = {
  path: ['workers'],
  summary: 'the processes of one network class (groups expected and running, movement actors, leases), then every worker of the live ones: enabled, interval, status, runs, errors, last run, heartbeat, last error',
  usage: `${API_USAGE} [--all] [--network-class NAME|all]`,
  options: { ...apiOptions, all: { type: 'boolean' }, 'network-class': { type: 'string' } },
  async run(ctx) {
    const cls = ctx.option('network-class');
    const report = await callApi((await apiTarget(ctx)), 'GET', `/v3/workers${cls ? `?network_class=${encodeURIComponent(String(cls))}` : ''}`);
    if (printedJson(ctx, report)) return;
    // Stopped and gone processes are history: shown with --all only.
    const shown = new Set((report.processes as any[]).filter((p) => ctx.flag('all') || p.state === 'alive').map((p) => p.process_id));
    const hidden = (report.processes as any[]).length - shown.size;
    const group = (g: any) => `${g.running}/${g.expected}${g.not_running.length ? ` (${g.not_running.join(', ')} not running)` : ''}`;
    printTable(ctx, (report.processes as any[]).filter((p) => shown.has(p.process_id)), {
      empty: 'No process with workers has reported yet (is one running?).',
      columns: ['PROCESS', 'CLASS', 'STATE', 'CORE', 'SIDECAR', 'ACTORS', 'LEASES', 'HEARTBEAT'],
      row: (p: any) => [p.process_id, p.network_class, p.state, group(p.groups.core), group(p.groups.sidecar), p.live_actors === null ? '-' : String(p.live_actors), p.leases.expired ? `${p.leases.live} (+${p.leases.expired} expired)` : String(p.leases.live), p.last_beat_at],
    });
    if (hidden > 0) ctx.out(`(${hidden} stopped or gone process${hidden === 1 ? '' : 'es'} not shown; --all shows them)`);
    ctx.out('');
    printList(ctx, (report.workers as any[]).filter((w) => shown.has(w.process_id)), {
      empty: 'No worker to show.',
      columns: ['PROCESS', 'WORKER', 'KIND', 'ENABLED', 'EVERY', 'STATUS', 'RUNS', 'ERRORS', 'LAST RUN', 'HEARTBEAT', 'LAST ERROR'],
      row: (w: any) => [
        w.process_id,
        w.worker_name,
        w.kind,
        w.enabled ? 'yes' : 'no',
        w.interval_seconds === null ? '-' : `${w.interval_seconds}s`,
        w.restarts ? `${w.status} (${w.restarts} restarts)` : w.status,
        String(w.runs),
        String(w.consecutive_errors),
        w.last_run_at ?? '-',
        w.last_beat_at,
        w.last_error ?? '-',
      ],
    });
  },
};

export const operationsCommands: CliCommand[] = [reconcile, listResolutions, propose, confirm, workers];
