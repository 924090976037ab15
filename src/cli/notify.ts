/**
 * `ferry notify channels list | show | create | update | disable | enable | delete`: the operator
 * channels notifications go to, a client of a running Ferry's API (/v3/operator-channels, admin
 * tokens only), so the checks and the audit events are the API's. A webhook channel's secret is
 * read from a file or standard input (--secret-file PATH|-), never from the command line, and is
 * never printed: Ferry does not give it back.
 */
import { CliError, UsageError, type CliCommand, type CliContext } from './command.ts';
import { printedJson, printList } from './format.ts';
import { API_USAGE, apiOptions, apiTarget, callApi, secretFromFile } from './movements.ts';

const BASE = '/v3/operator-channels';

const settingOptions = {
  'channel-url': { type: 'string' },
  'secret-file': { type: 'string' },
  'rate-limit-per-minute': { type: 'string' },
  'dedup-seconds': { type: 'string' },
  'max-attempts': { type: 'string' },
  'timeout-ms': { type: 'string' },
} as const;
const SETTINGS_USAGE = '[--rate-limit-per-minute N] [--dedup-seconds N] [--max-attempts N] [--timeout-ms N]';

function nameOf(ctx: CliContext): string {
  const n = ctx.positionals[0];
  if (!n || n.length > 100) throw new UsageError('NAME must name an operator channel');
  return encodeURIComponent(n);
}

async function secretFrom(ctx: CliContext): Promise<string | undefined> {
  const file = ctx.option('secret-file');
  if (file === undefined) return undefined;
  if (ctx.option('token') !== undefined) throw new UsageError('--token is refused');
  if (file === '-' && ctx.option('token-file') === '-') throw new UsageError('--secret-file - and --token-file - cannot both read standard input');
  return secretFromFile(ctx, 'secret-file', file, 'secret');
}

/** The numeric settings given, as the API's fields. */
function settingsFrom(ctx: CliContext): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [option, field] of [
    ['rate-limit-per-minute', 'rate_limit_per_minute'],
    ['dedup-seconds', 'dedup_seconds'],
    ['max-attempts', 'max_attempts'],
    ['timeout-ms', 'timeout_ms'],
  ] as const) {
    const v = ctx.option(option);
    if (v === undefined) continue;
    if (!/^\d{1,9}$/.test(v)) throw new UsageError(`--${option} must be a whole number`);
    out[field] = Number(v);
  }
  return out;
}

function describe(ctx: CliContext, c: any): void {
  ctx.out(`Operator channel ${c.name} (${c.kind}, ${c.source === 'config' ? 'from FERRY_NOTIFY_CHANNELS, read-only' : 'made through the API'})`);
  ctx.out(`  url             ${c.url}`);
  ctx.out(`  enabled         ${c.enabled ? 'yes' : 'no (sent nothing)'}`);
  ctx.out(`  rate limit      ${c.rate_limit_per_minute} per minute`);
  ctx.out(`  dedup window    ${c.dedup_seconds} s`);
  ctx.out(`  max attempts    ${c.max_attempts}, ${c.timeout_ms} ms each`);
  ctx.out(`  secret          ${c.has_secret ? `set${c.secret_set_at ? ` (${c.secret_set_at})` : ''}` : '-'}`);
  if (c.updated_by) ctx.out(`  last changed    ${c.updated_at} by ${c.updated_by}`);
}

const list: CliCommand = {
  path: ['notify', 'channels', 'list'],
  summary: 'list the operator channels, configured and made through the API (never their secrets)',
  usage: API_USAGE,
  options: apiOptions,
  async run(ctx) {
    const { channels } = await callApi(await apiTarget(ctx), 'GET', BASE);
    printList(ctx, channels, {
      empty: 'No operator channels. Add one with: ferry notify channels create NAME --kind slack --channel-url URL',
      columns: ['NAME', 'KIND', 'SOURCE', 'ENABLED', 'RATE/MIN', 'DEDUP S', 'URL'],
      row: (c: any) => [c.name, c.kind, c.source, c.enabled ? 'yes' : 'no', String(c.rate_limit_per_minute), String(c.dedup_seconds), c.url],
    });
  },
};

const show: CliCommand = {
  path: ['notify', 'channels', 'show'],
  summary: 'show one operator channel',
  usage: `NAME ${API_USAGE}`,
  positionals: { min: 1, max: 1, names: 'NAME' },
  options: apiOptions,
  async run(ctx) {
    const { channel } = await callApi(await apiTarget(ctx), 'GET', `${BASE}/${nameOf(ctx)}`);
    if (printedJson(ctx, channel)) return;
    describe(ctx, channel);
  },
};

const create: CliCommand = {
  path: ['notify', 'channels', 'create'],
  summary: 'add an operator channel: a signed webhook (--secret-file) or a Slack-style incoming webhook',
  // --channel-url, because --url (as for every API command) is where Ferry itself answers.
  usage: `NAME --kind webhook|slack --channel-url URL [--secret-file PATH|-] ${SETTINGS_USAGE} [--disabled] ${API_USAGE}`,
  positionals: { min: 1, max: 1, names: 'NAME' },
  options: { ...apiOptions, ...settingOptions, kind: { type: 'string' }, disabled: { type: 'boolean' } },
  async run(ctx) {
    const kind = ctx.option('kind');
    if (kind !== 'webhook' && kind !== 'slack') throw new UsageError('--kind webhook or --kind slack is required');
    const url = ctx.option('channel-url');
    if (!url) throw new UsageError('--channel-url is required (where the channel receives notifications)');
    const secret = await secretFrom(ctx);
    if (kind === 'webhook' && secret === undefined) throw new UsageError('a webhook channel needs --secret-file PATH|- (a whsec_ secret it signs with)');
    const body = { name: ctx.positionals[0], kind, url, ...(secret === undefined ? {} : { secret }), ...settingsFrom(ctx), ...(ctx.flag('disabled') ? { enabled: false } : {}) };
    const { channel } = await callApi(await apiTarget(ctx), 'POST', BASE, body);
    if (printedJson(ctx, channel)) return;
    ctx.out(`Added operator channel "${channel.name}" (${channel.kind}${channel.enabled ? '' : ', disabled'}); it is told of attention events from now on.`);
  },
};

const update: CliCommand = {
  path: ['notify', 'channels', 'update'],
  summary: 'change an operator channel (only the settings given)',
  usage: `NAME [--channel-url URL] [--secret-file PATH|-] ${SETTINGS_USAGE} ${API_USAGE}`,
  positionals: { min: 1, max: 1, names: 'NAME' },
  options: { ...apiOptions, ...settingOptions },
  async run(ctx) {
    const secret = await secretFrom(ctx);
    const url = ctx.option('channel-url');
    const body = { ...(url === undefined ? {} : { url }), ...(secret === undefined ? {} : { secret }), ...settingsFrom(ctx) };
    if (Object.keys(body).length === 0) throw new UsageError('nothing to change: give --channel-url, --secret-file or a setting');
    const { channel } = await callApi(await apiTarget(ctx), 'PATCH', `${BASE}/${nameOf(ctx)}`, body);
    if (printedJson(ctx, channel)) return;
    describe(ctx, channel);
  },
};

function toggle(verb: 'disable' | 'enable'): CliCommand {
  return {
    path: ['notify', 'channels', verb],
    summary:
      verb === 'disable'
        ? 'stop sending to an operator channel (what it had not been sent is dropped)'
        : 'send to an operator channel again, from the next attention event',
    usage: `NAME ${API_USAGE}`,
    positionals: { min: 1, max: 1, names: 'NAME' },
    options: apiOptions,
    async run(ctx) {
      const { channel } = await callApi(await apiTarget(ctx), 'PATCH', `${BASE}/${nameOf(ctx)}`, { enabled: verb === 'enable' });
      if (printedJson(ctx, channel)) return;
      ctx.out(`Operator channel "${channel.name}" is ${channel.enabled ? 'enabled' : 'disabled'}.`);
    },
  };
}

const remove: CliCommand = {
  path: ['notify', 'channels', 'delete'],
  summary: 'delete an operator channel made through the API (its past deliveries stay)',
  usage: `NAME ${API_USAGE}`,
  positionals: { min: 1, max: 1, names: 'NAME' },
  options: apiOptions,
  async run(ctx) {
    const { channel } = await callApi(await apiTarget(ctx), 'DELETE', `${BASE}/${nameOf(ctx)}`);
    if (printedJson(ctx, channel)) return;
    ctx.out(`Deleted operator channel "${channel.name}".`);
  },
};

export const notifyCommands: CliCommand[] = [list, show, create, update, toggle('disable'), toggle('enable'), remove];
