/**
 * `ferry standing-orders ...`: standing orders (docs/policy.md, "Standing orders") through a running
 * Ferry's API.
 *
 *   ferry standing-orders list [--state S]     the orders
 *   ferry standing-orders show ID|NAME         one order, its runs (newest first) and its history
 *   ferry standing-orders propose FILE         propose an order (YAML or JSON)
 *   ferry standing-orders approve ID|NAME      approve (not your own); ACTIVE with the last approval it needs
 *   ferry standing-orders reject ID|NAME --reason TEXT
 *   ferry standing-orders pause|resume|revoke ID|NAME [--reason TEXT]
 *
 * The sweep that creates the runs is `standing_orders` (ferry sweeps run standing_orders runs it now).
 */
import { readFile } from 'node:fs/promises';
import { parse } from 'yaml';
import { CliError, UsageError, type CliCommand } from './command.ts';
import { printedJson, printList } from './format.ts';
import { API_USAGE, apiOptions, apiTarget, callApi } from './movements.ts';

function triggerText(t: any): string {
  const schedule = t.schedule ? `${t.schedule.cron}${t.schedule.time_zone ? ` (${t.schedule.time_zone})` : ''}` : null;
  if (t.kind === 'schedule') return `${t.amount} at ${schedule}`;
  const b = `${t.balance.chain}/${t.balance.wallet}/${t.balance.asset}`;
  const when = schedule ? `at ${schedule}` : 'on each crossing';
  return t.kind === 'ceiling' ? `sweep ${b} above ${t.ceiling}${t.target ? ` down to ${t.target}` : ''} ${when}` : `top up ${b} below ${t.floor} to ${t.target} ${when}`;
}

const orderLine = (o: any) =>
  `${o.name}  ${o.state}  ${o.template_key} ${o.asset} to ${o.destinations.join(',')}  max ${o.max_per_run}/run ${o.max_per_window}/${o.window_seconds}s  ` +
  `${triggerText(o.trigger)}  approvals ${o.approvals.length}/${o.required_approvals}  expires ${o.expires_at}`;

const list: CliCommand = {
  path: ['standing-orders', 'list'],
  summary: 'list standing orders (newest first)',
  usage: `[--state STATE] ${API_USAGE}`,
  options: { ...apiOptions, state: { type: 'string' } },
  async run(ctx) {
    const q = ctx.option('state') ? `?state=${encodeURIComponent(ctx.option('state')!.toUpperCase())}` : '';
    const r = await callApi(await apiTarget(ctx), 'GET', `/v3/standing-orders${q}`);
    printList(ctx, r.standing_orders, {
      empty: 'No standing orders (ferry standing-orders propose FILE).',
      columns: ['NAME', 'STATE', 'ASSET', 'TO', 'MAX/RUN', 'TRIGGER', 'APPROVALS'],
      row: (o: any) => [o.name, o.state, o.asset, o.destinations.join(','), o.max_per_run, triggerText(o.trigger), `${o.approvals.length}/${o.required_approvals}`],
    });
  },
};

const show: CliCommand = {
  path: ['standing-orders', 'show'],
  summary: 'show a standing order, its run history and its transitions',
  usage: `ID|NAME ${API_USAGE}`,
  positionals: { min: 1, max: 1, names: 'ID|NAME' },
  options: apiOptions,
  async run(ctx) {
    const r = await callApi(await apiTarget(ctx), 'GET', `/v3/standing-orders/${encodeURIComponent(ctx.positionals[0])}`);
    if (printedJson(ctx, r)) return;
    ctx.out(orderLine(r.standing_order));
    if (r.runs.length === 0) ctx.out('  no runs yet');
    for (const run of r.runs) {
      ctx.out(`  run ${run.created_at} ${run.slot_key}  ${run.amount ?? '-'}  ${run.outcome}${run.movement_id ? `  movement ${run.movement_id}` : ''}${run.error_code ? `  ${run.error_code}` : ''}`);
    }
    for (const t of r.history) ctx.out(`  #${t.seq} ${t.at} ${t.event} ${t.from || '-'} -> ${t.to} by ${t.actor}`);
  },
};

const propose: CliCommand = {
  path: ['standing-orders', 'propose'],
  summary: 'propose a standing order from a YAML or JSON file',
  usage: `FILE ${API_USAGE}`,
  positionals: { min: 1, max: 1, names: 'FILE' },
  options: apiOptions,
  async run(ctx) {
    const file = ctx.positionals[0];
    let body: unknown;
    try {
      const text = await readFile(file, 'utf8');
      body = /\.json$/i.test(file) ? JSON.parse(text) : parse(text);
    } catch (err) {
      throw new CliError(`cannot read ${file}: ${(err as Error).message}`);
    }
    const o = await callApi(await apiTarget(ctx), 'POST', '/v3/standing-orders', body);
    if (!printedJson(ctx, o)) ctx.out(`proposed: ${orderLine(o)}\nIt needs ${o.required_approvals} approval(s) by other principals: ferry standing-orders approve ${o.name}`);
  },
};

const decide = (verb: 'approve' | 'reject' | 'pause' | 'resume' | 'revoke', summary: string): CliCommand => {
  const reason = verb === 'reject' ? 'required' : verb === 'pause' || verb === 'revoke' ? 'optional' : 'none';
  return {
    path: ['standing-orders', verb],
    summary,
    usage: `ID|NAME${reason === 'required' ? ' --reason TEXT' : reason === 'optional' ? ' [--reason TEXT]' : ''} ${API_USAGE}`,
    positionals: { min: 1, max: 1, names: 'ID|NAME' },
    options: reason === 'none' ? apiOptions : { ...apiOptions, reason: { type: 'string' } },
    async run(ctx) {
      const text = reason === 'none' ? undefined : ctx.option('reason');
      if (reason === 'required' && !text?.trim()) throw new UsageError(`${verb} needs --reason TEXT`);
      const r = await callApi(await apiTarget(ctx), 'POST', `/v3/standing-orders/${encodeURIComponent(ctx.positionals[0])}/${verb}`, text ? { reason: text } : {});
      if (!printedJson(ctx, r)) ctx.out(orderLine(r));
    },
  };
};

export const standingOrderCommands: CliCommand[] = [
  list,
  show,
  propose,
  decide('approve', 'approve a proposed standing order (not your own)'),
  decide('reject', 'reject a proposed standing order'),
  decide('pause', 'pause an active standing order: no runs until resumed'),
  decide('resume', 'resume a paused standing order'),
  decide('revoke', 'revoke a standing order for good'),
];
