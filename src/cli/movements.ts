/**
 * `ferry movements create | approve | list | show | watch`: a client of a running Ferry's HTTP API
 * (never of its database), so these commands work from any machine that can reach the API, with the
 * same tokens, roles and audit trail as any other client.
 *
 * Where: --url, else FERRY_URL, else http://127.0.0.1:3000. Who: FERRY_TOKEN, or --token-file PATH
 * (`-`: standard input). A token on the command line (`--token`) is refused: every user of the
 * machine sees a process's arguments, and the shell keeps them in its history.
 */
import { readFile, stat } from 'node:fs/promises';
import type { ParseArgsOptionsConfig } from 'node:util';
import { isUuid } from '../ids.ts';
import { CliError, UsageError, type CliCommand, type CliContext } from './command.ts';
import { refuseInexactNumbers } from './json-number.ts';
import { printedJson, printList, table } from './format.ts';

export const DEFAULT_URL = 'http://127.0.0.1:3000';

// ---------------------------------------------------------------------------------------------
// The API client shared by the movement and template commands

export interface ApiTarget {
  url: string;
  token: string;
}

export const apiOptions: ParseArgsOptionsConfig = {
  url: { type: 'string' },
  // Accepted by the parser only to be refused with the ways that are safe (see apiTarget).
  token: { type: 'string' },
  'token-file': { type: 'string' },
  json: { type: 'boolean' },
};
export const API_USAGE = '[--url URL] [--token-file PATH|-] [--json]';

/**
 * Whether a command that works either way (on the database or over the API) was pointed at a Ferry:
 * --url given, or FERRY_URL set (an empty FERRY_URL is unset).
 */
export function overApi(ctx: CliContext): boolean {
  return ctx.option('url') !== undefined || Boolean(ctx.env.FERRY_URL);
}

const TOKEN_WAYS = 'FERRY_TOKEN, --token-file PATH (a file readable by you alone) or --token-file - (standard input)';

/** Where and as whom: the API's URL and the bearer token, read from the environment, a file or stdin. */
export async function apiTarget(ctx: CliContext): Promise<ApiTarget> {
  const url = (ctx.option('url') ?? ctx.env.FERRY_URL ?? DEFAULT_URL).replace(/\/+$/, '');
  if (!/^https?:\/\/[^/]+/i.test(url)) throw new UsageError(`--url must be an http(s) URL, got "${url}"`);
  if (ctx.option('token') !== undefined) {
    throw new UsageError(`--token is refused: a token on the command line is seen by every user of this machine (ps) and kept in the shell's history; give it in ${TOKEN_WAYS}`);
  }
  const file = ctx.option('token-file');
  let token: string | undefined;
  if (file !== undefined) token = await secretFromFile(ctx, 'token-file', file, 'token');
  else token = ctx.env.FERRY_TOKEN;
  if (!token) throw new UsageError(`an API token is required: ${TOKEN_WAYS} (create one with \`ferry tokens create\`)`);
  return { url, token };
}

/**
 * The first line of a secret file given to `--<option>` (a token, a channel secret), or of standard
 * input for `-`; warns when others may read the file. `what` names the secret in errors.
 */
export async function secretFromFile(ctx: CliContext, option: string, file: string, what: string): Promise<string> {
  let text: string;
  if (file === '-') {
    if (!ctx.readStdin) throw new UsageError(`--${option} -: no standard input to read`);
    text = await ctx.readStdin();
  } else {
    try {
      const mode = (await stat(file)).mode;
      if ((mode & 0o077) !== 0) ctx.err(`ferry: warning: ${file} is readable by others (mode ${(mode & 0o777).toString(8)}); chmod 600 it`);
      text = await readFile(file, 'utf8');
    } catch (err) {
      throw new CliError(`cannot read --${option} ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
  }
  const secret = text.split(/\r?\n/)[0].trim();
  if (!secret) throw new CliError(`--${option} ${file} holds no ${what}`);
  return secret;
}

function unreachable(target: ApiTarget, err: unknown): CliError {
  const e = err as { code?: string; cause?: { code?: string }; message?: string };
  const code = e.code ?? e.cause?.code ?? e.message ?? String(err);
  return new CliError(`cannot reach Ferry at ${target.url} (${code}); is it running? (ferry start)`);
}

/** Calls the API; a non-2xx answer becomes a CliError carrying Ferry's error code and message. */
export async function callApi<T = any>(
  target: ApiTarget,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<T> {
  let res;
  try {
    const { request } = await import('undici');
    res = await request(`${target.url}${path}`, {
      method: method as 'GET',
      headers: {
        authorization: `Bearer ${target.token}`,
        accept: 'application/json',
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (err) {
    throw unreachable(target, err);
  }
  const text = await res.body.text();
  let parsed: any = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    // not JSON: reported below with the status
  }
  if (res.statusCode >= 200 && res.statusCode < 300) return parsed as T;
  const error = parsed?.error;
  const hint = res.statusCode === 401 ? ' (check FERRY_TOKEN or --token-file)' : '';
  if (error?.code) throw new CliError(`${error.code}: ${error.message}${hint}`);
  throw new CliError(`${method} ${path} answered HTTP ${res.statusCode}${hint}`);
}

/** A JSON object given on the command line (--intent, --input). */
export function jsonObjectOption(ctx: CliContext, name: string): Record<string, unknown> | undefined {
  const raw = ctx.option(name);
  if (raw === undefined) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch (err) {
    throw new UsageError(`--${name} must be JSON: ${(err as Error).message}`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new UsageError(`--${name} must be a JSON object`);
  refuseInexactNumbers(name, raw);
  return value as Record<string, unknown>;
}



function movementId(ctx: CliContext): string {
  const id = ctx.positionals[0];
  if (!isUuid(id)) throw new UsageError(`ID must be a movement id (a UUID), got "${id}"`);
  return id;
}

// ---------------------------------------------------------------------------------------------
// Shapes read from the inspection API (the parts these commands use)

interface TransitionView {
  id: number;
  entity_type: 'request' | 'node';
  node_key: string | null;
  from_state: string | null;
  to_state: string;
  event_type: string;
  actor: string;
  /** Present from Ferry versions that name actors; older ones send only the id. */
  actor_name?: string;
  at: string;
}

interface MovementDetail {
  movement: {
    id: string;
    template_key: string;
    template_version: number;
    state: string;
    approval_status: string;
    approvals: { by: string; at: string }[];
    compiled_plan_hash: string;
    created_by: string;
    created_by_name?: string;
    created_at: string;
    expires_at: string | null;
  };
  nodes: Array<{
    node_key: string;
    state: string;
    attempt_no: number;
    executor_key: string | null;
    error_code: string | null;
    error_detail: string | null;
    provider_ref_id?: string | null;
    transaction?: { hash: string; chain: string | null; explorer_url: string | null } | null;
  }>;
  plan: { nodes: Array<{ key: string; layer: number }>; edges: Array<{ from: string; to: string }> };
  transitions: TransitionView[];
  /** Absent from Ferry versions before the effect view. */
  effect?: EffectView;
}

/** Request states after which a movement does not move again without a person acting on it. */
export const END_STATES = new Set(['COMPLETED', 'FAILED', 'MANUAL_INTERVENTION', 'REJECTED', 'EXPIRED', 'CANCELLED']);

const time = (iso: string) => iso.slice(11, 23);

function entity(t: TransitionView): string {
  return t.entity_type === 'request' ? 'movement' : t.node_key ?? '?';
}

function transitionLine(t: TransitionView): string {
  return `${time(t.at)}  ${entity(t)}  ${t.from_state ?? '(created)'} -> ${t.to_state}  ${t.event_type}  by ${t.actor_name ?? t.actor}`;
}

// ---------------------------------------------------------------------------------------------
// Commands

const create: CliCommand = {
  path: ['movements', 'create'],
  summary: 'create a movement from a template (it then waits for approval)',
  usage: `--template KEY --intent JSON [--input JSON] [--callback-url URL | --callback-destination NAME] [--template-version N] [--idempotency-key KEY] ${API_USAGE}`,
  options: {
    ...apiOptions,
    template: { type: 'string' },
    intent: { type: 'string' },
    input: { type: 'string' },
    'callback-url': { type: 'string' },
    'callback-destination': { type: 'string' },
    'template-version': { type: 'string' },
    'idempotency-key': { type: 'string' },
  },
  async run(ctx) {
    const template = ctx.option('template');
    if (!template) throw new UsageError('--template is required');
    const intent = jsonObjectOption(ctx, 'intent');
    if (!intent) throw new UsageError('--intent is required (a JSON object, e.g. \'{"asset":"USDC","amount":"100"}\')');
    const input = jsonObjectOption(ctx, 'input');
    const version = ctx.option('template-version');
    if (version !== undefined && !/^[1-9]\d{0,8}$/.test(version)) throw new UsageError('--template-version must be a positive integer');
    const target = await apiTarget(ctx);
    const body = {
      template_key: template,
      intent,
      ...(input ? { input_params: input } : {}),
      ...(ctx.option('callback-url') ? { callback_url: ctx.option('callback-url') } : {}),
      ...(ctx.option('callback-destination') ? { callback_destination: ctx.option('callback-destination') } : {}),
      ...(version ? { template_version: Number(version) } : {}),
    };
    const key = ctx.option('idempotency-key');
    const created = await callApi(target, 'POST', '/v3/movements', body, key ? { 'idempotency-key': key } : {});
    if (printedJson(ctx, created)) return;
    const m = created.movement;
    ctx.out(`Created movement ${m.id} (${m.state}) from ${m.template_key} v${m.template_version}.`);
    ctx.out(`Plan hash: ${m.compiled_plan_hash}`);
    ctx.out(`A second person reviews and approves it with: ferry movements approve ${m.id}`);
  },
};

const short = (v: unknown, max = 100) => {
  const text = JSON.stringify(v ?? {});
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
};

/** The effect as GET /v3/movements/{id} and /inspect/movements/{id} serve it (src/http/effect.ts). */
interface EffectView {
  compiled_plan_hash: string;
  policy: { rule_set_version: number | null; rule_id: string | null; action: string; destination_entry: string | null; approvers_from: string[] | null } | null;
  nodes: Array<{
    node_key: string;
    action: string;
    kind: string;
    executor_key: string | null;
    moves_funds: boolean;
    basis: string;
    unavailable: string | null;
    asset: string | null;
    asset_address: string | null;
    amount: string | null;
    amount_base_units: string | null;
    decimals: number | null;
    source: string | null;
    source_address: string | null;
    destination: string | null;
    destination_tag: string | null;
    chain: string | null;
    venue: string | null;
    destination_chain_id: number | null;
    destination_domain: number | null;
    contract: string | null;
    method: string | null;
    fee_cap: { max_fee_per_gas_wei: string | null; max_fee_per_gas_gwei: string | null; cctp_max_fee: string | null } | null;
  }>;
  warnings: string[];
}

/** The policy's decision in one line. */
function policyLine(p: EffectView['policy']): string {
  if (!p) return 'none recorded (a movement from before the treasury policy)';
  if (p.action === 'no_policy') return 'no rule set was live when it was created';
  const rule = `rule set v${p.rule_set_version ?? '?'}, rule ${p.rule_id ?? '(default)'}: ${p.action}`;
  return [rule, p.destination_entry ? `destination is book entry ${p.destination_entry}` : 'destination not in the address book', p.approvers_from ? `approvals count from ${p.approvers_from.join(', ')}` : '']
    .filter(Boolean)
    .join('; ');
}

/** The effect, node by node: what the approval lets each one do. */
export function effectLines(effect: EffectView | undefined): string[] {
  if (!effect) return ['  effect     (this Ferry serves no effect view; review the plan with --json)'];
  const lines = [`  policy     ${policyLine(effect.policy)}`];
  for (const n of effect.nodes) {
    lines.push(`  node ${n.node_key}  ${n.kind} (${n.action})${n.executor_key ? `  ${n.executor_key}` : ''}`);
    if (!n.moves_funds) continue;
    if (n.basis === 'unavailable') {
      lines.push(`    NO APPROVED EFFECT: ${n.unavailable} (its signer will refuse it)`);
      if (n.source) lines.push(`    from         ${n.source}`);
      continue;
    }
    const asset = n.asset ? `${n.asset}${n.asset_address && n.asset_address !== n.asset ? ` (${n.asset_address})` : ''}` : '-';
    const units = n.amount_base_units !== null ? `  (${n.amount_base_units} base units${n.decimals !== null ? `, ${n.decimals} decimals` : ''})` : '';
    lines.push(`    asset        ${asset}`);
    lines.push(`    amount       ${n.amount ?? '-'}${n.amount && n.asset ? ` ${n.asset}` : ''}${units}`);
    lines.push(`    from         ${n.source ?? '-'}${n.source_address ? ` (${n.source_address})` : ''}`);
    lines.push(`    to           ${n.destination ?? '-'}${n.destination_tag ? ` tag ${n.destination_tag}` : ''}`);
    if (n.chain || !n.venue) lines.push(`    chain        ${n.chain ?? '-'}`);
    if (n.venue) lines.push(`    venue        ${n.venue}`);
    if (n.destination_domain !== null) lines.push(`    mints on     ${n.destination_chain_id !== null ? `chain ${n.destination_chain_id}, ` : ''}CCTP domain ${n.destination_domain}`);
    if (n.contract) lines.push(`    calls        ${n.contract}${n.method ? ` ${n.method}` : ''}`);
    const cap = n.fee_cap;
    const caps = cap
      ? [cap.max_fee_per_gas_gwei !== null ? `${cap.max_fee_per_gas_gwei} gwei per gas (${cap.max_fee_per_gas_wei} wei)` : '', cap.cctp_max_fee !== null ? `CCTP max fee ${cap.cctp_max_fee}${n.asset ? ` ${n.asset}` : ''}` : '']
      : [];
    lines.push(`    fee cap      ${caps.filter(Boolean).join('; ') || (n.kind === 'cex_withdrawal' ? "none (the exchange's withdrawal fee applies)" : '-')}`);
  }
  for (const w of effect.warnings) lines.push(`  warning    ${w}`);
  return lines;
}

/**
 * What an approver approves, before they are asked: the effect of each node (asset, amount, source,
 * destination, chain or venue, fee cap), the policy's decision, and the plan hash the approval names.
 */
export function planLines(m: any, effect?: EffectView): string[] {
  return [
    `Movement ${m.id}  ${m.template_key} v${m.template_version}  ${m.state}`,
    `  intent     ${short(m.intent ?? {}, 200)}`,
    ...(m.input_params && Object.keys(m.input_params).length ? [`  input      ${short(m.input_params, 200)}`] : []),
    ...effectLines(effect),
    `  approvals  ${m.approvals?.length ?? 0} of ${m.approval_quorum ?? '?'}`,
    `  plan hash  ${m.compiled_plan_hash}`,
  ];
}

const approve: CliCommand = {
  path: ['movements', 'approve'],
  summary: 'approve a movement: shows what it does and its plan hash, asks on a terminal, and approves exactly that plan',
  usage: `ID [--plan-hash HASH | --yes] ${API_USAGE}`,
  positionals: { min: 1, max: 1, names: 'ID' },
  options: { ...apiOptions, 'plan-hash': { type: 'string' }, yes: { type: 'boolean', short: 'y' } },
  async run(ctx) {
    const id = movementId(ctx);
    const target = await apiTarget(ctx);
    const detail = await callApi(target, 'GET', `/v3/movements/${id}`);
    const current = detail.movement;
    const shown: string = current.compiled_plan_hash;
    const pinned = ctx.option('plan-hash');
    const json = ctx.flag('json');
    // With --json stdout carries the answer alone; what is approved goes to stderr.
    const print = json ? ctx.err : ctx.out;
    for (const line of planLines(current, detail.effect)) print(line);
    if (pinned !== undefined && pinned !== shown) {
      throw new CliError(`the plan changed: you reviewed ${pinned}, the movement's plan is now ${shown}; review it again (ferry movements show ${id})`);
    }
    if (pinned === undefined && !ctx.flag('yes')) {
      if (!ctx.interactive || !ctx.ask) {
        throw new UsageError('not on a terminal: pass --plan-hash HASH (the hash you reviewed) or --yes to approve the plan shown');
      }
      const answer = (await ctx.ask(`Approve plan ${shown}? Type yes to approve: `)).trim().toLowerCase();
      if (answer !== 'yes' && answer !== 'y') {
        ctx.err('ferry: not approved');
        return 1;
      }
    }
    // The hash of the plan shown: Ferry refuses the approval (STALE_PLAN_HASH) when the movement's
    // plan is another by the time it arrives.
    const decided = await callApi(target, 'POST', `/v3/movements/${id}/approve`, { compiled_plan_hash: shown });
    if (printedJson(ctx, decided)) return;
    const m = decided.movement;
    ctx.out(`Approved plan ${shown} of movement ${m.id} (${m.template_key} v${m.template_version}).`);
    ctx.out(
      m.state === 'PENDING_APPROVAL'
        ? `Approvals ${m.approvals.length} of ${m.approval_quorum}: it waits for more.`
        : `It is ${m.state}. Watch it with: ferry movements watch ${m.id}`,
    );
  },
};

/** `movements reject|cancel|retry`: one decision on a movement, by the token's principal. */
const decision = (verb: 'reject' | 'cancel' | 'retry', summary: string): CliCommand => ({
  path: ['movements', verb],
  summary,
  usage: `ID ${verb === 'retry' ? '--node KEY' : '[--reason TEXT]'} ${API_USAGE}`,
  positionals: { min: 1, max: 1, names: 'ID' },
  options: { ...apiOptions, ...(verb === 'retry' ? { node: { type: 'string' } } : { reason: { type: 'string' } }) },
  async run(ctx) {
    const id = movementId(ctx);
    let body: Record<string, string>;
    if (verb === 'retry') {
      const node = ctx.option('node');
      if (!node) throw new UsageError('--node KEY is required: the FAILED node to run again');
      body = { node_key: node };
    } else {
      const reason = ctx.option('reason');
      body = reason === undefined ? {} : { reason };
    }
    const r = await callApi(await apiTarget(ctx), 'POST', `/v3/movements/${id}/${verb}`, body);
    if (printedJson(ctx, r)) return;
    const m = r.movement;
    const done = { reject: 'Rejected', cancel: 'Cancelled', retry: `Node ${body.node_key} is READY again in` }[verb];
    ctx.out(`${done} movement ${m.id}: it is ${m.state}.`);
  },
});

const list: CliCommand = {
  path: ['movements', 'list'],
  summary: 'list recent movements, newest first',
  usage: `[--state STATE[,STATE...]] [--limit N] ${API_USAGE}`,
  options: { ...apiOptions, state: { type: 'string' }, limit: { type: 'string' } },
  async run(ctx) {
    const limit = ctx.option('limit') ?? '50';
    if (!/^\d{1,3}$/.test(limit) || Number(limit) < 1 || Number(limit) > 200) throw new UsageError('--limit must be from 1 to 200');
    const state = ctx.option('state');
    const query = new URLSearchParams({ limit, ...(state ? { state: state.toUpperCase() } : {}) });
    const { movements } = await callApi((await apiTarget(ctx)), 'GET', `/inspect/movements?${query}`);
    printList(ctx, movements, {
      empty: state ? `No movements in ${state.toUpperCase()}.` : 'No movements yet.',
      columns: ['ID', 'STATE', 'TEMPLATE', 'NODES DONE', 'CREATED', 'BY'],
      row: (m: any) => [
        m.id,
        m.state,
        `${m.template_key} v${m.template_version}`,
        `${(m.node_states.COMPLETED ?? 0) + (m.node_states.SKIPPED ?? 0)}/${m.nodes_total}`,
        m.created_at,
        m.created_by_name ?? m.created_by,
      ],
    });
  },
};

const show: CliCommand = {
  path: ['movements', 'show'],
  summary: 'show a movement: its nodes and its whole transition history',
  usage: `ID ${API_USAGE}`,
  positionals: { min: 1, max: 1, names: 'ID' },
  options: apiOptions,
  async run(ctx) {
    const id = movementId(ctx);
    const d: MovementDetail = await callApi((await apiTarget(ctx)), 'GET', `/inspect/movements/${id}`);
    if (printedJson(ctx, d)) return;
    const r = d.movement;
    ctx.out(`Movement ${r.id}`);
    ctx.out(`  template   ${r.template_key} v${r.template_version}`);
    ctx.out(`  state      ${r.state} (approval ${r.approval_status}, ${r.approvals.length} approval(s))`);
    ctx.out(`  plan hash  ${r.compiled_plan_hash}`);
    ctx.out(`  created    ${r.created_at} by ${r.created_by_name ?? r.created_by}`);
    ctx.out('');
    ctx.out('Effect (what the approval lets each node do):');
    for (const line of effectLines(d.effect)) ctx.out(line);
    ctx.out('');
    const layer = new Map(d.plan.nodes.map((n) => [n.key, n.layer]));
    const nodes = [...d.nodes].sort((a, b) => (layer.get(a.node_key) ?? 0) - (layer.get(b.node_key) ?? 0));
    ctx.out(
      table(
        ['NODE', 'STATE', 'ATTEMPT', 'EXECUTOR', 'AFTER', 'ERROR'],
        nodes.map((n) => [
          n.node_key,
          n.state,
          String(n.attempt_no),
          n.executor_key ?? '-',
          d.plan.edges.filter((e) => e.to === n.node_key).map((e) => e.from).join(',') || '-',
          n.error_code ? `${n.error_code}${n.error_detail ? `: ${n.error_detail}` : ''}` : '',
        ]),
      ),
    );
    const txs = nodes.filter((n) => n.transaction || n.provider_ref_id);
    if (txs.length > 0) {
      ctx.out('');
      ctx.out('Transactions:');
      for (const n of txs) {
        const tx = n.transaction;
        ctx.out(`  ${n.node_key}  ${tx ? `${tx.hash}${tx.chain ? ` on ${tx.chain}` : ''}${tx.explorer_url ? `  ${tx.explorer_url}` : ''}` : ''}${n.provider_ref_id && n.provider_ref_id !== tx?.hash ? `  provider ref ${n.provider_ref_id}` : ''}`);
      }
    }
    ctx.out('');
    ctx.out('History:');
    for (const t of d.transitions) ctx.out(`  ${transitionLine(t)}`);
  },
};

// ---------------------------------------------------------------------------------------------
// watch

interface SseMessage {
  event: string;
  id: string | null;
  data: string;
}

/** Splits a text/event-stream body into messages (comments, i.e. heartbeats, are dropped). */
export async function* sseMessages(chunks: AsyncIterable<Buffer | string>): AsyncGenerator<SseMessage> {
  let buffer = '';
  for await (const chunk of chunks) {
    buffer += typeof chunk === 'string' ? chunk : chunk.toString('utf8');
    let cut;
    while ((cut = buffer.search(/\r?\n\r?\n/)) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut).replace(/^\r?\n\r?\n/, '');
      const msg: SseMessage = { event: 'message', id: null, data: '' };
      const data: string[] = [];
      for (const line of block.split(/\r?\n/)) {
        if (line.startsWith(':')) continue;
        const i = line.indexOf(':');
        const field = i < 0 ? line : line.slice(0, i);
        const value = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
        if (field === 'event') msg.event = value;
        else if (field === 'id') msg.id = value;
        else if (field === 'data') data.push(value);
      }
      if (data.length > 0) yield { ...msg, data: data.join('\n') };
    }
  }
}

const MARK: Record<string, string> = {
  COMPLETED: 'done',
  SKIPPED: 'skip',
  CANCELLED: 'cncl',
  FAILED: 'FAIL',
  UNKNOWN: ' ?? ',
  BLOCKED: ' .. ',
};

/** The terminal view: one line per node, redrawn in place on a terminal. */
function progressView(d: MovementDetail, movementState: string, states: Map<string, string>, last: TransitionView | null): string[] {
  const layer = new Map(d.plan.nodes.map((n) => [n.key, n.layer]));
  const keys = d.plan.nodes.map((n) => n.key).sort((a, b) => (layer.get(a) ?? 0) - (layer.get(b) ?? 0));
  const width = Math.max(...keys.map((k) => k.length));
  const done = keys.filter((k) => ['COMPLETED', 'SKIPPED'].includes(states.get(k) ?? '')).length;
  return [
    `movement ${d.movement.id}  ${d.movement.template_key} v${d.movement.template_version}  ${movementState}  (${done}/${keys.length} nodes done)`,
    ...keys.map((k) => {
      const s = states.get(k) ?? '?';
      return `  [${MARK[s] ?? ' >> '}] ${k.padEnd(width)}  ${s}`;
    }),
    last ? `  last: ${transitionLine(last)}` : '',
  ];
}

const watch: CliCommand = {
  path: ['movements', 'watch'],
  summary: 'follow a movement live until it ends (exit 0 when it completes, 1 otherwise); --json: its history, then each new transition, as JSON lines',
  usage: `ID ${API_USAGE}`,
  positionals: { min: 1, max: 1, names: 'ID' },
  options: apiOptions,
  async run(ctx) {
    const id = movementId(ctx);
    const target = await apiTarget(ctx);
    const json = ctx.flag('json');
    const d: MovementDetail = await callApi(target, 'GET', `/inspect/movements/${id}`);
    const states = new Map(d.nodes.map((n) => [n.node_key, n.state]));
    let movementState = d.movement.state;
    let last: TransitionView | null = null;
    let lastId = d.transitions.length ? d.transitions[d.transitions.length - 1].id : 0;
    const tty = !json && process.stdout.isTTY === true && ctx.env.TERM !== 'dumb';
    let drawn = 0;
    const draw = () => {
      const lines = progressView(d, movementState, states, last);
      ctx.out((drawn ? `\x1b[${drawn}A\x1b[J` : '') + lines.join('\n'));
      drawn = lines.length;
    };
    const apply = (t: TransitionView) => {
      lastId = Math.max(lastId, t.id);
      if (t.entity_type === 'request') movementState = t.to_state;
      else if (t.node_key) states.set(t.node_key, t.to_state);
      last = t;
      if (json) ctx.out(JSON.stringify(t));
      else if (tty) draw();
      else ctx.out(transitionLine(t));
    };

    // JSON lines carry the whole history first, so a consumer never needs a second source.
    if (json) for (const t of d.transitions) ctx.out(JSON.stringify(t));
    else if (tty) draw();
    else ctx.out(progressView(d, movementState, states, null).filter(Boolean).join('\n'));

    let failures = 0;
    while (!END_STATES.has(movementState)) {
      let res;
      try {
        const { request } = await import('undici');
        res = await request(`${target.url}/inspect/movements/${id}/events`, {
          headers: { authorization: `Bearer ${target.token}`, accept: 'text/event-stream', 'last-event-id': String(lastId) },
        });
      } catch (err) {
        if (++failures > 5) throw unreachable(target, err);
        await new Promise((r) => setTimeout(r, 1000 * failures));
        continue;
      }
      if (res.statusCode !== 200) {
        const body = (await res.body.json().catch(() => null)) as any;
        throw new CliError(body?.error?.code ? `${body.error.code}: ${body.error.message}` : `the event stream answered HTTP ${res.statusCode}`);
      }
      const before = lastId;
      try {
        for await (const msg of sseMessages(res.body)) {
          if (msg.event !== 'transition') continue;
          const t = JSON.parse(msg.data) as TransitionView;
          if (t.id <= lastId) continue;
          apply(t);
          if (END_STATES.has(movementState)) break;
        }
      } catch {
        // The stream broke (Ferry restarting, network): resume from the last event seen.
      } finally {
        res.body.destroy();
      }
      if (END_STATES.has(movementState)) break;
      // A stream that keeps ending without news is a Ferry going away, not a movement moving.
      failures = lastId > before ? 0 : failures + 1;
      if (failures > 5) throw new CliError(`the event stream of ${target.url} keeps closing; giving up`);
      await new Promise((r) => setTimeout(r, 500 * failures));
    }
    if (!json) ctx.out(`movement ${id} ended ${movementState}`);
    return movementState === 'COMPLETED' ? 0 : 1;
  },
};

export const movementCommands: CliCommand[] = [
  create,
  approve,
  decision('reject', 'reject a pending movement (one rejection ends it)'),
  decision('cancel', 'cancel a movement; nodes with their provider are cancelled through their lanes'),
  decision('retry', 'run a FAILED node again where its lane allows it; the movement returns to EXECUTING'),
  list,
  show,
  watch,
];
