/**
 * What operators see in /v3 about money and movements that need them, from the command line:
 * `ferry attention list` (attention events and their notifications), `ferry attention
 * waiting-too-long` (capital_transfer_followup's list), `ferry cex-transfers list` (exchange
 * transfers no movement made, recorded by cex_transfer_ingest) and `ferry registry-drift list`
 * (on-chain facts of the lanes' configuration that the chain contradicts, recorded by verify_drift).
 * Clients of a running Ferry's API, read-only (permission read).
 */
import { UsageError, type CliCommand, type CliContext } from './command.ts';
import { printList } from './format.ts';
import { API_USAGE, apiOptions, apiTarget, callApi } from './movements.ts';

function limitOf(ctx: CliContext, max: number): string | undefined {
  const l = ctx.option('limit');
  if (l === undefined) return undefined;
  if (!/^\d{1,4}$/.test(l) || Number(l) < 1 || Number(l) > max) throw new UsageError(`--limit must be a whole number from 1 to ${max}`);
  return l;
}

function query(params: Record<string, string | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) q.set(k, v);
  const s = q.toString();
  return s ? `?${s}` : '';
}

const attentionList: CliCommand = {
  path: ['attention', 'list'],
  summary: 'recent attention events, newest first, with how each operator channel was told',
  usage: `[--kind KIND] [--limit N] ${API_USAGE}`,
  options: { ...apiOptions, kind: { type: 'string' }, limit: { type: 'string' } },
  async run(ctx) {
    const kind = ctx.option('kind');
    if (kind !== undefined && !/^[a-z_]{1,40}$/.test(kind)) throw new UsageError('--kind must be an attention kind such as manual_intervention');
    const { events } = await callApi(await apiTarget(ctx), 'GET', `/v3/attention${query({ kind, limit: limitOf(ctx, 500) })}`);
    printList(ctx, events, {
      empty: 'No attention events.',
      columns: ['ID', 'KIND', 'AT', 'MOVEMENT', 'NOTIFIED', 'SUMMARY'],
      row: (e: any) => [
        e.id,
        e.kind,
        e.created_at,
        e.movement_id ?? '-',
        e.deliveries.length === 0 ? '-' : e.deliveries.map((d: any) => `${d.channel}:${d.status}`).join(','),
        e.summary,
      ],
    });
  },
};

const waitingTooLong: CliCommand = {
  path: ['attention', 'waiting-too-long'],
  summary: 'movements waiting past their template age (capital_transfer_followup), longest wait first',
  usage: `[--limit N] ${API_USAGE}`,
  options: { ...apiOptions, limit: { type: 'string' } },
  async run(ctx) {
    const { movements } = await callApi(await apiTarget(ctx), 'GET', `/v3/attention/waiting-too-long${query({ limit: limitOf(ctx, 500) })}`);
    printList(ctx, movements, {
      empty: 'No movement is waiting too long.',
      columns: ['MOVEMENT', 'TEMPLATE', 'STATE', 'REASON', 'NODE', 'WAITING SINCE', 'AGE S'],
      row: (w: any) => [w.movement_id, w.template_key, w.request_state, w.reason, w.node_key ?? '-', w.waiting_since, String(w.age_seconds)],
    });
  },
};

const cexTransfers: CliCommand = {
  path: ['cex-transfers', 'list'],
  summary: 'deposits and withdrawals on exchange accounts that no movement made (cex_transfer_ingest), newest first',
  usage: `[--venue VENUE] [--limit N] ${API_USAGE}`,
  options: { ...apiOptions, venue: { type: 'string' }, limit: { type: 'string' } },
  async run(ctx) {
    const venue = ctx.option('venue');
    if (venue !== undefined && (venue.length === 0 || venue.length > 64)) throw new UsageError('--venue must name a venue');
    const { transfers } = await callApi(await apiTarget(ctx), 'GET', `/v3/cex-transfers${query({ venue, limit: limitOf(ctx, 500) })}`);
    printList(ctx, transfers, {
      empty: venue ? `No transfer on ${venue} that no movement made.` : 'No exchange transfer that no movement made.',
      columns: ['VENUE', 'DIRECTION', 'ASSET', 'AMOUNT', 'NETWORK', 'TX', 'OCCURRED', 'STATUS'],
      row: (t: any) => [t.venue, t.direction, t.asset, t.amount, t.network ?? '-', t.tx_id ?? '-', t.occurred_at, t.provider_status ?? '-'],
    });
  },
};

const registryDrift: CliCommand = {
  path: ['registry-drift', 'list'],
  summary: "on-chain facts of the lanes' configuration that the chain contradicts (verify_drift), open first; then the facts left unverified",
  usage: `[--lane LANE] [--state open|resolved|all] [--limit N] ${API_USAGE}`,
  options: { ...apiOptions, lane: { type: 'string' }, state: { type: 'string' }, limit: { type: 'string' } },
  async run(ctx) {
    const lane = ctx.option('lane');
    if (lane !== undefined && !/^[a-z][a-z0-9_]{0,39}$/.test(lane)) throw new UsageError('--lane must name a lane such as evm or cctp');
    const state = ctx.option('state');
    if (state !== undefined && !['open', 'resolved', 'all'].includes(state)) throw new UsageError('--state must be open, resolved or all');
    const answer = await callApi(await apiTarget(ctx), 'GET', `/v3/registry-drift${query({ lane, state, limit: limitOf(ctx, 500) })}`);
    printList(ctx, answer.drifts, {
      empty: state === 'resolved' ? 'No resolved registry drift.' : state === 'all' ? 'No registry drift.' : 'No open registry drift.',
      columns: ['ID', 'LANE', 'CHAIN', 'SUBJECT', 'PROPERTY', 'EXPECTED', 'OBSERVED', 'FIRST SEEN', 'LAST SEEN', 'RESOLVED'],
      row: (d: any) => [String(d.id), d.lane, String(d.chain_id), d.subject, d.property, d.expected, d.observed, d.first_seen, d.last_seen, d.resolved_at ? `${d.resolved_at} (${d.resolution})` : '-'],
      json: answer,
    });
    if (!ctx.flag('json') && answer.unverified.length > 0) {
      ctx.out(`\nUnverified (the chain gave no usable answer at the last check): ${answer.unverified.length}`);
      for (const u of answer.unverified) ctx.out(`  ${u.lane} chain ${u.chain_id} ${u.subject} ${u.property}: ${u.error_code} at ${u.checked_at}`);
    }
  },
};

export const attentionCommands: CliCommand[] = [attentionList, waitingTooLong, cexTransfers, registryDrift];
