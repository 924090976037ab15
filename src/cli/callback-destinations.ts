/**
 * `ferry callbacks destinations create | list | show | rotate-secret | disable`: a client of a
 * running Ferry's HTTP API (like the movement commands), so the permission check and the audit
 * event are the API's. A secret is printed once, by create and rotate-secret.
 */
import { UsageError, type CliCommand, type CliContext } from './command.ts';
import { printedJson, printList } from './format.ts';
import { API_USAGE, apiOptions, apiTarget, callApi } from './movements.ts';

const BASE = '/v3/callback-destinations';

function ref(ctx: CliContext): string {
  const r = ctx.positionals[0];
  if (!r || r.length > 100) throw new UsageError('NAME|ID must name a callback destination');
  return encodeURIComponent(r);
}

function printSecret(ctx: CliContext, name: string, secret: string, note: string): void {
  ctx.out('');
  ctx.out(`  ${secret}`);
  ctx.out('');
  ctx.out(`Give it to the receiver of "${name}" now: Ferry cannot show it again. ${note}`);
}

const create: CliCommand = {
  path: ['callbacks', 'destinations', 'create'],
  summary: 'register a callback destination (its signing secret is printed once)',
  // --callback-url, because --url (as for every API command) is where Ferry itself answers.
  usage: `--name NAME --callback-url URL [--node-events] ${API_USAGE}`,
  options: { ...apiOptions, name: { type: 'string' }, 'callback-url': { type: 'string' }, 'node-events': { type: 'boolean' } },
  async run(ctx) {
    const name = ctx.option('name');
    const url = ctx.option('callback-url');
    if (!name) throw new UsageError('--name is required');
    if (!url) throw new UsageError('--callback-url is required (where the destination receives its callbacks)');
    const made = await callApi((await apiTarget(ctx)), 'POST', BASE, { name, url, ...(ctx.flag('node-events') ? { node_events: true } : {}) });
    if (printedJson(ctx, made)) return;
    ctx.out(`Registered callback destination "${made.destination.name}" (id ${made.destination.id}) -> ${made.destination.url}. Signing secret:`);
    printSecret(ctx, made.destination.name, made.secret, `Movements name it with callback_destination: "${made.destination.name}".`);
  },
};

const list: CliCommand = {
  path: ['callbacks', 'destinations', 'list'],
  summary: 'list callback destinations (never their secrets)',
  usage: API_USAGE,
  options: apiOptions,
  async run(ctx) {
    const { destinations } = await callApi((await apiTarget(ctx)), 'GET', BASE);
    printList(ctx, destinations, {
      empty: 'No callback destinations. Register one with: ferry callbacks destinations create --name NAME --callback-url URL',
      columns: ['ID', 'NAME', 'STATUS', 'URL', 'SECRET SINCE', 'OVERLAP UNTIL'],
      row: (d: any) => [d.id, d.name, d.status, d.url, d.secret_created_at ?? '-', d.previous_secrets_expire_at ?? '-'],
    });
  },
};

const show: CliCommand = {
  path: ['callbacks', 'destinations', 'show'],
  summary: 'show one callback destination by name or id',
  usage: `NAME|ID ${API_USAGE}`,
  positionals: { min: 1, max: 1, names: 'NAME|ID' },
  options: apiOptions,
  async run(ctx) {
    const { destination: d } = await callApi((await apiTarget(ctx)), 'GET', `${BASE}/${ref(ctx)}`);
    if (printedJson(ctx, d)) return;
    ctx.out(`Callback destination ${d.name} (${d.id})`);
    ctx.out(`  url            ${d.url}`);
    ctx.out(`  status         ${d.status}${d.disabled_at ? ` since ${d.disabled_at} by ${d.disabled_by}` : ''}`);
    ctx.out(`  node events    ${d.node_events ? 'yes (a callback on every node state change)' : 'no'}`);
    ctx.out(`  secret since   ${d.secret_created_at ?? '-'}`);
    ctx.out(`  overlap until  ${d.previous_secrets_expire_at ?? '- (only the current secret signs)'}`);
  },
};

const rotate: CliCommand = {
  path: ['callbacks', 'destinations', 'rotate-secret'],
  summary: 'make a new signing secret; the old one keeps signing during the overlap (default one day)',
  usage: `NAME|ID [--overlap-seconds N] ${API_USAGE}`,
  positionals: { min: 1, max: 1, names: 'NAME|ID' },
  options: { ...apiOptions, 'overlap-seconds': { type: 'string' } },
  async run(ctx) {
    const overlap = ctx.option('overlap-seconds');
    if (overlap !== undefined && !/^\d{1,7}$/.test(overlap)) throw new UsageError('--overlap-seconds must be a whole number of seconds');
    const rotated = await callApi((await apiTarget(ctx)), 'POST', `${BASE}/${ref(ctx)}/rotate-secret`, overlap === undefined ? {} : { overlap_seconds: Number(overlap) });
    if (printedJson(ctx, rotated)) return;
    const d = rotated.destination;
    ctx.out(`New signing secret for "${d.name}":`);
    printSecret(
      ctx,
      d.name,
      rotated.secret,
      d.previous_secrets_expire_at
        ? `Until ${d.previous_secrets_expire_at} deliveries are signed with both the old and the new secret.`
        : 'The old secret no longer signs.',
    );
  },
};

const disable: CliCommand = {
  path: ['callbacks', 'destinations', 'disable'],
  summary: 'stop delivering to a callback destination (its callbacks dead-letter unsent)',
  usage: `NAME|ID ${API_USAGE}`,
  positionals: { min: 1, max: 1, names: 'NAME|ID' },
  options: apiOptions,
  async run(ctx) {
    const { destination: d } = await callApi((await apiTarget(ctx)), 'POST', `${BASE}/${ref(ctx)}/disable`, {});
    if (printedJson(ctx, d)) return;
    ctx.out(`Callback destination "${d.name}" is disabled (since ${d.disabled_at}).`);
  },
};

export const callbackDestinationCommands: CliCommand[] = [create, list, show, rotate, disable];
